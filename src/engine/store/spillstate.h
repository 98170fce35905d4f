/*
 * spillstate.h — the state of read-behind (spill.h is its interface).
 *
 * Contract: the structs the engine's state (core.h) embeds for spilling
 * tubes: the reader thread's request queues and file descriptors, the
 * per-tube rings of ids on disk, the ids whose bodies may be dropped once
 * written, and the counters stats and metrics show. Types only.
 */
#ifndef TUBED_SPILLSTATE_H
#define TUBED_SPILLSTATE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "event.h"
#include "list.h"

typedef struct Engine Engine;
typedef struct Job Job;
typedef struct Tube Tube;
typedef struct JobBody JobBody;

/* One read-back request; the thread fills buf (and n, err). */
typedef struct SpillRead {
    uint64_t id, off;
    uint32_t file;
    uint32_t len;        /* bytes asked for */
    uint32_t n;          /* bytes read */
    int err;             /* errno; 0 when n bytes were read */
    JobBody *buf;        /* room for len bytes at buf->data */
} SpillRead;

typedef struct SpillFd {
    uint32_t index;
    int fd;              /* -1: free */
} SpillFd;

#define SPILL_FDS 8

/* Ids lo..hi: those of them that are the tube's jobs on disk only. */
typedef struct SpillSpan {
    uint64_t lo, hi;
} SpillSpan;

/* A spilling tube's ids on disk, oldest spilled first, as spans: a
 * backlog spilled in id order is one span, whatever its length, so the
 * ring costs next to nothing per job. A span may cover ids of other tubes
 * (up to SPILL_GAP in a row) that the read-ahead skips. */
#define SPILL_GAP 64
typedef struct SpillRing {
    SpillSpan *spans;
    size_t head, len, cap;
    uint64_t inflight;   /* body bytes being read back for it */
    List link;           /* Spill.rings, while it has ids */
    Tube *tube;
} SpillRing;

typedef struct Spill {
    /* the reader thread */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int running, quit;
    EvSource ev;         /* its eventfd */
    int efd;
    EvPost after_read;   /* spill_after_commit() once the answers' waiters
                            were served (posted after engine_deliver) */
    /* Under mu, one queue: [head, next) answered (the thread writes each
     * answer in place), [next, len) waiting for the thread. */
    SpillRead *q;
    size_t head, next, len, cap;
    uint64_t base;       /* requests dropped from the front so far: the
                          * thread keeps its request's place as base + i */
    uint32_t min_file;   /* under mu: files below it are gone */
    SpillFd thread_fds[SPILL_FDS]; /* the thread's own */
    SpillFd loop_fds[SPILL_FDS];   /* the loop's, for spill_load() */
    const char *dir;
    /* the loop's */
    List rings;          /* SpillRing of tubes with ids on disk */
    uint64_t *evict;     /* ids whose bodies may go once written */
    size_t nevict, evict_cap;
    uint64_t *back;      /* ids of in-memory (unspilled) jobs a worker gave
                          * back to a tube over budget (shrink.c) */
    size_t nback, back_cap;
    uint64_t jobs, bytes;          /* bodies on disk only */
    uint64_t reads, waits, errors; /* read back ahead, on the loop, failed */
    unsigned shrinking;  /* tubes a reload put over budget (engine.c) */
    int serve_all;       /* an answer's job was gone: serve every tube */
    int replayed;        /* replay is over: jobs are ringed as they come */
    int64_t backoff_until; /* no read-ahead before (after an I/O error) */
    /* Bury a ready or delayed job and log it (0), -1 if out of memory:
     * the engine installs it, as the queue and binlog sit above spill.c. */
    int (*bury)(Engine *e, Job *j);
} Spill;

#endif
