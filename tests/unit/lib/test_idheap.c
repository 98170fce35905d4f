/* Unit tests for idheap.c: order both ways against a sort, the fixed
 * (caller's array) form, heapify, and allocation failure. */
#include <stdlib.h>
#include <string.h>

#include "idheap.h"
#include "unit.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* Push n random ids (with repeats), pop them all: the sorted order. */
START_TEST(pops_in_order_both_ways)
{
    enum { N = 3000 };
    static uint64_t ids[N];
    Rng r;

    rng_seed(&r, (uint64_t)_i + 1);
    for (int max = 0; max < 2; max++) {
        IdHeap h;

        idheap_init(&h, max);
        for (int i = 0; i < N; i++) {
            ids[i] = rng_next(&r) % 500; /* repeats */
            ck_assert_int_eq(idheap_push(&h, ids[i]), 0);
        }
        qsort(ids, N, sizeof *ids, cmp_u64);
        for (int i = 0; i < N; i++) {
            ck_assert_uint_eq(idheap_top(&h), max ? ids[N - 1 - i] : ids[i]);
            idheap_pop(&h);
        }
        ck_assert_uint_eq(h.len, 0);
        idheap_free(&h);
    }
}
END_TEST

/* The list-jobs use: the k smallest of a stream in a fixed max-heap. */
START_TEST(fixed_keeps_the_k_smallest)
{
    enum { N = 5000, K = 37 };
    static uint64_t all[N];
    uint64_t out[K];
    IdHeap h;
    Rng r;

    rng_seed(&r, 7);
    idheap_init_fixed(&h, 1, out, K);
    for (int i = 0; i < N; i++) {
        all[i] = rng_next(&r);
        if (idheap_push(&h, all[i]) < 0) {
            ck_assert_uint_eq(h.len, K); /* full: never grows */
            if (all[i] < idheap_top(&h))
                idheap_replace_top(&h, all[i]);
        }
    }
    ck_assert_int_eq(idheap_reserve(&h, K + 1), -1);
    qsort(all, N, sizeof *all, cmp_u64);
    qsort(out, K, sizeof *out, cmp_u64);
    ck_assert_int_eq(memcmp(out, all, sizeof out), 0);
    idheap_free(&h); /* the caller's array: not freed (ASan would say) */
}
END_TEST

START_TEST(heapify_orders_what_was_written)
{
    IdHeap h;
    uint64_t prev = 0;

    idheap_init(&h, 0);
    ck_assert_int_eq(idheap_reserve(&h, 1000), 0);
    for (size_t i = 0; i < 1000; i++)
        h.v[i] = (i * 7919) % 1000;
    h.len = 1000;
    idheap_heapify(&h);
    for (int i = 0; i < 1000; i++) {
        ck_assert_uint_ge(idheap_top(&h), prev);
        prev = idheap_top(&h);
        idheap_pop(&h);
    }
    idheap_free(&h);
}
END_TEST

START_TEST(push_failure_leaves_the_heap)
{
    IdHeap h;

    idheap_init(&h, 0);
    for (uint64_t i = 0; i < 64; i++)
        ck_assert_int_eq(idheap_push(&h, 100 - i), 0);
    alloc_fail_after(1); /* the 65th push must grow: that fails */
    ck_assert_int_eq(idheap_push(&h, 1), -1);
    alloc_fail_after(0);
    ck_assert_uint_eq(h.len, 64);
    ck_assert_uint_eq(idheap_top(&h), 37);
    ck_assert_int_eq(idheap_push(&h, 1), 0);
    ck_assert_uint_eq(idheap_top(&h), 1);
    idheap_free(&h);
}
END_TEST

static Suite *idheap_suite(void)
{
    Suite *s = suite_create("idheap");
    TCase *tc = unit_tcase("idheap");

    tcase_add_loop_test(tc, pops_in_order_both_ways, 0, 5);
    tcase_add_test(tc, fixed_keeps_the_k_smallest);
    tcase_add_test(tc, heapify_orders_what_was_written);
    tcase_add_test(tc, push_failure_leaves_the_heap);
    suite_add_tcase(s, tc);
    return s;
}

UNIT_MAIN(idheap_suite)
