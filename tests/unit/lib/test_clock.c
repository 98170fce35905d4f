/* Unit tests for clock.c: clock_offset() reads both clocks once per `at`
 * and pairs them with each other, never with the `at` it was given. */
#include <stdint.h>
#include <time.h>

#include "clock.h"
#include "unit.h"

static int64_t llabs64(int64_t v)
{
    return v < 0 ? -v : v;
}

START_TEST(offset_is_realtime_less_monotonic)
{
    ClockOffset c = {0};
    int64_t want = clock_wall() - clock_mono();

    ck_assert_int_lt(llabs64(clock_offset(&c, 5) - want), NS_PER_SEC);
}
END_TEST

START_TEST(offset_is_read_once_per_at)
{
    ClockOffset c = {0};
    int64_t first = clock_offset(&c, 7);
    struct timespec ms = {0, 2 * NS_PER_MSEC};

    /* The same `at`: the cached pair, however much time passed (a
     * realtime step meanwhile would show otherwise). */
    nanosleep(&ms, NULL);
    ck_assert_int_eq(clock_offset(&c, 7), first);
    ck_assert_int_eq(c.at, 7);
    /* A new `at`: read again. */
    c.off = first + 12345;
    ck_assert_int_ne(clock_offset(&c, 8), first + 12345);
    ck_assert_int_eq(c.at, 8);
}
END_TEST

/* The bug this replaced: an `at` from long ago (a loop descheduled, a long
 * replay) paired with a realtime read now put every converted time off by
 * the gap. The offset must not depend on `at` at all. */
START_TEST(offset_ignores_a_stale_at)
{
    ClockOffset fresh = {0}, stale = {0};
    int64_t now = clock_mono();

    ck_assert_int_lt(llabs64(clock_offset(&stale, now - 3600 * NS_PER_SEC) -
                             clock_offset(&fresh, now)), NS_PER_SEC);
}
END_TEST

static Suite *clock_suite(void)
{
    Suite *s = suite_create("clock");
    TCase *tc = unit_tcase("clock");

    tcase_add_test(tc, offset_is_realtime_less_monotonic);
    tcase_add_test(tc, offset_is_read_once_per_at);
    tcase_add_test(tc, offset_ignores_a_stale_at);
    suite_add_tcase(s, tc);
    return s;
}

UNIT_MAIN(clock_suite)
