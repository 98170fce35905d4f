/*
 * syncwait.h — for unit tests that drive the binlog's fsync thread: wait
 * until the sync it is running has ended.
 *
 * The syncer's done flag, read under its lock, is the guide: its eventfd
 * may lag behind an end that binlog_poll_sync() already took. Fails the
 * test after about ten seconds.
 */
#ifndef TUBED_TEST_SYNCWAIT_H
#define TUBED_TEST_SYNCWAIT_H

#include <check.h>
#include <pthread.h>
#include <unistd.h>

#include "syncer.h"

static inline void wait_syncer_done(Syncer *y)
{
    for (int i = 0; i < 10000; i++) {
        int done;
        pthread_mutex_lock(&y->mu);
        done = y->done;
        pthread_mutex_unlock(&y->mu);
        if (done)
            return;
        usleep(1000);
    }
    ck_abort_msg("the sync did not end");
}

#endif
