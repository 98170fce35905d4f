/*
 * event.h — a tiny event loop over epoll. It knows nothing of the server.
 *
 * Contract: register an EvSource (a handler and its data) for an fd with a
 * level-triggered interest mask; ev_poll() waits up to timeout_ms (-1 for
 * ever) and calls each ready source's handler with the events that fired,
 * taking up to EV_BATCH events per wake-up. ev_poll() returns the number of
 * events handled, 0 on timeout or EINTR, -1 on a real error.
 */
#ifndef TUBED_EVENT_H
#define TUBED_EVENT_H

#include <stdint.h>
#include <sys/epoll.h>

#define EV_BATCH 512

typedef struct EvSource EvSource;
typedef void (*EvHandler)(EvSource *src, uint32_t events);

struct EvSource {
    EvHandler handler;
    int fd;
    uint32_t mask; /* current interest */
};

typedef struct EvLoop {
    int epfd;
    /* Called after every wake-up, before any handler, so handlers see a
     * fresh clock. */
    void (*on_wake)(void *arg);
    void *wake_arg;
    struct epoll_event events[EV_BATCH];
} EvLoop;

int ev_init(EvLoop *l);
void ev_close(EvLoop *l);
int ev_add(EvLoop *l, EvSource *src, int fd, uint32_t mask);
/* Change the interest mask; a no-op when it is unchanged. */
int ev_set(EvLoop *l, EvSource *src, uint32_t mask);
int ev_del(EvLoop *l, EvSource *src);
int ev_poll(EvLoop *l, int timeout_ms);

#endif
