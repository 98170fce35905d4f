/*
 * conn.h — one client connection's I/O, shared by every protocol.
 *
 * Contract: the connection reads whatever the socket has and hands it to
 * its protocol's consume(), which runs every complete request in order
 * (pipelining) and queues replies; replies are written once per loop
 * iteration by conn_flush_all(), so a burst of requests costs one write.
 * A protocol embeds Conn as the first member of its own connection struct
 * (Proto.size says how big) and never touches the socket.
 *
 * States: OPEN reads and consumes; PAUSED leaves input unread (a worker
 * waiting for a job: its later pipelined requests wait too); CLOSING
 * writes what is queued, then closes. Every transition goes through
 * conn_set_state(), which also fixes the epoll interest. A client that
 * stops reading its replies stops being read once OUT_HIGH bytes are
 * queued (back-pressure, bounded memory), and is closed after
 * --stall-timeout seconds of that. An idle connection holds its struct
 * and at most 1 KiB of buffer each way: larger ones are freed as they
 * empty. Over all connections: the memory of output buffers that still
 * hold unsent bytes is counted in Server.out_unread (a replica's stream
 * aside: repl.c's LIVE_MAX bounds it); while the other connections'
 * count is at OUT_BUDGET or more, a front-end refuses a reply larger
 * than OUT_SMALL that copies what the server holds anyway (a listing, a
 * stats document, a peek) with its protocol's out-of-memory answer,
 * instead of queueing one more copy (conn_out_refuse). A client that
 * half-closes still has every complete request it sent run and answered
 * (a wait among them ends at once, as its protocol says), then the
 * connection closes.
 *
 * Durability: conn_hold(c, ticket, repl) before queuing an acknowledgement
 * keeps it (and what follows) unwritten until the engine reports the
 * ticket durable; if the ticket is lost the replies from the hold on are
 * withdrawn and the connection closed (the protocol's last resort: no
 * client may hold an acknowledgement whose record did not reach the disk).
 * A hold names two tickets: the one its own disk must make durable, and
 * the (lower or equal) one replicas must confirm too (sync_replicas): a
 * change they never see (a journal = false tube's) waits for no replica.
 */
#ifndef TUBED_CONN_H
#define TUBED_CONN_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "event.h"
#include "list.h"

typedef struct Server Server;
typedef struct Conn Conn;

typedef enum ConnState {
    CONN_OPEN,
    CONN_PAUSED,
    CONN_CLOSING,
} ConnState;

enum {
    CONN_EOF = 1 << 0,      /* read() returned 0 */
    CONN_RDHUP = 1 << 1,    /* peer half-closed */
    CONN_DEAD = 1 << 2,     /* closed, waiting to be freed */
    CONN_WANT_WRITE = 1 << 3,
    CONN_PROTO1 = 1 << 4,   /* flags the protocol may use */
    CONN_PROTO2 = 1 << 5,
    CONN_UNCOUNTED = 1 << 6, /* a replica's stream: not in Server.out_unread */
    CONN_WITHDRAWN = 1 << 7, /* replies taken back (conn_lost): closing, no
                              * later reply (it would answer an earlier command) */
};

#define OUT_HIGH (256 * 1024)
/* Memory of unsent replies, all clients together, from which large ones
 * are refused (conn_out_refuse), and the size up to which a reply never
 * is: fixed, as the per-connection OUT_HIGH is. */
#define OUT_BUDGET ((size_t)64 << 20)
#define OUT_SMALL 4096

/* What a protocol gives the connection layer. A front-end embeds its
 * Proto in its own shared state, which its handlers reach with
 * container_of(c->proto, ...): no per-connection pointer is needed. */
typedef struct Proto {
    const char *name;
    size_t size;          /* of the protocol's struct that embeds Conn */
    /* A new connection: set up the protocol's part; -1 refuses it. */
    int (*open)(Conn *c);
    /* Run the requests in [p, p+len) while conn_takes_input(c); returns
     * the bytes used (the rest is kept and offered again). */
    size_t (*consume)(Conn *c, const char *p, size_t len);
    /* The peer half-closed or hit EOF: end a wait (a PAUSED connection
     * must become OPEN or CLOSING here). */
    void (*hangup)(Conn *c);
    /* The connection is closing: give back what it holds. */
    void (*close)(Conn *c);
    /* Optional: a reload changed its listener's role or tubes (access.h);
     * a wait the listener no longer allows must end or move. */
    void (*access_changed)(Conn *c);
    /* Optional. The server stopped taking writes (it follows another
     * primary now): give back the jobs the connection has reserved and
     * end its waits. */
    void (*demote)(Conn *c);
    /* What a client of this protocol is told when the server refuses its
     * connection (--max-connections, or no memory for it), in the
     * protocol's own words; sent best effort before the close. */
    const char *refusal;
} Proto;

struct Conn {
    EvSource ev;
    Server *srv;
    const Proto *proto;
    struct Listener *lis;   /* accepted on it; NULL: every command, every tube */
    uint8_t state;
    uint8_t flags;
    uint8_t nholds;
    Buf in;                 /* unparsed input kept between reads */
    Buf out;                /* replies not yet written */
    size_t out_off;         /* bytes of out already written */
    size_t out_counted;     /* its part of Server.out_unread (conn.c) */
    List link;              /* srv->conns */
    List out_link;          /* srv->pending_out */
    List held_link;         /* srv->held: replies wait for the binlog */
    List stall_link;        /* srv->stalled: full output, peer not reading */
    int64_t stalled_since;
    int64_t written_at;     /* engine time of the last bytes written */
    size_t hold_off[2];     /* write nothing past hold_off[0] */
    uint64_t hold_lsn[2];   /* the ticket each hold waits for */
    uint64_t hold_repl[2];  /* ... and the part replicas must confirm */
    uint32_t hold_n[2];     /* the acknowledgements each hold keeps back */
    size_t hold_at;         /* out.len at the last conn_hold (a reply held
                               twice, a tube's record then its change's,
                               is one acknowledgement) */
};

Conn *conn_new(Server *s, int fd, const Proto *p);
/* The same for a connection accepted on l (its proto, its counters). */
Conn *conn_new_on(Server *s, int fd, struct Listener *l);
void conn_close(Conn *c);
void conn_free(Conn *c);
void conn_set_state(Conn *c, ConnState st);
/* Close once the replies queued so far are written. */
void conn_finish(Conn *c);
/* Reads and consumes now (not paused, closing, or full of replies). */
int conn_takes_input(const Conn *c);

/* Queue replies. "line" includes its "\r\n". */
void conn_reply(Conn *c, const char *line, size_t len);
#define conn_reply_lit(c, lit) conn_reply((c), lit, sizeof(lit) - 1)
void conn_replyf(Conn *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* head, then body, then "\r\n", as one reply. */
void conn_reply_body(Conn *c, const char *head, size_t hlen, const char *body,
                     size_t blen);
/* "WORD <a>[ <b>]\r\n" into head (64 bytes; words are short literals),
 * without printf; returns its length. */
size_t conn_format_head(char *head, const char *word, uint64_t a, const uint64_t *b);

/* The replies queued from now on wait until ticket is durable (0: no wait)
 * and replicas confirmed repl (<= ticket; 0: none to confirm). Each call
 * is one acknowledgement (counted in hold_n, for conn_held_replies),
 * except a second call with no reply queued since. */
void conn_hold(Conn *c, uint64_t ticket, uint64_t repl);
/* How many acknowledgements of c wait for replicas: durable here (ticket
 * <= upto) and a replica ticket in (after, upto]. */
uint64_t conn_held_replies(const Conn *c, uint64_t after, uint64_t upto);
/* The oldest replica ticket of those acknowledgements; UINT64_MAX when
 * there is none. */
uint64_t conn_first_held(const Conn *c, uint64_t after, uint64_t upto);
/* The engine's reports: tickets up to upto are durable; from on, lost. */
void conn_durable(Server *s, uint64_t upto);
/* The same with replicas: durable here up to local, confirmed by the
 * replicas sync_replicas asks for up to repl (<= local). */
void conn_durable_split(Server *s, uint64_t repl, uint64_t local);
void conn_lost(Server *s, uint64_t from);

/* Bytes queued and not yet written. */
size_t conn_out_pending(const Conn *c);

/* 1: a reply of len bytes (SIZE_MAX: not known yet, large) must not be
 * queued on c now: it is larger than OUT_SMALL and the other connections
 * hold OUT_BUDGET bytes of buffers with replies unsent (counted in
 * Server.out_refused; a warning once a minute, each at -V). c's own unsent replies do not
 * count: back-pressure bounds them. The caller answers its protocol's
 * out-of-memory reply instead. */
int conn_out_refuse(Conn *c, size_t len);
/* c carries a replica's stream from now on: its bytes leave the count. */
void conn_uncount(Conn *c);

/* Queue c for the next write of replies. */
void conn_mark_pending(Conn *c);
/* The same, ahead of every connection queued so far: for bytes others
 * wait on (a replica's stream, whose acknowledgement releases the
 * replies of the rest). */
void conn_mark_first(Conn *c);

/* Read what c's socket holds now, as an epoll wake-up would (nothing when
 * it holds nothing): for input others wait on (a replica's
 * acknowledgements), which may arrive while an iteration runs. c may be
 * closed by it (check CONN_DEAD). */
void conn_read_now(Conn *c);

/* Write queued replies of every connection that has some. */
void conn_flush_all(Server *s);

/* Close connections that stopped reading their replies long ago; the
 * monotonic time of the next such check, INT64_MAX if none. */
void conn_check_stalled(Server *s);
int64_t conn_next_stall(const Server *s);

/* Consume buffered input again (after a wait ended, say). */
void conn_resume(Conn *c);

#endif
