/*
 * unit.h — shared helpers for the check-based unit tests.
 *
 * Every test binary builds one Suite and runs it with UNIT_MAIN(), which
 * prints check's summary line ("100%: Checks: N, Failures: 0, Errors: 0")
 * and exits non-zero on any failure. Every TCase made with unit_tcase()
 * resets failure injection before and after each test, so a failed
 * assertion never leaves an armed allocation failure behind for the next
 * test when they share a process (CK_FORK=no).
 */
#ifndef TUBED_TEST_UNIT_H
#define TUBED_TEST_UNIT_H

#include <check.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "alloc.h"

/* A tiny deterministic PRNG (xorshift64*), so a failing seed reproduces. */
typedef struct Rng {
    uint64_t s;
} Rng;

static inline void rng_seed(Rng *r, uint64_t seed)
{
    r->s = seed * 0x9e3779b97f4a7c15ULL + 0x2545f4914f6cdd1dULL;
    if (!r->s)
        r->s = 1;
}

static inline uint64_t rng_next(Rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545f4914f6cdd1dULL;
}

/* Bytes as printable text for a failure message (others as \xNN), in a
 * static buffer: the next call overwrites it. */
static inline const char *unit_show(const char *p, size_t len)
{
    static char out[1024];
    size_t o = 0;

    for (size_t i = 0; i < len && o + 8 < sizeof out; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c >= 0x20 && c < 0x7f)
            out[o++] = (char)c;
        else
            o += (size_t)snprintf(out + o, sizeof out - o, "\\x%02x", c);
    }
    out[o] = '\0';
    return out;
}

/* Uniform enough in [0, n) for tests; n > 0. */
static inline uint64_t rng_below(Rng *r, uint64_t n)
{
    return rng_next(r) % n;
}

/* check's ck_assert records the location of every assertion that passes,
 * which costs time quadratic in their number; hot loops (invariant checks
 * over whole structures, randomised runs) use these, which only talk to
 * check when they fail. */
#define REQUIRE(cond) \
    do { \
        if (!(cond)) \
            ck_abort_msg("Assertion '%s' failed", #cond); \
    } while (0)
#define REQUIRE_MSG(cond, ...) \
    do { \
        if (!(cond)) \
            ck_abort_msg(__VA_ARGS__); \
    } while (0)

#define REQ_UEQ(a, b) \
    do { \
        uintmax_t unit_a_ = (uintmax_t)(a), unit_b_ = (uintmax_t)(b); \
        if (unit_a_ != unit_b_) \
            ck_abort_msg("Assertion '%s == %s' failed: %ju != %ju", #a, #b, \
                         unit_a_, unit_b_); \
    } while (0)
#define REQ_IEQ(a, b) \
    do { \
        intmax_t unit_a_ = (intmax_t)(a), unit_b_ = (intmax_t)(b); \
        if (unit_a_ != unit_b_) \
            ck_abort_msg("Assertion '%s == %s' failed: %jd != %jd", #a, #b, \
                         unit_a_, unit_b_); \
    } while (0)
#define REQ_PEQ(a, b) \
    do { \
        const void *unit_a_ = (a), *unit_b_ = (b); \
        if (unit_a_ != unit_b_) \
            ck_abort_msg("Assertion '%s == %s' failed: %p != %p", #a, #b, \
                         unit_a_, unit_b_); \
    } while (0)

static inline void unit_reset_alloc(void)
{
    alloc_fail_after(0);
}

static inline int unit_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    int failed;

    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#define UNIT_MAIN(suite_fn) \
    int main(void) { return unit_run(suite_fn()); }

/* A test case with the allocation-failure reset fixture and a timeout
 * generous enough for the sanitizer build. */
static inline TCase *unit_tcase(const char *name)
{
    TCase *tc = tcase_create(name);

    tcase_add_checked_fixture(tc, unit_reset_alloc, unit_reset_alloc);
    tcase_set_timeout(tc, 60);
    return tc;
}

#endif
