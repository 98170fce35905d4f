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

/* Whole seconds left of ns, as beanstalkd shows a time left: it reads
 * its clock anew for each command, so one right after the command that
 * set the deadline (in the same packet) reads a little later and an exact
 * number of seconds shows one less; the loop's clock reads the same
 * instant for a whole packet. 0 once nothing is left. */
static inline int64_t clock_secs_left(int64_t ns)
{
    return ns > 0 ? (ns - 1) / NS_PER_SEC : 0;
}

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
