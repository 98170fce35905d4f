#include "srvstats.h"

#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "access.h"
#include "clock.h"
#include "conflisten.h"
#include "conn.h"
#include "repl.h"

/* Replication is in use: a replica, positions journaled, or
 * sync_replicas. */
static int repl_shown(const Server *s, const EngineStats *es)
{
    return s->repl && (es->binlog.positions || repl_is_replica(s) || s->cfg.sync_replicas);
}

void server_stats(const Server *s, const StatsSource *src, ServerStats *out)
{
    struct rusage ru;

    memset(out, 0, sizeof *out);
    engine_stats(&s->eng, &out->engine);
    if (src && src->fill)
        src->fill(src->front, &out->front);
    out->conns = s->conn_ct;
    out->total_conns = s->total_conns;
    out->out_unread = s->out_unread;
    out->out_refused = s->out_refused;
    out->draining = s->draining != 0;
    out->repl_shown = repl_shown(s, &out->engine);
    out->max_job_size = s->cfg.max_job_size;
    out->job_memory_limit = s->cfg.job_memory;
    out->binlog_max_size = out->engine.binlog.enabled ? out->engine.binlog.file_size
                                                   : s->cfg.binlog_size;
    out->instance_id = s->instance_id;
    out->pid = (long)getpid();
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        out->utime = ru.ru_utime;
        out->stime = ru.ru_stime;
    }
    if (uname(&out->uts) < 0)
        memset(&out->uts, 0, sizeof out->uts);
}

/* The protocol as a [listen] section spells it: the --metrics-port
 * listener's front-end is named "metrics" (its log and socket name), but
 * it speaks "http" (spec/access.md section 5). */
static const char *proto_text(const Listener *l)
{
    if (l->conf)
        return conf_proto_name(l->conf->protocol);
    return strcmp(l->proto->name, "metrics") ? l->proto->name : "http";
}

int listener_stats(const Server *s, ListenerStats *out)
{
    for (int i = 0; i < s->nlisteners; i++) {
        const Listener *l = &s->listeners[i];

        out[i] = (ListenerStats){
            .name = l->name,
            .address = l->conf ? l->conf->address : l->address,
            .protocol = proto_text(l),
            .roles = l->roles,
            .conf = l->conf,
            .conns = l->cur_conns,
            .total_conns = l->total_conns,
            .refused_cmds = l->refused_cmds,
            .refused_peers = l->refused_peers,
        };
    }
    return s->nlisteners;
}

static int may_touch(const void *l, Tube *t)
{
    return access_tube(l, t);
}

Tube **srvstats_tubes(const Server *s, const Listener *l, size_t *n)
{
    return engine_tubes_sorted(&s->eng, l ? may_touch : NULL, l, n);
}

/* ---- the shared key lists ---------------------------------------------- */

static void u64(StatEmit emit, void *arg, const char *key, uint64_t v)
{
    emit(arg, key, (StatVal){.kind = SK_U64, .v.u = v});
}

static void i64(StatEmit emit, void *arg, const char *key, int64_t v)
{
    emit(arg, key, (StatVal){.kind = SK_I64, .v.i = v});
}

static void str(StatEmit emit, void *arg, const char *key, StatKind kind, const char *v)
{
    emit(arg, key, (StatVal){.kind = kind, .v.s = v});
}

static void boolean(StatEmit emit, void *arg, const char *key, int v)
{
    emit(arg, key, (StatVal){.kind = SK_BOOL, .v.u = v != 0});
}

static void cpu(StatEmit emit, void *arg, const char *key, struct timeval tv)
{
    emit(arg, key, (StatVal){.kind = SK_TIME, .v.tv = tv});
}

static int64_t secs(int64_t ns)
{
    return ns / NS_PER_SEC;
}

void stats_doc_server(const ServerStats *ss, StatEmit emit, void *arg)
{
    const EngineStats *e = &ss->engine;
    char key[64];

    u64(emit, arg, "current-jobs-urgent", e->jobs.urgent);
    u64(emit, arg, "current-jobs-ready", e->jobs.ready);
    u64(emit, arg, "current-jobs-reserved", e->jobs.reserved);
    u64(emit, arg, "current-jobs-delayed", e->jobs.delayed);
    u64(emit, arg, "current-jobs-buried", e->jobs.buried);
    for (size_t i = 0; i < ss->front.ncmds; i++) {
        if (!ss->front.cmds[i].in_stats)
            continue;
        snprintf(key, sizeof key, "cmd-%s", ss->front.cmds[i].name);
        u64(emit, arg, key, ss->front.cmds[i].value);
    }
    u64(emit, arg, "job-timeouts", e->job_timeouts);
    u64(emit, arg, "total-jobs", e->total_jobs);
    u64(emit, arg, "max-job-size", ss->max_job_size);
    u64(emit, arg, "current-tubes", e->tubes);
    u64(emit, arg, "current-connections", ss->conns);
    u64(emit, arg, "current-producers", ss->front.producers);
    u64(emit, arg, "current-workers", ss->front.workers);
    u64(emit, arg, "current-waiting", e->waiting);
    u64(emit, arg, "total-connections", ss->total_conns);
    i64(emit, arg, "pid", ss->pid);
    str(emit, arg, "version", SK_TEXT, TUBED_VERSION);
    cpu(emit, arg, "rusage-utime", ss->utime);
    cpu(emit, arg, "rusage-stime", ss->stime);
    i64(emit, arg, "uptime", secs(e->uptime_ns));
    u64(emit, arg, "binlog-oldest-index", e->binlog.oldest_index);
    u64(emit, arg, "binlog-current-index", e->binlog.current_index);
    u64(emit, arg, "binlog-records-migrated", e->binlog.records_migrated);
    u64(emit, arg, "binlog-records-written", e->binlog.records_written);
    u64(emit, arg, "binlog-max-size", ss->binlog_max_size);
    boolean(emit, arg, "draining", ss->draining);
    str(emit, arg, "id", SK_WORD, ss->instance_id);
    str(emit, arg, "hostname", SK_TEXT, ss->uts.nodename);
    str(emit, arg, "os", SK_TEXT, ss->uts.version);
    str(emit, arg, "platform", SK_TEXT, ss->uts.machine);
    /* tubed's own keys, after all of beanstalkd's */
    u64(emit, arg, "binlog-bytes", e->binlog.disk_bytes);
    u64(emit, arg, "binlog-live-bytes", e->binlog.live_bytes);
    boolean(emit, arg, "binlog-healthy", e->binlog.healthy);
    u64(emit, arg, "job-memory", e->job_bytes);
    u64(emit, arg, "job-memory-limit", ss->job_memory_limit);
}

void stats_doc_tube(const TubeStats *t, int ext, StatEmit emit, void *arg)
{
    str(emit, arg, "name", SK_TEXT, t->name);
    u64(emit, arg, "current-jobs-urgent", t->urgent);
    u64(emit, arg, "current-jobs-ready", t->ready);
    u64(emit, arg, "current-jobs-reserved", t->reserved);
    u64(emit, arg, "current-jobs-delayed", t->delayed);
    u64(emit, arg, "current-jobs-buried", t->buried);
    u64(emit, arg, "total-jobs", t->total_jobs);
    u64(emit, arg, "current-using", t->using);
    u64(emit, arg, "current-watching", t->watching);
    u64(emit, arg, "current-waiting", t->waiting);
    u64(emit, arg, "cmd-delete", t->cmd_delete);
    u64(emit, arg, "cmd-pause-tube", t->cmd_pause);
    i64(emit, arg, "pause", secs(t->pause_ns));
    i64(emit, arg, "pause-time-left", clock_secs_left(t->pause_left_ns));
    if (!ext)
        return;
    u64(emit, arg, "current-bytes", t->bytes);
    u64(emit, arg, "total-expired", t->total_expired);
    u64(emit, arg, "total-discarded", t->total_discarded);
    u64(emit, arg, "total-timeouts", t->total_timeouts);
    u64(emit, arg, "oldest-ready-age", t->oldest_ready_age);
}

/* ---- stats-replication -------------------------------------------------- */

/* s without control bytes, cut to fit out (the address and last error may
 * come from a peer). */
static const char *printable(const char *s, char *out, size_t n)
{
    size_t k = 0;

    for (; *s && k + 1 < n; s++)
        if ((unsigned char)*s >= ' ' && *s != 127)
            out[k++] = *s;
    out[k] = '\0';
    return out;
}

static void emit_u64(StatEmit emit, void *arg, const char *key, uint64_t u)
{
    emit(arg, key, (StatVal){.kind = SK_U64, .v.u = u});
}

void stats_doc_replication(Server *s, StatEmit emit, void *arg)
{
    ReplInfo i;
    char primary[512], error[512];

    repl_info(s, &i);
    emit(arg, "role", (StatVal){.kind = SK_TEXT,
                               .v.s = i.role == ROLE_PRIMARY ? "primary" : "replica"});
    emit_u64(emit, arg, "epoch", i.epoch);
    emit_u64(emit, arg, "position", i.position);
    emit(arg, "primary", (StatVal){.kind = SK_TEXT,
                                  .v.s = printable(i.primary, primary, sizeof primary)});
    emit(arg, "connected", (StatVal){.kind = SK_BOOL, .v.u = i.connected != 0});
    emit_u64(emit, arg, "lag-records", i.lag);
    emit_u64(emit, arg, "sync-replicas", i.sync_replicas);
    emit_u64(emit, arg, "connected-replicas", i.connected_replicas);
    emit_u64(emit, arg, "caught-up-replicas", i.caught_up_replicas);
    emit_u64(emit, arg, "waiting-replies", i.waiting_replies);
    emit_u64(emit, arg, "discarded-records", i.discarded);
    emit(arg, "last-error", (StatVal){.kind = SK_TEXT,
                                     .v.s = printable(i.last_error, error, sizeof error)});
    emit_u64(emit, arg, "partial-resyncs", i.partial_resyncs);
    emit_u64(emit, arg, "full-resyncs", i.full_resyncs);
}
