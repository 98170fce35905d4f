#include "engine.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "clock.h"
#include "grave.h"
#include "listjobs.h"
#include "log.h"
#include "oldest.h"
#include "policy.h"
#include "queue.h"
#include "shrink.h"
#include "store.h"
#include "waiter.h"
#include "watch.h"

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
    if (binlog_open(e, err, errlen) < 0 || policy_children_replayed(e, err, errlen) < 0 ||
        bsimport_unfinished(e, err, errlen) < 0)
        return -1;
    /* beanstalkd's jobs, once, into a binlog that has none yet; not into a
     * replica's, whose jobs are its primary's (the file's key may stay
     * there when a former primary restarts as a replica). */
    if (e->cfg->import_dir && e->cfg->replica_of) {
        log_warn("import_beanstalkd ignored: a replica takes its jobs from its primary");
        return 0;
    }
    return e->cfg->import_dir ? bsimport_run(e, e->cfg->import_dir, err, errlen) : 0;
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
    grave_fini(e);
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
    waiter_fini(e);
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

/* Expiries handled per loop iteration: a million jobs expiring at once are
 * swept in batches, with other clients served between them. */
#define EXPIRE_BATCH 1000

/* ---- delays ending, across tubes ---------------------------------------- */

/* Order of the merge below: by the deadline of each tube's next delayed
 * job (the tubes in it have one). */
static int delay_top_less(const void *a, const void *b)
{
    return job_deadline_less(heap_top(&((const Tube *)a)->delay),
                             heap_top(&((const Tube *)b)->delay));
}

static void merge_setpos(void *x, size_t pos)
{
    (void)x; /* only the top is ever taken or fixed */
    (void)pos;
}

static int delay_due(const Engine *e, const Tube *t)
{
    const Job *j = heap_top(&t->delay);

    return j && job_ext(j)->deadline <= e->now;
}

static int pause_due(const Engine *e, const Tube *t)
{
    return t->pause && t->unpause_at <= e->now;
}

/* The tubes for which due() holds (a delay ended, a pause ended), found
 * from the timers' root down through due entries only (a tube's timer is
 * never later than its next delay or its pause's end). */
static int gather(Engine *e, Heap *m, size_t i, int (*due)(const Engine *, const Tube *))
{
    const Heap *timers = &e->tubes.timers;
    Tube *t;

    if (i >= timers->len || (t = timers->items[i])->timer_at > e->now)
        return 0;
    if (due(e, t) && heap_insert(m, t) < 0)
        return -1;
    if (gather(e, m, 2 * i + 1, due) < 0)
        return -1;
    return gather(e, m, 2 * i + 2, due);
}

/* The first delayed job of t becomes ready (buried without memory). */
static void promote_top(Engine *e, Tube *t)
{
    Job *j = heap_top(&t->delay);

    queue_detach(e, j);
    if (queue_enqueue(e, j, 0) < 0)
        queue_bury(e, j);
}

/* Jobs whose delay ended become ready in deadline order across tubes, as
 * beanstalkd promotes them: a worker waiting on two tubes gets the job that
 * was due first, not the next one of the tube served first. Without memory
 * for the merge, tick_tubes() promotes tube by tube. */
static void promote_due(Engine *e)
{
    Heap m;
    Tube *t;

    heap_init(&m, delay_top_less, merge_setpos);
    if (gather(e, &m, 0, delay_due) < 0 || m.len < 2) {
        heap_free(&m);
        return;
    }
    while ((t = heap_top(&m))) {
        promote_top(e, t);
        if (delay_due(e, t))
            heap_fix(&m, 0);
        else
            heap_pop(&m);
    }
    heap_free(&m);
}

static int pause_less(const void *a, const void *b)
{
    return ((const Tube *)a)->unpause_at < ((const Tube *)b)->unpause_at;
}

/* The first delay ended, across tubes: its job becomes ready. */
static void promote_first(Engine *e)
{
    Heap m;
    Tube *t;

    heap_init(&m, delay_top_less, merge_setpos);
    if (gather(e, &m, 0, delay_due) == 0 && (t = heap_top(&m)))
        promote_top(e, t);
    heap_free(&m);
}

/* Pauses whose time came end together, before any job of this tick goes
 * out, as in 1.12: its first hand-out (after the first delay ended, or
 * the first pause) unpauses every tube whose time came, then hands the
 * waiters the best jobs across tubes, the first delayed job among them.
 * Later delays go out one by one, as they become ready. Without memory
 * to find them, tick_tubes() ends them tube by tube. */
static void end_pauses(Engine *e)
{
    Heap m;
    Tube *t;

    heap_init(&m, pause_less, merge_setpos);
    if (gather(e, &m, 0, pause_due) == 0 && m.len) {
        promote_first(e);
        while ((t = heap_top(&m))) {
            heap_pop(&m);
            t->pause = 0;
            queue_ready_update(e, t);
            e->on_ready(e, t);
            tube_timer_update(&e->tubes, t); /* never grows: t is in the heap */
        }
        waiter_deliver_best(e);
    }
    heap_free(&m);
}

/* Delays ending, pauses ending and jobs expiring, tube by tube, earliest
 * first (the delays of several tubes in deadline order, promote_due(),
 * after the pauses, end_pauses()). */
static void tick_tubes(Engine *e)
{
    uint64_t budget = EXPIRE_BATCH;
    Tube *t;

    end_pauses(e);
    promote_due(e);
    while (budget && (t = heap_top(&e->tubes.timers)) && t->timer_at <= e->now) {
        Job *j;

        tube_ref(t); /* promoting its last job must not free it under us */
        while ((j = heap_top(&t->delay)) && job_ext(j)->deadline <= e->now) {
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
    grave_hold_shrink(e, HOLD_SWEEP, budget == 0);
}

/* A TTR ran out: the job goes back to ready and counts a timeout; past
 * its tube's max_timeouts it is buried instead (a dead letter). */
static void time_out(Engine *e, Job *j)
{
    Tube *t = j->tube;
    uint32_t limit = t->pol.max_timeouts;

    queue_detach(e, j);
    job_ext(j)->timeouts++;
    e->job_timeouts++;
    t->total_timeouts++;
    if (limit && job_ext(j)->timeouts >= limit && binlog_reserve_state(e) == 0) {
        queue_bury(e, j);
        binlog_state(e, j);
        return;
    }
    if (queue_enqueue(e, j, 0) < 0)
        queue_bury(e, j);
}

/* A job whose TTR is over, kept by id: coming back, a job may expire
 * (max_age) and be freed, though only itself. */
typedef struct Over {
    int64_t deadline;
    uint64_t id;
} Over;

static int over_cmp(const void *a, const void *b)
{
    const Over *x = a, *y = b;

    if (x->deadline != y->deadline)
        return x->deadline < y->deadline ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* 1.12 ticks a connection once for all its jobs whose TTR is over: when
 * one late tick finds jobs of several workers over, a worker's jobs come
 * back together, in deadline order, at the moment of its first one, and
 * a waiter gets the first of them, then of the next worker's. Called when
 * another worker's job is next in the TTR heap; without memory the jobs
 * come back in deadline order across workers. */
static void time_out_rest(Engine *e, Worker *w)
{
    size_t n = 0, cap = 0;
    Over *v = NULL;

    for (List *l = w->reserved.next; l != &w->reserved; l = l->next) {
        const JobExt *x = container_of(l, JobExt, link);
        if (x->deadline > e->now)
            continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            Over *nv = tb_realloc(v, ncap * sizeof *nv);
            if (!nv)
                break;
            v = nv;
            cap = ncap;
        }
        v[n++] = (Over){x->deadline, x->job->id};
    }
    if (n > 1)
        qsort(v, n, sizeof *v, over_cmp);
    for (size_t i = 0; i < n; i++) {
        Job *j = job_table_find(&e->jobs, v[i].id);
        if (!j || j->state != JOB_RESERVED || job_ext(j)->owner != w)
            continue;
        time_out(e, j);
        came_back(e, v[i].id);
    }
    tb_free(v);
}

/* Waits ending and TTRs running out, in the order of their times, as
 * beanstalkd ticks its connections in the order of their deadlines: when
 * one late tick (a busy loop, a stopped process) finds a job whose TTR
 * ended before a waiting worker's timeout, the worker gets that job, not
 * TIMED_OUT. A tie goes to the job. Before a wait ends, the jobs that
 * came back before it go out (engine_deliver()); a wake made then never
 * starts a wait due already (worker_reserve() answers those at once), so
 * each round ends a wait, serves one or expires a job. */
static void tick_ttrs(Engine *e)
{
    for (;;) {
        Job *j = heap_top(&e->ttr);
        int64_t at = j && job_ext(j)->deadline <= e->now ? job_ext(j)->deadline
                                                         : INT64_MAX;
        Worker *w;
        uint64_t id;

        if (waiter_due_before(e, at)) {
            if (waiter_pending(e))
                engine_deliver(e);
            waiter_tick(e, at);
            continue;
        }
        if (at == INT64_MAX)
            return;
        id = j->id;
        w = job_ext(j)->owner;
        time_out(e, j);
        came_back(e, id);
        if (w && !list_empty(&w->reserved) && (j = heap_top(&e->ttr)) &&
            job_ext(j)->deadline <= e->now && job_ext(j)->owner != w)
            time_out_rest(e, w);
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
    /* Delays and pauses end first and their jobs go out at once, before
     * any wait times out, as in beanstalkd: a reserve-with-timeout 1 sent
     * just after a put with delay 1 gets that job, not TIMED_OUT, even
     * when both fall in this tick. Then waits end and TTRs expire in the
     * order of their times (tick_ttrs()): a worker waiting in reserve
     * hears DEADLINE_SOON before its job is taken back, its margin
     * starting a second before its TTR ends. */
    tick_tubes(e);
    engine_deliver(e);
    tick_ttrs(e);
    binlog_tick(e);
    grave_free(e, GRAVE_BATCH);
    trim_heap(e);
}

int64_t engine_next_due(const Engine *e)
{
    int64_t due = queue_next_due(e), w = waiter_next_due(e), b = binlog_next_due(e);

    if (grave_pending(e))
        return e->now; /* flushed jobs wait to be freed */
    /* A reload's spill goes on without clients, and what it placed is
     * written at once (engine_commit()). */
    if ((e->spill.shrinking && e->binlog.healthy) || e->binlog.wbuf.len)
        return e->now;
    if (w < due)
        due = w;
    return b < due ? b : due;
}

void engine_commit(Engine *e)
{
    binlog_commit(e);
    spill_after_commit(e);
    shrink_back(e);
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

uint64_t engine_repl_ticket(Engine *e)
{
    return binlog_repl_ticket(e);
}

int engine_all_written(const Engine *e)
{
    return !e->binlog.enabled || e->binlog.written_lsn == e->binlog.lsn;
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
        job_ext(j)->delay = delay;
    }
    /* The job goes in the table once its body is in: fetch its bucket now
     * so that insert does not wait on memory. */
    job_table_prefetch(&e->jobs, j->id);
    j->pri = pri;
    j->ttr = ttr ? ttr : 1;
    job_set_created(j, e->now);
    return j;
}

void engine_job_drop(Engine *e, Job *j)
{
    queue_job_free(e, j);
}

EngineResult engine_put(Engine *e, Job *j, Tube *t)
{
    int r;

    j->tube = t;
    /* Log room first: a put refused for want of it must not have
     * discarded old jobs to make room in t (their delete records need no
     * room of their own: every live job keeps some for its delete). */
    if (binlog_reserve_put(e, j) < 0)
        return ENG_NO_MEMORY;
    if (policy_make_room(e, t, j->body_size) < 0)
        return ENG_FULL;
    r = queue_add(e, j, t);
    if (r == -2)
        return ENG_NO_MEMORY;
    /* A waiting worker gets the job only after this put (engine_deliver),
     * so it is still here, in t, and its record goes before any record a
     * worker or an expiry on the way makes of it. */
    binlog_put(e, j);
    policy_fanout(e, t, j);
    return r < 0 ? ENG_BURIED : ENG_OK;
}

/* A job only this worker may act on as a worker. */
static Job *reserved_by(Engine *e, Worker *w, uint64_t id)
{
    Job *j = job_table_find(&e->jobs, id);

    return j && j->state == JOB_RESERVED && job_ext(j)->owner == w ? j : NULL;
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

    if (!j || (j->state == JOB_RESERVED && job_ext(j)->owner != by))
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
    job_ext(j)->delay = delay;
    job_ext(j)->releases++;
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
    job_ext(j)->buries++;
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

int64_t engine_flush_tube(Engine *e, Tube *t)
{
    return grave_flush_tube(e, t);
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

uint32_t engine_list_jobs(Engine *e, Tube *t, int state, uint64_t from,
                          uint32_t count, uint64_t *out)
{
    return listjobs_page(e, t, state, from, count, out);
}

uint64_t engine_oldest_ready_age(const Engine *e, const Tube *t)
{
    const Job *j = heap_top(&t->ready);
    const JobExt *x;
    int64_t since;

    if (!j)
        return 0;
    x = job_ext_view(j);
    since = x->ready_since ? x->ready_since : x->entered ? x->entered : job_created(j);
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

void engine_tube_unsubscribe(Engine *e, Tube *t)
{
    policy_unregister(e, t);
}

/* ---- workers ---------------------------------------------------------- */

void worker_init(Engine *e, Worker *w, const WorkerOps *ops)
{
    Tube *t = e->default_tube;

    w->ops = ops;
    list_init(&w->end_link);
    w->tickat = INT64_MAX;
    w->wait_until = INT64_MAX;
    list_init(&w->reserved);
    list_init(&w->wide_link);
    w->watch = &w->watch0;
    w->watch_cap = 1;
    w->nwatch = 1;
    w->watch0.tube = t;
    w->watch0.worker = w;
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
