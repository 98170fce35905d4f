#include "reserve.h"

#include "queue.h"
#include "watch.h"

static Job *better(Job *best, const Tube *t)
{
    Job *j = heap_top(&t->ready);

    return j && (!best || job_ready_less(j, best)) ? j : best;
}

Job *reserve_find(const Server *s, const Conn *c)
{
    Job *best = NULL;

    /* A wide worker looks at whichever is shorter: its watch list or the
     * tubes that have something to hand out. */
    if (watch_is_wide(c) && s->nready_tubes < c->nwatch) {
        for (List *n = s->ready_tubes.next; n != &s->ready_tubes; n = n->next) {
            Tube *t = container_of(n, Tube, ready_link);
            if (watch_find(c, t) >= 0)
                best = better(best, t);
        }
        return best;
    }
    for (uint32_t i = 0; i < c->nwatch; i++) {
        Tube *t = c->watch[i].tube;

        if (!tube_paused(t))
            best = better(best, t);
    }
    return best;
}

/* Earliest TTR deadline among c's reserved jobs, INT64_MAX if none.
 * Linear in the jobs this connection holds; only run when it reserves. */
static int64_t soonest_deadline(const Conn *c)
{
    int64_t soonest = INT64_MAX;

    for (List *n = c->reserved.next; n != &c->reserved; n = n->next) {
        const JobExt *e = container_of(n, JobExt, link);
        if (e->deadline < soonest)
            soonest = e->deadline;
    }
    return soonest;
}

static int deadline_soon(const Server *s, const Conn *c)
{
    int64_t soonest = soonest_deadline(c);

    return soonest != INT64_MAX && soonest <= s->now + SAFETY_MARGIN;
}

static int conn_tick_less(const void *a, const void *b)
{
    return ((const Conn *)a)->tickat < ((const Conn *)b)->tickat;
}

static void conn_tick_setpos(void *x, size_t pos)
{
    ((Conn *)x)->timer_pos = pos;
}

void reserve_init(Server *s)
{
    heap_init(&s->wait_timers, conn_tick_less, conn_tick_setpos);
}

void reserve_cancel(Server *s, Conn *c)
{
    if (c->state != CONN_WAIT)
        return;
    if (list_linked(&c->wide_link)) {
        list_remove(&c->wide_link);
    } else {
        for (uint32_t i = 0; i < c->nwatch; i++) {
            list_remove(&c->watch[i].wait_link);
            c->watch[i].tube->waiting_ct--;
        }
    }
    if (c->tickat != INT64_MAX)
        heap_remove(&s->wait_timers, c->timer_pos);
    c->tickat = INT64_MAX;
    s->waiting_ct--;
}

/* The wait is over; the reply follows, then buffered input resumes. */
static void end_wait(Server *s, Conn *c)
{
    reserve_cancel(s, c);
    conn_set_state(c, CONN_CMD);
}

static void reply_reserved(Server *s, Conn *c, Job *j)
{
    if (queue_reserve(s, c, j) < 0) {
        conn_reply_lit(c, "OUT_OF_MEMORY\r\n");
        return;
    }
    conn_reply_job(c, "RESERVED", j);
}

static void start_wait(Server *s, Conn *c, int64_t timeout)
{
    int64_t tick = timeout == INT64_MAX ? INT64_MAX : s->now + timeout;
    int64_t soonest = soonest_deadline(c);

    c->wait_until = tick;
    if (soonest != INT64_MAX && soonest - SAFETY_MARGIN < tick)
        tick = soonest - SAFETY_MARGIN;
    if (tick != INT64_MAX &&
        heap_reserve(&s->wait_timers, s->wait_timers.len + 1) < 0) {
        conn_reply_lit(c, "OUT_OF_MEMORY\r\n");
        return;
    }
    /* A wide worker waits once, server-wide, instead of in every tube it
     * watches: starting and ending its wait stays O(1). */
    if (watch_is_wide(c)) {
        list_insert_tail(&s->wide_waiters, &c->wide_link);
    } else {
        for (uint32_t i = 0; i < c->nwatch; i++) {
            list_insert_tail(&c->watch[i].tube->waiting, &c->watch[i].wait_link);
            c->watch[i].tube->waiting_ct++;
        }
    }
    c->wait_seq = ++s->wait_seq;
    c->tickat = tick;
    if (tick != INT64_MAX)
        heap_insert(&s->wait_timers, c); /* room was reserved */
    s->waiting_ct++;
    conn_set_state(c, CONN_WAIT);
}

void reserve_start(Server *s, Conn *c, int64_t timeout)
{
    Job *j = reserve_find(s, c);

    if (j) {
        reply_reserved(s, c, j);
        return;
    }
    if (deadline_soon(s, c)) {
        conn_reply_lit(c, "DEADLINE_SOON\r\n");
        return;
    }
    if (timeout == 0 || (c->flags & (CONN_RDHUP | CONN_EOF))) {
        conn_reply_lit(c, "TIMED_OUT\r\n");
        return;
    }
    start_wait(s, c, timeout);
}

/* The first wide waiter watching t, or NULL. */
static Conn *first_wide(const Server *s, const Tube *t)
{
    for (List *n = s->wide_waiters.next; n != &s->wide_waiters; n = n->next) {
        Conn *c = container_of(n, Conn, wide_link);
        if (watch_find(c, t) >= 0)
            return c;
    }
    return NULL;
}

/* The connection that has waited longest for a job of t. */
static Conn *next_waiter(const Server *s, const Tube *t)
{
    List *n = list_first(&t->waiting);
    Conn *narrow = n ? container_of(n, Watch, wait_link)->conn : NULL;
    Conn *wide = list_empty(&s->wide_waiters) ? NULL : first_wide(s, t);

    if (!narrow || (wide && wide->wait_seq < narrow->wait_seq))
        return wide;
    return narrow;
}

void reserve_serve(Server *s, Tube *t)
{
    Conn *c;

    if (tube_paused(t))
        return;
    while (t->ready.len && (c = next_waiter(s, t))) {
        end_wait(s, c);
        reply_reserved(s, c, heap_top(&t->ready));
    }
}

uint32_t reserve_tube_waiting(const Server *s, const Tube *t)
{
    uint32_t n = t->waiting_ct;

    for (List *l = s->wide_waiters.next; l != &s->wide_waiters; l = l->next)
        if (watch_find(container_of(l, Conn, wide_link), t) >= 0)
            n++;
    return n;
}

void reserve_tick(Server *s)
{
    Conn *c;

    while ((c = heap_top(&s->wait_timers)) && c->tickat <= s->now) {
        int soon = deadline_soon(s, c);

        end_wait(s, c);
        if (soon)
            conn_reply_lit(c, "DEADLINE_SOON\r\n");
        else
            conn_reply_lit(c, "TIMED_OUT\r\n");
    }
}

void reserve_hangup(Server *s, Conn *c)
{
    if (c->state != CONN_WAIT)
        return;
    end_wait(s, c);
    conn_reply_lit(c, "TIMED_OUT\r\n");
}

int64_t reserve_next_due(const Server *s)
{
    const Conn *c = heap_top(&s->wait_timers);

    return c ? c->tickat : INT64_MAX;
}
