/* Unit tests for crc32c.c: the standard check values, incremental use at
 * every split point, and the hardware path (when the CPU has SSE4.2)
 * agreeing with the table path on every length and alignment. */
#include <stdint.h>
#include <string.h>

#include "crc32c.h"
#include "unit.h"

static const char check_str[] = "123456789";

START_TEST(known_vectors)
{
    unsigned char zeros[32], ones[32];

    memset(zeros, 0, sizeof zeros);
    memset(ones, 0xff, sizeof ones);

    ck_assert_uint_eq(crc32c(0, check_str, 9), 0xe3069283u);
    ck_assert_uint_eq(crc32c_portable(0, check_str, 9), 0xe3069283u);
    ck_assert_uint_eq(crc32c(0, zeros, sizeof zeros), 0x8a9136aau);
    ck_assert_uint_eq(crc32c_portable(0, zeros, sizeof zeros), 0x8a9136aau);
    ck_assert_uint_eq(crc32c(0, ones, sizeof ones), 0x62a8ab43u);
    ck_assert_uint_eq(crc32c_portable(0, ones, sizeof ones), 0x62a8ab43u);
}
END_TEST

/* RFC 3720 B.4: 32 bytes counting up, and counting down. */
START_TEST(rfc3720_vectors)
{
    unsigned char up[32], down[32];

    for (int i = 0; i < 32; i++) {
        up[i] = (unsigned char)i;
        down[i] = (unsigned char)(31 - i);
    }
    ck_assert_uint_eq(crc32c(0, up, 32), 0x46dd794eu);
    ck_assert_uint_eq(crc32c_portable(0, up, 32), 0x46dd794eu);
    ck_assert_uint_eq(crc32c(0, down, 32), 0x113fdb5cu);
    ck_assert_uint_eq(crc32c_portable(0, down, 32), 0x113fdb5cu);
}
END_TEST

START_TEST(empty_input)
{
    /* No bytes: the CRC passed in comes back unchanged. */
    ck_assert_uint_eq(crc32c(0, "", 0), 0);
    ck_assert_uint_eq(crc32c_portable(0, "", 0), 0);
    ck_assert_uint_eq(crc32c(0xe3069283u, "", 0), 0xe3069283u);
    ck_assert_uint_eq(crc32c_portable(0xdeadbeefu, NULL, 0), 0xdeadbeefu);
}
END_TEST

START_TEST(incremental_every_split)
{
    unsigned char buf[200];
    Rng r;

    rng_seed(&r, 42);
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (unsigned char)rng_next(&r);

    /* "123456789" split anywhere. */
    for (size_t k = 0; k <= 9; k++) {
        ck_assert_uint_eq(crc32c(crc32c(0, check_str, k), check_str + k, 9 - k),
                          0xe3069283u);
        ck_assert_uint_eq(crc32c_portable(crc32c_portable(0, check_str, k),
                                          check_str + k, 9 - k),
                          0xe3069283u);
    }
    /* A longer random buffer, split anywhere, and split in three. */
    for (size_t n = 0; n <= sizeof buf; n += 37) {
        uint32_t whole = crc32c(0, buf, n);
        ck_assert_uint_eq(whole, crc32c_portable(0, buf, n));
        for (size_t k = 0; k <= n; k++) {
            ck_assert_uint_eq(crc32c(crc32c(0, buf, k), buf + k, n - k), whole);
            ck_assert_uint_eq(crc32c_portable(crc32c_portable(0, buf, k), buf + k, n - k),
                              whole);
            /* Mixed: one path, then the other. */
            ck_assert_uint_eq(crc32c_portable(crc32c(0, buf, k), buf + k, n - k), whole);
            ck_assert_uint_eq(crc32c(crc32c_portable(0, buf, k), buf + k, n - k), whole);
        }
        for (size_t k = 0; k <= n; k += 5)
            for (size_t m = k; m <= n; m += 3)
                ck_assert_uint_eq(crc32c(crc32c(crc32c(0, buf, k), buf + k, m - k),
                                         buf + m, n - m),
                                  whole);
    }
    /* Byte at a time. */
    {
        uint32_t c = 0;
        for (size_t i = 0; i < sizeof buf; i++)
            c = crc32c(c, buf + i, 1);
        ck_assert_uint_eq(c, crc32c(0, buf, sizeof buf));
    }
}
END_TEST

/* Bit-at-a-time reference, independent of both implementations. */
static uint32_t crc_ref(const unsigned char *p, size_t n)
{
    uint32_t c = 0xffffffffu;

    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    }
    return ~c;
}

START_TEST(hw_equals_portable)
{
    /* Spare bytes on both sides so every start offset 0..15 fits. */
    static unsigned char buf[300 + 32];
    Rng r;

    rng_seed(&r, 7);
    for (int round = 0; round < 3; round++) {
        for (size_t i = 0; i < sizeof buf; i++)
            buf[i] = (unsigned char)rng_next(&r);
        for (size_t n = 0; n <= 300; n++)
            for (size_t start = 0; start < 16; start++) {
                const unsigned char *p = buf + start;
                uint32_t want = crc_ref(p, n);
                ck_assert_msg(crc32c(0, p, n) == want,
                              "crc32c len %zu start %zu: %08x != %08x", n, start,
                              crc32c(0, p, n), want);
                ck_assert_msg(crc32c_portable(0, p, n) == want,
                              "portable len %zu start %zu: %08x != %08x", n, start,
                              crc32c_portable(0, p, n), want);
            }
    }
}
END_TEST

START_TEST(hw_equals_portable_seeded)
{
    /* A non-zero starting CRC goes through both paths the same way. */
    static unsigned char buf[300 + 16];
    Rng r;

    rng_seed(&r, 99);
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (unsigned char)rng_next(&r);
    for (size_t n = 0; n <= 300; n++) {
        uint32_t seed = (uint32_t)rng_next(&r);
        size_t start = (size_t)rng_below(&r, 16);
        ck_assert_uint_eq(crc32c(seed, buf + start, n),
                          crc32c_portable(seed, buf + start, n));
    }
}
END_TEST

START_TEST(large_buffer)
{
    size_t n = 1 << 20;
    unsigned char *p = malloc(n + 8);
    Rng r;

    ck_assert_ptr_nonnull(p);
    rng_seed(&r, 3);
    for (size_t i = 0; i < n + 8; i++)
        p[i] = (unsigned char)rng_next(&r);
    for (size_t start = 0; start < 8; start++)
        ck_assert_uint_eq(crc32c(0, p + start, n), crc32c_portable(0, p + start, n));
    ck_assert_uint_eq(crc32c(0, p, n), crc_ref(p, n));
    free(p);
}
END_TEST

START_TEST(detects_single_bit_flips)
{
    unsigned char buf[64];
    uint32_t base;

    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (unsigned char)(i * 7 + 1);
    base = crc32c(0, buf, sizeof buf);
    for (size_t i = 0; i < sizeof buf; i++)
        for (int bit = 0; bit < 8; bit++) {
            buf[i] ^= (unsigned char)(1u << bit);
            ck_assert_uint_ne(crc32c(0, buf, sizeof buf), base);
            buf[i] ^= (unsigned char)(1u << bit);
        }
    ck_assert_uint_eq(crc32c(0, buf, sizeof buf), base);
}
END_TEST

static Suite *crc32c_suite(void)
{
    Suite *s = suite_create("crc32c");
    TCase *tc = unit_tcase("crc32c");

    tcase_add_test(tc, known_vectors);
    tcase_add_test(tc, rfc3720_vectors);
    tcase_add_test(tc, empty_input);
    tcase_add_test(tc, incremental_every_split);
    tcase_add_test(tc, hw_equals_portable);
    tcase_add_test(tc, hw_equals_portable_seeded);
    tcase_add_test(tc, large_buffer);
    tcase_add_test(tc, detects_single_bit_flips);
    suite_add_tcase(s, tc);
    return s;
}

UNIT_MAIN(crc32c_suite)
