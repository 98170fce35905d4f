#include "heap.h"

#include "alloc.h"

#define HEAP_MIN_CAP 8

void heap_init(Heap *h, HeapLess less, HeapSetPos setpos)
{
    h->items = NULL;
    h->len = h->cap = 0;
    h->less = less;
    h->setpos = setpos;
}

void heap_free(Heap *h)
{
    tb_free(h->items);
    h->items = NULL;
    h->len = h->cap = 0;
}

static void place(Heap *h, size_t i, void *x)
{
    h->items[i] = x;
    h->setpos(x, i);
}

static void sift_up(Heap *h, size_t i)
{
    void *x = h->items[i];

    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!h->less(x, h->items[parent]))
            break;
        place(h, i, h->items[parent]);
        i = parent;
    }
    place(h, i, x);
}

static void sift_down(Heap *h, size_t i)
{
    void *x = h->items[i];

    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= h->len)
            break;
        if (child + 1 < h->len && h->less(h->items[child + 1], h->items[child]))
            child++;
        if (!h->less(h->items[child], x))
            break;
        place(h, i, h->items[child]);
        i = child;
    }
    place(h, i, x);
}

static int resize(Heap *h, size_t cap)
{
    void **items;

    if (cap > HEAP_MAX_LEN)
        return -1;
    items = tb_realloc(h->items, cap * sizeof *items);
    if (!items)
        return -1;
    h->items = items;
    h->cap = cap;
    return 0;
}

int heap_reserve(Heap *h, size_t n)
{
    size_t cap = h->cap ? h->cap : HEAP_MIN_CAP;

    if (n <= h->cap)
        return 0;
    if (n > HEAP_MAX_LEN)
        return -1;
    while (cap < n)
        cap *= 2;
    return resize(h, cap);
}

int heap_insert(Heap *h, void *x)
{
    if (h->len == h->cap &&
        resize(h, h->cap ? h->cap * 2 : HEAP_MIN_CAP) < 0)
        return -1;
    h->items[h->len++] = x;
    sift_up(h, h->len - 1);
    return 0;
}

void heap_fix(Heap *h, size_t pos)
{
    if (pos > 0 && h->less(h->items[pos], h->items[(pos - 1) / 2]))
        sift_up(h, pos);
    else
        sift_down(h, pos);
}

void *heap_remove(Heap *h, size_t pos)
{
    void *x;

    if (pos >= h->len)
        return NULL;
    x = h->items[pos];
    h->len--;
    if (pos < h->len) {
        place(h, pos, h->items[h->len]);
        heap_fix(h, pos);
    }
    /* Shrinking is best effort: if realloc fails we keep the larger array. */
    if (h->cap > HEAP_MIN_CAP && h->len < h->cap / 4)
        resize(h, h->cap / 2);
    if (h->len == 0 && h->cap) {
        tb_free(h->items);
        h->items = NULL;
        h->cap = 0;
    }
    return x;
}
