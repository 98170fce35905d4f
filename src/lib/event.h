/*
 * event.h — a tiny event loop over epoll. It knows nothing of the server.
 *
 * Contract: register an EvSource (a handler and its data) for an fd with a
 * level-triggered interest mask; ev_poll() waits up to timeout_ms (-1 for
 * ever) and calls each ready source's handler with the events that fired,
 * taking up to EV_BATCH events per wake-up. ev_poll() returns the number of
 * events handled, 0 on timeout or EINTR, -1 on a real error.
 *
 * Timers: ev_timer_set() arms an EvTimer for a monotonic time in ns
 * (clock.h); ev_poll() sleeps no later than the earliest one and, after
 * the handlers, calls those that are due (each disarmed first, so it may
 * arm itself again). Setting an armed timer moves it. Timers need no
 * memory and cannot fail; the loop keeps them in order in a list, which
 * suits the handful a server has.
 *
 * Posted callbacks (nginx's posted events): ev_post() queues an EvPost to
 * run once, after the handler that is running now returns (or at the next
 * ev_run_posted(), or at the start of the next ev_poll(), which then does
 * not sleep), in the order posted. Code deep inside an operation
 * posts what must happen after it, so it never calls back up. Posting an
 * EvPost that is already queued does nothing.
 */
#ifndef TUBED_EVENT_H
#define TUBED_EVENT_H

#include <stdint.h>
#include <sys/epoll.h>

#include "list.h"

#define EV_BATCH 512

typedef struct EvSource EvSource;
typedef void (*EvHandler)(EvSource *src, uint32_t events);

struct EvSource {
    EvHandler handler;
    int fd;
    uint32_t mask; /* current interest */
};

/* A callback to run after the current handler. */
typedef struct EvPost EvPost;
struct EvPost {
    void (*fn)(EvPost *p);
    EvPost *next;
    uint8_t queued;
};

/* A deadline: fn runs once the monotonic clock reaches at. */
typedef struct EvTimer EvTimer;
struct EvTimer {
    int64_t at;
    void (*fn)(EvTimer *t);
    List link;              /* EvLoop.timers, earliest first, when armed */
};

typedef struct EvLoop {
    int epfd;
    List timers;            /* armed EvTimers, earliest first */
    int64_t now;            /* the monotonic clock when epoll_wait returned */
    EvPost *posted, **posted_tail;  /* FIFO of queued EvPosts */
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
void ev_timer_init(EvTimer *t, void (*fn)(EvTimer *t));
/* Arm t for monotonic time at (ns); INT64_MAX disarms it. */
void ev_timer_set(EvLoop *l, EvTimer *t, int64_t at);
void ev_timer_stop(EvTimer *t);
void ev_post(EvLoop *l, EvPost *p);
/* Run every queued callback, and those they post, until none is left. */
void ev_run_posted(EvLoop *l);
/* Take p out of the queue, if it is there (its owner goes away). */
void ev_unpost(EvLoop *l, EvPost *p);

#endif
