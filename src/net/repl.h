/*
 * repl.h — replication: a primary's links to its replicas (repl.c) and a
 * replica's link to its primary (replica.c). doc/replication.md has the
 * wire protocol; spec/replication.md the contract.
 *
 * Contract. A primary taps its binlog: every write of records goes, as
 * the same bytes plus a BL_POS record, to every replica connection (a
 * beanstalk connection that sent `replicate`, handed over by the front-end
 * with repl_attach()). A new replica first gets a snapshot, made only as
 * its socket drains (bounded output), then E. Replicas acknowledge
 * positions; with sync_replicas = N the binlog's "durable up to" report
 * passes to the connections only as far as N replicas have acknowledged
 * (repl_durable(): held replies wait). A replica connects out, applies
 * the stream through the engine (engine_apply()), writes it to its own
 * binlog, and acknowledges what is durable there, once per loop
 * iteration. repl_tick() runs once per loop iteration after the commit:
 * snapshot output, acknowledgements, reconnects, the wait watch.
 * promote/follow change roles at run time.
 *
 * Partial resync. Both roles keep a backlog (backlog.h) of the stream
 * past the snapshot: a primary the bytes it sends, a replica the bytes it
 * receives. Each stream has a random 64-bit id (replid.h: a primary's,
 * chosen when it starts or is promoted; a replica takes its primary's,
 * kept in DIR/replication-id so its own restart keeps it); a promoted server also
 * keeps the id and epoch it followed and the position it switched at. A
 * replica whose (epoch, position) lies on that history and in the backlog
 * is answered CONTINUING and sent only what follows, after an I record
 * naming the history its position must be on: a replica holding another
 * id (another history: a different primary, a restart, a tail of its own)
 * drops the link and asks again from position 0 (a full resync).
 */
#ifndef TUBED_REPL_H
#define TUBED_REPL_H

#include <stddef.h>
#include <stdint.h>

#include "backlog.h"
#include "buf.h"
#include "conn.h"
#include "event.h"
#include "list.h"
#include "server.h"

typedef struct ReplLink ReplLink;

enum { ROLE_PRIMARY, ROLE_REPLICA };
/* A replica's link to its primary. */
enum { RS_IDLE, RS_CONNECTING, RS_HANDSHAKE, RS_STREAM };

typedef struct ReplAck {
    uint64_t lsn, pos;
    int64_t at;            /* monotonic ns it was written */
} ReplAck;

typedef struct Repl {
    Server *srv;
    int role;
    uint64_t discarded;    /* records dropped converging after follow */
    uint64_t tail_counted; /* of those, counted at the answers of snapshots
                              not yet complete (records past the common
                              history); the end of a snapshot clears it */
    char last_error[200];
    uint64_t epoch_seen;   /* the highest epoch a replica's handshake named
                              (a primary fenced by it learns it is stale) */
    /* primary */
    List links;            /* ReplLink.node */
    size_t nlinks;
    ReplAck *map;          /* lsn -> position of each write, oldest first */
    size_t map_head, map_len, map_cap;
    uint64_t local_durable, repl_lsn, released;
    uint64_t released_local; /* holds replicas need not confirm: up to here */
    int wait_logged;
    int64_t beat_at;       /* next heartbeat to the replicas (monotonic ns) */
    Backlog bk;            /* the stream past the snapshot (both roles) */
    uint64_t sid;          /* a primary's stream id; a replica's: the one its
                              position lies on (0: unknown) */
    uint64_t prev_sid, prev_epoch, switch_pos; /* what a promotion left */
    uint64_t partial_resyncs, full_resyncs;    /* served, or had */
    int sid_saved;         /* a primary's id is in DIR/replication-id */
    /* replica */
    char primary[256];     /* as given; "" on a primary */
    int rstate;
    EvSource ev;
    Buf in, out;
    int64_t next_try;
    unsigned addr_nth;     /* which of the primary's addresses to try next */
    unsigned addr_count;   /* how many its name resolved to, last time */
    struct NetLookup *lookup; /* its name, being looked up (net.h) */
    int64_t heard;         /* monotonic ns: connect started, or last bytes */
    int snapshot;          /* the snapshot is still coming */
    uint64_t known_pos;    /* the primary's position, as last heard */
    uint64_t pending_pos;  /* position the records applied reach (each
                              record after the snapshot counts one) */
    uint64_t claimed;      /* the position the handshake stated */
    uint64_t new_sid;      /* the stream's id, from its I record */
    int continuing;        /* a partial resync: the I record comes first */
    uint64_t ans_epoch, ans_start; /* the CONTINUING answer's */
    uint64_t resumed_at;   /* the position a partial resync went on from */
    int force_full;        /* the next handshake asks for a snapshot */
    ReplAck *acks;         /* local lsn -> position, to acknowledge */
    size_t acks_head, acks_len, acks_cap;
    uint64_t acked;
    char logged_error[200];
} Repl;

/* Set up from s->cfg (a replica with replica_of) before the binlog opens;
 * -1 out of memory. repl_start() after it opened: tap it, connect. */
int repl_init(Server *s);
void repl_start(Server *s);
void repl_free(Server *s);

/* Once per loop iteration, after the commit and before replies go. */
void repl_tick(Server *s);
/* Work waits (snapshot output to make): the loop must not sleep. */
int repl_busy(const Server *s);
/* Monotonic ns of the next reconnect, INT64_MAX if none. */
int64_t repl_next_due(const Server *s);
/* The binlog's durable report (engine hook): held replies go as far as
 * sync_replicas allows. */
void repl_durable(Server *s, uint64_t upto);
/* After a reload: sync_replicas may have changed. */
void repl_reloaded(Server *s);

static inline int repl_is_replica(const Server *s)
{
    return s->repl && ((const Repl *)s->repl)->role == ROLE_REPLICA;
}

/* The front-end's `replicate <epoch> <position>`: writes the answer to c;
 * returns the link that c now is (its input goes to repl_link_consume()),
 * or NULL when refused (the front-end closes c after the answer). */
ReplLink *repl_attach(Server *s, Conn *c, uint64_t epoch, uint64_t pos);
/* Acknowledgements from a replica: the bytes used (all of them). */
size_t repl_link_consume(ReplLink *l, const char *p, size_t len);
/* Its connection is closing. */
void repl_link_close(ReplLink *l);

/* promote: the epoch now (a primary: unchanged), or 0 with err. */
uint64_t repl_promote(Server *s, char *err, size_t errlen);
/* follow ADDRESS: 0, or -1 with err (a bad address), or -2 with err when
 * this server keeps no binlog (-b), without which it cannot be a replica.
 * `except` (the connection asking) keeps its connection; every other one
 * gives back what it holds. */
int repl_follow(Server *s, const char *addr, size_t len, Conn *except, char *err,
                size_t errlen);

/* Figures for metrics and the HTTP checks. */
typedef struct ReplInfo {
    int role, connected, caught_up;
    uint64_t epoch, position, lag, sync_replicas, connected_replicas,
        caught_up_replicas, waiting_replies, discarded, partial_resyncs, full_resyncs;
    int waiting_long;      /* a reply has waited for replicas over 1 s */
    const char *primary, *last_error;
} ReplInfo;
void repl_info(Server *s, ReplInfo *out);
/* Each connected replica: its address and lag, for metrics. */
void repl_each_replica(Server *s, void (*fn)(void *arg, const char *addr, uint64_t lag),
                       void *arg);

/* A primary sends a BL_POS record to each replica when it has sent
 * nothing for REPL_BEAT_NS; a replica that hears nothing for
 * REPL_SILENCE_NS (a handshake unanswered, a stream gone quiet) drops the
 * link and reconnects. */
#define REPL_BEAT_NS ((int64_t)1000000000)
#define REPL_SILENCE_NS ((int64_t)10000000000)

/* replica.c (the replica's side), used by repl.c. */
void replica_begin(Server *s);
void replica_stop(Server *s);
void replica_tick(Server *s);
/* The binlog reported more records durable: acknowledge at once. */
void replica_durable(Server *s);
int replica_connected(const Server *s);
/* Bytes from the primary, as if read from the socket (the fuzz harness
 * and unit tests drive the decoder with it; read events do too): 0, or
 * -1 once the link failed (last-error says why). replica_expect_answer()
 * puts the link where the handshake's answer comes next, without a
 * socket. */
int replica_feed(Server *s, const char *p, size_t len);
void replica_expect_answer(Server *s);

#endif
