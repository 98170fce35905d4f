#include "cmd.h"

#include <string.h>

#include "alloc.h"
#include "binlog.h"
#include "clock.h"
#include "log.h"
#include "parse.h"
#include "queue.h"
#include "reserve.h"
#include "server.h"
#include "stats.h"
#include "watch.h"

typedef void (*Handler)(Conn *c, const Cmd *cmd);

static Server *srv(Conn *c)
{
    return c->srv;
}

/* A job that only this connection may act on as a worker. */
static Job *reserved_by(Conn *c, uint64_t id)
{
    Job *j = job_table_find(&srv(c)->jobs, id);

    return j && j->state == JOB_RESERVED && j->ext->owner == c ? j : NULL;
}

static void set_flag(Conn *c, uint8_t flag, uint64_t *counter)
{
    if (!(c->flags & flag)) {
        c->flags |= flag;
        (*counter)++;
    }
}

/* ---- producer --------------------------------------------------------- */

static void do_put(Conn *c, const Cmd *cmd)
{
    Server *s = srv(c);
    Job *j;

    if (cmd->bytes > s->cfg.max_job_size) {
        conn_discard(c, (uint64_t)cmd->bytes + 2, AFTER_JOB_TOO_BIG);
        return;
    }
    set_flag(c, CONN_PRODUCER, &s->producer_ct);
    /* The id is taken now, as beanstalkd does: a put that then fails
     * (EXPECTED_CRLF, DRAINING) still uses it up. */
    j = queue_job_new(s, s->next_id++, cmd->bytes, 1);
    if (!j) {
        conn_discard(c, (uint64_t)cmd->bytes + 2, AFTER_OUT_OF_MEMORY);
        return;
    }
    if (cmd->delay) {
        if (!job_ext_get(j)) {
            queue_job_free(s, j);
            conn_discard(c, (uint64_t)cmd->bytes + 2, AFTER_OUT_OF_MEMORY);
            return;
        }
        j->ext->delay = cmd->delay;
    }
    /* The job goes in the table once its body is in: fetch its bucket now
     * so that insert does not wait on memory. */
    job_table_prefetch(&s->jobs, j->id);
    j->pri = cmd->pri;
    j->ttr = cmd->ttr ? cmd->ttr : 1;
    j->created = s->now;
    c->in_job = j;
    c->body_got = 0;
    conn_set_state(c, CONN_BODY);
}

void cmd_put_body_done(Conn *c)
{
    Server *s = srv(c);
    Job *j = c->in_job;
    int r;

    c->in_job = NULL;
    conn_set_state(c, CONN_CMD);
    if (c->crlf[0] != '\r' || c->crlf[1] != '\n') {
        queue_job_free(s, j);
        conn_reply_lit(c, "EXPECTED_CRLF\r\n");
        return;
    }
    if (s->draining) {
        queue_job_free(s, j);
        conn_reply_lit(c, "DRAINING\r\n");
        return;
    }
    j->tube = c->use;
    if (binlog_reserve_put(s, j) < 0) {
        queue_job_free(s, j);
        conn_reply_lit(c, "OUT_OF_MEMORY\r\n");
        return;
    }
    r = queue_add(s, j, c->use);
    if (r == -2) {
        queue_job_free(s, j);
        conn_reply_lit(c, "OUT_OF_MEMORY\r\n");
        return;
    }
    binlog_put(s, j);
    binlog_hold_reply(s, c);
    conn_reply_id(c, r < 0 ? "BURIED" : "INSERTED", j->id);
}

static Tube *tube_for(Conn *c, const Cmd *cmd)
{
    Tube *t = tubes_get(&srv(c)->tubes, cmd->name, cmd->name_len);

    if (!t)
        conn_reply_lit(c, "OUT_OF_MEMORY\r\n");
    return t;
}

static void do_use(Conn *c, const Cmd *cmd)
{
    Tube *t = tube_for(c, cmd);

    if (!t)
        return;
    tube_ref(t);
    t->using_ct++;
    c->use->using_ct--;
    tube_unref(&srv(c)->tubes, c->use);
    c->use = t;
    conn_replyf(c, "USING %s\r\n", t->name);
}

/* ---- worker ----------------------------------------------------------- */

static void do_reserve(Conn *c, const Cmd *cmd)
{
    set_flag(c, CONN_WORKER, &srv(c)->worker_ct);
    reserve_start(srv(c), c, INT64_MAX);
}

static void do_reserve_timeout(Conn *c, const Cmd *cmd)
{
    set_flag(c, CONN_WORKER, &srv(c)->worker_ct);
    reserve_start(srv(c), c, (int64_t)cmd->count * NS_PER_SEC);
}

static void do_reserve_job(Conn *c, const Cmd *cmd)
{
    Job *j = job_table_find(&srv(c)->jobs, cmd->id);
    int was_ready;

    if (!j || j->state == JOB_RESERVED) {
        conn_reply_lit(c, "NOT_FOUND\r\n");
        return;
    }
    set_flag(c, CONN_WORKER, &srv(c)->worker_ct);
    /* A reserved job comes back ready after a crash; one taken from the
     * delayed or buried state must be logged as ready. */
    was_ready = j->state == JOB_READY;
    if ((!was_ready && binlog_reserve_state(srv(c)) < 0) ||
        queue_reserve(srv(c), c, j) < 0) {
        conn_reply_lit(c, "OUT_OF_MEMORY\r\n");
        return;
    }
    if (!was_ready)
        binlog_state(srv(c), j);
    conn_reply_job(c, "RESERVED", j);
}

static void do_delete(Conn *c, const Cmd *cmd)
{
    Job *j = job_table_find(&srv(c)->jobs, cmd->id);

    if (!j || (j->state == JOB_RESERVED && j->ext->owner != c)) {
        conn_reply_lit(c, "NOT_FOUND\r\n");
        return;
    }
    j->tube->cmd_delete++;
    binlog_delete(srv(c), j);
    queue_delete(srv(c), j);
    binlog_hold_reply(srv(c), c);
    conn_reply_lit(c, "DELETED\r\n");
}

static void do_release(Conn *c, const Cmd *cmd)
{
    Job *j = reserved_by(c, cmd->id);
    int r;

    if (!j) {
        conn_reply_lit(c, "NOT_FOUND\r\n");
        return;
    }
    if (binlog_reserve_state(srv(c)) < 0) {
        conn_reply_lit(c, "OUT_OF_MEMORY\r\n");
        return;
    }
    queue_detach(srv(c), j);
    j->pri = cmd->pri;
    j->ext->delay = cmd->delay;
    j->ext->releases++;
    r = queue_enqueue(srv(c), j, cmd->delay);
    if (r < 0)
        queue_bury(srv(c), j);
    binlog_state(srv(c), j);
    binlog_hold_reply(srv(c), c);
    if (r < 0)
        conn_reply_lit(c, "BURIED\r\n");
    else
        conn_reply_lit(c, "RELEASED\r\n");
}

static void do_bury(Conn *c, const Cmd *cmd)
{
    Job *j = reserved_by(c, cmd->id);

    if (!j) {
        conn_reply_lit(c, "NOT_FOUND\r\n");
        return;
    }
    if (binlog_reserve_state(srv(c)) < 0) {
        conn_reply_lit(c, "OUT_OF_MEMORY\r\n");
        return;
    }
    queue_detach(srv(c), j);
    j->pri = cmd->pri;
    j->ext->buries++;
    queue_bury(srv(c), j);
    binlog_state(srv(c), j);
    binlog_hold_reply(srv(c), c);
    conn_reply_lit(c, "BURIED\r\n");
}

static void do_touch(Conn *c, const Cmd *cmd)
{
    Job *j = reserved_by(c, cmd->id);

    if (!j) {
        conn_reply_lit(c, "NOT_FOUND\r\n");
        return;
    }
    queue_touch(srv(c), j);
    conn_reply_lit(c, "TOUCHED\r\n");
}

static void do_watch(Conn *c, const Cmd *cmd)
{
    Tube *t = tube_for(c, cmd);

    if (!t)
        return;
    if (watch_find(c, t) < 0 && watch_add(c, t) < 0) {
        if (t->refs == 0) { /* just created for us: drop it again */
            tube_ref(t);
            tube_unref(&srv(c)->tubes, t);
        }
        conn_reply_lit(c, "OUT_OF_MEMORY\r\n");
        return;
    }
    conn_replyf(c, "WATCHING %u\r\n", c->nwatch);
}

static void do_ignore(Conn *c, const Cmd *cmd)
{
    Tube *t = tubes_find(&srv(c)->tubes, cmd->name, cmd->name_len);
    int i = t ? watch_find(c, t) : -1;

    if (i >= 0) {
        if (c->nwatch == 1) {
            conn_reply_lit(c, "NOT_IGNORED\r\n");
            return;
        }
        watch_remove(c, i);
    }
    conn_replyf(c, "WATCHING %u\r\n", c->nwatch);
}

/* ---- other ------------------------------------------------------------ */

static void reply_found(Conn *c, Job *j)
{
    if (j)
        conn_reply_job(c, "FOUND", j);
    else
        conn_reply_lit(c, "NOT_FOUND\r\n");
}

static void do_peek(Conn *c, const Cmd *cmd)
{
    reply_found(c, job_table_find(&srv(c)->jobs, cmd->id));
}

static void do_peek_ready(Conn *c, const Cmd *cmd)
{
    reply_found(c, heap_top(&c->use->ready));
}

static void do_peek_delayed(Conn *c, const Cmd *cmd)
{
    reply_found(c, heap_top(&c->use->delay));
}

static void do_peek_buried(Conn *c, const Cmd *cmd)
{
    List *n = list_first(&c->use->buried);

    reply_found(c, n ? job_of_link(n) : NULL);
}

static void do_kick(Conn *c, const Cmd *cmd)
{
    uint32_t k = queue_kick(srv(c), c->use, cmd->count);

    binlog_hold_reply(srv(c), c);
    conn_replyf(c, "KICKED %u\r\n", k);
}

static void do_kick_job(Conn *c, const Cmd *cmd)
{
    Job *j = job_table_find(&srv(c)->jobs, cmd->id);

    if (!j || (j->state != JOB_BURIED && j->state != JOB_DELAYED)) {
        conn_reply_lit(c, "NOT_FOUND\r\n");
        return;
    }
    if (binlog_reserve_state(srv(c)) < 0) {
        conn_reply_lit(c, "OUT_OF_MEMORY\r\n");
        return;
    }
    if (queue_kick_job(srv(c), j) < 0) {
        conn_reply_lit(c, "NOT_FOUND\r\n");
        return;
    }
    binlog_state(srv(c), j);
    binlog_hold_reply(srv(c), c);
    conn_reply_lit(c, "KICKED\r\n");
}

static void reply_doc(Conn *c, Buf *b)
{
    conn_reply_data(c, b);
    buf_free(b);
}

static void do_stats(Conn *c, const Cmd *cmd)
{
    Buf b = {0};

    stats_server(srv(c), &b);
    reply_doc(c, &b);
}

static void do_stats_job(Conn *c, const Cmd *cmd)
{
    Job *j = job_table_find(&srv(c)->jobs, cmd->id);
    Buf b = {0};

    if (!j) {
        conn_reply_lit(c, "NOT_FOUND\r\n");
        return;
    }
    stats_job(srv(c), j, &b);
    reply_doc(c, &b);
}

static void do_stats_tube(Conn *c, const Cmd *cmd)
{
    Tube *t = tubes_find(&srv(c)->tubes, cmd->name, cmd->name_len);
    Buf b = {0};

    if (!t) {
        conn_reply_lit(c, "NOT_FOUND\r\n");
        return;
    }
    stats_tube(srv(c), t, &b);
    reply_doc(c, &b);
}

static void do_list_tubes(Conn *c, const Cmd *cmd)
{
    Buf b = {0};

    stats_list_tubes(srv(c), &b);
    reply_doc(c, &b);
}

static void do_list_tube_used(Conn *c, const Cmd *cmd)
{
    conn_replyf(c, "USING %s\r\n", c->use->name);
}

static void do_list_tubes_watched(Conn *c, const Cmd *cmd)
{
    Buf b = {0};

    stats_list_watched(c, &b);
    reply_doc(c, &b);
}

static void do_quit(Conn *c, const Cmd *cmd)
{
    conn_finish(c);
}

static void do_pause_tube(Conn *c, const Cmd *cmd)
{
    Tube *t = tubes_find(&srv(c)->tubes, cmd->name, cmd->name_len);

    if (!t) {
        conn_reply_lit(c, "NOT_FOUND\r\n");
        return;
    }
    if (queue_pause(srv(c), t, cmd->delay) < 0) {
        conn_reply_lit(c, "OUT_OF_MEMORY\r\n");
        return;
    }
    conn_reply_lit(c, "PAUSED\r\n");
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
};

void cmd_line(Conn *c, const char *line, size_t len)
{
    Server *s = srv(c);
    Cmd cmd;
    ParseResult r = parse_command(line, len, &cmd);

    if (log_verbosity >= 2)
        log_msg(LOG_CMD, "fd %d: <%.*s>", c->ev.fd, (int)(len > 80 ? 80 : len), line);
    if (r == PARSE_UNKNOWN) {
        conn_reply_lit(c, "UNKNOWN_COMMAND\r\n");
        return;
    }
    if (r == PARSE_BAD_FORMAT) {
        if (cmd.counted)
            s->cmd_ct[cmd.type]++;
        /* beanstalkd checks a put's size before its trailing junk, so an
         * oversized body is still read and thrown away. */
        if (cmd.counted && cmd.type == CMD_PUT && cmd.bytes > s->cfg.max_job_size)
            conn_discard(c, (uint64_t)cmd.bytes + 2, AFTER_JOB_TOO_BIG);
        else
            conn_reply_lit(c, "BAD_FORMAT\r\n");
        return;
    }
    s->cmd_ct[cmd.type]++;
    handlers[cmd.type](c, &cmd);
}
