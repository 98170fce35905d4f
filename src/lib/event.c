#include "event.h"

#include <errno.h>
#include <limits.h>
#include <unistd.h>

#include "clock.h"

int ev_init(EvLoop *l)
{
    l->on_wake = NULL;
    l->wake_arg = NULL;
    l->posted = NULL;
    l->posted_tail = &l->posted;
    list_init(&l->timers);
    l->now = clock_mono();
    l->epfd = epoll_create1(EPOLL_CLOEXEC);
    return l->epfd < 0 ? -1 : 0;
}

void ev_close(EvLoop *l)
{
    if (l->epfd >= 0)
        close(l->epfd);
    l->epfd = -1;
}

static int ctl(EvLoop *l, int op, EvSource *src, uint32_t mask)
{
    struct epoll_event ev = {.events = mask, .data.ptr = src};

    return epoll_ctl(l->epfd, op, src->fd, &ev);
}

int ev_add(EvLoop *l, EvSource *src, int fd, uint32_t mask)
{
    src->fd = fd;
    src->mask = mask;
    return ctl(l, EPOLL_CTL_ADD, src, mask);
}

int ev_set(EvLoop *l, EvSource *src, uint32_t mask)
{
    if (src->mask == mask)
        return 0;
    src->mask = mask;
    return ctl(l, EPOLL_CTL_MOD, src, mask);
}

int ev_del(EvLoop *l, EvSource *src)
{
    return ctl(l, EPOLL_CTL_DEL, src, 0);
}

/* ---- timers --------------------------------------------------------------- */

void ev_timer_init(EvTimer *t, void (*fn)(EvTimer *t))
{
    t->at = INT64_MAX;
    t->fn = fn;
    list_init(&t->link);
}

void ev_timer_stop(EvTimer *t)
{
    list_remove(&t->link);
    t->at = INT64_MAX;
}

void ev_timer_set(EvLoop *l, EvTimer *t, int64_t at)
{
    List *n;

    ev_timer_stop(t);
    if (at == INT64_MAX)
        return;
    t->at = at;
    /* From the back: a new deadline is most often the latest. */
    for (n = l->timers.prev; n != &l->timers; n = n->prev)
        if (container_of(n, EvTimer, link)->at <= at)
            break;
    list_insert_tail(n->next, &t->link); /* i.e. just after n */
}

/* Milliseconds to sleep: timeout_ms, or less if a timer is due sooner.
 * Rounded up: waking a little late is fine, early would spin. */
static int sleep_ms(const EvLoop *l, int timeout_ms)
{
    List *n = list_first(&l->timers);
    int64_t left, ms;

    if (!n || timeout_ms == 0)
        return timeout_ms;
    left = container_of(n, EvTimer, link)->at - clock_mono();
    ms = left <= 0 ? 0 : (left + NS_PER_MSEC - 1) / NS_PER_MSEC;
    if (ms > INT_MAX)
        ms = INT_MAX;
    return timeout_ms < 0 || ms < timeout_ms ? (int)ms : timeout_ms;
}

static void fire_timers(EvLoop *l)
{
    List *n;

    while ((n = list_first(&l->timers))) {
        EvTimer *t = container_of(n, EvTimer, link);
        if (t->at > l->now)
            break;
        ev_timer_stop(t);
        t->fn(t);
        ev_run_posted(l);
    }
}

/* ---- the loop ------------------------------------------------------------ */

int ev_poll(EvLoop *l, int timeout_ms)
{
    int n;

    /* What was posted outside a handler (the caller's own work between
     * two polls) runs before the loop sleeps; whatever it posts too. */
    if (l->posted) {
        ev_run_posted(l);
        timeout_ms = 0;
    }
    n = epoll_wait(l->epfd, l->events, EV_BATCH, sleep_ms(l, timeout_ms));
    l->now = clock_mono();
    if (l->on_wake)
        l->on_wake(l->wake_arg);
    if (n < 0) {
        if (errno != EINTR)
            return -1;
        n = 0;
    }
    for (int i = 0; i < n; i++) {
        EvSource *src = l->events[i].data.ptr;
        src->handler(src, l->events[i].events);
        ev_run_posted(l);
    }
    fire_timers(l);
    return n;
}

void ev_post(EvLoop *l, EvPost *p)
{
    if (p->queued)
        return;
    p->queued = 1;
    p->next = NULL;
    *l->posted_tail = p;
    l->posted_tail = &p->next;
}

void ev_run_posted(EvLoop *l)
{
    EvPost *p;

    while ((p = l->posted)) {
        if (!(l->posted = p->next))
            l->posted_tail = &l->posted;
        p->queued = 0;
        p->fn(p);
    }
}

void ev_unpost(EvLoop *l, EvPost *p)
{
    EvPost **pp = &l->posted;

    if (!p->queued)
        return;
    while (*pp != p)
        pp = &(*pp)->next;
    if (!(*pp = p->next))
        l->posted_tail = pp;
    p->queued = 0;
}
