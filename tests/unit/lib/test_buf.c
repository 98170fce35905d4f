/* Unit tests for buf.c: growth, consume, printf, and the sticky oom flag. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "buf.h"
#include "unit.h"

START_TEST(zero_buf_is_empty)
{
    Buf b = {0};

    ck_assert_uint_eq(b.len, 0);
    buf_consume(&b, 0);
    buf_consume(&b, 10);
    ck_assert_uint_eq(b.len, 0);
    buf_free(&b);
    buf_free(&b);
    ck_assert_ptr_null(b.data);
    ck_assert_int_eq(b.oom, 0);
}
END_TEST

START_TEST(append_zero_bytes)
{
    Buf b = {0};

    ck_assert_int_eq(buf_append(&b, "", 0), 0);
    ck_assert_uint_eq(b.len, 0);
    ck_assert_int_eq(b.oom, 0);
    ck_assert_int_eq(buf_append(&b, "ab", 2), 0);
    ck_assert_int_eq(buf_append(&b, "", 0), 0);
    ck_assert_uint_eq(b.len, 2);
    ck_assert_mem_eq(b.data, "ab", 2);
    buf_free(&b);
}
END_TEST

/* Many appends of varying sizes: the content is exactly the concatenation
 * and capacity stays within a factor of two of what is needed. */
START_TEST(growth_keeps_content)
{
    enum { TOTAL = 1 << 20 };
    unsigned char *ref = malloc(TOTAL);
    unsigned char chunk[5000];
    size_t len = 0;
    Buf b = {0};
    Rng r;

    rng_seed(&r, 11);
    while (len < TOTAL - sizeof chunk) {
        size_t n = (size_t)rng_below(&r, rng_below(&r, 4) ? 40 : sizeof chunk);
        for (size_t i = 0; i < n; i++)
            chunk[i] = (unsigned char)rng_next(&r);
        ck_assert_int_eq(buf_append(&b, chunk, n), 0);
        memcpy(ref + len, chunk, n);
        len += n;
        ck_assert_uint_eq(b.len, len);
        ck_assert_uint_ge(b.cap, b.len);
        ck_assert_uint_le(b.cap, 2 * len + 256);
    }
    ck_assert_int_eq(memcmp(b.data, ref, len), 0);
    ck_assert_int_eq(b.oom, 0);
    buf_free(&b);
    ck_assert_uint_eq(b.cap, 0);
    free(ref);
}
END_TEST

START_TEST(reserve_guarantees_room)
{
    Buf b = {0};
    char *data;

    ck_assert_int_eq(buf_reserve(&b, 1000), 0);
    ck_assert_uint_ge(b.cap, 1000);
    data = b.data;
    /* Appends within the reservation do not reallocate or allocate. */
    alloc_fail_after(1);
    for (int i = 0; i < 100; i++)
        ck_assert_int_eq(buf_append(&b, "0123456789", 10), 0);
    alloc_fail_after(0);
    ck_assert_ptr_eq(b.data, data);
    ck_assert_uint_eq(b.len, 1000);
    ck_assert_int_eq(b.oom, 0);
    ck_assert_int_eq(buf_reserve(&b, 0), 0);
    ck_assert_int_eq(buf_reserve(&b, b.cap - b.len), 0);
    ck_assert_ptr_eq(b.data, data);
    buf_free(&b);
}
END_TEST

START_TEST(consume)
{
    Buf b = {0};

    ck_assert_int_eq(buf_append(&b, "hello world", 11), 0);
    buf_consume(&b, 0);
    ck_assert_uint_eq(b.len, 11);
    buf_consume(&b, 6);
    ck_assert_uint_eq(b.len, 5);
    ck_assert_mem_eq(b.data, "world", 5);
    ck_assert_int_eq(buf_append(&b, "!!", 2), 0);
    ck_assert_mem_eq(b.data, "world!!", 7);
    buf_consume(&b, 7);
    ck_assert_uint_eq(b.len, 0);
    ck_assert_int_eq(buf_append(&b, "abc", 3), 0);
    buf_consume(&b, 100); /* more than there is */
    ck_assert_uint_eq(b.len, 0);
    ck_assert_int_eq(buf_append(&b, "xyz", 3), 0);
    ck_assert_mem_eq(b.data, "xyz", 3);
    buf_free(&b);
}
END_TEST

/* A queue workload: append at the end, consume from the front. */
START_TEST(consume_as_queue)
{
    Buf b = {0};
    uint32_t next_in = 0, next_out = 0;
    Rng r;

    rng_seed(&r, 5);
    for (int round = 0; round < 2000; round++) {
        size_t n = (size_t)rng_below(&r, 50);
        for (size_t i = 0; i < n; i++, next_in++)
            ck_assert_int_eq(buf_append(&b, &next_in, sizeof next_in), 0);
        size_t m = (size_t)rng_below(&r, b.len / sizeof(uint32_t) + 1);
        for (size_t i = 0; i < m; i++, next_out++) {
            uint32_t v;
            memcpy(&v, b.data + i * sizeof v, sizeof v);
            ck_assert_uint_eq(v, next_out);
        }
        buf_consume(&b, m * sizeof(uint32_t));
        ck_assert_uint_eq(b.len, (next_in - next_out) * sizeof(uint32_t));
    }
    buf_free(&b);
}
END_TEST

START_TEST(printf_short)
{
    Buf b = {0};

    ck_assert_int_eq(buf_printf(&b, "%s: %d\n", "pri", 1024), 0);
    ck_assert_uint_eq(b.len, 10);
    ck_assert_mem_eq(b.data, "pri: 1024\n", 10);
    ck_assert_int_eq(buf_printf(&b, "%llu", 18446744073709551615ULL), 0);
    ck_assert_uint_eq(b.len, 30);
    ck_assert_mem_eq(b.data, "pri: 1024\n18446744073709551615", 30);
    ck_assert_int_eq(buf_printf(&b, "%s", ""), 0);
    ck_assert_uint_eq(b.len, 30);
    buf_free(&b);
}
END_TEST

/* Output longer than the first reservation, at every fill level, so the
 * retry path runs with the buffer both empty and nearly full. */
START_TEST(printf_long)
{
    static char big[20001];
    Buf b = {0};

    memset(big, 'q', sizeof big - 1);
    for (size_t i = 0; i < sizeof big - 1; i += 97)
        big[i] = (char)('a' + i % 26);
    for (size_t pre = 0; pre < 600; pre += 37) {
        for (size_t n = 100; n < sizeof big; n = n * 3 + 1) {
            char *ref = malloc(pre + n + 16);
            buf_free(&b);
            memset(ref, 'p', pre);
            ck_assert_int_eq(buf_append(&b, ref, pre), 0);
            ck_assert_int_eq(buf_printf(&b, "<%.*s>", (int)n, big), 0);
            ck_assert_uint_eq(b.len, pre + n + 2);
            ref[pre] = '<';
            memcpy(ref + pre + 1, big, n);
            ref[pre + 1 + n] = '>';
            ck_assert_int_eq(memcmp(b.data, ref, pre + n + 2), 0);
            ck_assert_int_eq(b.oom, 0);
            free(ref);
        }
    }
    buf_free(&b);
}
END_TEST

/* Output lengths at and around the buffer's power-of-two sizes, after
 * prefixes of several lengths: the byte next to the end must be right
 * (vsnprintf needs room for its NUL). */
START_TEST(printf_boundaries)
{
    static const size_t pres[] = {0, 1, 100, 127, 128, 129, 200, 255, 256};
    static const size_t lens[] = {1, 127, 128, 129, 255, 256, 257, 383, 384,
                                  511, 512, 513, 767, 768, 1023, 1024, 1025,
                                  2047, 2048, 2049, 4095, 4096, 4097};
    static char text[4200];
    Buf b = {0};

    for (size_t i = 0; i < sizeof text - 1; i++)
        text[i] = (char)('A' + i % 26);
    for (size_t p = 0; p < sizeof pres / sizeof pres[0]; p++) {
        for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++) {
            size_t pre = pres[p], n = lens[l];
            buf_free(&b);
            for (size_t k = 0; k < pre; k++)
                REQ_IEQ(buf_append(&b, "-", 1), 0);
            REQ_IEQ(buf_printf(&b, "%.*s", (int)n, text), 0);
            REQ_UEQ(b.len, pre + n);
            REQUIRE_MSG(memcmp(b.data + pre, text, n) == 0,
                        "prefix %zu, length %zu: wrong content", pre, n);
            /* And the buffer goes on working after it. */
            REQ_IEQ(buf_printf(&b, "%c", '!'), 0);
            REQUIRE(b.data[pre + n] == '!');
        }
    }
    buf_free(&b);
}
END_TEST

START_TEST(append_oom_is_all_or_nothing)
{
    Buf b = {0};
    char big[1000];

    memset(big, 'x', sizeof big);
    ck_assert_int_eq(buf_append(&b, "keep", 4), 0);
    alloc_fail_after(1);
    ck_assert_int_eq(buf_append(&b, big, sizeof big), -1);
    alloc_fail_after(0);
    ck_assert_int_eq(b.oom, 1);
    ck_assert_uint_eq(b.len, 4);
    ck_assert_mem_eq(b.data, "keep", 4);
    /* The flag is sticky: later appends work but it stays set. */
    ck_assert_int_eq(buf_append(&b, "!", 1), 0);
    ck_assert_int_eq(b.oom, 1);
    ck_assert_mem_eq(b.data, "keep!", 5);
    ck_assert_int_eq(buf_append(&b, big, sizeof big), 0);
    ck_assert_int_eq(b.oom, 1);
    ck_assert_uint_eq(b.len, 1005);
    /* buf_free returns it to the zero state. */
    buf_free(&b);
    ck_assert_int_eq(b.oom, 0);
    ck_assert_uint_eq(b.len, 0);
}
END_TEST

START_TEST(first_alloc_fails)
{
    Buf b = {0};

    alloc_fail_after(1);
    ck_assert_int_eq(buf_append(&b, "x", 1), -1);
    ck_assert_int_eq(b.oom, 1);
    ck_assert_ptr_null(b.data);
    ck_assert_uint_eq(b.len, 0);
    ck_assert_uint_eq(b.cap, 0);
    buf_free(&b);

    alloc_fail_after(1);
    ck_assert_int_eq(buf_reserve(&b, 10), -1);
    ck_assert_int_eq(b.oom, 1);
    buf_free(&b);

    alloc_fail_after(1);
    ck_assert_int_eq(buf_printf(&b, "%d", 5), -1);
    ck_assert_int_eq(b.oom, 1);
    ck_assert_uint_eq(b.len, 0);
    buf_free(&b);
}
END_TEST

/* printf fails when its output does not fit and the buffer cannot grow:
 * nothing is added (no partial line), and the flag is set. */
START_TEST(printf_oom_on_regrow)
{
    Buf b = {0};
    char big[2000];

    memset(big, 'y', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    ck_assert_int_eq(buf_append(&b, "head", 4), 0); /* cap 256 */
    ck_assert_uint_eq(b.cap, 256);
    alloc_fail_after(1);
    ck_assert_int_eq(buf_printf(&b, "%s", big), -1);
    alloc_fail_after(0);
    ck_assert_int_eq(b.oom, 1);
    ck_assert_uint_eq(b.len, 4);
    ck_assert_mem_eq(b.data, "head", 4);
    /* A short printf still fits in the old array. */
    ck_assert_int_eq(buf_printf(&b, "%d", 42), 0);
    ck_assert_uint_eq(b.len, 6);
    ck_assert_mem_eq(b.data, "head42", 6);
    ck_assert_int_eq(b.oom, 1);
    buf_free(&b);
}
END_TEST

/* printf's first reservation fails on a nearly full buffer. */
START_TEST(printf_oom_on_first_reserve)
{
    Buf b = {0};
    char fill[200];

    memset(fill, 'f', sizeof fill);
    ck_assert_int_eq(buf_append(&b, fill, sizeof fill), 0); /* 56 left */
    alloc_fail_after(1);
    ck_assert_int_eq(buf_printf(&b, "%d", 1), -1);
    alloc_fail_after(0);
    ck_assert_int_eq(b.oom, 1);
    ck_assert_uint_eq(b.len, sizeof fill);
    buf_free(&b);
}
END_TEST

/* Failure injection over a run of appends, as a stats reply does: the
 * content is a prefix-consistent sequence of whole appends, and oom shows
 * once at the end. */
START_TEST(oom_sweep)
{
    Buf b = {0};
    size_t expect_len = 0;
    int failed = 0;

    alloc_fail_after((unsigned long)_i + 1);
    for (int i = 0; i < 200; i++) {
        char line[64];
        int n = snprintf(line, sizeof line, "key-%d: %d\n", i, i * i);
        size_t before = b.len;
        int rc = i % 2 ? buf_printf(&b, "key-%d: %d\n", i, i * i)
                       : buf_append(&b, line, (size_t)n);
        if (rc == 0) {
            ck_assert_uint_eq(b.len, before + (size_t)n);
            ck_assert_mem_eq(b.data + before, line, (size_t)n);
            expect_len += (size_t)n;
        } else {
            ck_assert_uint_eq(b.len, before);
            failed = 1;
        }
    }
    alloc_fail_after(0);
    ck_assert_uint_eq(b.len, expect_len);
    ck_assert_int_eq(b.oom, failed);
    buf_free(&b);
}
END_TEST

static Suite *buf_suite(void)
{
    Suite *s = suite_create("buf");
    TCase *tc = unit_tcase("core");

    tcase_add_test(tc, zero_buf_is_empty);
    tcase_add_test(tc, append_zero_bytes);
    tcase_add_test(tc, growth_keeps_content);
    tcase_add_test(tc, reserve_guarantees_room);
    tcase_add_test(tc, consume);
    tcase_add_test(tc, consume_as_queue);
    tcase_add_test(tc, printf_short);
    tcase_add_test(tc, printf_long);
    tcase_add_test(tc, printf_boundaries);
    suite_add_tcase(s, tc);

    tc = unit_tcase("oom");
    tcase_add_test(tc, append_oom_is_all_or_nothing);
    tcase_add_test(tc, first_alloc_fails);
    tcase_add_test(tc, printf_oom_on_regrow);
    tcase_add_test(tc, printf_oom_on_first_reserve);
    tcase_add_loop_test(tc, oom_sweep, 0, 8);
    suite_add_tcase(s, tc);
    return s;
}

UNIT_MAIN(buf_suite)
