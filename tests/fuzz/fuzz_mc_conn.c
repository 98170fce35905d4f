/*
 * fuzz_mc_conn.c — the memcache (kestrel) front-end's connection state
 * machine (src/proto/memcache/) on a real Server, driven through real
 * connections: arbitrary bytes in arbitrary splits, a virtual clock,
 * disconnects, half-closes, clients that stop reading, drain mode, a
 * binlog, allocation failure, and optionally one beanstalk connection on
 * the same engine (waiting reserves share the tubes' queues with waiting
 * gets).
 *
 * Each input builds a Server (server_init() on 127.0.0.1 port 0) with a
 * config file (conf_text: a fanout parent, a tube with max_items = 2 and
 * discard_old_when_full, a tube with max_age = 1s, a tube with ttr = 1s,
 * allow_shutdown) given as --config, whose file holds another text
 * (conf_text_b) for the memcache "reload" to switch to, and back (see
 * conf_toggle()); opens 1..4 connections as socketpairs (conn_new() on one
 * end, the harness is the client on the other) and plays a script. After
 * every step it runs one loop iteration as server_run() does, on a virtual
 * clock, reads the replies of the clients that read and checks them, and
 * checks the front-end's invariants, the server's counters
 * (fz_check_server_with()) and every tube's policy against the config in
 * force. FUZZ_COUNT_ALLOCS and FUZZ_ECHO: fuzz_util.h.
 *
 * Input format:
 *   byte 0    flags: bits 0-1 connections-1; bit 2 binlog (-F); bit 3
 *             allocation failure injection (bytes 1-2: which allocation
 *             fails, counted from the first script step); bit 4 -z 100;
 *             bit 5 the last connection speaks beanstalk (with 2+
 *             connections); bit 6 binlog with -f 0 instead of -F; bit 7
 *             start draining
 *   bytes 1-2 failure index (big endian), present always
 *   then steps, each a header byte h: c = h & 3 (connection, modulo the
 *   count), op = h >> 2:
 *     op < 48:   a length byte L follows, then L bytes written to c
 *     op 48..51: the clock advances by (next byte) * 10^(op-48) ms
 *     op 52:     client c shuts down its write side
 *     op 53:     client c closes its end
 *     op 54:     client c stops / starts reading replies (toggle)
 *     op 55:     drain mode toggles (SIGUSR1 / SIGUSR2)
 *     op 56..63: (op-55) extra loop iterations
 *
 * Reply checks (memcache clients): the bytes are a run of whole replies:
 * known lines (STORED, NOT_STORED, END, DELETED, ERROR, UP, READONLY,
 * "Flushed all queues.", "Reloaded config.", VERSION, STAT, a count,
 * CLIENT_ERROR/SERVER_ERROR lines, dump_stats/dump_config lines), a VALUE
 * line followed by exactly its data and "\r\n"; no bare LF in a line; after
 * an error that closes the connection, nothing but the close. Invariants:
 * a paused memcache connection waits in the engine or has its wait's end
 * pending (and only then); it watches exactly the tube of its get while
 * one runs, nothing otherwise; every reserved job belongs to a live
 * connection, and a memcache connection holds at most one per tube (plus
 * the job of a pending wait); waiting counts agree.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "access.h"
#include "alloc.h"
#include "bsconn.h"
#include "clock.h"
#include "conf.h"
#include "conn.h"
#include "engine.h"
#include "fuzz_util.h"
#include "log.h"
#include "mcconn.h"
#include "opts.h"
#include "serve.h"

#define MAXC 4
#define RBUF (1 << 20)

static const char conf_text[] =
    "allow_shutdown = true\n"
    "[tube f]\nfanout = true\n"
    "[tube l]\nmax_items = 2\ndiscard_old_when_full = true\n"
    "[tube m]\nmax_items = 1\n"
    "[tube e]\nmax_age = 1s\nmove_expired_to = dead\n"
    "[tube t]\nttr = 1s\npriority = 0\n"
    "[tube o]\nmax_age = 5s\n"
    "[listen r]\naddress = 127.0.0.1:1\nprotocol = memcache\n"
    "role = producer, worker\ntubes = q*, e, f\n";

/* The config file a reload reads while conf_text is in force, and the
 * other way round (see conf_toggle()): f loses its fanout (its children
 * are let go) and g gains one, l and m change their limits, e its max_age,
 * t and o lose their sections (o its expiry), new sections give n an
 * expiry and every p* tube a size limit, and two run-time server keys
 * change. */
static const char conf_text_b[] =
    "allow_shutdown = true\n"
    "stall_timeout = 10\n"
    "max_connections = 100\n"
    "[tube f]\nmax_items = 5\n"
    "[tube g]\nfanout = true\n"
    "[tube l]\nmax_items = 3\ndiscard_old_when_full = true\n"
    "[tube m]\nmax_items = 2\nmax_size = 64\n"
    "[tube e]\nmax_age = 3s\nmove_expired_to = dead\n"
    "[tube n]\nmax_age = 2s\npriority = 7\n"
    "[tube dead]\nmax_items = 2\ndiscard_old_when_full = true\n"
    "[tube p*]\nmax_size = 100\nmax_item_size = 50\n"
    "[listen r]\naddress = 127.0.0.1:1\nprotocol = memcache\n"
    "role = worker, read\ntubes = q*, g, dead\n";

typedef struct Client {
    int fd;            /* our end, -1 once closed */
    int reading;       /* read replies after each step */
    int eof;
    int bs;            /* a beanstalk client: replies not checked here */
    int closed_by_error; /* an error that closes was read: nothing may follow */
    char *rb;          /* replies not yet checked */
    size_t rlen;
} Client;

/* ---- replies ------------------------------------------------------------ */

static int line_is(const char *p, size_t n, const char *s)
{
    return strlen(s) == n && memcmp(p, s, n) == 0;
}

static int starts(const char *p, size_t n, const char *s)
{
    size_t k = strlen(s);

    return n >= k && memcmp(p, s, k) == 0;
}

static int all_digits(const char *p, size_t n)
{
    if (!n || n > 20)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (p[i] < '0' || p[i] > '9')
            return 0;
    return 1;
}

/* The error lines after which the connection must close. */
static int closing_error(const char *p, size_t n)
{
    static const char *const lines[] = {
        "CLIENT_ERROR line too long", "CLIENT_ERROR unknown command",
        "CLIENT_ERROR empty queue name", "CLIENT_ERROR conflicting options",
        "CLIENT_ERROR status is changed by signal only", "CLIENT_ERROR bad data chunk",
        "SERVER_ERROR",
    };

    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        if (line_is(p, n, lines[i]))
            return 1;
    return 0;
}

/* Length of the reply at p if complete, 0 if not yet; aborts if it is
 * malformed. */
static size_t check_reply(Client *c, const char *p, size_t n)
{
    const char *e = memmem(p, n, "\r\n", 2);
    size_t ll;

    if (!e) {
        FZ_CHECK(n < 4096 || memchr(p, '\n', n) == NULL, "no CRLF in %zu bytes", n);
        FZ_CHECK(!memchr(p, '\n', n), "bare LF in a reply line");
        return 0;
    }
    ll = (size_t)(e - p);
    FZ_CHECK(!memchr(p, '\n', ll), "bare LF in a reply line");
    FZ_CHECK(!c->closed_by_error, "'%.*s' after an error that closes", (int)(ll > 60 ? 60 : ll),
             p);
    if (starts(p, ll, "VALUE ")) {
        const char *sp = p + ll;
        size_t body;
        while (sp > p && sp[-1] != ' ')
            sp--;
        FZ_CHECK(all_digits(sp, (size_t)(p + ll - sp)) && sp - p >= 10 &&
                     memcmp(sp - 3, " 0 ", 3) == 0,
                 "bad VALUE line '%.*s'", (int)(ll > 80 ? 80 : ll), p);
        body = strtoull(sp, NULL, 10);
        if (n < ll + 2 + body + 2)
            return 0;
        FZ_CHECK(p[ll + 2 + body] == '\r' && p[ll + 2 + body + 1] == '\n',
                 "VALUE data of %zu bytes not followed by CRLF", body);
        return ll + 2 + body + 2;
    }
    if (line_is(p, ll, "STORED") || line_is(p, ll, "NOT_STORED") || line_is(p, ll, "END") ||
        line_is(p, ll, "DELETED") || line_is(p, ll, "ERROR") || line_is(p, ll, "UP") ||
        line_is(p, ll, "READONLY") || line_is(p, ll, "Flushed all queues.") ||
        line_is(p, ll, "Reloaded config.") || line_is(p, ll, "}") ||
        starts(p, ll, "VERSION ") || starts(p, ll, "STAT ") || starts(p, ll, "queue '") ||
        starts(p, ll, "  ") || all_digits(p, ll) || starts(p, ll, "CLIENT_ERROR ") ||
        starts(p, ll, "SERVER_ERROR")) {
        if (closing_error(p, ll))
            c->closed_by_error = 1;
        return ll + 2;
    }
    fz_fail("unknown reply line '%.*s'", (int)(ll > 80 ? 80 : ll), p);
}

static void client_read(Client *c)
{
    if (c->fd < 0 || !c->reading || c->eof)
        return;
    for (;;) {
        ssize_t n;
        size_t used = 0, k;

        if (c->rlen == RBUF) {
            FZ_CHECK(c->bs, "reply buffer full");
            c->rlen = 0;
        }
        n = read(c->fd, c->rb + c->rlen, RBUF - c->rlen);
        if (n == 0) {
            c->eof = 1;
            return;
        }
        if (n < 0) {
            if (errno != EAGAIN && errno != EINTR)
                c->eof = 1;
            return;
        }
        if (fz_echo) /* FUZZ_ECHO=1: what each client reads, to stderr */
            fprintf(stderr, "[%s %d] %.*s", c->bs ? "bs" : "mc", c->fd, (int)n, c->rb + c->rlen);
        if (c->bs)
            continue; /* fuzz_conn checks beanstalk replies */
        c->rlen += (size_t)n;
        while ((k = check_reply(c, c->rb + used, c->rlen - used)) > 0)
            used += k;
        memmove(c->rb, c->rb + used, c->rlen - used);
        c->rlen -= used;
    }
}

/* ---- invariants --------------------------------------------------------- */

static int live_owner(const Server *s, const Worker *w, const Proto *mcp)
{
    for (const List *n = s->conns.next; n != &s->conns; n = n->next) {
        const Conn *c = container_of(n, Conn, link);
        const Worker *cw = c->proto == mcp ? &((const McConn *)c)->worker
                                           : &((const BsConn *)c)->worker;
        if (cw == w)
            return 1;
    }
    return 0;
}

typedef struct {
    const Server *s;
    const Proto *mcp;
    uint64_t reserved;
} Count;

static void count_job(HashNode *n, void *arg)
{
    Count *k = arg;
    const Job *j = container_of(n, Job, hnode);

    if (j->state != JOB_RESERVED)
        return;
    k->reserved++;
    FZ_CHECK(job_ext(j) && job_ext(j)->owner && live_owner(k->s, job_ext(j)->owner, k->mcp),
             "reserved job %llu without a live owner", (unsigned long long)j->id);
}

/* This input injects allocation failure (flag bit 3). */
static int alloc_failing;

static void check_server(const Server *s, const Memcache *f)
{
    uint64_t waiting = 0;
    Count k = {s, &f->proto, 0};

    hash_each(&s->eng.jobs, count_job, &k);
    FZ_CHECK(k.reserved == s->eng.jobs_ct.reserved && k.reserved == s->eng.ttr.len,
             "reserved %llu, counted %llu", (unsigned long long)s->eng.jobs_ct.reserved,
             (unsigned long long)k.reserved);
    for (const List *n = s->conns.next; n != &s->conns; n = n->next) {
        const Conn *c = container_of(n, Conn, link);
        const Worker *w;

        if (c->proto != &f->proto) {
            w = &((const BsConn *)c)->worker;
            waiting += w->waiting;
            continue;
        }
        {
            const McConn *m = (const McConn *)c;
            int paused = c->state == CONN_PAUSED;
            int ended; /* its wait timed out, not yet delivered */
            w = &m->worker;
            ended = list_linked(&w->end_link);
            waiting += w->waiting;
            FZ_CHECK(w->no_ttr, "memcache worker with a TTR");
            FZ_CHECK(m->waiting == (w->waiting || ended), "waiting %d, engine says %d, ended %d",
                     m->waiting, w->waiting, ended);
            FZ_CHECK(!(w->waiting && ended), "waiting and ended");
            if (c->state != CONN_CLOSING)
                FZ_CHECK(paused == (m->waiting || ended), "paused %d, waiting %d, ended %d",
                         paused, m->waiting, ended);
            /* A get of a queue the listener may not touch waits with no
             * key and no watch (it only answers END). */
            if (m->hidden)
                FZ_CHECK(!m->get_key && !m->get_tube &&
                         (m->waiting || ended || c->state == CONN_CLOSING),
                         "a hidden queue's get with a key, a watch or no wait");
            else
                FZ_CHECK((m->get_key != NULL) == (m->waiting || ended) ||
                         c->state == CONN_CLOSING, "get key without a wait");
            if (m->get_tube) {
                FZ_CHECK(w->nwatch == 1 && w->watch[0].tube == m->get_tube,
                         "a get watches %u tubes", w->nwatch);
                FZ_CHECK(m->waiting || ended, "a watch left after its get");
            } else {
                FZ_CHECK(w->nwatch == 0, "watching %u tubes between gets", w->nwatch);
            }
            FZ_CHECK(m->mstate == MC_BODY || (!m->in_job && !m->in_tube),
                     "a set's job outside BODY");
            /* [listen r]'s client: a reload that takes a tube from the
             * listener ends a get waiting there and gives back the jobs
             * open there (mc_access_changed_conn; out of memory, a job
             * may stay open until the connection closes). */
            if (c->lis && c->lis->restricted && c->state != CONN_CLOSING) {
                FZ_CHECK(!m->waiting || !m->get_tube || access_tube(c->lis, m->get_tube),
                         "a get waits on tube %s, which its listener does not allow",
                         m->get_tube->name);
                for (const List *a = w->reserved.next; a != &w->reserved && !alloc_failing;
                     a = a->next) {
                    Job *ja = container_of(a, JobExt, link)->job;
                    FZ_CHECK(access_tube(c->lis, ja->tube),
                             "job %llu open in tube %s, which its listener does not allow",
                             (unsigned long long)ja->id, ja->tube->name);
                }
            }
            /* At most one open job per tube (the pending wait's job apart). */
            for (const List *a = w->reserved.next; a != &w->reserved; a = a->next) {
                const Job *ja = container_of(a, JobExt, link)->job;
                FZ_CHECK(ja->state == JOB_RESERVED && job_ext(ja)->owner == w,
                         "job %llu in a reserved list, state %d", (unsigned long long)ja->id,
                         ja->state);
                FZ_CHECK(job_ext(ja)->deadline == INT64_MAX, "an open job with a TTR deadline");
                for (const List *b = a->next; b != &w->reserved; b = b->next) {
                    const Job *jb = container_of(b, JobExt, link)->job;
                    FZ_CHECK(ja->tube != jb->tube,
                             "two open jobs of tube %s", ja->tube->name);
                }
            }
        }
    }
    FZ_CHECK(waiting == s->eng.waiting_ct, "waiting_ct %llu, counted %llu",
             (unsigned long long)s->eng.waiting_ct, (unsigned long long)waiting);
    for (size_t i = 0; i < s->eng.tubes.len; i++) {
        const Tube *t = s->eng.tubes.list[i];
        FZ_CHECK(t->waitq_len == t->waiting_ct, "tube %s: waiting_ct", t->name);
        FZ_CHECK(t->refs > 0 || t == s->eng.default_tube, "tube %s with no reference",
                 t->name);
    }
}

/* ---- the config file -------------------------------------------------------- */

/* The server runs with --config DIR/fuzz.conf (conf_text). The file holds
 * the other config (conf_text_b) from the start, so a memcache "reload"
 * changes it; whenever a reload has applied (the Config's ConfFile is
 * another one), the file is rewritten with the text not in force, so the
 * next reload goes back. A reload that fails (out of memory) must leave
 * the old config in force: every tube's policy is checked against the
 * config in force after every step, whichever it is. */
static char conf_path[300];
static const ConfFile *conf_seen; /* the ConfFile in force at the last step */

static void conf_write(const char *text)
{
    FILE *f = fopen(conf_path, "w");

    if (!f || fputs(text, f) < 0 || fclose(f) != 0)
        fz_fail("cannot write %s", conf_path);
}

/* Which text is in force: only conf_text_b gives g fanout. */
static int conf_is_b(const Server *s)
{
    TubePolicy p;

    conf_policy(s->cfg.conf, "g", 1, s->cfg.max_job_size, &p);
    return p.fanout;
}

static void conf_toggle(const Server *s)
{
    if (s->cfg.conf == conf_seen)
        return;
    conf_seen = s->cfg.conf;
    conf_write(conf_is_b(s) ? conf_text : conf_text_b);
}

/* Every tube has the policy the config in force gives it; a registered
 * fanout child's parent has fanout on. */
static void check_policies(const Server *s)
{
    const Engine *e = &s->eng;

    for (size_t i = 0; i < e->tubes.len; i++) {
        const Tube *t = e->tubes.list[i];
        TubePolicy p;

        conf_policy(s->cfg.conf, t->name, t->name_len, s->cfg.max_job_size, &p);
        FZ_CHECK(!memcmp(&p, &t->pol, sizeof p),
                 "tube %s: its policy is not the one the config in force gives (%s)", t->name,
                 conf_is_b(s) ? "b" : "a");
        if (t->registered) {
            conf_policy(s->cfg.conf, t->name, t->parent_len, s->cfg.max_job_size, &p);
            FZ_CHECK(p.fanout, "tube %s: a fanout child of a parent without fanout", t->name);
        }
    }
}

/* ---- the script ----------------------------------------------------------- */

static Memcache front;
static Beanstalk bfront;

static void step_done(Server *s, Client *cl, int nc)
{
    fz_loop_once(s);
    for (int i = 0; i < nc; i++)
        client_read(&cl[i]);
    check_server(s, &front);
    fz_check_server_with(s, &bfront.proto, &front.proto);
    conf_toggle(s);
    check_policies(s);
}

static void client_write(Server *s, Client *cl, int nc, Client *c, const uint8_t *p, size_t n)
{
    int stuck = 0;

    while (n && c->fd >= 0 && stuck < 4) {
        ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
            stuck = 0;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return; /* EPIPE: the server closed it */
        step_done(s, cl, nc);
        stuck++;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static Server srv;
    Server *s = &srv;
    Client cl[MAXC];
    Config cfg;
    ConfFile *cf = NULL;
    char err[256];
    uint8_t flags;
    unsigned fail_at;
    int nc, with_bs;
    size_t pos = 3;

    if (size < 3)
        return 0;
    flags = data[0];
    fail_at = (unsigned)data[1] << 8 | data[2];
    nc = (flags & 3) + 1;
    with_bs = (flags & 0x20) && nc > 1;

    opts_defaults(&cfg);
    cfg.listen_addr = "127.0.0.1";
    cfg.port = 0;
    if (flags & 0x10)
        cfg.max_job_size = 100;
    if (conf_parse("fuzz.conf", conf_text, sizeof conf_text - 1, &cf, err, sizeof err) < 0)
        fz_fail("config: %s", err);
    cfg.conf = cf;
    cfg.allow_shutdown = 1;
    snprintf(conf_path, sizeof conf_path, "%s/fuzz.conf", fz_tmpdir());
    cfg.config_path = conf_path;
    /* As if given on the command line: a reload changes only the run-time
     * keys the files set. */
    cfg.cli_set = ~(CONF_BIT(SK_ALLOW_SHUTDOWN) | CONF_BIT(SK_STALL_TIMEOUT) |
                    CONF_BIT(SK_MAX_CONNECTIONS));
    if (flags & 0x04) {
        fz_clear_dir(fz_tmpdir());
        cfg.binlog_dir = fz_tmpdir();
        cfg.binlog_size = 0;
        if (flags & 0x40)
            cfg.fsync_ms = 0;
        else
            cfg.fsync_never = 1;
    }
    log_verbosity = 0;
    conf_write(conf_text_b); /* after the binlog directory was emptied */
    conf_seen = cf;
    fz_save_signals();
    if (server_init(s, &cfg) < 0)
        fz_fail("server_init failed");
    fz_restore_signals();
    s->loop.on_wake = fz_fake_wake;
    fz_vnow = s->eng.now;
    if (cfg.binlog_dir && engine_open_binlog(&s->eng, err, sizeof err) < 0)
        fz_fail("binlog_open: %s", err);
    s->draining = (flags & 0x80) != 0;
    if (memcache_init(&front, s) < 0)
        fz_fail("memcache_init failed");
    beanstalk_init(&bfront, s);

    memset(cl, 0, sizeof cl);
    for (int i = 0; i < nc; i++) {
        int sv[2];
        cl[i].bs = with_bs && i == nc - 1;
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
            fz_fail("socketpair: %s", strerror(errno));
        if (i == 3 && !cl[i].bs) {
            /* The fourth memcache client comes through [listen r]. */
            if (!conn_new_on(s, sv[0], fz_fake_listener(s, &front.proto, &cf->listen[0])))
                fz_fail("conn_new_on failed");
        } else if (!conn_new(s, sv[0], cl[i].bs ? &bfront.proto : &front.proto)) {
            fz_fail("conn_new failed");
        }
        cl[i].fd = sv[1];
        cl[i].reading = 1;
        cl[i].rb = malloc(RBUF);
    }
    alloc_failing = (flags & 0x08) != 0;
    if (flags & 0x08)
        fz_alloc_arm(fail_at + 1);

    while (pos < size) {
        uint8_t h = data[pos++];
        Client *c = &cl[(h & 3) % nc];
        unsigned op = h >> 2;

        if (op < 48) {
            size_t len = pos < size ? data[pos++] : 0;
            if (len > size - pos)
                len = size - pos;
            client_write(s, cl, nc, c, data + pos, len);
            pos += len;
        } else if (op < 52) {
            int64_t ms = pos < size ? data[pos++] : 1;
            for (unsigned k = 48; k < op; k++)
                ms *= 10;
            fz_vnow += ms * NS_PER_MSEC;
        } else if (op == 52) {
            if (c->fd >= 0)
                shutdown(c->fd, SHUT_WR);
        } else if (op == 53) {
            if (c->fd >= 0)
                close(c->fd);
            c->fd = -1;
        } else if (op == 54) {
            c->reading = !c->reading;
        } else if (op == 55) {
            s->draining = !s->draining;
        } else {
            for (unsigned k = 55; k < op; k++)
                step_done(s, cl, nc);
        }
        step_done(s, cl, nc);
    }

    /* Wind down: every client reads, every timer fires. */
    fz_alloc_disarm();
    fz_winding_down = 1;
    for (int i = 0; i < nc; i++)
        cl[i].reading = 1;
    for (int k = 0; k < 3; k++)
        step_done(s, cl, nc);
    fz_vnow += 86400 * NS_PER_SEC;
    for (int k = 0; k < 3; k++)
        step_done(s, cl, nc);

    server_free(s);
    memcache_free(&front);
    conf_free(s->cfg.conf); /* cf, or what a reload put in its place */
    fz_winding_down = 0;
    for (int i = 0; i < nc; i++) {
        if (cl[i].fd >= 0)
            close(cl[i].fd);
        free(cl[i].rb);
    }
    return 0;
}
