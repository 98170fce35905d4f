#include "metrics.h"

#include <stddef.h>
#include <string.h>

#include "alloc.h"
#include "clock.h"
#include "engine.h"
#include "promtext.h"
#include "repl.h"

static const char *const state_names[] = {"ready", "reserved", "delayed", "buried"};

/* A family with one unlabelled sample. */
static void single(Buf *b, const char *name, PromType type, const char *help, uint64_t v)
{
    prom_family(b, name, type, help);
    prom_sample_u64(b, name, NULL, 0, v);
}

static double seconds_of(struct timeval tv)
{
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static void server_families(const ServerStats *ss, Buf *b)
{
    const EngineStats *es = &ss->engine;
    const uint64_t states[] = {es->jobs.ready, es->jobs.reserved, es->jobs.delayed,
                               es->jobs.buried};
    PromLabel l;

    prom_family(b, "tubed_build_info", PROM_GAUGE,
                "Always 1; labels describe the running server.");
    l = prom_label("version", TUBED_VERSION);
    prom_sample_u64(b, "tubed_build_info", &l, 1, 1);
    single(b, "tubed_uptime_seconds", PROM_GAUGE, "Seconds since the server started.",
           (uint64_t)(es->uptime_ns / NS_PER_SEC));
    single(b, "tubed_draining", PROM_GAUGE,
           "1 while the server drains (refuses new jobs), else 0.", ss->draining != 0);
    prom_family(b, "tubed_commands_total", PROM_COUNTER,
                "Beanstalk protocol commands received, by command.");
    for (size_t i = 0; i < ss->front.ncmds; i++) {
        l = prom_label("command", ss->front.cmds[i].name);
        prom_sample_u64(b, "tubed_commands_total", &l, 1, ss->front.cmds[i].value);
    }
    prom_family(b, "tubed_jobs", PROM_GAUGE, "Jobs in the server, by state.");
    for (size_t i = 0; i < 4; i++) {
        l = prom_label("state", state_names[i]);
        prom_sample_u64(b, "tubed_jobs", &l, 1, states[i]);
    }
    single(b, "tubed_jobs_urgent", PROM_GAUGE,
           "Ready jobs with priority below 1024 (also counted as ready).", es->jobs.urgent);
    single(b, "tubed_jobs_created_total", PROM_COUNTER,
           "Jobs created (put, and fanout copies).", es->total_jobs);
    single(b, "tubed_job_timeouts_total", PROM_COUNTER,
           "Reservations whose time-to-run ran out.", es->job_timeouts);
    single(b, "tubed_tubes", PROM_GAUGE, "Tubes that exist.", es->tubes);
    single(b, "tubed_connections", PROM_GAUGE, "Open client connections.", ss->conns);
    single(b, "tubed_connections_accepted_total", PROM_COUNTER,
           "Client connections accepted.", ss->total_conns);
    single(b, "tubed_unread_reply_bytes", PROM_GAUGE,
           "Memory of output buffers holding replies not yet sent to clients, "
           "all connections together.",
           ss->out_unread);
    single(b, "tubed_unread_reply_budget_bytes", PROM_GAUGE,
           "Memory of other clients' unsent replies from which large replies are refused.",
           (uint64_t)OUT_BUDGET);
    single(b, "tubed_replies_refused_total", PROM_COUNTER,
           "Large replies refused while other clients' unsent replies held the budget.",
           ss->out_refused);
    single(b, "tubed_producers", PROM_GAUGE, "Open connections that have sent a put.",
           ss->front.producers);
    single(b, "tubed_workers", PROM_GAUGE, "Open connections that have sent a reserve.",
           ss->front.workers);
    single(b, "tubed_workers_waiting", PROM_GAUGE, "Connections waiting in a reserve.",
           es->waiting);
    single(b, "tubed_max_job_size_bytes", PROM_GAUGE,
           "Largest job body a put may send (-z).", ss->max_job_size);
    single(b, "tubed_job_memory_bytes", PROM_GAUGE,
           "Memory held by jobs, as the --job-memory budget counts it.", es->job_bytes);
    single(b, "tubed_job_memory_limit_bytes", PROM_GAUGE,
           "The --job-memory budget; 0 means no limit.", ss->job_memory_limit);
    prom_family(b, "tubed_cpu_seconds_total", PROM_COUNTER,
                "CPU time used by the server process, by mode.");
    l = prom_label("mode", "user");
    prom_sample_f64(b, "tubed_cpu_seconds_total", &l, 1, seconds_of(ss->utime));
    l = prom_label("mode", "system");
    prom_sample_f64(b, "tubed_cpu_seconds_total", &l, 1, seconds_of(ss->stime));
    single(b, "tubed_binlog_enabled", PROM_GAUGE,
           "1 when the server journals jobs to a binlog (-b), else 0.", es->binlog.enabled);
    single(b, "tubed_binlog_healthy", PROM_GAUGE,
           "0 after a binlog write or sync failed, else 1 (also 1 without a binlog).",
           es->binlog.healthy);
    single(b, "tubed_binlog_disk_bytes", PROM_GAUGE, "Bytes of binlog files on disk.",
           es->binlog.disk_bytes);
    single(b, "tubed_binlog_live_bytes", PROM_GAUGE,
           "Bytes of binlog records a replay would still need.", es->binlog.live_bytes);
    single(b, "tubed_binlog_records_written_total", PROM_COUNTER,
           "Binlog records written.", es->binlog.records_written);
    single(b, "tubed_binlog_records_migrated_total", PROM_COUNTER,
           "Binlog records rewritten by compaction.", es->binlog.records_migrated);
    single(b, "tubed_binlog_spilled_jobs", PROM_GAUGE,
           "Jobs whose body is in the binlog only (read-behind).", es->spill.jobs);
    single(b, "tubed_binlog_spilled_bytes", PROM_GAUGE,
           "Body bytes in the binlog only (read-behind).", es->spill.bytes);
    single(b, "tubed_binlog_spill_reads_total", PROM_COUNTER,
           "Spilled bodies read back ahead of need by the reader thread.", es->spill.reads);
    single(b, "tubed_binlog_spill_waits_total", PROM_COUNTER,
           "Spilled bodies a command needed before the read-ahead had them (read on the loop).",
           es->spill.waits);
    single(b, "tubed_binlog_spill_errors_total", PROM_COUNTER,
           "Spilled bodies whose record could not be read back.", es->spill.errors);
}

/* ---- per tube ----------------------------------------------------------- */

/* What a per-tube family shows of a tube (one value). */
typedef uint64_t (*TubeValue)(const TubeStats *t);

static uint64_t v_urgent(const TubeStats *t) { return t->urgent; }
static uint64_t v_bytes(const TubeStats *t) { return t->bytes; }
static uint64_t v_mem_bytes(const TubeStats *t) { return t->bytes - t->spilled_bytes; }
static uint64_t v_created(const TubeStats *t) { return t->total_jobs; }
static uint64_t v_deleted(const TubeStats *t) { return t->cmd_delete; }
static uint64_t v_expired(const TubeStats *t) { return t->total_expired; }
static uint64_t v_discarded(const TubeStats *t) { return t->total_discarded; }
static uint64_t v_timeouts(const TubeStats *t) { return t->total_timeouts; }
static uint64_t v_age(const TubeStats *t) { return t->oldest_ready_age; }
static uint64_t v_waiting(const TubeStats *t) { return t->waiting; }
static uint64_t v_using(const TubeStats *t) { return t->using; }
static uint64_t v_watching(const TubeStats *t) { return t->watching; }
static uint64_t v_paused(const TubeStats *t) { return t->pause_left_ns > 0; }
static uint64_t v_pause_left(const TubeStats *t)
{
    return (uint64_t)(t->pause_left_ns / NS_PER_SEC);
}
static uint64_t v_pauses(const TubeStats *t) { return t->cmd_pause; }

static const struct {
    const char *name;
    PromType type;
    const char *help;
    TubeValue value;
} tube_families[] = {
    {"tubed_tube_jobs_urgent", PROM_GAUGE,
     "Ready jobs in the tube with priority below 1024 (also counted as ready).", v_urgent},
    {"tubed_tube_body_bytes", PROM_GAUGE,
     "Body bytes of the tube's jobs, in every state.", v_bytes},
    {"tubed_tube_memory_bytes", PROM_GAUGE,
     "Body bytes of the tube's jobs held in memory (read-behind keeps the rest "
     "in the binlog only).", v_mem_bytes},
    {"tubed_tube_jobs_created_total", PROM_COUNTER,
     "Jobs created in the tube (put, and fanout copies).", v_created},
    {"tubed_tube_jobs_deleted_total", PROM_COUNTER,
     "Jobs of the tube deleted by the delete command.", v_deleted},
    {"tubed_tube_jobs_expired_total", PROM_COUNTER,
     "Jobs of the tube that expired (max_age).", v_expired},
    {"tubed_tube_jobs_discarded_total", PROM_COUNTER,
     "Jobs of the tube dropped to make room (discard_old_when_full, full fanout child).",
     v_discarded},
    {"tubed_tube_job_timeouts_total", PROM_COUNTER,
     "Reservations of the tube's jobs whose time-to-run ran out.", v_timeouts},
    {"tubed_tube_oldest_ready_age_seconds", PROM_GAUGE,
     "Seconds since the job at the head of the ready queue became ready; "
     "0 when none is ready.", v_age},
    {"tubed_tube_workers_waiting", PROM_GAUGE,
     "Connections waiting in a reserve that watch the tube.", v_waiting},
    {"tubed_tube_connections_using", PROM_GAUGE,
     "Connections that use the tube (put into it).", v_using},
    {"tubed_tube_connections_watching", PROM_GAUGE,
     "Connections that watch the tube.", v_watching},
    {"tubed_tube_paused", PROM_GAUGE,
     "1 while the tube is paused (pause-tube), else 0.", v_paused},
    {"tubed_tube_pause_remaining_seconds", PROM_GAUGE,
     "Seconds until a paused tube resumes; 0 when not paused.", v_pause_left},
    {"tubed_tube_pauses_total", PROM_COUNTER, "pause-tube commands for the tube.", v_pauses},
};

static PromLabel tube_label(const TubeStats *t)
{
    return (PromLabel){"tube", t->name, t->name_len};
}

static void tube_jobs_family(const TubeStats *v, size_t n, Buf *b)
{
    prom_family(b, "tubed_tube_jobs", PROM_GAUGE, "Jobs in the tube, by state.");
    for (size_t i = 0; i < n; i++) {
        const TubeStats *t = &v[i];
        const uint64_t counts[] = {t->ready, t->reserved, t->delayed, t->buried};
        PromLabel l[2] = {tube_label(t)};

        for (size_t k = 0; k < 4; k++) {
            l[1] = prom_label("state", state_names[k]);
            prom_sample_u64(b, "tubed_tube_jobs", l, 2, counts[k]);
        }
    }
}

/* The figures of every tube listener l may touch, in name order, *n of
 * them: a new array (tb_free it); NULL when out of memory. */
static TubeStats *tube_snapshot(const Server *s, const Listener *l, size_t *n)
{
    Tube **v = srvstats_tubes(s, l, n);
    TubeStats *ts = v ? tb_malloc((*n + 1) * sizeof *ts) : NULL;

    if (ts)
        for (size_t i = 0; i < *n; i++)
            engine_tube_stats(&s->eng, v[i], &ts[i]);
    tb_free(v);
    return ts;
}

/* The value at offset off of a ListenerStats (a uint64_t). */
static uint64_t listener_value(const ListenerStats *l, size_t off)
{
    uint64_t v;

    memcpy(&v, (const char *)l + off, sizeof v);
    return v;
}

/* Is ls[i] the first listener called ls[i].name? */
static int first_of_name(const ListenerStats *ls, int i)
{
    for (int j = 0; j < i; j++)
        if (!strcmp(ls[j].name, ls[i].name))
            return 0;
    return 1;
}

/* tubed_listener_*: one sample per listener name. Names can repeat:
 * sockets handed over by systemd without FileDescriptorName= (the IPv4 and
 * IPv6 sockets of one unit) are all "main", and a [listen main] section
 * shares the -l/-p listener's name. Two samples with one label set are
 * not a valid exposition (Prometheus keeps one of them), so the
 * listeners of a name are summed into one. */
static void listener_families(const Server *s, Buf *b)
{
    static const struct {
        const char *name, *help;
        PromType type;
        size_t off;
    } fam[] = {
        {"tubed_listener_connections", "Open connections of the listener.", PROM_GAUGE,
         offsetof(ListenerStats, conns)},
        {"tubed_listener_refused_commands_total", "Commands the listener's role or tubes "
         "refused.", PROM_COUNTER, offsetof(ListenerStats, refused_cmds)},
        {"tubed_listener_refused_peers_total", "Connections closed at once: the peer was "
         "not in the listener's users or groups.", PROM_COUNTER,
         offsetof(ListenerStats, refused_peers)},
    };
    ListenerStats ls[SERVER_MAX_LISTENERS];
    int n = listener_stats(s, ls);

    for (size_t k = 0; k < sizeof fam / sizeof fam[0]; k++) {
        prom_family(b, fam[k].name, fam[k].type, fam[k].help);
        for (int i = 0; i < n; i++) {
            PromLabel lab = prom_label("listener", ls[i].name);
            uint64_t v = 0;

            if (!first_of_name(ls, i))
                continue;
            for (int j = i; j < n; j++)
                if (!strcmp(ls[j].name, ls[i].name))
                    v += listener_value(&ls[j], fam[k].off);
            prom_sample_u64(b, fam[k].name, &lab, 1, v);
        }
    }
}

static void replica_lag(void *arg, const char *addr, uint64_t lag)
{
    PromLabel l = prom_label("replica", addr);

    prom_sample_u64(arg, "tubed_replication_replica_lag_records", &l, 1, lag);
}

/* Only once replication is in use: a server without it shows exactly the
 * families it always did. */
static void replication_families(Server *s, const ServerStats *ss, Buf *b)
{
    ReplInfo i;

    if (!ss->repl_shown)
        return;
    repl_info(s, &i);
    single(b, "tubed_replication_primary", PROM_GAUGE,
           "1 when this server is a primary, 0 when a replica.", i.role == ROLE_PRIMARY);
    single(b, "tubed_replication_connected", PROM_GAUGE,
           "A replica: 1 while connected to its primary and receiving; a primary: 1.",
           (uint64_t)i.connected);
    single(b, "tubed_replication_epoch", PROM_GAUGE, "The current epoch.", i.epoch);
    /* A gauge: a replica's position is 0 while a snapshot runs, and
     * moves back when it converges onto another history. */
    single(b, "tubed_replication_position", PROM_GAUGE,
           "Binlog records made (a primary) or received and written (a replica).",
           i.position);
    single(b, "tubed_replication_lag_records", PROM_GAUGE,
           "A replica: records its primary has that it has not yet.", i.lag);
    single(b, "tubed_replication_sync_replicas", PROM_GAUGE,
           "The configured sync_replicas.", i.sync_replicas);
    single(b, "tubed_replication_connected_replicas", PROM_GAUGE,
           "A primary: replicas connected now.", i.connected_replicas);
    single(b, "tubed_replication_caught_up_replicas", PROM_GAUGE,
           "A primary: replicas whose position equals its own.", i.caught_up_replicas);
    single(b, "tubed_replication_waiting_replies", PROM_GAUGE,
           "A primary: replies held for replicas now.", i.waiting_replies);
    single(b, "tubed_replication_discarded_records_total", PROM_COUNTER,
           "Records dropped when this server converged after follow.", i.discarded);
    single(b, "tubed_replication_partial_resyncs_total", PROM_COUNTER,
           "Partial resyncs served (a primary) or had (a replica).", i.partial_resyncs);
    single(b, "tubed_replication_full_resyncs_total", PROM_COUNTER,
           "Full resyncs (snapshots) served (a primary) or had (a replica).", i.full_resyncs);
    prom_family(b, "tubed_replication_replica_lag_records", PROM_GAUGE,
                "A primary: each connected replica's lag in records, by its address.");
    repl_each_replica(s, replica_lag, b);
}

void metrics_render(Server *s, const StatsSource *src, const Listener *l, Buf *b)
{
    ServerStats ss;
    size_t n;
    TubeStats *v = tube_snapshot(s, l, &n);

    if (!v) {
        b->oom = 1;
        return;
    }
    server_stats(s, src, &ss);
    server_families(&ss, b);
    listener_families(s, b);
    tube_jobs_family(v, n, b);
    for (size_t k = 0; k < sizeof tube_families / sizeof tube_families[0]; k++) {
        const char *name = tube_families[k].name;

        prom_family(b, name, tube_families[k].type, tube_families[k].help);
        for (size_t i = 0; i < n; i++) {
            PromLabel lab = tube_label(&v[i]);
            prom_sample_u64(b, name, &lab, 1, tube_families[k].value(&v[i]));
        }
    }
    replication_families(s, &ss, b);
    tb_free(v);
}
