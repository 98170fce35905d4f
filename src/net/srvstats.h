/*
 * srvstats.h — the server's statistics snapshot: the engine's figures
 * (snapshot.h) with the connection layer's, the process's and those a
 * front-end counts itself; and the key lists two renderings share.
 *
 * Contract: server_stats() fills a ServerStats and changes nothing (the
 * caller expires due jobs first, engine_expire_all()). It is the only
 * place these figures are gathered: beanstalk's YAML, memcache's STAT
 * lines, Prometheus and /tubes.json only render it (and TubeStats). A
 * front-end that counts things of its own (the beanstalk front-end: its
 * commands, producers and workers) hands them over through a StatsSource,
 * so another front-end (HTTP) renders them without including it.
 *
 * listener_stats() gives each listener's figures the same way.
 * srvstats_tubes() is the tubes a listener may touch, in name order
 * (engine_tubes_sorted(): the one sort). stats_doc_server() and
 * stats_doc_tube() walk the keys of beanstalk's `stats` and `stats-tube`
 * (plus stats-tubes' own) in their order, with typed values: the YAML
 * (proto/beanstalk/stats.c) and /tubes.json (proto/http/tubesjson.c)
 * render the same walk, so the two documents cannot disagree.
 */
#ifndef TUBED_SRVSTATS_H
#define TUBED_SRVSTATS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>
#include <sys/utsname.h>

#include "engine.h"
#include "server.h"
#include "snapshot.h"

/* A front-end's own counter; in_stats: one of beanstalkd's `stats` keys
 * (cmd-NAME), not only a metric. */
typedef struct StatCount {
    const char *name;
    uint64_t value;
    uint8_t in_stats;
} StatCount;

#define FRONT_MAX_COUNTS 48

typedef struct FrontStats {
    StatCount cmds[FRONT_MAX_COUNTS]; /* in the documented order */
    size_t ncmds;
    uint64_t producers, workers;      /* connections that put, reserved */
} FrontStats;

typedef struct StatsSource {
    void (*fill)(const void *front, FrontStats *out);
    const void *front;
} StatsSource;

typedef struct ServerStats {
    EngineStats engine;
    FrontStats front;           /* all zero without a source */
    uint64_t conns, total_conns;
    uint64_t out_unread;        /* output buffers with replies unsent (conn.h) */
    uint64_t out_refused;       /* large replies refused for OUT_BUDGET */
    int draining;
    int repl_shown;             /* replication in use (a replica, positions
                                   journaled, or sync_replicas): only then
                                   do documents show its figures */
    uint32_t max_job_size;
    uint64_t job_memory_limit;
    uint64_t binlog_max_size;   /* the file size in force, else -s */
    const char *instance_id;
    long pid;
    struct timeval utime, stime; /* CPU time; zero if getrusage failed */
    struct utsname uts;          /* empty strings if uname failed */
} ServerStats;

/* A listener's figures (stats-listeners, tubed_listener_*). */
typedef struct ListenerStats {
    const char *name, *address, *protocol;
    uint8_t roles;              /* ROLE_* */
    const ConfListen *conf;     /* its [listen] section (its tubes), or NULL */
    uint64_t conns, total_conns, refused_cmds, refused_peers;
} ListenerStats;

/* src may be NULL. */
void server_stats(const Server *s, const StatsSource *src, ServerStats *out);
/* Every listener's figures, in Server.listeners' order: out has room for
 * SERVER_MAX_LISTENERS; returns how many. */
int listener_stats(const Server *s, ListenerStats *out);
/* The tubes listener l may touch (NULL: every tube) in name order, *n of
 * them: a new array to tb_free(); NULL only when out of memory. */
Tube **srvstats_tubes(const Server *s, const Listener *l, size_t *n);

/* ---- the shared key lists ---------------------------------------------- */

typedef enum StatKind {
    SK_U64,
    SK_I64,
    SK_BOOL,            /* true / false */
    SK_TEXT,            /* a string YAML quotes */
    SK_WORD,            /* a string YAML leaves bare (the instance id) */
    SK_TIME,            /* seconds.microseconds */
} StatKind;

typedef struct StatVal {
    StatKind kind;
    union {
        uint64_t u;
        int64_t i;
        const char *s;
        struct timeval tv;
    } v;
} StatVal;

typedef void (*StatEmit)(void *arg, const char *key, StatVal v);

/* beanstalk `stats`: beanstalkd's keys in its order, then tubed's. */
void stats_doc_server(const ServerStats *ss, StatEmit emit, void *arg);
/* `stats-tube`'s keys; ext: then the keys stats-tubes adds. */
void stats_doc_tube(const TubeStats *ts, int ext, StatEmit emit, void *arg);
/* `stats-replication`'s keys: the spec's in its order, then tubed's. Its
 * strings come without control bytes (an address or an error from a peer). */
void stats_doc_replication(Server *s, StatEmit emit, void *arg);

#endif
