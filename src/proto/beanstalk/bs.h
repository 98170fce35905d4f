/*
 * bs.h — the beanstalk front-end's state: the shared part (one per server)
 * and the per-connection part.
 *
 * Contract: a BsConn embeds the shared Conn (net/conn.h) first and a
 * Worker (engine/worker.h), through which it reserves, waits and holds
 * jobs. Its own parsing states, on top of the connection's OPEN / PAUSED /
 * CLOSING:
 *
 *   CMD      waiting for a command line (at most MAX_LINE bytes)
 *   BODY     reading a put body straight into the new job
 *   DISCARD  throwing away a body we will not keep, then one reply
 *   SKIPLINE throwing away an overlong line up to its "\r\n"
 *
 * A reserve that waits pauses the connection (input is left unread until
 * the engine wakes the worker). Header only: bsconn.c (I/O), cmd.c
 * (handlers) and stats.c (documents) all read these structs.
 */
#ifndef TUBED_BS_H
#define TUBED_BS_H

#include <stdint.h>

#include "conn.h"
#include "engine.h"
#include "parse.h"
#include "server.h"

typedef struct Beanstalk {
    Proto proto;            /* first: conns reach this via their proto */
    Server *srv;
    uint64_t cmd_ct[CMD_COUNT];
    uint64_t producer_ct, worker_ct;
    uint8_t allow[CMD_COUNT]; /* ROLE_* bits that may run each command (bsaccess.h) */
} Beanstalk;

typedef enum BsState {
    BS_CMD,
    BS_BODY,
    BS_DISCARD,
    BS_SKIPLINE,
    BS_REPL,     /* a replica's link: its input is acknowledgements */
} BsState;

enum {
    BS_PRODUCER = CONN_PROTO1,  /* in Conn.flags */
    BS_WORKER = CONN_PROTO2,
};

/* Replies that may follow a DISCARD. AFTER_DRAINING drops a put's body
 * (a replica's) and checks its terminator: EXPECTED_CRLF comes first. */
enum { AFTER_JOB_TOO_BIG, AFTER_OUT_OF_MEMORY, AFTER_BAD_FORMAT, AFTER_NOT_ALLOWED,
       AFTER_DRAINING };

typedef struct BsConn {
    Conn conn;
    Worker worker;
    uint8_t bstate;
    uint8_t after_discard;  /* reply once a DISCARD ends */
    uint8_t use_none;       /* uses no tube: its listener may not touch default
                               (use points at default, holding no reference
                               and not counted in using_ct) */
    uint8_t watch_none;     /* started watching nothing for the same reason,
                               and has watched nothing since */
    uint32_t pruned_gen;    /* watches checked against the listener's tubes at
                               this Server.access_gen */
    char crlf[2];           /* the two bytes after a put body */
    uint32_t body_got;
    Tube *use;
    Job *in_job;            /* put in progress */
    uint64_t discard_left;
    struct ReplLink *link;  /* BS_REPL: the primary's side of the link */
} BsConn;

static inline BsConn *bs_conn(Conn *c) { return (BsConn *)c; }
static inline Beanstalk *bs_front(const Conn *c)
{
    return container_of(c->proto, Beanstalk, proto);
}
static inline Engine *bs_engine(const Conn *c) { return &c->srv->eng; }

/* Throw away n bytes of input, then send the reply named by after. */
static inline void bs_discard(BsConn *b, uint64_t n, int after)
{
    b->discard_left = n;
    b->after_discard = (uint8_t)after;
    b->bstate = BS_DISCARD;
}

#endif
