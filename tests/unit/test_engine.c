/* Unit tests for engine.h's public operations end to end, in-process:
 * put/find/peek/body, move-job, flush-tube and its graveyard, pause,
 * list-jobs paging, the oldest ready age, tubes coming and going, and a
 * parked worker served by a later put. No sockets, no binlog (eworld.h). */
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
    tcase_add_test(tc, pause_and_next_due);
    tcase_add_test(tc, oldest_ready_age);
    suite_add_tcase(s, tc);
    return s;
}

UNIT_MAIN(engine_suite)
