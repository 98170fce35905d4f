/*
 * mc.h — the kestrel (memcache text) front-end's state: the shared part
 * (one per server) and the per-connection part.
 *
 * Contract: an McConn embeds the shared Conn (net/conn.h) first and a
 * Worker (engine/worker.h) through which it takes, opens and waits for
 * jobs. The Worker has no_ttr set: a job opened with get q/open stays
 * reserved until /close, /abort or the connection ends. Between commands
 * the Worker watches nothing; a get watches exactly its tube for as long
 * as it runs (or waits), so a memcache connection keeps a tube alive only
 * while it waits on it or holds an open job of it (spec kestrel.md §2).
 *
 * Parsing states, on top of the connection's OPEN / PAUSED / CLOSING:
 *
 *   LINE     waiting for a command line (at most MC_MAX_LINE bytes)
 *   BODY     reading a body and its "\r\n": straight into the new job for
 *            a set that will be stored, else thrown away before the one
 *            reply the command gets (mcparse.h: a body is always read
 *            before anything is answered)
 *
 * A get that waits pauses the connection (its later pipelined commands
 * wait too); the engine wakes it after the operation that served it
 * (engine_deliver), where the get finishes at once. Header only: mcconn.c (I/O), mccmd.c (set and
 * the other commands), mcget.c (the get family and waits) and mcstats.c
 * (stats documents) all read these structs.
 */
#ifndef TUBED_MC_H
#define TUBED_MC_H

#include <stdint.h>

#include "buf.h"
#include "conn.h"
#include "engine.h"
#include "event.h"
#include "hash.h"
#include "log.h"
#include "mcparse.h"
#include "server.h"

/* Server-wide counters of the memcache front-end (spec kestrel.md §6). */
typedef struct McCounters {
    uint64_t cmd_get, cmd_set, cmd_peek, get_hits, get_misses;
    uint64_t bytes_read, bytes_written;
    uint64_t queue_creates, queue_deletes;
} McCounters;

typedef struct Memcache {
    Proto proto;            /* first: conns reach this via their proto */
    Server *srv;
    McCounters ct;
    Buf tmp;                /* a taken job's reply, built before its delete */
    uint8_t allow[MC_CMD_COUNT]; /* ROLE_* bits that may run each command (mcaccess.h) */
    uint8_t allow_peek;     /* ... a get whose only option is /peek */
} Memcache;

typedef enum McState {
    MC_LINE,
    MC_BODY,
} McState;

/* What a get does with the job it fetches. */
typedef enum McFetch {
    MC_TAKE,    /* plain get: reserve and delete in one step */
    MC_OPEN,    /* get q/open: reserve until /close or /abort */
    MC_PEEK,    /* get q/peek: show, change nothing */
    MC_MONITOR, /* monitor: like OPEN, then one more END */
} McFetch;

typedef struct McConn {
    Conn conn;
    Worker worker;
    uint8_t mstate;         /* McState */
    /* BODY */
    uint8_t body_err;       /* McErr to answer once the body is read; MC_OK:
                               store in_job (or NOT_STORED without one) */
    uint8_t noreply;
    char crlf[2];           /* the two bytes after the body */
    uint64_t body_len, body_got;
    Job *in_job;            /* set: the job the body goes into */
    Tube *in_tube;          /* set: its tube (a reference is held) */
    /* A get in progress (waiting). */
    uint8_t fetch;          /* McFetch */
    uint8_t waiting;        /* parked in the engine */
    uint8_t hidden;         /* ...on a queue the listener may not touch:
                               nothing watched, only the refusal counted */
    Tube *get_tube;         /* the tube watched (reference held by the watch) */
    char *get_key;          /* the key to echo in VALUE */
    size_t get_key_len;
} McConn;

static inline McConn *mc_conn(Conn *c) { return (McConn *)c; }
static inline Memcache *mc_front(const Conn *c)
{
    return container_of(c->proto, Memcache, proto);
}
static inline Engine *mc_engine(const Conn *c) { return &c->srv->eng; }

/* Every reply of the front-end goes through here (bytes_written). */
static inline void mc_reply(McConn *m, const char *p, size_t n)
{
    mc_front(&m->conn)->ct.bytes_written += n;
    conn_reply(&m->conn, p, n);
}
#define mc_reply_lit(m, lit) mc_reply((m), lit, sizeof(lit) - 1)

/* The reply about to be queued reports a change the binlog holds: it waits
 * until the change is durable. */
static inline void mc_hold(McConn *m)
{
    Engine *e = mc_engine(&m->conn);

    conn_hold(&m->conn, engine_ticket(e), engine_repl_ticket(e));
}

/* An error of mcparse.h's table, and the close it calls for. */
static inline void mc_reply_err(McConn *m, McErr err)
{
    const McErrorReply *r = mc_error(err);

    mc_reply(m, r->line, r->len);
    if (r->close)
        conn_finish(&m->conn);
}

/* Out of memory: the bare SERVER_ERROR kestrel sends when it cannot serve
 * (the table's line for draining), and the connection closes, the
 * protocol's last resort. */
static inline void mc_reply_no_memory(McConn *m)
{
    log_warn("fd %d: out of memory for a memcache command; closing", m->conn.ev.fd);
    mc_reply_err(m, MC_ERR_DRAINING);
}

#endif
