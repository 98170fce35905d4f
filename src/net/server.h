/*
 * server.h — the server: one struct that owns everything, passed explicitly.
 *
 * Contract: server_init() builds an empty server from a Config and opens
 * its listening sockets (or adopts inherited ones); server_run() runs the
 * event loop until a stop is requested, then returns 0. Each loop
 * iteration: write pending replies, sleep in epoll until the nearest
 * deadline, handle every event that fired, then run the timers that came
 * due. Nothing on that path scans all tubes or all connections.
 *
 * Signals arrive through a self-pipe: a handler only writes the signal
 * number, the loop acts on it. SIGUSR1 drains (put answers DRAINING),
 * SIGUSR2 undrains, SIGTERM and SIGINT stop the loop.
 */
#ifndef TUBED_SERVER_H
#define TUBED_SERVER_H

#include <stdint.h>

#include "binlog.h"
#include "event.h"
#include "hash.h"
#include "heap.h"
#include "list.h"
#include "opts.h"
#include "parse.h"
#include "tube.h"

#define SERVER_MAX_LISTENERS 8
#define SCRATCH_SIZE 65536

typedef struct Server Server;

typedef struct Listener {
    EvSource ev;
    Server *srv;
} Listener;

/* Job counts by state, kept up to date by queue.c; server-wide totals of
 * the per-tube figures. */
typedef struct JobCounts {
    uint64_t ready, urgent, reserved, delayed, buried;
} JobCounts;

struct Server {
    Config cfg;
    EvLoop loop;
    int64_t now;            /* monotonic ns, refreshed after each wake-up */
    int64_t started;        /* monotonic ns */
    uint64_t next_id;
    Hash jobs;              /* Job by id */
    TubeSet tubes;
    Tube *default_tube;
    Heap ttr;               /* reserved jobs by TTR deadline */
    Heap wait_timers;       /* waiting connections by their next tick */
    List conns;             /* every open connection */
    List pending_out;       /* connections with replies to write */
    List dead;              /* closed connections, freed after dispatch */
    List durable;           /* connections whose replies wait for the binlog */
    List held;              /* connections with replies held for an fsync */
    List stalled;           /* connections whose peer stopped reading */
    List ready_tubes;       /* unpaused tubes with ready jobs */
    size_t nready_tubes;
    List wide_waiters;      /* waiting connections with a wide watch list */
    uint64_t wait_seq;
    Binlog binlog;
    JobCounts jobs_ct;
    uint64_t conn_ct, producer_ct, worker_ct, waiting_ct;
    uint64_t cmd_ct[CMD_COUNT];
    uint64_t job_timeouts, total_jobs, total_conns;
    uint64_t job_bytes;     /* memory of all jobs, bounded by --job-memory */
    int draining;
    int stopping;
    char instance_id[17];
    char *scratch;          /* shared read buffer, SCRATCH_SIZE bytes */
    Listener listeners[SERVER_MAX_LISTENERS];
    int nlisteners;
    EvSource sig;           /* read end of the signal self-pipe */
    int sig_pipe_w;
    int spare_fd;           /* held back so EMFILE can still refuse politely */
};

int server_init(Server *s, const Config *cfg);
int server_run(Server *s);
void server_free(Server *s);

#endif
