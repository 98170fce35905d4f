#include "conn.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "alloc.h"
#include "clock.h"
#include "log.h"
#include "numparse.h"
#include "server.h"

/* A buffer larger than this is given back when it empties, so an idle
 * connection holds at most this much each way whatever it did before
 * (keeping up to 64 KiB, 10,000 idle workers that had each once reserved
 * a 60 KB job held 625 MiB). Reads into an empty buffer go to the shared
 * scratch buffer anyway, and replies this small are never given back. */
#define IN_KEEP 1024
#define OUT_KEEP 1024

static void conn_event(EvSource *src, uint32_t events);

static size_t out_pending(const Conn *c)
{
    return c->out.len - c->out_off;
}

size_t conn_out_pending(const Conn *c)
{
    return out_pending(c);
}

/* Bring c's part of Server.out_unread up to date: the memory its output
 * buffer holds while any of it is unsent. The buffer, not the unsent
 * bytes: a reply is kept whole until its last byte leaves (200 clients
 * that had each taken 2.8 MB of a 4 MB listing into the kernel still held
 * 4 MiB apiece), and an empty buffer of at most OUT_KEEP is not counted.
 * Every change ends here: queueing through mark_pending() (the replica
 * stream's direct appends too), sending in conn_write(), closing. */
static void account(Conn *c)
{
    size_t now = (c->flags & (CONN_DEAD | CONN_UNCOUNTED)) || !out_pending(c) ? 0
                                                                           : c->out.cap;

    c->srv->out_unread = c->srv->out_unread - c->out_counted + now;
    c->out_counted = now;
}

int conn_out_refuse(Conn *c, size_t len)
{
    Server *s = c->srv;
    uint64_t others = s->out_unread - c->out_counted;

    if (len <= OUT_SMALL || others < OUT_BUDGET)
        return 0;
    s->out_refused++;
    /* A warning an operator sees, once a minute at most: a crowd of
     * clients that ask and never read would otherwise flood the log. */
    if (!s->out_refusal_logged || s->eng.now - s->out_refusal_logged >= 60 * NS_PER_SEC) {
        s->out_refusal_logged = s->eng.now ? s->eng.now : 1;
        log_warn("fd %d: replies other clients have not read hold %llu bytes, past the "
                 "budget of %zu: refusing large replies (%llu refused so far)", c->ev.fd,
                 (unsigned long long)others, (size_t)OUT_BUDGET,
                 (unsigned long long)s->out_refused);
    } else {
        log_msg(LOG_CONN, "fd %d: other clients' unsent replies hold %llu bytes; "
                "refusing a reply", c->ev.fd, (unsigned long long)others);
    }
    return 1;
}

void conn_uncount(Conn *c)
{
    c->flags |= CONN_UNCOUNTED;
    account(c);
}

/* A connection closed while its input was being consumed (a memcache
 * reload that refused its own peer) runs nothing more of it. */
int conn_takes_input(const Conn *c)
{
    return c->state == CONN_OPEN && !(c->flags & CONN_DEAD) && out_pending(c) < OUT_HIGH;
}

static void update_events(Conn *c)
{
    uint32_t mask = 0;

    if (c->flags & CONN_DEAD)
        return;
    if (conn_takes_input(c) && !(c->flags & CONN_EOF))
        mask |= EPOLLIN;
    /* Watch for a half-close until we have seen one; level-triggered, it
     * would otherwise fire on every wake-up. */
    if (!(c->flags & (CONN_RDHUP | CONN_EOF)))
        mask |= EPOLLRDHUP;
    if (c->flags & CONN_WANT_WRITE)
        mask |= EPOLLOUT;
    if (ev_set(&c->srv->loop, &c->ev, mask) < 0)
        log_warn("epoll_ctl: %s", strerror(errno));
}

void conn_set_state(Conn *c, ConnState st)
{
    if (log_verbosity >= 2 && c->state != st)
        log_msg(LOG_CMD, "fd %d: state %d -> %d", c->ev.fd, c->state, st);
    c->state = (uint8_t)st;
    update_events(c);
}

static Conn *make_conn(Server *s, int fd, const Proto *p, Listener *l)
{
    Conn *c = tb_calloc(1, p->size);

    if (!c)
        return NULL;
    c->srv = s;
    c->proto = p;
    c->lis = l; /* before open(): what a connection starts with depends on it */
    c->ev.handler = conn_event;
    c->state = CONN_OPEN;
    list_init(&c->link);
    list_init(&c->out_link);
    list_init(&c->held_link);
    list_init(&c->stall_link);
    if (ev_add(&s->loop, &c->ev, fd, EPOLLIN | EPOLLRDHUP) < 0) {
        tb_free(c);
        return NULL;
    }
    if (p->open(c) < 0) {
        ev_del(&s->loop, &c->ev);
        tb_free(c);
        return NULL;
    }
    list_insert_tail(&s->conns, &c->link);
    s->conn_ct++;
    s->total_conns++;
    if (l) {
        l->cur_conns++;
        l->total_conns++;
    }
    return c;
}

Conn *conn_new(Server *s, int fd, const Proto *p)
{
    return make_conn(s, fd, p, NULL);
}

Conn *conn_new_on(Server *s, int fd, Listener *l)
{
    return make_conn(s, fd, l->proto, l);
}

void conn_close(Conn *c)
{
    Server *s = c->srv;

    if (c->flags & CONN_DEAD)
        return;
    log_msg(LOG_CONN, "fd %d: closed", c->ev.fd);
    c->proto->close(c);
    c->flags |= CONN_DEAD;
    account(c); /* its replies will never be sent */
    ev_del(&s->loop, &c->ev);
    close(c->ev.fd);
    s->conn_ct--;
    if (c->lis)
        c->lis->cur_conns--;
    list_remove(&c->out_link);
    list_remove(&c->held_link);
    list_remove(&c->stall_link);
    c->nholds = 0;
    list_remove(&c->link);
    /* Freed after the current batch of events: a later event in the same
     * batch may still name this connection. */
    list_insert_tail(&s->dead, &c->link);
}

void conn_free(Conn *c)
{
    list_remove(&c->link);
    buf_free(&c->in);
    buf_free(&c->out);
    tb_free(c);
}

/* ---- replies ---------------------------------------------------------- */

/* A closed connection's replies go nowhere: its fd is closed, and may
 * already be another connection's (accepted later in the same batch). */
static void mark_pending(Conn *c)
{
    if (c->flags & CONN_DEAD)
        return;
    account(c);
    if (!list_linked(&c->out_link))
        list_insert_tail(&c->srv->pending_out, &c->out_link);
}

void conn_mark_pending(Conn *c)
{
    mark_pending(c);
}

void conn_mark_first(Conn *c)
{
    if (c->flags & CONN_DEAD)
        return;
    account(c);
    if (list_linked(&c->out_link))
        list_remove(&c->out_link);
    /* (inserted before the first: at the head) */
    list_insert_tail(c->srv->pending_out.next, &c->out_link);
}

/* Out of memory for a reply: the last resort the protocol allows is to
 * close the connection; the rest of the server goes on. */
static void reply_failed(Conn *c)
{
    log_warn("fd %d: out of memory for a reply; closing", c->ev.fd);
    conn_set_state(c, CONN_CLOSING);
    c->out.len = c->out_off; /* drop the partial reply */
    mark_pending(c);
}

void conn_reply(Conn *c, const char *line, size_t len)
{
    if ((c->state == CONN_CLOSING && c->out.oom) || (c->flags & CONN_WITHDRAWN))
        return;
    if (buf_append(&c->out, line, len) < 0) {
        reply_failed(c);
        return;
    }
    mark_pending(c);
}

void conn_replyf(Conn *c, const char *fmt, ...)
{
    char line[256];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof line)
        n = 0;
    conn_reply(c, line, (size_t)n);
}

/* A body this large goes out from where it lies when nothing is queued
 * before it (send_direct()). */
#define DIRECT_MIN (16 * 1024)

/* A large body goes to the socket straight from where the job keeps it
 * when nothing waits before it: no earlier reply, no hold (a reply that
 * waits for the binlog has its hold placed before it is queued, so it
 * never comes here), and no record placed but not yet written (queued
 * replies go out after this iteration's commit: a worker must not see a
 * job put in this iteration before its record is written). One sendmsg
 * instead of copying the body into the buffer, which a pipeline of large
 * reserves grew to megabytes, faulted in and unmapped again each time: a
 * 1 MB drain ran at a third of beanstalkd's rate. Returns the bytes the
 * socket took (0 when it must be queued whole; an error shows at the next
 * write, as it would). */
static size_t send_direct(Conn *c, struct iovec *v, size_t blen)
{
    struct msghdr m = {.msg_iov = v, .msg_iovlen = 3};
    ssize_t n;

    if (blen < DIRECT_MIN || c->out.len || c->nholds || c->state != CONN_OPEN ||
        (c->flags & CONN_DEAD) || !engine_all_written(&c->srv->eng))
        return 0;
    do
        n = sendmsg(c->ev.fd, &m, MSG_NOSIGNAL);
    while (n < 0 && errno == EINTR);
    return n > 0 ? (size_t)n : 0;
}

void conn_reply_body(Conn *c, const char *head, size_t hlen, const char *body,
                     size_t blen)
{
    struct iovec v[3] = {{(void *)head, hlen}, {(void *)body, blen}, {(void *)"\r\n", 2}};
    size_t sent, total = hlen + blen + 2;

    if (c->flags & CONN_WITHDRAWN)
        return; /* (as conn_reply) */
    sent = send_direct(c, v, blen);
    if (sent == total)
        return;
    if (buf_reserve(&c->out, total - sent) < 0) {
        reply_failed(c);
        return;
    }
    /* The three parts, less what the socket took from their front. */
    for (int i = 0; i < 3; i++) {
        size_t skip = sent < v[i].iov_len ? sent : v[i].iov_len;
        memcpy(c->out.data + c->out.len, (const char *)v[i].iov_base + skip,
               v[i].iov_len - skip);
        c->out.len += v[i].iov_len - skip;
        sent -= skip;
    }
    mark_pending(c);
}

size_t conn_format_head(char *head, const char *word, uint64_t a, const uint64_t *b)
{
    size_t n = strlen(word);

    memcpy(head, word, n);
    head[n++] = ' ';
    n += fmt_u64(head + n, a);
    if (b) {
        head[n++] = ' ';
        n += fmt_u64(head + n, *b);
    }
    head[n++] = '\r';
    head[n++] = '\n';
    return n;
}

/* ---- durability holds ------------------------------------------------- */

void conn_hold(Conn *c, uint64_t ticket, uint64_t repl)
{
    int same, last;

    if (!ticket || (c->flags & CONN_DEAD))
        return;
    /* No reply queued since the last hold: the same acknowledgement. */
    same = c->nholds && c->hold_at == c->out.len;
    last = c->nholds - 1;
    c->hold_at = c->out.len;
    if (c->nholds && c->hold_lsn[last] >= ticket && c->hold_repl[last] >= repl) {
        c->hold_n[last] += !same; /* an earlier hold already keeps it back */
        return;
    }
    if (c->nholds == 2) {
        /* Two holds at most: the later one waits for the newer tickets
         * too. Tickets only grow, so nothing is released early. */
        if (ticket > c->hold_lsn[1])
            c->hold_lsn[1] = ticket;
        if (repl > c->hold_repl[1])
            c->hold_repl[1] = repl;
        c->hold_n[1] += !same;
        return;
    }
    if (same && c->hold_n[last])
        c->hold_n[last]--; /* it waits for the new hold's ticket now */
    c->hold_off[c->nholds] = c->out.len;
    c->hold_lsn[c->nholds] = ticket;
    c->hold_repl[c->nholds] = repl;
    c->hold_n[c->nholds] = 1;
    c->nholds++;
    if (!list_linked(&c->held_link))
        list_insert_tail(&c->srv->held, &c->held_link);
}

void conn_durable(Server *s, uint64_t upto)
{
    conn_durable_split(s, upto, upto);
}

void conn_durable_split(Server *s, uint64_t repl, uint64_t local)
{
    List *n = s->held.next;

    while (n != &s->held) {
        Conn *c = container_of(n, Conn, held_link);
        int released = 0;

        n = n->next;
        while (c->nholds && c->hold_lsn[0] <= local && c->hold_repl[0] <= repl) {
            c->hold_off[0] = c->hold_off[1];
            c->hold_lsn[0] = c->hold_lsn[1];
            c->hold_repl[0] = c->hold_repl[1];
            c->hold_n[0] = c->hold_n[1];
            c->hold_n[1] = 0;
            c->nholds--;
            released = 1;
        }
        if (!c->nholds)
            list_remove(&c->held_link);
        if (released)
            conn_mark_pending(c);
    }
}

uint64_t conn_held_replies(const Conn *c, uint64_t after, uint64_t upto)
{
    uint64_t n = 0;

    for (int i = 0; i < c->nholds; i++)
        if (c->hold_repl[i] > after && c->hold_repl[i] <= upto && c->hold_lsn[i] <= upto)
            n += c->hold_n[i];
    return n;
}

uint64_t conn_first_held(const Conn *c, uint64_t after, uint64_t upto)
{
    uint64_t first = UINT64_MAX;

    for (int i = 0; i < c->nholds; i++)
        if (c->hold_repl[i] > after && c->hold_repl[i] <= upto && c->hold_lsn[i] <= upto &&
            c->hold_repl[i] < first)
            first = c->hold_repl[i];
    return first;
}

/* Take back every reply from offset off on and close the connection. */
static void withdraw(Conn *c, size_t off)
{
    list_remove(&c->held_link);
    c->nholds = 0;
    if (c->flags & CONN_DEAD)
        return;
    c->flags |= CONN_WITHDRAWN;
    if (off < c->out.len)
        c->out.len = off > c->out_off ? off : c->out_off;
    conn_finish(c);
}

void conn_lost(Server *s, uint64_t from)
{
    List *n = s->held.next;

    while (n != &s->held) {
        Conn *c = container_of(n, Conn, held_link);

        n = n->next;
        if (c->hold_lsn[c->nholds - 1] >= from)
            withdraw(c, c->hold_off[0]);
    }
}

/* ---- input ------------------------------------------------------------ */

static size_t consume(Conn *c, const char *p, size_t len)
{
    return conn_takes_input(c) ? c->proto->consume(c, p, len) : 0;
}

static void keep_leftover(Conn *c, const char *p, size_t len)
{
    if (len && buf_append(&c->in, p, len) < 0) {
        log_warn("fd %d: out of memory for input; closing", c->ev.fd);
        conn_close(c);
    }
}

void conn_finish(Conn *c)
{
    conn_set_state(c, CONN_CLOSING);
    mark_pending(c);
}

/* The peer half-closed. Commands it sent before are still run (beanstalkd
 * runs them all), even those held back behind unread replies: conn_resume()
 * finishes the connection once nothing complete is left. */
static void read_eof(Conn *c)
{
    c->flags |= CONN_EOF;
    conn_resume(c);
}

/* A connection that is done (its peer closed, or it sent quit) and has
 * nothing left to send is closed now, not after the batch of events, as
 * beanstalkd (one event per wake-up) does: its reserved jobs are back and
 * stats no longer counts it when the next connection's request in the
 * same batch runs. Replies still queued keep the deferred close, after the
 * binlog commit. Called once the protocol's handlers have returned. */
static void close_if_done(Conn *c)
{
    if (!(c->flags & CONN_DEAD) && c->state == CONN_CLOSING && !out_pending(c) &&
        !c->nholds)
        conn_close(c);
}

static void conn_read(Conn *c)
{
    Server *s = c->srv;
    ssize_t n;

    if (c->in.len == 0) {
        /* The common case: read into the shared buffer, parse it all, and
         * keep only an unfinished tail. Idle connections hold no buffer. */
        n = read(c->ev.fd, s->scratch, SCRATCH_SIZE);
        if (n > 0) {
            size_t used = consume(c, s->scratch, (size_t)n);
            if (!(c->flags & CONN_DEAD))
                keep_leftover(c, s->scratch + used, (size_t)n - used);
            close_if_done(c);
            return;
        }
    } else {
        if (buf_reserve(&c->in, 4096) < 0) {
            conn_close(c);
            return;
        }
        n = read(c->ev.fd, c->in.data + c->in.len, c->in.cap - c->in.len);
        if (n > 0) {
            c->in.len += (size_t)n;
            conn_resume(c);
            close_if_done(c);
            return;
        }
    }
    if (n == 0) {
        read_eof(c);
        close_if_done(c);
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        conn_close(c);
}

void conn_read_now(Conn *c)
{
    if (!(c->flags & (CONN_DEAD | CONN_EOF)) && conn_takes_input(c))
        conn_read(c);
}

static void resume_once(Conn *c)
{
    size_t used;

    if (!c->in.len || !conn_takes_input(c))
        return;
    used = consume(c, c->in.data, c->in.len);
    if (c->flags & CONN_DEAD)
        return;
    buf_consume(&c->in, used);
    if (c->in.len == 0 && c->in.cap > IN_KEEP)
        buf_free(&c->in);
}

void conn_resume(Conn *c)
{
    resume_once(c);
    /* Half-closed: no more input comes. A wait among the buffered commands
     * ends at once (its hangup reply) and the commands after it run. */
    while ((c->flags & (CONN_EOF | CONN_DEAD)) == CONN_EOF && c->state == CONN_PAUSED) {
        c->proto->hangup(c);
        if (c->state == CONN_PAUSED)
            return;
        resume_once(c);
    }
    /* Every complete command has run (input is taken again): whatever is
     * half-read can never complete; finish the replies. */
    if ((c->flags & (CONN_EOF | CONN_DEAD)) == CONN_EOF && conn_takes_input(c))
        conn_finish(c);
}

/* ---- output ----------------------------------------------------------- */

/* Write what is queued. Returns -1 if the connection was closed. */
static int conn_write(Conn *c)
{
    /* Replies behind a hold wait for the binlog. A hold may lie past the
     * end when replies were dropped after it (out of memory): never send
     * beyond what is queued. */
    size_t limit = c->nholds && c->hold_off[0] < c->out.len ? c->hold_off[0] : c->out.len;

    while (c->out_off < limit) {
        ssize_t n = send(c->ev.fd, c->out.data + c->out_off, limit - c->out_off,
                         MSG_NOSIGNAL);
        if (n > 0) {
            c->out_off += (size_t)n;
            c->written_at = c->srv->eng.now;
            account(c);
            list_remove(&c->stall_link); /* it reads: not stalled */
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            c->flags |= CONN_WANT_WRITE;
            if (out_pending(c) >= OUT_HIGH && !list_linked(&c->stall_link)) {
                c->stalled_since = c->srv->eng.now;
                list_insert_tail(&c->srv->stalled, &c->stall_link);
            }
            update_events(c);
            return 0;
        }
        conn_close(c);
        return -1;
    }
    c->flags &= (uint8_t)~CONN_WANT_WRITE;
    if (c->out_off < c->out.len) { /* stopped at a hold */
        update_events(c);
        return 0;
    }
    /* All written. A hold can still sit at the very end (a change with no
     * reply, memcache's noreply): it moves with the buffer's start, or
     * the next reply would be cut at its old offset and the bytes between
     * sent from what the buffer held before. */
    for (int i = 0; i < c->nholds; i++)
        c->hold_off[i] = c->hold_off[i] > c->out_off ? c->hold_off[i] - c->out_off : 0;
    c->hold_at = c->hold_at > c->out_off ? c->hold_at - c->out_off : 0;
    c->out.len = c->out_off = 0;
    c->out.oom = 0;
    if (c->out.cap > OUT_KEEP)
        buf_free(&c->out);
    if (c->state == CONN_CLOSING) {
        conn_close(c);
        return -1;
    }
    update_events(c);
    return 0;
}

static int64_t stall_limit(const Server *s)
{
    return (int64_t)s->cfg.stall_timeout * NS_PER_SEC;
}

void conn_check_stalled(Server *s)
{
    List *n;

    /* Oldest first: the list is in the order connections stalled. */
    while ((n = list_first(&s->stalled))) {
        Conn *c = container_of(n, Conn, stall_link);
        if (s->eng.now - c->stalled_since < stall_limit(s))
            break;
        log_warn("fd %d: %zu bytes of replies unread for %llu s; closing",
                 c->ev.fd, out_pending(c), (unsigned long long)s->cfg.stall_timeout);
        conn_close(c);
    }
}

int64_t conn_next_stall(const Server *s)
{
    List *n = list_first(&s->stalled);

    return n ? container_of(n, Conn, stall_link)->stalled_since + stall_limit(s)
             : INT64_MAX;
}

void conn_flush_all(Server *s)
{
    List now, *n;

    /* Only the connections pending now: replies produced while resuming
     * input below belong to the next iteration, after its binlog commit. */
    list_init(&now);
    if (!list_empty(&s->pending_out)) {
        now.next = s->pending_out.next;
        now.prev = s->pending_out.prev;
        now.next->prev = &now;
        now.prev->next = &now;
        list_init(&s->pending_out);
    }
    while ((n = list_first(&now))) {
        Conn *c = container_of(n, Conn, out_link);

        list_remove(n);
        if (conn_write(c) < 0 || out_pending(c))
            continue;
        /* Replies are out: input held back behind them can go on. */
        conn_resume(c);
        if (!(c->flags & CONN_DEAD) && (c->flags & CONN_EOF) &&
            c->state == CONN_OPEN && !out_pending(c))
            conn_close(c);
    }
}

static void conn_event(EvSource *src, uint32_t events)
{
    Conn *c = container_of(src, Conn, ev);

    if (c->flags & CONN_DEAD)
        return;
    if (events & EPOLLERR) {
        /* A reset (the peer closed with replies unread, or with SO_LINGER
         * 0) still leaves what it sent before readable: run it, as
         * beanstalkd does (it reads before it sees the error), so a
         * producer's last put is not lost; then close. */
        if ((events & EPOLLIN) && conn_takes_input(c) && !(c->flags & CONN_EOF))
            conn_read(c);
        conn_close(c);
        return;
    }
    if (events & EPOLLOUT) {
        if (conn_write(c) < 0)
            return;
        /* Output drained below the bound: requests already buffered were
         * held back by it and must run now, without waiting for new bytes. */
        conn_resume(c);
    }
    if ((events & (EPOLLIN | EPOLLHUP)) && conn_takes_input(c) && !(c->flags & CONN_EOF)) {
        conn_read(c);
        if (c->flags & CONN_DEAD)
            return;
    }
    if (events & (EPOLLRDHUP | EPOLLHUP)) {
        c->flags |= CONN_RDHUP;
        if (c->state == CONN_PAUSED)
            c->proto->hangup(c);
        update_events(c);
    }
}
