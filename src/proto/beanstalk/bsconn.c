#include "bsconn.h"

#include <string.h>

#include "access.h"
#include "bsaccess.h"
#include "cmd.h"
#include "log.h"
#include "repl.h"

static const WorkerOps bs_worker_ops = {cmd_wake};

/* ---- life cycle --------------------------------------------------------- */

static int bs_open(Conn *c)
{
    BsConn *b = bs_conn(c);
    Engine *e = bs_engine(c);

    b->bstate = BS_CMD;
    b->use = engine_default_tube(e);
    worker_init(e, &b->worker, &bs_worker_ops);
    /* A listener that may not touch default starts using and watching
     * nothing: put and reserve are refused until use and watch. use still
     * points at default (which always exists), unreferenced and uncounted. */
    if (c->lis && !access_tube(c->lis, b->use)) {
        b->use_none = 1;
        b->watch_none = 1;
        watch_remove(e, &b->worker, 0);
    } else {
        engine_tube_ref(b->use);
        b->use->using_ct++;
    }
    if (c->lis)
        b->pruned_gen = c->srv->access_gen;
    return 0;
}

static void bs_close(Conn *c)
{
    BsConn *b = bs_conn(c);
    Beanstalk *f = bs_front(c);
    Engine *e = bs_engine(c);

    /* Tubes are let go in beanstalkd's order, which list-tubes shows when
     * one disappears: the watched ones first, then the used one. */
    if (b->link) {
        repl_link_close(b->link);
        b->link = NULL;
    }
    worker_fini(e, &b->worker);
    if (b->in_job) {
        engine_job_drop(e, b->in_job);
        b->in_job = NULL;
    }
    if (!b->use_none) {
        b->use->using_ct--;
        engine_tube_unref(e, b->use);
    }
    if (c->flags & BS_PRODUCER)
        f->producer_ct--;
    if (c->flags & BS_WORKER)
        f->worker_ct--;
}

/* The peer half-closed while a reserve waited: it answers TIMED_OUT. */
static void bs_hangup(Conn *c)
{
    BsConn *b = bs_conn(c);

    if (c->state != CONN_PAUSED)
        return;
    worker_cancel(bs_engine(c), &b->worker);
    conn_set_state(c, CONN_OPEN);
    conn_reply_lit(c, "TIMED_OUT\r\n");
}

static void bs_access_changed(Conn *c)
{
    cmd_access_changed(bs_conn(c));
}

/* The server follows another primary now: reserved jobs go back, and a
 * worker waiting for a job hears DRAINING (no job comes here any more). */
static void bs_demote(Conn *c)
{
    BsConn *b = bs_conn(c);
    Engine *e = bs_engine(c);

    if (c->state == CONN_PAUSED) {
        worker_cancel(e, &b->worker);
        conn_set_state(c, CONN_OPEN);
        conn_reply_lit(c, "DRAINING\r\n");
    }
    worker_release_all(e, &b->worker);
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

static size_t take_body(BsConn *b, const char *p, size_t len)
{
    Job *j = b->in_job;
    size_t want = (size_t)j->body_size + 2 - b->body_got, n = len < want ? len : want;
    size_t i = 0;

    if (b->body_got < j->body_size) {
        size_t k = j->body_size - b->body_got;
        if (k > n)
            k = n;
        memcpy(job_body_mut(j) + b->body_got, p, k);
        b->body_got += (uint32_t)k;
        i = k;
    }
    for (; i < n; i++)
        b->crlf[b->body_got++ - j->body_size] = p[i];
    if (b->body_got == j->body_size + 2)
        cmd_put_body_done(b);
    return n;
}

static const char *const after_replies[] = {
    [AFTER_JOB_TOO_BIG] = "JOB_TOO_BIG\r\n",
    [AFTER_OUT_OF_MEMORY] = "OUT_OF_MEMORY\r\n",
    [AFTER_BAD_FORMAT] = "BAD_FORMAT\r\n",
    [AFTER_NOT_ALLOWED] = "NOT_ALLOWED\r\n",
    [AFTER_DRAINING] = "DRAINING\r\n",
};

static size_t take_discard(BsConn *b, const char *p, size_t len)
{
    size_t n = len < b->discard_left ? len : (size_t)b->discard_left;

    /* The last two bytes of a body dropped unread: its terminator. Only
     * they are looked at: a dropped body may be a gigabyte. */
    uint64_t tail = b->discard_left > 2 ? b->discard_left - 2 : 0;

    for (size_t i = tail < n ? (size_t)tail : n; i < n; i++)
        b->crlf[2 - (b->discard_left - i)] = p[i];
    b->discard_left -= n;
    if (b->discard_left == 0) {
        const char *r = after_replies[b->after_discard];
        b->bstate = BS_CMD;
        /* A replica's put: what a draining server answers, EXPECTED_CRLF
         * first (beanstalkd checks the body before its drain mode). */
        if (b->after_discard == AFTER_DRAINING && (b->crlf[0] != '\r' || b->crlf[1] != '\n'))
            r = "EXPECTED_CRLF\r\n";
        conn_reply(&b->conn, r, strlen(r));
    }
    return n;
}

/* Throwing away an overlong line, exactly as beanstalkd 1.12 does (so a
 * differential test sees the same bytes): the input after the line's
 * first MAX_LINE bytes is taken in windows of MAX_LINE bytes; a window
 * ends the line only if its first '\r' is followed by '\n' inside it;
 * otherwise the whole window is dropped and the next one is looked at.
 * b->discard_left counts the bytes seen of the current window and
 * b->after_discard holds the window's state. */
enum { SKIP_NO_CR, SKIP_CR, SKIP_DEAD };

static size_t take_skipline(BsConn *b, const char *p, size_t len)
{
    size_t pos = 0;

    while (pos < len) {
        size_t room = MAX_LINE - (size_t)b->discard_left, n;
        const char *cr;

        if (b->after_discard == SKIP_CR) {
            if (p[pos] == '\n') {
                b->bstate = BS_CMD;
                conn_reply_lit(&b->conn, "BAD_FORMAT\r\n");
                return pos + 1;
            }
            b->after_discard = SKIP_DEAD;
        }
        n = len - pos < room ? len - pos : room;
        if (b->after_discard == SKIP_NO_CR && (cr = memchr(p + pos, '\r', n))) {
            n = (size_t)(cr - (p + pos)) + 1;
            /* A '\r' in the window's last byte cannot start its end. */
            b->after_discard = n == room ? SKIP_DEAD : SKIP_CR;
        }
        pos += n;
        b->discard_left += n;
        if (b->discard_left == MAX_LINE) { /* window done: next one */
            b->discard_left = 0;
            b->after_discard = SKIP_NO_CR;
        }
    }
    return pos;
}

static size_t take_command(BsConn *b, const char *p, size_t len)
{
    long line = find_line(p, len);

    if (line == 0)
        return 0;
    if (line < 0) {
        b->discard_left = 0;
        b->after_discard = SKIP_NO_CR;
        b->bstate = BS_SKIPLINE;
        return MAX_LINE;
    }
    cmd_line(b, p, (size_t)line - 2);
    return (size_t)line;
}

/* Run every complete command in [p, p+len); returns the bytes used. */
static size_t bs_consume(Conn *c, const char *p, size_t len)
{
    BsConn *b = bs_conn(c);
    size_t pos = 0;

    while (pos < len && conn_takes_input(c)) {
        size_t n = 0;

        switch (b->bstate) {
        case BS_CMD:
            n = take_command(b, p + pos, len - pos);
            if (n == 0)
                return pos;
            break;
        case BS_BODY:
            n = take_body(b, p + pos, len - pos);
            break;
        case BS_DISCARD:
            n = take_discard(b, p + pos, len - pos);
            break;
        case BS_SKIPLINE:
            n = take_skipline(b, p + pos, len - pos);
            break;
        case BS_REPL:
            n = repl_link_consume(b->link, p + pos, len - pos);
            break;
        }
        pos += n;
        /* Waiting workers get what this command made ready before this
         * client's next command runs, as in beanstalkd. */
        engine_deliver(bs_engine(c));
    }
    return pos;
}

void beanstalk_init(Beanstalk *b, Server *s)
{
    size_t missing;

    memset(b, 0, sizeof *b);
    b->srv = s;
    /* A command without a row is admin-only; tests hold this at 0. */
    if ((missing = bs_access_init(b->allow)))
        log_warn("%zu beanstalk commands have no role decision: admin only", missing);
    b->proto = (Proto){
        .name = "beanstalk",
        .size = sizeof(BsConn),
        .open = bs_open,
        .consume = bs_consume,
        .hangup = bs_hangup,
        .close = bs_close,
        .access_changed = bs_access_changed,
        .demote = bs_demote,
        .refusal = "OUT_OF_MEMORY\r\n", /* what beanstalkd sends */
    };
}
