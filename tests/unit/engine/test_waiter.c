/* Unit tests for waiter.c: waiting workers are woken only after the
 * operation that served them (engine_deliver), first come first served,
 * jobs in the order they became ready,
 * and a wake may call the engine again (as a memcache get deletes the job
 * it took). No sockets: an Engine, its loop, and workers whose wake
 * records what it saw. */
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "core.h"
#include "engine.h"
#include "event.h"
#include "unit.h"
#include "watch.h"

typedef struct Seen {
    Worker w;
    int n;             /* wakes */
    WaitEnd how;
    uint64_t id;
    int delete_it;     /* the wake deletes the job it got */
    int seq;           /* order of its last wake among all wakes */
} Seen;

static Engine *the_engine;
static int in_put;     /* set while engine_put runs */
static int wakes;      /* wakes so far, all workers */

static void record(Worker *w, WaitEnd how, Job *j)
{
    Seen *s = container_of(w, Seen, w);

    ck_assert_msg(!in_put, "woken inside engine_put");
    s->n++;
    s->seq = ++wakes;
    s->how = how;
    s->id = j ? j->id : 0;
    if (j) {
        ck_assert_int_eq(j->state, JOB_RESERVED);
        ck_assert_ptr_eq(job_ext(j)->owner, w);
    }
    if (j && s->delete_it)
        ck_assert_int_eq(engine_delete(the_engine, w, j->id), ENG_OK);
}

static const WorkerOps ops = {.wake = record};

typedef struct World {
    EvLoop loop;
    Config cfg;
    Engine e;
    Tube *t;
} World;

static void world_init(World *x)
{
    memset(x, 0, sizeof *x);
    opts_defaults(&x->cfg);
    ck_assert_int_eq(ev_init(&x->loop), 0);
    ck_assert_int_eq(engine_init(&x->e, &x->cfg, &x->loop), 0);
    the_engine = &x->e;
    x->t = x->e.default_tube;
}

static void world_free(World *x)
{
    engine_free(&x->e);
    ev_close(&x->loop);
}

static void seen_init(World *x, Seen *s)
{
    memset(s, 0, sizeof *s);
    worker_init(&x->e, &s->w, &ops);
}

static uint64_t put(World *x, uint32_t pri)
{
    Job *j = engine_job_new(&x->e, x->t, 1, pri, 0, 60);
    uint64_t id;

    ck_assert_ptr_nonnull(j);
    id = j->id;
    job_body_mut(j)[0] = 'x';
    in_put = 1;
    ck_assert_int_eq(engine_put(&x->e, j, x->t), ENG_OK);
    in_put = 0;
    return id;
}

static void park(World *x, Seen *s, int64_t timeout)
{
    Job *j;

    ck_assert_int_eq(worker_reserve(&x->e, &s->w, timeout, &j), WAIT_PENDING);
    ck_assert(s->w.waiting);
}

START_TEST(woken_after_the_put_not_inside_it)
{
    World x;
    Seen a;
    uint64_t id;

    world_init(&x);
    seen_init(&x, &a);
    park(&x, &a, INT64_MAX);
    id = put(&x, 0);
    /* The put has finished; the job is still ready, in its tube. */
    ck_assert_int_eq(a.n, 0);
    ck_assert_int_eq(engine_find(&x.e, id)->state, JOB_READY);
    ck_assert(x.t->posted);
    engine_deliver(&x.e);
    ck_assert_int_eq(a.n, 1);
    ck_assert_int_eq(a.how, WAIT_RESERVED);
    ck_assert_uint_eq(a.id, id);
    ck_assert(!a.w.waiting);
    ck_assert(!x.t->posted);
    engine_deliver(&x.e); /* nothing more */
    ck_assert_int_eq(a.n, 1);
    worker_fini(&x.e, &a.w);
    world_free(&x);
}
END_TEST

START_TEST(first_come_first_served)
{
    World x;
    Seen a, b, c;
    uint64_t id1, id2;

    world_init(&x);
    seen_init(&x, &a);
    seen_init(&x, &b);
    seen_init(&x, &c);
    park(&x, &b, INT64_MAX);
    park(&x, &a, INT64_MAX);
    park(&x, &c, INT64_MAX);
    id1 = put(&x, 5);
    id2 = put(&x, 1);
    /* Jobs go out in the order they became ready, as beanstalkd hands
     * each out at once: the first waiter gets the first, not the more
     * urgent second. */
    engine_deliver(&x.e);
    ck_assert_uint_eq(b.id, id1);
    ck_assert_uint_eq(a.id, id2);
    ck_assert_int_eq(c.n, 0);
    ck_assert(c.w.waiting);
    worker_fini(&x.e, &a.w);
    worker_fini(&x.e, &b.w);
    worker_fini(&x.e, &c.w);
    world_free(&x);
}
END_TEST

/* The wake deletes the job it got (a memcache get does): allowed, since
 * no engine operation is under way, and the next waiter is served. */
START_TEST(a_wake_may_call_the_engine)
{
    World x;
    Seen a, b;
    uint64_t id1, id2;

    world_init(&x);
    seen_init(&x, &a);
    seen_init(&x, &b);
    a.delete_it = b.delete_it = 1;
    park(&x, &a, INT64_MAX);
    park(&x, &b, INT64_MAX);
    id1 = put(&x, 0);
    id2 = put(&x, 0);
    engine_deliver(&x.e);
    ck_assert_uint_eq(a.id, id1);
    ck_assert_uint_eq(b.id, id2);
    ck_assert_ptr_null(engine_find(&x.e, id1));
    ck_assert_ptr_null(engine_find(&x.e, id2));
    ck_assert_uint_eq(x.e.jobs_ct.ready + x.e.jobs_ct.reserved, 0);
    worker_fini(&x.e, &a.w);
    worker_fini(&x.e, &b.w);
    world_free(&x);
}
END_TEST

/* A put into a tube nobody waits on posts nothing. */
START_TEST(no_waiter_no_posting)
{
    World x;

    world_init(&x);
    put(&x, 0);
    ck_assert(!x.t->posted);
    ck_assert(list_empty(&x.e.posted_tubes));
    ck_assert_ptr_null(x.loop.posted);
    world_free(&x);
}
END_TEST

/* A timeout ends the wait in the tick; the wake comes with the delivery,
 * and a worker cancelled in between is never woken. */
START_TEST(timeouts_are_delivered_after_the_tick)
{
    World x;
    Seen a, b;

    world_init(&x);
    seen_init(&x, &a);
    seen_init(&x, &b);
    x.e.now = clock_mono();
    park(&x, &a, NS_PER_MSEC);
    park(&x, &b, NS_PER_MSEC);
    x.e.now += 2 * NS_PER_MSEC;
    engine_tick(&x.e);
    ck_assert(!a.w.waiting && !b.w.waiting);
    ck_assert_int_eq(a.n + b.n, 0);
    worker_cancel(&x.e, &b.w); /* its client hung up first */
    /* The loop delivers what was posted. */
    ck_assert_ptr_nonnull(x.loop.posted);
    ev_run_posted(&x.loop);
    ck_assert_int_eq(a.n, 1);
    ck_assert_int_eq(a.how, WAIT_TIMED_OUT);
    ck_assert_int_eq(b.n, 0);
    worker_fini(&x.e, &a.w);
    worker_fini(&x.e, &b.w);
    world_free(&x);
}
END_TEST

/* Freed with deliveries pending: the tubes' references go back. */
START_TEST(engine_free_with_deliveries_pending)
{
    World x;
    Seen a;

    world_init(&x);
    seen_init(&x, &a);
    park(&x, &a, INT64_MAX);
    put(&x, 0);
    ck_assert(x.t->posted);
    worker_fini(&x.e, &a.w);
    world_free(&x); /* ASan/LSan: nothing leaks, no use after free */
}
END_TEST

/* A worker waiting engine-wide (past WAIT_WIDE tubes) and a narrow one
 * on the same tube: served in the order they began to wait; the wide
 * worker hears of a job in any of its tubes. */
START_TEST(wide_and_narrow_share_first_come)
{
    World x;
    Seen wide, narrow;
    Tube *other = NULL;
    uint64_t id1, id2, id3;
    Job *j;

    world_init(&x);
    seen_init(&x, &wide);
    seen_init(&x, &narrow);
    for (int i = 0; i < WAIT_WIDE + 4; i++) {
        char name[16];
        int n = snprintf(name, sizeof name, "w%d", i);
        Tube *t = engine_tube(&x.e, name, (size_t)n);

        ck_assert_ptr_nonnull(t);
        ck_assert_int_eq(watch_add(&wide.w, t), 0);
        other = t;
    }
    ck_assert(watch_is_wide(&wide.w) && watch_waits_wide(&wide.w));
    ck_assert(!watch_is_wide(&narrow.w));
    park(&x, &wide, INT64_MAX);
    ck_assert(list_linked(&wide.w.wide_link));
    ck_assert_uint_eq(x.t->waitq_len, 0);
    park(&x, &narrow, INT64_MAX);
    id1 = put(&x, 0);
    id2 = put(&x, 0);
    engine_deliver(&x.e);
    ck_assert_uint_eq(wide.id, id1);
    ck_assert_uint_eq(narrow.id, id2);
    /* Waiting again, the wide worker gets a job of another of its tubes. */
    park(&x, &wide, INT64_MAX);
    j = engine_job_new(&x.e, other, 1, 0, 0, 60);
    ck_assert_ptr_nonnull(j);
    id3 = j->id;
    job_body_mut(j)[0] = 'y';
    ck_assert_int_eq(engine_put(&x.e, j, other), ENG_OK);
    ck_assert_int_eq(wide.n, 1);
    engine_deliver(&x.e);
    ck_assert_int_eq(wide.n, 2);
    ck_assert_uint_eq(wide.id, id3);
    worker_fini(&x.e, &wide.w);
    worker_fini(&x.e, &narrow.w);
    world_free(&x);
}
END_TEST

/* A cancelled wait (the client hung up) is never woken, and the job
 * stays ready for whoever comes next. */
START_TEST(cancelled_waiter_not_woken)
{
    World x;
    Seen a;
    uint64_t id;

    world_init(&x);
    seen_init(&x, &a);
    park(&x, &a, INT64_MAX);
    ck_assert_uint_eq(engine_tube_waiting(&x.e, x.t), 1);
    worker_cancel(&x.e, &a.w);
    ck_assert(!a.w.waiting);
    ck_assert_uint_eq(engine_tube_waiting(&x.e, x.t), 0);
    id = put(&x, 0);
    engine_deliver(&x.e);
    ck_assert_int_eq(a.n, 0);
    ck_assert_int_eq(engine_find(&x.e, id)->state, JOB_READY);
    worker_fini(&x.e, &a.w);
    world_free(&x);
}
END_TEST

static uint64_t put_delayed(World *x, uint32_t pri, uint32_t delay)
{
    Job *j = engine_job_new(&x->e, x->t, 1, pri, delay, 60);
    uint64_t id;

    ck_assert_ptr_nonnull(j);
    id = j->id;
    job_body_mut(j)[0] = 'd';
    ck_assert_int_eq(engine_put(&x->e, j, x->t), ENG_OK);
    return id;
}

/* A kick of several jobs hands them to the waiters in kick order (delayed
 * ones by deadline), not best first: beanstalkd gives each kicked job
 * to a waiter before it kicks the next. */
START_TEST(kicked_jobs_go_out_in_kick_order)
{
    World x;
    Seen a, b;
    uint64_t id1, id2, id3;

    world_init(&x);
    seen_init(&x, &a);
    seen_init(&x, &b);
    id1 = put_delayed(&x, 10, 100);
    id2 = put_delayed(&x, 5, 200);
    id3 = put_delayed(&x, 1, 300);
    park(&x, &a, INT64_MAX);
    park(&x, &b, INT64_MAX);
    ck_assert_uint_eq(engine_kick(&x.e, x.t, 3), 3);
    ck_assert_int_eq(a.n + b.n, 0);
    engine_deliver(&x.e);
    ck_assert_uint_eq(a.id, id1);
    ck_assert_uint_eq(b.id, id2);
    ck_assert_int_eq(engine_find(&x.e, id3)->state, JOB_READY);
    worker_fini(&x.e, &a.w);
    worker_fini(&x.e, &b.w);
    world_free(&x);
}
END_TEST

/* A worker that goes (its connection closed) gives its jobs back in the
 * order it reserved them, and a waiter gets the first, not the best. */
START_TEST(released_jobs_go_out_in_reserve_order)
{
    World x;
    Seen holder, a;
    uint64_t id1, id2;
    Job *j;

    world_init(&x);
    seen_init(&x, &holder);
    seen_init(&x, &a);
    id1 = put(&x, 9);
    id2 = put(&x, 1);
    ck_assert_int_eq(engine_reserve_job(&x.e, &holder.w, id1, &j), ENG_OK);
    ck_assert_int_eq(engine_reserve_job(&x.e, &holder.w, id2, &j), ENG_OK);
    park(&x, &a, INT64_MAX);
    worker_fini(&x.e, &holder.w);
    engine_deliver(&x.e);
    ck_assert_int_eq(a.n, 1);
    ck_assert_uint_eq(a.id, id1);
    ck_assert_int_eq(engine_find(&x.e, id2)->state, JOB_READY);
    worker_fini(&x.e, &a.w);
    world_free(&x);
}
END_TEST

/* TTRs that run out in one tick give their jobs back in deadline order,
 * the first straight to the waiter (a TTR scenario against beanstalkd
 * 1.12 would meet its missed-TTR defect, so this is tested here). */
START_TEST(timed_out_jobs_go_out_in_deadline_order)
{
    World x;
    Seen holder, a;
    uint64_t id1, id2;
    Job *j;

    world_init(&x);
    seen_init(&x, &holder);
    seen_init(&x, &a);
    x.e.now = clock_mono();
    id1 = put(&x, 40);
    id2 = put(&x, 2);
    ck_assert_int_eq(engine_reserve_job(&x.e, &holder.w, id1, &j), ENG_OK);
    ck_assert_int_eq(engine_reserve_job(&x.e, &holder.w, id2, &j), ENG_OK);
    park(&x, &a, INT64_MAX);
    x.e.now += 61 * NS_PER_SEC; /* past both TTRs (60 s) */
    engine_tick(&x.e);
    ck_assert_int_eq(a.n, 0);
    engine_deliver(&x.e);
    ck_assert_int_eq(a.n, 1);
    ck_assert_uint_eq(a.id, id1);
    ck_assert_int_eq(engine_find(&x.e, id2)->state, JOB_READY);
    worker_fini(&x.e, &holder.w);
    worker_fini(&x.e, &a.w);
    world_free(&x);
}
END_TEST

static uint64_t put_in(World *x, Tube *t, uint32_t delay)
{
    Job *j = engine_job_new(&x->e, t, 1, 0, delay, 60);
    uint64_t id;

    ck_assert_ptr_nonnull(j);
    id = j->id;
    job_body_mut(j)[0] = 'i';
    ck_assert_int_eq(engine_put(&x->e, j, t), ENG_OK);
    return id;
}

/* Delays of several tubes ending in one tick make their jobs ready in
 * deadline order across tubes: of two workers watching both tubes, the
 * second gets the other tube's job that was due second, not the first
 * tube's next one. */
START_TEST(delays_end_across_tubes_in_deadline_order)
{
    World x;
    Seen a, b;
    Tube *ta, *tb;
    uint64_t a1, b1, a2;

    world_init(&x);
    x.e.now = clock_mono();
    ta = engine_tube(&x.e, "ta", 2);
    tb = engine_tube(&x.e, "tb", 2);
    ck_assert_ptr_nonnull(ta);
    ck_assert_ptr_nonnull(tb);
    seen_init(&x, &a);
    seen_init(&x, &b);
    ck_assert_int_eq(watch_add(&a.w, ta), 0);
    ck_assert_int_eq(watch_add(&a.w, tb), 0);
    ck_assert_int_eq(watch_add(&b.w, ta), 0);
    ck_assert_int_eq(watch_add(&b.w, tb), 0);
    a1 = put_in(&x, ta, 1);
    b1 = put_in(&x, tb, 1);
    a2 = put_in(&x, ta, 1);
    park(&x, &a, INT64_MAX);
    park(&x, &b, INT64_MAX);
    x.e.now += 2 * NS_PER_SEC;
    engine_tick(&x.e);
    engine_deliver(&x.e);
    ck_assert_uint_eq(a.id, a1);
    ck_assert_uint_eq(b.id, b1);
    ck_assert_int_eq(engine_find(&x.e, a2)->state, JOB_READY);
    worker_fini(&x.e, &a.w);
    worker_fini(&x.e, &b.w);
    world_free(&x);
}
END_TEST

/* A delay and a wait's timeout that end in the same tick: the job goes to
 * the worker (delays end first, as in beanstalkd), which never hears
 * TIMED_OUT. */
START_TEST(delay_ending_beats_timeout_in_same_tick)
{
    World x;
    Seen a;
    uint64_t id;

    world_init(&x);
    seen_init(&x, &a);
    x.e.now = clock_mono();
    id = put_delayed(&x, 0, 1);
    park(&x, &a, NS_PER_SEC);
    x.e.now += 2 * NS_PER_SEC;
    engine_tick(&x.e);
    ev_run_posted(&x.loop);
    engine_deliver(&x.e);
    ck_assert_int_eq(a.n, 1);
    ck_assert_int_eq(a.how, WAIT_RESERVED);
    ck_assert_uint_eq(a.id, id);
    worker_fini(&x.e, &a.w);
    world_free(&x);
}
END_TEST

static uint64_t put_pri_in(World *x, Tube *t, uint32_t pri)
{
    Job *j = engine_job_new(&x->e, t, 1, pri, 0, 60);
    uint64_t id;

    ck_assert_ptr_nonnull(j);
    id = j->id;
    job_body_mut(j)[0] = 'p';
    ck_assert_int_eq(engine_put(&x->e, j, t), ENG_OK);
    return id;
}

/* A TTR that ended before a wait's timeout, both found in one late tick:
 * the waiter gets the job (1.12 ticks its connections in deadline order),
 * not TIMED_OUT. */
START_TEST(ttr_ending_before_timeout_gives_the_job)
{
    World x;
    Seen holder, a;
    uint64_t id;
    Job *j;

    world_init(&x);
    seen_init(&x, &holder);
    seen_init(&x, &a);
    x.e.now = clock_mono();
    id = put(&x, 0);
    ck_assert_int_eq(engine_reserve_job(&x.e, &holder.w, id, &j), ENG_OK);
    park(&x, &a, 61 * NS_PER_SEC);              /* TTR 60 s ends first */
    x.e.now += 62 * NS_PER_SEC;
    engine_tick(&x.e);
    engine_deliver(&x.e);
    ck_assert_int_eq(a.n, 1);
    ck_assert_int_eq(a.how, WAIT_RESERVED);
    ck_assert_uint_eq(a.id, id);
    ck_assert_uint_eq(job_ext(engine_find(&x.e, id))->timeouts, 1);
    worker_fini(&x.e, &holder.w);
    worker_fini(&x.e, &a.w);
    world_free(&x);
}
END_TEST

/* The converse: the timeout came first, the waiter hears TIMED_OUT and the
 * job is ready afterwards. */
START_TEST(timeout_before_ttr_times_out)
{
    World x;
    Seen holder, a;
    uint64_t id;
    Job *j;

    world_init(&x);
    seen_init(&x, &holder);
    seen_init(&x, &a);
    x.e.now = clock_mono();
    id = put(&x, 0);
    ck_assert_int_eq(engine_reserve_job(&x.e, &holder.w, id, &j), ENG_OK);
    park(&x, &a, 59 * NS_PER_SEC);
    x.e.now += 62 * NS_PER_SEC;
    engine_tick(&x.e);
    engine_deliver(&x.e);
    ck_assert_int_eq(a.n, 1);
    ck_assert_int_eq(a.how, WAIT_TIMED_OUT);
    ck_assert_int_eq(engine_find(&x.e, id)->state, JOB_READY);
    worker_fini(&x.e, &holder.w);
    worker_fini(&x.e, &a.w);
    world_free(&x);
}
END_TEST

/* Jobs of two workers whose TTRs are over in one tick come back worker by
 * worker (1.12 ticks a connection once for all its jobs): h1's A and C
 * before h2's B although B's TTR ended before C's. */
START_TEST(timed_out_jobs_come_back_by_worker)
{
    World x;
    Seen h1, h2, w[3];
    uint64_t a, b, c;
    Job *j;

    world_init(&x);
    seen_init(&x, &h1);
    seen_init(&x, &h2);
    x.e.now = clock_mono();
    a = put(&x, 5);
    b = put(&x, 5);
    c = put(&x, 5);
    ck_assert_int_eq(engine_reserve_job(&x.e, &h1.w, a, &j), ENG_OK);
    x.e.now += NS_PER_SEC;
    ck_assert_int_eq(engine_reserve_job(&x.e, &h2.w, b, &j), ENG_OK);
    x.e.now += NS_PER_SEC;
    ck_assert_int_eq(engine_reserve_job(&x.e, &h1.w, c, &j), ENG_OK);
    for (int i = 0; i < 3; i++) {
        seen_init(&x, &w[i]);
        park(&x, &w[i], INT64_MAX);
    }
    x.e.now += 70 * NS_PER_SEC;
    engine_tick(&x.e);
    engine_deliver(&x.e);
    /* In the order of the wakes: A, C, B. */
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(w[i].n, 1);
    for (int i = 0; i < 3; i++) {
        uint64_t want = w[i].seq == 1 ? a : w[i].seq == 2 ? c : b;
        ck_assert_uint_eq(w[i].id, want);
    }
    for (int i = 0; i < 3; i++)
        worker_fini(&x.e, &w[i].w);
    worker_fini(&x.e, &h1.w);
    worker_fini(&x.e, &h2.w);
    world_free(&x);
}
END_TEST

/* Pauses of two tubes ending in one tick: their waiter gets the best job
 * across both (1.12's process_queue()), not the first-unpaused tube's. */
START_TEST(pauses_ending_together_best_job_first)
{
    World x;
    Seen a;
    Tube *p, *q;
    uint64_t pj, qj;

    world_init(&x);
    x.e.now = clock_mono();
    p = engine_tube(&x.e, "p", 1);
    q = engine_tube(&x.e, "q", 1);
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_nonnull(q);
    seen_init(&x, &a);
    ck_assert_int_eq(watch_add(&a.w, p), 0);
    ck_assert_int_eq(watch_add(&a.w, q), 0);
    pj = put_pri_in(&x, p, 10);
    qj = put_pri_in(&x, q, 0);
    ck_assert_int_eq(engine_pause(&x.e, p, 1), ENG_OK);
    ck_assert_int_eq(engine_pause(&x.e, q, 2), ENG_OK);
    park(&x, &a, INT64_MAX);
    x.e.now += 3 * NS_PER_SEC;
    engine_tick(&x.e);
    engine_deliver(&x.e);
    ck_assert_int_eq(a.n, 1);
    ck_assert_uint_eq(a.id, qj);
    ck_assert_int_eq(engine_find(&x.e, pj)->state, JOB_READY);
    ck_assert(!p->pause && !q->pause);
    worker_fini(&x.e, &a.w);
    world_free(&x);
}
END_TEST

/* A pause and a delay ending in one tick: the paused tube's job and the
 * delayed one compete by priority (1.12 unpauses at the tick's first
 * hand-out). */
START_TEST(pause_and_delay_ending_together_by_priority)
{
    World x;
    Seen a;
    Tube *p;
    uint64_t pj, dj;
    Job *j;

    world_init(&x);
    x.e.now = clock_mono();
    p = engine_tube(&x.e, "p", 1);
    ck_assert_ptr_nonnull(p);
    seen_init(&x, &a);
    ck_assert_int_eq(watch_add(&a.w, p), 0);
    pj = put_pri_in(&x, p, 10);
    ck_assert_int_eq(engine_pause(&x.e, p, 1), ENG_OK);
    j = engine_job_new(&x.e, x.t, 1, 20, 1, 60);
    ck_assert_ptr_nonnull(j);
    dj = j->id;
    job_body_mut(j)[0] = 'd';
    ck_assert_int_eq(engine_put(&x.e, j, x.t), ENG_OK);
    park(&x, &a, INT64_MAX);
    x.e.now += 2 * NS_PER_SEC;
    engine_tick(&x.e);
    engine_deliver(&x.e);
    ck_assert_int_eq(a.n, 1);
    ck_assert_uint_eq(a.id, pj);
    ck_assert_int_eq(engine_find(&x.e, dj)->state, JOB_READY);
    worker_fini(&x.e, &a.w);
    world_free(&x);
}
END_TEST

/* While a fifo worker (a memcache get) waits on a tube, its waiters are
 * served first come first served, reserves included (kestrel's
 * contract); once nobody waits, beanstalkd's order again. */
START_TEST(fifo_waiter_makes_tube_first_come)
{
    World x;
    Seen taker, b1, b2, m;
    uint64_t id1, id2, id3;
    Job *j;

    world_init(&x);
    seen_init(&x, &taker);
    seen_init(&x, &b1);
    seen_init(&x, &b2);
    seen_init(&x, &m);
    m.w.fifo = 1;
    put(&x, 0);
    ck_assert_int_eq(worker_reserve(&x.e, &taker.w, 0, &j), WAIT_RESERVED); /* cursor 1 */
    /* Beanstalk only: the cursor's waiter (the second) first. */
    park(&x, &b1, INT64_MAX);
    park(&x, &b2, INT64_MAX);
    id1 = put(&x, 0);
    engine_deliver(&x.e);
    ck_assert_uint_eq(b2.id, id1);
    ck_assert_int_eq(b1.n, 0);
    /* b1 still waits; then the get, then b2 again: first come first
     * served while the get waits. */
    park(&x, &m, INT64_MAX);
    park(&x, &b2, INT64_MAX);
    ck_assert_uint_eq(x.t->waitq_fcfs, 1);
    id1 = put(&x, 0);
    engine_deliver(&x.e);
    ck_assert_uint_eq(b1.id, id1);
    id2 = put(&x, 0);
    engine_deliver(&x.e);
    ck_assert_uint_eq(m.id, id2);
    ck_assert_uint_eq(x.t->waitq_fcfs, 1); /* b2 still waits */
    id3 = put(&x, 0);
    engine_deliver(&x.e);
    ck_assert_uint_eq(b2.id, id3);
    ck_assert_uint_eq(x.t->waitq_fcfs, 0);
    worker_fini(&x.e, &taker.w);
    worker_fini(&x.e, &b1.w);
    worker_fini(&x.e, &b2.w);
    worker_fini(&x.e, &m.w);
    world_free(&x);
}
END_TEST

/* The reserves that began to wait beside a get keep their turn after the
 * get is served (spec kestrel.md §2), though no get waits any more; once
 * nobody waits, beanstalkd's order is back: of two that wait after a
 * take, the later is served first. */
START_TEST(reserves_keep_their_turn_after_the_get)
{
    World x;
    Seen b1, b2, m;
    uint64_t id;

    world_init(&x);
    seen_init(&x, &b1);
    seen_init(&x, &b2);
    seen_init(&x, &m);
    m.w.fifo = 1;
    park(&x, &m, INT64_MAX);
    park(&x, &b1, INT64_MAX);
    park(&x, &b2, INT64_MAX);
    id = put(&x, 0);
    engine_deliver(&x.e);
    ck_assert_uint_eq(m.id, id);
    id = put(&x, 0);
    engine_deliver(&x.e);
    ck_assert_uint_eq(b1.id, id);
    ck_assert_int_eq(b2.n, 0);
    id = put(&x, 0);
    engine_deliver(&x.e);
    ck_assert_uint_eq(b2.id, id);
    ck_assert_uint_eq(x.t->waitq_fcfs, 0);
    /* Beanstalk only again: b1 takes, the cursor moves on; of b2 and b1,
     * waiting after that take, b1 (the later) is served first. */
    park(&x, &b1, INT64_MAX);
    park(&x, &b2, INT64_MAX);
    id = put(&x, 0);
    engine_deliver(&x.e);
    ck_assert_uint_eq(b1.id, id);
    park(&x, &b1, INT64_MAX);
    id = put(&x, 0);
    engine_deliver(&x.e);
    ck_assert_uint_eq(b1.id, id);
    ck_assert_int_eq(b1.n, 3);
    ck_assert_int_eq(b2.n, 1);
    worker_fini(&x.e, &b1.w);
    worker_fini(&x.e, &b2.w);
    worker_fini(&x.e, &m.w);
    world_free(&x);
}
END_TEST

/* Jobs are noted no more than the tube has waiters for: a kick of many
 * with one waiter notes one; the waiter still gets the first kicked. */
START_TEST(notes_bounded_by_waiters)
{
    World x;
    Seen a;
    uint64_t first = 0;

    world_init(&x);
    seen_init(&x, &a);
    for (int i = 0; i < 100; i++) {
        uint64_t id = put_delayed(&x, (uint32_t)(100 - i), (uint32_t)(1000 + i));
        if (!first)
            first = id;
    }
    park(&x, &a, INT64_MAX);
    ck_assert_uint_eq(engine_kick(&x.e, x.t, 100), 100);
    ck_assert_uint_eq(x.e.fresh_len, 1);
    engine_deliver(&x.e);
    ck_assert_uint_eq(a.id, first);
    ck_assert_uint_eq(x.e.fresh_len, 0);
    ck_assert_uint_eq(x.t->fresh_ct, 0);
    worker_fini(&x.e, &a.w);
    world_free(&x);
}
END_TEST

/* beanstalkd's set of waiting workers (ms_take): removal moves the last
 * into the hole, takes go on from a cursor. Four wait, three jobs come:
 * the first, second and fourth get them; the third waits. */
START_TEST(waiters_in_beanstalkd_set_order)
{
    World x;
    Seen s[4];
    uint64_t id[4];

    world_init(&x);
    for (int i = 0; i < 4; i++) {
        seen_init(&x, &s[i]);
        park(&x, &s[i], INT64_MAX);
    }
    for (int i = 0; i < 3; i++) {
        id[i] = put(&x, 0);
        engine_deliver(&x.e);
    }
    ck_assert_uint_eq(s[0].id, id[0]);
    ck_assert_uint_eq(s[1].id, id[1]);
    ck_assert_uint_eq(s[3].id, id[2]);
    ck_assert_int_eq(s[2].n, 0);
    ck_assert(s[2].w.waiting);
    id[3] = put(&x, 0);
    engine_deliver(&x.e);
    ck_assert_uint_eq(s[2].id, id[3]);
    /* The cursor stays past the last take: of two that wait now, the
     * one that came second is served first. */
    park(&x, &s[0], INT64_MAX);
    park(&x, &s[1], INT64_MAX);
    id[0] = put(&x, 0);
    engine_deliver(&x.e);
    ck_assert_uint_eq(s[1].id, id[0]);
    ck_assert_int_eq(s[1].n, 2);
    ck_assert(s[0].w.waiting);
    for (int i = 0; i < 4; i++)
        worker_fini(&x.e, &s[i].w);
    world_free(&x);
}
END_TEST

/* A worker served at once (a job was ready) moves its tube's cursor as
 * beanstalkd's take does; a waiter of two tubes leaves both sets. */
START_TEST(immediate_reserve_moves_the_cursor)
{
    World x;
    Seen a, b, c;
    uint64_t id1, id2;
    Job *j;

    world_init(&x);
    seen_init(&x, &a);
    seen_init(&x, &b);
    seen_init(&x, &c);
    put(&x, 0);
    ck_assert_uint_eq(x.t->waitq_last, 0);
    ck_assert_int_eq(worker_reserve(&x.e, &c.w, 0, &j), WAIT_RESERVED);
    ck_assert_uint_eq(x.t->waitq_last, 1);
    park(&x, &a, INT64_MAX);
    park(&x, &b, INT64_MAX);
    id1 = put(&x, 0);
    engine_deliver(&x.e);
    ck_assert_uint_eq(b.id, id1); /* cursor 1: the second waiting */
    ck_assert_int_eq(a.n, 0);
    id2 = put(&x, 0);
    engine_deliver(&x.e);
    ck_assert_uint_eq(a.id, id2);
    ck_assert_uint_eq(x.t->waitq_len, 0);
    ck_assert_uint_eq(x.t->waiting_ct, 0);
    worker_fini(&x.e, &a.w);
    worker_fini(&x.e, &b.w);
    worker_fini(&x.e, &c.w);
    world_free(&x);
}
END_TEST

/* A worker with a hash-indexed watch list (past WATCH_WIDE) but not past
 * WAIT_WIDE waits in each tube's set like any other: after a take it is
 * the cursor's, not the first to wait, that is served. */
START_TEST(indexed_watcher_waits_in_the_sets)
{
    World x;
    Seen many, narrow, taker;
    uint64_t id;
    Job *j;

    world_init(&x);
    seen_init(&x, &many);
    seen_init(&x, &narrow);
    seen_init(&x, &taker);
    for (int i = 0; i < WATCH_WIDE + 4; i++) {
        char name[16];
        int n = snprintf(name, sizeof name, "m%d", i);
        Tube *t = engine_tube(&x.e, name, (size_t)n);

        ck_assert_ptr_nonnull(t);
        ck_assert_int_eq(watch_add(&many.w, t), 0);
    }
    ck_assert(watch_is_wide(&many.w) && !watch_waits_wide(&many.w));
    put(&x, 0);
    ck_assert_int_eq(worker_reserve(&x.e, &taker.w, 0, &j), WAIT_RESERVED); /* cursor 1 */
    park(&x, &many, INT64_MAX);
    park(&x, &narrow, INT64_MAX);
    ck_assert(!list_linked(&many.w.wide_link));
    ck_assert_uint_eq(x.t->waitq_len, 2);
    ck_assert_uint_eq(many.w.watch[WATCH_WIDE].tube->waitq_len, 1);
    id = put(&x, 0);
    engine_deliver(&x.e);
    ck_assert_uint_eq(narrow.id, id);
    ck_assert_int_eq(many.n, 0);
    worker_fini(&x.e, &many.w);
    ck_assert_uint_eq(x.t->waitq_len, 0);
    worker_fini(&x.e, &narrow.w);
    worker_fini(&x.e, &taker.w);
    world_free(&x);
}
END_TEST

static Suite *waiter_suite(void)
{
    Suite *s = suite_create("waiter");
    TCase *tc = unit_tcase("delivery");

    tcase_add_test(tc, woken_after_the_put_not_inside_it);
    tcase_add_test(tc, first_come_first_served);
    tcase_add_test(tc, a_wake_may_call_the_engine);
    tcase_add_test(tc, no_waiter_no_posting);
    tcase_add_test(tc, timeouts_are_delivered_after_the_tick);
    tcase_add_test(tc, engine_free_with_deliveries_pending);
    tcase_add_test(tc, wide_and_narrow_share_first_come);
    tcase_add_test(tc, cancelled_waiter_not_woken);
    tcase_add_test(tc, kicked_jobs_go_out_in_kick_order);
    tcase_add_test(tc, released_jobs_go_out_in_reserve_order);
    tcase_add_test(tc, notes_bounded_by_waiters);
    tcase_add_test(tc, timed_out_jobs_go_out_in_deadline_order);
    tcase_add_test(tc, delays_end_across_tubes_in_deadline_order);
    tcase_add_test(tc, indexed_watcher_waits_in_the_sets);
    tcase_add_test(tc, delay_ending_beats_timeout_in_same_tick);
    tcase_add_test(tc, ttr_ending_before_timeout_gives_the_job);
    tcase_add_test(tc, timeout_before_ttr_times_out);
    tcase_add_test(tc, timed_out_jobs_come_back_by_worker);
    tcase_add_test(tc, pauses_ending_together_best_job_first);
    tcase_add_test(tc, pause_and_delay_ending_together_by_priority);
    tcase_add_test(tc, fifo_waiter_makes_tube_first_come);
    tcase_add_test(tc, reserves_keep_their_turn_after_the_get);
    tcase_add_test(tc, waiters_in_beanstalkd_set_order);
    tcase_add_test(tc, immediate_reserve_moves_the_cursor);
    suite_add_tcase(s, tc);
    return s;
}

UNIT_MAIN(waiter_suite)
