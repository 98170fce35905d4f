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
        heap_remove(&e->ttr, j->heap_pos);
        list_remove(&j->ext->link);
        j->ext->owner = NULL;
        e->jobs_ct.reserved--;
        t->reserved_ct--;
        t->reserved_bytes -= j->body_size;
        break;
    case JOB_BURIED:
        list_remove(&j->ext->link);
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
    e->jobs_ct.delayed++;
    if (t->oldest)
        oldest_note(e, j);
    return 0;
}

static int enqueue_delayed(Engine *e, Job *j, uint32_t delay)
{
    JobExt *x = job_ext_get(j);

    if (!x)
        return -1;
    x->deadline = e->now + (int64_t)delay * NS_PER_SEC;
    return place_delayed(e, j);
}

int queue_enqueue(Engine *e, Job *j, uint32_t delay)
{
    Tube *t = j->tube;

    if (delay > 0)
        return enqueue_delayed(e, j, delay);
    if (heap_insert(&t->ready, j) < 0)
        return -1;
    if (j->ext)
        j->ext->ready_since = e->now;
    j->state = JOB_READY;
    count_ready(e, j, 1);
    if (t->oldest)
        oldest_note(e, j);
    queue_ready_update(e, t);
    e->on_ready(e, t);
    return 0;
}

void queue_bury(Engine *e, Job *j)
{
    j->state = JOB_BURIED;
    j->ext->bury_seq = ++j->tube->bury_seq;
    list_insert_tail(&j->tube->buried, &j->ext->link);
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
    if (n->ext)
        n->ext->job = n;
    if (n->state == JOB_READY)
        t->ready.items[n->heap_pos] = n;
    else if (n->state == JOB_DELAYED)
        t->delay.items[n->heap_pos] = n;
    if (n->ext && n->ext->expires)
        t->expiry.items[n->ext->exp_pos] = n;
    old->ext = NULL; /* n has it now */
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
    int64_t entered = x->entered ? x->entered : j->created, exp = x->exptime;
    uint64_t age = j->tube->pol.max_age_ms;

    if (age) {
        int64_t at = entered + (int64_t)age * NS_PER_MSEC;
        if (!exp || at < exp)
            exp = at;
    }
    return exp;
}

int queue_expiry_update(Engine *e, Job *j)
{
    Heap *h = &j->tube->expiry;
    /* A replica expires nothing (its primary's records do): its jobs stay
     * out of the expiry heaps until it is promoted. */
    int64_t exp = e->passive ? 0 : queue_expiry_of(j);
    JobExt *x = j->ext;

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
    if (j->ext && j->ext->expires) {
        heap_remove(&j->tube->expiry, j->ext->exp_pos);
        j->ext->expires = 0;
        tube_timer_update(&e->tubes, j->tube); /* removal: cannot fail */
    }
}

int queue_add(Engine *e, Job *j, Tube *t)
{
    j->tube = t;
    tube_ref(t);
    job_table_insert(&e->jobs, j);
    t->cur_bytes += j->body_size;
    if (queue_expiry_update(e, j) < 0) {
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
        if (rc == -2)
            spill_bury_damaged(e, j);
        return -1;
    }
    queue_detach(e, j);
    x->deadline = w->no_ttr ? INT64_MAX : e->now + (int64_t)j->ttr * NS_PER_SEC;
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
    j->ext->deadline = e->now + (int64_t)j->ttr * NS_PER_SEC;
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
    j->ext->kicks++;
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

int queue_restore(Engine *e, Job *j)
{
    j->tube->cur_bytes += j->body_size;
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
    if (j && j->ext->deadline < due)
        due = j->ext->deadline;
    return due;
}

void queue_expiry_reset(Engine *e, Tube *t)
{
    heap_free(&t->expiry);
    heap_init(&t->expiry, job_expiry_less, job_set_exp_pos);
    /* Its reserved jobs keep their expiry: back into the fresh heap. */
    for (size_t i = 0; i < e->ttr.len; i++) {
        Job *j = e->ttr.items[i];
        if (j->tube == t && j->ext->expires) {
            j->ext->expires = 0;
            queue_expiry_update(e, j);
        }
    }
}
