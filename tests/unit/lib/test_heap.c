/* Unit tests for heap.c: order, position tracking, growth, shrinking and
 * allocation failure. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "heap.h"
#include "unit.h"

typedef struct Item {
    uint32_t key;
    uint32_t id;     /* tie-break, so the order is total */
    size_t pos;
    int in_heap;
} Item;

static int item_less(const void *a, const void *b)
{
    const Item *x = a, *y = b;

    if (x->key != y->key)
        return x->key < y->key;
    return x->id < y->id;
}

static void item_setpos(void *x, size_t pos)
{
    ((Item *)x)->pos = pos;
}

static int item_cmp(const void *a, const void *b)
{
    const Item *x = *(Item *const *)a, *y = *(Item *const *)b;

    if (item_less(x, y))
        return -1;
    return item_less(y, x);
}

/* Every element knows its index, and no child is less than its parent. */
static void check_heap(const Heap *h)
{
    REQUIRE(h->len <= h->cap);
    for (size_t i = 0; i < h->len; i++) {
        const Item *it = h->items[i];
        REQUIRE_MSG(it->pos == i, "items[%zu] records pos %zu", i, it->pos);
        REQUIRE(it->in_heap);
        if (i > 0)
            REQUIRE_MSG(!item_less(it, h->items[(i - 1) / 2]),
                        "items[%zu] is less than its parent", i);
    }
}

START_TEST(empty_heap)
{
    Heap h;

    heap_init(&h, item_less, item_setpos);
    ck_assert_ptr_null(heap_top(&h));
    ck_assert_ptr_null(heap_pop(&h));
    ck_assert_ptr_null(heap_remove(&h, 0));
    ck_assert_uint_eq(h.len, 0);
    heap_free(&h);
    heap_free(&h); /* twice is harmless */
    ck_assert_ptr_null(h.items);
}
END_TEST

START_TEST(remove_out_of_range)
{
    Heap h;
    Item a = {5, 1, 99, 1}, b = {3, 2, 99, 1};

    heap_init(&h, item_less, item_setpos);
    ck_assert_int_eq(heap_insert(&h, &a), 0);
    ck_assert_int_eq(heap_insert(&h, &b), 0);
    ck_assert_ptr_null(heap_remove(&h, 2));
    ck_assert_ptr_null(heap_remove(&h, (size_t)-1));
    ck_assert_uint_eq(h.len, 2);
    ck_assert_ptr_eq(heap_top(&h), &b);
    check_heap(&h);
    heap_free(&h);
}
END_TEST

START_TEST(ties_broken_by_id)
{
    enum { N = 50 };
    Item it[N];
    Heap h;

    heap_init(&h, item_less, item_setpos);
    /* Same key for all, inserted in reverse id order. */
    for (int i = N - 1; i >= 0; i--) {
        it[i] = (Item){7, (uint32_t)i, 0, 1};
        ck_assert_int_eq(heap_insert(&h, &it[i]), 0);
        check_heap(&h);
    }
    for (int i = 0; i < N; i++) {
        Item *x = heap_pop(&h);
        ck_assert_ptr_eq(x, &it[i]);
        x->in_heap = 0;
        check_heap(&h);
    }
    ck_assert_ptr_null(h.items);
    heap_free(&h);
}
END_TEST

/* Randomised against a reference: insert, remove anywhere, change keys in
 * place and heap_fix, pop the minimum; the invariants are checked after
 * every operation and the pop order must match a sort. */
START_TEST(random_ops)
{
    enum { N = 600, OPS = 3000 };
    Item *items = calloc(N, sizeof *items);
    Item **live = calloc(N, sizeof *live);
    size_t nlive = 0, next = 0;
    Heap h;
    Rng r;

    ck_assert_ptr_nonnull(items);
    ck_assert_ptr_nonnull(live);
    rng_seed(&r, (uint64_t)_i + 1);
    heap_init(&h, item_less, item_setpos);

    for (int op = 0; op < OPS; op++) {
        unsigned what = (unsigned)rng_below(&r, 10);

        if ((what < 4 || nlive == 0) && next < N) {
            Item *x = &items[next];
            /* Small key range: many ties, resolved by id. */
            x->key = (uint32_t)rng_below(&r, _i % 2 ? 20 : 1000000);
            x->id = (uint32_t)next++;
            x->in_heap = 1;
            REQUIRE(heap_insert(&h, x) == 0);
            live[nlive++] = x;
        } else if (what < 6 && nlive) {
            /* Remove at a random position. */
            size_t pos = (size_t)rng_below(&r, h.len);
            Item *x = h.items[pos];
            REQUIRE(heap_remove(&h, pos) == x);
            REQUIRE(x->in_heap == 1);
            x->in_heap = 0;
            for (size_t k = 0; k < nlive; k++)
                if (live[k] == x) {
                    live[k] = live[--nlive];
                    break;
                }
        } else if (what < 8 && nlive) {
            /* Change a key both ways, then restore order. */
            size_t pos = (size_t)rng_below(&r, h.len);
            Item *x = h.items[pos];
            if (rng_below(&r, 2))
                x->key = x->key / 2;
            else
                x->key = x->key * 3 + 7;
            heap_fix(&h, pos);
        } else if (nlive) {
            /* Pop must give the reference minimum. */
            Item *min = live[0];
            size_t mk = 0;
            for (size_t k = 1; k < nlive; k++)
                if (item_less(live[k], min))
                    min = live[k], mk = k;
            REQUIRE(heap_top(&h) == min);
            REQUIRE(heap_pop(&h) == min);
            min->in_heap = 0;
            live[mk] = live[--nlive];
        }
        REQUIRE(h.len == nlive);
        check_heap(&h);
    }

    /* Drain: must come out in sorted order. */
    qsort(live, nlive, sizeof *live, item_cmp);
    for (size_t k = 0; k < nlive; k++) {
        Item *x = heap_pop(&h);
        REQUIRE(x == live[k]);
        x->in_heap = 0;
        check_heap(&h);
    }
    ck_assert_uint_eq(h.len, 0);
    ck_assert_uint_eq(h.cap, 0);
    ck_assert_ptr_null(h.items);
    heap_free(&h);
    free(items);
    free(live);
}
END_TEST

/* Sorting through the heap gives exactly qsort's order. */
START_TEST(heapsort_matches_qsort)
{
    enum { N = 2000 };
    Item *items = calloc(N, sizeof *items);
    Item **ref = calloc(N, sizeof *ref);
    Heap h;
    Rng r;

    rng_seed(&r, 1000 + (uint64_t)_i);
    heap_init(&h, item_less, item_setpos);
    for (size_t k = 0; k < N; k++) {
        items[k] = (Item){(uint32_t)rng_next(&r), (uint32_t)k, 0, 1};
        ref[k] = &items[k];
        REQUIRE(heap_insert(&h, &items[k]) == 0);
    }
    check_heap(&h);
    qsort(ref, N, sizeof *ref, item_cmp);
    for (size_t k = 0; k < N; k++) {
        Item *x = heap_pop(&h);
        REQUIRE(x == ref[k]);
        x->in_heap = 0;
    }
    ck_assert_ptr_null(heap_pop(&h));
    heap_free(&h);
    free(items);
    free(ref);
}
END_TEST

/* heap_fix in both directions at every position of a fixed heap. */
START_TEST(fix_every_position)
{
    enum { N = 64 };
    Item it[N];
    Heap h;

    for (size_t pos = 0; pos < N; pos++) {
        for (int dir = 0; dir < 3; dir++) {
            heap_init(&h, item_less, item_setpos);
            for (size_t k = 0; k < N; k++) {
                it[k] = (Item){(uint32_t)(k * 10 + 10), (uint32_t)k, 0, 1};
                REQUIRE(heap_insert(&h, &it[k]) == 0);
            }
            Item *x = h.items[pos];
            x->key = dir == 0 ? 0 : dir == 1 ? 100000 : x->key; /* 2: same */
            heap_fix(&h, pos);
            check_heap(&h);
            if (dir == 0)
                ck_assert_ptr_eq(heap_top(&h), x);
            uint32_t last = 0;
            uint32_t lastid = 0;
            for (size_t k = 0; k < N; k++) {
                Item *y = heap_pop(&h);
                REQUIRE(k == 0 || y->key > last ||
                        (y->key == last && y->id > lastid));
                last = y->key;
                lastid = y->id;
                y->in_heap = 0;
            }
            if (dir == 1)
                ck_assert_uint_eq(last, 100000);
            heap_free(&h);
        }
    }
}
END_TEST

START_TEST(reserve_then_insert_cannot_fail)
{
    enum { N = 100 };
    Item it[N];
    Heap h;
    unsigned long failures = alloc_failures();

    heap_init(&h, item_less, item_setpos);
    ck_assert_int_eq(heap_reserve(&h, N), 0);
    ck_assert_uint_ge(h.cap, N);
    ck_assert_uint_eq(h.len, 0);
    /* Every allocation from now on fails; the inserts must not need one. */
    for (size_t k = 0; k < N; k++) {
        alloc_fail_after(1);
        it[k] = (Item){(uint32_t)(N - k), (uint32_t)k, 0, 1};
        ck_assert_int_eq(heap_insert(&h, &it[k]), 0);
    }
    alloc_fail_after(0);
    ck_assert_uint_eq(alloc_failures(), failures);
    check_heap(&h);
    ck_assert_ptr_eq(heap_top(&h), &it[N - 1]);

    /* Reserving what is already there allocates nothing. */
    alloc_fail_after(1);
    ck_assert_int_eq(heap_reserve(&h, h.cap), 0);
    ck_assert_int_eq(heap_reserve(&h, 1), 0);
    alloc_fail_after(0);
    ck_assert_uint_eq(alloc_failures(), failures);
    heap_free(&h);
}
END_TEST

START_TEST(reserve_failure_leaves_heap)
{
    Item it[8];
    Heap h;
    void **items;
    size_t cap;

    heap_init(&h, item_less, item_setpos);
    for (size_t k = 0; k < 8; k++) {
        it[k] = (Item){(uint32_t)k, (uint32_t)k, 0, 1};
        ck_assert_int_eq(heap_insert(&h, &it[k]), 0);
    }
    items = h.items;
    cap = h.cap;
    alloc_fail_after(1);
    ck_assert_int_eq(heap_reserve(&h, 1000), -1);
    ck_assert_ptr_eq(h.items, items);
    ck_assert_uint_eq(h.cap, cap);
    ck_assert_uint_eq(h.len, 8);
    check_heap(&h);
    ck_assert_int_eq(heap_reserve(&h, 1000), 0);
    ck_assert_uint_ge(h.cap, 1000);
    check_heap(&h);
    heap_free(&h);
}
END_TEST

/* heap_insert is the only failing operation: -1 and the heap unchanged,
 * whatever size it failed at. */
START_TEST(insert_failure_leaves_heap)
{
    enum { N = 300 };
    Item it[N + 1];
    Heap h;
    Rng r;

    rng_seed(&r, 77);
    heap_init(&h, item_less, item_setpos);
    for (size_t k = 0; k <= N; k++)
        it[k] = (Item){(uint32_t)rng_below(&r, 1000), (uint32_t)k, 0, 0};

    for (size_t k = 0; k < N; k++) {
        /* Try to insert it[N] with the next allocation failing. */
        void **items = h.items;
        size_t cap = h.cap, len = h.len;
        unsigned long failures = alloc_failures();
        void *copy[N];

        if (len)
            memcpy(copy, h.items, len * sizeof *copy);
        alloc_fail_after(1);
        it[N].in_heap = 1;
        int rc = heap_insert(&h, &it[N]);
        alloc_fail_after(0);
        if (len == cap) {
            /* It had to grow: the failure must show, nothing changed. */
            ck_assert_int_eq(rc, -1);
            ck_assert_uint_eq(alloc_failures(), failures + 1);
            ck_assert_ptr_eq(h.items, items);
            ck_assert_uint_eq(h.cap, cap);
            ck_assert_uint_eq(h.len, len);
            if (len)
                ck_assert_mem_eq(h.items, copy, len * sizeof *copy);
            it[N].in_heap = 0;
            check_heap(&h);
        } else {
            /* Room left: no allocation, so it succeeds. */
            ck_assert_int_eq(rc, 0);
            ck_assert_uint_eq(alloc_failures(), failures);
            check_heap(&h);
            ck_assert_ptr_eq(heap_remove(&h, it[N].pos), &it[N]);
            it[N].in_heap = 0;
            check_heap(&h);
        }
        it[k].in_heap = 1;
        ck_assert_int_eq(heap_insert(&h, &it[k]), 0);
        check_heap(&h);
    }
    heap_free(&h);
}
END_TEST

/* The array follows the live size: it grows by doubling and halves when
 * mostly empty, and an empty heap holds no memory. */
START_TEST(shrinks_back)
{
    enum { N = 1000 };
    Item it[N];
    Heap h;
    size_t maxcap;

    heap_init(&h, item_less, item_setpos);
    for (size_t k = 0; k < N; k++) {
        it[k] = (Item){(uint32_t)(k * 7919 % N), (uint32_t)k, 0, 1};
        ck_assert_int_eq(heap_insert(&h, &it[k]), 0);
        ck_assert_uint_le(h.cap, 2 * h.len + 8);
    }
    maxcap = h.cap;
    ck_assert_uint_ge(maxcap, N);
    for (size_t k = 0; k < N; k++) {
        Item *x = heap_remove(&h, (size_t)(k * 31 % h.len));
        x->in_heap = 0;
        check_heap(&h);
        if (h.len)
            ck_assert_msg(h.cap <= 4 * (h.len + 1) || h.cap <= 8,
                          "cap %zu for len %zu", h.cap, h.len);
    }
    ck_assert_uint_eq(h.len, 0);
    ck_assert_uint_eq(h.cap, 0);
    ck_assert_ptr_null(h.items);

    /* And it is usable again afterwards. */
    it[0].in_heap = 1;
    ck_assert_int_eq(heap_insert(&h, &it[0]), 0);
    ck_assert_ptr_eq(heap_top(&h), &it[0]);
    check_heap(&h);
    heap_free(&h);
}
END_TEST

/* Shrinking is best effort: a failed shrink keeps the larger array and the
 * removal still happens. */
START_TEST(shrink_failure_is_harmless)
{
    enum { N = 64 };
    Item it[N];
    Heap h;
    int shrink_failed = 0;

    heap_init(&h, item_less, item_setpos);
    for (size_t k = 0; k < N; k++) {
        it[k] = (Item){(uint32_t)k, (uint32_t)k, 0, 1};
        ck_assert_int_eq(heap_insert(&h, &it[k]), 0);
    }
    while (h.len > 1) {
        size_t cap = h.cap, len = h.len;
        unsigned long failures = alloc_failures();

        alloc_fail_after(1);
        Item *x = heap_remove(&h, len / 2);
        alloc_fail_after(0);
        ck_assert_ptr_nonnull(x);
        x->in_heap = 0;
        ck_assert_uint_eq(h.len, len - 1);
        if (alloc_failures() != failures) {
            shrink_failed = 1;
            ck_assert_uint_eq(h.cap, cap);
        }
        check_heap(&h);
    }
    ck_assert(shrink_failed);
    heap_free(&h);
}
END_TEST

static Suite *heap_suite(void)
{
    Suite *s = suite_create("heap");
    TCase *tc = unit_tcase("core");

    tcase_add_test(tc, empty_heap);
    tcase_add_test(tc, remove_out_of_range);
    tcase_add_test(tc, ties_broken_by_id);
    tcase_add_loop_test(tc, random_ops, 0, 40);
    tcase_add_loop_test(tc, heapsort_matches_qsort, 0, 5);
    tcase_add_test(tc, fix_every_position);
    suite_add_tcase(s, tc);

    tc = unit_tcase("memory");
    tcase_add_test(tc, reserve_then_insert_cannot_fail);
    tcase_add_test(tc, reserve_failure_leaves_heap);
    tcase_add_test(tc, insert_failure_leaves_heap);
    tcase_add_test(tc, shrinks_back);
    tcase_add_test(tc, shrink_failure_is_harmless);
    suite_add_tcase(s, tc);
    return s;
}

UNIT_MAIN(heap_suite)
