#include "cmd.h"

#include <string.h>

#include "access.h"
#include "clock.h"
#include "conflisten.h"
#include "log.h"
#include "net.h"
#include "numparse.h"
#include "parse.h"
#include "repl.h"
#include "stats.h"

typedef void (*Handler)(BsConn *b, const Cmd *cmd);

static Engine *eng(BsConn *b)
{
    return &b->conn.srv->eng;
}

static Conn *conn(BsConn *b)
{
    return &b->conn;
}

static void set_flag(BsConn *b, uint8_t flag, uint64_t *counter)
{
    if (!(b->conn.flags & flag)) {
        b->conn.flags |= flag;
        (*counter)++;
    }
}

/* The reply about to be queued reports a change the binlog holds. */
static void hold(BsConn *b)
{
    conn_hold(conn(b), engine_ticket(eng(b)), engine_repl_ticket(eng(b)));
}

static void reply_job(BsConn *b, const char *word, Job *j)
{
    char head[64];
    uint64_t size = j->body_size;
    size_t n = conn_format_head(head, word, j->id, &size);
    /* A body on disk only (read-behind) is read back here if the
     * read-ahead has not; a record that cannot be read is reported. */
    const char *body = engine_body(eng(b), j);

    if (!body) {
        conn_reply(conn(b), "INTERNAL_ERROR\r\n", 16);
        return;
    }
    conn_reply_body(conn(b), head, n, body, j->body_size);
}

static void reply_id(BsConn *b, const char *word, uint64_t id)
{
    char head[64];

    conn_reply(conn(b), head, conn_format_head(head, word, id, NULL));
}

/* "OK <bytes>\r\n<data>\r\n", then the document is freed. A large one
 * (a listing, stats-tubes) is refused with OUT_OF_MEMORY, beanstalkd's
 * "try again later", while other clients leave the server-wide budget of
 * replies unread (conn_out_refuse). */
static void reply_doc(BsConn *b, Buf *data)
{
    char head[32];
    size_t n = 3;

    if (data->oom || conn_out_refuse(conn(b), data->len)) {
        conn_reply_lit(conn(b), "OUT_OF_MEMORY\r\n");
    } else {
        memcpy(head, "OK ", 3);
        n += fmt_u64(head + n, data->len);
        memcpy(head + n, "\r\n", 2);
        conn_reply_body(conn(b), head, n + 2, data->data, data->len);
    }
    buf_free(data);
}

/* The reply to an operation that reports only how it went. */
static void reply_result(BsConn *b, EngineResult r, const char *ok)
{
    switch (r) {
    case ENG_OK:
        conn_reply(conn(b), ok, strlen(ok));
        break;
    case ENG_BURIED:
        conn_reply_lit(conn(b), "BURIED\r\n");
        break;
    case ENG_NOT_FOUND:
        conn_reply_lit(conn(b), "NOT_FOUND\r\n");
        break;
    case ENG_NO_MEMORY:
    case ENG_FULL: /* the protocol's "try again later" */
        conn_reply_lit(conn(b), "OUT_OF_MEMORY\r\n");
        break;
    }
}

/* ---- producer --------------------------------------------------------- */

static void do_put(BsConn *b, const Cmd *cmd)
{
    Engine *e = eng(b);
    Job *j;

    /* The tube's max_item_size, which is -z unless the config says less. */
    if (cmd->bytes > engine_max_body(e, b->use)) {
        bs_discard(b, (uint64_t)cmd->bytes + 2, AFTER_JOB_TOO_BIG);
        return;
    }
    set_flag(b, BS_PRODUCER, &bs_front(conn(b))->producer_ct);
    /* The id is taken now, as beanstalkd does: a put that then fails
     * (EXPECTED_CRLF, DRAINING) still uses it up. */
    j = engine_job_new(e, b->use, cmd->bytes, cmd->pri, cmd->delay, cmd->ttr);
    if (!j) {
        bs_discard(b, (uint64_t)cmd->bytes + 2, AFTER_OUT_OF_MEMORY);
        return;
    }
    b->in_job = j;
    b->body_got = 0;
    b->bstate = BS_BODY;
}

void cmd_put_body_done(BsConn *b)
{
    Engine *e = eng(b);
    Job *j = b->in_job;
    EngineResult r;
    uint64_t id;

    b->in_job = NULL;
    b->bstate = BS_CMD;
    if (b->crlf[0] != '\r' || b->crlf[1] != '\n') {
        engine_job_drop(e, j);
        conn_reply_lit(conn(b), "EXPECTED_CRLF\r\n");
        return;
    }
    /* (A replica: the server may have become one while the body came.) */
    if (b->conn.srv->draining || repl_is_replica(b->conn.srv)) {
        engine_job_drop(e, j);
        conn_reply_lit(conn(b), "DRAINING\r\n");
        return;
    }
    id = j->id; /* the job may be gone once the engine has it */
    r = engine_put(e, j, b->use);
    if (r == ENG_NO_MEMORY || r == ENG_FULL) {
        engine_job_drop(e, j);
        conn_reply_lit(conn(b), "OUT_OF_MEMORY\r\n");
        return;
    }
    hold(b);
    reply_id(b, r == ENG_BURIED ? "BURIED" : "INSERTED", id);
}

/* Naming a tube may register it as a fanout child, which the binlog
 * journals: the reply then waits for that record like a put's does (with
 * -f 0, until it is synced). */
static Tube *tube_for(BsConn *b, const Cmd *cmd)
{
    uint64_t ticket = engine_ticket(eng(b));
    Tube *t = engine_tube(eng(b), cmd->name, cmd->name_len);

    if (!t)
        conn_reply_lit(conn(b), "OUT_OF_MEMORY\r\n");
    else if (engine_ticket(eng(b)) != ticket)
        hold(b);
    return t;
}

static void do_use(BsConn *b, const Cmd *cmd)
{
    Tube *t = tube_for(b, cmd);

    if (!t)
        return;
    engine_tube_ref(t);
    t->using_ct++;
    if (!b->use_none) {
        b->use->using_ct--;
        engine_tube_unref(eng(b), b->use);
    }
    b->use_none = 0;
    b->use = t;
    conn_replyf(conn(b), "USING %s\r\n", t->name);
}

/* ---- worker ----------------------------------------------------------- */

void cmd_wake(Worker *w, WaitEnd how, Job *j)
{
    BsConn *b = container_of(w, BsConn, worker);

    /* The wait is over; the reply follows, then buffered input resumes. */
    conn_set_state(conn(b), CONN_OPEN);
    switch (how) {
    case WAIT_RESERVED:
        reply_job(b, "RESERVED", j);
        break;
    case WAIT_TIMED_OUT:
        conn_reply_lit(conn(b), "TIMED_OUT\r\n");
        break;
    case WAIT_DEADLINE_SOON:
        conn_reply_lit(conn(b), "DEADLINE_SOON\r\n");
        break;
    case WAIT_NO_MEMORY:
        conn_reply_lit(conn(b), "OUT_OF_MEMORY\r\n");
        break;
    }
}

static void reserve(BsConn *b, int64_t timeout)
{
    Job *j;
    int r;

    set_flag(b, BS_WORKER, &bs_front(conn(b))->worker_ct);
    /* A half-closed client cannot wait: it hears TIMED_OUT at once. */
    if (b->conn.flags & (CONN_RDHUP | CONN_EOF))
        timeout = 0;
    r = worker_reserve(eng(b), &b->worker, timeout, &j);
    if (r == WAIT_PENDING)
        conn_set_state(conn(b), CONN_PAUSED);
    else
        cmd_wake(&b->worker, (WaitEnd)r, j);
}

static void do_reserve(BsConn *b, const Cmd *cmd)
{
    reserve(b, INT64_MAX);
}

static void do_reserve_timeout(BsConn *b, const Cmd *cmd)
{
    reserve(b, (int64_t)cmd->count * NS_PER_SEC);
}

static void do_reserve_job(BsConn *b, const Cmd *cmd)
{
    Job *j;
    EngineResult r = engine_reserve_job(eng(b), &b->worker, cmd->id, &j);

    if (r != ENG_NOT_FOUND)
        set_flag(b, BS_WORKER, &bs_front(conn(b))->worker_ct);
    if (r == ENG_OK)
        reply_job(b, "RESERVED", j);
    else
        reply_result(b, r, "");
}

static void do_delete(BsConn *b, const Cmd *cmd)
{
    EngineResult r = engine_delete(eng(b), &b->worker, cmd->id);

    if (r == ENG_OK)
        hold(b);
    reply_result(b, r, "DELETED\r\n");
}

static void do_release(BsConn *b, const Cmd *cmd)
{
    EngineResult r = engine_release(eng(b), &b->worker, cmd->id, cmd->pri, cmd->delay);

    if (r == ENG_OK || r == ENG_BURIED)
        hold(b);
    reply_result(b, r, "RELEASED\r\n");
}

static void do_bury(BsConn *b, const Cmd *cmd)
{
    EngineResult r = engine_bury(eng(b), &b->worker, cmd->id, cmd->pri);

    if (r == ENG_OK)
        hold(b);
    reply_result(b, r, "BURIED\r\n");
}

static void do_touch(BsConn *b, const Cmd *cmd)
{
    reply_result(b, engine_touch(eng(b), &b->worker, cmd->id), "TOUCHED\r\n");
}

static void do_watch(BsConn *b, const Cmd *cmd)
{
    Tube *t = tube_for(b, cmd);
    Worker *w = &b->worker;

    if (!t)
        return;
    b->watch_none = 0;
    if (watch_find(w, t) < 0 && watch_add(w, t) < 0) {
        if (t->refs == 0) { /* just created for us: drop it again */
            engine_tube_ref(t);
            engine_tube_unref(eng(b), t);
        }
        conn_reply_lit(conn(b), "OUT_OF_MEMORY\r\n");
        return;
    }
    conn_replyf(conn(b), "WATCHING %u\r\n", w->nwatch);
}

static void do_ignore(BsConn *b, const Cmd *cmd)
{
    Worker *w = &b->worker;
    Tube *t = engine_tube_find(eng(b), cmd->name, cmd->name_len);
    int i = t ? watch_find(w, t) : -1;

    if (i >= 0) {
        if (w->nwatch == 1) {
            conn_reply_lit(conn(b), "NOT_IGNORED\r\n");
            return;
        }
        watch_remove(eng(b), w, i);
    }
    conn_replyf(conn(b), "WATCHING %u\r\n", w->nwatch);
}

/* ---- other ------------------------------------------------------------ */

/* A peek copies a body the job keeps: a large one waits for the budget
 * of unread replies as a listing does. (A reserve's body is not refused:
 * it goes to the one client that takes the job, so the jobs themselves,
 * --job-memory and -z per connection bound those copies.) */
static void reply_found(BsConn *b, Job *j)
{
    if (j && conn_out_refuse(conn(b), j->body_size))
        conn_reply_lit(conn(b), "OUT_OF_MEMORY\r\n");
    else if (j)
        reply_job(b, "FOUND", j);
    else
        conn_reply_lit(conn(b), "NOT_FOUND\r\n");
}

static void do_peek(BsConn *b, const Cmd *cmd)
{
    reply_found(b, engine_find(eng(b), cmd->id));
}

static void do_peek_ready(BsConn *b, const Cmd *cmd)
{
    reply_found(b, engine_peek(eng(b), b->use, JOB_READY));
}

static void do_peek_delayed(BsConn *b, const Cmd *cmd)
{
    reply_found(b, engine_peek(eng(b), b->use, JOB_DELAYED));
}

static void do_peek_buried(BsConn *b, const Cmd *cmd)
{
    reply_found(b, engine_peek(eng(b), b->use, JOB_BURIED));
}

static void do_kick(BsConn *b, const Cmd *cmd)
{
    uint32_t k = engine_kick(eng(b), b->use, cmd->count);

    hold(b);
    conn_replyf(conn(b), "KICKED %u\r\n", k);
}

static void do_kick_job(BsConn *b, const Cmd *cmd)
{
    EngineResult r = engine_kick_job(eng(b), cmd->id);

    if (r == ENG_OK)
        hold(b);
    reply_result(b, r, "KICKED\r\n");
}

static void do_stats(BsConn *b, const Cmd *cmd)
{
    Buf d = {0};

    engine_expire_all(eng(b)); /* an expired job is never counted */
    stats_server(bs_front(conn(b)), &d);
    reply_doc(b, &d);
}

static void do_stats_job(BsConn *b, const Cmd *cmd)
{
    Job *j = engine_find(eng(b), cmd->id);
    Buf d = {0};

    if (!j) {
        conn_reply_lit(conn(b), "NOT_FOUND\r\n");
        return;
    }
    stats_job(eng(b), j, &d);
    reply_doc(b, &d);
}

static void do_stats_tube(BsConn *b, const Cmd *cmd)
{
    Tube *t = engine_tube_find(eng(b), cmd->name, cmd->name_len);
    Buf d = {0};

    if (!t) {
        conn_reply_lit(conn(b), "NOT_FOUND\r\n");
        return;
    }
    engine_expire_all(eng(b)); /* an expired job is never counted */
    if (!(t = engine_tube_find(eng(b), cmd->name, cmd->name_len))) {
        conn_reply_lit(conn(b), "NOT_FOUND\r\n");
        return;
    }
    stats_tube(eng(b), t, &d);
    reply_doc(b, &d);
}

static void do_list_tubes(BsConn *b, const Cmd *cmd)
{
    Buf d = {0};

    stats_list_tubes(eng(b), conn(b)->lis, &d);
    reply_doc(b, &d);
}

static void do_list_tube_used(BsConn *b, const Cmd *cmd)
{
    conn_replyf(conn(b), "USING %s\r\n", b->use->name);
}

static void do_list_tubes_watched(BsConn *b, const Cmd *cmd)
{
    Buf d = {0};

    stats_list_watched(&b->worker, &d);
    reply_doc(b, &d);
}

static void do_quit(BsConn *b, const Cmd *cmd)
{
    conn_finish(conn(b));
}

static void do_pause_tube(BsConn *b, const Cmd *cmd)
{
    Tube *t = engine_tube_find(eng(b), cmd->name, cmd->name_len);

    if (!t) {
        conn_reply_lit(conn(b), "NOT_FOUND\r\n");
        return;
    }
    reply_result(b, engine_pause(eng(b), t, cmd->delay), "PAUSED\r\n");
}

/* ---- tubed's extensions (extensions.md §2) --------------------------- */

static void do_flush_tube(BsConn *b, const Cmd *cmd)
{
    Tube *t;
    int64_t n;

    /* Expired jobs expire (or move to their dead-letter tube) first: a
     * flush never counts, nor takes, a job that is no longer there. */
    engine_expire_all(eng(b));
    if (!(t = engine_tube_find(eng(b), cmd->name, cmd->name_len))) {
        conn_reply_lit(conn(b), "NOT_FOUND\r\n");
        return;
    }
    n = engine_flush_tube(eng(b), t);
    if (n < 0) {
        conn_reply_lit(conn(b), "OUT_OF_MEMORY\r\n");
        return;
    }
    hold(b);
    conn_replyf(conn(b), "FLUSHED %lld\r\n", (long long)n);
}

static void do_stats_tubes(BsConn *b, const Cmd *cmd)
{
    Buf d = {0};

    engine_expire_all(eng(b)); /* an expired job is never counted */
    stats_tubes(conn(b)->srv, conn(b)->lis, &d);
    reply_doc(b, &d);
}

static void do_stats_binlog(BsConn *b, const Cmd *cmd)
{
    Buf d = {0};

    stats_binlog(conn(b)->srv, conn(b)->lis, &d);
    reply_doc(b, &d);
}

static void do_stats_listeners(BsConn *b, const Cmd *cmd)
{
    Buf d = {0};

    stats_listeners(conn(b)->srv, conn(b)->lis, &d);
    reply_doc(b, &d);
}

static void do_list_jobs(BsConn *b, const Cmd *cmd)
{
    Tube *t = engine_tube_find(eng(b), cmd->name, cmd->name_len);
    uint64_t ids[1000];
    uint32_t n;
    Buf d = {0};

    if (!t) {
        conn_reply_lit(conn(b), "NOT_FOUND\r\n");
        return;
    }
    n = engine_list_jobs(eng(b), t, cmd->state, cmd->id, cmd->count, ids);
    buf_append(&d, "---\n", 4);
    for (uint32_t i = 0; i < n; i++)
        buf_printf(&d, "- %llu\n", (unsigned long long)ids[i]);
    reply_doc(b, &d);
}

static void do_move_job(BsConn *b, const Cmd *cmd)
{
    Engine *e = eng(b);
    Job *j = engine_find(e, cmd->id);
    Tube *dst;
    EngineResult r;

    if (!j || j->state == JOB_RESERVED) {
        conn_reply_lit(conn(b), "NOT_FOUND\r\n");
        return;
    }
    if (!(dst = tube_for(b, cmd)))
        return;
    engine_tube_ref(dst); /* held over the move: made for a failed one, it goes */
    r = engine_move_job(e, cmd->id, dst);
    engine_tube_unref(e, dst);
    if (r == ENG_OK)
        hold(b);
    reply_result(b, r, "MOVED\r\n");
}

/* ---- replication (doc/replication.md) ----------------------------------- */

static void do_stats_replication(BsConn *b, const Cmd *cmd)
{
    Buf d = {0};

    stats_replication(b->conn.srv, &d);
    reply_doc(b, &d);
}

/* A replica's handshake: this connection becomes its link. */
static void do_replicate(BsConn *b, const Cmd *cmd)
{
    ReplLink *l;

    worker_release_all(eng(b), &b->worker); /* a link holds no jobs */
    l = repl_attach(b->conn.srv, conn(b), cmd->id, cmd->id2);
    if (!l) {
        conn_finish(conn(b));
        return;
    }
    b->link = l;
    b->bstate = BS_REPL;
}

/* promote and follow throw jobs away when misused: only from this host
 * (where cluster managers run) unless allow_remote_admin opens them. */
static int admin_allowed(BsConn *b, const char *what)
{
    char who[64];

    if (b->conn.srv->cfg.allow_remote_admin || net_peer_local(b->conn.ev.fd))
        return 1;
    net_describe_peer(b->conn.ev.fd, who, sizeof who);
    log_warn("replication: %s from %s refused (not from this host; see "
             "allow_remote_admin)", what, who);
    conn_reply_lit(conn(b), "NOT_ALLOWED\r\n");
    return 0;
}

static void do_promote(BsConn *b, const Cmd *cmd)
{
    char err[160];
    uint64_t epoch;

    if (!admin_allowed(b, "promote"))
        return;
    epoch = repl_promote(b->conn.srv, err, sizeof err);
    if (!epoch) {
        log_err("replication: promote failed: %s", err);
        conn_reply_lit(conn(b), "INTERNAL_ERROR\r\n");
        return;
    }
    hold(b); /* the new epoch's record */
    reply_id(b, "PROMOTED", epoch);
}

static void do_follow(BsConn *b, const Cmd *cmd)
{
    char err[160];
    int rc;

    if (!admin_allowed(b, "follow"))
        return;
    rc = repl_follow(b->conn.srv, cmd->name, cmd->name_len, conn(b), err, sizeof err);
    if (rc < 0) {
        log_warn("replication: follow refused: %s", err);
        if (rc == -2)
            conn_reply_lit(conn(b), "NO_BINLOG\r\n");
        else
            conn_reply_lit(conn(b), "BAD_FORMAT\r\n");
        return;
    }
    conn_reply_lit(conn(b), "FOLLOWING\r\n");
}

/* On a replica every command that would change a job or a tube answers
 * DRAINING (spec/replication.md §2); nothing changes. */
static int replica_refuses(BsConn *b, const Cmd *cmd)
{
    switch (cmd->type) {
    case CMD_PUT:
        /* As a draining server answers: a body too big for the tube is
         * JOB_TOO_BIG here too (it would change nothing anywhere). */
        bs_discard(b, (uint64_t)cmd->bytes + 2,
                   cmd->bytes > engine_max_body(eng(b), b->use) ? AFTER_JOB_TOO_BIG
                                                                : AFTER_DRAINING);
        return 1;
    case CMD_RESERVE: case CMD_RESERVE_TIMEOUT: case CMD_RESERVE_JOB:
    case CMD_DELETE: case CMD_RELEASE: case CMD_BURY: case CMD_TOUCH:
    case CMD_KICK: case CMD_KICK_JOB: case CMD_PAUSE_TUBE: case CMD_FLUSH_TUBE:
    case CMD_MOVE_JOB:
        conn_reply_lit(conn(b), "DRAINING\r\n");
        return 1;
    default:
        return 0;
    }
}

static const Handler handlers[CMD_COUNT] = {
    [CMD_PUT] = do_put,
    [CMD_PEEK] = do_peek,
    [CMD_PEEK_READY] = do_peek_ready,
    [CMD_PEEK_DELAYED] = do_peek_delayed,
    [CMD_PEEK_BURIED] = do_peek_buried,
    [CMD_RESERVE_TIMEOUT] = do_reserve_timeout,
    [CMD_RESERVE_JOB] = do_reserve_job,
    [CMD_RESERVE] = do_reserve,
    [CMD_DELETE] = do_delete,
    [CMD_RELEASE] = do_release,
    [CMD_BURY] = do_bury,
    [CMD_KICK] = do_kick,
    [CMD_KICK_JOB] = do_kick_job,
    [CMD_TOUCH] = do_touch,
    [CMD_STATS_JOB] = do_stats_job,
    [CMD_STATS_TUBE] = do_stats_tube,
    [CMD_STATS] = do_stats,
    [CMD_USE] = do_use,
    [CMD_WATCH] = do_watch,
    [CMD_IGNORE] = do_ignore,
    [CMD_LIST_TUBES_WATCHED] = do_list_tubes_watched,
    [CMD_LIST_TUBE_USED] = do_list_tube_used,
    [CMD_LIST_TUBES] = do_list_tubes,
    [CMD_QUIT] = do_quit,
    [CMD_PAUSE_TUBE] = do_pause_tube,
    [CMD_STATS_TUBES] = do_stats_tubes,
    [CMD_STATS_BINLOG] = do_stats_binlog,
    [CMD_STATS_LISTENERS] = do_stats_listeners,
    [CMD_FLUSH_TUBE] = do_flush_tube,
    [CMD_LIST_JOBS] = do_list_jobs,
    [CMD_MOVE_JOB] = do_move_job,
    [CMD_STATS_REPLICATION] = do_stats_replication,
    [CMD_REPLICATE] = do_replicate,
    [CMD_PROMOTE] = do_promote,
    [CMD_FOLLOW] = do_follow,
};

/* ---- access (spec access.md) ------------------------------------------- */

/* Refused: NOT_ALLOWED, after a put's body is read and dropped. Nothing
 * else changes, not even the command counters. */
static void refuse(BsConn *b, const Cmd *cmd)
{
    access_refused(conn(b), cmd_name(cmd->type));
    if (cmd->type == CMD_PUT)
        bs_discard(b, (uint64_t)cmd->bytes + 2, AFTER_NOT_ALLOWED);
    else
        conn_reply_lit(conn(b), "NOT_ALLOWED\r\n");
}

/* A job outside the listener's tubes does not exist for it (access.md
 * §3): the command is answered, and counted, as one naming an id no job
 * has. Counting it as a refusal would tell the two apart (the command
 * counters in stats, the refusals in stats-listeners and the metrics),
 * and with them which ids exist in the tubes this listener may not see. */
static int hidden(BsConn *b, const Cmd *cmd)
{
    Job *j = engine_find(eng(b), cmd->id);

    return j && !access_tube(conn(b)->lis, j->tube);
}

/* Watches of tubes the listener no longer allows (a reload narrowed its
 * tubes) are dropped before anything looks at the watch list. */
static void prune_watches(BsConn *b)
{
    Listener *l = conn(b)->lis;
    Worker *w = &b->worker;

    if (b->pruned_gen == l->srv->access_gen)
        return;
    for (uint32_t i = w->nwatch; i-- > 0;)
        if (!access_tube(l, w->watch[i].tube))
            watch_remove(eng(b), w, (int)i);
    b->pruned_gen = l->srv->access_gen;
}

/* A connection that started with no tube (its listener could not touch
 * default) and whose listener now may: it uses default unless it has
 * used another, and watches it unless it has watched another, as a new
 * connection would. (One whose chosen tubes a reload took away is left
 * watching nothing: default is not what it asked for.) */
static void adopt_default(BsConn *b)
{
    Engine *e = eng(b);
    Tube *d = engine_default_tube(e);

    if (!access_tube(conn(b)->lis, d))
        return;
    if (b->use_none) {
        b->use_none = 0;
        engine_tube_ref(d);
        d->using_ct++;
    }
    if (b->watch_none && b->worker.nwatch == 0) {
        if (watch_add(&b->worker, d) < 0)
            log_warn("fd %d: out of memory watching default after a reload", conn(b)->ev.fd);
        else
            b->watch_none = 0;
    }
}

/* A parked reserve stops waiting, nothing reserved; the caller replies. */
static void end_wait(BsConn *b)
{
    worker_cancel(eng(b), &b->worker);
    conn_set_state(conn(b), CONN_OPEN);
}

/* A parked reserve after a reload: it ends (NOT_ALLOWED) when the role
 * no longer reserves or no watched tube is left; it waits again, for the
 * time left, when only some of its tubes went. */
static void recheck_wait(BsConn *b)
{
    Worker *w = &b->worker;
    Engine *e = eng(b);
    int64_t left = INT64_MAX;
    uint32_t i;

    if (!access_role(conn(b), bs_front(conn(b))->allow[CMD_RESERVE])) {
        end_wait(b);
        conn_reply_lit(conn(b), "NOT_ALLOWED\r\n");
        return;
    }
    for (i = 0; i < w->nwatch && access_tube(conn(b)->lis, w->watch[i].tube); i++)
        ;
    if (i == w->nwatch)
        return; /* every tube it waits on is still allowed */
    if (w->wait_until != INT64_MAX)
        left = w->wait_until > engine_now(e) ? w->wait_until - engine_now(e) : 0;
    end_wait(b);
    prune_watches(b);
    if (w->nwatch == 0)
        conn_reply_lit(conn(b), "NOT_ALLOWED\r\n");
    else
        reserve(b, left);
}

void cmd_access_changed(BsConn *b)
{
    if (b->link) {
        /* A replica's link streams every tube: it ends once the listener
         * may no longer run the handshake (do_replicate's refusal). */
        if (!access_role(conn(b), bs_front(conn(b))->allow[CMD_REPLICATE]) ||
            access_restricted(conn(b))) {
            log_warn("listener %s: a reload took the replication handshake from it; "
                     "closing the replication link on fd %d", conn(b)->lis->name,
                     conn(b)->ev.fd);
            conn_close(conn(b));
        }
        return;
    }
    if (conn(b)->state == CONN_PAUSED && b->worker.waiting)
        recheck_wait(b);
    adopt_default(b);
}

/* The tube rules of a restricted listener, before the command runs. 0:
 * go on (*gone: its job is hidden, see hidden()); 1: answered (refused,
 * or a peek of a tube it may no longer use). */
static int tube_rules(BsConn *b, const Cmd *cmd, int *gone)
{
    Listener *l = conn(b)->lis;

    switch (cmd->type) {
    case CMD_MOVE_JOB: /* its target, then its job */
        if (!access_name(l, cmd->name, cmd->name_len))
            break;
        *gone = hidden(b, cmd);
        return 0;
    case CMD_USE:
    case CMD_PAUSE_TUBE:
    case CMD_FLUSH_TUBE:
    case CMD_STATS_TUBE:
    case CMD_LIST_JOBS:
        if (!access_name(l, cmd->name, cmd->name_len))
            break;
        return 0;
    case CMD_WATCH:
    case CMD_IGNORE:
        prune_watches(b);
        if (!access_name(l, cmd->name, cmd->name_len))
            break;
        return 0;
    case CMD_PEEK:
    case CMD_STATS_JOB:
    case CMD_DELETE:
    case CMD_KICK_JOB:
    case CMD_RESERVE_JOB:
    case CMD_TOUCH:
    case CMD_RELEASE:
    case CMD_BURY:
        *gone = hidden(b, cmd);
        return 0;
    case CMD_PUT:
    case CMD_KICK:
    case CMD_LIST_TUBE_USED:
        if (b->use_none || !access_tube(l, b->use))
            break;
        return 0;
    case CMD_PEEK_READY:
    case CMD_PEEK_DELAYED:
    case CMD_PEEK_BURIED:
        if (b->use_none || !access_tube(l, b->use)) {
            access_refused(conn(b), cmd_name(cmd->type));
            conn_reply_lit(conn(b), "NOT_FOUND\r\n");
            return 1;
        }
        return 0;
    case CMD_RESERVE:
    case CMD_RESERVE_TIMEOUT:
        prune_watches(b);
        if (b->worker.nwatch == 0)
            break;
        return 0;
    case CMD_LIST_TUBES_WATCHED:
        prune_watches(b);
        return 0;
    case CMD_REPLICATE: /* the stream carries every tube's jobs and bodies */
    case CMD_PROMOTE:   /* these two change every tube: follow throws */
    case CMD_FOLLOW:    /* jobs away, promote takes the server's role */
        break;
    default:
        return 0;
    }
    refuse(b, cmd);
    return 1;
}

/* A malformed command beanstalkd still counts (Cmd.counted) moves the
 * counter only where the role may run the command: a listener whose role
 * may not changes no counter but its refusals (access.md §7.2). The
 * answer stays beanstalkd's, since the line is malformed whoever sends
 * it; the tubes are not looked at (the line names no tube it could run
 * on), so a role that may run it counts it as beanstalkd does. */
static int bad_counts(BsConn *b, const Cmd *cmd)
{
    return access_role(conn(b), bs_front(conn(b))->allow[cmd->type]);
}

void cmd_line(BsConn *b, const char *line, size_t len)
{
    Beanstalk *f = bs_front(conn(b));
    Cmd cmd;
    ParseResult r = parse_command(line, len, &cmd);
    int gone = 0;

    if (log_verbosity >= 2)
        log_msg(LOG_CMD, "fd %d: <%.*s>", b->conn.ev.fd, (int)(len > 80 ? 80 : len), line);
    if (r == PARSE_UNKNOWN) {
        conn_reply_lit(conn(b), "UNKNOWN_COMMAND\r\n");
        return;
    }
    if (r == PARSE_BAD_FORMAT) {
        if (cmd.counted && bad_counts(b, &cmd))
            f->cmd_ct[cmd.type]++;
        /* beanstalkd checks a put's size before its trailing junk, so an
         * oversized body is still read and thrown away. */
        if (cmd.counted && cmd.type == CMD_PUT &&
            cmd.bytes > b->conn.srv->cfg.max_job_size)
            bs_discard(b, (uint64_t)cmd.bytes + 2, AFTER_JOB_TOO_BIG);
        else
            conn_reply_lit(conn(b), "BAD_FORMAT\r\n");
        return;
    }
    /* The role: one AND. The tubes: only on a listener that has some. */
    if (!access_role(conn(b), f->allow[cmd.type])) {
        refuse(b, &cmd);
        return;
    }
    if (access_restricted(conn(b)) && tube_rules(b, &cmd, &gone))
        return;
    f->cmd_ct[cmd.type]++;
    if (repl_is_replica(b->conn.srv) && replica_refuses(b, &cmd))
        return;
    if (gone)
        conn_reply_lit(conn(b), "NOT_FOUND\r\n"); /* what its handler says of no job */
    else
        handlers[cmd.type](b, &cmd);
}
