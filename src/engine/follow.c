/*
 * follow.c — a replica applies its primary's records (engine.h, "replication").
 *
 * The records are the binlog's own (blcodec.h); each is applied to the
 * live state the way replay would read it (a J/K replaces the job, S sets
 * its state, D removes it, F removes a tube's jobs up to an id but the
 * kept ones, C registers or lets go a fanout child), and logged in this
 * server's binlog through the usual calls, so its files, space accounting
 * and compaction stay the binlog's. No
 * policy runs here: the primary's limits, fanout, expiry and moves reach
 * the replica as the records they made.
 */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "clock.h"
#include "engine.h"
#include "log.h"
#include "policy.h"
#include "queue.h"
#include "store.h"

/* A logged realtime on this server's monotonic clock: one pair of clock
 * reads a loop iteration (clock.h), not one a record, as a catch-up
 * applies hundreds of thousands a second. */
static int64_t mono_of(Engine *e, int64_t wall)
{
    return bl_mono_of(wall, e->now + clock_offset(&e->wall, e->now), e->now);
}

static void see_id(Engine *e, uint64_t id)
{
    if (id >= e->next_id)
        e->next_id = id + 1;
}

/* The fields of a J/K or S record that live in the JobExt. 0, or -1 out
 * of memory (nothing changed). */
static int set_state(Engine *e, Job *j, const BlRecord *r)
{
    int state = r->state == JOB_DELAYED || r->state == JOB_BURIED ? r->state : JOB_READY;
    int need = state != JOB_READY || r->delay || r->reserves || r->timeouts ||
               r->releases || r->buries || r->kicks || r->type == BL_JOBX;
    JobExt *x = job_ext(j);

    if (!x && need && !(x = job_ext_get(j)))
        return -1;
    j->pri = r->pri;
    j->state = (unsigned)state;
    if (!x)
        return 0;
    x->delay = r->delay;
    x->deadline = state == JOB_DELAYED ? mono_of(e, r->deadline_wall) : 0;
    x->reserves = r->reserves;
    x->timeouts = r->timeouts;
    x->releases = r->releases;
    x->buries = r->buries;
    x->kicks = r->kicks;
    if (r->type == BL_JOBX) {
        x->entered = mono_of(e, r->entered_wall);
        x->exptime = r->exptime_wall ? mono_of(e, r->exptime_wall) : 0;
        if (x->exptime)
            e->exptimes_seen = 1;
    }
    return 0;
}

static int sweep_mark(Engine *e, uint64_t id);

/* old and the record are other jobs under one id: another body (a job of
 * the same history has the same bytes, whatever its state or tube now).
 * A body on disk only is compared by its size. */
static int other_job(const Job *old, const BlRecord *r)
{
    const char *b = job_body(old);

    return old->body_size != r->body_size || (b && memcmp(b, r->body, r->body_size) != 0);
}

/* A J or K record: the job, new or replacing the one of that id. fresh:
 * its id is above every id seen, so no job has it (no lookup: on a
 * stream of puts the lookup's misses were a sixth of a replica's time). */
/* The primary journaled this job; this server's own config does not
 * journal its tube, so it is gone after a restart here while the position
 * says it was received (doc/replication.md, "Limits"). Said once a tube. */
static void warn_unjournaled(Engine *e, Tube *t)
{
    if (t->pol.journal || t->repl_warned || !e->binlog.enabled)
        return;
    t->repl_warned = 1;
    log_warn("replication: tube %.*s has journal = false in this server's config: "
             "the primary's jobs in it are not kept over a restart here (keep the "
             "config files alike)",
             (int)t->name_len, t->name);
}

static int apply_job(Engine *e, const BlRecord *r, int fresh)
{
    Job *old = fresh ? NULL : job_table_find(&e->jobs, r->id), *j;
    Tube *t;
    int other;

    if (old && job_dead(old))
        return -1; /* flushed and not freed yet: applied on a later try */
    other = old && e->sweep_n && other_job(old, r);
    if (!(t = engine_tube(e, r->tube, r->tube_len)))
        return -1;
    /* The job's reference, taken first: the job it replaces may be the
     * tube's last, and the tube must outlive that. */
    tube_ref(t);
    j = queue_job_new_for(e, t, r->id, r->body_size, 0);
    if (!j) {
        engine_tube_unref(e, t);
        return -1;
    }
    memcpy(job_body_mut(j), r->body, r->body_size);
    j->ttr = r->ttr ? r->ttr : 1;
    job_set_created(j, mono_of(e, r->created_wall));
    j->tube = t;
    if (set_state(e, j, r) < 0 || binlog_reserve_put(e, j) < 0) {
        queue_job_free(e, j);
        engine_tube_unref(e, t);
        return -1;
    }
    if (old) {
        binlog_leave(e, old, 1); /* the new record replaces it */
        queue_delete(e, old);
    }
    job_table_insert(&e->jobs, j);
    if (queue_restore(e, j) < 0) {
        /* No heap room: it is kept buried, as a put would (burying needs
         * its JobExt; without even that, the record is not applied). */
        if (!job_ext_get(j)) {
            queue_expiry_remove(e, j);
            t->cur_bytes -= j->body_size;
            job_table_remove(&e->jobs, j);
            queue_job_free(e, j);
            engine_tube_unref(e, t);
            return -1;
        }
        j->state = JOB_BURIED;
        queue_bury(e, j);
    }
    t->total_jobs++;
    e->total_jobs++;
    warn_unjournaled(e, t);
    binlog_put(e, j);
    /* (only at the id's first record of the snapshot: a later one replaces
     * the primary's own job, which a move may have changed) */
    if (sweep_mark(e, r->id) && other)
        e->sweep_replaced++;
    return 0;
}

static int apply_state(Engine *e, const BlRecord *r)
{
    Job *j = job_table_find(&e->jobs, r->id);
    BlRecord full;

    if (!j || job_dead(j))
        return 0; /* its job record was compacted away: it is dead */
    if (binlog_reserve_state(e) < 0)
        return -1;
    full = *r;
    if (job_ext(j) && job_ext(j)->exptime)
        full.type = BL_STATE; /* keep its clocks: set_state only sets K's */
    queue_detach(e, j);
    if (set_state(e, j, &full) < 0 || queue_place(e, j) < 0) {
        j->state = JOB_BURIED;
        if (job_ext_get(j))
            queue_bury(e, j);
        else
            queue_enqueue(e, j, 0);
    }
    binlog_state(e, j);
    return 0;
}

static void apply_delete(Engine *e, uint64_t id)
{
    Job *j = job_table_find(&e->jobs, id);

    if (!j || job_dead(j))
        return;
    binlog_delete(e, j);
    queue_delete(e, j);
}

static int flushed(const BlRecord *r, const Job *j)
{
    if (j->id > r->id)
        return 0;
    for (uint32_t i = 0; i < r->nkeep; i++)
        if (bl_flush_keep(r, i) == j->id)
            return 0;
    return 1;
}

/* flush-tube: one record here too; the jobs go one by one (flushes are
 * rare, and a replica has no graveyard to spread them over). */
static int apply_flush(Engine *e, const BlRecord *r)
{
    Tube *t = engine_tube_find(e, r->tube, r->tube_len);
    Job **v;
    size_t n = 0, cap;
    uint64_t *keep;

    if (!t)
        return 0;
    cap = t->ready.len + t->delay.len + t->buried_ct + 1;
    v = tb_malloc(cap * sizeof *v);
    keep = tb_malloc(((size_t)r->nkeep + 1) * sizeof *keep);
    if (!v || !keep) {
        tb_free(v);
        tb_free(keep);
        return -1;
    }
    for (size_t i = 0; i < t->ready.len; i++)
        v[n++] = t->ready.items[i];
    for (size_t i = 0; i < t->delay.len; i++)
        v[n++] = t->delay.items[i];
    for (List *l = t->buried.next; l != &t->buried && n < cap; l = l->next)
        v[n++] = job_of_link(l);
    {
        size_t k = 0; /* keep the ones the record flushes */
        for (size_t i = 0; i < n; i++)
            if (flushed(r, v[i]))
                v[k++] = v[i];
        n = k;
    }
    for (uint32_t i = 0; i < r->nkeep; i++)
        keep[i] = bl_flush_keep(r, i);
    if (binlog_flush(e, t, r->id, keep, r->nkeep, n) < 0) {
        tb_free(v);
        tb_free(keep);
        return -1;
    }
    tube_ref(t);
    for (size_t i = 0; i < n; i++) {
        binlog_unpin(e, v[i]);
        queue_delete(e, v[i]);
    }
    engine_tube_unref(e, t);
    tb_free(v);
    tb_free(keep);
    return 0;
}

/* A snapshot's end says which ids the primary gave out; its highest may
 * be deleted jobs', in no record here. Journaled as a mark, so that a
 * restart keeps it (replay takes the next id from the highest id in any
 * record), and a promotion after one still gives ids above every id the
 * primary gave out. Not when a job holds the id: its record keeps it, and
 * the mark would delete that job at replay. */
static int keep_next_id(Engine *e)
{
    uint64_t top = e->next_id - 1;

    if (!top || job_table_find(&e->jobs, top))
        return 0;
    if (binlog_mark_ids(e, top) < 0) {
        log_warn("replication: cannot journal the primary's next id (binlog unhealthy "
                 "or full): a restart before a new job may give out lower ids");
        return -1;
    }
    return 0;
}

int engine_apply(Engine *e, const BlRecord *r)
{
    switch (r->type) {
    case BL_JOB:
    case BL_JOBX: {
        int fresh = r->id >= e->next_id; /* every job's id is below next_id */
        see_id(e, r->id);
        return apply_job(e, r, fresh);
    }
    case BL_STATE:
        return apply_state(e, r);
    case BL_DELETE:
        see_id(e, r->id);
        apply_delete(e, r->id);
        return 0;
    case BL_FLUSH:
        see_id(e, r->id);
        return apply_flush(e, r);
    case BL_CHILD:
        return policy_child_apply(e, r->tube, r->tube_len, r->flags & BL_CHILD_ON);
    case BL_SNAP_END:
        if (r->id > e->next_id)
            e->next_id = r->id;
        return keep_next_id(e);
    default:
        return 0; /* BL_POS: the replication layer reads it */
    }
}

/* Every job back in its tube's expiry heap (a promotion). */
static void expiry_back(HashNode *n, void *arg)
{
    Engine *e = arg;
    Job *j = container_of(n, Job, hnode);

    if (!job_dead(j) && j->state != JOB_RESERVED && queue_expiry_update(e, j) < 0)
        log_warn("job %llu: out of memory for its expiry", (unsigned long long)j->id);
}

/* Whether a promotion must walk every job back into the expiry heaps: only
 * a job in a tube with max_age, or one with a client's expiry, can expire.
 * Without either (a plain beanstalk queue) promotion costs no walk, so it
 * does not grow with the jobs held (about 40 ns a job). */
static int expiry_walk_needed(const Engine *e)
{
    if (e->exptimes_seen)
        return 1;
    for (size_t i = 0; i < e->tubes.len; i++)
        if (e->tubes.list[i]->pol.max_age_ms)
            return 1;
    return 0;
}

/* A replica's delays end on its own clock, as the primary's do (a delay
 * ending is not journaled, on the primary either, and both read the same
 * absolute deadline); what would log a record (expiry, a TTR running out)
 * waits for the primary's records: no job is in an expiry heap while
 * passive, and a replica holds no reservation. A primary that becomes a
 * replica (follow) keeps its max_age tubes' age rings, frozen: their
 * fronts wait for ever (the mark that a failed move uses to wait a
 * second), or its tube timers would expire jobs here, as records of its
 * own that its new primary never made. A promotion thaws them. */
void engine_set_passive(Engine *e, int on)
{
    if (e->passive == on)
        return;
    e->passive = on;
    if (on) {
        for (size_t i = 0; i < e->tubes.len; i++) {
            Tube *t = e->tubes.list[i];
            if (t->expiry.len)
                e->exptimes_seen = 1; /* maybe a client's: walk at promotion */
            for (size_t k = 0; k < t->expiry.len; k++) {
                Job *j = t->expiry.items[k];
                job_ext(j)->expires = 0;
            }
            t->expiry.len = 0;
            t->age_retry_at = INT64_MAX;
            tube_timer_update(&e->tubes, t); /* a removal: cannot fail */
        }
        return;
    }
    for (size_t i = 0; i < e->tubes.len; i++) {
        Tube *t = e->tubes.list[i];
        t->age_retry_at = 0;
        if (tube_timer_update(&e->tubes, t) < 0)
            log_warn("tube %.*s: out of memory for its timer: its oldest jobs expire "
                     "late", (int)t->name_len, t->name);
    }
    if (expiry_walk_needed(e))
        hash_each(&e->jobs, expiry_back, e);
}

/* ---- the sweep of a snapshot -------------------------------------------- */

typedef struct {
    uint64_t *ids;
    size_t n;
} IdList;

static void collect(HashNode *n, void *arg)
{
    IdList *l = arg;
    Job *j = container_of(n, Job, hnode);

    if (!job_dead(j))
        l->ids[l->n++] = j->id;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

int engine_sweep_begin(Engine *e)
{
    IdList l = {NULL, 0};
    unsigned char *sent;

    engine_sweep_abort(e);
    l.ids = tb_malloc((e->jobs.len + 1) * sizeof *l.ids);
    sent = tb_calloc(e->jobs.len + 1, 1);
    if (!l.ids || !sent) {
        tb_free(l.ids);
        tb_free(sent);
        return -1;
    }
    hash_each(&e->jobs, collect, &l);
    qsort(l.ids, l.n, sizeof *l.ids, cmp_u64);
    e->sweep_ids = l.ids;
    e->sweep_sent = sent;
    e->sweep_n = l.n;
    /* The children too: a C record from the primary keeps one. */
    for (size_t i = 0; i < e->tubes.len; i++)
        e->tubes.list[i]->child_sweep = e->tubes.list[i]->registered;
    return 0;
}

static void collect_unjournaled(HashNode *n, void *arg)
{
    IdList *l = arg;
    Job *j = container_of(n, Job, hnode);

    if (!job_dead(j) && !j->file && j->state != JOB_RESERVED)
        l->ids[l->n++] = j->id;
}

uint64_t engine_drop_unjournaled(Engine *e)
{
    IdList l = {NULL, 0};

    if (!e->jobs.len || !(l.ids = tb_malloc(e->jobs.len * sizeof *l.ids)))
        return 0; /* (out of memory: a snapshot's sweep may take them) */
    hash_each(&e->jobs, collect_unjournaled, &l);
    for (size_t i = 0; i < l.n; i++) {
        Job *j = job_table_find(&e->jobs, l.ids[i]);
        if (j)
            queue_delete(e, j); /* no record: it never had one */
    }
    tb_free(l.ids);
    return l.n;
}

/* Let go the registered children the snapshot did not send. */
static void sweep_children(Engine *e)
{
    for (size_t i = 0; i < e->tubes.len; i++) {
        Tube *t = e->tubes.list[i];
        if (!t->child_sweep)
            continue;
        t->child_sweep = 0;
        policy_unregister(e, t); /* logs it; t may be gone: start again */
        i = (size_t)-1;
    }
}

/* The primary has job id: it stays at the sweep's end. The records come
 * in any order (live ones name jobs ahead of the snapshot's cursor), so
 * the list stays sorted and a flag beside it says "sent". 1 when id was
 * in the list and not yet sent. */
static int sweep_mark(Engine *e, uint64_t id)
{
    size_t lo = 0, hi = e->sweep_n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (e->sweep_ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < e->sweep_n && e->sweep_ids[lo] == id && !e->sweep_sent[lo]) {
        e->sweep_sent[lo] = 1;
        return 1;
    }
    return 0;
}

uint64_t engine_sweep_end(Engine *e)
{
    uint64_t n = e->sweep_replaced;

    for (size_t i = 0; i < e->sweep_n; i++) {
        Job *j;
        if (e->sweep_sent[i] || !(j = job_table_find(&e->jobs, e->sweep_ids[i])) ||
            job_dead(j))
            continue;
        binlog_delete(e, j);
        queue_delete(e, j);
        n++;
    }
    sweep_children(e);
    engine_sweep_abort(e);
    return n;
}

void engine_sweep_abort(Engine *e)
{
    tb_free(e->sweep_ids);
    tb_free(e->sweep_sent);
    e->sweep_ids = NULL;
    e->sweep_sent = NULL;
    e->sweep_n = 0;
    e->sweep_replaced = 0;
    for (size_t i = 0; i < e->tubes.len; i++)
        e->tubes.list[i]->child_sweep = 0;
}

/* ---- positions ----------------------------------------------------------- */

void engine_repl_state(const Engine *e, uint64_t *epoch, uint64_t *pos, uint64_t *start)
{
    *epoch = e->binlog.epoch ? e->binlog.epoch : 1;
    *pos = e->binlog.pos;
    *start = e->binlog.epoch_start;
}

int engine_set_position(Engine *e, uint64_t epoch, uint64_t pos, uint64_t start,
                        int follower)
{
    return binlog_set_position(e, epoch, pos, start, follower);
}

int engine_set_position_unheard(Engine *e, uint64_t epoch, uint64_t pos, uint64_t start,
                                int follower, int unheard)
{
    return binlog_set_position_ex(e, epoch, pos, start, follower, unheard);
}

int engine_epoch_unheard(const Engine *e)
{
    return e->binlog.unheard;
}

int engine_skip_ids(Engine *e, uint64_t n)
{
    e->next_id += n;
    return binlog_mark_ids(e, e->next_id - 1);
}

uint64_t engine_durable_lsn(const Engine *e)
{
    return e->binlog.durable_lsn;
}

void engine_poll_durable(Engine *e)
{
    binlog_poll_sync(e);
}

uint64_t engine_lsn(const Engine *e)
{
    return e->binlog.lsn;
}

/* The registered fanout children as BL_CHILD records: 0, -1 out of
 * memory. */
static int snapshot_children(Engine *e, Buf *out)
{
    for (size_t i = 0; i < e->tubes.len; i++) {
        Tube *t = e->tubes.list[i];
        BlRecord r = {.type = BL_CHILD, .flags = BL_CHILD_ON, .tube = t->name,
                      .tube_len = (uint8_t)t->name_len};
        size_t n = bl_record_size(&r);
        if (!t->registered)
            continue;
        if (buf_reserve(out, n) < 0)
            return -1;
        bl_encode(&r, out->data + out->len);
        out->len += n;
    }
    return 0;
}

int engine_snapshot_job(Engine *e, uint64_t id, Buf *out)
{
    Job *j = job_table_find(&e->jobs, id);
    int rc;

    /* A snapshot asks for id 1 first: the children go ahead of the jobs. */
    if (id == 1 && snapshot_children(e, out) < 0)
        return -1;
    if (!j || job_dead(j) || !j->file)
        return 0; /* none, or never journaled: nothing to send */
    rc = binlog_encode_job(e, j, out);
    return rc == 0 ? 1 : rc == -2 ? 0 : -1;
}
