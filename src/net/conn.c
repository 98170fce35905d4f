#include "conn.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "alloc.h"
#include "cmd.h"
#include "log.h"
#include "numparse.h"
#include "parse.h"
#include "queue.h"
#include "reserve.h"
#include "server.h"
#include "watch.h"

enum { CONN_WANT_WRITE = 1 << 5 };

/* Input buffers this large are given back when they empty. */
#define IN_KEEP (16 * 1024)
#define OUT_KEEP (64 * 1024)

static void conn_event(EvSource *src, uint32_t events);

static size_t out_pending(const Conn *c)
{
    return c->out.len - c->out_off;
}

static int takes_input(const Conn *c)
{
    return c->state <= CONN_SKIPLINE && out_pending(c) < OUT_HIGH;
}

static void update_events(Conn *c)
{
    uint32_t mask = 0;

    if (c->flags & CONN_DEAD)
        return;
    if (takes_input(c) && !(c->flags & CONN_EOF))
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

Conn *conn_new(Server *s, int fd)
{
    Conn *c = tb_calloc(1, sizeof *c);

    if (!c)
        return NULL;
    c->srv = s;
    c->ev.handler = conn_event;
    c->state = CONN_CMD;
    c->tickat = INT64_MAX;
    c->wait_until = INT64_MAX;
    list_init(&c->reserved);
    list_init(&c->link);
    list_init(&c->out_link);
    list_init(&c->durable_link);
    list_init(&c->wide_link);
    list_init(&c->held_link);
    list_init(&c->stall_link);
    c->use = s->default_tube;
    c->watch = &c->watch0;
    c->watch_cap = 1;
    c->nwatch = 1;
    c->watch0.tube = s->default_tube;
    c->watch0.conn = c;
    list_init(&c->watch0.wait_link);
    if (ev_add(&s->loop, &c->ev, fd, EPOLLIN | EPOLLRDHUP) < 0) {
        tb_free(c);
        return NULL;
    }
    tube_ref(s->default_tube);
    s->default_tube->using_ct++;
    tube_ref(s->default_tube);
    s->default_tube->watching_ct++;
    list_insert_tail(&s->conns, &c->link);
    s->conn_ct++;
    s->total_conns++;
    return c;
}

void conn_close(Conn *c)
{
    Server *s = c->srv;

    if (c->flags & CONN_DEAD)
        return;
    log_msg(LOG_CONN, "fd %d: closed", c->ev.fd);
    reserve_cancel(s, c);
    c->flags |= CONN_DEAD;
    queue_release_all(s, c);
    if (c->in_job) {
        queue_job_free(s, c->in_job);
        c->in_job = NULL;
    }
    /* Tubes are let go in beanstalkd's order, which list-tubes shows when
     * one disappears: the watched ones first, then the used one. */
    watch_clear(c);
    c->use->using_ct--;
    tube_unref(&s->tubes, c->use);
    if (c->flags & CONN_PRODUCER)
        s->producer_ct--;
    if (c->flags & CONN_WORKER)
        s->worker_ct--;
    ev_del(&s->loop, &c->ev);
    close(c->ev.fd);
    s->conn_ct--;
    list_remove(&c->out_link);
    list_remove(&c->durable_link);
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
    if (c->watch != &c->watch0)
        tb_free(c->watch);
    tb_free(c);
}

/* ---- replies ---------------------------------------------------------- */

static void mark_pending(Conn *c)
{
    if (!list_linked(&c->out_link))
        list_insert_tail(&c->srv->pending_out, &c->out_link);
}

void conn_mark_pending(Conn *c)
{
    if (!(c->flags & CONN_DEAD))
        mark_pending(c);
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
    if (c->state == CONN_CLOSING && c->out.oom)
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

static void reply_with_body(Conn *c, const char *head, size_t hlen,
                            const char *body, size_t blen)
{
    size_t start = c->out.len;

    if (buf_reserve(&c->out, hlen + blen + 2) < 0) {
        reply_failed(c);
        return;
    }
    memcpy(c->out.data + start, head, hlen);
    memcpy(c->out.data + start + hlen, body, blen);
    memcpy(c->out.data + start + hlen + blen, "\r\n", 2);
    c->out.len = start + hlen + blen + 2;
    mark_pending(c);
}

/* "WORD <a>[ <b>]\r\n" into head (64 bytes; words are short literals). */
static size_t reply_head(char *head, const char *word, uint64_t a, const uint64_t *b)
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

void conn_reply_job(Conn *c, const char *word, const Job *j)
{
    char head[64];
    uint64_t size = j->body_size;
    size_t n = reply_head(head, word, j->id, &size);

    reply_with_body(c, head, n, j->body, j->body_size);
}

void conn_reply_id(Conn *c, const char *word, uint64_t id)
{
    char head[64];

    conn_reply(c, head, reply_head(head, word, id, NULL));
}

void conn_reply_data(Conn *c, const Buf *data)
{
    char head[32];
    int n;

    if (data->oom) {
        conn_reply_lit(c, "OUT_OF_MEMORY\r\n");
        return;
    }
    n = snprintf(head, sizeof head, "OK %zu\r\n", data->len);
    reply_with_body(c, head, (size_t)n, data->data, data->len);
}

static const char *const after_replies[] = {
    [AFTER_JOB_TOO_BIG] = "JOB_TOO_BIG\r\n",
    [AFTER_OUT_OF_MEMORY] = "OUT_OF_MEMORY\r\n",
    [AFTER_BAD_FORMAT] = "BAD_FORMAT\r\n",
};

void conn_discard(Conn *c, uint64_t n, int after)
{
    c->discard_left = n;
    c->after_discard = (uint8_t)after;
    conn_set_state(c, CONN_DISCARD);
}

/* ---- input ------------------------------------------------------------ */

/* Length of the first line including "\r\n"; 0 if it is not complete yet;
 * -1 if MAX_LINE bytes hold no line end (the line is too long). Only the
 * first MAX_LINE bytes are searched, as beanstalkd's line buffer is. */
static long find_line(const char *p, size_t len)
{
    size_t lim = len < MAX_LINE ? len : MAX_LINE;
    const char *q = p, *end = p + lim;

    while ((q = memchr(q, '\r', (size_t)(end - q))) && q + 1 < end) {
        if (q[1] == '\n')
            return (long)(q - p) + 2;
        q++;
    }
    return len >= MAX_LINE ? -1 : 0;
}

static size_t take_body(Conn *c, const char *p, size_t len)
{
    Job *j = c->in_job;
    size_t want = (size_t)j->body_size + 2 - c->body_got, n = len < want ? len : want;
    size_t i = 0;

    if (c->body_got < j->body_size) {
        size_t b = j->body_size - c->body_got;
        if (b > n)
            b = n;
        memcpy(j->body + c->body_got, p, b);
        c->body_got += (uint32_t)b;
        i = b;
    }
    for (; i < n; i++)
        c->crlf[c->body_got++ - j->body_size] = p[i];
    if (c->body_got == j->body_size + 2)
        cmd_put_body_done(c);
    return n;
}

static size_t take_discard(Conn *c, size_t len)
{
    size_t n = len < c->discard_left ? len : (size_t)c->discard_left;

    c->discard_left -= n;
    if (c->discard_left == 0) {
        const char *r = after_replies[c->after_discard];
        conn_set_state(c, CONN_CMD);
        conn_reply(c, r, strlen(r));
    }
    return n;
}

/* Throwing away an overlong line, exactly as beanstalkd 1.12 does (so a
 * differential test sees the same bytes): the input after the line's
 * first MAX_LINE bytes is taken in windows of MAX_LINE bytes; a window
 * ends the line only if its first '\r' is followed by '\n' inside it;
 * otherwise the whole window is dropped and the next one is looked at.
 * c->discard_left counts the bytes seen of the current window and
 * c->after_discard holds the window's state. */
enum { SKIP_NO_CR, SKIP_CR, SKIP_DEAD };

static size_t take_skipline(Conn *c, const char *p, size_t len)
{
    size_t pos = 0;

    while (pos < len) {
        size_t room = MAX_LINE - (size_t)c->discard_left, n;
        const char *cr;

        if (c->after_discard == SKIP_CR) {
            if (p[pos] == '\n') {
                conn_set_state(c, CONN_CMD);
                conn_reply_lit(c, "BAD_FORMAT\r\n");
                return pos + 1;
            }
            c->after_discard = SKIP_DEAD;
        }
        n = len - pos < room ? len - pos : room;
        if (c->after_discard == SKIP_NO_CR && (cr = memchr(p + pos, '\r', n))) {
            n = (size_t)(cr - (p + pos)) + 1;
            /* A '\r' in the window's last byte cannot start its end. */
            c->after_discard = n == room ? SKIP_DEAD : SKIP_CR;
        }
        pos += n;
        c->discard_left += n;
        if (c->discard_left == MAX_LINE) { /* window done: next one */
            c->discard_left = 0;
            c->after_discard = SKIP_NO_CR;
        }
    }
    return pos;
}

/* Run every complete command in [p, p+len); returns the bytes used. */
static size_t consume(Conn *c, const char *p, size_t len)
{
    size_t pos = 0;

    while (pos < len && takes_input(c)) {
        size_t n;
        long line;

        switch (c->state) {
        case CONN_CMD:
            line = find_line(p + pos, len - pos);
            if (line == 0)
                return pos;
            if (line < 0) {
                c->discard_left = 0;
                c->after_discard = SKIP_NO_CR;
                conn_set_state(c, CONN_SKIPLINE);
                n = MAX_LINE;
                break;
            }
            cmd_line(c, p + pos, (size_t)line - 2);
            n = (size_t)line;
            break;
        case CONN_BODY:
            n = take_body(c, p + pos, len - pos);
            break;
        case CONN_DISCARD:
            n = take_discard(c, len - pos);
            break;
        case CONN_SKIPLINE:
            n = take_skipline(c, p + pos, len - pos);
            break;
        default:
            return pos;
        }
        pos += n;
    }
    return pos;
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

static void read_eof(Conn *c)
{
    c->flags |= CONN_EOF;
    if (c->state == CONN_WAIT) {
        reserve_hangup(c->srv, c);
    }
    /* Whatever is half-read can never complete; finish the replies. */
    if (c->state != CONN_WAIT)
        conn_finish(c);
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
            keep_leftover(c, s->scratch + used, (size_t)n - used);
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
            return;
        }
    }
    if (n == 0)
        read_eof(c);
    else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        conn_close(c);
}

void conn_resume(Conn *c)
{
    size_t used;

    if (!c->in.len || !takes_input(c))
        return;
    used = consume(c, c->in.data, c->in.len);
    if (c->flags & CONN_DEAD)
        return;
    buf_consume(&c->in, used);
    if (c->in.len == 0 && c->in.cap > IN_KEEP)
        buf_free(&c->in);
}

/* ---- output ----------------------------------------------------------- */

/* Write what is queued. Returns -1 if the connection was closed. */
static int conn_write(Conn *c)
{
    /* Replies behind a hold wait for the fsync of their records. */
    size_t limit = c->nholds ? c->hold_off[0] : c->out.len;

    while (c->out_off < limit) {
        ssize_t n = send(c->ev.fd, c->out.data + c->out_off, limit - c->out_off,
                         MSG_NOSIGNAL);
        if (n > 0) {
            c->out_off += (size_t)n;
            list_remove(&c->stall_link); /* it reads: not stalled */
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            c->flags |= CONN_WANT_WRITE;
            if (out_pending(c) >= OUT_HIGH && !list_linked(&c->stall_link)) {
                c->stalled_since = c->srv->now;
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
    c->out.len = c->out_off = 0;
    c->out.oom = 0;
    if (c->out.cap > OUT_KEEP)
        buf_free(&c->out);
    if (c->state == CONN_CLOSING) {
        conn_close(c);
        return -1;
    }
    c->flags &= (uint8_t)~CONN_WANT_WRITE;
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
        if (s->now - c->stalled_since < stall_limit(s))
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
            c->state <= CONN_SKIPLINE && !out_pending(c))
            conn_close(c);
    }
}

static void conn_event(EvSource *src, uint32_t events)
{
    Conn *c = container_of(src, Conn, ev);

    if (c->flags & CONN_DEAD)
        return;
    if (events & EPOLLERR) {
        conn_close(c);
        return;
    }
    if (events & EPOLLOUT) {
        if (conn_write(c) < 0)
            return;
        /* Output drained below the bound: commands already buffered were
         * held back by it and must run now, without waiting for new bytes. */
        conn_resume(c);
    }
    if ((events & (EPOLLIN | EPOLLHUP)) && takes_input(c) && !(c->flags & CONN_EOF)) {
        conn_read(c);
        if (c->flags & CONN_DEAD)
            return;
    }
    if (events & (EPOLLRDHUP | EPOLLHUP)) {
        c->flags |= CONN_RDHUP;
        reserve_hangup(c->srv, c);
        update_events(c);
    }
}
