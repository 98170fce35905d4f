/*
 * heap.h — a binary min-heap of pointers with position tracking.
 *
 * Contract: the caller supplies less(a, b), a strict weak order, and
 * setpos(x, i), called whenever element x lands at index i, so each element
 * knows its own index and heap_remove(h, i) takes any element out in
 * O(log n). heap_insert() is the only operation that can fail (it may need
 * to grow the array); it returns -1 with the heap unchanged. The array
 * shrinks when it is mostly empty, so memory follows the live size.
 * A heap holds at most HEAP_MAX_LEN elements (inserts past it fail), so a
 * position fits in 30 bits, which the job header relies on.
 */
#ifndef TUBED_HEAP_H
#define TUBED_HEAP_H

#include <stddef.h>

#define HEAP_MAX_LEN ((size_t)1 << 30)

typedef int (*HeapLess)(const void *a, const void *b);
typedef void (*HeapSetPos)(void *x, size_t pos);

typedef struct Heap {
    void **items;
    size_t len, cap;
    HeapLess less;
    HeapSetPos setpos;
} Heap;

void heap_init(Heap *h, HeapLess less, HeapSetPos setpos);
void heap_free(Heap *h);
int heap_insert(Heap *h, void *x);
/* Grow the array to hold n elements, so the next inserts up to n cannot
 * fail; -1 if it cannot grow. */
int heap_reserve(Heap *h, size_t n);
void *heap_remove(Heap *h, size_t pos);
/* Restore order after the key of the element at pos changed. */
void heap_fix(Heap *h, size_t pos);

static inline void *heap_top(const Heap *h)
{
    return h->len ? h->items[0] : NULL;
}

static inline void *heap_pop(Heap *h)
{
    return h->len ? heap_remove(h, 0) : NULL;
}

#endif
