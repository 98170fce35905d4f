/* Unit tests for queue.c: a job's state changes (put, reserve, release,
 * bury, kick, delete, touch), delays, pauses and TTRs running out, with
 * the tube's and the engine's counters recounted after each step. No
 * sockets: an Engine (eworld.h) whose clock the test moves. */
#include <stdio.h>

#include "eworld.h"
#include "queue.h"

#define SEC NS_PER_SEC

static void counts_are(EWorld *x, Tube *t, uint64_t ready, uint64_t delayed,
                       uint64_t buried, uint64_t reserved)
{
    Counts c = ew_counts(x, t);

    ck_assert_uint_eq(c.ready, ready);
    ck_assert_uint_eq(c.delayed, delayed);
    ck_assert_uint_eq(c.buried, buried);
    ck_assert_uint_eq(c.reserved, reserved);
}

START_TEST(put_counts_ready_and_urgent)
{
    EWorld x;
    Tube *t;

    ew_init(&x, NULL);
    t = x.e.default_tube;
    ew_put(&x, t, "a", 0, 0, 60);
    ew_put(&x, t, "b", 1023, 0, 60);
    ew_put(&x, t, "c", 1024, 0, 60);
    ew_put(&x, t, "d", 7, 30, 60);
    counts_are(&x, t, 3, 1, 0, 0);
    ck_assert_uint_eq(t->urgent_ct, 2);       /* pri < 1024 */
    ck_assert_uint_eq(x.e.jobs_ct.ready, 3);
    ck_assert_uint_eq(x.e.jobs_ct.urgent, 2);
    ck_assert_uint_eq(x.e.jobs_ct.delayed, 1);
    ck_assert_uint_eq(t->total_jobs, 4);
    ck_assert_uint_eq(x.e.total_jobs, 4);
    ck_assert_uint_eq(t->cur_bytes, 4);
    ew_free(&x);
}
END_TEST

/* Ready jobs go out by priority, then by id (put order). */
START_TEST(reserve_by_priority_then_id)
{
    EWorld x;
    Rec r;
    uint64_t a, b, c, d;

    ew_init(&x, NULL);
    a = ew_put(&x, x.e.default_tube, "a", 5, 0, 60);
    b = ew_put(&x, x.e.default_tube, "b", 1, 0, 60);
    c = ew_put(&x, x.e.default_tube, "c", 5, 0, 60);
    d = ew_put(&x, x.e.default_tube, "d", 4294967295u, 0, 60);
    rec_init(&x, &r, NULL);
    ck_assert_uint_eq(ew_reserve(&x, &r), b);
    ck_assert_uint_eq(ew_reserve(&x, &r), a);
    ck_assert_uint_eq(ew_reserve(&x, &r), c);
    ck_assert_uint_eq(ew_reserve(&x, &r), d);
    ck_assert_uint_eq(ew_reserve(&x, &r), 0);
    ck_assert_uint_eq(x.e.nready_tubes, 0);     /* nothing left to hand out */
    counts_are(&x, x.e.default_tube, 0, 0, 0, 4);
    ck_assert_uint_eq(x.e.jobs_ct.reserved, 4);
    ck_assert_ptr_eq(job_ext(engine_find(&x.e, a))->owner, &r.w);
    ck_assert_uint_eq(job_ext(engine_find(&x.e, a))->reserves, 1);
    worker_fini(&x.e, &r.w);
    /* Its jobs came back, ready. */
    counts_are(&x, x.e.default_tube, 4, 0, 0, 0);
    ew_free(&x);
}
END_TEST

/* A worker watching several tubes gets the best job of them all, by
 * priority then id, whichever tube holds it: with few tubes (each watched
 * tube looked at) and with many, most of them empty (the wide worker
 * looks at the tubes with ready jobs only). */
START_TEST(reserve_best_across_tubes)
{
    static const uint32_t pri[] = {7, 2, 9, 2, 5, 1};
    enum { NPUT = sizeof pri / sizeof pri[0] };
    uint32_t ntubes = _i ? 40 : 3;
    EWorld x;
    Rec r;
    uint64_t id[NPUT];
    Tube *full[3];
    int order[NPUT] = {5, 1, 3, 4, 0, 2}; /* by (pri, id) */

    ew_init(&x, NULL);
    rec_init(&x, &r, NULL);
    for (uint32_t k = 0; k < 3; k++) {
        char name[16];
        snprintf(name, sizeof name, "full%u", k);
        full[k] = ew_tube(&x, name);
        ck_assert_int_eq(watch_add(&r.w, full[k]), 0);
    }
    for (uint32_t k = 3; k < ntubes; k++) {
        char name[16];
        Tube *t;
        snprintf(name, sizeof name, "empty%u", k);
        ck_assert_ptr_nonnull(t = engine_tube(&x.e, name, strlen(name)));
        ck_assert_int_eq(watch_add(&r.w, t), 0);
    }
    watch_remove(&x.e, &r.w, 0); /* the default tube */
    ck_assert_int_eq(watch_is_wide(&r.w), ntubes > WATCH_WIDE);
    /* Job i in tube i % 3: the best of each tube is never the best of all
     * but in one, and the tie (priority 2) is between two tubes. */
    for (int i = 0; i < NPUT; i++)
        id[i] = ew_put(&x, full[i % 3], "j", pri[i], 0, 60);
    for (int i = 0; i < NPUT; i++)
        ck_assert_msg(ew_reserve(&x, &r) == id[order[i]], "reserve %d: expected job %llu", i,
                      (unsigned long long)id[order[i]]);
    ck_assert_uint_eq(ew_reserve(&x, &r), 0);
    worker_fini(&x.e, &r.w);
    ew_free(&x);
}
END_TEST

/* release: with a delay the job waits, then becomes ready by itself. */
START_TEST(release_with_delay)
{
    EWorld x;
    Rec r;
    uint64_t id;
    int64_t t0;

    ew_init(&x, NULL);
    t0 = x.e.now;
    id = ew_put(&x, x.e.default_tube, "j", 10, 0, 60);
    rec_init(&x, &r, NULL);
    ck_assert_uint_eq(ew_reserve(&x, &r), id);
    ew_later(&x, 1000); /* the release, in a later wake-up than the reserve */
    t0 = x.e.now;
    ck_assert_int_eq(engine_release(&x.e, &r.w, id, 3, 5), ENG_OK);
    ck_assert_int_eq(ew_state(&x, id), JOB_DELAYED);
    ck_assert_uint_eq(engine_find(&x.e, id)->pri, 3);
    ck_assert_uint_eq(job_ext(engine_find(&x.e, id))->releases, 1);
    counts_are(&x, x.e.default_tube, 0, 1, 0, 0);
    /* The next timer is the delay's end. */
    ck_assert_int_eq(queue_next_due(&x.e), t0 + 5 * SEC);
    ew_at(&x, t0 + 5 * SEC - 1);
    ck_assert_int_eq(ew_state(&x, id), JOB_DELAYED);
    ck_assert_uint_eq(ew_reserve(&x, &r), 0);
    ew_at(&x, t0 + 5 * SEC);
    ck_assert_int_eq(ew_state(&x, id), JOB_READY);
    counts_are(&x, x.e.default_tube, 1, 0, 0, 0);
    ck_assert_int_eq(queue_next_due(&x.e), INT64_MAX);
    /* Released without delay: ready at once. */
    ck_assert_uint_eq(ew_reserve(&x, &r), id);
    ck_assert_int_eq(engine_release(&x.e, &r.w, id, 3, 0), ENG_OK);
    ck_assert_int_eq(ew_state(&x, id), JOB_READY);
    worker_fini(&x.e, &r.w);
    ew_free(&x);
}
END_TEST

/* Delayed jobs become ready in deadline order, not put order. */
START_TEST(delays_end_in_deadline_order)
{
    EWorld x;
    uint64_t late, soon;
    int64_t t0, t1;

    ew_init(&x, NULL);
    t0 = x.e.now;
    late = ew_put(&x, x.e.default_tube, "late", 0, 5, 60);
    ew_later(&x, 1000);
    t1 = x.e.now;
    soon = ew_put(&x, x.e.default_tube, "soon", 0, 2, 60);
    ck_assert_int_eq(queue_next_due(&x.e), t1 + 2 * SEC);
    ew_at(&x, t1 + 2 * SEC);
    ck_assert_int_eq(ew_state(&x, soon), JOB_READY);
    ck_assert_int_eq(ew_state(&x, late), JOB_DELAYED);
    ck_assert_int_eq(queue_next_due(&x.e), t0 + 5 * SEC);
    ew_at(&x, t0 + 5 * SEC);
    ck_assert_int_eq(ew_state(&x, late), JOB_READY);
    counts_are(&x, x.e.default_tube, 2, 0, 0, 0);
    ew_free(&x);
}
END_TEST

/* Equal delays given in one wake-up (one e->now) come due in the order the
 * commands gave them, as beanstalkd's per-command clock has it, not by id:
 * a put then a release of an older job, and two reserves' TTRs. */
START_TEST(equal_deadlines_keep_command_order)
{
    EWorld x;
    Rec r;
    uint64_t older, newer, a, b;

    ew_init(&x, NULL);
    older = ew_put(&x, x.e.default_tube, "older", 0, 0, 60);
    rec_init(&x, &r, NULL);
    ck_assert_uint_eq(ew_reserve(&x, &r), older);
    ew_later(&x, 1000);
    newer = ew_put(&x, x.e.default_tube, "newer", 0, 5, 60);
    ck_assert_int_eq(engine_release(&x.e, &r.w, older, 0, 5), ENG_OK);
    ck_assert_uint_eq(engine_peek(&x.e, x.e.default_tube, JOB_DELAYED)->id, newer);
    ck_assert_uint_eq(engine_kick(&x.e, x.e.default_tube, 1), 1);
    ck_assert_int_eq(ew_state(&x, newer), JOB_READY);
    ck_assert_int_eq(ew_state(&x, older), JOB_DELAYED);
    ck_assert_int_eq(engine_kick_job(&x.e, older), ENG_OK);

    /* Reserved in the order b, a (b has the higher priority): b's TTR ends
     * first although a has the lower id. */
    a = ew_put(&x, x.e.default_tube, "a", 9, 0, 60);
    b = ew_put(&x, x.e.default_tube, "b", 1, 0, 60);
    ck_assert_int_eq(engine_delete(&x.e, &r.w, older), ENG_OK);
    ck_assert_int_eq(engine_delete(&x.e, &r.w, newer), ENG_OK);
    ew_later(&x, 1000);
    ck_assert_uint_eq(ew_reserve(&x, &r), b);
    ck_assert_uint_eq(ew_reserve(&x, &r), a);
    ck_assert_ptr_eq(heap_top(&x.e.ttr), engine_find(&x.e, b));
    worker_fini(&x.e, &r.w);
    ew_free(&x);
}
END_TEST

/* bury, then kick: buried jobs are kicked before delayed ones. */
START_TEST(bury_and_kick)
{
    EWorld x;
    Rec r;
    Tube *t;
    uint64_t a, b, d;

    ew_init(&x, NULL);
    t = x.e.default_tube;
    a = ew_put(&x, t, "a", 0, 0, 60);
    b = ew_put(&x, t, "b", 0, 0, 60);
    d = ew_put(&x, t, "d", 0, 100, 60);
    rec_init(&x, &r, NULL);
    ck_assert_uint_eq(ew_reserve(&x, &r), a);
    ck_assert_uint_eq(ew_reserve(&x, &r), b);
    /* Bury needs the reservation. */
    ck_assert_int_eq(engine_bury(&x.e, NULL, a, 9), ENG_NOT_FOUND);
    ck_assert_int_eq(engine_bury(&x.e, &r.w, a, 9), ENG_OK);
    ck_assert_int_eq(engine_bury(&x.e, &r.w, b, 8), ENG_OK);
    ck_assert_int_eq(engine_bury(&x.e, &r.w, b, 8), ENG_NOT_FOUND);
    counts_are(&x, t, 0, 1, 2, 0);
    ck_assert_uint_eq(engine_find(&x.e, a)->pri, 9);
    ck_assert_uint_eq(job_ext(engine_find(&x.e, a))->buries, 1);
    /* One kick takes the oldest buried job; the delayed one waits. */
    ck_assert_uint_eq(engine_kick(&x.e, t, 1), 1);
    ck_assert_int_eq(ew_state(&x, a), JOB_READY);
    ck_assert_int_eq(ew_state(&x, b), JOB_BURIED);
    ck_assert_uint_eq(job_ext(engine_find(&x.e, a))->kicks, 1);
    /* Asking for more than there are: only the buried ones. */
    ck_assert_uint_eq(engine_kick(&x.e, t, 10), 1);
    ck_assert_int_eq(ew_state(&x, d), JOB_DELAYED);
    /* No buried job left: now the delayed ones. */
    ck_assert_uint_eq(engine_kick(&x.e, t, 10), 1);
    ck_assert_int_eq(ew_state(&x, d), JOB_READY);
    ck_assert_uint_eq(engine_kick(&x.e, t, 10), 0);
    counts_are(&x, t, 3, 0, 0, 0);
    worker_fini(&x.e, &r.w);
    ew_free(&x);
}
END_TEST

START_TEST(kick_job_only_buried_or_delayed)
{
    EWorld x;
    Rec r;
    uint64_t ready, delayed, held;

    ew_init(&x, NULL);
    held = ew_put(&x, x.e.default_tube, "h", 0, 0, 60);
    ready = ew_put(&x, x.e.default_tube, "r", 1, 0, 60);
    delayed = ew_put(&x, x.e.default_tube, "d", 0, 50, 60);
    rec_init(&x, &r, NULL);
    ck_assert_uint_eq(ew_reserve(&x, &r), held);
    ck_assert_int_eq(engine_kick_job(&x.e, ready), ENG_NOT_FOUND);
    ck_assert_int_eq(engine_kick_job(&x.e, held), ENG_NOT_FOUND);
    ck_assert_int_eq(engine_kick_job(&x.e, 999), ENG_NOT_FOUND);
    ck_assert_int_eq(engine_kick_job(&x.e, delayed), ENG_OK);
    ck_assert_int_eq(ew_state(&x, delayed), JOB_READY);
    counts_are(&x, x.e.default_tube, 2, 0, 0, 1);
    worker_fini(&x.e, &r.w);
    ew_free(&x);
}
END_TEST

/* delete: any job but one another worker holds. */
START_TEST(delete_in_every_state)
{
    EWorld x;
    Rec r, other;
    Tube *t;
    uint64_t held, ready, delayed, buried;

    ew_init(&x, NULL);
    t = x.e.default_tube;
    held = ew_put(&x, t, "held", 0, 0, 60);
    buried = ew_put(&x, t, "buried", 1, 0, 60);
    ready = ew_put(&x, t, "ready", 2, 0, 60);
    delayed = ew_put(&x, t, "delayed", 0, 9, 60);
    rec_init(&x, &r, NULL);
    rec_init(&x, &other, NULL);
    ck_assert_uint_eq(ew_reserve(&x, &r), held);
    ck_assert_uint_eq(ew_reserve(&x, &other), buried);
    ck_assert_int_eq(engine_bury(&x.e, &other.w, buried, 1), ENG_OK);
    ck_assert_int_eq(engine_delete(&x.e, &other.w, held), ENG_NOT_FOUND);
    ck_assert_int_eq(ew_state(&x, held), JOB_RESERVED);
    ck_assert_int_eq(engine_delete(&x.e, &r.w, held), ENG_OK);
    ck_assert_int_eq(engine_delete(&x.e, &other.w, ready), ENG_OK);
    ck_assert_int_eq(engine_delete(&x.e, &other.w, delayed), ENG_OK);
    ck_assert_int_eq(engine_delete(&x.e, &r.w, buried), ENG_OK);
    ck_assert_int_eq(engine_delete(&x.e, &r.w, buried), ENG_NOT_FOUND);
    ck_assert_ptr_null(engine_find(&x.e, held));
    ck_assert_ptr_null(engine_find(&x.e, ready));
    counts_are(&x, t, 0, 0, 0, 0);
    ck_assert_uint_eq(t->cur_bytes, 0);
    ck_assert_uint_eq(t->cmd_delete, 4);
    ck_assert_uint_eq(x.e.jobs_ct.ready + x.e.jobs_ct.delayed + x.e.jobs_ct.buried +
                      x.e.jobs_ct.reserved, 0);
    /* No timer is left for the deleted delayed job. */
    ck_assert_int_eq(queue_next_due(&x.e), INT64_MAX);
    worker_fini(&x.e, &r.w);
    worker_fini(&x.e, &other.w);
    ew_free(&x);
}
END_TEST

/* A reserved job goes back to ready when its TTR runs out, counted as a
 * timeout of the job, the tube and the engine. */
START_TEST(ttr_runs_out)
{
    EWorld x;
    Rec r, w2;
    uint64_t id;
    int64_t t0;

    ew_init(&x, NULL);
    id = ew_put(&x, x.e.default_tube, "j", 0, 0, 2);
    rec_init(&x, &r, NULL);
    rec_init(&x, &w2, NULL);
    t0 = x.e.now;
    ck_assert_uint_eq(ew_reserve(&x, &r), id);
    ck_assert_int_eq(job_ext(engine_find(&x.e, id))->deadline, t0 + 2 * SEC);
    ew_at(&x, t0 + 2 * SEC - 1);
    ck_assert_int_eq(ew_state(&x, id), JOB_RESERVED);
    ew_at(&x, t0 + 2 * SEC);
    ck_assert_int_eq(ew_state(&x, id), JOB_READY);
    ck_assert_uint_eq(job_ext(engine_find(&x.e, id))->timeouts, 1);
    ck_assert_uint_eq(x.e.default_tube->total_timeouts, 1);
    ck_assert_uint_eq(x.e.job_timeouts, 1);
    /* The first worker no longer holds it: another may take it. */
    ck_assert_int_eq(engine_delete(&x.e, &r.w, id), ENG_OK);
    ck_assert_ptr_null(engine_find(&x.e, id));
    worker_fini(&x.e, &r.w);
    worker_fini(&x.e, &w2.w);
    ew_free(&x);
}
END_TEST

/* touch restarts the TTR from now. */
START_TEST(touch_restarts_the_ttr)
{
    EWorld x;
    Rec r, other;
    uint64_t id;
    int64_t t0;

    ew_init(&x, NULL);
    id = ew_put(&x, x.e.default_tube, "j", 0, 0, 2);
    rec_init(&x, &r, NULL);
    rec_init(&x, &other, NULL);
    t0 = x.e.now;
    ck_assert_uint_eq(ew_reserve(&x, &r), id);
    ew_at(&x, t0 + SEC + SEC / 2);
    ck_assert_int_eq(engine_touch(&x.e, &other.w, id), ENG_NOT_FOUND);
    ck_assert_int_eq(engine_touch(&x.e, &r.w, id), ENG_OK);
    ck_assert_int_eq(job_ext(engine_find(&x.e, id))->deadline, t0 + 3 * SEC + SEC / 2);
    ew_at(&x, t0 + 3 * SEC);               /* past the first deadline */
    ck_assert_int_eq(ew_state(&x, id), JOB_RESERVED);
    ew_at(&x, t0 + 3 * SEC + SEC / 2);
    ck_assert_int_eq(ew_state(&x, id), JOB_READY);
    ck_assert_int_eq(engine_touch(&x.e, &r.w, id), ENG_NOT_FOUND);
    worker_fini(&x.e, &r.w);
    worker_fini(&x.e, &other.w);
    ew_free(&x);
}
END_TEST

/* A worker waiting while it holds a job is told DEADLINE_SOON within a
 * second of that job's TTR, not before. */
START_TEST(deadline_soon_while_waiting)
{
    EWorld x;
    Rec r;
    Job *j = NULL;
    uint64_t id;
    int64_t t0;

    ew_init(&x, NULL);
    id = ew_put(&x, x.e.default_tube, "j", 0, 0, 5);
    rec_init(&x, &r, NULL);
    t0 = x.e.now;
    ck_assert_uint_eq(ew_reserve(&x, &r), id);
    ck_assert_int_eq(worker_reserve(&x.e, &r.w, INT64_MAX, &j), WAIT_PENDING);
    ew_at(&x, t0 + 3 * SEC);
    ck_assert_int_eq(r.n, 0);
    ck_assert(r.w.waiting);
    ew_at(&x, t0 + 4 * SEC + SEC / 2);
    ck_assert_int_eq(r.n, 1);
    ck_assert_int_eq(r.how, WAIT_DEADLINE_SOON);
    ck_assert(!r.w.waiting);
    ck_assert_int_eq(ew_state(&x, id), JOB_RESERVED);
    worker_fini(&x.e, &r.w);
    ew_free(&x);
}
END_TEST

/* A paused tube hands nothing out until the pause ends. */
START_TEST(pause_holds_ready_jobs)
{
    EWorld x;
    Rec r;
    uint64_t id;
    int64_t t0;

    ew_init(&x, NULL);
    id = ew_put(&x, x.e.default_tube, "j", 0, 0, 60);
    rec_init(&x, &r, NULL);
    t0 = x.e.now;
    ck_assert_uint_eq(x.e.nready_tubes, 1);
    ck_assert_int_eq(engine_pause(&x.e, x.e.default_tube, 10), ENG_OK);
    ck_assert_uint_eq(x.e.default_tube->cmd_pause, 1);
    /* A paused tube leaves the list of tubes with jobs to hand out. */
    ck_assert_uint_eq(x.e.nready_tubes, 0);
    ck_assert_uint_eq(ew_reserve(&x, &r), 0);
    ck_assert_int_eq(queue_next_due(&x.e), t0 + 10 * SEC);
    ew_at(&x, t0 + 10 * SEC - 1);
    ck_assert_uint_eq(ew_reserve(&x, &r), 0);
    ew_at(&x, t0 + 10 * SEC);
    ck_assert_int_eq(x.e.default_tube->pause, 0);
    ck_assert_uint_eq(x.e.nready_tubes, 1);
    ck_assert_uint_eq(ew_reserve(&x, &r), id);
    worker_fini(&x.e, &r.w);
    ew_free(&x);
}
END_TEST

/* A job released into a paused tube stays put; a waiting worker gets it
 * only once the pause ends (by the timer, then the delivery). */
START_TEST(waiter_served_when_the_pause_ends)
{
    EWorld x;
    Rec r;
    Job *j = NULL;
    uint64_t id;
    int64_t t0;

    ew_init(&x, NULL);
    rec_init(&x, &r, NULL);
    t0 = x.e.now;
    ck_assert_int_eq(engine_pause(&x.e, x.e.default_tube, 3), ENG_OK);
    ck_assert_int_eq(worker_reserve(&x.e, &r.w, INT64_MAX, &j), WAIT_PENDING);
    id = ew_put(&x, x.e.default_tube, "j", 0, 0, 60);
    ck_assert_int_eq(r.n, 0);
    ew_at(&x, t0 + 3 * SEC);
    ck_assert_int_eq(r.n, 1);
    ck_assert_int_eq(r.how, WAIT_RESERVED);
    ck_assert_uint_eq(r.id, id);
    ck_assert_int_eq(ew_state(&x, id), JOB_RESERVED);
    worker_fini(&x.e, &r.w);
    ew_free(&x);
}
END_TEST

/* reserve-job takes a ready, delayed or buried job by id, and nothing
 * another worker holds. */
START_TEST(reserve_job_by_id)
{
    EWorld x;
    Rec r, other;
    Job *j;
    uint64_t d, b;

    ew_init(&x, NULL);
    d = ew_put(&x, x.e.default_tube, "d", 0, 100, 60);
    b = ew_put(&x, x.e.default_tube, "b", 0, 0, 60);
    rec_init(&x, &r, NULL);
    rec_init(&x, &other, NULL);
    ck_assert_uint_eq(ew_reserve(&x, &other), b);
    ck_assert_int_eq(engine_bury(&x.e, &other.w, b, 0), ENG_OK);
    ck_assert_int_eq(engine_reserve_job(&x.e, &r.w, d, &j), ENG_OK);
    ck_assert_uint_eq(j->id, d);
    ck_assert_int_eq(engine_reserve_job(&x.e, &r.w, b, &j), ENG_OK);
    ck_assert_int_eq(engine_reserve_job(&x.e, &other.w, b, &j), ENG_NOT_FOUND);
    counts_are(&x, x.e.default_tube, 0, 0, 0, 2);
    /* Given back by a disconnect: both ready (a reserved job's delay is
     * not kept). */
    worker_fini(&x.e, &r.w);
    counts_are(&x, x.e.default_tube, 2, 0, 0, 0);
    worker_fini(&x.e, &other.w);
    ew_free(&x);
}
END_TEST


/* ---- against a model ------------------------------------------------------ */

/* What the test believes of each job: its state, priority, deadline
 * (delay's end, or TTR's end while reserved; ns) and, when buried, its
 * place in the buried order. */
enum { M_GONE = -1, M_JOBS = 400 };
typedef struct MJob {
    int state;          /* JobState, or M_GONE */
    uint32_t pri;
    int64_t deadline;
    uint64_t bury_seq;
    int owner;          /* worker index, when reserved */
} MJob;

typedef struct Model {
    MJob j[M_JOBS + 1]; /* by id (ids start at 1) */
    uint64_t last;      /* highest id put */
    uint64_t bury_seq;
} Model;

/* The ready job the engine must hand out next: best priority, then id. */
static uint64_t m_best_ready(const Model *m)
{
    uint64_t best = 0;

    for (uint64_t id = 1; id <= m->last; id++) {
        const MJob *x = &m->j[id];
        if (x->state == JOB_READY && (!best || x->pri < m->j[best].pri))
            best = id;
    }
    return best;
}

/* Kick one job as the engine does: the oldest buried, else the delayed
 * job due first. */
static uint64_t m_kick_one(Model *m, int buried)
{
    uint64_t pick = 0;

    for (uint64_t id = 1; id <= m->last; id++) {
        const MJob *x = &m->j[id];
        if (buried && x->state == JOB_BURIED &&
            (!pick || x->bury_seq < m->j[pick].bury_seq))
            pick = id;
        if (!buried && x->state == JOB_DELAYED &&
            (!pick || x->deadline < m->j[pick].deadline))
            pick = id;
    }
    if (pick)
        m->j[pick].state = JOB_READY;
    return pick;
}

static int m_count(const Model *m, int state)
{
    int n = 0;

    for (uint64_t id = 1; id <= m->last; id++)
        n += m->j[id].state == state;
    return n;
}

/* Time passes: delays and TTRs due by now end (in the engine's tick). */
static void m_advance(Model *m, int64_t now)
{
    for (uint64_t id = 1; id <= m->last; id++) {
        MJob *x = &m->j[id];
        if ((x->state == JOB_DELAYED || x->state == JOB_RESERVED) && x->deadline <= now)
            x->state = JOB_READY;
    }
}

static void m_check(EWorld *x, const Model *m, int step)
{
    Counts c = ew_counts(x, x->e.default_tube);

    for (uint64_t id = 1; id <= m->last; id++) {
        Job *j = job_table_find(&x->e.jobs, id);
        if (m->j[id].state == M_GONE) {
            REQUIRE_MSG(!j, "step %d: job %ju should be gone", step, (uintmax_t)id);
            continue;
        }
        REQUIRE_MSG(j && (int)j->state == m->j[id].state,
                    "step %d: job %ju in state %d, expected %d", step, (uintmax_t)id,
                    j ? (int)j->state : -1, m->j[id].state);
        REQ_UEQ(j->pri, m->j[id].pri);
    }
    REQ_UEQ(c.ready, m_count(m, JOB_READY));
    REQ_UEQ(c.delayed, m_count(m, JOB_DELAYED));
    REQ_UEQ(c.buried, m_count(m, JOB_BURIED));
    REQ_UEQ(c.reserved, m_count(m, JOB_RESERVED));
}

/* Random operations on one tube by three workers, each checked against
 * the model: every job's state and priority and the tube's counters. */
START_TEST(random_walk_against_model)
{
    static Model m;
    EWorld x;
    Rec w[3];
    Rng rng;
    const int64_t ttr = 10 * SEC;

    memset(&m, 0, sizeof m);
    ew_init(&x, NULL);
    rng_seed(&rng, (uint64_t)_i + 1);
    for (int k = 0; k < 3; k++)
        rec_init(&x, &w[k], NULL);
    for (int step = 0; step < 3000 && m.last < M_JOBS; step++) {
        unsigned op = (unsigned)rng_below(&rng, 9);
        int k = (int)rng_below(&rng, 3);
        uint64_t id = m.last ? 1 + rng_below(&rng, m.last) : 0;
        MJob *mj = id ? &m.j[id] : NULL;

        switch (op) {
        case 0: case 1: { /* put */
            uint32_t pri = (uint32_t)rng_below(&rng, 4);
            uint32_t delay = rng_below(&rng, 3) ? 0 : 1 + (uint32_t)rng_below(&rng, 5);
            uint64_t nid = ew_put(&x, x.e.default_tube, "b", pri, delay, 10);
            REQ_UEQ(nid, m.last + 1);
            m.last = nid;
            m.j[nid] = (MJob){delay ? JOB_DELAYED : JOB_READY, pri,
                              x.e.now + (int64_t)delay * SEC, 0, -1};
            break;
        }
        case 2: { /* reserve */
            uint64_t want = m_best_ready(&m), got = ew_reserve(&x, &w[k]);
            REQ_UEQ(got, want);
            if (got) {
                m.j[got].state = JOB_RESERVED;
                m.j[got].owner = k;
                m.j[got].deadline = x.e.now + ttr;
            }
            break;
        }
        case 3: { /* release, maybe delayed */
            uint32_t pri = (uint32_t)rng_below(&rng, 4);
            uint32_t delay = (uint32_t)rng_below(&rng, 3);
            int mine = mj && mj->state == JOB_RESERVED && mj->owner == k;
            REQUIRE(engine_release(&x.e, &w[k].w, id, pri, delay) ==
                    (mine ? ENG_OK : ENG_NOT_FOUND));
            if (mine) {
                mj->pri = pri;
                mj->state = delay ? JOB_DELAYED : JOB_READY;
                mj->deadline = x.e.now + (int64_t)delay * SEC;
            }
            break;
        }
        case 4: { /* bury */
            int mine = mj && mj->state == JOB_RESERVED && mj->owner == k;
            REQUIRE(engine_bury(&x.e, &w[k].w, id, 3) == (mine ? ENG_OK : ENG_NOT_FOUND));
            if (mine) {
                mj->state = JOB_BURIED;
                mj->pri = 3;
                mj->bury_seq = ++m.bury_seq;
            }
            break;
        }
        case 5: { /* kick up to n */
            uint32_t n = 1 + (uint32_t)rng_below(&rng, 3), want = 0;
            int buried = m_count(&m, JOB_BURIED) > 0;
            uint32_t got = engine_kick(&x.e, x.e.default_tube, n);
            while (want < n && m_kick_one(&m, buried))
                want++;
            REQ_UEQ(got, want);
            break;
        }
        case 6: { /* delete */
            int ok = mj && mj->state != M_GONE &&
                     (mj->state != JOB_RESERVED || mj->owner == k);
            REQUIRE(engine_delete(&x.e, &w[k].w, id) == (ok ? ENG_OK : ENG_NOT_FOUND));
            if (ok)
                mj->state = M_GONE;
            break;
        }
        case 7: { /* touch */
            int mine = mj && mj->state == JOB_RESERVED && mj->owner == k;
            REQUIRE(engine_touch(&x.e, &w[k].w, id) == (mine ? ENG_OK : ENG_NOT_FOUND));
            if (mine)
                mj->deadline = x.e.now + ttr;
            break;
        }
        default: /* time passes */
            ew_later(&x, (int64_t)(1 + rng_below(&rng, 3000)) * NS_PER_MSEC);
            m_advance(&m, x.e.now);
        }
        m_check(&x, &m, step);
    }
    ck_assert_uint_gt(m.last, 100);
    for (int k = 0; k < 3; k++)
        worker_fini(&x.e, &w[k].w);
    ew_free(&x);
}
END_TEST

static Suite *queue_suite(void)
{
    Suite *s = suite_create("queue");
    TCase *tc = unit_tcase("states");

    tcase_add_test(tc, put_counts_ready_and_urgent);
    tcase_add_test(tc, reserve_by_priority_then_id);
    tcase_add_test(tc, release_with_delay);
    tcase_add_test(tc, delays_end_in_deadline_order);
    tcase_add_test(tc, equal_deadlines_keep_command_order);
    tcase_add_test(tc, bury_and_kick);
    tcase_add_test(tc, kick_job_only_buried_or_delayed);
    tcase_add_test(tc, delete_in_every_state);
    tcase_add_test(tc, reserve_job_by_id);
    tcase_add_loop_test(tc, reserve_best_across_tubes, 0, 2);
    suite_add_tcase(s, tc);
    tc = unit_tcase("time");
    tcase_add_test(tc, ttr_runs_out);
    tcase_add_test(tc, touch_restarts_the_ttr);
    tcase_add_test(tc, deadline_soon_while_waiting);
    tcase_add_test(tc, pause_holds_ready_jobs);
    tcase_add_test(tc, waiter_served_when_the_pause_ends);
    suite_add_tcase(s, tc);
    tc = unit_tcase("model");
    tcase_add_loop_test(tc, random_walk_against_model, 0, 8);
    suite_add_tcase(s, tc);
    return s;
}

UNIT_MAIN(queue_suite)
