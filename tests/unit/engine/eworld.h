/*
 * eworld.h — an Engine without sockets, for the engine's unit tests
 * (test_queue.c, test_policy.c, test_engine.c).
 *
 * Contract: ew_init() builds a loop, a Config (the defaults, plus a config
 * file's text when one is given) and an Engine on them, exactly as the
 * server does but without a listener; no binlog. The test owns the clock:
 * ew_at() sets e->now and runs the engine's timers (engine_tick) and the
 * deliveries they posted, as one loop iteration would. A Rec is a worker
 * whose wake records what it was told. ew_counts() recounts a tube's jobs
 * from its heaps and lists and checks them against the counters queue.c
 * keeps. Tubes named by the test are held (a reference each) until
 * ew_free(), so a tube emptied by a test stays valid. Header only: each test binary is one translation unit.
 */
#ifndef TUBED_TEST_EWORLD_H
#define TUBED_TEST_EWORLD_H

#include <string.h>

#include "clock.h"
#include "conf.h"
#include "core.h"
#include "engine.h"
#include "event.h"
#include "unit.h"
#include "watch.h"

typedef struct EWorld {
    EvLoop loop;
    Config cfg;
    Engine e;
    Tube *held[32];     /* tubes ew_tube() named: a reference each, as a */
    size_t nheld;       /* client's use keeps one (an empty tube stays) */
} EWorld;

/* A worker that records its wakes. */
typedef struct Rec {
    Worker w;
    int n;          /* wakes so far */
    WaitEnd how;    /* of the last one */
    uint64_t id;    /* job of the last one, 0 if none */
} Rec;

static inline void rec_wake(Worker *w, WaitEnd how, Job *j)
{
    Rec *r = container_of(w, Rec, w);

    r->n++;
    r->how = how;
    r->id = j ? j->id : 0;
}

static const WorkerOps rec_ops = {.wake = rec_wake};

/* conf: a config file's text, or NULL for none. */
static inline void ew_init(EWorld *x, const char *conf)
{
    char err[256];

    memset(x, 0, sizeof *x);
    opts_defaults(&x->cfg);
    if (conf)
        ck_assert_msg(conf_parse("t.conf", conf, strlen(conf), &x->cfg.conf, err,
                                 sizeof err) == 0, "conf_parse: %s", err);
    ck_assert_int_eq(ev_init(&x->loop), 0);
    ck_assert_int_eq(engine_init(&x->e, &x->cfg, &x->loop), 0);
    x->e.now = clock_mono();
}

static inline void ew_free(EWorld *x)
{
    for (size_t i = 0; i < x->nheld; i++)
        engine_tube_unref(&x->e, x->held[i]);
    engine_free(&x->e);
    ev_close(&x->loop);
    conf_free(x->cfg.conf);
}

/* Apply a new config file's text as a SIGHUP does (serve.c). */
static inline void ew_reload(EWorld *x, const char *conf)
{
    ConfFile *next = NULL;
    char err[256];

    ck_assert_msg(conf_parse("t.conf", conf, strlen(conf), &next, err, sizeof err) == 0,
                  "conf_parse: %s", err);
    ck_assert_int_eq(engine_reload_prepare(&x->e, next), 0);
    conf_free(x->cfg.conf);
    x->cfg.conf = next;
    engine_reload(&x->e);
}

/* The tube of that name, created if need be and held (a reference, as
 * a client that uses it holds one) until ew_free(). */
static inline Tube *ew_tube(EWorld *x, const char *name)
{
    Tube *t = engine_tube(&x->e, name, strlen(name));

    ck_assert_ptr_nonnull(t);
    ck_assert_uint_lt(x->nheld, sizeof x->held / sizeof x->held[0]);
    engine_tube_ref(t);
    x->held[x->nheld++] = t;
    return t;
}

/* put body into t: the result, and the new job's id in *id. */
static inline EngineResult ew_put_r(EWorld *x, Tube *t, const char *body, uint32_t pri,
                             uint32_t delay, uint32_t ttr, uint64_t *id)
{
    uint32_t n = (uint32_t)strlen(body);
    Job *j = engine_job_new(&x->e, t, n, pri, delay, ttr);
    EngineResult r;

    ck_assert_ptr_nonnull(j);
    memcpy(job_body_mut(j), body, n);
    *id = j->id;
    r = engine_put(&x->e, j, t);
    if (r != ENG_OK && r != ENG_BURIED)
        engine_job_drop(&x->e, j);
    engine_deliver(&x->e);
    return r;
}

/* put that must succeed; returns the id. */
static inline uint64_t ew_put(EWorld *x, Tube *t, const char *body, uint32_t pri,
                       uint32_t delay, uint32_t ttr)
{
    uint64_t id;

    ck_assert_int_eq(ew_put_r(x, t, body, pri, delay, ttr, &id), ENG_OK);
    return id;
}

/* The clock is at now_ns (monotonic): run the due timers and deliveries. */
static inline void ew_at(EWorld *x, int64_t now_ns)
{
    x->e.now = now_ns;
    engine_tick(&x->e);
    engine_deliver(&x->e);
    ev_run_posted(&x->loop);
}

static inline void ew_later(EWorld *x, int64_t ns)
{
    ew_at(x, x->e.now + ns);
}

/* A worker watching only `tube` (NULL: the default tube only). */
static inline void rec_init(EWorld *x, Rec *r, const char *tube)
{
    memset(r, 0, sizeof *r);
    worker_init(&x->e, &r->w, &rec_ops);
    if (tube) {
        ck_assert_int_eq(watch_add(&r->w, ew_tube(x, tube)), 0);
        watch_remove(&x->e, &r->w, 0); /* the default tube */
    }
}

/* reserve with timeout 0: the id reserved, 0 if nothing was ready. */
static inline uint64_t ew_reserve(EWorld *x, Rec *r)
{
    Job *j = NULL;
    int how = worker_reserve(&x->e, &r->w, 0, &j);

    if (how == WAIT_RESERVED) {
        ck_assert_ptr_nonnull(j);
        ck_assert_int_eq(j->state, JOB_RESERVED);
        return j->id;
    }
    ck_assert_int_eq(how, WAIT_TIMED_OUT);
    return 0;
}

/* A tube's jobs by state, recounted from its heaps and lists. */
typedef struct Counts {
    uint64_t ready, delayed, buried, reserved, urgent;
} Counts;

static inline Counts ew_counts(EWorld *x, const Tube *t)
{
    Counts c = {t->ready.len, t->delay.len, 0, 0, 0};
    uint64_t all = 0;

    for (const List *n = t->buried.next; n != &t->buried; n = n->next)
        c.buried++;
    for (size_t i = 0; i < t->ready.len; i++)
        c.urgent += ((const Job *)t->ready.items[i])->pri < 1024;
    /* Reserved jobs are in no list of the tube: count them in the table. */
    for (uint64_t id = 1; id < x->e.next_id; id++) {
        const Job *j = job_table_find(&x->e.jobs, id);
        if (j && j->tube == t) {
            all++;
            c.reserved += j->state == JOB_RESERVED;
        }
    }
    REQ_UEQ(all, c.ready + c.delayed + c.buried + c.reserved);
    REQ_UEQ(t->buried_ct, c.buried);
    REQ_UEQ(t->reserved_ct, c.reserved);
    REQ_UEQ(t->urgent_ct, c.urgent);
    return c;
}

static inline JobState ew_state(EWorld *x, uint64_t id)
{
    Job *j = engine_find(&x->e, id);

    ck_assert_msg(j != NULL, "job %ju not found", (uintmax_t)id);
    return (JobState)j->state;
}

#endif
