#include "snapshot.h"

#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "engine.h"

void engine_stats(const Engine *e, EngineStats *out)
{
    const Binlog *bl = &e->binlog;
    const Spill *sp = &e->spill;

    memset(out, 0, sizeof *out);
    out->jobs = e->jobs_ct;
    out->total_jobs = e->total_jobs;
    out->job_timeouts = e->job_timeouts;
    out->waiting = e->waiting_ct;
    out->job_bytes = e->job_bytes;
    out->tubes = e->tubes.len;
    out->uptime_ns = e->now - e->started;
    out->binlog.enabled = bl->enabled != 0;
    out->binlog.healthy = !bl->enabled || bl->healthy;
    out->binlog.positions = bl->pos_persist != 0;
    out->binlog.oldest_index = bl->nfiles ? bl->files[0].index : 0;
    out->binlog.current_index = bl->nfiles ? bl->files[bl->nfiles - 1].index : 0;
    out->binlog.files = bl->nfiles + bl->nspares;
    out->binlog.file_size = bl->file_size;
    out->binlog.disk_bytes = bl->disk_bytes;
    out->binlog.live_bytes = bl->live_bytes;
    out->binlog.records_written = bl->records_written;
    out->binlog.records_migrated = bl->records_migrated;
    out->binlog.compactions = bl->compactions;
    out->binlog.sync_ago_ns = bl->enabled ? e->now - bl->last_sync : 0;
    out->binlog.last_error = bl->last_error;
    out->spill.jobs = sp->jobs;
    out->spill.bytes = sp->bytes;
    out->spill.reads = sp->reads;
    out->spill.waits = sp->waits;
    out->spill.errors = sp->errors;
}

void engine_tube_stats(const Engine *e, const Tube *t, TubeStats *out)
{
    out->name = t->name;
    out->name_len = t->name_len;
    out->urgent = t->urgent_ct;
    out->ready = t->ready.len;
    out->reserved = t->reserved_ct;
    out->delayed = t->delay.len;
    out->buried = t->buried_ct;
    out->total_jobs = t->total_jobs;
    out->cmd_delete = t->cmd_delete;
    out->cmd_pause = t->cmd_pause;
    out->using = t->using_ct;
    out->watching = t->watching_ct;
    out->waiting = engine_tube_waiting(e, t);
    out->pause_ns = t->pause;
    out->pause_left_ns = tube_paused(t) && t->unpause_at > e->now ? t->unpause_at - e->now : 0;
    out->bytes = t->cur_bytes;
    out->reserved_bytes = t->reserved_bytes;
    out->spilled = t->spilled_ct;
    out->spilled_bytes = t->spilled_bytes;
    out->total_expired = t->total_expired;
    out->total_discarded = t->total_discarded;
    out->total_timeouts = t->total_timeouts;
    out->oldest_ready_age = engine_oldest_ready_age(e, t);
    out->mc = t->mc;
}

void engine_body_bytes(const Engine *e, uint64_t *all, uint64_t *reserved)
{
    *all = *reserved = 0;
    for (size_t i = 0; i < e->tubes.len; i++) {
        *all += e->tubes.list[i]->cur_bytes;
        *reserved += e->tubes.list[i]->reserved_bytes;
    }
}

int engine_name_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);

    return c ? c : (alen > blen) - (alen < blen);
}

int engine_tube_cmp(const void *a, const void *b)
{
    const Tube *x = *(const Tube *const *)a, *y = *(const Tube *const *)b;

    return engine_name_cmp(x->name, x->name_len, y->name, y->name_len);
}

Tube **engine_tubes_sorted(const Engine *e, int (*keep)(const void *arg, Tube *t),
                           const void *arg, size_t *n)
{
    /* One more slot than tubes, so that no tube at all still allocates
     * (NULL means out of memory only). */
    Tube **v = tb_malloc((e->tubes.len + 1) * sizeof *v);

    *n = 0;
    if (!v)
        return NULL;
    for (size_t i = 0; i < e->tubes.len; i++)
        if (!keep || keep(arg, e->tubes.list[i]))
            v[(*n)++] = e->tubes.list[i];
    qsort(v, *n, sizeof *v, engine_tube_cmp);
    return v;
}
