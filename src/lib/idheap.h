/*
 * idheap.h — a binary heap of 64-bit ids (job ids), smallest or largest
 * on top.
 *
 * Contract: an IdHeap is an array of ids in heap order; the top is v[0].
 * idheap_push() grows the array (tb_realloc) and is the only operation
 * that can fail: -1 with the heap unchanged. A heap made with
 * idheap_init_fixed() lives in the caller's array and never grows (push
 * past its room fails), for a bounded job like a page of list-jobs that
 * must not allocate. idheap_heapify() orders ids the caller wrote into v
 * (len set) in O(n). Ids may repeat.
 */
#ifndef TUBED_IDHEAP_H
#define TUBED_IDHEAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct IdHeap {
    uint64_t *v;
    size_t len, cap;
    uint8_t max;    /* 1: the largest id on top; 0: the smallest */
    uint8_t fixed;  /* v is the caller's: never grown nor freed */
} IdHeap;

/* An empty heap that allocates as it grows. */
void idheap_init(IdHeap *h, int max);
/* An empty heap in the caller's array of cap ids. */
void idheap_init_fixed(IdHeap *h, int max, uint64_t *v, size_t cap);
void idheap_free(IdHeap *h);
/* Room for n ids in all (grows; a fixed heap: only if cap >= n). */
int idheap_reserve(IdHeap *h, size_t n);
int idheap_push(IdHeap *h, uint64_t id);
void idheap_pop(IdHeap *h);
/* Replace the top with id and restore the order (no allocation). */
void idheap_replace_top(IdHeap *h, uint64_t id);
/* Order v[0..len) as a heap. */
void idheap_heapify(IdHeap *h);

static inline uint64_t idheap_top(const IdHeap *h) { return h->v[0]; }

#endif
