/*
 * server.h — the server's state: the event loop, the engine, the
 * listeners and the connections, in one struct passed explicitly.
 * Header only: the connection layer and the front-ends read it;
 * serve.h has the functions that run it.
 *
 * Contract (serve.c): server_init() builds an empty server (engine included) from a
 * Config; server_listen() adds a listening socket for a protocol (or adopts
 * the inherited ones of socket activation); server_run() runs the event
 * loop until a stop is requested, then returns 0. Each loop iteration:
 * commit the engine's binlog records, write pending replies, sleep in
 * epoll until the nearest deadline, handle every event that fired, then
 * run the timers that came due. Nothing on that path scans all tubes or
 * all connections. The server knows no protocol: front-ends come in
 * through their Proto (conn.h).
 *
 * Signals arrive through a self-pipe: a handler only writes the signal
 * number, the loop acts on it. SIGUSR1 drains (put answers DRAINING),
 * SIGUSR2 undrains, SIGTERM and SIGINT stop the loop.
 */
#ifndef TUBED_SERVER_H
#define TUBED_SERVER_H

#include <stdint.h>

#include "engine.h"
#include "event.h"
#include "list.h"
#include "opts.h"
#include "sd.h"

/* At most 32: a tube caches one bit per listener (Tube.access_ok). */
#define SERVER_MAX_LISTENERS 32
#define SCRATCH_SIZE 65536
#define LISTENER_NAME_MAX 32

typedef struct Server Server;
typedef struct Proto Proto;

/* A listening socket and who may do what through it (net/access.h). The
 * -l/-p, --memcache-port and --metrics-port listeners are admin on every
 * tube (conf NULL); a [listen] section's take role and tubes from it. */
typedef struct Listener {
    EvSource ev;
    Server *srv;
    const Proto *proto;
    uint8_t index;          /* its place in Server.listeners: its Tube.access_ok bit */
    uint8_t roles;          /* ROLE_* (conflisten.h) */
    uint8_t restricted;     /* its tubes are a subset: check them */
    uint8_t peer_check;     /* users or groups: check SO_PEERCRED at accept */
    const ConfListen *conf; /* its section in the live config file, or NULL */
    char name[LISTENER_NAME_MAX + 1];
    char address[128];
    uint64_t cur_conns, total_conns, refused_cmds, refused_peers;
    int64_t refusal_logged; /* monotonic ns of the last refused-command log line */
} Listener;

struct Server {
    Config cfg;
    EvLoop loop;
    EvTimer due;            /* the engine's next timer or stall check */
    Engine eng;
    List conns;             /* every open connection */
    List pending_out;       /* connections with replies to write */
    List dead;              /* closed connections, freed after dispatch */
    List held;              /* connections with replies held for the binlog */
    List stalled;           /* connections whose peer stopped reading */
    uint64_t conn_ct, total_conns;
    uint64_t out_unread;    /* bytes of output buffers with replies unsent
                               (conn.c; a replica's stream is not counted) */
    uint64_t out_refused;   /* large replies refused for OUT_BUDGET */
    int64_t out_refusal_logged; /* monotonic ns of the last warning about it */
    int draining;
    int stopping;
    char instance_id[17];
    char *scratch;          /* shared read buffer, SCRATCH_SIZE bytes */
    Listener listeners[SERVER_MAX_LISTENERS];
    int nlisteners;
    int sd_read, sd_n;      /* socket activation: read yet, how many */
    char sd_names[SERVER_MAX_LISTENERS][SD_NAME_MAX];
    EvSource sig;           /* read end of the signal self-pipe */
    int sig_pipe_w;
    int spare_fd;           /* held back so EMFILE can still refuse politely */
    uint32_t access_gen;    /* bumped when listeners' tubes change (Tube.access_gen) */
    struct Repl *repl;      /* replication (repl.h); NULL before init */
};

#endif
