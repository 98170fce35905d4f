/*
 * worker.h — a worker as the engine sees it: something that watches a set
 * of tubes, holds the jobs it reserved, and may wait for the next job.
 *
 * Contract: a front-end embeds a Worker in its connection (beanstalk) or
 * session (memcache) and gives it a WorkerOps. The engine never sees the
 * connection: when a wait ends it calls ops->wake() with the outcome, and
 * the front-end formats the reply (RESERVED for beanstalk, VALUE for
 * memcache). ops->wake() is only ever called from engine_deliver(), after
 * the operation that ended the wait has finished and logged its records,
 * never from inside one, so a wake may call any engine operation. A worker's reserved jobs are on its `reserved` list (JobExt
 * links); JobExt.owner points back here, which is how "reserved by someone
 * else" is told apart.
 *
 * The watch list keeps beanstalkd's order (watch.h); past WATCH_WIDE
 * entries it also keeps a hash index, and such a "wide" worker waits in
 * one engine-wide list instead of in every tube's (waiter.c).
 */
#ifndef TUBED_WORKER_H
#define TUBED_WORKER_H

#include <stdint.h>

#include "list.h"

typedef struct Tube Tube;
typedef struct Job Job;
typedef struct Worker Worker;

/* How a wait ended. */
typedef enum WaitEnd {
    WAIT_RESERVED,      /* the job was reserved for the worker */
    WAIT_TIMED_OUT,
    WAIT_DEADLINE_SOON, /* a job it holds is about to run out of TTR */
    WAIT_NO_MEMORY,     /* a job was there but reserving it failed */
} WaitEnd;

typedef struct WorkerOps {
    void (*wake)(Worker *w, WaitEnd how, Job *j);
} WorkerOps;

/* Hash index of a wide watch list (watch.c). */
typedef struct WatchSlot {
    Tube *tube;
    uint32_t idx;
} WatchSlot;

/* What a worker watches; also its entry in a tube's waiting list. */
typedef struct Watch {
    Tube *tube;
    Worker *worker;
    uint32_t wait_pos;      /* in tube->waitq, while its worker waits */
} Watch;

struct Worker {
    const WorkerOps *ops;
    Watch *watch;
    uint32_t nwatch, watch_cap;
    Watch watch0;           /* the first watch, so most workers never allocate */
    WatchSlot *wset;        /* index of a wide watch list, else NULL */
    uint32_t wset_cap;
    uint8_t waiting;
    uint8_t ended_how;      /* WaitEnd, while on Engine.ended_waiters */
    List end_link;          /* Engine.ended_waiters: a timed-out wait to report */
    uint8_t no_ttr;         /* its reservations never time out (memcache
                               /open: kestrel has no TTR by default) */
    uint8_t fifo;           /* while it waits on a tube, that tube serves its
                               waiters first come first served (memcache:
                               kestrel's contract), not in beanstalkd's order */
    List wide_link;         /* engine's wide_waiters, when wide and waiting */
    uint64_t wait_seq;      /* order of waiting (wide against narrow) */
    List reserved;          /* JobExt.link of jobs this worker reserved */
    int64_t wait_until;     /* reserve timeout, INT64_MAX for none */
    int64_t tickat;         /* key in the engine's wait timers, INT64_MAX if absent */
    size_t timer_pos;
};

#endif
