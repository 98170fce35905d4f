/*
 * tube.h — tubes and the set of all tubes.
 *
 * Contract: a tube owns a ready heap ordered by (pri, id), a delay heap
 * ordered by (deadline, id), a FIFO list of buried jobs and a FIFO list of
 * waiting connections (their Watch records). Tubes are reference-counted:
 * every job in the tube and every connection using or watching it holds one
 * reference, and the tube is freed when the last one goes (the server holds
 * one on "default" so it always exists).
 *
 * The TubeSet finds tubes by name in O(1), keeps them in an array for
 * list-tubes (creation order, a removed tube's slot taken by the last one,
 * as beanstalkd orders them), and keeps a timer heap of the tubes that have
 * something due: their earliest delayed job, the end of a pause, or the
 * earliest expiry. So the server never scans all tubes on a tick.
 */
#ifndef TUBED_TUBE_H
#define TUBED_TUBE_H

#include <stddef.h>
#include <stdint.h>

#include "agering.h"
#include "hash.h"
#include "heap.h"
#include "job.h"
#include "list.h"
#include "conf.h"
#include "names.h"

/* Counters the memcache front-end shows per queue (kestrel's stats,
 * mcstats.h) and the engine does not keep. They live and die with the
 * tube, so a tube made again after it was freed starts from zero. */
typedef struct TubeMcStats {
    uint64_t transactions;  /* /open gets that opened a job */
    uint64_t canceled;      /* opened jobs given back (abort, disconnect) */
    uint64_t flushes;       /* flush and flush_all of the tube */
    uint64_t age_ms;        /* how long the last job fetched had waited */
} TubeMcStats;

typedef struct Tube Tube;
struct Tube {
    HashNode hnode;
    Heap ready;          /* Job*, by (pri, id) */
    Heap delay;          /* Job*, by (deadline, id) */
    List buried;         /* Job.link, oldest first */
    /* Its waiting workers (narrow ones, waiter.c) as beanstalkd keeps
     * them: removal moves the last into the hole; handed jobs from the
     * cursor waitq_last on (ms_take). */
    struct Watch **waitq;
    uint32_t waitq_len, waitq_cap, waitq_last;
    uint8_t waitq_fcfs;  /* first come first served: from the moment a
                            Worker.fifo one waits until no worker waits at
                            all, so the reserves that waited beside a get
                            keep their turn after it is served (waiter.c) */
    uint32_t fresh_ct;   /* its jobs on Engine.fresh while posted */
    List ready_link;     /* server's list of tubes with jobs to hand out */
    List post_link;      /* Engine.posted_tubes: to serve after this operation */
    Heap expiry;         /* Job*, by JobExt.expires: jobs that can expire,
                            but those in the age ring */
    AgeRing age;         /* with max_age: jobs expiring at created + max_age */
    int64_t age_retry_at; /* the ring's front could not move: not before */
    TubePolicy pol;      /* its keys from the config file (policy.c) */
    struct OldestIdx *oldest; /* discard order, once it has discarded (oldest.h) */
    struct SpillRing *spill; /* its jobs on disk only, while it has some (spill.h) */
    List children;       /* fanout: its children's child_link, when a parent */
    List child_link;     /* in the parent's children, when a linked child */
    Tube *parent;        /* the fanout parent it is linked to, or NULL */
    uint8_t registered;  /* a fanout child: the engine holds a reference */
    uint8_t child_sweep; /* a registered child a replica's snapshot has not
                            sent yet: let go at its end (follow.c) */
    uint32_t child_file; /* the binlog file of its registration record
                            (store/blfile.h); 0: none */
    uint8_t posted;      /* on Engine.posted_tubes (a reference is held) */
    uint8_t repl_warned; /* a replica logged that its config does not
                            journal the primary's jobs of this tube */
    uint8_t unlinked;    /* out of the set: only flushed jobs still hold it */
    uint64_t grave_refs; /* references held by flushed jobs (engine.c) */
    uint64_t bury_seq;   /* buries so far (JobExt.bury_seq) */
    uint64_t flushed_bury_seq; /* buried jobs up to it were flushed */
    uint8_t parent_len;  /* length of "P" in "P+CHILD"; 0: no '+' */
    uint8_t parent_fanout; /* P's fanout is on in the config in force, as
                              policy.c last resolved it (a reload that turns
                              it on makes this tube a child) */
    uint64_t refs;
    uint64_t urgent_ct, reserved_ct, buried_ct;
    uint64_t cur_bytes;      /* body bytes of its jobs, every state */
    uint64_t reserved_bytes; /* ... of its reserved jobs */
    uint64_t spilled_ct, spilled_bytes; /* its jobs whose body is on disk only */
    uint8_t shrink;      /* over a budget a reload set: spill its bodies (engine.c) */
    uint8_t shrink_phase; /* 0: ready heap, 1: delay heap, 2: buried list */
    uint8_t shrink_moved; /* this pass spilled something (look again) */
    uint8_t shrink_yield; /* this pass: delayed and buried bodies make room
                             for ready ones on disk (spill.c's pump) */
    uint8_t parked_mem;  /* a delayed or buried job with its body in memory
                            may have come in since the last yield pass */
    size_t shrink_pos;   /* next heap position to look at, downwards */
    /* Phase 2's place: the next buried job to look at (towards the head),
     * by id and bury_seq, checked before use (it may have left); 0: none */
    uint64_t shrink_bid, shrink_bseq;
    uint64_t total_expired, total_discarded, total_timeouts;
    uint64_t total_jobs, cmd_delete, cmd_pause;
    uint32_t using_ct, watching_ct, waiting_ct;
    int64_t pause;       /* ns; 0 when not paused */
    int64_t unpause_at;  /* monotonic ns */
    int64_t timer_at;    /* key in TubeSet.timers; INT64_MAX when absent */
    size_t timer_pos;
    size_t list_pos;
    TubeMcStats mc;
    /* The front-ends' cache of which listeners may touch this tube
     * (net/access.h): bit i of access_ok is listener i's answer, valid
     * while access_gen is the server's. The engine never reads them. */
    uint32_t access_gen, access_ok;
    uint8_t name_len;
    char name[MAX_TUBE_NAME + 1];
};

typedef struct TubeSet {
    Hash by_name;
    Tube **list;
    size_t len, cap;
    Heap timers;         /* Tube*, by timer_at */
    /* Called when a tube is created and just before one is freed, so
     * the engine can give it its policy and (un)link fanout parents. */
    void (*on_create)(void *arg, Tube *t);
    void (*on_destroy)(void *arg, Tube *t);
    void *hook_arg;
    uint64_t freed;      /* tubes freed so far (the engine trims the heap) */
} TubeSet;

int tubes_init(TubeSet *ts);
void tubes_free(TubeSet *ts);
Tube *tubes_find(const TubeSet *ts, const char *name, size_t len);
/* Find or create (with no references yet); NULL when out of memory. */
Tube *tubes_get(TubeSet *ts, const char *name, size_t len);

static inline void tube_ref(Tube *t) { t->refs++; }
/* Drops a reference; frees the tube when none is left. A tube whose only
 * references are flushed jobs' (grave_refs) is out of the set already. */
void tube_unref(TubeSet *ts, Tube *t);
/* Drops one of the references a flushed job held. */
void tube_unref_grave(TubeSet *ts, Tube *t);

static inline int tube_paused(const Tube *t) { return t->pause != 0; }

/* A job that flush-tube took out of its tube, waiting in the engine's
 * graveyard to be freed: a ready or delayed one is no longer in its tube's
 * heap, a buried one was buried before the flush. Such a job is never
 * found, listed, logged or counted again. */
static inline int job_dead(const Job *j)
{
    const Heap *h = j->state == JOB_READY ? &j->tube->ready
                  : j->state == JOB_DELAYED ? &j->tube->delay : NULL;

    if (j->state == JOB_BURIED)
        return job_ext(j)->bury_seq <= j->tube->flushed_bury_seq;
    return h && !(j->heap_pos < h->len && h->items[j->heap_pos] == j);
}

/* Recompute t's due time and its place in the timer heap. Fails (-1, heap
 * unchanged) only when the tube must enter the heap and it cannot grow. */
int tube_timer_update(TubeSet *ts, Tube *t);

#endif
