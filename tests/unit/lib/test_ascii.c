/* Unit tests for ascii.c: text from outside as one printable line. */
#include <string.h>

#include "ascii.h"
#include "unit.h"

/* Every byte but 0x20-0x7e is '?', a NUL among the n bytes too. */
START_TEST(bytes)
{
    char out[32];
    const char in[] = "a b~\t\x1b[2J\x7f\x80\xc3\xa9\xff\0z";

    ck_assert_str_eq(ascii_text(out, sizeof out, in, sizeof in - 1),
                     "a b~\?\?[2J\?\?\?\?\?\?z"); /* (\? : no trigraphs) */
    ck_assert_str_eq(ascii_text(out, sizeof out, " ~", 2), " ~");
    ck_assert_str_eq(ascii_text(out, sizeof out, "\x1f", 1), "?");
    ck_assert_str_eq(ascii_text_cut(out, sizeof out, "x\ty\x9b", 4), "x?y?");
}
END_TEST

/* ascii_text: cap - 1 bytes at most, cut without a mark. */
START_TEST(text_bounds)
{
    char out[8];

    ck_assert_str_eq(ascii_text(out, sizeof out, "", 0), "");
    ck_assert_str_eq(ascii_text(out, sizeof out, "abcdefg", 7), "abcdefg");
    ck_assert_str_eq(ascii_text(out, sizeof out, "abcdefgh", 8), "abcdefg");
    ck_assert_str_eq(ascii_text(out, 1, "abc", 3), "");
    ck_assert_str_eq(ascii_text(out, 3, "abcdef", 2), "ab");
}
END_TEST

/* ascii_text_cut: cap - 4 bytes at most, then "..." when there was more. */
START_TEST(cut_bounds)
{
    char out[44];
    const char *forty = "0123456789012345678901234567890123456789";
    char long_in[60];

    ck_assert_str_eq(ascii_text_cut(out, 4, "", 0), "");
    ck_assert_str_eq(ascii_text_cut(out, 4, "a", 1), "...");
    ck_assert_str_eq(ascii_text_cut(out, 8, "abcd", 4), "abcd");
    ck_assert_str_eq(ascii_text_cut(out, 8, "abcde", 5), "abcd...");
    /* The config messages' shape: 44 bytes hold 40 and "...". */
    ck_assert_str_eq(ascii_text_cut(out, sizeof out, forty, 40), forty);
    memset(long_in, 'x', sizeof long_in);
    long_in[0] = '\n';
    ascii_text_cut(out, sizeof out, long_in, 41);
    ck_assert_uint_eq(strlen(out), 43);
    ck_assert_int_eq(out[0], '?');
    ck_assert_str_eq(out + 39, "x...");
    /* Not a string: only n bytes are read. */
    ck_assert_str_eq(ascii_text_cut(out, sizeof out, long_in + 1, 3), "xxx");
}
END_TEST

/* Nothing is written at or past out + cap. */
START_TEST(stays_inside)
{
    char out[16];

    memset(out, '#', sizeof out);
    ascii_text(out, 6, "abcdefghij", 10);
    ck_assert_str_eq(out, "abcde");
    ck_assert_int_eq(out[6], '#');
    memset(out, '#', sizeof out);
    ascii_text_cut(out, 6, "abcdefghij", 10);
    ck_assert_str_eq(out, "ab...");
    ck_assert_int_eq(out[6], '#');
}
END_TEST

static Suite *ascii_suite(void)
{
    Suite *s = suite_create("ascii");
    TCase *tc = unit_tcase("core");

    tcase_add_test(tc, bytes);
    tcase_add_test(tc, text_bounds);
    tcase_add_test(tc, cut_bounds);
    tcase_add_test(tc, stays_inside);
    suite_add_tcase(s, tc);
    return s;
}

UNIT_MAIN(ascii_suite)
