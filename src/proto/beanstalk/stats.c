#include "stats.h"

#include <stdio.h>
#include <string.h>

#include "access.h"
#include "alloc.h"
#include "clock.h"
#include "engine.h"
#include "utf8.h"

/* A YAML double-quoted scalar. Most values are ours, but some carry text
 * from outside (a binlog directory's path, a peer's answer): YAML is
 * Unicode, and one byte that is not UTF-8, or a raw control, makes strict
 * readers (Psych, PyYAML) refuse the whole reply, so each such byte is
 * written as '?'. */
static void quoted(Buf *b, const char *s)
{
    size_t n = strlen(s), k;

    buf_append(b, "\"", 1);
    for (; n; s += k, n -= k) {
        unsigned char c = (unsigned char)*s;

        k = c < 0x80 ? 1 : utf8_seq(s, n);
        if (k == 0 || c < ' ' || c == 127 || utf8_c1(s, k)) {
            buf_append(b, "?", 1);
            k = 1;
            continue;
        }
        if (c == '"' || c == '\\')
            buf_append(b, "\\", 1);
        buf_append(b, s, k);
    }
    buf_append(b, "\"\n", 2);
}

static void key_quoted(Buf *b, const char *key, const char *val)
{
    buf_printf(b, "%s: ", key);
    quoted(b, val);
}

/* The commands this front-end counts, in the documented order: beanstalkd's
 * 22 (its `stats` keys cmd-NAME, in its order), then tubed's own (metrics
 * only). One table, so a name and the counter it reads cannot drift apart. */
static const struct {
    const char *name;
    CmdType cmd;
    uint8_t in_stats;
} counted[] = {
    {"put", CMD_PUT, 1},
    {"peek", CMD_PEEK, 1},
    {"peek-ready", CMD_PEEK_READY, 1},
    {"peek-delayed", CMD_PEEK_DELAYED, 1},
    {"peek-buried", CMD_PEEK_BURIED, 1},
    {"reserve", CMD_RESERVE, 1},
    {"reserve-with-timeout", CMD_RESERVE_TIMEOUT, 1},
    {"delete", CMD_DELETE, 1},
    {"release", CMD_RELEASE, 1},
    {"use", CMD_USE, 1},
    {"watch", CMD_WATCH, 1},
    {"ignore", CMD_IGNORE, 1},
    {"bury", CMD_BURY, 1},
    {"kick", CMD_KICK, 1},
    {"touch", CMD_TOUCH, 1},
    {"stats", CMD_STATS, 1},
    {"stats-job", CMD_STATS_JOB, 1},
    {"stats-tube", CMD_STATS_TUBE, 1},
    {"list-tubes", CMD_LIST_TUBES, 1},
    {"list-tube-used", CMD_LIST_TUBE_USED, 1},
    {"list-tubes-watched", CMD_LIST_TUBES_WATCHED, 1},
    {"pause-tube", CMD_PAUSE_TUBE, 1},
    {"reserve-job", CMD_RESERVE_JOB, 0},
    {"kick-job", CMD_KICK_JOB, 0},
    {"flush-tube", CMD_FLUSH_TUBE, 0},
    {"stats-tubes", CMD_STATS_TUBES, 0},
    {"list-jobs", CMD_LIST_JOBS, 0},
    {"move-job", CMD_MOVE_JOB, 0},
    {"stats-binlog", CMD_STATS_BINLOG, 0},
    {"stats-listeners", CMD_STATS_LISTENERS, 0},
};

_Static_assert(sizeof counted / sizeof counted[0] <= FRONT_MAX_COUNTS,
               "FrontStats has room for every counted command");

static void front_stats(const void *front, FrontStats *out)
{
    const Beanstalk *f = front;

    out->ncmds = sizeof counted / sizeof counted[0];
    for (size_t i = 0; i < out->ncmds; i++)
        out->cmds[i] = (StatCount){counted[i].name, f->cmd_ct[counted[i].cmd],
                                   counted[i].in_stats};
    out->producers = f->producer_ct;
    out->workers = f->worker_ct;
}

StatsSource bs_stats_source(const Beanstalk *f)
{
    return (StatsSource){front_stats, f};
}

static long long secs(int64_t ns)
{
    return (long long)(ns / NS_PER_SEC);
}

/* One "key: value" line of a document, after `indent`. */
typedef struct Yaml {
    Buf *b;
    const char *indent;
} Yaml;

static void yaml_line(void *arg, const char *key, StatVal v)
{
    Yaml *y = arg;

    buf_printf(y->b, "%s%s: ", y->indent, key);
    switch (v.kind) {
    case SK_U64: buf_printf(y->b, "%llu\n", (unsigned long long)v.v.u); break;
    case SK_I64: buf_printf(y->b, "%lld\n", (long long)v.v.i); break;
    case SK_BOOL: buf_printf(y->b, "%s\n", v.v.u ? "true" : "false"); break;
    case SK_TEXT: quoted(y->b, v.v.s); break;
    case SK_WORD: buf_printf(y->b, "%s\n", v.v.s); break;
    case SK_TIME:
        buf_printf(y->b, "%ld.%06ld\n", (long)v.v.tv.tv_sec, (long)v.v.tv.tv_usec);
        break;
    }
}

void stats_server(const Beanstalk *f, Buf *b)
{
    StatsSource src = bs_stats_source(f);
    ServerStats ss;
    Yaml y = {b, ""};

    server_stats(f->srv, &src, &ss);
    buf_append(b, "---\n", 4);
    stats_doc_server(&ss, yaml_line, &y);
}

void stats_replication(Server *s, Buf *b)
{
    Yaml y = {b, ""};

    buf_append(b, "---\n", 4);
    stats_doc_replication(s, yaml_line, &y);
}

void stats_tube(const Engine *e, const Tube *t, Buf *b)
{
    TubeStats ts;
    Yaml y = {b, ""};

    engine_tube_stats(e, t, &ts);
    buf_append(b, "---\n", 4);
    stats_doc_tube(&ts, 0, yaml_line, &y);
}

void stats_tubes(const Server *s, const Listener *l, Buf *b)
{
    size_t n;
    Tube **v = srvstats_tubes(s, l, &n);
    Yaml y = {b, "  "};

    if (!v) {
        b->oom = 1;
        return;
    }
    buf_append(b, "---\n", 4);
    for (size_t i = 0; i < n; i++) {
        TubeStats ts;

        engine_tube_stats(&s->eng, v[i], &ts);
        buf_printf(b, "\"%s\":\n", ts.name);
        stats_doc_tube(&ts, 1, yaml_line, &y);
    }
    tb_free(v);
}

static const char *fsync_mode(const Config *cfg, char *buf, size_t n)
{
    if (cfg->fsync_never)
        return "never";
    if (cfg->fsync_ms == 0)
        return "strict";
    snprintf(buf, n, "every-%llums", (unsigned long long)cfg->fsync_ms);
    return buf;
}

/* The job whose record keeps the oldest binlog file, if l may see it. */
static uint64_t pinning_job(Server *s, const Listener *l)
{
    uint64_t id = engine_pinning_job(&s->eng);
    Job *j;

    if (!id || !l || !l->restricted)
        return id;
    j = engine_find(&s->eng, id);
    return j && access_tube(l, j->tube) ? id : 0;
}

void stats_binlog(Server *s, const Listener *l, Buf *b)
{
    EngineStats es;
    char mode[48];
    int64_t ago;
    uint64_t pin = pinning_job(s, l);

    engine_stats(&s->eng, &es);
    ago = es.binlog.sync_ago_ns / NS_PER_MSEC;
    buf_printf(b, "---\nenabled: %s\nhealthy: %s\n", es.binlog.enabled ? "true" : "false",
               es.binlog.healthy ? "true" : "false");
    key_quoted(b, "last-error", es.binlog.last_error);
    buf_printf(b, "files: %zu\n"
               "bytes-on-disk: %llu\n"
               "live-bytes: %llu\n"
               "oldest-file: %u\n"
               "oldest-file-pinned-by: %llu\n"
               "records-written: %llu\n"
               "records-migrated: %llu\n"
               "compactions: %llu\n",
               es.binlog.files, (unsigned long long)es.binlog.disk_bytes,
               (unsigned long long)es.binlog.live_bytes, es.binlog.oldest_index,
               (unsigned long long)pin,
               (unsigned long long)es.binlog.records_written,
               (unsigned long long)es.binlog.records_migrated,
               (unsigned long long)es.binlog.compactions);
    key_quoted(b, "fsync-mode", fsync_mode(&s->cfg, mode, sizeof mode));
    buf_printf(b, "last-fsync-ms-ago: %lld\n"
               "spilled-jobs: %llu\n"
               "spilled-bytes: %llu\n",
               (long long)(ago > 0 ? ago : 0), (unsigned long long)es.spill.jobs,
               (unsigned long long)es.spill.bytes);
}

void stats_job(const Engine *e, const Job *j, Buf *b)
{
    const JobExt *x = job_ext_view(j);
    int64_t now = engine_now(e), left = 0;

    if (j->state == JOB_RESERVED || j->state == JOB_DELAYED)
        left = x->deadline - now;
    /* A memcache open has no deadline (doc/kestrel.md): the largest TTR
     * a beanstalk job can have, rather than a figure past 32 bits, which
     * no beanstalkd job shows and which falls with the clock. (Given back
     * by /abort or a close, the job keeps that deadline while ready.) */
    if (j->state == JOB_RESERVED && x->deadline == INT64_MAX)
        left = (int64_t)UINT32_MAX * NS_PER_SEC + 1;
    buf_printf(b, "---\nid: %llu\ntube: ", (unsigned long long)j->id);
    quoted(b, j->tube->name);
    buf_printf(b, "state: %s\n"
               "pri: %u\n"
               "age: %lld\n"
               "delay: %u\n"
               "ttr: %u\n"
               "time-left: %lld\n"
               "file: %u\n"
               "reserves: %u\n"
               "timeouts: %u\n"
               "releases: %u\n"
               "buries: %u\n"
               "kicks: %u\n",
               job_state_name((JobState)j->state), j->pri,
               secs(now - job_created(j)), x->delay, j->ttr,
               (long long)clock_secs_left(left), j->file, x->reserves, x->timeouts,
               x->releases, x->buries, x->kicks);
}

/* An empty list is "--- []": YAML loaders read a bare "---" as null, which
 * a client then fails to iterate (beaneater does). Only a restricted
 * listener's lists can be empty: default always exists, and a watch list
 * is never emptied by ignore. */
static const char EMPTY_LIST[] = "--- []\n";

void stats_list_tubes(const Engine *e, const Listener *l, Buf *b)
{
    Tube *const *list = engine_tube_list(e);
    size_t n = 0;

    for (size_t i = 0; i < engine_tube_count(e); i++)
        if (access_tube(l, list[i]))
            buf_printf(b, "%s- %s\n", n++ ? "" : "---\n", list[i]->name);
    if (!n)
        buf_append(b, EMPTY_LIST, sizeof EMPTY_LIST - 1);
}

void stats_list_watched(const Worker *w, Buf *b)
{
    if (!w->nwatch) {
        buf_append(b, EMPTY_LIST, sizeof EMPTY_LIST - 1);
        return;
    }
    buf_append(b, "---\n", 4);
    for (uint32_t i = 0; i < w->nwatch; i++)
        buf_printf(b, "- %s\n", w->watch[i].tube->name);
}

void stats_listeners(const Server *s, const Listener *me, Buf *b)
{
    char roles[64], tubes[LISTEN_MAX_PATTERNS * (MAX_TUBE_NAME + 2) + 2];
    ListenerStats ls[SERVER_MAX_LISTENERS];
    int n = listener_stats(s, ls);

    buf_append(b, "---\n", 4);
    for (int i = 0; i < n; i++) {
        const ListenerStats *l = &ls[i];

        /* Other listeners' tubes name tubes a restricted one may not see. */
        if (me && me->restricted && i != me->index)
            continue;

        buf_printf(b, "- name: \"%s\"\n"
                   "  address: \"%s\"\n"
                   "  protocol: %s\n"
                   "  role: \"%s\"\n"
                   "  tubes: \"%s\"\n"
                   "  current-connections: %llu\n"
                   "  total-connections: %llu\n"
                   "  refused-commands: %llu\n"
                   "  refused-peers: %llu\n",
                   l->name, l->address, l->protocol,
                   conf_role_text(l->roles, roles, sizeof roles),
                   conf_tubes_text(l->conf, tubes, sizeof tubes),
                   (unsigned long long)l->conns, (unsigned long long)l->total_conns,
                   (unsigned long long)l->refused_cmds, (unsigned long long)l->refused_peers);
    }
}
