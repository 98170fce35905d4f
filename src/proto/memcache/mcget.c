#include "mcget.h"

#include <string.h>
#include <unistd.h>

#include "access.h"
#include "alloc.h"
#include "clock.h"
#include "mcstats.h"
#include "numparse.h"

static Engine *eng(McConn *m)
{
    return &m->conn.srv->eng;
}

static Memcache *front(McConn *m)
{
    return mc_front(&m->conn);
}

/* ---- tubes and open jobs -------------------------------------------------- */

/* The tube of a set or get, created if need be, with a reference the
 * caller drops. NULL when out of memory. One lookup: whether it was made
 * just now shows in the number of tubes (engine_tube() makes at most this
 * one). */
Tube *mc_tube_get(McConn *m, const char *name, size_t len)
{
    Engine *e = eng(m);
    size_t before = engine_tube_count(e);
    uint64_t ticket = engine_ticket(e);
    Tube *t = engine_tube(e, name, len); /* also registers a fanout child */

    if (!t)
        return NULL;
    if (engine_ticket(e) != ticket)
        mc_hold(m); /* the child's record: the reply waits for it */
    if (engine_tube_count(e) > before)
        front(m)->ct.queue_creates++;
    engine_tube_ref(t);
    return t;
}

/* This connection's open job of t, or NULL. */
static Job *open_job(McConn *m, const Tube *t)
{
    List *head = &m->worker.reserved;

    if (!t->reserved_ct)
        return NULL; /* (no walk of a list that may hold jobs of many tubes) */
    for (List *n = head->next; n != head; n = n->next) {
        Job *j = job_of_link(n);
        if (j->tube == t)
            return j;
    }
    return NULL;
}

/* An opened job goes back to the head of its priority (it keeps its id). */
static EngineResult give_back(McConn *m, Job *j)
{
    McTubeStat *s = mcstats_tube(j->tube);
    EngineResult r = engine_release(eng(m), &m->worker, j->id, j->pri, 0);

    if (r == ENG_OK || r == ENG_BURIED) {
        s->canceled++;
        mc_hold(m);
    }
    return r;
}

/* ---- fetching ------------------------------------------------------------- */

/* How long j had been waiting to be handed out, in ms. */
static uint64_t age_ms(const Engine *e, const Job *j)
{
    const JobExt *x = job_ext_view(j);
    int64_t since = x->ready_since ? x->ready_since : x->entered ? x->entered : job_created(j);

    int64_t now = engine_now(e);

    return now > since ? (uint64_t)((now - since) / NS_PER_MSEC) : 0;
}

/* "VALUE <key> 0 <n>\r\n" into head (the key is at most a line long). */
static size_t value_head(char *head, const char *key, size_t key_len, uint32_t n)
{
    size_t k = 0;

    memcpy(head, "VALUE ", 6);
    k = 6;
    memcpy(head + k, key, key_len);
    k += key_len;
    memcpy(head + k, " 0 ", 3);
    k += 3;
    k += fmt_u64(head + k, n);
    memcpy(head + k, "\r\n", 2);
    return k + 2;
}

#define VALUE_HEAD_MAX (MC_MAX_LINE + 40)

#define UNREADABLE "SERVER_ERROR the item cannot be read back from the binlog\r\n"

static void reply_value(McConn *m, const char *key, size_t key_len, Job *j)
{
    char head[VALUE_HEAD_MAX];
    size_t n = value_head(head, key, key_len, j->body_size);
    const char *body = engine_body(eng(m), j); /* read back if on disk only */

    if (!body) {
        mc_reply(m, UNREADABLE, sizeof UNREADABLE - 1);
        return;
    }
    front(m)->ct.bytes_written += n + j->body_size + 2;
    conn_reply_body(&m->conn, head, n, body, j->body_size);
    mc_reply_lit(m, "END\r\n");
}

/* A plain get: the job is deleted (journaled) and its VALUE held until
 * the delete is durable. The reply is built first: the delete frees it. */
static void take(McConn *m, Job *j, const char *key, size_t key_len)
{
    Memcache *f = front(m);
    Buf *b = &f->tmp;
    char head[VALUE_HEAD_MAX];
    size_t n = value_head(head, key, key_len, j->body_size);
    const char *body = engine_body(eng(m), j);

    if (!body) {
        give_back(m, j);
        mc_reply(m, UNREADABLE, sizeof UNREADABLE - 1);
        return;
    }
    b->len = 0;
    b->oom = 0;
    if (buf_append(b, head, n) < 0 || buf_append(b, body, j->body_size) < 0 ||
        buf_append(b, "\r\nEND\r\n", 7) < 0) {
        give_back(m, j);
        mc_reply_no_memory(m);
        return;
    }
    engine_delete(eng(m), &m->worker, j->id);
    mc_hold(m);
    mc_reply(m, b->data, b->len);
    b->len = 0;
    if (b->cap > 65536)
        buf_free(b); /* keep a big body's copy no longer than needed */
}

/* A peek that waited got the job reserved: give it back as it was (same
 * place in line, counters and ready time unchanged). The release may hand
 * it straight to the next waiter, whose own reserve then counts. */
static void unpeek(McConn *m, Job *j)
{
    Engine *e = eng(m);
    uint64_t id = j->id;
    int64_t since = job_ext(j)->ready_since;

    if (engine_release(e, &m->worker, id, j->pri, 0) == ENG_NO_MEMORY) {
        /* No room to log it: it goes back when the connection closes. */
        log_warn("fd %d: out of memory giving back a peeked job; closing", m->conn.ev.fd);
        conn_finish(&m->conn);
        return;
    }
    if ((j = engine_find(e, id)) && job_ext(j)) {
        if (job_ext(j)->reserves)
            job_ext(j)->reserves--;
        if (job_ext(j)->releases)
            job_ext(j)->releases--;
        if (j->state == JOB_READY)
            job_ext(j)->ready_since = since;
    }
}

/* A peek copies a body the job keeps: a large one waits while other
 * clients leave the budget of replies unread (conn.h), with memcached's
 * answer when it cannot write a get's response. A get that takes or
 * opens the job is never refused: its copy goes to the one client that
 * took the job (as a beanstalk reserve's). */
static int peek_refused(McConn *m, const Job *j)
{
    if (!conn_out_refuse(&m->conn, j->body_size))
        return 0;
    mc_reply_err(m, MC_ERR_BUSY_GET);
    return 1;
}

/* A job was fetched for this get (reserved by our worker). */
static void deliver(McConn *m, Job *j, const char *key, size_t key_len, uint64_t age)
{
    Memcache *f = front(m);
    McTubeStat *s = m->fetch == MC_PEEK ? NULL : mcstats_tube(j->tube);

    if (s)
        s->age_ms = age;
    switch ((McFetch)m->fetch) {
    case MC_TAKE:
        f->ct.get_hits++;
        take(m, j, key, key_len);
        break;
    case MC_OPEN:
        f->ct.get_hits++;
        s->transactions++; /* not a peek: s is the tube's */
        reply_value(m, key, key_len, j);
        break;
    case MC_MONITOR:
        if (s)
            s->transactions++;
        reply_value(m, key, key_len, j);
        /* It now holds its one open job of the tube: the stream ends. */
        mc_reply_lit(m, "END\r\n");
        break;
    case MC_PEEK:
        if (peek_refused(m, j)) {
            unpeek(m, j);
            break;
        }
        f->ct.get_hits++;
        reply_value(m, key, key_len, j);
        unpeek(m, j);
        break;
    }
}

static void unwatch(McConn *m)
{
    Worker *w = &m->worker;
    Tube *t = m->get_tube;
    int i;

    if (!t)
        return;
    m->get_tube = NULL;
    if ((i = watch_find(w, t)) >= 0)
        watch_remove(eng(m), w, i);
}

/* The end of a get: its reply, and the watch on its tube dropped. */
static void finish(McConn *m, int how, Job *j, const char *key, size_t key_len,
                   uint64_t age)
{
    switch (how) {
    case WAIT_RESERVED:
        deliver(m, j, key, key_len, age);
        break;
    case WAIT_TIMED_OUT:
    case WAIT_DEADLINE_SOON: /* never: no_ttr, nothing has a deadline */
        if (m->fetch != MC_MONITOR && !m->hidden)
            front(m)->ct.get_misses++;
        mc_reply_lit(m, "END\r\n");
        break;
    default:
        mc_reply_no_memory(m);
        break;
    }
    m->hidden = 0;
    unwatch(m);
}

static void free_key(McConn *m)
{
    tb_free(m->get_key);
    m->get_key = NULL;
    m->get_key_len = 0;
}

/* Fetch a job of t per kind, waiting up to timeout ns. key is echoed. */
static void fetch(McConn *m, Tube *t, const char *key, size_t key_len, McFetch kind,
                  int64_t timeout)
{
    Engine *e = eng(m);
    Memcache *f = front(m);
    Job *j;
    int r;

    if (kind == MC_PEEK)
        f->ct.cmd_peek++;
    else if (kind != MC_MONITOR)
        f->ct.cmd_get++;
    /* A half-closed client cannot wait: it hears END at once. */
    if (m->conn.flags & (CONN_RDHUP | CONN_EOF))
        timeout = 0;
    m->fetch = (uint8_t)kind;
    if (kind == MC_PEEK && timeout == 0) {
        j = tube_paused(t) ? NULL : engine_peek(e, t, JOB_READY);
        if (j && peek_refused(m, j))
            return;
        if (j) {
            f->ct.get_hits++;
            reply_value(m, key, key_len, j);
        } else {
            f->ct.get_misses++;
            mc_reply_lit(m, "END\r\n");
        }
        return;
    }
    if (watch_add(&m->worker, t) < 0) {
        mc_reply_no_memory(m);
        return;
    }
    m->get_tube = t;
    r = worker_reserve(e, &m->worker, timeout, &j);
    if (r != WAIT_PENDING) {
        finish(m, r, j, key, key_len, r == WAIT_RESERVED ? age_ms(e, j) : 0);
        return;
    }
    if (!(m->get_key = tb_malloc(key_len ? key_len : 1))) {
        worker_cancel(e, &m->worker);
        unwatch(m);
        mc_reply_no_memory(m);
        return;
    }
    memcpy(m->get_key, key, key_len);
    m->get_key_len = key_len;
    m->waiting = 1;
    conn_set_state(&m->conn, CONN_PAUSED);
}

/* What a get with options o fetches, and how long it may wait; a
 * monitor's wait. One place, for the gets that find a queue and the ones
 * that may not look (mc_get_nothing). */
static McFetch get_kind(unsigned o)
{
    return o & MC_OPT_PEEK ? MC_PEEK : o & MC_OPT_OPEN ? MC_OPEN : MC_TAKE;
}

static int64_t get_wait(const McCmd *cmd)
{
    return (int64_t)cmd->timeout_ms * NS_PER_MSEC;
}

static int64_t monitor_wait(const McCmd *cmd)
{
    return (int64_t)cmd->seconds * NS_PER_SEC;
}

void mc_get_nothing(McConn *m, const McCmd *cmd)
{
    unsigned o = cmd->opts;
    McFetch kind = get_kind(o);
    int64_t timeout = get_wait(cmd);
    Job *j;
    int r = WAIT_TIMED_OUT;

    if (cmd->type == MC_CMD_MONITOR) {
        /* A monitor of nothing (max 0) ends at once, as mc_monitor's. */
        kind = MC_MONITOR;
        timeout = cmd->max ? monitor_wait(cmd) : 0;
    } else if ((o & MC_OPT_ABORT) || ((o & MC_OPT_CLOSE) && !(o & MC_OPT_OPEN))) {
        /* Nothing is fetched: END at once, as mc_get answers these. */
        kind = MC_TAKE;
        timeout = 0;
    }

    if (m->conn.flags & (CONN_RDHUP | CONN_EOF))
        timeout = 0;
    m->fetch = (uint8_t)kind;
    m->hidden = 1;
    /* Nothing watched: the wait can only time out (or find no memory). */
    if (timeout > 0 && (r = worker_reserve(eng(m), &m->worker, timeout, &j)) == WAIT_PENDING) {
        m->waiting = 1;
        conn_set_state(&m->conn, CONN_PAUSED);
        return;
    }
    finish(m, r == WAIT_NO_MEMORY ? r : WAIT_TIMED_OUT, NULL, NULL, 0, 0);
}

/* ---- waits the engine ended ------------------------------------------------ */

/* The engine delivers after its operation (engine_deliver), so the get is
 * finished here at once, even a plain get that deletes the job it took. */
void mc_wake(Worker *w, WaitEnd how, Job *j)
{
    McConn *m = container_of(w, McConn, worker);

    m->waiting = 0;
    if (m->conn.state == CONN_CLOSING) {
        /* Its replies were withdrawn (a lost binlog write): the job it got
         * stays reserved and goes back when the connection closes. */
        unwatch(m);
        free_key(m);
        return;
    }
    conn_set_state(&m->conn, CONN_OPEN);
    finish(m, how, j, m->get_key, m->get_key_len,
           how == WAIT_RESERVED ? age_ms(eng(m), j) : 0);
    free_key(m);
}

/* A waiting get stops waiting, nothing taken; its reply is the caller's. */
static void end_wait(McConn *m)
{
    worker_cancel(eng(m), &m->worker);
    m->waiting = 0;
    conn_set_state(&m->conn, CONN_OPEN);
}

void mc_hangup(McConn *m)
{
    if (m->waiting) {
        /* It gave up: the wait ends with nothing taken. */
        end_wait(m);
        finish(m, WAIT_TIMED_OUT, NULL, NULL, 0, 0);
        free_key(m);
    }
    if (m->conn.state == CONN_PAUSED) /* never: paused means one of the above */
        conn_set_state(&m->conn, CONN_OPEN);
}

void mc_demoted(McConn *m)
{
    if (!m->waiting)
        return;
    /* Nothing was sent for this get yet (a waiting monitor has sent no
     * value either): it hears what a get on a replica hears, so the
     * client goes to the new primary rather than ask here again. */
    end_wait(m);
    unwatch(m);
    free_key(m);
    m->hidden = 0;
    mc_reply_err(m, MC_ERR_REPLICA);
}

void mc_give_back_refused(McConn *m, int all)
{
    List *head = &m->worker.reserved, *n, *next;

    for (n = head->next; n != head; n = next) {
        Job *j = job_of_link(n);
        next = n->next; /* giving j back unlinks it */
        if ((all || !access_tube(m->conn.lis, j->tube)) &&
            give_back(m, j) == ENG_NO_MEMORY)
            log_warn("fd %d: out of memory giving back an open job after a reload; it goes "
                     "back when the connection closes", m->conn.ev.fd);
    }
}

void mc_closing(McConn *m)
{
    Engine *e = eng(m);
    List *head = &m->worker.reserved;

    /* Its open jobs go back (worker_fini): count them given back. */
    for (List *n = head->next; n != head; n = n->next)
        mcstats_tube(job_of_link(n)->tube)->canceled++;
    m->waiting = 0;
    m->hidden = 0;
    worker_fini(e, &m->worker); /* cancels a wait, drops the watch */
    m->get_tube = NULL;
    free_key(m);
    if (m->in_job) {
        engine_job_drop(e, m->in_job);
        m->in_job = NULL;
    }
    if (m->in_tube) {
        engine_tube_unref(e, m->in_tube);
        m->in_tube = NULL;
    }
}

/* ---- the commands ---------------------------------------------------------- */

void mc_get(McConn *m, const McCmd *cmd)
{
    Engine *e = eng(m);
    unsigned o = cmd->opts;
    Tube *t = mc_tube_get(m, cmd->name, cmd->name_len);
    Job *held;

    if (!t) {
        mc_reply_no_memory(m);
        return;
    }
    held = open_job(m, t);
    if (o & MC_OPT_ABORT) {
        if (held && give_back(m, held) == ENG_NO_MEMORY)
            mc_reply_no_memory(m);
        else
            mc_reply_lit(m, "END\r\n");
        goto out;
    }
    if ((o & MC_OPT_CLOSE) && held) {
        engine_delete(e, &m->worker, held->id);
        mc_hold(m);
        held = NULL;
    }
    if ((o & MC_OPT_CLOSE) && !(o & MC_OPT_OPEN)) {
        mc_reply_lit(m, "END\r\n");
        goto out;
    }
    if (held && !(o & MC_OPT_PEEK)) {
        /* kestrel's rule: one open job per queue; the held one goes back
         * with the connection. */
        mc_reply_err(m, MC_ERR_OPEN_HELD);
        goto out;
    }
    fetch(m, t, cmd->key, cmd->key_len, get_kind(o), get_wait(cmd));
out:
    engine_tube_unref(e, t);
}

void mc_monitor(McConn *m, const McCmd *cmd)
{
    Tube *t = mc_tube_get(m, cmd->name, cmd->name_len);

    if (!t) {
        mc_reply_no_memory(m);
        return;
    }
    if (cmd->max == 0 || open_job(m, t))
        mc_reply_lit(m, "END\r\n");
    else
        fetch(m, t, cmd->name, cmd->name_len, MC_MONITOR, monitor_wait(cmd));
    engine_tube_unref(eng(m), t);
}

void mc_confirm(McConn *m, const McCmd *cmd)
{
    Tube *t = engine_tube_find(eng(m), cmd->name, cmd->name_len);
    Job *held = t ? open_job(m, t) : NULL;

    if (!held) {
        mc_reply_err(m, MC_ERR_NOTHING_OPEN);
        return;
    }
    if (cmd->count > 0) { /* at most one is open per tube */
        engine_delete(eng(m), &m->worker, held->id);
        mc_hold(m);
    }
    mc_reply_lit(m, "END\r\n");
}
