#include "clock.h"

#include <time.h>

static int64_t read_clock(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * NS_PER_SEC + ts.tv_nsec;
}

int64_t clock_mono(void)
{
    return read_clock(CLOCK_MONOTONIC);
}

int64_t clock_wall(void)
{
    return read_clock(CLOCK_REALTIME);
}

int64_t clock_offset(ClockOffset *c, int64_t at)
{
    if (!c->have || c->at != at) {
        c->off = clock_wall() - clock_mono();
        c->at = at;
        c->have = 1;
    }
    return c->off;
}
