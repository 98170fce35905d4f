/*
 * hash.h — an intrusive chained hash table that grows and shrinks.
 *
 * Contract: elements embed a HashNode; the table never allocates per
 * element, so hash_insert() cannot fail (if the bucket array cannot grow,
 * chains just get longer). The caller gives each element's 64-bit hash
 * (node_hash, used when resizing) and compares keys itself through
 * hash_find's eq callback. The bucket array doubles when the average chain
 * passes `load` elements (1 unless hash_set_load() says otherwise) and
 * halves below a quarter of that, so memory follows the live count.
 */
#ifndef TUBED_HASH_H
#define TUBED_HASH_H

#include <stddef.h>
#include <stdint.h>

typedef struct HashNode HashNode;
struct HashNode {
    HashNode *next;
};

typedef uint64_t (*HashFn)(const HashNode *n);
typedef int (*HashEq)(const HashNode *n, const void *key);

typedef struct Hash {
    HashNode **buckets;
    size_t nbuckets; /* a power of two, at least 16 */
    size_t len;
    size_t load;     /* average chain length that makes the array grow */
    HashFn node_hash;
    int shrink_held; /* hash_hold_shrink(): removals do not shrink it */
} Hash;

/* Allocates the first bucket array; -1 if that fails (startup only). */
int hash_init(Hash *h, HashFn node_hash);
void hash_free(Hash *h);
/* Trade lookup steps for memory: a table of millions of small elements
 * (jobs) saves a pointer's worth per element at load 2. load >= 1. */
void hash_set_load(Hash *h, size_t load);
/* Grow the bucket array now for n elements, so filling the table with a
 * known number of them rehashes once, while it is small, instead of at
 * every doubling. If it cannot grow, inserts still work. */
void hash_reserve(Hash *h, size_t n);
/* Hint that the bucket of hash value hv is about to be used, so a batch
 * of inserts can overlap their cache misses. */
static inline void hash_prefetch(const Hash *h, uint64_t hv)
{
    __builtin_prefetch(&h->buckets[hv & (h->nbuckets - 1)], 1);
}
void hash_insert(Hash *h, HashNode *n);
HashNode *hash_find(const Hash *h, uint64_t hv, HashEq eq, const void *key);
/* Unlink n; returns 0 if it was found, -1 if it is not in the table. */
int hash_remove(Hash *h, HashNode *n);
/* While held, removals never shrink the array: removing most of a big
 * table then costs no rehash at each halving, and releasing the hold
 * shrinks it once, straight to its size (a mass delete spread over many
 * loop iterations stays free of long pauses). */
void hash_hold_shrink(Hash *h, int hold);

/* Call fn on every element; fn must not modify the table. */
void hash_each(const Hash *h, void (*fn)(HashNode *n, void *arg), void *arg);

/* Good mixing functions for integer and string keys. */
uint64_t hash_u64(uint64_t x);
uint64_t hash_bytes(const void *p, size_t len);

#endif
