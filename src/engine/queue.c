#include "queue.h"

#include <string.h>

#include "clock.h"
#include "oldest.h"
#include "spill.h"
#include "worker.h"

#define URGENT_THRESHOLD 1024

/* Keep t in the server's list of tubes with something to hand out iff it
 * has ready jobs and is not paused: a wide worker looks only there. */
void queue_ready_update(Engine *e, Tube *t)
{
    int want = t->ready.len > 0 && !tube_paused(t);

    if (want == list_linked(&t->ready_link))
        return;
    if (want) {
        list_insert_tail(&e->ready_tubes, &t->ready_link);
        e->nready_tubes++;
    } else {
        list_remove(&t->ready_link);
        e->nready_tubes--;
    }
}

static void count_ready(Engine *e, Job *j, int d)
{
    e->jobs_ct.ready += (uint64_t)(int64_t)d;
    if (j->pri < URGENT_THRESHOLD) {
        e->jobs_ct.urgent += (uint64_t)(int64_t)d;
        j->tube->urgent_ct += (uint64_t)(int64_t)d;
    }
}

void queue_detach(Engine *e, Job *j)
{
    Tube *t = j->tube;

    switch (j->state) {
    case JOB_READY:
        heap_remove(&t->ready, j->heap_pos);
        count_ready(e, j, -1);
        queue_ready_update(e, t);
        break;
    case JOB_DELAYED:
        heap_remove(&t->delay, j->heap_pos);
        e->jobs_ct.delayed--;
        tube_timer_update(&e->tubes, t); /* removal: cannot fail */
        break;
    case JOB_RESERVED:
        /* A spilled job's body may go again once it is back in its tube
         * (released, buried, timed out) and the tube is over budget. */
        if (j->spilled)
            spill_note(e, j);
        else if (t->pol.max_memory_size)
            spill_note_back(e, j); /* kept in memory while reserved */
        heap_remove(&e->ttr, j->heap_pos);
        list_remove(&job_ext(j)->link);
        job_ext(j)->owner = NULL;
        e->jobs_ct.reserved--;
        t->reserved_ct--;
        t->reserved_bytes -= j->body_size;
        break;
    case JOB_BURIED:
        list_remove(&job_ext(j)->link);
        e->jobs_ct.buried--;
        t->buried_ct--;
        break;
    }
}

/* Put a detached job in its tube's delay heap with the deadline it has. */
static int place_delayed(Engine *e, Job *j)
{
    Tube *t = j->tube;

    if (heap_insert(&t->delay, j) < 0)
        return -1;
    if (tube_timer_update(&e->tubes, t) < 0) {
        heap_remove(&t->delay, j->heap_pos);
        return -1;
    }
    j->state = JOB_DELAYED;
    /* Its body in the job: it may have to make room (spill_yield()). A
     * spilled one's body goes by spill_note() already. */
    if (!j->spilled)
        t->parked_mem = 1;
    e->jobs_ct.delayed++;
    if (t->oldest)
        oldest_note(e, j);
    return 0;
}

/* The time a new delay or TTR deadline counts from.  Every command of one
 * wake-up sees the same e->now, while beanstalkd reads the clock per
 * command: there a job released with delay 5 after one put with delay 5
 * comes due after it, whatever their ids.  Bases that strictly increase
 * keep that order; equal deadlines would fall back to the job id. */
static int64_t deadline_base(Engine *e)
{
    e->stamp = e->now > e->stamp ? e->now : e->stamp + 1;
    return e->stamp;
}

static int enqueue_delayed(Engine *e, Job *j, uint32_t delay)
{
    JobExt *x = job_ext_get(j);

    if (!x)
        return -1;
    x->deadline = deadline_base(e) + (int64_t)delay * NS_PER_SEC;
    return place_delayed(e, j);
}

int queue_enqueue(Engine *e, Job *j, uint32_t delay)
{
    Tube *t = j->tube;

    if (delay > 0)
        return enqueue_delayed(e, j, delay);
    if (heap_insert(&t->ready, j) < 0)
        return -1;
    if (job_ext(j))
        job_ext(j)->ready_since = e->now;
    j->state = JOB_READY;
    if (j->spilled && !j->loaded)
        spill_ready(e, j); /* a delay ended, a kick: read it ahead now */
    count_ready(e, j, 1);
    if (t->oldest)
        oldest_note(e, j);
    queue_ready_update(e, t);
    e->on_ready_job(e, j);
    return 0;
}

void queue_bury(Engine *e, Job *j)
{
    j->state = JOB_BURIED;
    if (!j->spilled)
        j->tube->parked_mem = 1; /* as place_delayed() */
    job_ext(j)->bury_seq = ++j->tube->bury_seq;
    list_insert_tail(&j->tube->buried, &job_ext(j)->link);
    e->jobs_ct.buried++;
    j->tube->buried_ct++;
    if (j->tube->oldest)
        oldest_note(e, j);
}

Job *queue_job_new(Engine *e, uint64_t id, uint32_t body_size, int check_budget)
{
    Job *j;

    if (check_budget && e->cfg->job_memory &&
        e->job_bytes + job_cost(body_size) > e->cfg->job_memory)
        return NULL;
    j = job_alloc(id, body_size);
    if (j)
        e->job_bytes += job_cost(body_size);
    return j;
}

Job *queue_job_new_spilled(Engine *e, uint64_t id, uint32_t body_size, int check_budget,
                           int with_body, uint64_t off)
{
    Job *j;

    if (check_budget && e->cfg->job_memory &&
        e->job_bytes + job_spilled_cost() > e->cfg->job_memory)
        return NULL;
    j = job_alloc_spilled(id, body_size, with_body, off);
    if (j)
        e->job_bytes += job_spilled_cost();
    return j;
}

Job *queue_job_new_for(Engine *e, const Tube *t, uint64_t id, uint32_t body_size,
                       int check_budget)
{
    if (spill_wanted(e, t, body_size))
        return queue_job_new_spilled(e, id, body_size, check_budget, 1, 0);
    return queue_job_new(e, id, body_size, check_budget);
}

void queue_relocate(Engine *e, Job *old, Job *n)
{
    Tube *t = old->tube;

    /* The header is old's; the slot after it (n's body) is n's own. */
    memcpy(n, old, offsetof(Job, body));
    n->spilled = 1;
    n->loaded = 1;
    n->reading = 0;
    job_table_remove(&e->jobs, old);
    job_table_insert(&e->jobs, n);
    if (job_ext(n))
        job_ext(n)->job = n;
    if (n->state == JOB_READY)
        t->ready.items[n->heap_pos] = n;
    else if (n->state == JOB_DELAYED)
        t->delay.items[n->heap_pos] = n;
    if (job_ext(n) && job_ext(n)->expires)
        t->expiry.items[job_ext(n)->exp_pos] = n;
    job_ext_forget(old); /* n has it now */
    queue_job_free(e, old);
}

void queue_job_free(Engine *e, Job *j)
{
    if (!j)
        return;
    e->job_bytes -= job_mem(j);
    spill_freed(e, j);
    job_free(j);
}

int64_t queue_expiry_of(const Job *j)
{
    const JobExt *x = job_ext_view(j);
    int64_t entered = x->entered ? x->entered : job_created(j), exp = x->exptime;
    uint64_t age = j->tube->pol.max_age_ms;

    if (age) {
        int64_t at = entered + (int64_t)age * NS_PER_MSEC;
        if (!exp || at < exp)
            exp = at;
    }
    return exp;
}

int queue_age_valid(void *ctx, const AgeEntry *a)
{
    const AgeCtx *c = ctx;
    const Job *j = job_table_find(&c->e->jobs, a->id);

    return j && j->tube == c->t && !job_dead(j) && queue_age_member(j);
}

/* Compaction steps of a tube's age ring per put: enough to keep up with a
 * ring whose every entry goes stale (puts that are deleted at once). */
#define AGE_STEPS 4

/* A fresh job of t that expires at created + max_age goes in t's age
 * ring; 0, or -1 (nothing changed) when out of memory. */
static int age_join(Engine *e, Job *j)
{
    Tube *t = j->tube;
    AgeCtx c = {e, t};
    const AgeEntry *f = age_ring_front(&t->age);
    uint64_t front = f ? f->id : 0;

    if (age_ring_push(&t->age, j->id, job_created(j), queue_age_valid, &c, AGE_STEPS) < 0)
        return -1;
    /* The tube's timer follows the front: this job's, or a later one if
     * the compaction dropped stale entries there. Only a tube whose ring
     * was empty is not timed yet and may fail to be (then the ring is
     * empty again). */
    if (age_ring_front(&t->age)->id != front && tube_timer_update(&e->tubes, t) < 0) {
        age_ring_unpush(&t->age);
        return -1;
    }
    return 0;
}

int queue_expiry_update(Engine *e, Job *j)
{
    Heap *h = &j->tube->expiry;
    int64_t exp;
    JobExt *x = job_ext(j);

    if (queue_age_member(j))
        return 0;
    /* A replica expires nothing (its primary's records do): its jobs stay
     * out of the expiry heaps until it is promoted. */
    exp = e->passive ? 0 : queue_expiry_of(j);

    if (!exp) {
        if (x && x->expires) {
            heap_remove(h, x->exp_pos);
            x->expires = 0;
            tube_timer_update(&e->tubes, j->tube); /* removal: cannot fail */
        }
        return 0;
    }
    if (!x && !(x = job_ext_get(j)))
        return -1;
    if (x->expires) {
        /* A new time (a reload changed max_age): the tube's timer follows,
         * or a shorter max_age would wait for the old, later time. The
         * tube is timed already: a fix, which cannot fail. */
        x->expires = exp;
        heap_fix(h, x->exp_pos);
        return tube_timer_update(&e->tubes, j->tube);
    }
    x->expires = exp;
    if (heap_insert(h, j) < 0) {
        x->expires = 0;
        return -1;
    }
    if (tube_timer_update(&e->tubes, j->tube) < 0) {
        /* No room to time the tube: out of the heap again, or a job the
         * caller then frees (a failed put) would be left in it. */
        heap_remove(h, x->exp_pos);
        x->expires = 0;
        return -1;
    }
    return 0;
}

void queue_expiry_remove(Engine *e, Job *j)
{
    if (queue_age_member(j)) {
        /* Its entry goes stale; the ring finds that out by itself. */
        age_ring_left(&j->tube->age);
        return;
    }
    if (job_ext(j) && job_ext(j)->expires) {
        heap_remove(&j->tube->expiry, job_ext(j)->exp_pos);
        job_ext(j)->expires = 0;
        tube_timer_update(&e->tubes, j->tube); /* removal: cannot fail */
    }
}

/* A fresh job takes its place in its tube's expiry, if it has one: the
 * age ring when it expires max_age after it was made, else the heap. */
static int expiry_join(Engine *e, Job *j)
{
    JobExt *x = job_ext(j);

    if (j->tube->pol.max_age_ms && (!x || (!x->exptime && !x->entered))) {
        if (x)
            x->unaged = 0;
        return age_join(e, j);
    }
    if (x)
        x->unaged = 1;
    return queue_expiry_update(e, j);
}

int queue_add(Engine *e, Job *j, Tube *t)
{
    j->tube = t;
    tube_ref(t);
    job_table_insert(&e->jobs, j);
    t->cur_bytes += j->body_size;
    if (expiry_join(e, j) < 0) {
        t->cur_bytes -= j->body_size;
        job_table_remove(&e->jobs, j);
        j->tube = NULL;
        tube_unref(&e->tubes, t);
        return -2;
    }
    if (queue_enqueue(e, j, job_ext_view(j)->delay) == 0) {
        t->total_jobs++;
        e->total_jobs++;
        return 0;
    }
    /* No room in the heap: bury it, which needs its JobExt; without even
     * that, take it back out whole. */
    if (!job_ext_get(j)) {
        queue_expiry_remove(e, j);
        t->cur_bytes -= j->body_size;
        job_table_remove(&e->jobs, j);
        j->tube = NULL;
        tube_unref(&e->tubes, t);
        return -2;
    }
    t->total_jobs++;
    e->total_jobs++;
    queue_bury(e, j);
    return -1;
}

void queue_delete(Engine *e, Job *j)
{
    Tube *t = j->tube;

    queue_detach(e, j);
    queue_expiry_remove(e, j);
    spill_forget(e, j);
    t->cur_bytes -= j->body_size;
    job_table_remove(&e->jobs, j);
    queue_job_free(e, j);
    tube_unref(&e->tubes, t);
}

int queue_reserve(Engine *e, Worker *w, Job *j)
{
    /* Make room in the TTR heap and get the JobExt first: they are the only
     * steps that can fail, and the job must stay where it was if they do. */
    JobExt *x = job_ext_get(j);
    int rc;

    if (!x || heap_reserve(&e->ttr, e->ttr.len + 1) < 0)
        return -1;
    /* A reserved job's body is in memory (spill.h): read it now if the
     * read-ahead has not; a record that cannot be read buries the job. */
    if ((rc = spill_load(e, j)) < 0) {
        /* Damage, or a disk that fails the read: buried (kept, and the
         * jobs behind it served); a server short of descriptors: later. */
        if (rc == -2 || rc == -4)
            spill_bury_damaged(e, j);
        return -1;
    }
    queue_detach(e, j);
    x->deadline = w->no_ttr ? INT64_MAX : deadline_base(e) + (int64_t)j->ttr * NS_PER_SEC;
    heap_insert(&e->ttr, j); /* cannot fail now */
    j->state = JOB_RESERVED;
    x->owner = w;
    x->reserves++;
    list_insert_tail(&w->reserved, &x->link);
    e->jobs_ct.reserved++;
    j->tube->reserved_ct++;
    j->tube->reserved_bytes += j->body_size;
    return 0;
}

void queue_touch(Engine *e, Job *j)
{
    job_ext(j)->deadline = deadline_base(e) + (int64_t)j->ttr * NS_PER_SEC;
    heap_fix(&e->ttr, j->heap_pos);
}

int queue_kick_job(Engine *e, Job *j)
{
    int was = j->state;

    if (was != JOB_BURIED && was != JOB_DELAYED)
        return -1;
    queue_detach(e, j);
    if (queue_enqueue(e, j, 0) < 0) {
        /* Put it back where it was; a delayed job whose heap cannot take it
         * back is buried rather than lost. */
        if (was == JOB_BURIED)
            queue_bury(e, j);
        else if (enqueue_delayed(e, j, 0) < 0)
            queue_bury(e, j);
        return -1;
    }
    job_ext(j)->kicks++;
    return 0;
}

int queue_pause(Engine *e, Tube *t, uint32_t secs)
{
    int64_t old_pause = t->pause, old_at = t->unpause_at;

    t->pause = (int64_t)secs * NS_PER_SEC;
    t->unpause_at = e->now + t->pause;
    if (tube_timer_update(&e->tubes, t) < 0) {
        t->pause = old_pause;
        t->unpause_at = old_at;
        return -1;
    }
    t->cmd_pause++;
    queue_ready_update(e, t);
    if (!t->pause)
        e->on_ready(e, t);
    return 0;
}

/* Can a restored job join its tube's age ring? It must expire max_age
 * after it was made (no client expiry, no restarted clock) and come no
 * earlier than the ring's newest entry, so the ring stays in expiry order.
 * Replay restores jobs in id order, which is creation order: a backlog's
 * jobs all join, with no JobExt each. A replica's jobs (passive) take the
 * heap's side, as they did. */
static int restore_aged(const Engine *e, const Job *j)
{
    const JobExt *x = job_ext(j);
    const AgeEntry *last = age_ring_back(&j->tube->age);

    return !e->passive && (!x || (!x->exptime && !x->entered)) &&
           (!last || last->created <= job_created(j));
}

int queue_restore(Engine *e, Job *j)
{
    JobExt *x = job_ext(j);

    j->tube->cur_bytes += j->body_size;
    if (j->tube->pol.max_age_ms) {
        if (restore_aged(e, j)) {
            if (x)
                x->unaged = 0;
            if (age_join(e, j) < 0)
                return -1;
            return queue_place(e, j);
        }
        if (!(x = job_ext_get(j)))
            return -1;
        x->unaged = 1;
    }
    if (queue_expiry_update(e, j) < 0)
        return -1;
    return queue_place(e, j);
}

int queue_place(Engine *e, Job *j)
{
    if (j->state == JOB_BURIED) {
        queue_bury(e, j);
        return 0;
    }
    if (j->state == JOB_DELAYED)
        return place_delayed(e, j);
    return queue_enqueue(e, j, 0);
}


int64_t queue_next_due(const Engine *e)
{
    int64_t due = INT64_MAX;
    const Tube *t = heap_top(&e->tubes.timers);
    const Job *j = heap_top(&e->ttr);

    if (t)
        due = t->timer_at;
    if (j && job_ext(j)->deadline < due)
        due = job_ext(j)->deadline;
    return due;
}

void queue_expiry_reset(Engine *e, Tube *t)
{
    heap_free(&t->expiry);
    heap_init(&t->expiry, job_expiry_less, job_set_exp_pos);
    age_ring_clear(&t->age);
    t->age_retry_at = 0;
    /* Its reserved jobs keep their expiry: back into the fresh heap (an
     * age member too: the ring is gone). */
    for (size_t i = 0; i < e->ttr.len; i++) {
        Job *j = e->ttr.items[i];
        if (j->tube == t && (job_ext(j)->expires || queue_age_member(j))) {
            job_ext(j)->expires = 0;
            job_ext(j)->unaged = 1;
            queue_expiry_update(e, j);
        }
    }
}
