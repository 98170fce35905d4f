/* Unit tests for numparse.c: the one strict number parser. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numparse.h"
#include "unit.h"

#define SENTINEL64 0x5a5a5a5a5a5a5a5aULL
#define SENTINEL32 0x5a5a5a5aU

static void u64_ok(const char *s, uint64_t want)
{
    uint64_t v = SENTINEL64;

    ck_assert_msg(parse_u64(s, strlen(s), &v) == 0, "'%s' rejected", s);
    ck_assert_msg(v == want, "'%s' gave %llu", s, (unsigned long long)v);
    v = SENTINEL64;
    ck_assert_int_eq(parse_u64_str(s, &v), 0);
    ck_assert_uint_eq(v, want);
}

static void u64_bad(const char *s, size_t len)
{
    uint64_t v = SENTINEL64;

    ck_assert_msg(parse_u64(s, len, &v) == -1, "'%.*s' accepted", (int)len,
                  s);
    ck_assert_msg(v == SENTINEL64, "'%.*s' touched *out", (int)len, s);
}

static void u32_ok(const char *s, uint32_t want)
{
    uint32_t v = SENTINEL32;

    ck_assert_msg(parse_u32(s, strlen(s), &v) == 0, "'%s' rejected", s);
    ck_assert_msg(v == want, "'%s' gave %u", s, v);
}

static void u32_bad(const char *s, size_t len)
{
    uint32_t v = SENTINEL32;

    ck_assert_msg(parse_u32(s, len, &v) == -1, "'%.*s' accepted", (int)len,
                  s);
    ck_assert_msg(v == SENTINEL32, "'%.*s' touched *out", (int)len, s);
}

#define U64_BAD(lit) u64_bad(lit, sizeof(lit) - 1)
#define U32_BAD(lit) u32_bad(lit, sizeof(lit) - 1)

START_TEST(u64_valid)
{
    u64_ok("0", 0);
    u64_ok("1", 1);
    u64_ok("42", 42);
    u64_ok("4294967296", 4294967296ULL);
    u64_ok("18446744073709551615", UINT64_MAX);
    u64_ok("18446744073709551614", UINT64_MAX - 1);
    u64_ok("00000000000000000000000000000000000007", 7);
    u64_ok("000018446744073709551615", UINT64_MAX);
    u64_ok("0000", 0);
}
END_TEST

START_TEST(u64_invalid)
{
    U64_BAD("");
    U64_BAD("-1");
    U64_BAD("-0");
    U64_BAD("+1");
    U64_BAD(" 1");
    U64_BAD("1 ");
    U64_BAD("1a");
    U64_BAD("a1");
    U64_BAD("0x10");
    U64_BAD("1.0");
    U64_BAD("1e5");
    U64_BAD("1,000");
    U64_BAD("1\0");
    U64_BAD("\0" "1");
    U64_BAD("\t1");
    U64_BAD("18446744073709551616");
    U64_BAD("18446744073709551620");
    U64_BAD("18446744073709551625");
    U64_BAD("99999999999999999999");
    U64_BAD("184467440737095516150");
    U64_BAD("100000000000000000000");
    U64_BAD("36893488147419103232"); /* 2^65 */
    U64_BAD("1:"); /* ':' is '9' + 1 */
    U64_BAD("/1"); /* '/' is '0' - 1 */
    U64_BAD("\xb0");
}
END_TEST

/* The boundary digit by digit: 1844674407370955161d for every d. */
START_TEST(u64_last_digit)
{
    char s[32];

    for (int d = 0; d <= 9; d++) {
        uint64_t v = SENTINEL64;
        snprintf(s, sizeof s, "1844674407370955161%d", d);
        if (d <= 5) {
            ck_assert_int_eq(parse_u64(s, strlen(s), &v), 0);
            ck_assert_uint_eq(v, 18446744073709551610ULL + (uint64_t)d);
        } else {
            ck_assert_int_eq(parse_u64(s, strlen(s), &v), -1);
            ck_assert_uint_eq(v, SENTINEL64);
        }
    }
}
END_TEST

/* Exactly [s, s+len) is read: what follows does not matter. */
START_TEST(reads_exactly_len)
{
    uint64_t v;
    uint32_t w;

    ck_assert_int_eq(parse_u64("123456", 3, &v), 0);
    ck_assert_uint_eq(v, 123);
    ck_assert_int_eq(parse_u64("7x", 1, &v), 0);
    ck_assert_uint_eq(v, 7);
    ck_assert_int_eq(parse_u64("184467440737095516159", 20, &v), 0);
    ck_assert_uint_eq(v, UINT64_MAX);
    ck_assert_int_eq(parse_u32("42949672951", 10, &w), 0);
    ck_assert_uint_eq(w, UINT32_MAX);
    ck_assert_int_eq(parse_u64("5", 0, &v), -1);
}
END_TEST

START_TEST(u32_valid)
{
    u32_ok("0", 0);
    u32_ok("1", 1);
    u32_ok("1024", 1024);
    u32_ok("4294967295", UINT32_MAX);
    u32_ok("4294967294", UINT32_MAX - 1);
    u32_ok("0004294967295", UINT32_MAX);
    u32_ok("000000000000000000000000000000", 0);
}
END_TEST

START_TEST(u32_invalid)
{
    U32_BAD("");
    U32_BAD("4294967296");
    U32_BAD("4294967300");
    U32_BAD("9999999999");
    U32_BAD("18446744073709551615");
    U32_BAD("18446744073709551616");
    U32_BAD("-1");
    U32_BAD("+1");
    U32_BAD(" 1");
    U32_BAD("1 ");
    U32_BAD("12a");
}
END_TEST

START_TEST(str_variant)
{
    uint64_t v = SENTINEL64;

    ck_assert_int_eq(parse_u64_str("65535", &v), 0);
    ck_assert_uint_eq(v, 65535);
    v = SENTINEL64;
    ck_assert_int_eq(parse_u64_str("", &v), -1);
    ck_assert_int_eq(parse_u64_str("-5", &v), -1);
    ck_assert_int_eq(parse_u64_str("5 ", &v), -1);
    ck_assert_int_eq(parse_u64_str("18446744073709551616", &v), -1);
    ck_assert_uint_eq(v, SENTINEL64);
}
END_TEST

/* Random digit strings against strtoull (which agrees on plain digits). */
START_TEST(random_against_strtoull)
{
    Rng r;
    char s[32];

    rng_seed(&r, 4242);
    for (int k = 0; k < 20000; k++) {
        size_t len = 1 + (size_t)rng_below(&r, 22);
        for (size_t i = 0; i < len; i++)
            s[i] = (char)('0' + rng_below(&r, 10));
        if (k % 3 == 0 && len >= 19) /* near the top of the range */
            memcpy(s, "18446744073709551", 17);
        s[len] = '\0';

        errno = 0;
        unsigned long long ref = strtoull(s, NULL, 10);
        int ref_ok = errno == 0;
        uint64_t v = SENTINEL64;
        int rc = parse_u64(s, len, &v);
        ck_assert_msg(rc == (ref_ok ? 0 : -1), "'%s': rc %d", s, rc);
        if (ref_ok)
            ck_assert_msg(v == ref, "'%s' gave %llu", s,
                          (unsigned long long)v);

        uint32_t w = SENTINEL32;
        rc = parse_u32(s, len, &w);
        int ok32 = ref_ok && ref <= UINT32_MAX;
        ck_assert_msg(rc == (ok32 ? 0 : -1), "'%s': u32 rc %d", s, rc);
        if (ok32)
            ck_assert_uint_eq(w, ref);
        else
            ck_assert_uint_eq(w, SENTINEL32);
    }
}
END_TEST

/* fmt_u64 writes what printf writes, and parse_u64 reads it back. */
START_TEST(format_round_trip)
{
    uint64_t fixed[] = {0, 1, 9, 10, 99, 100, 4294967295ULL, 4294967296ULL,
                        999999999999999999ULL, 10000000000000000000ULL, UINT64_MAX};
    char got[FMT_U64_MAX + 1], want[32];
    Rng r;

    rng_seed(&r, 99);
    for (int i = 0; i < 100000; i++) {
        uint64_t v = i < (int)(sizeof fixed / sizeof *fixed) ? fixed[i]
                                                               : rng_next(&r) >> rng_below(&r, 64);
        size_t n = fmt_u64(got, v);
        uint64_t back;

        snprintf(want, sizeof want, "%" PRIu64, v);
        REQ_UEQ(n, strlen(want));
        REQUIRE_MSG(memcmp(got, want, n) == 0, "fmt_u64(%s) wrote %.*s", want, (int)n, got);
        REQ_IEQ(parse_u64(got, n, &back), 0);
        REQ_UEQ(back, v);
    }
}
END_TEST

static Suite *numparse_suite(void)
{
    Suite *s = suite_create("numparse");
    TCase *tc = unit_tcase("core");

    tcase_add_test(tc, u64_valid);
    tcase_add_test(tc, u64_invalid);
    tcase_add_test(tc, u64_last_digit);
    tcase_add_test(tc, reads_exactly_len);
    tcase_add_test(tc, u32_valid);
    tcase_add_test(tc, u32_invalid);
    tcase_add_test(tc, str_variant);
    tcase_add_test(tc, random_against_strtoull);
    tcase_add_test(tc, format_round_trip);
    suite_add_tcase(s, tc);
    return s;
}

UNIT_MAIN(numparse_suite)
