/* Unit tests for tube.c: the TubeSet (lookup, reference counts, list order)
 * and its timer heap. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "job.h"
#include "tube.h"
#include "unit.h"

static Tube *get(TubeSet *ts, const char *name)
{
    return tubes_get(ts, name, strlen(name));
}

static Tube *find(TubeSet *ts, const char *name)
{
    return tubes_find(ts, name, strlen(name));
}

/* list[i]->list_pos == i, every listed tube is findable by name, and the
 * hash holds exactly the listed tubes. */
static void check_set(TubeSet *ts)
{
    REQUIRE(ts->len <= ts->cap);
    REQ_UEQ(ts->by_name.len, ts->len);
    for (size_t i = 0; i < ts->len; i++) {
        Tube *t = ts->list[i];
        REQ_UEQ(t->list_pos, i);
        REQ_PEQ(tubes_find(ts, t->name, t->name_len), t);
        REQ_UEQ(strlen(t->name), t->name_len);
    }
}

/* The timer heap holds exactly the tubes with timer_at < INT64_MAX, each
 * knows its index, and no tube is due before its parent. */
static void check_timers(TubeSet *ts)
{
    const Heap *h = &ts->timers;
    size_t due = 0;

    for (size_t i = 0; i < h->len; i++) {
        const Tube *t = h->items[i];
        REQ_UEQ(t->timer_pos, i);
        REQUIRE(t->timer_at != INT64_MAX);
        if (i > 0)
            REQUIRE(((const Tube *)h->items[(i - 1) / 2])->timer_at <=
                    t->timer_at);
    }
    for (size_t i = 0; i < ts->len; i++)
        due += ts->list[i]->timer_at != INT64_MAX;
    REQ_UEQ(due, h->len);
}

static void names_are(TubeSet *ts, const char *const *want, size_t n)
{
    ck_assert_uint_eq(ts->len, n);
    for (size_t i = 0; i < n; i++)
        ck_assert_str_eq(ts->list[i]->name, want[i]);
    check_set(ts);
}

START_TEST(create_and_find)
{
    TubeSet ts;
    Tube *a, *b;

    ck_assert_int_eq(tubes_init(&ts), 0);
    ck_assert_ptr_null(find(&ts, "default"));
    a = get(&ts, "default");
    ck_assert_ptr_nonnull(a);
    ck_assert_str_eq(a->name, "default");
    ck_assert_uint_eq(a->name_len, 7);
    ck_assert_uint_eq(a->refs, 0);
    ck_assert_uint_eq(a->ready.len, 0);
    ck_assert_uint_eq(a->delay.len, 0);
    ck_assert(list_empty(&a->buried));
    ck_assert_uint_eq(a->waitq_len, 0);
    ck_assert_int_eq(a->pause, 0);
    ck_assert(!tube_paused(a));
    ck_assert_int_eq(a->timer_at, INT64_MAX);
    ck_assert_ptr_eq(find(&ts, "default"), a);
    /* Getting it again gives the same tube. */
    ck_assert_ptr_eq(get(&ts, "default"), a);
    ck_assert_uint_eq(ts.len, 1);

    b = get(&ts, "other");
    ck_assert_ptr_ne(a, b);
    ck_assert_ptr_eq(find(&ts, "other"), b);
    /* Names are compared by length and bytes. */
    ck_assert_ptr_null(find(&ts, "defaul"));
    ck_assert_ptr_null(find(&ts, "defaultx"));
    ck_assert_ptr_null(find(&ts, "Default"));
    ck_assert_ptr_eq(tubes_find(&ts, "default-and-more", 7), a);
    check_set(&ts);
    tubes_free(&ts);
}
END_TEST

START_TEST(longest_name)
{
    TubeSet ts;
    char name[MAX_TUBE_NAME + 1];
    Tube *t;

    memset(name, 'n', MAX_TUBE_NAME);
    name[MAX_TUBE_NAME] = 'X'; /* not part of the name */
    ck_assert_int_eq(tubes_init(&ts), 0);
    t = tubes_get(&ts, name, MAX_TUBE_NAME);
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(t->name_len, MAX_TUBE_NAME);
    /* NUL-terminated for the YAML writers. */
    ck_assert_uint_eq(strlen(t->name), MAX_TUBE_NAME);
    ck_assert_ptr_eq(tubes_find(&ts, name, MAX_TUBE_NAME), t);
    ck_assert_ptr_null(tubes_find(&ts, name, MAX_TUBE_NAME - 1));
    tubes_free(&ts);
}
END_TEST

START_TEST(refcount_frees)
{
    TubeSet ts;
    Tube *t;

    ck_assert_int_eq(tubes_init(&ts), 0);
    t = get(&ts, "work");
    tube_ref(t);
    tube_ref(t);
    tube_ref(t);
    ck_assert_uint_eq(t->refs, 3);
    tube_unref(&ts, t);
    tube_unref(&ts, t);
    ck_assert_ptr_eq(find(&ts, "work"), t);
    ck_assert_uint_eq(t->refs, 1);
    tube_unref(&ts, t); /* the last one frees it (ASan sees any later use) */
    ck_assert_ptr_null(find(&ts, "work"));
    ck_assert_uint_eq(ts.len, 0);
    ck_assert_uint_eq(ts.by_name.len, 0);

    /* The name can be used again: a new tube, at the end of the list. */
    Tube *d = get(&ts, "default");
    tube_ref(d);
    t = get(&ts, "work");
    ck_assert_ptr_nonnull(t);
    ck_assert_uint_eq(t->refs, 0);
    ck_assert_uint_eq(t->list_pos, 1);
    tube_ref(t);
    tube_unref(&ts, t);
    tube_unref(&ts, d);
    ck_assert_uint_eq(ts.len, 0);
    tubes_free(&ts);
}
END_TEST

/* list-tubes order: creation order, a removed tube's slot taken by the
 * last one (as beanstalkd does). */
START_TEST(list_order_swap_removal)
{
    static const char *const names[] = {"a", "b", "c", "d", "e"};
    TubeSet ts;
    Tube *t[5];

    ck_assert_int_eq(tubes_init(&ts), 0);
    for (int i = 0; i < 5; i++) {
        t[i] = get(&ts, names[i]);
        tube_ref(t[i]);
    }
    names_are(&ts, names, 5);

    tube_unref(&ts, t[1]); /* b: e takes its slot */
    names_are(&ts, (const char *const[]){"a", "e", "c", "d"}, 4);
    tube_unref(&ts, t[3]); /* d is last: nothing moves */
    names_are(&ts, (const char *const[]){"a", "e", "c"}, 3);
    tube_unref(&ts, t[0]); /* a: c takes its slot */
    names_are(&ts, (const char *const[]){"c", "e"}, 2);
    tube_ref(get(&ts, "f"));
    names_are(&ts, (const char *const[]){"c", "e", "f"}, 3);
    tube_unref(&ts, t[2]);
    tube_unref(&ts, t[4]);
    names_are(&ts, (const char *const[]){"f"}, 1);
    tube_unref(&ts, find(&ts, "f"));
    ck_assert_uint_eq(ts.len, 0);
    tubes_free(&ts);
}
END_TEST

/* Many tubes: the list and the hash grow, and shrink back when the tubes
 * go; lookups stay right throughout. Random removal order against a
 * reference list maintained with the same swap rule. */
START_TEST(many_tubes)
{
    enum { N = 1500 };
    TubeSet ts;
    Tube **ref = calloc(N, sizeof *ref);
    size_t nref = 0, maxcap;
    char name[32];
    Rng r;

    rng_seed(&r, 3);
    ck_assert_int_eq(tubes_init(&ts), 0);
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "tube-%d", i);
        Tube *t = get(&ts, name);
        REQUIRE(t != NULL);
        tube_ref(t);
        ref[nref++] = t;
    }
    check_set(&ts);
    maxcap = ts.cap;
    ck_assert_uint_ge(maxcap, N);
    ck_assert_uint_ge(ts.by_name.nbuckets, N);
    while (nref > 3) {
        size_t k = (size_t)rng_below(&r, nref);
        tube_unref(&ts, ref[k]);
        ref[k] = ref[--nref];
        REQ_UEQ(ts.len, nref);
        for (size_t i = 0; i < nref; i++)
            REQ_PEQ(ts.list[i], ref[i]);
        if (nref % 100 == 0)
            check_set(&ts);
    }
    check_set(&ts);
    ck_assert_uint_le(ts.cap, 16);
    ck_assert_uint_eq(ts.by_name.nbuckets, 16);
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "tube-%d", i);
        Tube *t = find(&ts, name);
        int live = 0;
        for (size_t k = 0; k < nref; k++)
            live |= ref[k] == t;
        REQUIRE(t == NULL || live);
    }
    tubes_free(&ts); /* frees the three still listed */
    free(ref);
}
END_TEST

START_TEST(get_out_of_memory)
{
    TubeSet ts;
    char name[16];

    ck_assert_int_eq(tubes_init(&ts), 0);
    /* First tube: the list array cannot be allocated. */
    alloc_fail_after(1);
    ck_assert_ptr_null(get(&ts, "a"));
    ck_assert_uint_eq(ts.len, 0);
    ck_assert_ptr_null(find(&ts, "a"));
    /* The tube itself cannot be allocated. */
    alloc_fail_after(2);
    ck_assert_ptr_null(get(&ts, "a"));
    ck_assert_uint_eq(ts.len, 0);
    ck_assert_ptr_null(find(&ts, "a"));
    ck_assert_uint_eq(ts.by_name.len, 0);
    alloc_fail_after(0);

    /* Fill the list to its first capacity, then fail its growth. */
    for (int i = 0; i < 16; i++) {
        snprintf(name, sizeof name, "t%d", i);
        tube_ref(get(&ts, name));
    }
    ck_assert_uint_eq(ts.cap, 16);
    alloc_fail_after(1);
    ck_assert_ptr_null(get(&ts, "x"));
    ck_assert_uint_eq(ts.len, 16);
    check_set(&ts);
    /* The hash cannot grow: the tube is still created (hash_insert cannot
     * fail; chains get longer). Allocations: list, tube, buckets. */
    alloc_fail_after(3);
    Tube *x = get(&ts, "x");
    alloc_fail_after(0);
    ck_assert_ptr_nonnull(x);
    ck_assert_uint_eq(ts.by_name.nbuckets, 16);
    ck_assert_ptr_eq(find(&ts, "x"), x);
    check_set(&ts);
    tubes_free(&ts);
}
END_TEST

/* ---- the timer heap ---- */

static Job *delayed_job(Tube *t, uint64_t id, int64_t deadline)
{
    Job *j = job_alloc(id, 0);

    ck_assert_ptr_nonnull(j);
    j->tube = t;
    ck_assert_ptr_nonnull(job_ext_get(j));
    job_ext(j)->deadline = deadline;
    j->state = JOB_DELAYED;
    ck_assert_int_eq(heap_insert(&t->delay, j), 0);
    return j;
}

static void drop_delayed(Tube *t, Job *j)
{
    ck_assert_ptr_eq(heap_remove(&t->delay, j->heap_pos), j);
    job_free(j);
}

static void pause_tube(Tube *t, int64_t until)
{
    t->pause = 1; /* any non-zero duration */
    t->unpause_at = until;
}

static void unpause_tube(Tube *t)
{
    t->pause = 0;
    t->unpause_at = 0;
}

START_TEST(timer_delayed_jobs)
{
    TubeSet ts;
    Tube *a, *b;
    Job *ja, *ja2, *jb;

    ck_assert_int_eq(tubes_init(&ts), 0);
    a = get(&ts, "a");
    b = get(&ts, "b");
    tube_ref(a);
    tube_ref(b);

    /* Nothing due: not in the heap. */
    ck_assert_int_eq(tube_timer_update(&ts, a), 0);
    ck_assert_uint_eq(ts.timers.len, 0);
    ck_assert_int_eq(a->timer_at, INT64_MAX);

    ja = delayed_job(a, 1, 5000);
    ck_assert_int_eq(tube_timer_update(&ts, a), 0);
    ck_assert_int_eq(a->timer_at, 5000);
    ck_assert_ptr_eq(heap_top(&ts.timers), a);

    jb = delayed_job(b, 2, 3000);
    ck_assert_int_eq(tube_timer_update(&ts, b), 0);
    ck_assert_ptr_eq(heap_top(&ts.timers), b);
    check_timers(&ts);

    /* An earlier job in a: a moves to the top. */
    ja2 = delayed_job(a, 3, 1000);
    ck_assert_int_eq(tube_timer_update(&ts, a), 0);
    ck_assert_int_eq(a->timer_at, 1000);
    ck_assert_ptr_eq(heap_top(&ts.timers), a);
    check_timers(&ts);

    /* That job leaves: a is due at 5000 again, b is first. */
    drop_delayed(a, ja2);
    ck_assert_int_eq(tube_timer_update(&ts, a), 0);
    ck_assert_int_eq(a->timer_at, 5000);
    ck_assert_ptr_eq(heap_top(&ts.timers), b);
    check_timers(&ts);

    /* b empties: it leaves the heap. */
    drop_delayed(b, jb);
    ck_assert_int_eq(tube_timer_update(&ts, b), 0);
    ck_assert_int_eq(b->timer_at, INT64_MAX);
    ck_assert_uint_eq(ts.timers.len, 1);
    ck_assert_ptr_eq(heap_top(&ts.timers), a);
    check_timers(&ts);

    /* An update with nothing changed is a no-op. */
    ck_assert_int_eq(tube_timer_update(&ts, a), 0);
    ck_assert_int_eq(tube_timer_update(&ts, b), 0);
    ck_assert_uint_eq(ts.timers.len, 1);

    /* Freeing a tube that is in the timer heap takes it out. */
    drop_delayed(a, ja);
    ja = delayed_job(a, 4, 7000);
    ck_assert_int_eq(tube_timer_update(&ts, a), 0);
    jb = delayed_job(b, 5, 8000);
    ck_assert_int_eq(tube_timer_update(&ts, b), 0);
    ck_assert_uint_eq(ts.timers.len, 2);
    drop_delayed(a, ja); /* jobs belong to the server, not the tube */
    tube_unref(&ts, a);
    ck_assert_uint_eq(ts.timers.len, 1);
    ck_assert_ptr_eq(heap_top(&ts.timers), b);
    check_timers(&ts);

    drop_delayed(b, jb);
    tube_unref(&ts, b);
    ck_assert_uint_eq(ts.timers.len, 0);
    tubes_free(&ts);
}
END_TEST

START_TEST(timer_pause)
{
    TubeSet ts;
    Tube *a, *b;
    Job *j;

    ck_assert_int_eq(tubes_init(&ts), 0);
    a = get(&ts, "a");
    b = get(&ts, "b");
    tube_ref(a);
    tube_ref(b);

    pause_tube(a, 9000);
    ck_assert_int_eq(tube_timer_update(&ts, a), 0);
    ck_assert_int_eq(a->timer_at, 9000);
    ck_assert(tube_paused(a));

    /* A delayed job before the unpause: due at the job. */
    j = delayed_job(a, 1, 4000);
    ck_assert_int_eq(tube_timer_update(&ts, a), 0);
    ck_assert_int_eq(a->timer_at, 4000);

    /* The unpause comes first: due at the unpause. */
    pause_tube(a, 2000);
    ck_assert_int_eq(tube_timer_update(&ts, a), 0);
    ck_assert_int_eq(a->timer_at, 2000);

    pause_tube(b, 1000);
    ck_assert_int_eq(tube_timer_update(&ts, b), 0);
    ck_assert_ptr_eq(heap_top(&ts.timers), b);
    check_timers(&ts);

    /* Unpausing a leaves its delayed job as the due time. */
    unpause_tube(a);
    ck_assert_int_eq(tube_timer_update(&ts, a), 0);
    ck_assert_int_eq(a->timer_at, 4000);
    check_timers(&ts);

    /* Unpausing b with nothing delayed takes it out. */
    unpause_tube(b);
    ck_assert_int_eq(tube_timer_update(&ts, b), 0);
    ck_assert_int_eq(b->timer_at, INT64_MAX);
    ck_assert_uint_eq(ts.timers.len, 1);
    check_timers(&ts);

    drop_delayed(a, j);
    ck_assert_int_eq(tube_timer_update(&ts, a), 0);
    ck_assert_uint_eq(ts.timers.len, 0);
    tube_unref(&ts, a);
    tube_unref(&ts, b);
    tubes_free(&ts);
}
END_TEST

/* Randomised: tubes gain and lose delayed jobs and pauses; after every
 * update the heap is valid and its top is the tube with the earliest due
 * time computed independently. */
START_TEST(timer_random)
{
    enum { NT = 40, OPS = 3000, MAXJ = 8 };
    TubeSet ts;
    Tube *t[NT];
    Job *jobs[NT][MAXJ];
    size_t njobs[NT] = {0};
    uint64_t next_id = 1;
    char name[16];
    Rng r;

    rng_seed(&r, 100 + (uint64_t)_i);
    ck_assert_int_eq(tubes_init(&ts), 0);
    for (int i = 0; i < NT; i++) {
        snprintf(name, sizeof name, "t%d", i);
        t[i] = get(&ts, name);
        tube_ref(t[i]);
    }
    for (int op = 0; op < OPS; op++) {
        int i = (int)rng_below(&r, NT);
        switch (rng_below(&r, 4)) {
        case 0:
            if (njobs[i] < MAXJ)
                jobs[i][njobs[i]++] = delayed_job(
                    t[i], next_id++, (int64_t)rng_below(&r, 100000));
            break;
        case 1:
            if (njobs[i]) {
                size_t k = (size_t)rng_below(&r, njobs[i]);
                drop_delayed(t[i], jobs[i][k]);
                jobs[i][k] = jobs[i][--njobs[i]];
            }
            break;
        case 2:
            pause_tube(t[i], (int64_t)rng_below(&r, 100000));
            break;
        default:
            unpause_tube(t[i]);
            break;
        }
        REQ_IEQ(tube_timer_update(&ts, t[i]), 0);
        check_timers(&ts);

        /* Reference: the earliest due time over all tubes. */
        int64_t best = INT64_MAX;
        for (int k = 0; k < NT; k++) {
            int64_t due = INT64_MAX;
            for (size_t m = 0; m < njobs[k]; m++)
                if (job_ext(jobs[k][m])->deadline < due)
                    due = job_ext(jobs[k][m])->deadline;
            if (t[k]->pause && t[k]->unpause_at < due)
                due = t[k]->unpause_at;
            REQ_IEQ(t[k]->timer_at, due);
            if (due < best)
                best = due;
        }
        const Tube *top = heap_top(&ts.timers);
        REQ_IEQ(top ? top->timer_at : INT64_MAX, best);
    }
    for (int i = 0; i < NT; i++) {
        while (njobs[i])
            drop_delayed(t[i], jobs[i][--njobs[i]]);
        tube_unref(&ts, t[i]);
    }
    ck_assert_uint_eq(ts.timers.len, 0);
    ck_assert_uint_eq(ts.len, 0);
    tubes_free(&ts);
}
END_TEST

/* Entering the timer heap is the one update that can fail: -1, and the
 * tube stays out of the heap with timer_at unchanged. */
START_TEST(timer_insert_failure)
{
    TubeSet ts;
    Tube *a;
    Job *j;

    ck_assert_int_eq(tubes_init(&ts), 0);
    a = get(&ts, "a");
    tube_ref(a);
    j = delayed_job(a, 1, 100);
    alloc_fail_after(1); /* the timer heap has no array yet */
    ck_assert_int_eq(tube_timer_update(&ts, a), -1);
    alloc_fail_after(0);
    ck_assert_int_eq(a->timer_at, INT64_MAX);
    ck_assert_uint_eq(ts.timers.len, 0);
    check_timers(&ts);
    /* It works once memory is back. */
    ck_assert_int_eq(tube_timer_update(&ts, a), 0);
    ck_assert_int_eq(a->timer_at, 100);
    /* Moving within the heap never allocates. */
    Job *j2 = delayed_job(a, 2, 50);
    alloc_fail_after(1);
    ck_assert_int_eq(tube_timer_update(&ts, a), 0);
    alloc_fail_after(0);
    ck_assert_int_eq(a->timer_at, 50);
    drop_delayed(a, j2);
    drop_delayed(a, j);
    alloc_fail_after(1);
    ck_assert_int_eq(tube_timer_update(&ts, a), 0); /* removal */
    alloc_fail_after(0);
    ck_assert_uint_eq(ts.timers.len, 0);
    tube_unref(&ts, a);
    tubes_free(&ts);
}
END_TEST

static Suite *tube_suite(void)
{
    Suite *s = suite_create("tube");
    TCase *tc = unit_tcase("set");

    tcase_add_test(tc, create_and_find);
    tcase_add_test(tc, longest_name);
    tcase_add_test(tc, refcount_frees);
    tcase_add_test(tc, list_order_swap_removal);
    tcase_add_test(tc, many_tubes);
    tcase_add_test(tc, get_out_of_memory);
    suite_add_tcase(s, tc);

    tc = unit_tcase("timers");
    tcase_add_test(tc, timer_delayed_jobs);
    tcase_add_test(tc, timer_pause);
    tcase_add_loop_test(tc, timer_random, 0, 10);
    tcase_add_test(tc, timer_insert_failure);
    suite_add_tcase(s, tc);
    return s;
}

UNIT_MAIN(tube_suite)
