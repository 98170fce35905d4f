#include "mcconn.h"

#include <string.h>

#include "access.h"
#include "mcaccess.h"
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
    worker_init(e, &m->worker, &mc_worker_ops);
    /* kestrel has no TTR: an opened job stays until /close or /abort. */
    m->worker.no_ttr = 1;
    /* kestrel serves waiting gets and reserves in the order they began
     * to wait: a tube with a get waiting does (waiter.c). */
    m->worker.fifo = 1;
    /* Between gets it watches nothing (worker_init gave it "default"). */
    watch_remove(e, &m->worker, 0);
    return 0;
}

static void mc_close(Conn *c)
{
    mc_closing(mc_conn(c));
}

/* The roles that may run the fetch a get or monitor is waiting for. */
static unsigned fetch_roles(const Memcache *f, int kind)
{
    switch (kind) {
    case MC_PEEK:
        return f->allow_peek;
    case MC_MONITOR:
        return f->allow[MC_CMD_MONITOR];
    default:
        return f->allow[MC_CMD_GET];
    }
}

/* A reload took the tube of a waiting get from the listener, or the role
 * that may run it: the wait ends with nothing taken, as when the client
 * gives up. Open jobs are looked at too (mc_give_back_refused). */
static void mc_access_changed_conn(Conn *c)
{
    McConn *m = mc_conn(c);

    if (m->waiting && (!access_role(c, fetch_roles(mc_front(c), m->fetch)) ||
                       (m->get_tube && !access_tube(c->lis, m->get_tube))))
        mc_hangup(m);
    /* Open jobs it could no longer close or abort go back. */
    mc_give_back_refused(m, !access_role(c, mc_front(c)->allow[MC_CMD_GET]));
}

/* The peer half-closed while a get waited: the get answers END. */
static void mc_hangup_conn(Conn *c)
{
    if (c->state == CONN_PAUSED)
        mc_hangup(mc_conn(c));
}

/* The server follows another primary now: a waiting get ends
 * (SERVER_ERROR replica), the jobs it has open go back. */
static void mc_demote(Conn *c)
{
    McConn *m = mc_conn(c);

    if (c->state == CONN_PAUSED)
        mc_demoted(m);
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
        /* Waiting workers get what this command made ready before this
         * client's next command runs. */
        engine_deliver(mc_engine(c));
    }
    return pos;
}

int memcache_init(Memcache *f, Server *s)
{
    memset(f, 0, sizeof *f);
    f->srv = s;
    f->proto = (Proto){
        .name = "memcache",
        .size = sizeof(McConn),
        .open = mc_open,
        .consume = mc_consume,
        .hangup = mc_hangup_conn,
        .access_changed = mc_access_changed_conn,
        .close = mc_close,
        .demote = mc_demote,
        /* memcached says "ERROR Too many open connections", which clients
         * read as an unknown command; SERVER_ERROR is the protocol's word
         * for a server that cannot serve. */
        .refusal = "SERVER_ERROR too many open connections\r\n",
    };
    /* A command without a row is admin-only; tests hold this at 0. */
    if (mc_access_init(f->allow))
        log_warn("memcache commands without a role decision: admin only");
    f->allow_peek = (uint8_t)mc_access_roles("get/peek");
    return 0;
}

void memcache_free(Memcache *f)
{
    buf_free(&f->tmp);
}
