#include "stats.h"

#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "clock.h"
#include "reserve.h"

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

static const char *const cmd_keys[] = {
    /* beanstalkd's order of the cmd-* keys, with the command each counts */
    "cmd-put", "cmd-peek", "cmd-peek-ready", "cmd-peek-delayed",
    "cmd-peek-buried", "cmd-reserve", "cmd-reserve-with-timeout",
    "cmd-delete", "cmd-release", "cmd-use", "cmd-watch", "cmd-ignore",
    "cmd-bury", "cmd-kick", "cmd-touch", "cmd-stats", "cmd-stats-job",
    "cmd-stats-tube", "cmd-list-tubes", "cmd-list-tube-used",
    "cmd-list-tubes-watched", "cmd-pause-tube",
};

static const CmdType cmd_order[] = {
    CMD_PUT, CMD_PEEK, CMD_PEEK_READY, CMD_PEEK_DELAYED, CMD_PEEK_BURIED,
    CMD_RESERVE, CMD_RESERVE_TIMEOUT, CMD_DELETE, CMD_RELEASE, CMD_USE,
    CMD_WATCH, CMD_IGNORE, CMD_BURY, CMD_KICK, CMD_TOUCH, CMD_STATS,
    CMD_STATS_JOB, CMD_STATS_TUBE, CMD_LIST_TUBES, CMD_LIST_TUBE_USED,
    CMD_LIST_TUBES_WATCHED, CMD_PAUSE_TUBE,
};

static long long secs(int64_t ns)
{
    return (long long)(ns / NS_PER_SEC);
}

void stats_server(const Server *s, Buf *b)
{
    struct rusage ru;
    struct utsname u;
    const JobCounts *jc = &s->jobs_ct;
    const Binlog *bl = &s->binlog;

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
    for (size_t i = 0; i < sizeof cmd_order / sizeof cmd_order[0]; i++)
        buf_printf(b, "%s: %llu\n", cmd_keys[i],
                   (unsigned long long)s->cmd_ct[cmd_order[i]]);
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
               (unsigned long long)s->job_timeouts,
               (unsigned long long)s->total_jobs, s->cfg.max_job_size,
               s->tubes.len, (unsigned long long)s->conn_ct,
               (unsigned long long)s->producer_ct,
               (unsigned long long)s->worker_ct,
               (unsigned long long)s->waiting_ct,
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
               secs(s->now - s->started),
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
               (unsigned long long)s->job_bytes,
               (unsigned long long)s->cfg.job_memory);
}

void stats_tube(const Server *s, const Tube *t, Buf *b)
{
    int64_t left = tube_paused(t) ? t->unpause_at - s->now : 0;

    buf_printf(b, "---\nname: ");
    quoted(b, t->name);
    buf_printf(b, "current-jobs-urgent: %llu\n"
               "current-jobs-ready: %zu\n"
               "current-jobs-reserved: %llu\n"
               "current-jobs-delayed: %zu\n"
               "current-jobs-buried: %llu\n"
               "total-jobs: %llu\n"
               "current-using: %u\n"
               "current-watching: %u\n"
               "current-waiting: %u\n"
               "cmd-delete: %llu\n"
               "cmd-pause-tube: %llu\n"
               "pause: %lld\n"
               "pause-time-left: %lld\n",
               (unsigned long long)t->urgent_ct, t->ready.len,
               (unsigned long long)t->reserved_ct, t->delay.len,
               (unsigned long long)t->buried_ct,
               (unsigned long long)t->total_jobs, t->using_ct, t->watching_ct,
               reserve_tube_waiting(s, t), (unsigned long long)t->cmd_delete,
               (unsigned long long)t->cmd_pause, secs(t->pause),
               secs(left > 0 ? left : 0));
}

void stats_job(const Server *s, const Job *j, Buf *b)
{
    const JobExt *e = job_ext_view(j);
    int64_t left = 0;

    if (j->state == JOB_RESERVED || j->state == JOB_DELAYED)
        left = e->deadline - s->now;
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
               secs(s->now - j->created), e->delay, j->ttr,
               secs(left > 0 ? left : 0), j->file, e->reserves, e->timeouts,
               e->releases, e->buries, e->kicks);
}

void stats_list_tubes(const Server *s, Buf *b)
{
    buf_append(b, "---\n", 4);
    for (size_t i = 0; i < s->tubes.len; i++)
        buf_printf(b, "- %s\n", s->tubes.list[i]->name);
}

void stats_list_watched(const Conn *c, Buf *b)
{
    buf_append(b, "---\n", 4);
    for (uint32_t i = 0; i < c->nwatch; i++)
        buf_printf(b, "- %s\n", c->watch[i].tube->name);
}
