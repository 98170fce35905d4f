#include "idheap.h"

#include "alloc.h"

/* a goes above b. */
static int above(const IdHeap *h, uint64_t a, uint64_t b)
{
    return h->max ? a > b : a < b;
}

static void sift_down(IdHeap *h, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        uint64_t x;

        if (l < h->len && above(h, h->v[l], h->v[m]))
            m = l;
        if (l + 1 < h->len && above(h, h->v[l + 1], h->v[m]))
            m = l + 1;
        if (m == i)
            return;
        x = h->v[i];
        h->v[i] = h->v[m];
        h->v[m] = x;
        i = m;
    }
}

void idheap_init(IdHeap *h, int max)
{
    *h = (IdHeap){.max = (uint8_t)!!max};
}

void idheap_init_fixed(IdHeap *h, int max, uint64_t *v, size_t cap)
{
    *h = (IdHeap){.v = v, .cap = cap, .max = (uint8_t)!!max, .fixed = 1};
}

void idheap_free(IdHeap *h)
{
    if (!h->fixed)
        tb_free(h->v);
    h->v = NULL;
    h->len = h->cap = 0;
}

int idheap_reserve(IdHeap *h, size_t n)
{
    uint64_t *v;

    if (n <= h->cap)
        return 0;
    if (h->fixed || n > SIZE_MAX / sizeof *v)
        return -1;
    if (!(v = tb_realloc(h->v, n * sizeof *v)))
        return -1;
    h->v = v;
    h->cap = n;
    return 0;
}

int idheap_push(IdHeap *h, uint64_t id)
{
    size_t i;

    if (h->len == h->cap && idheap_reserve(h, h->cap ? h->cap * 2 : 64) < 0)
        return -1;
    for (i = h->len++; i > 0 && above(h, id, h->v[(i - 1) / 2]); i = (i - 1) / 2)
        h->v[i] = h->v[(i - 1) / 2];
    h->v[i] = id;
    return 0;
}

void idheap_pop(IdHeap *h)
{
    h->v[0] = h->v[--h->len];
    sift_down(h, 0);
}

void idheap_replace_top(IdHeap *h, uint64_t id)
{
    h->v[0] = id;
    sift_down(h, 0);
}

void idheap_heapify(IdHeap *h)
{
    for (size_t i = h->len / 2; i-- > 0;)
        sift_down(h, i);
}
