#include "mcconn.h"

#include <errno.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "log.h"
#include "mccmd.h"
#include "mcget.h"
#include "mcstats.h"

static const WorkerOps mc_worker_ops = {mc_wake};

/* ---- life cycle --------------------------------------------------------- */

static int mc_open(Conn *c)
{
    McConn *m = mc_conn(c);
    Engine *e = mc_engine(c);

    m->mstate = MC_LINE;
    list_init(&m->defer_link);
    worker_init(e, &m->worker, &mc_worker_ops);
    /* kestrel has no TTR: an opened job stays until /close or /abort. */
    m->worker.no_ttr = 1;
    /* Between gets it watches nothing (worker_init gave it "default"). */
    watch_remove(e, &m->worker, 0);
    return 0;
}

static void mc_close(Conn *c)
{
    mc_closing(mc_conn(c));
}

/* The peer half-closed while a get waited: the get answers END. */
static void mc_hangup_conn(Conn *c)
{
    if (c->state == CONN_PAUSED)
        mc_hangup(mc_conn(c));
}

/* The server follows another primary now: a waiting get ends (END), the
 * jobs it has open go back. */
static void mc_demote(Conn *c)
{
    McConn *m = mc_conn(c);

    if (c->state == CONN_PAUSED || m->woke)
        mc_hangup(m);
    worker_release_all(mc_engine(c), &m->worker);
}

/* ---- input ------------------------------------------------------------ */

/* A body and its two terminating bytes: into the job when there is one,
 * else dropped; the terminator is kept aside for its check. */
static size_t take_body(McConn *m, const char *p, size_t len)
{
    uint64_t want = m->body_len + 2 - m->body_got;
    size_t n = len < want ? len : (size_t)want, i = 0;

    if (m->body_got < m->body_len) {
        uint64_t k = m->body_len - m->body_got;
        if (k > n)
            k = n;
        if (m->in_job)
            memcpy(job_body_mut(m->in_job) + m->body_got, p, (size_t)k);
        m->body_got += k;
        i = (size_t)k;
    }
    for (; i < n; i++)
        m->crlf[m->body_got++ - m->body_len] = p[i];
    mc_front(&m->conn)->ct.bytes_read += n;
    if (m->body_got == m->body_len + 2)
        mc_body_done(m);
    return n;
}

static size_t take_line(McConn *m, const char *p, size_t len)
{
    size_t line_len = 0, used = 0;

    switch (mc_find_line(p, len, &line_len, &used)) {
    case MC_LINE_INCOMPLETE:
        return 0;
    case MC_LINE_TOO_LONG: {
        const McErrorReply *r = mc_error(MC_ERR_LINE_TOO_LONG);
        mc_front(&m->conn)->ct.bytes_read += len;
        mc_reply(m, r->line, r->len);
        conn_finish(&m->conn);
        return len;
    }
    case MC_LINE_OK:
        break;
    }
    /* Counted first: a stats line counts itself, as memcached does. */
    mc_front(&m->conn)->ct.bytes_read += used;
    mc_line(m, p, line_len);
    return used;
}

/* Run every complete request in [p, p+len); returns the bytes used. */
static size_t mc_consume(Conn *c, const char *p, size_t len)
{
    McConn *m = mc_conn(c);
    size_t pos = 0;

    while (pos < len && conn_takes_input(c)) {
        size_t n;

        if (m->mstate == MC_BODY)
            n = take_body(m, p + pos, len - pos);
        else if (!(n = take_line(m, p + pos, len - pos)))
            break;
        pos += n;
    }
    return pos;
}

/* ---- waits ended inside the engine ------------------------------------- */

static void on_deferred(EvSource *src, uint32_t events)
{
    Memcache *f = container_of(src, Memcache, defer_ev);
    uint64_t v;

    if (read(src->fd, &v, sizeof v) < 0 && errno != EAGAIN)
        log_warn("memcache eventfd: %s", strerror(errno));
    mc_run_deferred(f);
}

int memcache_init(Memcache *f, Server *s)
{
    int fd;

    memset(f, 0, sizeof *f);
    f->srv = s;
    list_init(&f->deferred);
    f->defer_ev.fd = -1;
    f->proto = (Proto){
        .name = "memcache",
        .size = sizeof(McConn),
        .open = mc_open,
        .consume = mc_consume,
        .hangup = mc_hangup_conn,
        .close = mc_close,
        .demote = mc_demote,
        /* memcached says "ERROR Too many open connections", which clients
         * read as an unknown command; SERVER_ERROR is the protocol's word
         * for a server that cannot serve. */
        .refusal = "SERVER_ERROR too many open connections\r\n",
    };
    if (mcstats_init(f) < 0) {
        log_err("memcache: out of memory at startup");
        return -1;
    }
    fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    f->defer_ev.handler = on_deferred;
    if (fd < 0 || ev_add(&s->loop, &f->defer_ev, fd, EPOLLIN) < 0) {
        log_err("memcache: eventfd: %s", strerror(errno));
        if (fd >= 0)
            close(fd);
        f->defer_ev.fd = -1;
        mcstats_free(f);
        return -1;
    }
    return 0;
}

void memcache_free(Memcache *f)
{
    if (f->defer_ev.fd >= 0)
        close(f->defer_ev.fd);
    f->defer_ev.fd = -1;
    mcstats_free(f);
    buf_free(&f->tmp);
}
