/*
 * syncer.h — fsync off the event loop.
 *
 * Contract: one helper thread whose only job is fdatasync(). The loop asks
 * for a sync of an fd with syncer_start() (at most one in flight: it
 * returns -1 while busy), goes on serving, and learns of the end through
 * syncer_fd(), an eventfd that becomes readable; syncer_finish() then
 * reads the result (0 or an errno) and makes the syncer idle again.
 * syncer_wait() blocks until an in-flight sync ends (needed before the fd
 * may be closed). The thread touches no server state at all.
 */
#ifndef TUBED_SYNCER_H
#define TUBED_SYNCER_H

#include <pthread.h>
#include <stdint.h>

typedef struct Syncer {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int efd;         /* readable when a sync has ended */
    int fd;          /* what to sync; -1 when there is no request */
    int busy;        /* a request is in flight (loop side) */
    int done;        /* the thread finished the request */
    int err;         /* its errno, 0 on success */
    int quit;
    int running;
    int (*sync_fn)(int fd); /* fdatasync, or a test's stand-in */
} Syncer;

int syncer_init(Syncer *y, int (*sync_fn)(int fd));
void syncer_stop(Syncer *y);
int syncer_start(Syncer *y, int fd);
/* After syncer_fd() was readable: 0 or the errno of the sync. */
int syncer_finish(Syncer *y);
/* syncer_finish() without waiting for the eventfd to be seen: 0 or the
 * errno of a sync that has ended, -1 (and no system call) while it runs
 * or when none was asked for. The eventfd may still wake the loop after
 * it; syncer_finish() then answers -1. */
int syncer_poll(Syncer *y);
/* Block until the in-flight sync (if any) ends; returns its result. */
int syncer_wait(Syncer *y);

#endif
