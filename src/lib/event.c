#include "event.h"

#include <errno.h>
#include <unistd.h>

int ev_init(EvLoop *l)
{
    l->on_wake = NULL;
    l->wake_arg = NULL;
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

int ev_poll(EvLoop *l, int timeout_ms)
{
    int n = epoll_wait(l->epfd, l->events, EV_BATCH, timeout_ms);

    if (l->on_wake)
        l->on_wake(l->wake_arg);
    if (n < 0)
        return errno == EINTR ? 0 : -1;
    for (int i = 0; i < n; i++) {
        EvSource *src = l->events[i].data.ptr;
        src->handler(src, l->events[i].events);
    }
    return n;
}
