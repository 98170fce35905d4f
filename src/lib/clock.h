/*
 * clock.h — time sources.
 *
 * Contract: clock_mono() is CLOCK_MONOTONIC in nanoseconds and is the only
 * clock used for deadlines (delays, TTRs, reserve timeouts, pauses), so a
 * wall-clock step never fires or stalls a timer. clock_wall() is the
 * realtime clock in nanoseconds, for anything stored across restarts.
 */
#ifndef TUBED_CLOCK_H
#define TUBED_CLOCK_H

#include <stdint.h>

#define NS_PER_SEC  1000000000LL
#define NS_PER_MSEC 1000000LL

int64_t clock_mono(void);
int64_t clock_wall(void);

#endif
