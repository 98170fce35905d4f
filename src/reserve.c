#include "reserve.h"

#include "queue.h"

Job *reserve_find(const Server *s, const Conn *c)
{
    Job *best = NULL;

    (void)s;
    for (uint32_t i = 0; i < c->nwatch; i++) {
        Tube *t = c->watch[i].tube;
        Job *j;

        if (tube_paused(t))
            continue;
        j = heap_top(&t->ready);
        if (j && (!best || job_ready_less(j, best)))
            best = j;
    }
    return best;
}

/* Earliest TTR deadline among c's reserved jobs, INT64_MAX if none.
 * Linear in the jobs this connection holds; only run when it reserves. */
static int64_t soonest_deadline(const Conn *c)
{
    int64_t soonest = INT64_MAX;

    for (List *n = c->reserved.next; n != &c->reserved; n = n->next) {
        const Job *j = container_of(n, Job, link);
        if (j->deadline < soonest)
            soonest = j->deadline;
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
    for (uint32_t i = 0; i < c->nwatch; i++) {
        list_remove(&c->watch[i].wait_link);
        c->watch[i].tube->waiting_ct--;
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
    for (uint32_t i = 0; i < c->nwatch; i++) {
        list_insert_tail(&c->watch[i].tube->waiting, &c->watch[i].wait_link);
        c->watch[i].tube->waiting_ct++;
    }
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

void reserve_serve(Server *s, Tube *t)
{
    if (tube_paused(t))
        return;
    while (t->ready.len && !list_empty(&t->waiting)) {
        Watch *w = container_of(list_first(&t->waiting), Watch, wait_link);
        Conn *c = w->conn;

        end_wait(s, c);
        reply_reserved(s, c, heap_top(&t->ready));
    }
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
