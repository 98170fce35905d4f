/*
 * core.h — the engine's state: one struct that owns every job, tube,
 * heap, timer and the binlog.
 *
 * Contract: the modules of the engine (queue, waiter, watch, binlog,
 * replay) share this struct; everything outside the engine uses engine.h,
 * whose operations keep its invariants. Header only, so every engine
 * module can see the state without including the engine's interface.
 */
#ifndef TUBED_CORE_H
#define TUBED_CORE_H

#include <stdint.h>

#include "storestate.h"
#include "clock.h"
#include "event.h"
#include "hash.h"
#include "heap.h"
#include "job.h"
#include "list.h"
#include "opts.h"
#include "tube.h"
#include "worker.h"

typedef struct Engine Engine;

/* Job counts by state, kept up to date by queue.c; engine-wide totals of
 * the per-tube figures. */
typedef struct JobCounts {
    uint64_t ready, urgent, reserved, delayed, buried;
} JobCounts;

/* How the binlog tells a front-end about its acknowledgements. */
typedef struct EngineHooks {
    void (*durable)(void *arg, uint64_t upto); /* tickets <= upto are safe */
    void (*lost)(void *arg, uint64_t from);    /* tickets >= from are lost */
    void *arg;
} EngineHooks;

struct Engine {
    const Config *cfg;
    EvLoop *loop;           /* the binlog's eventfds, posted deliveries */
    int64_t now;            /* monotonic ns, refreshed after each wake-up */
    ClockOffset wall;       /* realtime - monotonic, read once per `now`: the
                             * binlog's realtimes and a replica's apply */
    int64_t started;        /* monotonic ns */
    int64_t stamp;          /* last deadline base given out (queue.c) */
    uint64_t next_id;
    Hash jobs;              /* Job by id */
    TubeSet tubes;
    Tube *default_tube;
    Heap ttr;               /* reserved jobs by TTR deadline */
    Heap wait_timers;       /* waiting workers by their next tick */
    List ready_tubes;       /* unpaused tubes with ready jobs */
    size_t nready_tubes;
    List wide_waiters;      /* waiting workers with a wide watch list */
    List orphans;           /* fanout children whose parent tube is gone */
    uint64_t wait_seq;
    Binlog binlog;
    Spill spill;            /* read-behind (spill.h) */
    JobCounts jobs_ct;
    uint64_t waiting_ct;
    uint64_t job_timeouts, total_jobs;
    uint64_t job_bytes;     /* memory of all jobs, bounded by --job-memory */
    EngineHooks hooks;
    uint64_t trimmed_at;    /* tubes.freed when the heap was last trimmed */
    /* flush-tube's graveyard: the heaps of jobs it took out at once, freed
     * a batch per loop iteration (job_dead() tells their jobs). */
    struct Grave {
        void **items;
        size_t len;
    } *graves;
    size_t ngraves, graves_cap;
    List grave_buried;      /* flushed buried jobs (JobExt.link) */
    uint64_t grave_jobs;    /* jobs in the graveyard */
    unsigned shrink_holds;  /* who keeps the job table from shrinking now:
                               HOLD_GRAVE, HOLD_SWEEP (engine.c) */
    /* A tube has a job to hand out: waiter.c installs this, so the queue
     * layer below it can announce ready jobs without knowing who waits.
     * It only notes the tube; engine_deliver() serves it afterwards. */
    void (*on_ready)(struct Engine *e, Tube *t);
    /* The same for one job made ready (queue_enqueue): it also notes the
     * job, so engine_deliver() hands jobs out in the order they came. */
    void (*on_ready_job)(struct Engine *e, Job *j);
    /* Ids of jobs made ready, in that order, while their tube had waiters
     * (waiter.c): beanstalkd gives each such job to a waiter as it comes
     * (a kick of three hands out the first kicked, not the best). */
    uint64_t *fresh;
    size_t fresh_len, fresh_cap, fresh_head;
    uint64_t wide_ct;       /* workers on wide_waiters */
    List posted_tubes;      /* Tube.post_link: jobs to hand to waiters */
    List ended_waiters;     /* Worker.end_link: waits that timed out */
    EvPost deliver;         /* runs engine_deliver() after the handler */
    /* Replication (follow.c): a replica's timers stay idle and nothing
     * expires on lookup; the ids a snapshot has not sent yet. */
    int passive;
    int exptimes_seen;      /* a job had a client's expiry while passive,
                             * or was in an expiry heap when it began */
    uint64_t *sweep_ids;    /* the jobs a snapshot began with, sorted */
    unsigned char *sweep_sent; /* per sweep_ids: 1 once the primary sent it
                                * (a flag beside it: zeroing the id broke the
                                * order the binary search needs) */
    size_t sweep_n;
    uint64_t sweep_replaced; /* jobs of sweep_ids the snapshot replaced by
                              * another job of the same id */
};

#endif
