#include "mccmd.h"

#include <string.h>

#include "access.h"
#include "alloc.h"
#include "clock.h"
#include "mcget.h"
#include "mcstats.h"
#include "numparse.h"
#include "repl.h"
#include "serve.h"

typedef void (*Handler)(McConn *m, const McCmd *cmd);

static Engine *eng(McConn *m)
{
    return &m->conn.srv->eng;
}

static Memcache *front(McConn *m)
{
    return mc_front(&m->conn);
}

/* A document built in d (ending "END\r\n"); freed here. A large one
 * waits while other clients leave the budget of replies unread (conn.h):
 * memcached's answer when it cannot write stats, and the connection
 * stays. */
static void reply_doc(McConn *m, Buf *d)
{
    if (d->oom)
        mc_reply_no_memory(m);
    else if (conn_out_refuse(&m->conn, d->len))
        mc_reply_err(m, MC_ERR_BUSY_STATS);
    else
        mc_reply(m, d->data, d->len);
    buf_free(d);
}

/* ---- set ------------------------------------------------------------------ */

/* Read a body of len bytes and its "\r\n", then answer per err (MC_OK:
 * store m->in_job, or NOT_STORED without one). */
static void start_body(McConn *m, uint64_t len, McErr err, int noreply)
{
    m->mstate = MC_BODY;
    m->body_len = len;
    m->body_got = 0;
    m->body_err = (uint8_t)err;
    m->noreply = (uint8_t)noreply;
}

/* kestrel's exptime as a monotonic deadline (JobExt.exptime); 0: none. */
static int64_t expiry_mono(const Engine *e, int32_t exptime)
{
    int64_t wall, wall_s, at, mono;
    /* A century either way: beyond that nothing differs, and ns stay in
     * range. */
    const int64_t span = INT64_C(3153600000);

    /* The common case, never expiring, needs no clock: reading it was 4 %
     * of the time of pipelined sets. */
    if (exptime == 0)
        return 0;
    wall = clock_wall();
    wall_s = wall / NS_PER_SEC;
    if (!mc_expiry(exptime, wall_s, &at))
        return 0;
    if (at > wall_s + span)
        at = wall_s + span;
    if (at < wall_s - span)
        at = wall_s - span;
    mono = engine_now(e) + (at * NS_PER_SEC - wall);
    return mono > 0 ? mono : 1; /* already past: expired, never "none" */
}

static void do_set(McConn *m, const McCmd *cmd)
{
    Engine *e = eng(m);
    Tube *t;
    Job *j;
    int64_t exp;

    front(m)->ct.cmd_set++;
    if (m->conn.srv->draining) {
        start_body(m, cmd->bytes, MC_ERR_DRAINING, cmd->noreply);
        return;
    }
    if (!(t = mc_tube_get(m, cmd->name, cmd->name_len))) {
        start_body(m, cmd->bytes, MC_ERR_DRAINING, cmd->noreply); /* no memory */
        return;
    }
    start_body(m, cmd->bytes, MC_OK, cmd->noreply);
    /* Too big for the tube (its max_item_size, at most -z): NOT_STORED
     * once the body is read. */
    if (cmd->bytes > engine_max_body(e, t)) {
        engine_tube_unref(e, t);
        return;
    }
    j = engine_job_new(e, t, cmd->bytes, t->pol.priority, 0,
                       (uint32_t)(t->pol.ttr_ms / 1000));
    exp = expiry_mono(e, cmd->exptime);
    if (j && exp && job_ext_get(j))
        job_ext(j)->exptime = exp;
    else if (j && exp) {
        engine_job_drop(e, j);
        j = NULL;
    }
    if (!j) { /* out of job memory: NOT_STORED, the client may retry */
        engine_tube_unref(e, t);
        return;
    }
    m->in_job = j;
    m->in_tube = t;
}

void mc_body_done(McConn *m)
{
    Engine *e = eng(m);
    Job *j = m->in_job;
    Tube *t = m->in_tube;
    int crlf_ok = m->crlf[0] == '\r' && m->crlf[1] == '\n';
    McErr err = (McErr)m->body_err;
    EngineResult r;

    m->mstate = MC_LINE;
    m->in_job = NULL;
    m->in_tube = NULL;
    if (err == MC_OK && !crlf_ok)
        err = MC_ERR_BAD_DATA_CHUNK;
    else if (err != MC_OK && !crlf_ok && !mc_error(err)->close)
        err = MC_ERR_BAD_DATA_CHUNK; /* out of step: cannot go on */
    if (err == MC_OK && j && m->conn.srv->draining)
        err = MC_ERR_DRAINING;
    if (err == MC_OK && repl_is_replica(m->conn.srv))
        err = MC_ERR_REPLICA; /* it became one while the body came */
    if (err != MC_OK) {
        mc_reply_err(m, err);
    } else if (!j) {
        if (!m->noreply)
            mc_reply_lit(m, "NOT_STORED\r\n");
    } else if ((r = engine_put(e, j, t)) == ENG_FULL || r == ENG_NO_MEMORY) {
        if (!m->noreply)
            mc_reply_lit(m, "NOT_STORED\r\n");
    } else {
        j = NULL; /* the engine's now */
        mc_hold(m);
        if (!m->noreply)
            mc_reply_lit(m, "STORED\r\n");
    }
    if (j)
        engine_job_drop(e, j);
    if (t)
        engine_tube_unref(e, t);
}

/* ---- queue administration -------------------------------------------------- */

/* Every tube, each with a reference (flushing may free the last job of a
 * tube); *n of them. NULL when out of memory. */
static Tube **ref_all(McConn *m, size_t *n)
{
    Engine *e = eng(m);
    Tube **v = tb_malloc((engine_tube_count(e) + 1) * sizeof *v);

    *n = 0;
    if (!v)
        return NULL;
    /* A listener with tubes flushes only those. */
    *n = access_filter(m->conn.lis, v, engine_tube_list(e), engine_tube_count(e));
    for (size_t i = 0; i < *n; i++)
        engine_tube_ref(v[i]);
    return v;
}

static void unref_all(Engine *e, Tube **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        engine_tube_unref(e, v[i]);
    tb_free(v);
}

/* Flush t's jobs but the reserved ones: 0, or -1 out of memory. */
static int flush(McConn *m, Tube *t)
{
    if (engine_flush_tube(eng(m), t) < 0)
        return -1;
    mcstats_tube(t)->flushes++;
    return 0;
}

static void do_delete(McConn *m, const McCmd *cmd)
{
    Engine *e = eng(m);
    Tube *t = engine_tube_find(e, cmd->name, cmd->name_len);

    if (t) {
        engine_tube_ref(t);
        if (engine_flush_tube(e, t) < 0) {
            engine_tube_unref(e, t);
            mc_reply_no_memory(m);
            return;
        }
        engine_tube_unsubscribe(e, t); /* a fanout child's subscription ends */
        mcstats_forget(t);
        front(m)->ct.queue_deletes++;
        engine_tube_unref(e, t);
        mc_hold(m);
    }
    if (!cmd->noreply)
        mc_reply_lit(m, "DELETED\r\n");
}

static void do_flush(McConn *m, const McCmd *cmd)
{
    Engine *e = eng(m);
    Tube *t = engine_tube_find(e, cmd->name, cmd->name_len);
    int r = 0;

    if (t) {
        engine_tube_ref(t);
        r = flush(m, t);
        engine_tube_unref(e, t);
    }
    if (r < 0) {
        mc_reply_no_memory(m);
        return;
    }
    mc_hold(m);
    mc_reply_lit(m, "END\r\n");
}

static void do_flush_all(McConn *m, const McCmd *cmd)
{
    Engine *e = eng(m);
    size_t n;
    Tube **v = ref_all(m, &n);
    int r = 0;

    if (!v) {
        mc_reply_no_memory(m);
        return;
    }
    for (size_t i = 0; i < n && r == 0; i++)
        r = flush(m, v[i]);
    unref_all(e, v, n);
    if (r < 0) {
        mc_reply_no_memory(m);
        return;
    }
    mc_hold(m);
    if (!cmd->noreply)
        mc_reply_lit(m, "Flushed all queues.\r\n");
}

static void reply_count(McConn *m, uint64_t n)
{
    char line[32];
    size_t k = fmt_u64(line, n);

    memcpy(line + k, "\r\n", 2);
    mc_reply(m, line, k + 2);
}

/* Expire what is due now: how many jobs of the tubes v[0..n) expired. */
static uint64_t expire_counted(Engine *e, Tube **v, size_t n)
{
    uint64_t before = 0, after = 0;

    for (size_t i = 0; i < n; i++)
        before += v[i]->total_expired;
    engine_expire_all(e);
    for (size_t i = 0; i < n; i++)
        after += v[i]->total_expired;
    return after - before;
}

static void do_flush_expired(McConn *m, const McCmd *cmd)
{
    Engine *e = eng(m);
    Tube *t = engine_tube_find(e, cmd->name, cmd->name_len);
    uint64_t k = 0;

    if (t) {
        engine_tube_ref(t);
        k = expire_counted(e, &t, 1);
        engine_tube_unref(e, t);
        mc_hold(m);
    }
    reply_count(m, k);
}

static void do_flush_all_expired(McConn *m, const McCmd *cmd)
{
    Engine *e = eng(m);
    size_t n;
    Tube **v = ref_all(m, &n);
    uint64_t k;

    if (!v) {
        mc_reply_no_memory(m);
        return;
    }
    k = expire_counted(e, v, n);
    unref_all(e, v, n);
    mc_hold(m);
    reply_count(m, k);
}

/* ---- server --------------------------------------------------------------- */

static void do_version(McConn *m, const McCmd *cmd)
{
    mc_reply_lit(m, "VERSION " TUBED_VERSION "\r\n");
}

static void do_stats(McConn *m, const McCmd *cmd)
{
    Buf d = {0};

    engine_expire_all(eng(m)); /* an expired job is never counted */
    mcstats_server(front(m), m->conn.lis, &d);
    reply_doc(m, &d);
}

static void do_dump_stats(McConn *m, const McCmd *cmd)
{
    Buf d = {0};

    engine_expire_all(eng(m));
    mcstats_dump(front(m), m->conn.lis, cmd->names, &d);
    reply_doc(m, &d);
}

static void do_dump_config(McConn *m, const McCmd *cmd)
{
    Buf d = {0};

    mcstats_config(front(m), m->conn.lis, &d);
    reply_doc(m, &d);
}

static void do_reload(McConn *m, const McCmd *cmd)
{
    char err[512];
    Buf d = {0};

    if (server_reload(m->conn.srv, err, sizeof err) == 0) {
        mc_reply_lit(m, "Reloaded config.\r\n");
        return;
    }
    /* "FILE:LINE: what", one printable line; the connection goes on. */
    buf_printf(&d, "SERVER_ERROR %s\r\n", err);
    if (d.oom)
        mc_reply_no_memory(m);
    else
        mc_reply(m, d.data, d.len);
    buf_free(&d);
}

static void do_shutdown(McConn *m, const McCmd *cmd)
{
    Server *s = m->conn.srv;

    if (!s->cfg.allow_shutdown) {
        mc_reply_err(m, MC_ERR_SHUTDOWN_DISABLED);
        return;
    }
    log_info("memcache shutdown from fd %d: shutting down", m->conn.ev.fd);
    s->stopping = 1; /* as SIGTERM: the loop ends after this iteration */
    conn_finish(&m->conn);
}

/* READONLY is kestrel's word for "reads only": a draining server, and a
 * replica, which refuses every change (SERVER_ERROR replica) until it is
 * promoted. A health check asking status then sends it no writes. */
static void do_status(McConn *m, const McCmd *cmd)
{
    if (m->conn.srv->draining || repl_is_replica(m->conn.srv))
        mc_reply_lit(m, "READONLY\r\n");
    else
        mc_reply_lit(m, "UP\r\n");
}

static void do_quit(McConn *m, const McCmd *cmd)
{
    conn_finish(&m->conn);
}

static const Handler handlers[MC_CMD_COUNT] = {
    [MC_CMD_SET] = do_set,
    [MC_CMD_GET] = mc_get,
    [MC_CMD_DELETE] = do_delete,
    [MC_CMD_FLUSH] = do_flush,
    [MC_CMD_FLUSH_ALL] = do_flush_all,
    [MC_CMD_FLUSH_EXPIRED] = do_flush_expired,
    [MC_CMD_FLUSH_ALL_EXPIRED] = do_flush_all_expired,
    [MC_CMD_VERSION] = do_version,
    [MC_CMD_STATS] = do_stats,
    [MC_CMD_DUMP_STATS] = do_dump_stats,
    [MC_CMD_DUMP_CONFIG] = do_dump_config,
    [MC_CMD_RELOAD] = do_reload,
    [MC_CMD_SHUTDOWN] = do_shutdown,
    [MC_CMD_STATUS] = do_status,
    [MC_CMD_MONITOR] = mc_monitor,
    [MC_CMD_CONFIRM] = mc_confirm,
    [MC_CMD_QUIT] = do_quit,
};

/* ---- access (spec access.md §4) ------------------------------------------ */

/* The role allows the command, and a restricted listener its queue. 1: go
 * on; 0: answered (CLIENT_ERROR not allowed, or what an empty or unknown
 * queue would answer), nothing changed but the refusal counter. A set is
 * refused once its body is read. */
static int allowed(McConn *m, const McCmd *cmd)
{
    Memcache *f = front(m);
    Listener *l = m->conn.lis;
    unsigned roles = cmd->type == MC_CMD_GET && cmd->opts == MC_OPT_PEEK ? f->allow_peek
                                                                         : f->allow[cmd->type];
    McErr err = MC_ERR_NOT_ALLOWED;

    if (!access_role(&m->conn, roles))
        goto refuse;
    if (!access_restricted(&m->conn))
        return 1;
    switch (cmd->type) {
    case MC_CMD_SET:
    case MC_CMD_DELETE:
    case MC_CMD_FLUSH:
    case MC_CMD_FLUSH_EXPIRED:
        break;
    case MC_CMD_GET:
    case MC_CMD_MONITOR:
    case MC_CMD_CONFIRM:
        err = MC_OK; /* another queue looks empty: nothing open, nothing to get */
        break;
    case MC_CMD_SHUTDOWN:
        /* It ends every tube's service, and without a binlog every job:
         * only a listener that may touch every tube shuts the server. */
        goto refuse;
    default:
        return 1;
    }
    if (access_name(l, cmd->name, cmd->name_len))
        return 1;
refuse:
    access_refused(&m->conn, mc_cmd_name(cmd->type));
    if (cmd->has_body)
        start_body(m, cmd->bytes, MC_ERR_NOT_ALLOWED, 0);
    else if (err == MC_ERR_NOT_ALLOWED)
        mc_reply_err(m, err);
    else if (cmd->type == MC_CMD_CONFIRM)
        mc_reply_err(m, MC_ERR_NOTHING_OPEN);
    else
        mc_get_nothing(m, cmd);
    return 0;
}

/* On a replica every command that would change a queue is refused
 * (spec/replication.md §2); a set's body is read first. */
static int replica_refuses(McConn *m, const McCmd *cmd)
{
    switch (cmd->type) {
    case MC_CMD_SET:
        start_body(m, cmd->bytes, MC_ERR_REPLICA, cmd->noreply);
        return 1;
    case MC_CMD_GET:
        if (cmd->opts & MC_OPT_PEEK)
            return 0;
        /* fall through */
    case MC_CMD_DELETE: case MC_CMD_FLUSH: case MC_CMD_FLUSH_ALL:
    case MC_CMD_FLUSH_EXPIRED: case MC_CMD_FLUSH_ALL_EXPIRED:
    case MC_CMD_MONITOR: case MC_CMD_CONFIRM:
        mc_reply_err(m, MC_ERR_REPLICA);
        return 1;
    default:
        return 0;
    }
}

void mc_line(McConn *m, const char *line, size_t len)
{
    McCmd cmd;

    mc_parse(line, len, &cmd);
    if (log_verbosity >= 2)
        log_msg(LOG_CMD, "fd %d: memcache <%.*s>", m->conn.ev.fd,
                (int)(len > 80 ? 80 : len), line);
    if (cmd.err != MC_OK) {
        if (cmd.has_body)
            start_body(m, cmd.bytes, cmd.err, 0); /* read first (mcparse.h) */
        else
            mc_reply_err(m, cmd.err);
        return;
    }
    /* The listener's refusal first, as on the beanstalk port: it holds
     * whatever the role of the server, a replica's only until promotion.
     * A refused set's body is being read and dropped. */
    if (!allowed(m, &cmd))
        return;
    if (repl_is_replica(m->conn.srv) && replica_refuses(m, &cmd))
        return;
    if (cmd.has_body)
        do_set(m, &cmd);
    else
        handlers[cmd.type](m, &cmd);
}
