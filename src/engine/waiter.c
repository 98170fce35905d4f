#include "waiter.h"

#include "alloc.h"
#include "policy.h"
#include "queue.h"
#include "store.h"
#include "watch.h"

/* The next job t hands out: never one past its expiry (expired here, on
 * the way, so a worker never gets one even between two sweeps). */
static Job *ready_top(Engine *e, Tube *t)
{
    Job *j;

    while ((j = heap_top(&t->ready)) && policy_check(e, j))
        ;
    return j;
}

static Job *better(Engine *e, Job *best, Tube *t)
{
    Job *j = ready_top(e, t);

    return j && (!best || job_ready_less(j, best)) ? j : best;
}

Job *waiter_find(Engine *e, const Worker *w)
{
    Job *best = NULL;

    /* A wide worker looks at whichever is shorter: its watch list or the
     * tubes that have something to hand out. */
    if (watch_is_wide(w) && e->nready_tubes < w->nwatch) {
        for (List *n = e->ready_tubes.next; n != &e->ready_tubes;) {
            Tube *t = container_of(n, Tube, ready_link);
            n = n->next; /* expiring may take t out of the list */
            if (watch_find(w, t) >= 0)
                best = better(e, best, t);
        }
        return best;
    }
    for (uint32_t i = 0; i < w->nwatch; i++) {
        Tube *t = w->watch[i].tube;

        if (!tube_paused(t))
            best = better(e, best, t);
    }
    return best;
}

/* Earliest TTR deadline among w's reserved jobs, INT64_MAX if none.
 * Linear in the jobs this worker holds; only run when it reserves. */
static int64_t soonest_deadline(const Worker *w)
{
    int64_t soonest = INT64_MAX;

    for (List *n = w->reserved.next; n != &w->reserved; n = n->next) {
        const JobExt *x = container_of(n, JobExt, link);
        if (x->deadline < soonest)
            soonest = x->deadline;
    }
    return soonest;
}

static int deadline_soon(const Engine *e, const Worker *w)
{
    int64_t soonest = soonest_deadline(w);

    return soonest != INT64_MAX && soonest <= e->now + SAFETY_MARGIN;
}

static int worker_tick_less(const void *a, const void *b)
{
    return ((const Worker *)a)->tickat < ((const Worker *)b)->tickat;
}

static void worker_tick_setpos(void *x, size_t pos)
{
    ((Worker *)x)->timer_pos = pos;
}

/* ---- delivery after the operation -------------------------------------- */

/* t has a job to hand out (a put, a release, a delay or pause ending, a
 * body read back): note it, and serve its waiters once the operation is
 * over (engine_deliver), so no front-end code runs inside an engine
 * operation. A tube nobody waits on is not noted: a worker that starts
 * waiting later looks at its tubes itself (worker_reserve). */
static void post_ready(Engine *e, Tube *t)
{
    if (t->posted || (!t->waiting_ct && list_empty(&e->wide_waiters)))
        return;
    t->posted = 1;
    tube_ref(t); /* a job expiring meanwhile must not free it */
    list_insert_tail(&e->posted_tubes, &t->post_link);
    ev_post(e->loop, &e->deliver);
}

/* j became ready: besides posting its tube, note j itself while its tube
 * has a waiter for it, so engine_deliver() hands it out in turn. No more
 * notes per tube than it has waiters (a kick of a million, one worker);
 * without memory for a note the tube is still served, best job first. */
static void post_ready_job(Engine *e, Job *j)
{
    Tube *t = j->tube;

    post_ready(e, t);
    if (!t->posted || tube_paused(t) || t->fresh_ct >= t->waiting_ct + e->wide_ct)
        return;
    if (e->fresh_len == e->fresh_cap) {
        size_t cap = e->fresh_cap ? e->fresh_cap * 2 : 16;
        uint64_t *n = tb_realloc(e->fresh, cap * sizeof *n);
        if (!n)
            return;
        e->fresh = n;
        e->fresh_cap = cap;
    }
    e->fresh[e->fresh_len++] = j->id;
    t->fresh_ct++;
}

static void deliver_posted(EvPost *p)
{
    engine_deliver(container_of(p, Engine, deliver));
}

void waiter_init(Engine *e)
{
    heap_init(&e->wait_timers, worker_tick_less, worker_tick_setpos);
    list_init(&e->posted_tubes);
    list_init(&e->ended_waiters);
    e->deliver = (EvPost){.fn = deliver_posted};
    e->on_ready = post_ready;
    e->on_ready_job = post_ready_job;
}

static void serve_fresh(Engine *e, uint64_t id);
static Tube *best_posted(Engine *e);
static int serve_one(Engine *e, Tube *t);

static void unpost(Engine *e, Tube *t)
{
    list_remove(&t->post_link);
    t->posted = 0;
    t->fresh_ct = 0;
    tube_unref(&e->tubes, t);
}

/* What is left in the posted tubes (a pause ended, more jobs than notes)
 * goes out best job first across them, as 1.12's process_queue() hands
 * out the best job of any tube a worker waits on, again and again. A wake
 * may make more jobs ready (a memcache get closing the job it had open):
 * those tubes join the list and are served in turn. */
static void serve_posted(Engine *e)
{
    Tube *t;

    while ((t = best_posted(e)))
        if (!serve_one(e, t))
            unpost(e, t); /* served when the reader brings its body */
}

void engine_deliver(Engine *e)
{
    List *n;

    while ((n = list_first(&e->ended_waiters))) {
        Worker *w = container_of(n, Worker, end_link);
        list_remove(n);
        w->ops->wake(w, (WaitEnd)w->ended_how, NULL);
    }
    /* Jobs first, in the order they became ready (a wake may add more);
     * then what is left, best job first. */
    while (e->fresh_head < e->fresh_len)
        serve_fresh(e, e->fresh[e->fresh_head++]);
    e->fresh_head = e->fresh_len = 0;
    serve_posted(e);
}

void waiter_deliver_best(Engine *e)
{
    /* The jobs noted go out with the rest, by priority: they became ready
     * at the same moment as the paused tubes' jobs. */
    e->fresh_head = e->fresh_len = 0;
    engine_deliver(e);
}

void waiter_fini(Engine *e)
{
    List *n;

    ev_unpost(e->loop, &e->deliver);
    while ((n = list_first(&e->ended_waiters)))
        list_remove(n);
    while ((n = list_first(&e->posted_tubes))) {
        Tube *t = container_of(n, Tube, post_link);
        list_remove(n);
        t->posted = 0;
        t->fresh_ct = 0;
        tube_unref(&e->tubes, t);
    }
    tb_free(e->fresh);
    e->fresh = NULL;
    e->fresh_len = e->fresh_cap = e->fresh_head = 0;
}

/* ---- a tube's waiting workers, in beanstalkd's order ------------------ */

/* beanstalkd keeps a tube's waiting connections in a set whose removal
 * moves the last member into the hole, and hands a job to the member at a
 * cursor that moves on after each take (ms_take). The cursor stays where
 * it was between waits: after one take, the next of two waiting workers
 * served is the one that came last. Its clients see which connection gets
 * a job, so tubed keeps the same order for its narrow waiters. */

static int waitq_room(Tube *t)
{
    uint32_t cap;
    Watch **n;

    if (t->waitq_len < t->waitq_cap)
        return 0;
    cap = t->waitq_cap ? t->waitq_cap * 2 : 4;
    if (!(n = tb_realloc(t->waitq, cap * sizeof *n)))
        return -1;
    t->waitq = n;
    t->waitq_cap = cap;
    return 0;
}

static void waitq_add(Watch *wt)
{
    Tube *t = wt->tube;

    wt->wait_pos = t->waitq_len;
    t->waitq[t->waitq_len++] = wt;
    t->waiting_ct++;
    if (wt->worker->fifo)
        t->waitq_fcfs = 1;
}

static void waitq_del(Watch *wt)
{
    Tube *t = wt->tube;
    Watch *last = t->waitq[--t->waitq_len];

    t->waitq[wt->wait_pos] = last;
    last->wait_pos = wt->wait_pos;
    t->waiting_ct--;
    if (!t->waitq_len)
        t->waitq_fcfs = 0; /* nobody waits: beanstalkd's order again */
}

/* The narrow worker t hands its next job to, NULL if none: the one at the
 * cursor; or, once a fifo worker (a memcache get) waited on t and until
 * nobody waits there, the one that began to wait first (kestrel's
 * contract, spec kestrel.md §2: gets and the reserves waiting with them
 * are served in the order they started waiting, also the reserves still
 * waiting after the last get was served). */
static Worker *waitq_next(const Tube *t)
{
    Worker *first = NULL;

    if (!t->waitq_len)
        return NULL;
    if (!t->waitq_fcfs)
        return t->waitq[t->waitq_last % t->waitq_len]->worker;
    for (uint32_t i = 0; i < t->waitq_len; i++) {
        Worker *w = t->waitq[i]->worker;
        if (!first || w->wait_seq < first->wait_seq)
            first = w;
    }
    return first;
}

/* w takes a job of t: the cursor moves past w's place, as ms_take's does
 * (w leaves every set afterwards, worker_cancel). A worker served at once
 * took its place at the end of t's set and left it. */
static void waitq_took(Tube *t, const Worker *w)
{
    if (w->waiting && t->waitq_fcfs)
        return; /* served first come first served: no cursor */
    if (w->waiting && !list_linked(&w->wide_link))
        t->waitq_last = t->waitq_last % t->waitq_len + 1;
    else if (!w->waiting)
        t->waitq_last = t->waitq_last % (t->waitq_len + 1) + 1;
}

void worker_cancel(Engine *e, Worker *w)
{
    /* Its wait already ended but was not reported yet: it never will be. */
    if (list_linked(&w->end_link))
        list_remove(&w->end_link);
    if (!w->waiting)
        return;
    if (list_linked(&w->wide_link)) {
        list_remove(&w->wide_link);
        e->wide_ct--;
    } else {
        for (uint32_t i = 0; i < w->nwatch; i++)
            waitq_del(&w->watch[i]);
    }
    if (w->tickat != INT64_MAX)
        heap_remove(&e->wait_timers, w->timer_pos);
    w->tickat = INT64_MAX;
    w->waiting = 0;
    e->waiting_ct--;
}

/* Reserve j for w: WAIT_RESERVED, or WAIT_NO_MEMORY with nothing changed
 * (or with j buried, when its spilled body cannot be read). */
static int take(Engine *e, Worker *w, Job *j)
{
    return queue_reserve(e, w, j) < 0 ? WAIT_NO_MEMORY : WAIT_RESERVED;
}

static int start_wait(Engine *e, Worker *w, int64_t timeout)
{
    int64_t tick = timeout == INT64_MAX ? INT64_MAX : e->now + timeout;
    int64_t soonest = soonest_deadline(w);

    w->wait_until = tick;
    if (soonest != INT64_MAX && soonest - SAFETY_MARGIN < tick)
        tick = soonest - SAFETY_MARGIN;
    if (tick != INT64_MAX &&
        heap_reserve(&e->wait_timers, e->wait_timers.len + 1) < 0)
        return WAIT_NO_MEMORY;
    /* A worker watching very many tubes waits once, engine-wide, instead of
     * in every tube it watches: starting and ending its wait stays O(1). */
    if (watch_waits_wide(w)) {
        list_insert_tail(&e->wide_waiters, &w->wide_link);
        e->wide_ct++;
    } else {
        for (uint32_t i = 0; i < w->nwatch; i++)
            if (waitq_room(w->watch[i].tube) < 0)
                return WAIT_NO_MEMORY;
        for (uint32_t i = 0; i < w->nwatch; i++)
            waitq_add(&w->watch[i]);
    }
    w->wait_seq = ++e->wait_seq;
    w->tickat = tick;
    if (tick != INT64_MAX)
        heap_insert(&e->wait_timers, w); /* room was reserved */
    w->waiting = 1;
    e->waiting_ct++;
    return WAIT_PENDING;
}

int worker_reserve(Engine *e, Worker *w, int64_t timeout, Job **out)
{
    Job *j = waiter_find(e, w);

    *out = j;
    if (j) {
        /* Its body is on disk only (read-behind): a worker that may wait
         * waits for the reader thread rather than make everyone wait for
         * a read on the loop; it is served when the body is in. */
        if (timeout != 0 && w->nwatch == 1 && !deadline_soon(e, w) &&
            spill_fetch(e, j) > 0) {
            e->spill.waits++;
            *out = NULL;
            return start_wait(e, w, timeout);
        }
        if (take(e, w, j) != WAIT_RESERVED)
            return WAIT_NO_MEMORY;
        waitq_took(j->tube, w);
        return WAIT_RESERVED;
    }
    if (deadline_soon(e, w))
        return WAIT_DEADLINE_SOON;
    if (timeout == 0)
        return WAIT_TIMED_OUT;
    return start_wait(e, w, timeout);
}

/* The first wide waiter watching t, or NULL. */
static Worker *first_wide(const Engine *e, const Tube *t)
{
    for (List *n = e->wide_waiters.next; n != &e->wide_waiters; n = n->next) {
        Worker *w = container_of(n, Worker, wide_link);
        if (watch_find(w, t) >= 0)
            return w;
    }
    return NULL;
}

/* The worker t hands its next job to: the narrow one at t's cursor, or a
 * wide one that began to wait before it. */
static Worker *next_waiter(const Engine *e, const Tube *t)
{
    Worker *narrow = waitq_next(t);
    Worker *wide = list_empty(&e->wide_waiters) ? NULL : first_wide(e, t);

    if (!narrow || (wide && wide->wait_seq < narrow->wait_seq))
        return wide;
    return narrow;
}

/* w, t's next waiter, takes j: t's cursor moves on, w's wait ends, and
 * it is woken with the job. */
static void give(Engine *e, Tube *t, Worker *w, Job *j)
{
    waitq_took(t, w);
    worker_cancel(e, w);
    w->ops->wake(w, take(e, w, j), j);
}

/* The job that became ready goes to its tube's next waiter, as beanstalkd
 * hands a job out the moment it is ready. One
 * gone, taken or expired since, or in a tube paused or without a waiter,
 * is left to the posted tubes' serving (serve_posted). */
static void serve_fresh(Engine *e, uint64_t id)
{
    Job *j = job_table_find(&e->jobs, id);
    Worker *w;

    if (!j || job_dead(j) || j->state != JOB_READY || tube_paused(j->tube))
        return;
    if (!(w = next_waiter(e, j->tube)))
        return;
    if (policy_check(e, j) || spill_fetch(e, j) > 0)
        return;
    give(e, j->tube, w, j);
}

/* t's next waiter takes t's best job: 1, or 0 when that job's body is
 * being read back first (spill.h) or nobody or nothing is there. */
static int serve_one(Engine *e, Tube *t)
{
    Worker *w = next_waiter(e, t);
    Job *j = w ? ready_top(e, t) : NULL;

    if (!j)
        return 0;
    /* With bodies on disk only, w may wait although one of its tubes has
     * a job (spill_fetch): t's top is then not necessarily the best job
     * for a worker watching more. */
    if (w->nwatch > 1 && e->spill.jobs) {
        Job *best = waiter_find(e, w);
        if (best)
            j = best;
    } else if (spill_fetch(e, j) > 0) {
        return 0;
    }
    give(e, t, w, j);
    return 1;
}

/* The posted tube whose next job is the best that one of its waiters may
 * take, or NULL; tubes paused, or without a waiter or a job, leave the
 * list. Linear in the posted tubes, which are few: those with jobs left
 * after their waiters got the jobs noted for them. */
static Tube *best_posted(Engine *e)
{
    Tube *best = NULL;
    Job *bj = NULL;

    for (List *n = e->posted_tubes.next; n != &e->posted_tubes;) {
        Tube *t = container_of(n, Tube, post_link);
        Job *j = NULL;

        n = n->next;
        if (!tube_paused(t) && next_waiter(e, t))
            j = ready_top(e, t); /* may expire jobs, never t: posted holds it */
        if (!j) {
            unpost(e, t);
            continue;
        }
        if (!bj || job_ready_less(j, bj)) {
            best = t;
            bj = j;
        }
    }
    return best;
}

uint32_t engine_tube_waiting(const Engine *e, const Tube *t)
{
    uint32_t n = t->waiting_ct;

    for (List *l = e->wide_waiters.next; l != &e->wide_waiters; l = l->next)
        if (watch_find(container_of(l, Worker, wide_link), t) >= 0)
            n++;
    return n;
}

int waiter_due_before(const Engine *e, int64_t before)
{
    const Worker *w = heap_top(&e->wait_timers);

    return w && w->tickat <= e->now && w->tickat < before;
}

int waiter_pending(const Engine *e)
{
    return !list_empty(&e->ended_waiters) || e->fresh_head < e->fresh_len ||
           !list_empty(&e->posted_tubes);
}

void waiter_tick(Engine *e, int64_t before)
{
    while (waiter_due_before(e, before)) {
        Worker *w = heap_top(&e->wait_timers);
        int soon = deadline_soon(e, w);

        worker_cancel(e, w);
        /* Reported by engine_deliver(), after the tick. */
        w->ended_how = (uint8_t)(soon ? WAIT_DEADLINE_SOON : WAIT_TIMED_OUT);
        list_insert_tail(&e->ended_waiters, &w->end_link);
        ev_post(e->loop, &e->deliver);
    }
}

int64_t waiter_next_due(const Engine *e)
{
    const Worker *w = heap_top(&e->wait_timers);

    return w ? w->tickat : INT64_MAX;
}
