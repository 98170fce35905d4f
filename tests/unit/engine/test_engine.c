/* Unit tests for engine.h's public operations end to end, in-process:
 * put/find/peek/body, move-job, flush-tube and its graveyard, pause,
 * list-jobs paging, the oldest ready age, tubes coming and going, a
 * parked worker served by a later put, and a session of every operation
 * with allocation failure swept over each of its allocations. No sockets,
 * no binlog (eworld.h). */
#include <stdio.h>
#include <stdlib.h>

#include "eworld.h"
#include "grave.h"

#define SEC NS_PER_SEC

START_TEST(put_find_peek_body)
{
    EWorld x;
    Tube *t;
    Job *j;
    uint64_t a, b, c;

    ew_init(&x, NULL);
    t = ew_tube(&x, "t");
    a = ew_put(&x, t, "alpha", 9, 0, 60);
    b = ew_put(&x, t, "beta", 2, 0, 60);
    c = ew_put(&x, t, "gamma", 0, 30, 60);
    ck_assert_uint_eq(b, a + 1);
    ck_assert_uint_eq(c, b + 1);
    j = engine_find(&x.e, a);
    ck_assert_ptr_nonnull(j);
    ck_assert_ptr_eq(j->tube, t);
    ck_assert_uint_eq(j->body_size, 5);
    ck_assert_int_eq(memcmp(engine_body(&x.e, j), "alpha", 5), 0);
    ck_assert_uint_eq(engine_peek(&x.e, t, JOB_READY)->id, b);  /* best pri */
    ck_assert_uint_eq(engine_peek(&x.e, t, JOB_DELAYED)->id, c);
    ck_assert_ptr_null(engine_peek(&x.e, t, JOB_BURIED));
    ck_assert_ptr_null(engine_peek(&x.e, x.e.default_tube, JOB_READY));
    ck_assert_ptr_null(engine_find(&x.e, c + 1));
    /* No binlog: nothing to wait for. */
    ck_assert_uint_eq(engine_ticket(&x.e), 0);
    ew_free(&x);
}
END_TEST

/* An id is taken by engine_job_new() even when the job is never put. */
START_TEST(dropped_job_keeps_its_id_used)
{
    EWorld x;
    Job *j;
    uint64_t a, b, dropped;

    ew_init(&x, NULL);
    a = ew_put(&x, x.e.default_tube, "a", 0, 0, 60);
    j = engine_job_new(&x.e, x.e.default_tube, 1, 0, 0, 60);
    ck_assert_ptr_nonnull(j);
    dropped = j->id;
    engine_job_drop(&x.e, j);
    b = ew_put(&x, x.e.default_tube, "b", 0, 0, 60);
    ck_assert_uint_eq(dropped, a + 1);
    ck_assert_uint_eq(b, a + 2);
    ck_assert_ptr_null(engine_find(&x.e, dropped));
    ck_assert_uint_eq(x.e.default_tube->total_jobs, 2);
    ew_free(&x);
}
END_TEST

/* flush-tube deletes every ready, delayed and buried job of the tube at
 * once and leaves reserved ones with their worker; the jobs are freed by
 * the loop afterwards. */
START_TEST(flush_tube_keeps_reserved)
{
    EWorld x;
    Rec r;
    Tube *t, *other;
    uint64_t held, buried, keep, ids[5];

    ew_init(&x, NULL);
    t = ew_tube(&x, "t");
    other = ew_tube(&x, "other");
    rec_init(&x, &r, "t");
    held = ew_put(&x, t, "held", 0, 0, 60);
    ck_assert_uint_eq(ew_reserve(&x, &r), held);
    buried = ew_put(&x, t, "buried", 0, 0, 60);
    ck_assert_uint_eq(ew_reserve(&x, &r), buried);
    ck_assert_int_eq(engine_bury(&x.e, &r.w, buried, 0), ENG_OK);
    for (int i = 0; i < 5; i++)
        ids[i] = ew_put(&x, t, "j", (uint32_t)i, i % 2 ? 100 : 0, 60);
    keep = ew_put(&x, other, "keep", 0, 0, 60);

    ck_assert_int_eq(engine_flush_tube(&x.e, t), 6);
    for (int i = 0; i < 5; i++)
        ck_assert_ptr_null(engine_find(&x.e, ids[i]));
    ck_assert_ptr_null(engine_find(&x.e, buried));
    ck_assert_int_eq(ew_state(&x, held), JOB_RESERVED);
    ck_assert_int_eq(ew_state(&x, keep), JOB_READY);
    ck_assert_ptr_null(engine_peek(&x.e, t, JOB_READY));
    ck_assert_ptr_null(engine_peek(&x.e, t, JOB_DELAYED));
    ck_assert_ptr_null(engine_peek(&x.e, t, JOB_BURIED));
    ck_assert_uint_eq(x.e.jobs_ct.ready, 1);
    ck_assert_uint_eq(x.e.jobs_ct.delayed, 0);
    ck_assert_uint_eq(x.e.jobs_ct.buried, 0);
    ck_assert_uint_eq(t->reserved_ct, 1);
    /* The graveyard is emptied by the loop. */
    ck_assert_uint_eq(x.e.grave_jobs, 6);
    ew_later(&x, 1);
    ck_assert_uint_eq(x.e.grave_jobs, 0);
    /* The tube works as before; its reserved job can still be released. */
    ck_assert_int_eq(engine_release(&x.e, &r.w, held, 0, 0), ENG_OK);
    ck_assert_uint_eq(ew_counts(&x, t).ready, 1);
    ck_assert_int_eq(engine_flush_tube(&x.e, t), 1);
    ck_assert_int_eq(engine_flush_tube(&x.e, t), 0);
    worker_fini(&x.e, &r.w);
    ew_free(&x);
}
END_TEST

/* A flush of many jobs frees them a batch per loop iteration. */
START_TEST(flush_frees_in_batches)
{
    EWorld x;
    Tube *t;
    uint64_t n = 2 * GRAVE_BATCH + 10;

    ew_init(&x, NULL);
    t = ew_tube(&x, "t");
    for (uint64_t i = 0; i < n; i++)
        ew_put(&x, t, "x", 0, 0, 60);
    ck_assert_int_eq(engine_flush_tube(&x.e, t), (int64_t)n);
    ck_assert_uint_eq(x.e.grave_jobs, n);
    ew_later(&x, 1);
    ck_assert_uint_lt(x.e.grave_jobs, n);
    for (int i = 0; i < 10 && x.e.grave_jobs; i++)
        ew_later(&x, 1);
    ck_assert_uint_eq(x.e.grave_jobs, 0);
    ew_free(&x);
}
END_TEST

/* A tube freed while its flushed jobs wait: engine_free() frees them. */
START_TEST(free_with_flushed_jobs_pending)
{
    EWorld x;
    Tube *t;

    ew_init(&x, NULL);
    t = ew_tube(&x, "t");
    for (int i = 0; i < 100; i++)
        ew_put(&x, t, "x", 0, 0, 60);
    ck_assert_int_eq(engine_flush_tube(&x.e, t), 100);
    ew_free(&x); /* ASan/LSan: nothing leaks */
}
END_TEST

START_TEST(move_job_between_tubes)
{
    EWorld x;
    Rec r;
    Tube *a, *b, *full;
    Job *j;
    uint64_t d, held;

    ew_init(&x, "[tube full]\nmax_items = 1\n");
    a = ew_tube(&x, "a");
    b = ew_tube(&x, "b");
    full = ew_tube(&x, "full");
    rec_init(&x, &r, "a");
    ew_put(&x, full, "f", 0, 0, 60);
    held = ew_put(&x, a, "held", 0, 0, 60);
    ck_assert_uint_eq(ew_reserve(&x, &r), held);
    d = ew_put(&x, a, "delayed", 6, 100, 45);
    ck_assert_int_eq(engine_move_job(&x.e, d, b), ENG_OK);
    j = engine_find(&x.e, d);
    ck_assert_ptr_eq(j->tube, b);
    ck_assert_int_eq(j->state, JOB_DELAYED);   /* its state is kept */
    ck_assert_uint_eq(j->pri, 6);
    ck_assert_uint_eq(j->ttr, 45);
    ck_assert_uint_eq(ew_counts(&x, a).delayed, 0);
    ck_assert_uint_eq(ew_counts(&x, b).delayed, 1);
    ck_assert_int_eq(engine_move_job(&x.e, d, b), ENG_OK);       /* already there */
    ck_assert_int_eq(engine_move_job(&x.e, held, b), ENG_NOT_FOUND);
    ck_assert_int_eq(engine_move_job(&x.e, 12345, b), ENG_NOT_FOUND);
    ck_assert_int_eq(engine_move_job(&x.e, d, full), ENG_FULL);
    ck_assert_ptr_eq(engine_find(&x.e, d)->tube, b);             /* left as it was */
    worker_fini(&x.e, &r.w);
    ew_free(&x);
}
END_TEST

/* list-jobs: ascending ids, paged by `from`, filtered by state. */
START_TEST(list_jobs_pages)
{
    EWorld x;
    Rec r;
    Tube *t, *other;
    uint64_t ids[40], page[7], got[40];
    uint32_t n, total = 0;
    uint64_t from = 0;
    size_t nids = 0, nb = 0, nd = 0;

    ew_init(&x, NULL);
    t = ew_tube(&x, "t");
    other = ew_tube(&x, "other");
    rec_init(&x, &r, "t");
    for (int i = 0; i < 40; i++) {
        /* Interleaved with another tube's jobs: t's ids are not dense. */
        if (i % 3 == 0)
            ew_put(&x, other, "o", 0, 0, 60);
        ids[nids++] = ew_put(&x, t, "j", (uint32_t)(40 - i), i % 4 == 1 ? 50 : 0, 60);
        nd += i % 4 == 1;
    }
    /* Bury three of the ready ones (the best by priority). */
    for (int i = 0; i < 3; i++) {
        uint64_t id = ew_reserve(&x, &r);
        ck_assert_uint_ne(id, 0);
        ck_assert_int_eq(engine_bury(&x.e, &r.w, id, 0), ENG_OK);
        nb++;
    }
    /* All, seven at a time. */
    while ((n = engine_list_jobs(&x.e, t, -1, from, 7, page)) > 0) {
        ck_assert_uint_le(n, 7);
        for (uint32_t i = 0; i < n; i++) {
            ck_assert_uint_lt(total, 40);
            got[total++] = page[i];
        }
        from = page[n - 1] + 1;
    }
    ck_assert_uint_eq(total, 40);
    for (uint32_t i = 0; i < total; i++)
        ck_assert_uint_eq(got[i], ids[i]);
    /* By state. */
    n = engine_list_jobs(&x.e, t, JOB_DELAYED, 0, 40, got);
    ck_assert_uint_eq(n, nd);
    for (uint32_t i = 0; i < n; i++) {
        ck_assert_int_eq(ew_state(&x, got[i]), JOB_DELAYED);
        if (i)
            ck_assert_uint_gt(got[i], got[i - 1]);
    }
    n = engine_list_jobs(&x.e, t, JOB_BURIED, 0, 40, got);
    ck_assert_uint_eq(n, nb);
    n = engine_list_jobs(&x.e, t, JOB_RESERVED, 0, 40, got);
    ck_assert_uint_eq(n, 0);
    n = engine_list_jobs(&x.e, t, JOB_READY, 0, 40, got);
    ck_assert_uint_eq(n, 40 - nd - nb);
    /* From past the last id: nothing; from the last: just it. */
    ck_assert_uint_eq(engine_list_jobs(&x.e, t, -1, ids[39] + 1, 7, page), 0);
    ck_assert_uint_eq(engine_list_jobs(&x.e, t, -1, ids[39], 7, page), 1);
    ck_assert_uint_eq(page[0], ids[39]);
    /* Listing changed nothing. */
    ck_assert_uint_eq(ew_counts(&x, t).buried, nb);
    worker_fini(&x.e, &r.w);
    ew_free(&x);
}
END_TEST

/* list-jobs never shows an expired job, and does not expire it either. */
START_TEST(list_jobs_skips_expired)
{
    EWorld x;
    Tube *t;
    uint64_t a, b, out[4];

    ew_init(&x, "[tube t]\nmax_age = 5s\n");
    t = ew_tube(&x, "t");
    a = ew_put(&x, t, "a", 0, 0, 60);
    x.e.now += 3 * SEC;
    b = ew_put(&x, t, "b", 0, 0, 60);
    x.e.now += 2 * SEC; /* a's time has come; no timer has run */
    ck_assert_uint_eq(engine_list_jobs(&x.e, t, -1, 0, 4, out), 1);
    ck_assert_uint_eq(out[0], b);
    ck_assert_uint_eq(t->total_expired, 0);
    ck_assert_ptr_null(engine_find(&x.e, a)); /* a lookup expires it */
    ck_assert_uint_eq(t->total_expired, 1);
    ew_free(&x);
}
END_TEST

START_TEST(pause_and_next_due)
{
    EWorld x;
    Rec r;
    Tube *t;
    Job *j = NULL;
    uint64_t id;
    int64_t t0;

    ew_init(&x, NULL);
    t = ew_tube(&x, "t");
    rec_init(&x, &r, "t");
    t0 = x.e.now;
    ck_assert_int_eq(engine_next_due(&x.e), INT64_MAX);
    id = ew_put(&x, t, "j", 0, 0, 60);
    ck_assert_int_eq(engine_pause(&x.e, t, 60), ENG_OK);
    ck_assert_int_eq(engine_next_due(&x.e), t0 + 60 * SEC);
    ck_assert_int_eq(worker_reserve(&x.e, &r.w, 2 * SEC, &j), WAIT_PENDING);
    /* The wait's timeout comes first. */
    ck_assert_int_le(engine_next_due(&x.e), t0 + 2 * SEC);
    ew_at(&x, t0 + 2 * SEC);
    ck_assert_int_eq(r.n, 1);
    ck_assert_int_eq(r.how, WAIT_TIMED_OUT);
    /* Unpaused early (pause 0): at once. */
    ck_assert_int_eq(engine_pause(&x.e, t, 0), ENG_OK);
    ck_assert_uint_eq(ew_reserve(&x, &r), id);
    worker_fini(&x.e, &r.w);
    ew_free(&x);
}
END_TEST

START_TEST(oldest_ready_age)
{
    EWorld x;
    Rec r;
    Tube *t;
    uint64_t a;
    int64_t t0;

    ew_init(&x, NULL);
    t = ew_tube(&x, "t");
    rec_init(&x, &r, "t");
    t0 = x.e.now;
    ck_assert_uint_eq(engine_oldest_ready_age(&x.e, t), 0);
    a = ew_put(&x, t, "a", 0, 0, 60);
    ew_at(&x, t0 + 7 * SEC + SEC / 2);
    ck_assert_uint_eq(engine_oldest_ready_age(&x.e, t), 7);
    /* Reserved and released: ready again from now. */
    ck_assert_uint_eq(ew_reserve(&x, &r), a);
    ew_at(&x, t0 + 9 * SEC);
    ck_assert_int_eq(engine_release(&x.e, &r.w, a, 0, 0), ENG_OK);
    ew_at(&x, t0 + 12 * SEC);
    ck_assert_uint_eq(engine_oldest_ready_age(&x.e, t), 3);
    worker_fini(&x.e, &r.w);
    ew_free(&x);
}
END_TEST

/* A tube lives while something refers to it: a reference or a job. */
START_TEST(tubes_come_and_go)
{
    EWorld x;
    Tube *t;
    uint64_t id;

    ew_init(&x, NULL);
    ck_assert_ptr_null(engine_tube_find(&x.e, "x", 1));
    t = engine_tube(&x.e, "x", 1);
    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_eq(engine_tube_find(&x.e, "x", 1), t);
    engine_tube_ref(t);
    id = ew_put(&x, t, "j", 0, 0, 60);
    engine_tube_unref(&x.e, t);
    /* Its job keeps it. */
    ck_assert_ptr_eq(engine_tube_find(&x.e, "x", 1), t);
    ck_assert_int_eq(engine_delete(&x.e, NULL, id), ENG_OK);
    ck_assert_ptr_null(engine_tube_find(&x.e, "x", 1));
    /* The default tube always stays. */
    ck_assert_ptr_eq(engine_tube_find(&x.e, "default", 7), x.e.default_tube);
    ew_free(&x);
}
END_TEST

/* A worker parked on two tubes gets the first job put into either, once
 * the put has finished; a put into a tube it does not watch wakes nobody. */
START_TEST(parked_worker_served_by_put)
{
    EWorld x;
    Rec r;
    Tube *a, *b, *c;
    Job *j = NULL;
    uint64_t id;

    ew_init(&x, NULL);
    a = ew_tube(&x, "a");
    b = ew_tube(&x, "b");
    c = ew_tube(&x, "c");
    rec_init(&x, &r, "a");
    ck_assert_int_eq(watch_add(&r.w, b), 0);
    ck_assert_int_eq(worker_reserve(&x.e, &r.w, INT64_MAX, &j), WAIT_PENDING);
    ck_assert_uint_eq(engine_tube_waiting(&x.e, a), 1);
    ck_assert_uint_eq(engine_tube_waiting(&x.e, b), 1);
    ew_put(&x, c, "other", 0, 0, 60);
    ck_assert_int_eq(r.n, 0);
    id = ew_put(&x, b, "mine", 0, 0, 60);
    ck_assert_int_eq(r.n, 1);
    ck_assert_int_eq(r.how, WAIT_RESERVED);
    ck_assert_uint_eq(r.id, id);
    ck_assert_uint_eq(engine_tube_waiting(&x.e, a), 0);
    /* worker_release_all gives it back. */
    worker_release_all(&x.e, &r.w);
    ck_assert_int_eq(ew_state(&x, id), JOB_READY);
    worker_fini(&x.e, &r.w);
    ew_free(&x);
}
END_TEST

/* engine_expire_all sweeps every due expiry before a count. */
START_TEST(expire_all_before_counting)
{
    EWorld x;
    Tube *t;

    ew_init(&x, "max_age = 1s\n");
    t = ew_tube(&x, "t");
    for (int i = 0; i < 10; i++)
        ew_put(&x, t, "j", 0, 0, 60);
    ew_put(&x, x.e.default_tube, "d", 0, 0, 60);
    x.e.now += SEC;
    ck_assert_uint_eq(x.e.jobs_ct.ready, 11);
    engine_expire_all(&x.e);
    ck_assert_uint_eq(x.e.jobs_ct.ready, 0);
    ck_assert_uint_eq(t->total_expired, 10);
    ew_free(&x);
}
END_TEST


/* ---- allocation failure --------------------------------------------------- */

/* A put that tolerates running out of memory: the result (or
 * ENG_NO_MEMORY when no job could be made). */
static EngineResult try_put(EWorld *x, Tube *t, uint32_t pri, uint32_t delay)
{
    Job *j = engine_job_new(&x->e, t, 4, pri, delay, 60);
    EngineResult r;

    if (!j)
        return ENG_NO_MEMORY;
    memcpy(job_body_mut(j), "body", 4);
    r = engine_put(&x->e, j, t);
    if (r != ENG_OK && r != ENG_BURIED)
        engine_job_drop(&x->e, j);
    engine_deliver(&x->e);
    return r;
}

/* One session of every operation, with the n-th allocation failing. Each
 * result must be one the API allows; afterwards (injection off) every
 * tube's counters must agree with a recount and the engine must still
 * work; ASan/LSan see that nothing leaks. Returns whether the n-th
 * allocation was reached. */
static int session_failing_at(unsigned long n)
{
    EWorld x;
    Rec r;
    Tube *a, *b;
    Job *j;
    uint64_t id, ids[12], out[16];
    size_t nid = 0;
    unsigned long before;
    int reached;

    ew_init(&x, "[tube b]\nmax_items = 6\ndiscard_old_when_full = true\n"
                "max_age = 5s\nmove_expired_to = a\n");
    a = ew_tube(&x, "a");
    b = ew_tube(&x, "b");
    rec_init(&x, &r, "a");
    ck_assert_int_eq(watch_add(&r.w, b), 0);
    before = alloc_failures();
    alloc_fail_after(n);
    for (uint32_t i = 0; i < 12; i++) {
        EngineResult res = try_put(&x, i % 2 ? a : b, i % 5, i % 3 ? 0 : 10);
        REQUIRE(res == ENG_OK || res == ENG_BURIED || res == ENG_NO_MEMORY ||
                res == ENG_FULL);
        if (res == ENG_OK || res == ENG_BURIED)
            ids[nid++] = x.e.next_id - 1;
    }
    for (int i = 0; i < 4; i++) {
        int how = worker_reserve(&x.e, &r.w, 0, &j);
        REQUIRE(how == WAIT_RESERVED || how == WAIT_TIMED_OUT || how == WAIT_NO_MEMORY);
        if (how != WAIT_RESERVED)
            continue;
        id = j->id;
        switch (i) {
        case 0: {
            EngineResult res = engine_release(&x.e, &r.w, id, 1, 5);
            REQUIRE(res == ENG_OK || res == ENG_BURIED || res == ENG_NO_MEMORY);
            break;
        }
        case 1:
            REQUIRE(engine_bury(&x.e, &r.w, id, 0) == ENG_OK);
            break;
        case 2:
            REQUIRE(engine_touch(&x.e, &r.w, id) == ENG_OK);
            break;
        default:
            REQUIRE(engine_delete(&x.e, &r.w, id) == ENG_OK);
        }
    }
    (void)engine_kick(&x.e, a, 3);
    (void)engine_kick(&x.e, b, 3);
    for (size_t i = 0; i < nid; i++) {
        EngineResult res = engine_move_job(&x.e, ids[i], i % 2 ? b : a);
        REQUIRE(res == ENG_OK || res == ENG_NOT_FOUND || res == ENG_FULL);
    }
    (void)engine_pause(&x.e, a, 1);
    (void)engine_list_jobs(&x.e, b, -1, 0, 16, out);
    ew_later(&x, 6 * NS_PER_SEC);    /* delays end, jobs expire into a */
    (void)engine_flush_tube(&x.e, b);
    reached = alloc_failures() > before;
    alloc_fail_after(0);
    ew_later(&x, 1);
    (void)ew_counts(&x, a);
    (void)ew_counts(&x, b);
    /* Still works. */
    try_put(&x, a, 0, 0);
    ck_assert_uint_ne(ew_reserve(&x, &r), 0);
    worker_fini(&x.e, &r.w);
    (void)ew_counts(&x, a);
    ew_free(&x);
    return reached;
}

START_TEST(allocation_failure_swept)
{
    unsigned long n;

    for (n = 1; n < 5000 && session_failing_at(n); n++)
        ;
    ck_assert_uint_gt(n, 20); /* the session does allocate */
    if (getenv("UNIT_VERBOSE"))
        fprintf(stderr, "allocation failure swept over %lu allocations\n", n - 1);
    ck_assert_uint_lt(n, 5000);
}
END_TEST

/* Dense ids (one tube, every id), with holes and states mixed: pages by
 * lookups must give the same as the state filter over the whole set. */
START_TEST(list_jobs_dense_with_holes)
{
    EWorld x;
    Rec r;
    Tube *t;
    static uint64_t page[100], seen[1000];
    uint64_t first = 0, from = 0, id;
    uint32_t n, total = 0, ready = 0;

    ew_init(&x, NULL);
    t = ew_tube(&x, "t");
    rec_init(&x, &r, "t");
    for (int i = 0; i < 1000; i++) {
        id = ew_put(&x, t, "j", 0, i % 7 == 3 ? 60 : 0, 60);
        if (!first)
            first = id;
    }
    for (id = first; id < first + 1000; id += 5)
        ck_assert_int_eq(engine_delete(&x.e, NULL, id), ENG_OK);
    while ((n = engine_list_jobs(&x.e, t, -1, from, 100, page)) > 0) {
        for (uint32_t i = 0; i < n; i++) {
            ck_assert_uint_ne((page[i] - first) % 5, 0);   /* no deleted id */
            if (total)
                ck_assert_uint_gt(page[i], seen[total - 1]);
            ck_assert_uint_lt(total, 1000);
            seen[total++] = page[i];
        }
        from = page[n - 1] + 1;
    }
    ck_assert_uint_eq(total, 800);
    from = 0;
    while ((n = engine_list_jobs(&x.e, t, JOB_READY, from, 100, page)) > 0) {
        for (uint32_t i = 0; i < n; i++)
            ck_assert_int_eq(ew_state(&x, page[i]), JOB_READY);
        ready += n;
        from = page[n - 1] + 1;
    }
    ck_assert_uint_eq(ready, ew_counts(&x, t).ready);
    worker_fini(&x.e, &r.w);
    ew_free(&x);
}
END_TEST

static Suite *engine_suite(void)
{
    Suite *s = suite_create("engine");
    TCase *tc = unit_tcase("jobs");

    tcase_add_test(tc, put_find_peek_body);
    tcase_add_test(tc, dropped_job_keeps_its_id_used);
    tcase_add_test(tc, move_job_between_tubes);
    tcase_add_test(tc, tubes_come_and_go);
    tcase_add_test(tc, parked_worker_served_by_put);
    tcase_add_test(tc, expire_all_before_counting);
    suite_add_tcase(s, tc);
    tc = unit_tcase("operator");
    tcase_add_test(tc, flush_tube_keeps_reserved);
    tcase_add_test(tc, flush_frees_in_batches);
    tcase_add_test(tc, free_with_flushed_jobs_pending);
    tcase_add_test(tc, list_jobs_pages);
    tcase_add_test(tc, list_jobs_skips_expired);
    tcase_add_test(tc, list_jobs_dense_with_holes);
    tcase_add_test(tc, pause_and_next_due);
    tcase_add_test(tc, oldest_ready_age);
    suite_add_tcase(s, tc);
    tc = unit_tcase("no memory");
    tcase_add_test(tc, allocation_failure_swept);
    suite_add_tcase(s, tc);
    return s;
}

UNIT_MAIN(engine_suite)
