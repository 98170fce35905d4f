/* Unit tests for job.c: allocation, the job table, and the heap orders. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "heap.h"
#include "job.h"
#include "unit.h"

START_TEST(alloc_fields)
{
    Job *j = job_alloc(42, 100);

    ck_assert_ptr_nonnull(j);
    ck_assert_uint_eq(j->id, 42);
    ck_assert_uint_eq(j->body_size, 100);
    ck_assert_ptr_null(j->tube);
    ck_assert_ptr_null(job_ext(j));
    ck_assert_uint_eq(j->pri, 0);
    ck_assert_uint_eq(job_ext_view(j)->delay, 0);
    ck_assert_uint_eq(j->ttr, 0);
    ck_assert_int_eq(job_created(j), 0);
    ck_assert_uint_eq(j->file, 0);
    ck_assert_uint_eq(j->state, JOB_READY);
    /* No JobExt yet: the read-only views show zeros. */
    const JobExt *z = job_ext_view(j);
    ck_assert_uint_eq(z->reserves + z->timeouts + z->releases + z->buries +
                          z->kicks + z->delay, 0);
    /* The body lives in the same allocation, right after the 52-byte
     * header, and is all usable (ASan checks the bounds). */
    ck_assert_uint_eq((size_t)(j->body - (char *)j), 52);
    memset(j->body, 'b', 100);
    ck_assert_int_eq(j->body[99], 'b');
    job_free(j);

    j = job_alloc(UINT64_MAX, 0);
    ck_assert_ptr_nonnull(j);
    ck_assert_uint_eq(j->id, UINT64_MAX);
    job_free(j);
    job_free(NULL);
}
END_TEST

/* The JobExt comes on first need, zeroed and linked back to its job, and
 * stays: a second call returns the same one. */
START_TEST(ext_on_demand)
{
    Job *j = job_alloc(7, 3);
    JobExt *e;

    ck_assert_ptr_nonnull(j);
    e = job_ext_get(j);
    ck_assert_ptr_nonnull(e);
    ck_assert_ptr_eq(job_ext(j), e);
    ck_assert_ptr_eq(e->job, j);
    ck_assert_ptr_null(e->owner);
    ck_assert(!list_linked(&e->link));
    ck_assert_uint_eq(e->reserves + e->timeouts + e->releases + e->buries +
                          e->kicks + e->delay, 0);
    ck_assert_int_eq(e->deadline, 0);
    e->delay = 9;
    e->kicks = 2;
    ck_assert_uint_eq(job_ext_view(j)->delay, 9);
    ck_assert_uint_eq(job_ext_view(j)->kicks, 2);
    ck_assert_ptr_eq(job_ext_get(j), e);
    /* job_of_link() finds the job from the list node. */
    List l;
    list_init(&l);
    list_insert_tail(&l, &e->link);
    ck_assert_ptr_eq(job_of_link(list_first(&l)), j);
    list_remove(&e->link);
    ck_assert(!list_linked(&e->link));
    job_free(j); /* frees e too (LSan would tell) */

    /* Out of memory: NULL and the job is unchanged. */
    j = job_alloc(8, 0);
    ck_assert_ptr_nonnull(j);
    alloc_fail_after(1);
    ck_assert_ptr_null(job_ext_get(j));
    alloc_fail_after(0);
    ck_assert_ptr_null(job_ext(j));
    job_free(j);
}
END_TEST

/* The creation time shares its word with the JobExt pointer: it is kept
 * exactly, negative (a replayed job made before this boot) or not, before
 * and after the JobExt comes, and a JobExt made later carries it. */
START_TEST(created_and_ext_share_a_word)
{
    int64_t times[] = {0, 1, -1, 123456789012345LL, -987654321098765LL,
                       INT64_MAX / 2 - 1, INT64_MIN / 2};

    for (size_t k = 0; k < sizeof times / sizeof *times; k++) {
        Job *j = job_alloc(5, 10);
        JobExt *x;

        ck_assert_ptr_nonnull(j);
        job_set_created(j, times[k]);
        ck_assert_int_eq(job_created(j), times[k]);
        ck_assert_ptr_null(job_ext(j));
        ck_assert_ptr_nonnull(x = job_ext_get(j));
        ck_assert_ptr_eq(job_ext(j), x);
        ck_assert_int_eq(job_created(j), times[k]);
        job_set_created(j, times[k] + 7);
        ck_assert_int_eq(job_created(j), times[k] + 7);
        ck_assert_int_eq(x->created, times[k] + 7);
        ck_assert_ptr_eq(job_ext(j), x);
        job_free(j);
    }
    /* job_ext_forget: no JobExt (a relocated job's went to its copy). */
    {
        Job *j = job_alloc(6, 0), *n = job_alloc(6, 0);
        ck_assert_ptr_nonnull(j);
        ck_assert_ptr_nonnull(n);
        ck_assert_ptr_nonnull(job_ext_get(j));
        n->xc = j->xc;
        job_ext(n)->job = n;
        job_ext_forget(j);
        ck_assert_ptr_null(job_ext(j));
        job_free(j);
        ck_assert_ptr_eq(job_ext(n)->job, n);
        job_free(n);
    }
}
END_TEST

/* job_cost() is what the slab charges: the header, the body, rounded to
 * 8 bytes and no more. */
START_TEST(cost)
{
    ck_assert_uint_eq(job_cost(100), 152);
    ck_assert_uint_eq(job_cost(0), 56);
    ck_assert_uint_eq(job_cost(4), 56);
    ck_assert_uint_eq(job_cost(5), 64);
    ck_assert_uint_ge(job_cost(1 << 20), (1 << 20) + 52);
}
END_TEST

START_TEST(alloc_failure)
{
    alloc_fail_after(1);
    ck_assert_ptr_null(job_alloc(1, 10));
    /* With memory back, the same allocation works. */
    alloc_fail_after(0);
    Job *j = job_alloc(2, 10);
    ck_assert_ptr_nonnull(j);
    job_free(j);
}
END_TEST

START_TEST(state_names)
{
    ck_assert_str_eq(job_state_name(JOB_READY), "ready");
    ck_assert_str_eq(job_state_name(JOB_RESERVED), "reserved");
    ck_assert_str_eq(job_state_name(JOB_DELAYED), "delayed");
    ck_assert_str_eq(job_state_name(JOB_BURIED), "buried");
    ck_assert_str_eq(job_state_name((JobState)99), "invalid");
}
END_TEST

/* Ten thousand jobs in the table, found by id, removed in two rounds;
 * the table shrinks back to its minimum. */
START_TEST(table_find_remove)
{
    enum { N = 10000 };
    Job **jobs = calloc(N, sizeof *jobs);
    Hash table;

    ck_assert_int_eq(job_table_init(&table), 0);
    ck_assert_ptr_null(job_table_find(&table, 1));
    for (size_t i = 0; i < N; i++) {
        jobs[i] = job_alloc(i + 1, 0);
        REQUIRE(jobs[i] != NULL);
        job_table_insert(&table, jobs[i]);
    }
    ck_assert_uint_eq(table.len, N);
    /* Load 2: at most two jobs a bucket on average, at least half. */
    ck_assert_uint_ge(table.nbuckets * 2, N);
    ck_assert_uint_le(table.nbuckets, N);
    for (size_t i = 0; i < N; i++)
        REQ_PEQ(job_table_find(&table, i + 1), jobs[i]);
    ck_assert_ptr_null(job_table_find(&table, 0));
    ck_assert_ptr_null(job_table_find(&table, N + 1));
    ck_assert_ptr_null(job_table_find(&table, UINT64_MAX));

    /* Remove the odd ids. */
    for (size_t i = 0; i < N; i += 2)
        job_table_remove(&table, jobs[i]);
    ck_assert_uint_eq(table.len, N / 2);
    for (size_t i = 0; i < N; i++)
        REQ_PEQ(job_table_find(&table, i + 1), i % 2 ? jobs[i] : NULL);
    /* Removing a job that is not there changes nothing. */
    job_table_remove(&table, jobs[0]);
    ck_assert_uint_eq(table.len, N / 2);

    for (size_t i = 1; i < N; i += 2)
        job_table_remove(&table, jobs[i]);
    ck_assert_uint_eq(table.len, 0);
    ck_assert_uint_eq(table.nbuckets, 16);
    for (size_t i = 0; i < N; i++) {
        REQ_PEQ(job_table_find(&table, i + 1), NULL);
        job_free(jobs[i]);
    }
    hash_free(&table);
    free(jobs);
}
END_TEST

/* Ids far apart and sharing low bits all land in their own places. */
START_TEST(table_sparse_ids)
{
    enum { N = 512 };
    Job *jobs[N];
    Hash table;

    ck_assert_int_eq(job_table_init(&table), 0);
    for (size_t i = 0; i < N; i++) {
        jobs[i] = job_alloc((uint64_t)i << 40 | 7, 0);
        job_table_insert(&table, jobs[i]);
    }
    for (size_t i = 0; i < N; i++)
        REQ_PEQ(job_table_find(&table, (uint64_t)i << 40 | 7), jobs[i]);
    ck_assert_ptr_null(job_table_find(&table, 7ULL | 1ULL << 60));
    for (size_t i = 0; i < N; i++) {
        job_table_remove(&table, jobs[i]);
        job_free(jobs[i]);
    }
    ck_assert_uint_eq(table.len, 0);
    hash_free(&table);
}
END_TEST

/* The id hash keeps runs of ids together but must still spread any
 * pattern of live ids over the buckets: sequential ids, ids spaced by a
 * stride (one tube of many that fills while the others drain), and
 * random gaps. The longest chain stays short and few buckets sit empty. */
static void check_spread(uint64_t first, uint64_t stride, int random_gaps)
{
    enum { N = 65536 };
    Job **jobs = calloc(N, sizeof *jobs);
    Hash table;
    uint64_t id = first;
    size_t longest = 0, empty = 0;
    Rng r;

    REQUIRE(jobs != NULL);
    rng_seed(&r, stride);
    ck_assert_int_eq(job_table_init(&table), 0);
    for (size_t i = 0; i < N; i++) {
        jobs[i] = job_alloc(id, 0);
        REQUIRE(jobs[i] != NULL);
        job_table_insert(&table, jobs[i]);
        id += random_gaps ? 1 + rng_below(&r, 2 * stride) : stride;
    }
    for (size_t b = 0; b < table.nbuckets; b++) {
        size_t n = 0;
        for (HashNode *x = table.buckets[b]; x; x = x->next)
            n++;
        longest = n > longest ? n : longest;
        empty += n == 0;
    }
    /* Load 2 over 32768 buckets: a uniform spread leaves about e^-2 (14%)
     * empty, with chains of about a dozen at the most. */
    REQUIRE_MSG(longest <= 16, "stride %llu: a chain of %zu", (unsigned long long)stride, longest);
    REQUIRE_MSG(empty * 4 < table.nbuckets, "stride %llu: %zu of %zu buckets empty",
                (unsigned long long)stride, empty, table.nbuckets);
    for (size_t i = 0; i < N; i++)
        REQ_PEQ(job_table_find(&table, jobs[i]->id), jobs[i]);
    for (size_t i = 0; i < N; i++) {
        job_table_remove(&table, jobs[i]);
        job_free(jobs[i]);
    }
    hash_free(&table);
    free(jobs);
}

START_TEST(id_hash_spreads)
{
    uint64_t strides[] = {1, 2, 3, 7, 8, 16, 64, 1000, 4096, 1 << 20};

    for (size_t i = 0; i < sizeof strides / sizeof *strides; i++) {
        check_spread(1, strides[i], 0);
        check_spread(1000003, strides[i], 1);
    }
    /* Eight consecutive ids share one 64-byte line of buckets. */
    uint64_t line = job_id_hash(800) >> 3;
    for (uint64_t k = 801; k < 808; k++)
        ck_assert_uint_eq(job_id_hash(k) >> 3, line);
    ck_assert_uint_ne(job_id_hash(808) >> 3, line);
}
END_TEST

START_TEST(ready_less)
{
    Job a = {.id = 1, .pri = 10}, b = {.id = 2, .pri = 10},
        c = {.id = 3, .pri = 5}, d = {.id = 0, .pri = UINT32_MAX};

    /* Lower priority first. */
    ck_assert(job_ready_less(&c, &a));
    ck_assert(!job_ready_less(&a, &c));
    /* Same priority: lower id first (FIFO). */
    ck_assert(job_ready_less(&a, &b));
    ck_assert(!job_ready_less(&b, &a));
    /* Priority beats id. */
    ck_assert(job_ready_less(&a, &d));
    ck_assert(!job_ready_less(&d, &a));
    /* Strict: nothing is less than itself. */
    ck_assert(!job_ready_less(&a, &a));
    /* The deadline does not matter here (a ready job may have none). */
    JobExt ea = {.deadline = 100}, eb = {.deadline = 1};
    a.xc = (uintptr_t)&ea;
    b.xc = (uintptr_t)&eb;
    ck_assert(job_ready_less(&a, &b));
}
END_TEST

START_TEST(deadline_less)
{
    JobExt ea = {.deadline = 100}, eb = {.deadline = 100}, ec = {.deadline = -5},
           ed = {.deadline = INT64_MAX};
    Job a = {.id = 1, .xc = (uintptr_t)&ea}, b = {.id = 2, .xc = (uintptr_t)&eb}, c = {.id = 3, .xc = (uintptr_t)&ec},
        d = {.id = 0, .xc = (uintptr_t)&ed};

    ck_assert(job_deadline_less(&c, &a));
    ck_assert(!job_deadline_less(&a, &c));
    ck_assert(job_deadline_less(&a, &b));
    ck_assert(!job_deadline_less(&b, &a));
    ck_assert(job_deadline_less(&a, &d));
    ck_assert(!job_deadline_less(&d, &a));
    ck_assert(!job_deadline_less(&a, &a));
    /* The priority does not matter here. */
    a.pri = 1000;
    b.pri = 0;
    ck_assert(job_deadline_less(&a, &b));
}
END_TEST

static int ready_cmp(const void *x, const void *y)
{
    const Job *a = *(Job *const *)x, *b = *(Job *const *)y;

    if (a->pri != b->pri)
        return a->pri < b->pri ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

static int deadline_cmp(const void *x, const void *y)
{
    const Job *a = *(Job *const *)x, *b = *(Job *const *)y;

    if (job_ext(a)->deadline != job_ext(b)->deadline)
        return job_ext(a)->deadline < job_ext(b)->deadline ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* Jobs through a heap with the job callbacks come out in (pri, id) or
 * (deadline, id) order, and heap_pos always names the job's index. */
static void heap_order(int by_deadline, uint64_t seed)
{
    enum { N = 3000 };
    Job **jobs = calloc(N, sizeof *jobs);
    Job **ref = calloc(N, sizeof *ref);
    Heap h;
    Rng r;

    rng_seed(&r, seed);
    heap_init(&h, by_deadline ? job_deadline_less : job_ready_less,
              job_set_heap_pos);
    for (size_t i = 0; i < N; i++) {
        /* Ids shuffled against insertion order; few distinct keys. */
        jobs[i] = job_alloc((i * 7919) % N + 1, 0);
        jobs[i]->pri = (uint32_t)rng_below(&r, 8) * 1000;
        REQUIRE(job_ext_get(jobs[i]) != NULL);
        job_ext(jobs[i])->deadline = (int64_t)rng_below(&r, 8) - 4;
        ref[i] = jobs[i];
        REQ_IEQ(heap_insert(&h, jobs[i]), 0);
    }
    for (size_t i = 0; i < h.len; i++)
        REQ_UEQ(((Job *)h.items[i])->heap_pos, i);
    /* A job removed from the middle by its heap_pos. */
    Job *mid = jobs[N / 2];
    REQ_PEQ(heap_remove(&h, mid->heap_pos), mid);
    qsort(ref, N, sizeof *ref, by_deadline ? deadline_cmp : ready_cmp);
    for (size_t i = 0; i < N; i++) {
        if (ref[i] == mid)
            continue;
        Job *j = heap_pop(&h);
        REQ_PEQ(j, ref[i]);
        for (size_t k = 0; k < h.len; k++)
            if (k % 64 == 0)
                REQ_UEQ(((Job *)h.items[k])->heap_pos, k);
    }
    ck_assert_uint_eq(h.len, 0);
    heap_free(&h);
    for (size_t i = 0; i < N; i++)
        job_free(jobs[i]);
    free(jobs);
    free(ref);
}

START_TEST(ready_heap_order)
{
    heap_order(0, 1 + (uint64_t)_i);
}
END_TEST

START_TEST(deadline_heap_order)
{
    heap_order(1, 50 + (uint64_t)_i);
}
END_TEST

static Suite *job_suite(void)
{
    Suite *s = suite_create("job");
    TCase *tc = unit_tcase("job");

    tcase_add_test(tc, alloc_fields);
    tcase_add_test(tc, alloc_failure);
    tcase_add_test(tc, ext_on_demand);
    tcase_add_test(tc, created_and_ext_share_a_word);
    tcase_add_test(tc, cost);
    tcase_add_test(tc, state_names);
    suite_add_tcase(s, tc);

    tc = unit_tcase("table");
    tcase_add_test(tc, table_find_remove);
    tcase_add_test(tc, table_sparse_ids);
    tcase_add_test(tc, id_hash_spreads);
    suite_add_tcase(s, tc);

    tc = unit_tcase("order");
    tcase_add_test(tc, ready_less);
    tcase_add_test(tc, deadline_less);
    tcase_add_loop_test(tc, ready_heap_order, 0, 3);
    tcase_add_loop_test(tc, deadline_heap_order, 0, 3);
    suite_add_tcase(s, tc);
    return s;
}

UNIT_MAIN(job_suite)
