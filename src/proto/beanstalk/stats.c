#include "stats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "access.h"
#include "clock.h"
#include "engine.h"

/* A YAML double-quoted scalar: only '"' and '\' need escaping in the
 * values we print (tube names cannot hold either). */
static void quoted(Buf *b, const char *s)
{
    buf_append(b, "\"", 1);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            buf_append(b, "\\", 1);
        buf_append(b, s, 1);
    }
    buf_append(b, "\"\n", 2);
}

static void key_quoted(Buf *b, const char *key, const char *val)
{
    buf_printf(b, "%s: ", key);
    quoted(b, val);
}

/* beanstalkd's cmd-* keys in its order, each with the command it counts:
 * one table, so a key and its command cannot drift apart. */
static const struct {
    const char *key;
    CmdType cmd;
} cmd_keys[] = {
    {"cmd-put", CMD_PUT},
    {"cmd-peek", CMD_PEEK},
    {"cmd-peek-ready", CMD_PEEK_READY},
    {"cmd-peek-delayed", CMD_PEEK_DELAYED},
    {"cmd-peek-buried", CMD_PEEK_BURIED},
    {"cmd-reserve", CMD_RESERVE},
    {"cmd-reserve-with-timeout", CMD_RESERVE_TIMEOUT},
    {"cmd-delete", CMD_DELETE},
    {"cmd-release", CMD_RELEASE},
    {"cmd-use", CMD_USE},
    {"cmd-watch", CMD_WATCH},
    {"cmd-ignore", CMD_IGNORE},
    {"cmd-bury", CMD_BURY},
    {"cmd-kick", CMD_KICK},
    {"cmd-touch", CMD_TOUCH},
    {"cmd-stats", CMD_STATS},
    {"cmd-stats-job", CMD_STATS_JOB},
    {"cmd-stats-tube", CMD_STATS_TUBE},
    {"cmd-list-tubes", CMD_LIST_TUBES},
    {"cmd-list-tube-used", CMD_LIST_TUBE_USED},
    {"cmd-list-tubes-watched", CMD_LIST_TUBES_WATCHED},
    {"cmd-pause-tube", CMD_PAUSE_TUBE},
};

static long long secs(int64_t ns)
{
    return (long long)(ns / NS_PER_SEC);
}

void stats_server(const Beanstalk *f, Buf *b)
{
    const Server *s = f->srv;
    const Engine *e = &s->eng;
    struct rusage ru;
    struct utsname u;
    const JobCounts *jc = &e->jobs_ct;
    const Binlog *bl = &e->binlog;

    getrusage(RUSAGE_SELF, &ru);
    if (uname(&u) < 0)
        u = (struct utsname){0};
    buf_printf(b, "---\n"
               "current-jobs-urgent: %llu\n"
               "current-jobs-ready: %llu\n"
               "current-jobs-reserved: %llu\n"
               "current-jobs-delayed: %llu\n"
               "current-jobs-buried: %llu\n",
               (unsigned long long)jc->urgent, (unsigned long long)jc->ready,
               (unsigned long long)jc->reserved, (unsigned long long)jc->delayed,
               (unsigned long long)jc->buried);
    for (size_t i = 0; i < sizeof cmd_keys / sizeof cmd_keys[0]; i++)
        buf_printf(b, "%s: %llu\n", cmd_keys[i].key,
                   (unsigned long long)f->cmd_ct[cmd_keys[i].cmd]);
    buf_printf(b, "job-timeouts: %llu\n"
               "total-jobs: %llu\n"
               "max-job-size: %u\n"
               "current-tubes: %zu\n"
               "current-connections: %llu\n"
               "current-producers: %llu\n"
               "current-workers: %llu\n"
               "current-waiting: %llu\n"
               "total-connections: %llu\n"
               "pid: %ld\n",
               (unsigned long long)e->job_timeouts,
               (unsigned long long)e->total_jobs, s->cfg.max_job_size,
               e->tubes.len, (unsigned long long)s->conn_ct,
               (unsigned long long)f->producer_ct,
               (unsigned long long)f->worker_ct,
               (unsigned long long)e->waiting_ct,
               (unsigned long long)s->total_conns, (long)getpid());
    key_quoted(b, "version", TUBED_VERSION);
    buf_printf(b, "rusage-utime: %ld.%06ld\n"
               "rusage-stime: %ld.%06ld\n"
               "uptime: %lld\n"
               "binlog-oldest-index: %u\n"
               "binlog-current-index: %u\n"
               "binlog-records-migrated: %llu\n"
               "binlog-records-written: %llu\n"
               "binlog-max-size: %llu\n"
               "draining: %s\n"
               "id: %s\n",
               (long)ru.ru_utime.tv_sec, (long)ru.ru_utime.tv_usec,
               (long)ru.ru_stime.tv_sec, (long)ru.ru_stime.tv_usec,
               secs(e->now - e->started),
               bl->nfiles ? bl->files[0].index : 0,
               bl->nfiles ? bl->files[bl->nfiles - 1].index : 0,
               (unsigned long long)bl->records_migrated,
               (unsigned long long)bl->records_written,
               (unsigned long long)(bl->enabled ? bl->file_size : s->cfg.binlog_size),
               s->draining ? "true" : "false", s->instance_id);
    key_quoted(b, "hostname", u.nodename);
    key_quoted(b, "os", u.version);
    key_quoted(b, "platform", u.machine);
    /* tubed's own keys, after all of beanstalkd's */
    buf_printf(b, "binlog-bytes: %llu\n"
               "binlog-live-bytes: %llu\n"
               "binlog-healthy: %s\n"
               "job-memory: %llu\n"
               "job-memory-limit: %llu\n",
               (unsigned long long)bl->disk_bytes,
               (unsigned long long)bl->live_bytes,
               !bl->enabled || bl->healthy ? "true" : "false",
               (unsigned long long)e->job_bytes,
               (unsigned long long)s->cfg.job_memory);
}

/* The keys and values of stats-tube, each line after `indent`. */
static void tube_lines(const Engine *e, const Tube *t, Buf *b, const char *indent)
{
    int64_t left = tube_paused(t) ? t->unpause_at - e->now : 0;

    buf_printf(b, "%sname: ", indent);
    quoted(b, t->name);
    buf_printf(b, "%scurrent-jobs-urgent: %llu\n"
               "%scurrent-jobs-ready: %zu\n"
               "%scurrent-jobs-reserved: %llu\n"
               "%scurrent-jobs-delayed: %zu\n"
               "%scurrent-jobs-buried: %llu\n"
               "%stotal-jobs: %llu\n"
               "%scurrent-using: %u\n"
               "%scurrent-watching: %u\n"
               "%scurrent-waiting: %u\n"
               "%scmd-delete: %llu\n"
               "%scmd-pause-tube: %llu\n"
               "%spause: %lld\n"
               "%spause-time-left: %lld\n",
               indent, (unsigned long long)t->urgent_ct, indent, t->ready.len,
               indent, (unsigned long long)t->reserved_ct, indent, t->delay.len,
               indent, (unsigned long long)t->buried_ct,
               indent, (unsigned long long)t->total_jobs, indent, t->using_ct,
               indent, t->watching_ct, indent, engine_tube_waiting(e, t),
               indent, (unsigned long long)t->cmd_delete,
               indent, (unsigned long long)t->cmd_pause, indent, secs(t->pause),
               indent, secs(left > 0 ? left : 0));
}

void stats_tube(const Engine *e, const Tube *t, Buf *b)
{
    buf_append(b, "---\n", 4);
    tube_lines(e, t, b, "");
}

static int by_name(const void *a, const void *b)
{
    const Tube *x = *(const Tube *const *)a, *y = *(const Tube *const *)b;
    int c = memcmp(x->name, y->name, x->name_len < y->name_len ? x->name_len : y->name_len);

    return c ? c : (int)x->name_len - (int)y->name_len;
}

void stats_tubes(const Engine *e, const Listener *l, Buf *b)
{
    size_t n = e->tubes.len;
    const Tube **v = malloc((n + 1) * sizeof *v);

    if (!v) {
        b->oom = 1;
        return;
    }
    n = access_filter(l, (Tube **)v, e->tubes.list, n);
    qsort(v, n, sizeof *v, by_name);
    buf_append(b, "---\n", 4);
    for (size_t i = 0; i < n; i++) {
        const Tube *t = v[i];
        buf_printf(b, "\"%s\":\n", t->name);
        tube_lines(e, t, b, "  ");
        buf_printf(b, "  current-bytes: %llu\n"
                   "  total-expired: %llu\n"
                   "  total-discarded: %llu\n"
                   "  total-timeouts: %llu\n"
                   "  oldest-ready-age: %llu\n",
                   (unsigned long long)t->cur_bytes, (unsigned long long)t->total_expired,
                   (unsigned long long)t->total_discarded,
                   (unsigned long long)t->total_timeouts,
                   (unsigned long long)engine_oldest_ready_age(e, t));
    }
    free(v);
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

void stats_binlog(const Engine *e, Buf *b)
{
    const Binlog *bl = &e->binlog;
    char mode[48];
    int64_t ago = bl->enabled ? (e->now - bl->last_sync) / NS_PER_MSEC : 0;

    buf_printf(b, "---\nenabled: %s\nhealthy: %s\n", bl->enabled ? "true" : "false",
               !bl->enabled || bl->healthy ? "true" : "false");
    key_quoted(b, "last-error", bl->last_error);
    buf_printf(b, "files: %zu\n"
               "bytes-on-disk: %llu\n"
               "live-bytes: %llu\n"
               "oldest-file: %u\n"
               "oldest-file-pinned-by: %llu\n"
               "records-written: %llu\n"
               "records-migrated: %llu\n"
               "compactions: %llu\n",
               bl->nfiles + bl->nspares, (unsigned long long)bl->disk_bytes,
               (unsigned long long)bl->live_bytes, bl->nfiles ? bl->files[0].index : 0,
               (unsigned long long)engine_pinning_job(e),
               (unsigned long long)bl->records_written,
               (unsigned long long)bl->records_migrated,
               (unsigned long long)bl->compactions);
    key_quoted(b, "fsync-mode", fsync_mode(e->cfg, mode, sizeof mode));
    buf_printf(b, "last-fsync-ms-ago: %lld\n"
               "spilled-jobs: %llu\n"
               "spilled-bytes: %llu\n",
               (long long)(ago > 0 ? ago : 0), (unsigned long long)e->spill.jobs,
               (unsigned long long)e->spill.bytes);
}

void stats_job(const Engine *e, const Job *j, Buf *b)
{
    const JobExt *x = job_ext_view(j);
    int64_t left = 0;

    if (j->state == JOB_RESERVED || j->state == JOB_DELAYED)
        left = x->deadline - e->now;
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
               secs(e->now - job_created(j)), x->delay, j->ttr,
               secs(left > 0 ? left : 0), j->file, x->reserves, x->timeouts,
               x->releases, x->buries, x->kicks);
}

/* An empty list is "--- []": YAML loaders read a bare "---" as null, which
 * a client then fails to iterate (beaneater does). Only a restricted
 * listener's lists can be empty: default always exists, and a watch list
 * is never emptied by ignore. */
static const char EMPTY_LIST[] = "--- []\n";

void stats_list_tubes(const Engine *e, const Listener *l, Buf *b)
{
    size_t n = 0;

    for (size_t i = 0; i < e->tubes.len; i++)
        if (access_tube(l, e->tubes.list[i]))
            buf_printf(b, "%s- %s\n", n++ ? "" : "---\n", e->tubes.list[i]->name);
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

void stats_listeners(const Server *s, Buf *b)
{
    char roles[64], tubes[LISTEN_MAX_PATTERNS * (MAX_TUBE_NAME + 2) + 2];

    buf_append(b, "---\n", 4);
    for (int i = 0; i < s->nlisteners; i++) {
        const Listener *l = &s->listeners[i];
        const char *proto = l->conf ? conf_proto_name(l->conf->protocol) : l->proto->name;

        buf_printf(b, "- name: \"%s\"\n"
                   "  address: \"%s\"\n"
                   "  protocol: %s\n"
                   "  role: \"%s\"\n"
                   "  tubes: \"%s\"\n"
                   "  current-connections: %llu\n"
                   "  total-connections: %llu\n"
                   "  refused-commands: %llu\n"
                   "  refused-peers: %llu\n",
                   l->name, l->conf ? l->conf->address : l->address, proto,
                   conf_role_text(l->roles, roles, sizeof roles),
                   conf_tubes_text(l->conf, tubes, sizeof tubes),
                   (unsigned long long)l->cur_conns, (unsigned long long)l->total_conns,
                   (unsigned long long)l->refused_cmds, (unsigned long long)l->refused_peers);
    }
}
