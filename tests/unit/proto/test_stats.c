/* Unit tests for stats.c: key order and value formats of the YAML
 * documents, against beanstalkd's (see compat-notes.md); and for the
 * snapshot they render (engine/snapshot.c, net/srvstats.c): the one
 * name-order sort, the figures, the shared key walk. The Server is a
 * minimal one built by hand: zeroed, with a TubeSet and a job table. */
#include <inttypes.h>
#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "alloc.h"
#include "buf.h"
#include "clock.h"
#include "job.h"
#include "opts.h"
#include "bsconn.h"
#include "serve.h"
#include "stats.h"
#include "tube.h"
#include "unit.h"

#define SEC NS_PER_SEC

static const char *const server_keys[] = {
    "current-jobs-urgent", "current-jobs-ready", "current-jobs-reserved",
    "current-jobs-delayed", "current-jobs-buried", "cmd-put", "cmd-peek",
    "cmd-peek-ready", "cmd-peek-delayed", "cmd-peek-buried", "cmd-reserve",
    "cmd-reserve-with-timeout", "cmd-delete", "cmd-release", "cmd-use",
    "cmd-watch", "cmd-ignore", "cmd-bury", "cmd-kick", "cmd-touch",
    "cmd-stats", "cmd-stats-job", "cmd-stats-tube", "cmd-list-tubes",
    "cmd-list-tube-used", "cmd-list-tubes-watched", "cmd-pause-tube",
    "job-timeouts", "total-jobs", "max-job-size", "current-tubes",
    "current-connections", "current-producers", "current-workers",
    "current-waiting", "total-connections", "pid", "version",
    "rusage-utime", "rusage-stime", "uptime", "binlog-oldest-index",
    "binlog-current-index", "binlog-records-migrated",
    "binlog-records-written", "binlog-max-size", "draining", "id",
    "hostname", "os", "platform",
};
#define NSERVER_KEYS (sizeof server_keys / sizeof server_keys[0])

static const char *const tube_keys[] = {
    "name", "current-jobs-urgent", "current-jobs-ready",
    "current-jobs-reserved", "current-jobs-delayed", "current-jobs-buried",
    "total-jobs", "current-using", "current-watching", "current-waiting",
    "cmd-delete", "cmd-pause-tube", "pause", "pause-time-left",
};

static const char *const job_keys[] = {
    "id", "tube", "state", "pri", "age", "delay", "ttr", "time-left",
    "file", "reserves", "timeouts", "releases", "buries", "kicks",
};

/* ---- a minimal server ---- */

/* The beanstalk front-end whose stats document is under test. */
static Beanstalk front;

static void server_setup(Server *s)
{
    memset(s, 0, sizeof *s);
    opts_defaults(&s->cfg);
    /* The lists a document may walk must be valid (empty) lists. */
    list_init(&s->conns);
    list_init(&s->pending_out);
    list_init(&s->dead);
    list_init(&s->eng.ready_tubes);
    list_init(&s->eng.wide_waiters);
    ck_assert_int_eq(tubes_init(&s->eng.tubes), 0);
    ck_assert_int_eq(job_table_init(&s->eng.jobs), 0);
    s->eng.default_tube = tubes_get(&s->eng.tubes, "default", 7);
    ck_assert_ptr_nonnull(s->eng.default_tube);
    tube_ref(s->eng.default_tube);
    s->eng.started = 1000 * SEC;
    s->eng.now = s->eng.started;
    s->eng.next_id = 1;
    memcpy(s->instance_id, "0123456789abcdef", 17);
    s->eng.cfg = &s->cfg;
    beanstalk_init(&front, s);
}

static void server_teardown(Server *s)
{
    hash_free(&s->eng.jobs);
    tubes_free(&s->eng.tubes);
}

static Tube *tube(Server *s, const char *name)
{
    Tube *t = tubes_get(&s->eng.tubes, name, strlen(name));

    ck_assert_ptr_nonnull(t);
    tube_ref(t);
    return t;
}

/* ---- reading a YAML document ---- */

typedef struct Doc {
    size_t n;
    char key[80][64];
    char val[80][512];
} Doc;

/* Split a dictionary document into keys and values, checking its framing:
 * "---\n" first, then "key: value\n" lines only. */
static void parse_doc(const Buf *b, Doc *d)
{
    const char *p = b->data, *end = b->data + b->len;

    memset(d, 0, sizeof *d);
    ck_assert_int_eq(b->oom, 0);
    ck_assert_uint_ge(b->len, 4);
    ck_assert_msg(memcmp(p, "---\n", 4) == 0, "no document start");
    ck_assert_msg(end[-1] == '\n', "document does not end with a newline");
    ck_assert_ptr_null(memchr(p, '\r', b->len));
    ck_assert_ptr_null(memchr(p, '\0', b->len));
    for (p += 4; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *colon = memchr(p, ':', (size_t)(nl - p));
        ck_assert_msg(colon && colon + 1 < nl && colon[1] == ' ',
                      "bad line '%.*s'", (int)(nl - p), p);
        ck_assert_uint_lt(d->n, 80);
        ck_assert_uint_lt((size_t)(colon - p), sizeof d->key[0]);
        ck_assert_uint_lt((size_t)(nl - colon - 2), sizeof d->val[0]);
        memcpy(d->key[d->n], p, (size_t)(colon - p));
        memcpy(d->val[d->n], colon + 2, (size_t)(nl - colon - 2));
        d->n++;
        p = nl + 1;
    }
}

static const char *value(const Doc *d, const char *key)
{
    for (size_t i = 0; i < d->n; i++)
        if (!strcmp(d->key[i], key))
            return d->val[i];
    ck_abort_msg("no key '%s'", key);
    return NULL;
}

static void keys_are(const Doc *d, const char *const *keys, size_t n)
{
    ck_assert_uint_ge(d->n, n);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(!strcmp(d->key[i], keys[i]), "key %zu is '%s', want '%s'",
                      i, d->key[i], keys[i]);
}

static void doc_is(const Buf *b, const char *want)
{
    ck_assert_int_eq(b->oom, 0);
    ck_assert_msg(b->len == strlen(want) && !memcmp(b->data, want, b->len),
                  "got:\n%.*s\nwant:\n%s", (int)b->len, b->data, want);
}

static int matches(const char *s, const char *re)
{
    regex_t rx;
    int ok;

    ck_assert_int_eq(regcomp(&rx, re, REG_EXTENDED | REG_NOSUB), 0);
    ok = regexec(&rx, s, 0, NULL, 0) == 0;
    regfree(&rx);
    return ok;
}

/* The YAML double-quoted form stats promises for string values. */
static void quote(char *out, size_t cap, const char *s)
{
    size_t o = 0;

    out[o++] = '"';
    for (; *s && o + 3 < cap; s++) {
        if (*s == '"' || *s == '\\')
            out[o++] = '\\';
        out[o++] = *s;
    }
    out[o++] = '"';
    out[o] = '\0';
}

/* ---- stats-tube ---- */

static Job *job_in(Server *s, Tube *t, uint64_t id)
{
    Job *j = job_alloc(id, 0);

    ck_assert_ptr_nonnull(j);
    j->tube = t;
    tube_ref(t);
    job_table_insert(&s->eng.jobs, j);
    return j;
}

static void job_out(Server *s, Job *j)
{
    job_table_remove(&s->eng.jobs, j);
    tube_unref(&s->eng.tubes, j->tube);
    job_free(j);
}

START_TEST(tube_document)
{
    Server s;
    Buf b = {0};
    Job *ready[5], *delayed;
    Doc d;

    server_setup(&s);
    Tube *t = s.eng.default_tube;
    for (int i = 0; i < 5; i++) {
        ready[i] = job_in(&s, t, (uint64_t)i + 1);
        ready[i]->pri = (uint32_t)i * 1000;
        ck_assert_int_eq(heap_insert(&t->ready, ready[i]), 0);
    }
    delayed = job_in(&s, t, 6);
    ck_assert_ptr_nonnull(job_ext_get(delayed));
    job_ext(delayed)->deadline = s.eng.now + 50 * SEC;
    ck_assert_int_eq(heap_insert(&t->delay, delayed), 0);
    t->urgent_ct = 2;
    t->reserved_ct = 3;
    t->buried_ct = 4;
    t->total_jobs = 15;
    t->using_ct = 1;
    t->watching_ct = 2;
    t->waiting_ct = 1;
    t->cmd_delete = 6;
    t->cmd_pause = 7;
    t->pause = 30 * SEC;
    t->unpause_at = s.eng.now + 25 * SEC + SEC / 2;

    stats_tube(&s.eng, t, &b);
    doc_is(&b, "---\n"
               "name: \"default\"\n"
               "current-jobs-urgent: 2\n"
               "current-jobs-ready: 5\n"
               "current-jobs-reserved: 3\n"
               "current-jobs-delayed: 1\n"
               "current-jobs-buried: 4\n"
               "total-jobs: 15\n"
               "current-using: 1\n"
               "current-watching: 2\n"
               "current-waiting: 1\n"
               "cmd-delete: 6\n"
               "cmd-pause-tube: 7\n"
               "pause: 30\n"
               "pause-time-left: 25\n");
    parse_doc(&b, &d);
    ck_assert_uint_eq(d.n, 14);
    keys_are(&d, tube_keys, 14);

    /* current-waiting also counts waiting connections with a wide watch
     * list (they wait server-wide, not in the tube) that watch this tube. */
    Worker wide[2];
    Watch ww[2];
    Tube *other = tube(&s, "other");
    memset(wide, 0, sizeof wide);
    memset(ww, 0, sizeof ww);
    ww[0].tube = t;
    ww[1].tube = other;
    for (int i = 0; i < 2; i++) {
        wide[i].watch = &ww[i];
        wide[i].nwatch = 1;
        list_insert_tail(&s.eng.wide_waiters, &wide[i].wide_link);
    }
    buf_free(&b);
    stats_tube(&s.eng, t, &b);
    parse_doc(&b, &d);
    ck_assert_str_eq(value(&d, "current-waiting"), "2");
    for (int i = 0; i < 2; i++)
        list_remove(&wide[i].wide_link);
    tube_unref(&s.eng.tubes, other);

    /* The pause has run out (timer not yet run): time left is 0. */
    s.eng.now = t->unpause_at + 3 * SEC;
    buf_free(&b);
    stats_tube(&s.eng, t, &b);
    parse_doc(&b, &d);
    ck_assert_str_eq(value(&d, "pause"), "30");
    ck_assert_str_eq(value(&d, "pause-time-left"), "0");

    /* Not paused: both 0, whatever unpause_at holds. */
    t->pause = 0;
    t->unpause_at = s.eng.now + 100 * SEC;
    buf_free(&b);
    stats_tube(&s.eng, t, &b);
    parse_doc(&b, &d);
    ck_assert_str_eq(value(&d, "pause"), "0");
    ck_assert_str_eq(value(&d, "pause-time-left"), "0");

    for (int i = 0; i < 5; i++) {
        heap_remove(&t->ready, ready[i]->heap_pos);
        job_out(&s, ready[i]);
    }
    heap_remove(&t->delay, delayed->heap_pos);
    job_out(&s, delayed);
    buf_free(&b);
    server_teardown(&s);
}
END_TEST

START_TEST(tube_document_other_name)
{
    Server s;
    Buf b = {0};
    char name[MAX_TUBE_NAME + 1], want[MAX_TUBE_NAME + 16];
    Doc d;

    server_setup(&s);
    memset(name, 'x', MAX_TUBE_NAME);
    memcpy(name, "a$(b);c+d/e.f_", 14);
    name[MAX_TUBE_NAME] = '\0';
    Tube *t = tube(&s, name);
    stats_tube(&s.eng, t, &b);
    parse_doc(&b, &d);
    keys_are(&d, tube_keys, 14);
    ck_assert_uint_eq(d.n, 14);
    snprintf(want, sizeof want, "\"%s\"", name);
    ck_assert_str_eq(value(&d, "name"), want);
    for (size_t i = 1; i < 14; i++)
        ck_assert_str_eq(d.val[i], "0");
    tube_unref(&s.eng.tubes, t);
    buf_free(&b);
    server_teardown(&s);
}
END_TEST

/* ---- stats-job ---- */

START_TEST(job_document)
{
    Server s;
    Buf b = {0};
    Doc d;

    server_setup(&s);
    Tube *foo = tube(&s, "foo");
    Job *j = job_in(&s, foo, 42);
    j->state = JOB_RESERVED;
    j->pri = 7;
    job_set_created(j, s.eng.now - 5 * SEC - 9 * SEC / 10);  /* age 5.9 s */
    JobExt *e = job_ext_get(j);
    ck_assert_ptr_nonnull(e);
    e->deadline = s.eng.now + 3 * SEC + SEC / 5;      /* 3.2 s left */
    e->delay = 3;
    j->ttr = 60;
    e->reserves = 1;
    e->timeouts = 2;
    e->releases = 3;
    e->buries = 4;
    e->kicks = 5;

    stats_job(&s.eng, j, &b);
    doc_is(&b, "---\n"
               "id: 42\n"
               "tube: \"foo\"\n"
               "state: reserved\n"
               "pri: 7\n"
               "age: 5\n"
               "delay: 3\n"
               "ttr: 60\n"
               "time-left: 3\n"
               "file: 0\n"
               "reserves: 1\n"
               "timeouts: 2\n"
               "releases: 3\n"
               "buries: 4\n"
               "kicks: 5\n");
    parse_doc(&b, &d);
    ck_assert_uint_eq(d.n, 14);
    keys_are(&d, job_keys, 14);

    /* time-left counts only for reserved and delayed jobs. */
    static const struct {
        JobState st;
        const char *name, *left;
    } cases[] = {
        {JOB_READY, "ready", "0"},
        {JOB_RESERVED, "reserved", "3"},
        {JOB_DELAYED, "delayed", "3"},
        {JOB_BURIED, "buried", "0"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        j->state = (uint8_t)cases[i].st;
        buf_free(&b);
        stats_job(&s.eng, j, &b);
        parse_doc(&b, &d);
        keys_are(&d, job_keys, 14);
        ck_assert_str_eq(value(&d, "state"), cases[i].name);
        ck_assert_str_eq(value(&d, "time-left"), cases[i].left);
    }

    /* A deadline already passed shows 0, not a negative number. */
    j->state = JOB_RESERVED;
    s.eng.now = job_ext(j)->deadline + 2 * SEC;
    buf_free(&b);
    stats_job(&s.eng, j, &b);
    parse_doc(&b, &d);
    ck_assert_str_eq(value(&d, "time-left"), "0");
    ck_assert_str_eq(value(&d, "age"), "11");

    /* Extremes of every number. */
    j->id = UINT64_MAX;
    j->pri = UINT32_MAX;
    job_ext(j)->delay = UINT32_MAX;
    j->ttr = UINT32_MAX;
    j->file = 12;
    job_ext(j)->kicks = UINT32_MAX;
    buf_free(&b);
    stats_job(&s.eng, j, &b);
    parse_doc(&b, &d);
    ck_assert_str_eq(value(&d, "id"), "18446744073709551615");
    ck_assert_str_eq(value(&d, "pri"), "4294967295");
    ck_assert_str_eq(value(&d, "delay"), "4294967295");
    ck_assert_str_eq(value(&d, "ttr"), "4294967295");
    ck_assert_str_eq(value(&d, "file"), "12");
    ck_assert_str_eq(value(&d, "kicks"), "4294967295");
    j->id = 42;

    job_out(&s, j);
    tube_unref(&s.eng.tubes, foo);
    buf_free(&b);
    server_teardown(&s);
}
END_TEST

/* ---- list-tubes, list-tubes-watched ---- */

START_TEST(list_tubes)
{
    Server s;
    Buf b = {0};

    server_setup(&s);
    stats_list_tubes(&s.eng, NULL, &b);
    doc_is(&b, "---\n- default\n");
    Tube *x = tube(&s, "x");
    Tube *y = tube(&s, "y(1)");
    Tube *z = tube(&s, "z");
    buf_free(&b);
    stats_list_tubes(&s.eng, NULL, &b);
    /* Names are not quoted in lists. */
    doc_is(&b, "---\n- default\n- x\n- y(1)\n- z\n");
    tube_unref(&s.eng.tubes, x); /* z takes x's place */
    buf_free(&b);
    stats_list_tubes(&s.eng, NULL, &b);
    doc_is(&b, "---\n- default\n- z\n- y(1)\n");
    tube_unref(&s.eng.tubes, y);
    tube_unref(&s.eng.tubes, z);
    buf_free(&b);
    server_teardown(&s);
}
END_TEST

START_TEST(list_watched)
{
    Server s;
    Worker c;
    Watch w[3];
    Buf b = {0};

    server_setup(&s);
    memset(&c, 0, sizeof c);
    memset(w, 0, sizeof w);
    w[0].tube = s.eng.default_tube;
    w[1].tube = tube(&s, "jobs");
    w[2].tube = tube(&s, "mail");
    c.watch = w;
    c.nwatch = 1;
    stats_list_watched(&c, &b);
    doc_is(&b, "---\n- default\n");
    c.nwatch = 3;
    buf_free(&b);
    stats_list_watched(&c, &b);
    doc_is(&b, "---\n- default\n- jobs\n- mail\n");
    tube_unref(&s.eng.tubes, w[1].tube);
    tube_unref(&s.eng.tubes, w[2].tube);
    buf_free(&b);
    server_teardown(&s);
}
END_TEST

/* ---- stats ---- */

START_TEST(server_document)
{
    Server s;
    Buf b = {0};
    struct utsname u;
    char want[1024], key[64];
    Doc d;

    server_setup(&s);
    Tube *extra = tube(&s, "extra");
    s.eng.jobs_ct = (JobCounts){.ready = 2, .urgent = 1, .reserved = 3,
                            .delayed = 4, .buried = 5};
    for (int t = 0; t < CMD_COUNT; t++)
        front.cmd_ct[t] = 100 + (uint64_t)t;
    s.eng.job_timeouts = 7;
    s.eng.total_jobs = 8;
    s.conn_ct = 9;
    front.producer_ct = 10;
    front.worker_ct = 11;
    s.eng.waiting_ct = 12;
    s.total_conns = 13;
    s.eng.now = s.eng.started + 3661 * SEC + SEC / 2;

    stats_server(&front, &b);
    parse_doc(&b, &d);
    keys_are(&d, server_keys, NSERVER_KEYS);
    /* Keys tubed adds come after beanstalkd's, never again one of them. */
    for (size_t i = NSERVER_KEYS; i < d.n; i++)
        for (size_t k = 0; k < NSERVER_KEYS; k++)
            ck_assert_str_ne(d.key[i], server_keys[k]);

    ck_assert_str_eq(value(&d, "current-jobs-urgent"), "1");
    ck_assert_str_eq(value(&d, "current-jobs-ready"), "2");
    ck_assert_str_eq(value(&d, "current-jobs-reserved"), "3");
    ck_assert_str_eq(value(&d, "current-jobs-delayed"), "4");
    ck_assert_str_eq(value(&d, "current-jobs-buried"), "5");
    /* Each cmd-* key shows its own command's count. */
    for (int t = 0; t < CMD_COUNT; t++) {
        if (t == CMD_QUIT || t == CMD_RESERVE_JOB || t == CMD_KICK_JOB)
            continue; /* beanstalkd has no key for these */
        if (t == CMD_STATS_TUBES || t == CMD_STATS_BINLOG || t == CMD_FLUSH_TUBE ||
            t == CMD_LIST_JOBS || t == CMD_MOVE_JOB || t == CMD_STATS_LISTENERS ||
            t == CMD_STATS_REPLICATION || t == CMD_REPLICATE || t == CMD_PROMOTE ||
            t == CMD_FOLLOW) {
            /* tubed's extensions add no key to stats (extensions.md §2) */
            snprintf(key, sizeof key, "cmd-%s", cmd_name((CmdType)t));
            for (size_t i = 0; i < d.n; i++)
                ck_assert_str_ne(d.key[i], key);
            continue;
        }
        snprintf(key, sizeof key, "cmd-%s", cmd_name((CmdType)t));
        snprintf(want, sizeof want, "%d", 100 + t);
        ck_assert_msg(!strcmp(value(&d, key), want), "%s: %s, want %s", key,
                      value(&d, key), want);
    }
    ck_assert_str_eq(value(&d, "job-timeouts"), "7");
    ck_assert_str_eq(value(&d, "total-jobs"), "8");
    ck_assert_str_eq(value(&d, "max-job-size"), "65535");
    ck_assert_str_eq(value(&d, "current-tubes"), "2");
    ck_assert_str_eq(value(&d, "current-connections"), "9");
    ck_assert_str_eq(value(&d, "current-producers"), "10");
    ck_assert_str_eq(value(&d, "current-workers"), "11");
    ck_assert_str_eq(value(&d, "current-waiting"), "12");
    ck_assert_str_eq(value(&d, "total-connections"), "13");
    snprintf(want, sizeof want, "%ld", (long)getpid());
    ck_assert_str_eq(value(&d, "pid"), want);
    ck_assert_str_eq(value(&d, "version"), "\"" TUBED_VERSION "\"");
    ck_assert(matches(value(&d, "rusage-utime"), "^[0-9]+\\.[0-9]{6}$"));
    ck_assert(matches(value(&d, "rusage-stime"), "^[0-9]+\\.[0-9]{6}$"));
    ck_assert_str_eq(value(&d, "uptime"), "3661");
    ck_assert_str_eq(value(&d, "binlog-oldest-index"), "0");
    ck_assert_str_eq(value(&d, "binlog-current-index"), "0");
    ck_assert_str_eq(value(&d, "binlog-records-migrated"), "0");
    ck_assert_str_eq(value(&d, "binlog-records-written"), "0");
    /* Printed even without -b. */
    ck_assert_str_eq(value(&d, "binlog-max-size"), "10485760");
    ck_assert_str_eq(value(&d, "draining"), "false");
    ck_assert_str_eq(value(&d, "id"), "0123456789abcdef");
    ck_assert(matches(value(&d, "id"), "^[0-9a-f]{16}$"));
    ck_assert_int_eq(uname(&u), 0);
    quote(want, sizeof want, u.nodename);
    ck_assert_str_eq(value(&d, "hostname"), want);
    quote(want, sizeof want, u.version);
    ck_assert_str_eq(value(&d, "os"), want);
    quote(want, sizeof want, u.machine);
    ck_assert_str_eq(value(&d, "platform"), want);

    /* Draining, other settings. */
    s.draining = 1;
    s.cfg.max_job_size = 1073741824;
    s.cfg.binlog_size = 123456;
    buf_free(&b);
    stats_server(&front, &b);
    parse_doc(&b, &d);
    keys_are(&d, server_keys, NSERVER_KEYS);
    ck_assert_str_eq(value(&d, "draining"), "true");
    ck_assert_str_eq(value(&d, "max-job-size"), "1073741824");
    ck_assert_str_eq(value(&d, "binlog-max-size"), "123456");

    tube_unref(&s.eng.tubes, extra);
    buf_free(&b);
    server_teardown(&s);
}
END_TEST

/* With a binlog, its figures replace the zeros. */
START_TEST(server_document_binlog)
{
    Server s;
    Buf b = {0};
    BlFile files[2] = {{.index = 3}, {.index = 7}};
    Doc d;

    server_setup(&s);
    s.eng.binlog.enabled = 1;
    s.eng.binlog.healthy = 1;
    s.eng.binlog.file_size = 5000;
    s.eng.binlog.files = files;
    s.eng.binlog.nfiles = 2;
    s.eng.binlog.records_written = 11;
    s.eng.binlog.records_migrated = 4;
    stats_server(&front, &b);
    parse_doc(&b, &d);
    keys_are(&d, server_keys, NSERVER_KEYS);
    ck_assert_str_eq(value(&d, "binlog-oldest-index"), "3");
    ck_assert_str_eq(value(&d, "binlog-current-index"), "7");
    ck_assert_str_eq(value(&d, "binlog-records-migrated"), "4");
    ck_assert_str_eq(value(&d, "binlog-records-written"), "11");
    ck_assert_str_eq(value(&d, "binlog-max-size"), "5000");
    buf_free(&b);
    server_teardown(&s);
}
END_TEST

/* Errors show as buf->oom: a failure at any allocation while building any
 * document sets the flag. */
START_TEST(oom_sets_flag)
{
    Server s;
    Buf b = {0};

    server_setup(&s);
    Tube *t = s.eng.default_tube;
    Job *j = job_in(&s, t, 1);
    for (int which = 0; which < 3; which++) {
        for (unsigned long n = 1; n < 8; n++) {
            unsigned long failures = alloc_failures();
            buf_free(&b);
            alloc_fail_after(n);
            if (which == 0)
                stats_server(&front, &b);
            else if (which == 1)
                stats_tube(&s.eng, t, &b);
            else
                stats_job(&s.eng, j, &b);
            alloc_fail_after(0);
            ck_assert_int_eq(b.oom, alloc_failures() != failures);
        }
    }
    job_out(&s, j);
    buf_free(&b);
    server_teardown(&s);
}
END_TEST

/* ---- the snapshot (snapshot.h, srvstats.h) ---- */

static int starts_with_a(const void *arg, Tube *t)
{
    (void)arg;
    return t->name[0] == 'a';
}

/* Name order is byte order, a name before its extensions; the one sort
 * serves every listing, with or without a filter. */
START_TEST(tubes_in_name_order)
{
    static const char *const made[] = {"zeta", "a;b", "B", "default2", "a", "ab"};
    static const char *const order[] = {"B", "a", "a;b", "ab", "default", "default2", "zeta"};
    Server s;
    Buf b = {0};
    size_t n;
    Tube **v;

    server_setup(&s);
    for (size_t i = 0; i < sizeof made / sizeof made[0]; i++)
        tube(&s, made[i]);
    v = engine_tubes_sorted(&s.eng, NULL, NULL, &n);
    ck_assert_ptr_nonnull(v);
    ck_assert_uint_eq(n, 7);
    for (size_t i = 0; i < n; i++)
        ck_assert_str_eq(v[i]->name, order[i]);
    tb_free(v);
    v = engine_tubes_sorted(&s.eng, starts_with_a, NULL, &n);
    ck_assert_ptr_nonnull(v);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(v[0]->name, "a");
    ck_assert_str_eq(v[1]->name, "a;b");
    ck_assert_str_eq(v[2]->name, "ab");
    tb_free(v);
    /* stats-tubes lists them in that order */
    stats_tubes(&s, NULL, &b);
    ck_assert_int_eq(b.oom, 0);
    buf_append(&b, "", 1);
    {
        const char *last = b.data;
        for (size_t i = 0; i < 7; i++) {
            char head[32];
            const char *at;
            snprintf(head, sizeof head, "\n\"%s\":\n", order[i]);
            at = strstr(b.data, head);
            ck_assert_msg(at && at > last - 1, "%s out of order", order[i]);
            last = at + 1;
        }
    }
    buf_free(&b);
    /* out of memory: NULL and no tube, or the document's flag */
    alloc_fail_after(1);
    v = engine_tubes_sorted(&s.eng, NULL, NULL, &n);
    alloc_fail_after(0);
    ck_assert_ptr_null(v);
    ck_assert_uint_eq(n, 0);
    alloc_fail_after(1);
    stats_tubes(&s, NULL, &b);
    alloc_fail_after(0);
    ck_assert_int_eq(b.oom, 1);
    buf_free(&b);
    server_teardown(&s);
}
END_TEST

START_TEST(tube_and_engine_figures)
{
    Server s;
    Tube *t, *u;
    TubeStats ts;
    EngineStats es;

    server_setup(&s);
    t = s.eng.default_tube;
    u = tube(&s, "other");
    t->urgent_ct = 2;
    t->reserved_ct = 3;
    t->buried_ct = 4;
    t->cur_bytes = 100;
    t->reserved_bytes = 30;
    t->spilled_ct = 1;
    t->spilled_bytes = 20;
    t->total_expired = 5;
    t->mc.flushes = 6;
    t->pause = 30 * SEC;
    t->unpause_at = s.eng.now + 25 * SEC;
    u->cur_bytes = 7;
    u->reserved_bytes = 7;
    s.eng.jobs_ct = (JobCounts){.ready = 1, .urgent = 1, .reserved = 3, .buried = 4};
    s.eng.total_jobs = 9;
    s.eng.now += 4 * SEC;

    engine_tube_stats(&s.eng, t, &ts);
    ck_assert_str_eq(ts.name, "default");
    ck_assert_uint_eq(ts.name_len, 7);
    ck_assert_uint_eq(ts.urgent, 2);
    ck_assert_uint_eq(ts.reserved, 3);
    ck_assert_uint_eq(ts.buried, 4);
    ck_assert_uint_eq(ts.ready, 0);
    ck_assert_uint_eq(ts.bytes, 100);
    ck_assert_uint_eq(ts.reserved_bytes, 30);
    ck_assert_uint_eq(ts.spilled, 1);
    ck_assert_uint_eq(ts.spilled_bytes, 20);
    ck_assert_uint_eq(ts.total_expired, 5);
    ck_assert_uint_eq(ts.mc.flushes, 6);
    ck_assert_int_eq(ts.pause_ns, 30 * SEC);
    ck_assert_int_eq(ts.pause_left_ns, 21 * SEC);
    s.eng.now += 30 * SEC; /* past the end of the pause: nothing left */
    engine_tube_stats(&s.eng, t, &ts);
    ck_assert_int_eq(ts.pause_left_ns, 0);

    engine_stats(&s.eng, &es);
    ck_assert_uint_eq(es.jobs.reserved, 3);
    ck_assert_uint_eq(es.jobs.buried, 4);
    ck_assert_uint_eq(es.total_jobs, 9);
    ck_assert_uint_eq(es.tubes, 2);
    {
        uint64_t all, reserved;
        engine_body_bytes(&s.eng, &all, &reserved);
        ck_assert_uint_eq(all, 107);
        ck_assert_uint_eq(reserved, 37);
    }
    ck_assert_int_eq(es.uptime_ns, 34 * SEC);
    /* no binlog: disabled, healthy, never synced */
    ck_assert_int_eq(es.binlog.enabled, 0);
    ck_assert_int_eq(es.binlog.healthy, 1);
    ck_assert_int_eq(es.binlog.sync_ago_ns, 0);
    ck_assert_uint_eq(es.binlog.oldest_index, 0);
    server_teardown(&s);
}
END_TEST

/* What the walk of `stats` emits: beanstalkd's keys in its order, each
 * with the kind that decides how YAML and JSON write it. */
typedef struct Seen {
    size_t n;
    char key[80][48];
    StatKind kind[80];
} Seen;

static void record(void *arg, const char *key, StatVal v)
{
    Seen *s = arg;

    ck_assert_uint_lt(s->n, 80);
    snprintf(s->key[s->n], sizeof s->key[0], "%s", key);
    s->kind[s->n++] = v.kind;
}

static StatKind kind_of(const Seen *s, const char *key)
{
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->key[i], key))
            return s->kind[i];
    ck_abort_msg("no key '%s'", key);
    return SK_U64;
}

START_TEST(stats_walk_keys_and_kinds)
{
    Server s;
    ServerStats ss;
    StatsSource src;
    Seen seen = {0};

    server_setup(&s);
    src = bs_stats_source(&front);
    server_stats(&s, &src, &ss);
    stats_doc_server(&ss, record, &seen);
    ck_assert_uint_ge(seen.n, NSERVER_KEYS);
    for (size_t i = 0; i < NSERVER_KEYS; i++)
        ck_assert_str_eq(seen.key[i], server_keys[i]);
    ck_assert_int_eq(kind_of(&seen, "version"), SK_TEXT);
    ck_assert_int_eq(kind_of(&seen, "hostname"), SK_TEXT);
    ck_assert_int_eq(kind_of(&seen, "id"), SK_WORD);
    ck_assert_int_eq(kind_of(&seen, "draining"), SK_BOOL);
    ck_assert_int_eq(kind_of(&seen, "binlog-healthy"), SK_BOOL);
    ck_assert_int_eq(kind_of(&seen, "rusage-utime"), SK_TIME);
    ck_assert_int_eq(kind_of(&seen, "cmd-put"), SK_U64);
    /* the front-end's commands beyond beanstalkd's are metrics only */
    ck_assert_uint_eq(ss.front.ncmds, 30);
    for (size_t i = 0; i < seen.n; i++)
        ck_assert_str_ne(seen.key[i], "cmd-stats-tubes");
    memset(&seen, 0, sizeof seen);
    {
        TubeStats ts;
        engine_tube_stats(&s.eng, s.eng.default_tube, &ts);
        stats_doc_tube(&ts, 0, record, &seen);
        ck_assert_uint_eq(seen.n, sizeof tube_keys / sizeof tube_keys[0]);
        for (size_t i = 0; i < seen.n; i++)
            ck_assert_str_eq(seen.key[i], tube_keys[i]);
        memset(&seen, 0, sizeof seen);
        stats_doc_tube(&ts, 1, record, &seen);
        ck_assert_uint_eq(seen.n, sizeof tube_keys / sizeof tube_keys[0] + 5);
        ck_assert_str_eq(seen.key[seen.n - 1], "oldest-ready-age");
    }
    server_teardown(&s);
}
END_TEST

static Suite *stats_suite(void)
{
    Suite *s = suite_create("stats");
    TCase *tc = unit_tcase("documents");

    tcase_add_test(tc, tube_document);
    tcase_add_test(tc, tube_document_other_name);
    tcase_add_test(tc, job_document);
    tcase_add_test(tc, list_tubes);
    tcase_add_test(tc, list_watched);
    tcase_add_test(tc, server_document);
    tcase_add_test(tc, server_document_binlog);
    tcase_add_test(tc, oom_sets_flag);
    tcase_add_test(tc, tubes_in_name_order);
    tcase_add_test(tc, tube_and_engine_figures);
    tcase_add_test(tc, stats_walk_keys_and_kinds);
    suite_add_tcase(s, tc);
    return s;
}

UNIT_MAIN(stats_suite)
