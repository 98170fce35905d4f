#include "engine.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "binlog.h"
#include "clock.h"
#include "log.h"
#include "oldest.h"
#include "policy.h"
#include "queue.h"
#include "spill.h"
#include "waiter.h"
#include "watch.h"

static uint64_t free_graves(Engine *e, uint64_t budget);

/* A mass delete (a flush's graveyard, a big expiry sweep) is spread over
 * many loop iterations; a shrinking rehash of the job table in the middle
 * would be one long pause. While either runs, the table does not shrink;
 * when both are over it shrinks once, straight to its size. */
enum { HOLD_GRAVE = 1, HOLD_SWEEP = 2 };

static void hold_shrink(Engine *e, unsigned who, int on)
{
    unsigned before = e->shrink_holds;

    e->shrink_holds = on ? before | who : before & ~who;
    if (!before != !e->shrink_holds)
        hash_hold_shrink(&e->jobs, e->shrink_holds != 0);
}

/* ---- life cycle --------------------------------------------------------- */

/* Bury a job whose spilled body cannot be read (spill.h). */
static int bury_unreadable(Engine *e, Job *j)
{
    if (!job_ext_get(j))
        return -1;
    queue_detach(e, j);
    queue_bury(e, j);
    if (binlog_reserve_state(e) == 0)
        binlog_state(e, j);
    return 0;
}

int engine_init(Engine *e, const Config *cfg, EvLoop *loop)
{
    memset(e, 0, sizeof *e);
    e->cfg = cfg;
    e->loop = loop;
    e->now = e->started = clock_mono();
    e->next_id = 1;
    list_init(&e->ready_tubes);
    list_init(&e->wide_waiters);
    list_init(&e->grave_buried);
    e->binlog.dirfd = e->binlog.lockfd = e->binlog.cur_fd = -1;
    heap_init(&e->ttr, job_deadline_less, job_set_heap_pos);
    waiter_init(e);
    e->spill.bury = bury_unreadable;
    if (job_table_init(&e->jobs) < 0 || tubes_init(&e->tubes) < 0)
        return -1;
    policy_init(e); /* before the first tube: every tube has its policy */
    if (!(e->default_tube = tubes_get(&e->tubes, "default", 7)))
        return -1;
    tube_ref(e->default_tube); /* "default" always exists */
    return 0;
}

int engine_open_binlog(Engine *e, char *err, size_t errlen)
{
    if (binlog_open(e, err, errlen) < 0)
        return -1;
    return policy_load_children(e, err, errlen);
}

int engine_reload_prepare(Engine *e, const ConfFile *next)
{
    return policy_reload_prepare(e, next);
}

void engine_reload(Engine *e)
{
    policy_reload(e);
}

/* Detach and free every job, bucket by bucket. Nothing is removed from
 * the table while it is walked (removal may shrink it); it is freed whole
 * afterwards. Linear in the jobs, so a stop with millions is quick. */
static void free_jobs(Engine *e)
{
    free_graves(e, UINT64_MAX);
    tb_free(e->graves);
    e->graves = NULL;
    /* The expiry heaps point at jobs freed below in table order: emptied
     * first, or detaching a delayed job (which re-times its tube) would
     * read the top of its tube's expiry heap, perhaps freed already. */
    for (size_t i = 0; i < e->tubes.len; i++)
        e->tubes.list[i]->expiry.len = 0;
    for (size_t b = 0; b < e->jobs.nbuckets; b++) {
        HashNode *n = e->jobs.buckets[b];
        while (n) {
            Job *j = container_of(n, Job, hnode);
            Tube *t = j->tube;
            n = n->next;
            queue_detach(e, j);
            queue_job_free(e, j);
            tube_unref(&e->tubes, t);
        }
        e->jobs.buckets[b] = NULL;
    }
    e->jobs.len = 0;
}

void engine_free(Engine *e)
{
    engine_sweep_abort(e);
    free_jobs(e);
    hash_free(&e->jobs);
    /* tubes_free() skips the destroy hook, which gives a tube's discard
     * index back: the tubes still there (fanout children) give it here. */
    for (size_t i = 0; i < e->tubes.len; i++) {
        oldest_free(e->tubes.list[i]);
        spill_tube_gone(e, e->tubes.list[i]);
    }
    tubes_free(&e->tubes);
    heap_free(&e->ttr);
    heap_free(&e->wait_timers);
    binlog_close(e);
}

/* ---- the loop's calls ------------------------------------------------- */

/* A job came back from a worker (released, buried, timed out, its worker
 * gone): if its time passed while it was reserved, it expires now. The
 * sweep took it out of the expiry heap when it found it reserved. */
static void came_back(Engine *e, uint64_t id)
{
    Job *j = job_table_find(&e->jobs, id);

    if (!j || j->state == JOB_RESERVED)
        return;
    if (queue_expiry_update(e, j) < 0)
        log_warn("job %llu: out of memory for its expiry", (unsigned long long)id);
    policy_check(e, j);
}

/* Flushed jobs freed per loop iteration (a few milliseconds' work at most:
 * each free is a few cache misses). */
#define GRAVE_BATCH 2000

/* Expiries handled per loop iteration: a million jobs expiring at once are
 * swept in batches, with other clients served between them. */
#define EXPIRE_BATCH 1000

/* Delays ending, pauses ending and jobs expiring, tube by tube, earliest
 * first. */
static void tick_tubes(Engine *e)
{
    uint64_t budget = EXPIRE_BATCH;
    Tube *t;

    while (budget && (t = heap_top(&e->tubes.timers)) && t->timer_at <= e->now) {
        Job *j;

        tube_ref(t); /* promoting its last job must not free it under us */
        while ((j = heap_top(&t->delay)) && j->ext->deadline <= e->now) {
            queue_detach(e, j);
            if (queue_enqueue(e, j, 0) < 0)
                queue_bury(e, j);
        }
        if (t->pause && t->unpause_at <= e->now) {
            t->pause = 0;
            queue_ready_update(e, t);
            e->on_ready(e, t);
        }
        budget -= policy_expire_due(e, t, budget);
        tube_timer_update(&e->tubes, t); /* never grows: t is in the heap */
        tube_unref(&e->tubes, t);
    }
    /* A batch used up: more is due, the sweep goes on next iteration. */
    hold_shrink(e, HOLD_SWEEP, budget == 0);
}

/* A TTR ran out: the job goes back to ready and counts a timeout; past
 * its tube's max_timeouts it is buried instead (a dead letter). */
static void time_out(Engine *e, Job *j)
{
    Tube *t = j->tube;
    uint32_t limit = t->pol.max_timeouts;

    queue_detach(e, j);
    j->ext->timeouts++;
    e->job_timeouts++;
    t->total_timeouts++;
    if (limit && j->ext->timeouts >= limit && binlog_reserve_state(e) == 0) {
        queue_bury(e, j);
        binlog_state(e, j);
        return;
    }
    if (queue_enqueue(e, j, 0) < 0)
        queue_bury(e, j);
}

static void tick_ttrs(Engine *e)
{
    Job *j;

    while ((j = heap_top(&e->ttr)) && j->ext->deadline <= e->now) {
        uint64_t id = j->id;
        time_out(e, j);
        came_back(e, id);
    }
}

/* Many tubes came and went (a client watched thousands and left): give
 * the freed memory back to the system. malloc keeps freed chunks for
 * reuse, so without this the server's RSS stays at its peak. Rare: only
 * after a thousand tubes were freed, at the end of the loop iteration that
 * freed them. */
static void trim_heap(Engine *e)
{
    if (e->tubes.freed - e->trimmed_at < 1000)
        return;
    malloc_trim(0);
    e->trimmed_at = e->tubes.freed;
}

void engine_tick(Engine *e)
{
    /* Wake waits before expiring TTRs: a worker waiting in reserve hears
     * DEADLINE_SOON before its job is taken back. */
    waiter_tick(e);
    tick_tubes(e);
    tick_ttrs(e);
    binlog_tick(e);
    free_graves(e, GRAVE_BATCH);
    trim_heap(e);
}

int64_t engine_next_due(const Engine *e)
{
    int64_t due = queue_next_due(e), w = waiter_next_due(e), b = binlog_next_due(e);

    if (e->ngraves || !list_empty(&e->grave_buried))
        return e->now; /* flushed jobs wait to be freed */
    /* A reload's spill goes on without clients, and what it placed is
     * written at once (engine_commit()). */
    if ((e->spill.shrinking && e->binlog.healthy) || e->binlog.wbuf.len)
        return e->now;
    if (w < due)
        due = w;
    return b < due ? b : due;
}

/* ---- read-behind after a reload ---------------------------------------- */

/* A reload gave t a budget its bodies in memory exceed: the bodies that
 * live in their jobs (put under no or a larger budget) are turned into
 * spilled ones, a batch per loop iteration, the last in line first: each
 * job's record is written again, the job takes the spilled form, and its
 * body goes once that record is written (spill_after_commit()). */
#define SHRINK_BATCH 512

/* 1: j now spilled, 0: not a candidate, -1: no room or memory (stop). */
static int shrink_job(Engine *e, Job *j)
{
    int64_t off;
    Job *n;

    if (j->state == JOB_RESERVED || !j->file || job_dead(j) || (j->spilled && !j->loaded))
        return 0;
    if (j->spilled) {
        spill_note(e, j); /* its body goes at the next commit */
        return 1;
    }
    n = queue_job_new_spilled(e, j->id, j->body_size, 0, 1, 0);
    if (!n)
        return -1;
    if ((off = binlog_rewrite(e, j)) < 0) {
        queue_job_free(e, n);
        return -1;
    }
    memcpy(job_body_mut(n), j->body, j->body_size);
    job_spill_set_off(n, (uint64_t)off);
    queue_relocate(e, j, n);
    spill_note(e, n);
    return 1;
}

/* One batch of t; 0 once t is done (within budget, or looked through). */
static int shrink_tube(Engine *e, Tube *t)
{
    uint64_t budget = t->pol.max_memory_size, over, freed = 0;
    int n = 0, looked = 0;

    if (!budget || !t->pol.journal || spill_tube_mem_bytes(t) <= budget)
        return 0;
    over = spill_tube_mem_bytes(t) - budget;
    /* Bounded work per iteration: what it spills and what it looks at. */
    while (freed < over && n < SHRINK_BATCH && looked++ < 16 * SHRINK_BATCH) {
        Heap *h = t->shrink_phase == 0 ? &t->ready : &t->delay;
        uint32_t size;
        Job *j;
        int r;

        if (t->shrink_pos > h->len)
            t->shrink_pos = h->len;
        if (t->shrink_pos == 0) {
            if (t->shrink_phase == 0) {
                t->shrink_phase = 1;
                t->shrink_pos = t->delay.len;
                continue;
            }
            /* Jobs that came in meanwhile (moves, expiry into a dead-letter
             * tube) may sit behind the cursor: another pass while this one
             * found something. */
            if (!t->shrink_moved)
                return 0;
            t->shrink_moved = 0;
            t->shrink_phase = 0;
            t->shrink_pos = t->ready.len;
            continue;
        }
        j = h->items[--t->shrink_pos];
        size = j->body_size;
        if ((r = shrink_job(e, j)) < 0)
            return 1; /* try again next time */
        if (r) {
            freed += size;
            n++;
            t->shrink_moved = 1;
        }
    }
    return 1;
}

static void shrink_tubes(Engine *e)
{
    unsigned left = 0;

    for (size_t i = 0; i < e->tubes.len; i++) {
        Tube *t = e->tubes.list[i];
        if (t->shrink && !(t->shrink = (uint8_t)shrink_tube(e, t)))
            continue;
        left += t->shrink;
    }
    e->spill.shrinking = left;
}

void engine_commit(Engine *e)
{
    binlog_commit(e);
    spill_after_commit(e);
    if (e->spill.shrinking && e->binlog.healthy)
        shrink_tubes(e);
}

const char *engine_body(Engine *e, Job *j)
{
    if (j->spilled && !j->loaded) {
        if (spill_load(e, j) < 0)
            return NULL;
        /* Read for a peek or the like: it may go again once its tube is
         * over budget. A reserved job keeps it (spill.h). */
        if (j->state != JOB_RESERVED)
            spill_note(e, j);
    }
    return job_body(j);
}

void engine_settle(Engine *e)
{
    binlog_settle(e);
}

uint64_t engine_ticket(Engine *e)
{
    return binlog_ticket(e);
}

/* ---- jobs ------------------------------------------------------------- */

Job *engine_find(Engine *e, uint64_t id)
{
    Job *j = job_table_find(&e->jobs, id);

    if (j && job_dead(j))
        return NULL;
    /* Past its time: expire it first (it may live on, moved). */
    if (j && policy_check(e, j))
        j = job_table_find(&e->jobs, id);
    return j;
}

Job *engine_peek(Engine *e, Tube *t, JobState state)
{
    Job *j;

    for (;;) {
        if (state == JOB_READY) {
            j = heap_top(&t->ready);
        } else if (state == JOB_DELAYED) {
            j = heap_top(&t->delay);
        } else {
            List *n = list_first(&t->buried);
            j = n ? job_of_link(n) : NULL;
        }
        if (!j || !policy_check(e, j))
            return j;
    }
}

void engine_expire_all(Engine *e)
{
    policy_expire_all(e);
}

uint32_t engine_max_body(const Engine *e, const Tube *t)
{
    return policy_max_body(e, t);
}

Job *engine_job_new(Engine *e, const Tube *t, uint32_t body_size, uint32_t pri,
                    uint32_t delay, uint32_t ttr)
{
    Job *j = queue_job_new_for(e, t, e->next_id++, body_size, 1);

    if (!j)
        return NULL;
    if (delay) {
        if (!job_ext_get(j)) {
            queue_job_free(e, j);
            return NULL;
        }
        j->ext->delay = delay;
    }
    /* The job goes in the table once its body is in: fetch its bucket now
     * so that insert does not wait on memory. */
    job_table_prefetch(&e->jobs, j->id);
    j->pri = pri;
    j->ttr = ttr ? ttr : 1;
    j->created = e->now;
    return j;
}

void engine_job_drop(Engine *e, Job *j)
{
    queue_job_free(e, j);
}

EngineResult engine_put(Engine *e, Job *j, Tube *t)
{
    uint64_t id;
    int r;

    j->tube = t;
    if (policy_make_room(e, t, j->body_size) < 0)
        return ENG_FULL;
    if (binlog_reserve_put(e, j) < 0)
        return ENG_NO_MEMORY;
    id = j->id;
    r = queue_add(e, j, t);
    if (r == -2)
        return ENG_NO_MEMORY;
    /* Becoming ready serves a waiting worker at once, and a job whose
     * time has already passed (a client's expiry in the past) expires on
     * the way: deleted, or moved and logged in its dead-letter tube. So
     * the job is looked up again rather than trusted. */
    j = job_table_find(&e->jobs, id);
    if (!j)
        return r < 0 ? ENG_BURIED : ENG_OK;
    if (!j->file)
        binlog_put(e, j);
    if (j->tube == t)
        policy_fanout(e, t, j);
    return r < 0 ? ENG_BURIED : ENG_OK;
}

/* A job only this worker may act on as a worker. */
static Job *reserved_by(Engine *e, Worker *w, uint64_t id)
{
    Job *j = job_table_find(&e->jobs, id);

    return j && j->state == JOB_RESERVED && j->ext->owner == w ? j : NULL;
}

/* The common start of release and bury: the job is w's, and the binlog
 * has room for its state record. */
static EngineResult take_reserved(Engine *e, Worker *w, uint64_t id, Job **out)
{
    if (!(*out = reserved_by(e, w, id)))
        return ENG_NOT_FOUND;
    if (binlog_reserve_state(e) < 0)
        return ENG_NO_MEMORY;
    queue_detach(e, *out);
    return ENG_OK;
}

EngineResult engine_delete(Engine *e, Worker *by, uint64_t id)
{
    Job *j = engine_find(e, id); /* an expired job is not there to delete */

    if (!j || (j->state == JOB_RESERVED && j->ext->owner != by))
        return ENG_NOT_FOUND;
    j->tube->cmd_delete++;
    binlog_delete(e, j);
    queue_delete(e, j);
    return ENG_OK;
}

EngineResult engine_release(Engine *e, Worker *by, uint64_t id, uint32_t pri,
                            uint32_t delay)
{
    Job *j;
    EngineResult r = take_reserved(e, by, id, &j);

    if (r != ENG_OK)
        return r;
    j->pri = pri;
    j->ext->delay = delay;
    j->ext->releases++;
    if (queue_enqueue(e, j, delay) < 0) {
        queue_bury(e, j);
        r = ENG_BURIED;
    }
    binlog_state(e, j);
    came_back(e, id);
    return r;
}

EngineResult engine_bury(Engine *e, Worker *by, uint64_t id, uint32_t pri)
{
    Job *j;
    EngineResult r = take_reserved(e, by, id, &j);

    if (r != ENG_OK)
        return r;
    j->pri = pri;
    j->ext->buries++;
    queue_bury(e, j);
    binlog_state(e, j);
    came_back(e, id);
    return ENG_OK;
}

EngineResult engine_touch(Engine *e, Worker *by, uint64_t id)
{
    Job *j = reserved_by(e, by, id);

    if (!j)
        return ENG_NOT_FOUND;
    queue_touch(e, j);
    return ENG_OK;
}

EngineResult engine_reserve_job(Engine *e, Worker *by, uint64_t id, Job **out)
{
    Job *j = engine_find(e, id);
    int was_ready;

    *out = j;
    if (!j || j->state == JOB_RESERVED)
        return ENG_NOT_FOUND;
    /* A reserved job comes back ready after a crash; one taken from the
     * delayed or buried state must be logged as ready. */
    was_ready = j->state == JOB_READY;
    if ((!was_ready && binlog_reserve_state(e) < 0) || queue_reserve(e, by, j) < 0)
        return ENG_NO_MEMORY;
    if (!was_ready)
        binlog_state(e, j);
    return ENG_OK;
}

EngineResult engine_kick_job(Engine *e, uint64_t id)
{
    Job *j = engine_find(e, id);

    if (!j || (j->state != JOB_BURIED && j->state != JOB_DELAYED))
        return ENG_NOT_FOUND;
    if (binlog_reserve_state(e) < 0)
        return ENG_NO_MEMORY;
    if (queue_kick_job(e, j) < 0)
        return ENG_NOT_FOUND;
    binlog_state(e, j);
    return ENG_OK;
}

uint32_t engine_kick(Engine *e, Tube *t, uint32_t n)
{
    uint32_t k = 0;
    int buried;

    /* Only buried jobs if there are any, else only delayed ones; never an
     * expired one (engine_peek expires those on the way). Each kick is
     * logged; kicking stops when the log has no room. */
    tube_ref(t);
    buried = engine_peek(e, t, JOB_BURIED) != NULL;
    while (k < n) {
        Job *j = engine_peek(e, t, buried ? JOB_BURIED : JOB_DELAYED);

        if (!j || binlog_reserve_state(e) < 0 || queue_kick_job(e, j) < 0)
            break;
        binlog_state(e, j);
        k++;
    }
    tube_unref(&e->tubes, t);
    return k;
}

EngineResult engine_pause(Engine *e, Tube *t, uint32_t secs)
{
    return queue_pause(e, t, secs) < 0 ? ENG_NO_MEMORY : ENG_OK;
}

/* ---- the operator's commands ------------------------------------------ */

static int bury_heap_room(Engine *e)
{
    size_t cap = e->graves_cap ? e->graves_cap * 2 : 4;
    struct Grave *g = tb_realloc(e->graves, cap * sizeof *g);

    if (!g)
        return -1;
    e->graves = g;
    e->graves_cap = cap;
    return 0;
}

/* The ids of t's reserved jobs (they survive a flush). */
static uint64_t *reserved_ids(Engine *e, const Tube *t, uint32_t *n)
{
    uint64_t *ids = tb_malloc((t->reserved_ct + 1) * sizeof *ids);

    *n = 0;
    if (!ids)
        return NULL;
    for (size_t i = 0; i < e->ttr.len && *n < t->reserved_ct; i++) {
        const Job *j = e->ttr.items[i];
        if (j->tube == t)
            ids[(*n)++] = j->id;
    }
    return ids;
}


/* Hand heap h's jobs to the graveyard in O(1): the heap starts afresh. */
static int bury_heap(Engine *e, Heap *h)
{
    if (!h->len)
        return 0;
    if (e->ngraves == e->graves_cap && bury_heap_room(e) < 0)
        return -1;
    e->graves[e->ngraves++] = (struct Grave){h->items, h->len};
    hold_shrink(e, HOLD_GRAVE, 1); /* released when the graveyard is empty */
    e->grave_jobs += h->len;
    h->items = NULL;
    h->len = h->cap = 0;
    return 0;
}

static void free_grave_job(Engine *e, Job *j)
{
    Tube *t = j->tube;

    binlog_unpin(e, j);
    job_table_remove(&e->jobs, j);
    queue_job_free(e, j);
    tube_unref_grave(&e->tubes, t);
    e->grave_jobs--;
}

/* Free up to budget jobs of the graveyard; how many it freed. */
static uint64_t free_graves(Engine *e, uint64_t budget)
{
    uint64_t n = 0;
    List *l;

    while (n < budget && (l = list_first(&e->grave_buried))) {
        list_remove(l);
        free_grave_job(e, job_of_link(l));
        n++;
    }
    while (n < budget && e->ngraves) {
        struct Grave *g = &e->graves[e->ngraves - 1];
        while (n < budget && g->len) {
            free_grave_job(e, g->items[--g->len]);
            n++;
        }
        if (!g->len) {
            tb_free(g->items);
            e->ngraves--;
        }
    }
    if (!e->ngraves && list_empty(&e->grave_buried))
        hold_shrink(e, HOLD_GRAVE, 0);
    return n;
}

int64_t engine_flush_tube(Engine *e, Tube *t)
{
    uint64_t n, *keep;
    uint32_t nkeep;

    if (!(keep = reserved_ids(e, t, &nkeep)))
        return -1;
    /* Room first: two graveyard entries and the record, or nothing. */
    if ((e->ngraves + 2 > e->graves_cap && bury_heap_room(e) < 0) ||
        binlog_flush(e, t, e->next_id - 1, keep, nkeep,
                     t->ready.len + t->delay.len + t->buried_ct) < 0) {
        tb_free(keep);
        return -1;
    }
    n = t->ready.len + t->delay.len + t->buried_ct;
    tube_ref(t); /* its jobs leaving must not free it here */
    /* Every job leaves at once, however many: the ready and delayed heaps
     * and the buried list go to the graveyard and the counters drop now;
     * freeing the jobs is spread over the next loop iterations, so other
     * clients never wait for it. */
    e->jobs_ct.ready -= t->ready.len;
    e->jobs_ct.urgent -= t->urgent_ct;
    e->jobs_ct.delayed -= t->delay.len;
    e->jobs_ct.buried -= t->buried_ct;
    t->grave_refs += n; /* they hold it, invisibly */
    t->urgent_ct = 0;
    t->flushed_bury_seq = t->bury_seq;
    list_splice_tail(&e->grave_buried, &t->buried);
    e->grave_jobs += t->buried_ct;
    t->buried_ct = 0;
    if (n)
        hold_shrink(e, HOLD_GRAVE, 1); /* released when the graveyard is empty */
    bury_heap(e, &t->ready);
    bury_heap(e, &t->delay);
    t->cur_bytes = t->reserved_bytes;
    spill_tube_flushed(e, t);
    queue_ready_update(e, t);
    queue_expiry_reset(e, t);
    tube_timer_update(&e->tubes, t); /* its heaps are empty: never grows */
    tube_unref(&e->tubes, t);
    tb_free(keep);
    return (int64_t)n;
}

EngineResult engine_move_job(Engine *e, uint64_t id, Tube *dst)
{
    Job *j = engine_find(e, id);

    if (!j || j->state == JOB_RESERVED)
        return ENG_NOT_FOUND;
    if (j->tube == dst)
        return ENG_OK;
    return policy_move(e, j, dst, 0) < 0 ? ENG_FULL : ENG_OK;
}

/* Keep the `count` smallest ids >= from seen so far, in a max-heap. */
typedef struct {
    uint64_t *ids;
    uint32_t n, count;
    uint64_t from;
} Page;

static void page_sift(Page *p, uint32_t i)
{
    for (;;) {
        uint32_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < p->n && p->ids[l] > p->ids[m])
            m = l;
        if (r < p->n && p->ids[r] > p->ids[m])
            m = r;
        if (m == i)
            return;
        uint64_t x = p->ids[i];
        p->ids[i] = p->ids[m];
        p->ids[m] = x;
        i = m;
    }
}

static void page_offer(Page *p, uint64_t id)
{
    if (id < p->from)
        return;
    if (p->n < p->count) {
        uint32_t i = p->n++;
        p->ids[i] = id;
        while (i && p->ids[(i - 1) / 2] < p->ids[i]) { /* sift up */
            uint64_t x = p->ids[i];
            p->ids[i] = p->ids[(i - 1) / 2];
            p->ids[(i - 1) / 2] = x;
            i = (i - 1) / 2;
        }
    } else if (id < p->ids[0]) {
        p->ids[0] = id;
        page_sift(p, 0);
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* A job list-jobs shows for t and state (-1: any): t's, live, and not
 * past its expiry (a reserved one expires only when it comes back). */
static int listed(const Engine *e, const Job *j, const Tube *t, int state)
{
    int64_t exp;

    if (j->tube != t || job_dead(j) || (state >= 0 && (int)j->state != state))
        return 0;
    exp = queue_expiry_of(j);
    return j->state == JOB_RESERVED || e->passive || !exp || exp > e->now;
}

/* Offer the jobs of heap h that list-jobs shows for t. */
static void offer_heap(const Engine *e, Page *p, const Heap *h, const Tube *t)
{
    for (size_t i = 0; i < h->len; i++)
        if (listed(e, h->items[i], t, -1))
            page_offer(p, ((const Job *)h->items[i])->id);
}

/* Ids in ascending order straight from the job table: cheap when the tube
 * holds many of the ids from `from` on (consecutive ids share cache lines
 * of the table). Gives up (-1) after `budget` ids; else how many it found. */
static long list_by_id(const Engine *e, const Tube *t, int state, uint64_t from,
                       uint32_t count, uint64_t *out, uint64_t budget)
{
    uint32_t n = 0;

    for (uint64_t id = from ? from : 1; id < e->next_id && n < count; id++) {
        const Job *j;
        if (!budget--)
            return -1;
        if ((j = job_table_find(&e->jobs, id)) && listed(e, j, t, state))
            out[n++] = id;
    }
    return n;
}

/* Ids looked up before a page falls back to scanning the state's jobs. */
#define LIST_BUDGET 65536

uint32_t engine_list_jobs(Engine *e, Tube *t, int state, uint64_t from,
                          uint32_t count, uint64_t *out)
{
    Page p = {out, 0, count, from};
    size_t in_state = state == JOB_READY ? t->ready.len : state == JOB_DELAYED ? t->delay.len
                    : state == JOB_BURIED ? t->buried_ct : state == JOB_RESERVED ? t->reserved_ct
                    : t->ready.len + t->delay.len + t->buried_ct + t->reserved_ct;
    long n;

    /* A state with many jobs in this tube: walk the ids (each page is then
     * about `count` lookups when the tube's ids are dense). A rare state,
     * or ids spread thin among other tubes': scan that state's jobs. */
    if (in_state > LIST_BUDGET / 4 &&
        (n = list_by_id(e, t, state, from, count, out, LIST_BUDGET)) >= 0)
        return (uint32_t)n;

    /* A scan of the jobs of the state asked for, no more: a page of a rare
     * state is cheap even in a huge tube. Expired jobs are not listed (a
     * listing changes nothing, so they are not expired here either). */
    if (state < 0 || state == JOB_READY)
        offer_heap(e, &p, &t->ready, t);
    if (state < 0 || state == JOB_DELAYED)
        offer_heap(e, &p, &t->delay, t);
    if ((state < 0 || state == JOB_RESERVED) && t->reserved_ct)
        offer_heap(e, &p, &e->ttr, t);
    if (state < 0 || state == JOB_BURIED)
        for (List *l = t->buried.next; l != &t->buried; l = l->next)
            if (listed(e, job_of_link(l), t, -1))
                page_offer(&p, job_of_link(l)->id);
    qsort(out, p.n, sizeof *out, cmp_u64);
    return p.n;
}

uint64_t engine_oldest_ready_age(const Engine *e, const Tube *t)
{
    const Job *j = heap_top(&t->ready);
    const JobExt *x;
    int64_t since;

    if (!j)
        return 0;
    x = job_ext_view(j);
    since = x->ready_since ? x->ready_since : x->entered ? x->entered : j->created;
    return e->now > since ? (uint64_t)((e->now - since) / NS_PER_SEC) : 0;
}

uint64_t engine_pinning_job(const Engine *e)
{
    const Binlog *b = &e->binlog;
    uint32_t oldest;

    if (!b->enabled || b->nfiles < 2 || !b->files[0].live_jobs)
        return 0;
    oldest = b->files[0].index;
    for (size_t i = 0; i < e->jobs.nbuckets; i++)
        for (const HashNode *n = e->jobs.buckets[i]; n; n = n->next)
            if (container_of(n, Job, hnode)->file == oldest &&
                !job_dead(container_of(n, Job, hnode)))
                return container_of(n, Job, hnode)->id;
    return 0;
}

/* ---- tubes ------------------------------------------------------------ */

Tube *engine_tube(Engine *e, const char *name, size_t len)
{
    Tube *t = tubes_get(&e->tubes, name, len);

    if (t)
        policy_named(e, t);
    return t;
}

Tube *engine_tube_find(const Engine *e, const char *name, size_t len)
{
    return tubes_find(&e->tubes, name, len);
}

void engine_tube_ref(Tube *t)
{
    tube_ref(t);
}

void engine_tube_unref(Engine *e, Tube *t)
{
    tube_unref(&e->tubes, t);
}

/* ---- workers ---------------------------------------------------------- */

void worker_init(Engine *e, Worker *w, const WorkerOps *ops)
{
    Tube *t = e->default_tube;

    w->ops = ops;
    w->tickat = INT64_MAX;
    w->wait_until = INT64_MAX;
    list_init(&w->reserved);
    list_init(&w->wide_link);
    w->watch = &w->watch0;
    w->watch_cap = 1;
    w->nwatch = 1;
    w->watch0.tube = t;
    w->watch0.worker = w;
    list_init(&w->watch0.wait_link);
    tube_ref(t);
    t->watching_ct++;
}

void worker_release_all(Engine *e, Worker *w)
{
    List *n;

    while ((n = list_first(&w->reserved))) {
        Job *j = job_of_link(n);
        uint64_t id = j->id;

        queue_detach(e, j);
        if (queue_enqueue(e, j, 0) < 0)
            queue_bury(e, j);
        came_back(e, id);
    }
}

void worker_fini(Engine *e, Worker *w)
{
    worker_cancel(e, w);
    worker_release_all(e, w);
    watch_clear(e, w);
    if (w->watch != &w->watch0)
        tb_free(w->watch);
    w->watch = &w->watch0;
}
