/* Unit tests for utf8.c: which bytes the JSON writers may pass as text. */
#include <string.h>

#include "unit.h"
#include "utf8.h"

static size_t seq(const char *s)
{
    return utf8_seq(s, strlen(s));
}

START_TEST(sequences)
{
    ck_assert_uint_eq(seq("a"), 1);
    ck_assert_uint_eq(seq("\x7f"), 1);
    ck_assert_uint_eq(seq("\xc3\xa9x"), 2);            /* é */
    ck_assert_uint_eq(seq("\xe2\x82\xac"), 3);         /* € */
    ck_assert_uint_eq(seq("\xef\xbf\xbd"), 3);         /* U+FFFD */
    ck_assert_uint_eq(seq("\xf0\x9f\x98\x80"), 4);     /* U+1F600 */
    ck_assert_uint_eq(seq("\xf4\x8f\xbf\xbf"), 4);     /* U+10FFFF */
}
END_TEST

START_TEST(not_sequences)
{
    ck_assert_uint_eq(seq("\xe9t"), 0);                /* Latin-1 é */
    ck_assert_uint_eq(seq("\x80"), 0);                 /* a lone continuation */
    ck_assert_uint_eq(seq("\xc0\xaf"), 0);             /* overlong '/' */
    ck_assert_uint_eq(seq("\xc1\xbf"), 0);
    ck_assert_uint_eq(seq("\xe0\x80\xaf"), 0);         /* overlong, 3 bytes */
    ck_assert_uint_eq(seq("\xf0\x80\x80\xaf"), 0);     /* overlong, 4 bytes */
    ck_assert_uint_eq(seq("\xed\xa0\x80"), 0);         /* a surrogate */
    ck_assert_uint_eq(seq("\xf4\x90\x80\x80"), 0);     /* past U+10FFFF */
    ck_assert_uint_eq(seq("\xf5\x80\x80\x80"), 0);
    ck_assert_uint_eq(seq("\xff"), 0);
    ck_assert_uint_eq(seq("\xc3x"), 0);                /* cut by the next byte */
    ck_assert_uint_eq(utf8_seq("\xe2\x82\xac", 2), 0); /* cut by n */
}
END_TEST

START_TEST(texts)
{
    ck_assert_int_eq(utf8_valid("", 0), 1);
    ck_assert_int_eq(utf8_valid("caf\xc3\xa9.sock", 10), 1);
    ck_assert_int_eq(utf8_valid("caf\xe9.sock", 9), 0);
    ck_assert_int_eq(utf8_valid("ok\xe2\x82", 4), 0);
    ck_assert_int_eq(utf8_valid("a\0b", 3), 1);        /* NUL is UTF-8 */
}
END_TEST

static Suite *utf8_suite(void)
{
    Suite *s = suite_create("utf8");
    TCase *tc = unit_tcase("core");

    tcase_add_test(tc, sequences);
    tcase_add_test(tc, not_sequences);
    tcase_add_test(tc, texts);
    suite_add_tcase(s, tc);
    return s;
}

UNIT_MAIN(utf8_suite)
