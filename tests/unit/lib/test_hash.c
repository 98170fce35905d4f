/* Unit tests for hash.c: find/remove, growing and shrinking, hash_each,
 * and allocation failure while rehashing. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "hash.h"
#include "list.h"
#include "unit.h"

typedef struct Elem {
    HashNode node;
    uint64_t key;
    int in_table;
    int seen;
} Elem;

static uint64_t elem_hash(const HashNode *n)
{
    return hash_u64(container_of(n, Elem, node)->key);
}

/* Every key in one of four buckets: long chains. */
static uint64_t elem_hash_bad(const HashNode *n)
{
    return container_of(n, Elem, node)->key % 4;
}

/* The key itself: consecutive keys fill consecutive buckets. */
static uint64_t elem_hash_id(const HashNode *n)
{
    return container_of(n, Elem, node)->key;
}

static int elem_eq(const HashNode *n, const void *key)
{
    return container_of(n, Elem, node)->key == *(const uint64_t *)key;
}

static Elem *find(const Hash *h, uint64_t key)
{
    uint64_t hv = h->node_hash == elem_hash_bad  ? key % 4
                  : h->node_hash == elem_hash_id ? key
                                                 : hash_u64(key);
    HashNode *n = hash_find(h, hv, elem_eq, &key);

    return n ? container_of(n, Elem, node) : NULL;
}

static int is_pow2(size_t n)
{
    return n && !(n & (n - 1));
}

/* Each element is in the bucket its hash names, the count is right, and
 * (when bounded) the load is within the documented limits: at most 1, and
 * at least 1/4 unless the table is at its minimum size. */
static void check_table(const Hash *h, int bounded)
{
    size_t count = 0;

    REQUIRE(is_pow2(h->nbuckets));
    REQUIRE(h->nbuckets >= 16);
    for (size_t b = 0; b < h->nbuckets; b++)
        for (HashNode *n = h->buckets[b]; n; n = n->next) {
            REQUIRE_MSG((h->node_hash(n) & (h->nbuckets - 1)) == b,
                        "element in bucket %zu hashes elsewhere", b);
            REQUIRE(container_of(n, Elem, node)->in_table);
            count++;
        }
    REQ_UEQ(count, h->len);
    if (bounded) {
        REQUIRE_MSG(h->len <= h->nbuckets * h->load, "len %zu > nbuckets %zu x %zu",
                    h->len, h->nbuckets, h->load);
        REQUIRE_MSG(h->nbuckets == 16 || h->len >= h->nbuckets * h->load / 4,
                    "len %zu too small for nbuckets %zu", h->len,
                    h->nbuckets);
    }
}

START_TEST(init_and_free)
{
    Hash h;
    uint64_t k = 1;

    ck_assert_int_eq(hash_init(&h, elem_hash), 0);
    ck_assert_uint_eq(h.nbuckets, 16);
    ck_assert_uint_eq(h.len, 0);
    ck_assert_ptr_null(hash_find(&h, hash_u64(k), elem_eq, &k));
    hash_free(&h);
    ck_assert_ptr_null(h.buckets);
    ck_assert_uint_eq(h.nbuckets, 0);
    hash_free(&h);
}
END_TEST

START_TEST(init_failure)
{
    Hash h;

    alloc_fail_after(1);
    ck_assert_int_eq(hash_init(&h, elem_hash), -1);
    ck_assert_ptr_null(h.buckets);
    ck_assert_uint_eq(h.nbuckets, 0);
    hash_free(&h);
}
END_TEST

static void count_cb(HashNode *n, void *arg)
{
    Elem *e = container_of(n, Elem, node);

    e->seen++;
    (*(size_t *)arg)++;
}

/* Thousands of elements in, found, half removed, the rest found, all
 * removed; nbuckets goes up and comes back down to 16. */
static void grow_and_shrink(HashFn fn, size_t n)
{
    Elem *e = calloc(n, sizeof *e);
    size_t maxb, visits = 0;
    Hash h;

    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(hash_init(&h, fn), 0);
    for (size_t i = 0; i < n; i++) {
        e[i].key = i * 2 + 1; /* odd keys; even ones are absent */
        e[i].in_table = 1;
        hash_insert(&h, &e[i].node);
        REQ_UEQ(h.len, i + 1);
        if (i % 97 == 0)
            check_table(&h, 1);
    }
    check_table(&h, 1);
    maxb = h.nbuckets;
    ck_assert_uint_ge(maxb, n);
    ck_assert_uint_lt(maxb, 2 * n);

    for (size_t i = 0; i < n; i++) {
        REQ_PEQ(find(&h, e[i].key), &e[i]);
        REQ_PEQ(find(&h, e[i].key + 1), NULL);
    }

    hash_each(&h, count_cb, &visits);
    ck_assert_uint_eq(visits, n);
    for (size_t i = 0; i < n; i++)
        REQ_IEQ(e[i].seen, 1);

    /* Remove the even-indexed elements. */
    for (size_t i = 0; i < n; i += 2) {
        REQ_IEQ(hash_remove(&h, &e[i].node), 0);
        e[i].in_table = 0;
        if (i % 101 == 0)
            check_table(&h, 1);
    }
    check_table(&h, 1);
    for (size_t i = 0; i < n; i++)
        REQ_PEQ(find(&h, e[i].key), i % 2 ? &e[i] : NULL);
    /* Removing what is not there fails and changes nothing. */
    ck_assert_int_eq(hash_remove(&h, &e[0].node), -1);
    ck_assert_uint_eq(h.len, n / 2);
    check_table(&h, 1);

    for (size_t i = 1; i < n; i += 2) {
        REQ_IEQ(hash_remove(&h, &e[i].node), 0);
        e[i].in_table = 0;
        if (i % 31 == 1)
            check_table(&h, 1);
    }
    ck_assert_uint_eq(h.len, 0);
    ck_assert_uint_eq(h.nbuckets, 16);
    for (size_t i = 0; i < n; i++)
        REQ_PEQ(find(&h, e[i].key), NULL);
    hash_free(&h);
    free(e);
}

START_TEST(grow_shrink_good_hash)
{
    grow_and_shrink(elem_hash, 5000);
}
END_TEST

START_TEST(grow_shrink_colliding_hash)
{
    grow_and_shrink(elem_hash_bad, 1500);
}
END_TEST

/* Random inserts and removals against a membership array. */
START_TEST(random_ops)
{
    enum { N = 2000, OPS = 20000 };
    Elem *e = calloc(N, sizeof *e);
    size_t live = 0;
    Hash h;
    Rng r;

    ck_assert_ptr_nonnull(e);
    rng_seed(&r, (uint64_t)_i);
    ck_assert_int_eq(hash_init(&h, elem_hash), 0);
    hash_set_load(&h, 1 + (size_t)_i % 2); /* the job table runs at 2 */
    for (size_t i = 0; i < N; i++)
        e[i].key = rng_next(&r);
    for (int op = 0; op < OPS; op++) {
        size_t i = (size_t)rng_below(&r, N);
        if (e[i].in_table) {
            REQ_PEQ(find(&h, e[i].key), &e[i]);
            REQ_IEQ(hash_remove(&h, &e[i].node), 0);
            e[i].in_table = 0;
            live--;
        } else {
            REQ_PEQ(find(&h, e[i].key), NULL);
            REQ_IEQ(hash_remove(&h, &e[i].node), -1);
            hash_insert(&h, &e[i].node);
            e[i].in_table = 1;
            live++;
        }
        REQ_UEQ(h.len, live);
        if (op % 500 == 0)
            check_table(&h, 1);
    }
    check_table(&h, 1);
    for (size_t i = 0; i < N; i++)
        REQ_PEQ(find(&h, e[i].key), e[i].in_table ? &e[i] : NULL);
    hash_free(&h);
    free(e);
}
END_TEST

START_TEST(each_on_empty)
{
    Hash h;
    size_t visits = 0;

    ck_assert_int_eq(hash_init(&h, elem_hash), 0);
    hash_each(&h, count_cb, &visits);
    ck_assert_uint_eq(visits, 0);
    hash_free(&h);
}
END_TEST

static void sum_cb(HashNode *n, void *arg)
{
    *(uint64_t *)arg += container_of(n, Elem, node)->key;
}

/* Every bucket, the first and the last included, is visited once. */
START_TEST(each_visits_every_bucket)
{
    enum { N = 1024 };
    Elem *e = calloc(N, sizeof *e);
    size_t visits = 0;
    uint64_t sum = 0;
    Hash h;

    ck_assert_ptr_nonnull(e);
    ck_assert_int_eq(hash_init(&h, elem_hash_id), 0);
    for (size_t i = 0; i < N; i++) {
        e[i].key = i;
        e[i].in_table = 1;
        hash_insert(&h, &e[i].node);
    }
    ck_assert_uint_eq(h.nbuckets, N); /* one element in every bucket */
    for (size_t b = 0; b < N; b++)
        REQUIRE(h.buckets[b] != NULL && h.buckets[b]->next == NULL);
    hash_each(&h, count_cb, &visits);
    hash_each(&h, sum_cb, &sum);
    ck_assert_uint_eq(visits, N);
    ck_assert_uint_eq(sum, (uint64_t)N * (N - 1) / 2);
    for (size_t i = 0; i < N; i++)
        REQ_IEQ(e[i].seen, 1);
    for (size_t i = 0; i < N; i++)
        REQ_PEQ(find(&h, i), &e[i]);
    hash_free(&h);
    free(e);
}
END_TEST

/* The growth rehash fails: chains get longer but everything stays
 * findable, and the next insert grows the table after all. */
START_TEST(grow_failure_keeps_table)
{
    enum { N = 200 };
    Elem e[N];
    Hash h;

    memset(e, 0, sizeof e);
    ck_assert_int_eq(hash_init(&h, elem_hash), 0);
    for (size_t i = 0; i < N; i++) {
        unsigned long failures = alloc_failures();

        e[i].key = 1000 + i;
        e[i].in_table = 1;
        alloc_fail_after(1);
        hash_insert(&h, &e[i].node);
        alloc_fail_after(0);
        /* Growth is due from the 17th insert on, and always fails. */
        REQ_UEQ(alloc_failures() - failures, i >= 16 ? 1 : 0);
        REQ_UEQ(h.nbuckets, 16);
        REQ_UEQ(h.len, i + 1);
        check_table(&h, 0);
        for (size_t k = 0; k <= i; k++)
            REQ_PEQ(find(&h, e[k].key), &e[k]);
    }

    /* Once memory is back, the next insert grows (by one doubling). */
    Elem extra = {.key = 5, .in_table = 1};
    hash_insert(&h, &extra.node);
    ck_assert_uint_eq(h.nbuckets, 32);
    check_table(&h, 0);
    for (size_t k = 0; k < N; k++)
        REQ_PEQ(find(&h, e[k].key), &e[k]);
    ck_assert_ptr_eq(find(&h, 5), &extra);
    hash_free(&h);
}
END_TEST

/* Sweep: the _i-th rehash of a grow-then-shrink run fails; the table stays
 * correct through it and to the end. */
START_TEST(failure_sweep)
{
    enum { N = 600 };
    Elem e[N];
    Hash h;
    unsigned rehashes = 0;
    int failed = 0;

    memset(e, 0, sizeof e);
    for (size_t k = 0; k < N; k++)
        e[k].key = k * 7919 + 1;
    ck_assert_int_eq(hash_init(&h, elem_hash), 0);
    for (size_t step = 0; step < 2 * N; step++) {
        size_t nb = h.nbuckets;
        unsigned long failures = alloc_failures();
        size_t k = step < N ? step : (step - N) * 37 % N;

        if (rehashes == (unsigned)_i)
            alloc_fail_after(1);
        if (step < N) {
            e[k].in_table = 1;
            hash_insert(&h, &e[k].node);
        } else {
            REQ_IEQ(hash_remove(&h, &e[k].node), 0);
            e[k].in_table = 0;
            REQ_PEQ(find(&h, e[k].key), NULL);
        }
        alloc_fail_after(0);
        if (alloc_failures() != failures) {
            failed = 1;
            REQ_UEQ(h.nbuckets, nb);
        }
        if (alloc_failures() != failures || h.nbuckets != nb) {
            rehashes++;
            check_table(&h, 0);
            for (size_t j = 0; j < N; j++)
                REQ_PEQ(find(&h, e[j].key), e[j].in_table ? &e[j] : NULL);
        }
    }
    /* Growth 16 -> 1024 is 6 rehashes, shrinking back 6 more. */
    ck_assert_int_eq(failed, _i < 12);
    ck_assert_uint_eq(h.len, 0);
    check_table(&h, 0);
    hash_free(&h);
}
END_TEST

/* The shrink rehash fails: removal still happens and the table is right;
 * the next removal shrinks it after all. */
START_TEST(shrink_failure_keeps_table)
{
    enum { N = 100 };
    Elem e[N];
    Hash h;
    size_t nb, i = 0;
    unsigned long failures;

    memset(e, 0, sizeof e);
    ck_assert_int_eq(hash_init(&h, elem_hash), 0);
    for (size_t k = 0; k < N; k++) {
        e[k].key = k;
        e[k].in_table = 1;
        hash_insert(&h, &e[k].node);
    }
    nb = h.nbuckets;
    ck_assert_uint_eq(nb, 128);
    /* Remove down past the shrink threshold with every shrink failing. */
    failures = alloc_failures();
    while (h.len >= nb / 4) {
        alloc_fail_after(1);
        REQ_IEQ(hash_remove(&h, &e[i].node), 0);
        alloc_fail_after(0);
        e[i++].in_table = 0;
        check_table(&h, 0);
    }
    ck_assert_uint_eq(h.nbuckets, nb);
    ck_assert_uint_eq(alloc_failures() - failures, 1); /* one shrink tried */
    for (size_t k = 0; k < N; k++)
        REQ_PEQ(find(&h, e[k].key), k < i ? NULL : &e[k]);
    ck_assert_int_eq(hash_remove(&h, &e[i].node), 0);
    e[i++].in_table = 0;
    ck_assert_uint_eq(h.nbuckets, nb / 2);
    check_table(&h, 0);
    for (size_t k = 0; k < N; k++)
        REQ_PEQ(find(&h, e[k].key), k < i ? NULL : &e[k]);
    hash_free(&h);
}
END_TEST

START_TEST(hash_functions)
{
    unsigned counts[16] = {0};

    /* Deterministic. */
    ck_assert_uint_eq(hash_u64(12345), hash_u64(12345));
    ck_assert_uint_eq(hash_bytes("default", 7), hash_bytes("default", 7));
    /* Different inputs, different hashes (for these). */
    ck_assert_uint_ne(hash_u64(1), hash_u64(2));
    ck_assert_uint_ne(hash_bytes("a", 1), hash_bytes("b", 1));
    ck_assert_uint_ne(hash_bytes("ab", 2), hash_bytes("ba", 2));
    ck_assert_uint_ne(hash_bytes("a", 1), hash_bytes("a\0", 2));
    /* Only [p, p+len) counts. */
    ck_assert_uint_eq(hash_bytes("defaultXYZ", 7), hash_bytes("default", 7));
    /* Sequential ids spread over the low bits. */
    for (uint64_t id = 1; id <= 1600; id++)
        counts[hash_u64(id) & 15]++;
    for (int b = 0; b < 16; b++)
        ck_assert_msg(counts[b] > 60 && counts[b] < 140, "bucket %d: %u", b,
                      counts[b]);
}
END_TEST

static Suite *hash_suite(void)
{
    Suite *s = suite_create("hash");
    TCase *tc = unit_tcase("core");

    tcase_add_test(tc, init_and_free);
    tcase_add_test(tc, grow_shrink_good_hash);
    tcase_add_test(tc, grow_shrink_colliding_hash);
    tcase_add_loop_test(tc, random_ops, 0, 10);
    tcase_add_test(tc, each_on_empty);
    tcase_add_test(tc, each_visits_every_bucket);
    tcase_add_test(tc, hash_functions);
    suite_add_tcase(s, tc);

    tc = unit_tcase("memory");
    tcase_add_test(tc, init_failure);
    tcase_add_test(tc, grow_failure_keeps_table);
    tcase_add_loop_test(tc, failure_sweep, 0, 14);
    tcase_add_test(tc, shrink_failure_keeps_table);
    suite_add_tcase(s, tc);
    return s;
}

UNIT_MAIN(hash_suite)
