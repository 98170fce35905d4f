#include "queue.h"

#include "binlog.h"
#include "clock.h"
#include "conn.h"
#include "reserve.h"

#define URGENT_THRESHOLD 1024

/* Keep t in the server's list of tubes with something to hand out iff it
 * has ready jobs and is not paused: a wide worker looks only there. */
static void ready_update(Server *s, Tube *t)
{
    int want = t->ready.len > 0 && !tube_paused(t);

    if (want == list_linked(&t->ready_link))
        return;
    if (want) {
        list_insert_tail(&s->ready_tubes, &t->ready_link);
        s->nready_tubes++;
    } else {
        list_remove(&t->ready_link);
        s->nready_tubes--;
    }
}

static void count_ready(Server *s, Job *j, int d)
{
    s->jobs_ct.ready += (uint64_t)(int64_t)d;
    if (j->pri < URGENT_THRESHOLD) {
        s->jobs_ct.urgent += (uint64_t)(int64_t)d;
        j->tube->urgent_ct += (uint64_t)(int64_t)d;
    }
}

void queue_detach(Server *s, Job *j)
{
    Tube *t = j->tube;

    switch (j->state) {
    case JOB_READY:
        heap_remove(&t->ready, j->heap_pos);
        count_ready(s, j, -1);
        ready_update(s, t);
        break;
    case JOB_DELAYED:
        heap_remove(&t->delay, j->heap_pos);
        s->jobs_ct.delayed--;
        tube_timer_update(&s->tubes, t); /* removal: cannot fail */
        break;
    case JOB_RESERVED:
        heap_remove(&s->ttr, j->heap_pos);
        list_remove(&j->ext->link);
        j->ext->owner = NULL;
        s->jobs_ct.reserved--;
        t->reserved_ct--;
        break;
    case JOB_BURIED:
        list_remove(&j->ext->link);
        s->jobs_ct.buried--;
        t->buried_ct--;
        break;
    }
}

/* Put a detached job in its tube's delay heap with the deadline it has. */
static int place_delayed(Server *s, Job *j)
{
    Tube *t = j->tube;

    if (heap_insert(&t->delay, j) < 0)
        return -1;
    if (tube_timer_update(&s->tubes, t) < 0) {
        heap_remove(&t->delay, j->heap_pos);
        return -1;
    }
    j->state = JOB_DELAYED;
    s->jobs_ct.delayed++;
    return 0;
}

static int enqueue_delayed(Server *s, Job *j, uint32_t delay)
{
    JobExt *e = job_ext_get(j);

    if (!e)
        return -1;
    e->deadline = s->now + (int64_t)delay * NS_PER_SEC;
    return place_delayed(s, j);
}

int queue_enqueue(Server *s, Job *j, uint32_t delay)
{
    Tube *t = j->tube;

    if (delay > 0)
        return enqueue_delayed(s, j, delay);
    if (heap_insert(&t->ready, j) < 0)
        return -1;
    j->state = JOB_READY;
    count_ready(s, j, 1);
    ready_update(s, t);
    reserve_serve(s, t);
    return 0;
}

void queue_bury(Server *s, Job *j)
{
    j->state = JOB_BURIED;
    list_insert_tail(&j->tube->buried, &j->ext->link);
    s->jobs_ct.buried++;
    j->tube->buried_ct++;
}

Job *queue_job_new(Server *s, uint64_t id, uint32_t body_size, int check_budget)
{
    Job *j;

    if (check_budget && s->cfg.job_memory &&
        s->job_bytes + job_cost(body_size) > s->cfg.job_memory)
        return NULL;
    j = job_alloc(id, body_size);
    if (j)
        s->job_bytes += job_cost(body_size);
    return j;
}

void queue_job_free(Server *s, Job *j)
{
    if (!j)
        return;
    s->job_bytes -= job_cost(j->body_size);
    job_free(j);
}

int queue_add(Server *s, Job *j, Tube *t)
{
    j->tube = t;
    tube_ref(t);
    job_table_insert(&s->jobs, j);
    if (queue_enqueue(s, j, job_ext_view(j)->delay) == 0) {
        t->total_jobs++;
        s->total_jobs++;
        return 0;
    }
    /* No room in the heap: bury it, which needs its JobExt; without even
     * that, take it back out whole. */
    if (!job_ext_get(j)) {
        job_table_remove(&s->jobs, j);
        j->tube = NULL;
        tube_unref(&s->tubes, t);
        return -2;
    }
    t->total_jobs++;
    s->total_jobs++;
    queue_bury(s, j);
    return -1;
}

void queue_delete(Server *s, Job *j)
{
    Tube *t = j->tube;

    queue_detach(s, j);
    job_table_remove(&s->jobs, j);
    queue_job_free(s, j);
    tube_unref(&s->tubes, t);
}

int queue_reserve(Server *s, Conn *c, Job *j)
{
    /* Make room in the TTR heap and get the JobExt first: they are the only
     * steps that can fail, and the job must stay where it was if they do. */
    JobExt *e = job_ext_get(j);

    if (!e || heap_reserve(&s->ttr, s->ttr.len + 1) < 0)
        return -1;
    queue_detach(s, j);
    e->deadline = s->now + (int64_t)j->ttr * NS_PER_SEC;
    heap_insert(&s->ttr, j); /* cannot fail now */
    j->state = JOB_RESERVED;
    e->owner = c;
    e->reserves++;
    list_insert_tail(&c->reserved, &e->link);
    s->jobs_ct.reserved++;
    j->tube->reserved_ct++;
    return 0;
}

void queue_touch(Server *s, Job *j)
{
    j->ext->deadline = s->now + (int64_t)j->ttr * NS_PER_SEC;
    heap_fix(&s->ttr, j->heap_pos);
}

int queue_kick_job(Server *s, Job *j)
{
    int was = j->state;

    if (was != JOB_BURIED && was != JOB_DELAYED)
        return -1;
    queue_detach(s, j);
    if (queue_enqueue(s, j, 0) < 0) {
        /* Put it back where it was; a delayed job whose heap cannot take it
         * back is buried rather than lost. */
        if (was == JOB_BURIED)
            queue_bury(s, j);
        else if (enqueue_delayed(s, j, 0) < 0)
            queue_bury(s, j);
        return -1;
    }
    j->ext->kicks++;
    return 0;
}

uint32_t queue_kick(Server *s, Tube *t, uint32_t n)
{
    uint32_t k = 0;

    int buried = !list_empty(&t->buried);

    /* Only buried jobs if there are any, else only delayed ones. Each kick
     * is logged; kicking stops when the log has no room. */
    while (k < n) {
        List *first = list_first(&t->buried);
        Job *j = buried ? (first ? job_of_link(first) : NULL)
                        : heap_top(&t->delay);

        if (!j || binlog_reserve_state(s) < 0 || queue_kick_job(s, j) < 0)
            break;
        binlog_state(s, j);
        k++;
    }
    return k;
}

int queue_pause(Server *s, Tube *t, uint32_t secs)
{
    int64_t old_pause = t->pause, old_at = t->unpause_at;

    t->pause = (int64_t)secs * NS_PER_SEC;
    t->unpause_at = s->now + t->pause;
    if (tube_timer_update(&s->tubes, t) < 0) {
        t->pause = old_pause;
        t->unpause_at = old_at;
        return -1;
    }
    t->cmd_pause++;
    ready_update(s, t);
    if (!t->pause)
        reserve_serve(s, t);
    return 0;
}

int queue_restore(Server *s, Job *j)
{
    if (j->state == JOB_BURIED) {
        queue_bury(s, j);
        return 0;
    }
    if (j->state == JOB_DELAYED)
        return place_delayed(s, j);
    return queue_enqueue(s, j, 0);
}

void queue_release_all(Server *s, Conn *c)
{
    List *n;

    while ((n = list_first(&c->reserved))) {
        Job *j = job_of_link(n);
        queue_detach(s, j);
        if (queue_enqueue(s, j, 0) < 0)
            queue_bury(s, j);
    }
}

/* Delays ending and pauses ending, tube by tube, earliest first. */
static void tick_tubes(Server *s)
{
    Tube *t;

    while ((t = heap_top(&s->tubes.timers)) && t->timer_at <= s->now) {
        Job *j;

        tube_ref(t); /* promoting its last job must not free it under us */
        while ((j = heap_top(&t->delay)) && j->ext->deadline <= s->now) {
            queue_detach(s, j);
            if (queue_enqueue(s, j, 0) < 0)
                queue_bury(s, j);
        }
        if (t->pause && t->unpause_at <= s->now) {
            t->pause = 0;
            ready_update(s, t);
            reserve_serve(s, t);
        }
        tube_timer_update(&s->tubes, t); /* never grows: t is in the heap */
        tube_unref(&s->tubes, t);
    }
}

/* TTRs running out: the job goes back to ready and counts a timeout. */
static void tick_ttrs(Server *s)
{
    Job *j;

    while ((j = heap_top(&s->ttr)) && j->ext->deadline <= s->now) {
        queue_detach(s, j);
        j->ext->timeouts++;
        s->job_timeouts++;
        if (queue_enqueue(s, j, 0) < 0)
            queue_bury(s, j);
    }
}

void queue_tick(Server *s)
{
    tick_tubes(s);
    tick_ttrs(s);
}

int64_t queue_next_due(const Server *s)
{
    int64_t due = INT64_MAX;
    const Tube *t = heap_top(&s->tubes.timers);
    const Job *j = heap_top(&s->ttr);

    if (t)
        due = t->timer_at;
    if (j && j->ext->deadline < due)
        due = j->ext->deadline;
    return due;
}
