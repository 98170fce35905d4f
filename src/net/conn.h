/*
 * conn.h — one client connection: its I/O and its state machine.
 *
 * Contract: the connection reads whatever the socket has, parses every
 * complete command in order (pipelining), hands each to cmd_dispatch(), and
 * queues the replies; replies are written once per loop iteration by
 * conn_flush_all(), so a burst of commands costs one write. States:
 *
 *   CMD      waiting for a command line (at most MAX_LINE bytes)
 *   BODY     reading a put body straight into the new job
 *   DISCARD  throwing away a body we will not keep, then one reply
 *   SKIPLINE throwing away an overlong line up to its "\r\n"
 *   WAIT     blocked in reserve; input is left unread until it ends
 *   CLOSING  writing the last replies, then closing
 *
 * Every transition goes through conn_set_state(), which also fixes the
 * epoll interest. A client that stops reading its replies stops being read
 * once OUT_HIGH bytes are queued (back-pressure, bounded memory). Memory of
 * an idle connection is only this struct: buffers are empty and freed.
 */
#ifndef TUBED_CONN_H
#define TUBED_CONN_H

#include <stdint.h>

#include "buf.h"
#include "clock.h"
#include "event.h"
#include "job.h"
#include "list.h"

typedef struct Server Server;

typedef enum ConnState {
    CONN_CMD,
    CONN_BODY,
    CONN_DISCARD,
    CONN_SKIPLINE,
    CONN_WAIT,
    CONN_CLOSING,
} ConnState;

/* Hash index of a wide watch list (watch.c). */
typedef struct WatchSlot {
    Tube *tube;
    uint32_t idx;
} WatchSlot;

/* What a connection watches; also its entry in a tube's waiting list. */
typedef struct Watch {
    Tube *tube;
    Conn *conn;
    List wait_link;
} Watch;

enum {
    CONN_PRODUCER = 1 << 0,
    CONN_WORKER = 1 << 1,
    CONN_EOF = 1 << 2,      /* read() returned 0 */
    CONN_RDHUP = 1 << 3,    /* peer half-closed */
    CONN_DEAD = 1 << 4,     /* closed, waiting to be freed */
};

#define OUT_HIGH (256 * 1024)
/* A client with OUT_HIGH bytes of replies queued that takes none of them
 * for --stall-timeout seconds (default 30) is not reading at all: it is
 * disconnected, so it can hold neither memory nor a slot for ever. */

struct Conn {
    EvSource ev;
    Server *srv;
    uint8_t state;
    uint8_t flags;
    uint8_t after_discard;  /* reply once a DISCARD ends */
    char crlf[2];           /* the two bytes after a put body */
    Tube *use;
    Watch *watch;
    uint32_t nwatch, watch_cap;
    Watch watch0;           /* the first watch, so most conns never allocate */
    WatchSlot *wset;        /* index of a wide watch list, else NULL */
    uint32_t wset_cap;
    List wide_link;         /* srv->wide_waiters, when wide and waiting */
    uint64_t wait_seq;      /* order of waiting, first come first served */
    List reserved;          /* Job.link of jobs this connection reserved */
    Buf in;                 /* unparsed input kept between reads */
    Buf out;                /* replies not yet written */
    size_t out_off;         /* bytes of out already written */
    Job *in_job;            /* put in progress */
    uint32_t body_got;
    uint64_t discard_left;
    int64_t wait_until;     /* reserve timeout, INT64_MAX for none */
    int64_t tickat;         /* key in srv->wait_timers, INT64_MAX if absent */
    size_t timer_pos;
    List link;              /* srv->conns */
    List out_link;          /* srv->pending_out */
    List durable_link;      /* srv->durable */
    size_t durable_off;     /* out.len before the first such reply */
    List held_link;         /* srv->held: replies wait for an fsync */
    List stall_link;        /* srv->stalled: full output, peer not reading */
    int64_t stalled_since;
    size_t hold_off[2];     /* write nothing past hold_off[0] */
    uint64_t hold_gen[2];   /* the sync generation each hold waits for */
    uint8_t nholds;
};

/* Replies that may follow a DISCARD. */
enum { AFTER_JOB_TOO_BIG, AFTER_OUT_OF_MEMORY, AFTER_BAD_FORMAT };

Conn *conn_new(Server *s, int fd);
void conn_close(Conn *c);
void conn_free(Conn *c);
void conn_set_state(Conn *c, ConnState st);
/* Close once the replies queued so far are written. */
void conn_finish(Conn *c);

/* Queue replies. "line" includes its "\r\n". */
void conn_reply(Conn *c, const char *line, size_t len);
#define conn_reply_lit(c, lit) conn_reply((c), lit, sizeof(lit) - 1)
void conn_replyf(Conn *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* "WORD <id> <bytes>\r\n<body>\r\n" */
void conn_reply_job(Conn *c, const char *word, const Job *j);
/* "WORD <id>\r\n" (INSERTED, BURIED), without printf. */
void conn_reply_id(Conn *c, const char *word, uint64_t id);
/* "OK <bytes>\r\n<data>\r\n" */
void conn_reply_data(Conn *c, const Buf *data);

/* Throw away n bytes of input, then send the reply named by after. */
void conn_discard(Conn *c, uint64_t n, int after);

/* Queue c for the next write of replies. */
void conn_mark_pending(Conn *c);

/* Write queued replies of every connection that has some. */
void conn_flush_all(Server *s);

/* Close connections that stopped reading their replies long ago; the
 * monotonic time of the next such check, INT64_MAX if none. */
void conn_check_stalled(Server *s);
int64_t conn_next_stall(const Server *s);

/* Parse and run buffered input again (after a reserve ended, say). */
void conn_resume(Conn *c);

#endif
