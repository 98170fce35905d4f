#include "syncer.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

/* The lock is never held across a wake-up (a signal, the eventfd): on
 * two cores the woken side runs at once, and finding the lock still
 * taken it would sleep on it again, a futex round trip that every fsync
 * of a -f 0 server (and every acknowledgement of its replicas) waits
 * through. */
static void *run(void *arg)
{
    Syncer *y = arg;

    pthread_mutex_lock(&y->mu);
    for (;;) {
        while (y->fd < 0 && !y->quit)
            pthread_cond_wait(&y->cv, &y->mu);
        if (y->quit)
            break;
        {
            int fd = y->fd, err;
            uint64_t one = 1;
            pthread_mutex_unlock(&y->mu);
            err = y->sync_fn(fd) < 0 ? errno : 0;
            pthread_mutex_lock(&y->mu);
            y->err = err;
            y->fd = -1;
            y->done = 1;
            pthread_mutex_unlock(&y->mu);
            pthread_cond_broadcast(&y->cv); /* syncer_wait() */
            /* A full counter cannot happen (the loop reads after each
             * sync); the loop also re-checks done, so a lost wake-up is
             * harmless. (syncer_stop() joins this thread before it
             * closes the eventfd or destroys the condition.) */
            if (write(y->efd, &one, sizeof one) < 0)
                (void)0;
            pthread_mutex_lock(&y->mu);
        }
    }
    pthread_mutex_unlock(&y->mu);
    return NULL;
}

int syncer_init(Syncer *y, int (*sync_fn)(int fd))
{
    sigset_t all, old;
    int rc;

    y->fd = -1;
    y->sync_fn = sync_fn;
    y->busy = y->done = y->err = y->quit = 0;
    y->running = 0;
    y->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (y->efd < 0)
        return -1;
    /* The thread starts with every signal blocked, so signals always reach
     * the loop's thread and never interrupt an fdatasync. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_mutex_init(&y->mu, NULL) || pthread_cond_init(&y->cv, NULL) ||
         pthread_create(&y->thread, NULL, run, y);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        close(y->efd);
        y->efd = -1;
        return -1;
    }
    y->running = 1;
    return 0;
}

void syncer_stop(Syncer *y)
{
    if (!y->running)
        return;
    syncer_wait(y);
    pthread_mutex_lock(&y->mu);
    y->quit = 1;
    pthread_cond_broadcast(&y->cv);
    pthread_mutex_unlock(&y->mu);
    pthread_join(y->thread, NULL);
    pthread_cond_destroy(&y->cv);
    pthread_mutex_destroy(&y->mu);
    close(y->efd);
    y->efd = -1;
    y->running = 0;
}

int syncer_start(Syncer *y, int fd)
{
    if (y->busy)
        return -1;
    pthread_mutex_lock(&y->mu);
    y->fd = fd;
    y->done = 0;
    pthread_mutex_unlock(&y->mu);
    pthread_cond_signal(&y->cv); /* (after the unlock: see run()) */
    y->busy = 1;
    return 0;
}

int syncer_finish(Syncer *y)
{
    uint64_t n;
    int err = -1;

    /* The eventfd only wakes the loop; whether a sync ended, and how, is
     * y->done and y->err. A failed read (none is expected but EAGAIN) must
     * not pass for a failed fsync: that would mark the binlog unhealthy. */
    if (read(y->efd, &n, sizeof n) < 0 && errno != EAGAIN)
        log_warn("binlog: reading the syncer's eventfd: %s", strerror(errno));
    pthread_mutex_lock(&y->mu);
    if (y->busy && y->done) {
        err = y->err;
        y->busy = 0;
        y->done = 0;
    }
    pthread_mutex_unlock(&y->mu);
    return err; /* -1: nothing had finished */
}

int syncer_poll(Syncer *y)
{
    int done;

    if (!y->busy)
        return -1;
    pthread_mutex_lock(&y->mu);
    done = y->done;
    pthread_mutex_unlock(&y->mu);
    return done ? syncer_finish(y) : -1;
}

int syncer_wait(Syncer *y)
{
    int err;

    if (!y->busy)
        return 0;
    pthread_mutex_lock(&y->mu);
    while (!y->done)
        pthread_cond_wait(&y->cv, &y->mu);
    err = y->err;
    y->busy = 0;
    y->done = 0;
    pthread_mutex_unlock(&y->mu);
    return err;
}
