#include "hash.h"

#include "alloc.h"

#define HASH_MIN_BUCKETS 16

int hash_init(Hash *h, HashFn node_hash)
{
    h->len = 0;
    h->load = 1;
    h->shrink_held = 0;
    h->node_hash = node_hash;
    h->buckets = tb_calloc(HASH_MIN_BUCKETS, sizeof *h->buckets);
    h->nbuckets = h->buckets ? HASH_MIN_BUCKETS : 0;
    return h->buckets ? 0 : -1;
}

void hash_free(Hash *h)
{
    tb_free(h->buckets);
    h->buckets = NULL;
    h->nbuckets = h->len = 0;
}

void hash_set_load(Hash *h, size_t load)
{
    h->load = load ? load : 1;
}

uint64_t hash_u64(uint64_t x)
{
    /* splitmix64 finaliser: sequential ids spread over all buckets. */
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

uint64_t hash_bytes(const void *p, size_t len)
{
    /* FNV-1a, then mixed; tube names are short. */
    const unsigned char *s = p;
    uint64_t x = 0xcbf29ce484222325ULL;

    for (size_t i = 0; i < len; i++) {
        x ^= s[i];
        x *= 0x100000001b3ULL;
    }
    return hash_u64(x);
}

static void rehash(Hash *h, size_t nbuckets)
{
    HashNode **nb = tb_calloc(nbuckets, sizeof *nb);

    if (!nb)
        return; /* keep the old array: slower chains, still correct */
    for (size_t i = 0; i < h->nbuckets; i++) {
        HashNode *n = h->buckets[i];
        /* Moving a chain means reading each element, which is cold when
         * the table is big: fetch a chain head a few buckets ahead. */
        if (i + 8 < h->nbuckets && h->buckets[i + 8])
            __builtin_prefetch(h->buckets[i + 8]);
        while (n) {
            HashNode *next = n->next;
            size_t b = h->node_hash(n) & (nbuckets - 1);
            n->next = nb[b];
            nb[b] = n;
            n = next;
        }
    }
    tb_free(h->buckets);
    h->buckets = nb;
    h->nbuckets = nbuckets;
}

/* The bucket count that holds n elements within the load. */
static size_t buckets_for(const Hash *h, size_t n)
{
    size_t nb = HASH_MIN_BUCKETS;

    while (nb * h->load < n && nb < ((size_t)1 << 40))
        nb *= 2;
    return nb;
}

void hash_reserve(Hash *h, size_t n)
{
    size_t nb = buckets_for(h, n);

    if (nb > h->nbuckets)
        rehash(h, nb);
}

void hash_insert(Hash *h, HashNode *n)
{
    size_t b;

    if (h->len >= h->nbuckets * h->load)
        rehash(h, h->nbuckets * 2);
    b = h->node_hash(n) & (h->nbuckets - 1);
    n->next = h->buckets[b];
    h->buckets[b] = n;
    h->len++;
}

HashNode *hash_find(const Hash *h, uint64_t hv, HashEq eq, const void *key)
{
    HashNode *n;

    for (n = h->buckets[hv & (h->nbuckets - 1)]; n; n = n->next)
        if (eq(n, key))
            return n;
    return NULL;
}

int hash_remove(Hash *h, HashNode *n)
{
    HashNode **pp;

    for (pp = &h->buckets[h->node_hash(n) & (h->nbuckets - 1)]; *pp;
         pp = &(*pp)->next) {
        if (*pp == n) {
            *pp = n->next;
            n->next = NULL;
            h->len--;
            if (!h->shrink_held && h->nbuckets > HASH_MIN_BUCKETS &&
                h->len < h->nbuckets * h->load / 4)
                rehash(h, h->nbuckets / 2);
            return 0;
        }
    }
    return -1;
}

void hash_hold_shrink(Hash *h, int hold)
{
    size_t nb = h->nbuckets;

    h->shrink_held = hold;
    if (hold)
        return;
    while (nb > HASH_MIN_BUCKETS && h->len < nb * h->load / 4)
        nb /= 2;
    if (nb != h->nbuckets)
        rehash(h, nb);
}

void hash_each(const Hash *h, void (*fn)(HashNode *n, void *arg), void *arg)
{
    for (size_t i = 0; i < h->nbuckets; i++) {
        /* A big table's elements are cold: fetch chain heads ahead, and the
         * second element of chains closer by (at load 2 most chains have
         * one or two). A promotion walks every job this way. */
        if (i + 16 < h->nbuckets && h->buckets[i + 16])
            __builtin_prefetch(h->buckets[i + 16]);
        if (i + 8 < h->nbuckets && h->buckets[i + 8] && h->buckets[i + 8]->next)
            __builtin_prefetch(h->buckets[i + 8]->next);
        for (HashNode *n = h->buckets[i]; n; n = n->next)
            fn(n, arg);
    }
}
