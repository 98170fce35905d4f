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

/* Realtime less monotonic time, for converting times between the two
 * clocks (the binlog stores realtimes, the server runs on monotonic
 * ones). Both clocks are read together, and once per `at`: the caller
 * passes its loop iteration's time, so a burst of conversions costs one
 * pair of reads. Never pair `at` itself with a realtime read later: `at`
 * may be long past (a descheduled loop, a long replay), and every time
 * converted would be off by the gap. */
typedef struct ClockOffset {
    int64_t at, off;
    int have;
} ClockOffset;

int64_t clock_offset(ClockOffset *c, int64_t at);

#endif
