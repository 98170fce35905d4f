/*
 * snapshot.h — the engine's figures as plain numbers, for every rendering
 * of the statistics: beanstalk's YAML, memcache's STAT lines, Prometheus
 * and /tubes.json. Part of the engine's API, beside engine.h and worker.h:
 * the third engine header a front-end may include.
 *
 * Contract: engine_stats() and engine_tube_stats() fill a struct from the
 * live state, in this one place, and change nothing (the caller expires
 * due jobs first, engine_expire_all(), so no expired job is counted). A
 * renderer reads these structs (and net/srvstats.h's, which adds the
 * connection layer's figures), never the engine's state.
 *
 * Why a filled struct and not memcached's ADD_STAT callback: the four
 * renderings name, order and combine the same figures differently
 * (current-jobs-ready, tubed_jobs{state="ready"}, memcache's items = ready
 * + delayed + buried), so a figure is a typed field each renderer places
 * where its format wants it, and the compiler checks every name. A
 * callback would impose one set of key names and make three renderers
 * match keys as strings. Where two renderings do share one key list
 * (beanstalk `stats` and /tubes.json's "server"), net/srvstats.h walks it
 * once for both.
 *
 * Name order (the order of stats-tubes, /metrics and memcache's stats)
 * is byte order of the names, a shorter name before its extensions;
 * engine_tubes_sorted() is the only place that sorts tubes.
 */
#ifndef TUBED_SNAPSHOT_H
#define TUBED_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "core.h"

typedef struct EngineStats {
    JobCounts jobs;             /* by state, engine-wide */
    uint64_t total_jobs;        /* jobs created (put, fanout copies) */
    uint64_t job_timeouts;      /* TTRs that ran out */
    uint64_t waiting;           /* workers waiting in a reserve */
    uint64_t job_bytes;         /* memory of all jobs (--job-memory) */
    size_t tubes;
    int64_t uptime_ns;
    struct {
        int enabled, healthy;   /* healthy: 1 without a binlog too */
        int positions;          /* replication in use: files carry positions */
        uint32_t oldest_index, current_index; /* 0 without files */
        size_t files;           /* live files and spares */
        uint64_t file_size;     /* the size a file grows to */
        uint64_t disk_bytes, live_bytes;
        uint64_t records_written, records_migrated, compactions;
        int64_t sync_ago_ns;    /* since the last fsync; 0 when disabled */
        const char *last_error; /* "" if never unhealthy */
    } binlog;
    struct {
        uint64_t jobs, bytes;           /* bodies on disk only (read-behind) */
        uint64_t reads, waits, errors;  /* read ahead, on the loop, failed */
    } spill;
} EngineStats;

typedef struct TubeStats {
    const char *name;           /* the tube's, valid while the tube lives */
    size_t name_len;
    uint64_t urgent, ready, reserved, delayed, buried;
    uint64_t total_jobs, cmd_delete, cmd_pause;
    uint32_t using, watching, waiting;
    int64_t pause_ns;           /* the pause-tube delay; 0 when not paused */
    int64_t pause_left_ns;      /* until it resumes; 0 when not paused */
    uint64_t bytes;             /* body bytes of its jobs, every state */
    uint64_t reserved_bytes;    /* ... of its reserved jobs */
    uint64_t spilled, spilled_bytes; /* jobs (and bytes) on disk only */
    uint64_t total_expired, total_discarded, total_timeouts;
    uint64_t oldest_ready_age;  /* seconds; 0 when none is ready */
    TubeMcStats mc;             /* the memcache front-end's counters */
} TubeStats;

/* O(1): cheap enough for every /healthz. */
void engine_stats(const Engine *e, EngineStats *out);
void engine_tube_stats(const Engine *e, const Tube *t, TubeStats *out);
/* Body bytes of every job, and of the reserved ones: a walk over the
 * tubes, so apart from engine_stats() (memcache's `stats` shows it). */
void engine_body_bytes(const Engine *e, uint64_t *all, uint64_t *reserved);

/* Name order of two names: <0, 0, >0. */
int engine_name_cmp(const char *a, size_t alen, const char *b, size_t blen);
/* The same for qsort over an array of Tube pointers. */
int engine_tube_cmp(const void *a, const void *b);
/* The tubes keep(arg, t) accepts (keep NULL: every tube) in name order:
 * a new array (tb_free() it) of *n tubes, never NULL but when out of
 * memory (then *n is 0). */
Tube **engine_tubes_sorted(const Engine *e, int (*keep)(const void *arg, Tube *t),
                           const void *arg, size_t *n);

#endif
