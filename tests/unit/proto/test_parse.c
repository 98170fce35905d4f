/* Unit tests for parse.c: every command in its valid form with the exact
 * fields it fills, and the malformed forms around each. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "parse.h"
#include "unit.h"

typedef struct Want {
    CmdType type;
    uint64_t id;
    uint32_t pri, delay, ttr, bytes, count;
    const char *name; /* NULL: no name */
} Want;

static void expect_ok(const char *line, size_t len, Want w)
{
    Cmd c;
    ParseResult r;

    memset(&c, 0xa5, sizeof c); /* parse_command must fill every field */
    r = parse_command(line, len, &c);
    ck_assert_msg(r == PARSE_OK, "'%s': result %d, want PARSE_OK",
                  unit_show(line, len), r);
    ck_assert_msg(c.type == w.type, "'%s': type %d, want %d", unit_show(line, len),
                  c.type, w.type);
    ck_assert_msg(c.id == w.id, "'%s': id %llu, want %llu", unit_show(line, len),
                  (unsigned long long)c.id, (unsigned long long)w.id);
    ck_assert_msg(c.pri == w.pri, "'%s': pri %u", unit_show(line, len), c.pri);
    ck_assert_msg(c.delay == w.delay, "'%s': delay %u", unit_show(line, len),
                  c.delay);
    ck_assert_msg(c.ttr == w.ttr, "'%s': ttr %u", unit_show(line, len), c.ttr);
    ck_assert_msg(c.bytes == w.bytes, "'%s': bytes %u", unit_show(line, len),
                  c.bytes);
    ck_assert_msg(c.count == w.count, "'%s': count %u", unit_show(line, len),
                  c.count);
    ck_assert_msg(c.counted == 0, "'%s': counted set", unit_show(line, len));
    if (!w.name) {
        ck_assert_msg(c.name == NULL && c.name_len == 0, "'%s': has a name",
                      unit_show(line, len));
    } else {
        size_t n = strlen(w.name);
        ck_assert_msg(c.name_len == n, "'%s': name_len %zu, want %zu",
                      unit_show(line, len), c.name_len, n);
        /* The name points into the line, not a copy. */
        ck_assert(c.name >= line && c.name + c.name_len <= line + len);
        ck_assert_msg(memcmp(c.name, w.name, n) == 0, "'%s': name '%s'",
                      unit_show(line, len), unit_show(c.name, c.name_len));
    }
}

static void expect_bad(const char *line, size_t len, CmdType type,
                       int counted)
{
    Cmd c;
    ParseResult r = parse_command(line, len, &c);

    ck_assert_msg(r == PARSE_BAD_FORMAT, "'%s': result %d, want BAD_FORMAT",
                  unit_show(line, len), r);
    ck_assert_msg(c.type == type, "'%s': type %d, want %d", unit_show(line, len),
                  c.type, type);
    ck_assert_msg(c.counted == counted, "'%s': counted %d, want %d",
                  unit_show(line, len), c.counted, counted);
}

static void expect_unknown(const char *line, size_t len)
{
    Cmd c;
    ParseResult r = parse_command(line, len, &c);

    ck_assert_msg(r == PARSE_UNKNOWN, "'%s': result %d, want UNKNOWN",
                  unit_show(line, len), r);
    ck_assert_int_eq(c.counted, 0);
}

/* Literal lines: sizeof keeps embedded NUL bytes. */
#define OK(line, ...) expect_ok(line, sizeof(line) - 1, (Want){__VA_ARGS__})
#define BAD(line, type) expect_bad(line, sizeof(line) - 1, type, 0)
#define BAD_COUNTED(line, type) expect_bad(line, sizeof(line) - 1, type, 1)
#define UNKNOWN(line) expect_unknown(line, sizeof(line) - 1)

/* ---- valid forms ---- */

START_TEST(valid_put)
{
    OK("put 1 2 3 4", .type = CMD_PUT, .pri = 1, .delay = 2, .ttr = 3,
       .bytes = 4);
    OK("put 0 0 0 0", .type = CMD_PUT);
    OK("put 4294967295 4294967295 4294967295 4294967295", .type = CMD_PUT,
       .pri = UINT32_MAX, .delay = UINT32_MAX, .ttr = UINT32_MAX,
       .bytes = UINT32_MAX);
    OK("put 1024 0 120 65535", .type = CMD_PUT, .pri = 1024, .ttr = 120,
       .bytes = 65535);
}
END_TEST

START_TEST(valid_id_commands)
{
    OK("peek 5", .type = CMD_PEEK, .id = 5);
    OK("peek 0", .type = CMD_PEEK, .id = 0);
    OK("peek 18446744073709551615", .type = CMD_PEEK, .id = UINT64_MAX);
    OK("reserve-job 7", .type = CMD_RESERVE_JOB, .id = 7);
    OK("delete 1", .type = CMD_DELETE, .id = 1);
    OK("delete 18446744073709551615", .type = CMD_DELETE, .id = UINT64_MAX);
    OK("kick-job 3", .type = CMD_KICK_JOB, .id = 3);
    OK("touch 9", .type = CMD_TOUCH, .id = 9);
    OK("stats-job 12345678901234", .type = CMD_STATS_JOB,
       .id = 12345678901234ULL);
}
END_TEST

START_TEST(valid_count_commands)
{
    OK("reserve-with-timeout 0", .type = CMD_RESERVE_TIMEOUT, .count = 0);
    OK("reserve-with-timeout 30", .type = CMD_RESERVE_TIMEOUT, .count = 30);
    OK("reserve-with-timeout 4294967295", .type = CMD_RESERVE_TIMEOUT,
       .count = UINT32_MAX);
    OK("kick 10", .type = CMD_KICK, .count = 10);
    OK("kick 0", .type = CMD_KICK, .count = 0);
    OK("kick 4294967295", .type = CMD_KICK, .count = UINT32_MAX);
}
END_TEST

/* reserve-with-timeout's seconds may end in a fraction (JavaScript clients
 * and Ruby's beaneater print 2.5), dropped as beanstalkd 1.12 drops it; no
 * other command takes one, and nothing else may follow the digits. */
START_TEST(timeout_fraction)
{
    OK("reserve-with-timeout 0.5", .type = CMD_RESERVE_TIMEOUT, .count = 0);
    OK("reserve-with-timeout 2.5", .type = CMD_RESERVE_TIMEOUT, .count = 2);
    OK("reserve-with-timeout 10.999", .type = CMD_RESERVE_TIMEOUT, .count = 10);
    OK("reserve-with-timeout  1.25", .type = CMD_RESERVE_TIMEOUT, .count = 1);
    OK("reserve-with-timeout 4294967295.9", .type = CMD_RESERVE_TIMEOUT,
       .count = UINT32_MAX);
    BAD("reserve-with-timeout 1.", CMD_RESERVE_TIMEOUT);
    BAD("reserve-with-timeout .5", CMD_RESERVE_TIMEOUT);
    BAD("reserve-with-timeout 0.5x", CMD_RESERVE_TIMEOUT);
    BAD("reserve-with-timeout 0.5 ", CMD_RESERVE_TIMEOUT);
    BAD("reserve-with-timeout 0.5.5", CMD_RESERVE_TIMEOUT);
    BAD("reserve-with-timeout 0..5", CMD_RESERVE_TIMEOUT);
    BAD("reserve-with-timeout -0.5", CMD_RESERVE_TIMEOUT);
    BAD("reserve-with-timeout 1e3", CMD_RESERVE_TIMEOUT);
    BAD("reserve-with-timeout 4294967296.0", CMD_RESERVE_TIMEOUT);
    BAD("reserve-with-timeout 0.5 1", CMD_RESERVE_TIMEOUT);
    BAD("pause-tube foo 1.5", CMD_PAUSE_TUBE);
    BAD("release 1 0 1.5", CMD_RELEASE);
    BAD("put 0 1.5 1 1", CMD_PUT);
}
END_TEST

START_TEST(valid_release_bury)
{
    OK("release 1 2 3", .type = CMD_RELEASE, .id = 1, .pri = 2, .delay = 3);
    OK("release 18446744073709551615 4294967295 4294967295",
       .type = CMD_RELEASE, .id = UINT64_MAX, .pri = UINT32_MAX,
       .delay = UINT32_MAX);
    OK("bury 1 2", .type = CMD_BURY, .id = 1, .pri = 2);
    OK("bury 18446744073709551615 4294967295", .type = CMD_BURY,
       .id = UINT64_MAX, .pri = UINT32_MAX);
}
END_TEST

START_TEST(valid_no_arg_commands)
{
    OK("peek-ready", .type = CMD_PEEK_READY);
    OK("peek-delayed", .type = CMD_PEEK_DELAYED);
    OK("peek-buried", .type = CMD_PEEK_BURIED);
    OK("reserve", .type = CMD_RESERVE);
    OK("stats", .type = CMD_STATS);
    OK("list-tubes-watched", .type = CMD_LIST_TUBES_WATCHED);
    OK("list-tube-used", .type = CMD_LIST_TUBE_USED);
    OK("list-tubes", .type = CMD_LIST_TUBES);
    OK("quit", .type = CMD_QUIT);
}
END_TEST

START_TEST(valid_tube_commands)
{
    OK("use foo", .type = CMD_USE, .name = "foo");
    OK("watch foo", .type = CMD_WATCH, .name = "foo");
    OK("ignore foo", .type = CMD_IGNORE, .name = "foo");
    OK("stats-tube default", .type = CMD_STATS_TUBE, .name = "default");
    OK("use x", .type = CMD_USE, .name = "x");
    /* Every name character, and '-' anywhere but first. */
    OK("use azAZ09-+/;.$_()", .type = CMD_USE, .name = "azAZ09-+/;.$_()");
    OK("watch a-", .type = CMD_WATCH, .name = "a-");
    OK("use 123", .type = CMD_USE, .name = "123");
    OK("pause-tube foo 10", .type = CMD_PAUSE_TUBE, .name = "foo",
       .delay = 10);
    OK("pause-tube foo 0", .type = CMD_PAUSE_TUBE, .name = "foo");
    OK("pause-tube foo 4294967295", .type = CMD_PAUSE_TUBE, .name = "foo",
       .delay = UINT32_MAX);
    OK("pause-tube   foo   7", .type = CMD_PAUSE_TUBE, .name = "foo",
       .delay = 7);
}
END_TEST

START_TEST(leading_zeros_accepted)
{
    OK("delete 007", .type = CMD_DELETE, .id = 7);
    OK("delete 000000000000000000000000000000000001", .type = CMD_DELETE,
       .id = 1);
    OK("put 0001 00 0000000000000000000005 000", .type = CMD_PUT, .pri = 1,
       .ttr = 5);
    OK("kick 00004294967295", .type = CMD_KICK, .count = UINT32_MAX);
    OK("peek 0000018446744073709551615", .type = CMD_PEEK, .id = UINT64_MAX);
}
END_TEST

START_TEST(multiple_spaces_accepted)
{
    OK("put  1   2 3    4", .type = CMD_PUT, .pri = 1, .delay = 2, .ttr = 3,
       .bytes = 4);
    OK("delete  5", .type = CMD_DELETE, .id = 5);
    OK("release 1  2  3", .type = CMD_RELEASE, .id = 1, .pri = 2, .delay = 3);
    OK("bury   1     2", .type = CMD_BURY, .id = 1, .pri = 2);
    OK("kick     3", .type = CMD_KICK, .count = 3);
    OK("reserve-with-timeout  1", .type = CMD_RESERVE_TIMEOUT, .count = 1);
}
END_TEST

/* The longest legal line fits MAX_LINE with its "\r\n". */
START_TEST(longest_line)
{
    char line[MAX_LINE + 8], name[MAX_TUBE_NAME + 1];
    int n;
    Cmd c;

    memset(name, 'n', MAX_TUBE_NAME);
    name[MAX_TUBE_NAME] = '\0';
    n = snprintf(line, sizeof line, "pause-tube %s 4294967295", name);
    ck_assert_int_eq(n + 2, MAX_LINE);
    ck_assert_int_eq(parse_command(line, (size_t)n, &c), PARSE_OK);
    ck_assert_int_eq(c.type, CMD_PAUSE_TUBE);
    ck_assert_uint_eq(c.name_len, MAX_TUBE_NAME);
    ck_assert_ptr_eq(c.name, line + 11);
    ck_assert_uint_eq(c.delay, UINT32_MAX);
}
END_TEST

/* Parsing reads exactly len bytes: what follows is ignored. */
START_TEST(reads_only_len)
{
    const char *line = "delete 12345";
    Cmd c;

    ck_assert_int_eq(parse_command(line, 9, &c), PARSE_OK);
    ck_assert_uint_eq(c.id, 12);
    ck_assert_int_eq(parse_command("use foobar", 7, &c), PARSE_OK);
    ck_assert_uint_eq(c.name_len, 3);
    ck_assert_int_eq(parse_command("statsxyz", 5, &c), PARSE_OK);
    ck_assert_int_eq(c.type, CMD_STATS);
}
END_TEST

/* ---- malformed forms ---- */

START_TEST(empty_and_unknown)
{
    UNKNOWN("");
    UNKNOWN(" ");
    UNKNOWN("foo");
    UNKNOWN("foo bar");
    UNKNOWN("PUT 1 2 3 4");
    UNKNOWN("Stats");
    UNKNOWN(" put 1 2 3 4");
    UNKNOWN(" stats");
    UNKNOWN("puts 1 2 3 4");
    UNKNOWN("peekx");
    UNKNOWN("peek");
    UNKNOWN("peek-");
    UNKNOWN("delete\t5");
    UNKNOWN("kick-jobs");
    UNKNOWN("list");
    UNKNOWN("list-tube");
    UNKNOWN("qui");
    UNKNOWN("use");
    UNKNOWN("watch");
    UNKNOWN("ignore");
    UNKNOWN("bury");
    UNKNOWN("touch");
    UNKNOWN("kick");
    UNKNOWN("release");
    UNKNOWN("\r\n");
}
END_TEST

START_TEST(bare_words_without_space_unknown)
{
    /* Words matched with their trailing space. */
    UNKNOWN("put");
    UNKNOWN("delete");
}
END_TEST

START_TEST(prefix_rules)
{
    /* Words without a trailing space match as prefixes. */
    BAD("statsx", CMD_STATS);
    BAD("stats ", CMD_STATS);
    BAD("stats-tubex", CMD_STATS);
    BAD("stats-tube", CMD_STATS); /* no space: it is "stats" + junk */
    BAD("reservex", CMD_RESERVE);
    BAD("reserve ", CMD_RESERVE);
    BAD("reserve-with-timeout", CMD_RESERVE);
    BAD("reserve-job", CMD_RESERVE);
    BAD("stats-job", CMD_STATS);
    BAD("peek-readyx", CMD_PEEK_READY);
    BAD("peek-delayed ", CMD_PEEK_DELAYED);
    BAD("peek-buried 1", CMD_PEEK_BURIED);
    BAD("list-tubes-watchedx", CMD_LIST_TUBES_WATCHED);
    BAD("list-tube-used ", CMD_LIST_TUBE_USED);
    BAD("list-tubesx", CMD_LIST_TUBES);
    BAD("list-tubes-", CMD_LIST_TUBES);
    BAD("quitxyz", CMD_QUIT);
    BAD("quit ", CMD_QUIT);
    /* pause-tube has no trailing space: "pause-tubex 5" is tube x. */
    OK("pause-tubex 5", .type = CMD_PAUSE_TUBE, .name = "x", .delay = 5);
    BAD("pause-tube", CMD_PAUSE_TUBE);
    BAD("pause-tube ", CMD_PAUSE_TUBE);
}
END_TEST

START_TEST(missing_args)
{
    BAD("put ", CMD_PUT);
    BAD("put 1", CMD_PUT);
    BAD("put 1 2", CMD_PUT);
    BAD("put 1 2 3", CMD_PUT);
    BAD("put 1 2 3 ", CMD_PUT);
    BAD("peek ", CMD_PEEK);
    BAD("delete ", CMD_DELETE);
    BAD("reserve-with-timeout ", CMD_RESERVE_TIMEOUT);
    BAD("reserve-job ", CMD_RESERVE_JOB);
    BAD("release ", CMD_RELEASE);
    BAD("release 1", CMD_RELEASE);
    BAD("release 1 2", CMD_RELEASE);
    BAD("bury ", CMD_BURY);
    BAD("bury 1", CMD_BURY);
    BAD("kick ", CMD_KICK);
    BAD("kick-job ", CMD_KICK_JOB);
    BAD("touch ", CMD_TOUCH);
    BAD("stats-job ", CMD_STATS_JOB);
    BAD("stats-tube ", CMD_STATS_TUBE);
    BAD("use ", CMD_USE);
    BAD("watch ", CMD_WATCH);
    BAD("ignore ", CMD_IGNORE);
    BAD("pause-tube foo", CMD_PAUSE_TUBE);
    BAD("pause-tube foo ", CMD_PAUSE_TUBE);
    BAD("pause-tube 5", CMD_PAUSE_TUBE); /* "5" is the name, no delay */
}
END_TEST

START_TEST(extra_args)
{
    BAD("peek 1 2", CMD_PEEK);
    BAD("delete 1 2", CMD_DELETE);
    BAD("release 1 2 3 4", CMD_RELEASE);
    BAD("bury 1 2 3", CMD_BURY);
    BAD("kick 1 2", CMD_KICK);
    BAD("kick-job 1 2", CMD_KICK_JOB);
    BAD("touch 1 2", CMD_TOUCH);
    BAD("stats-job 1 2", CMD_STATS_JOB);
    BAD("reserve-job 1 2", CMD_RESERVE_JOB);
    BAD("reserve-with-timeout 1 2", CMD_RESERVE_TIMEOUT);
    BAD("use foo bar", CMD_USE);
    BAD("watch foo bar", CMD_WATCH);
    BAD("pause-tube foo 1 2", CMD_PAUSE_TUBE);
    BAD("reserve 5", CMD_RESERVE);
    BAD("list-tubes foo", CMD_LIST_TUBES);
}
END_TEST

START_TEST(junk_in_numbers)
{
    BAD("delete 5x", CMD_DELETE);
    BAD("delete x5", CMD_DELETE);
    BAD("delete x", CMD_DELETE);
    BAD("kick 5x", CMD_KICK);
    BAD("kick 0x10", CMD_KICK);
    BAD("kick 1.5", CMD_KICK);
    BAD("kick 1e3", CMD_KICK);
    BAD("reserve-with-timeout x", CMD_RESERVE_TIMEOUT);
    BAD("release 1 2 x", CMD_RELEASE);
    BAD("bury 1 x", CMD_BURY);
    BAD("put x 2 3 4", CMD_PUT);
    BAD("put 1 2 x 4", CMD_PUT);
    BAD("put 1\t2 3 4", CMD_PUT);
    BAD("delete \t5", CMD_DELETE);
}
END_TEST

START_TEST(signs_rejected)
{
    BAD("put -1 2 3 4", CMD_PUT);
    BAD("put +1 2 3 4", CMD_PUT);
    BAD("put 1 -2 3 4", CMD_PUT);
    BAD("put 1 2 +3 4", CMD_PUT);
    BAD("delete -1", CMD_DELETE);
    BAD("delete +1", CMD_DELETE);
    BAD("peek -0", CMD_PEEK);
    BAD("kick +5", CMD_KICK);
    BAD("kick -5", CMD_KICK);
    BAD("reserve-with-timeout -1", CMD_RESERVE_TIMEOUT);
    BAD("release 1 -2 3", CMD_RELEASE);
    BAD("release -1 2 3", CMD_RELEASE);
    BAD("bury 1 -2", CMD_BURY);
    BAD("pause-tube foo -1", CMD_PAUSE_TUBE);
    BAD("pause-tube foo +1", CMD_PAUSE_TUBE);
}
END_TEST

START_TEST(overflow_rejected)
{
    /* u32 fields: 4294967296 is one too many. */
    BAD("put 4294967296 0 0 0", CMD_PUT);
    BAD("put 0 4294967296 0 0", CMD_PUT);
    BAD("put 0 0 4294967296 0", CMD_PUT);
    BAD("put 0 0 0 4294967296", CMD_PUT);
    BAD("reserve-with-timeout 4294967296", CMD_RESERVE_TIMEOUT);
    BAD("release 1 4294967296 0", CMD_RELEASE);
    BAD("release 1 0 4294967296", CMD_RELEASE);
    BAD("bury 1 4294967296", CMD_BURY);
    BAD("pause-tube foo 4294967296", CMD_PAUSE_TUBE);
    /* kick's bound is read as 64 bits and cut to 32, as beanstalkd does. */
    OK("kick 4294967296", .type = CMD_KICK, .count = 0);
    OK("kick 99999999999", .type = CMD_KICK, .count = 1215752191);
    OK("kick 18446744073709551615", .type = CMD_KICK, .count = UINT32_MAX);
    BAD("kick 18446744073709551616", CMD_KICK);
    /* u64 fields: 18446744073709551616 is one too many. */
    BAD("peek 18446744073709551616", CMD_PEEK);
    BAD("delete 18446744073709551616", CMD_DELETE);
    BAD("delete 99999999999999999999", CMD_DELETE);
    BAD("delete 184467440737095516150", CMD_DELETE);
    BAD("release 18446744073709551616 0 0", CMD_RELEASE);
    BAD("bury 18446744073709551616 0", CMD_BURY);
    BAD("kick-job 18446744073709551616", CMD_KICK_JOB);
    BAD("touch 18446744073709551616", CMD_TOUCH);
    BAD("stats-job 18446744073709551616", CMD_STATS_JOB);
    BAD("reserve-job 18446744073709551616", CMD_RESERVE_JOB);
    /* A u64 that fits in an id is still too big for a u32 field. */
    BAD("reserve-with-timeout 18446744073709551615", CMD_RESERVE_TIMEOUT);
}
END_TEST

START_TEST(trailing_space_rejected)
{
    BAD("delete 5 ", CMD_DELETE);
    BAD("peek 5 ", CMD_PEEK);
    BAD("kick 5 ", CMD_KICK);
    BAD("release 1 2 3 ", CMD_RELEASE);
    BAD("bury 1 2 ", CMD_BURY);
    BAD("reserve-with-timeout 5 ", CMD_RESERVE_TIMEOUT);
    BAD("use foo ", CMD_USE);
    BAD("watch foo ", CMD_WATCH);
    BAD("ignore foo ", CMD_IGNORE);
    BAD("stats-tube foo ", CMD_STATS_TUBE);
    BAD("pause-tube foo 5 ", CMD_PAUSE_TUBE);
    BAD("list-tubes ", CMD_LIST_TUBES);
    BAD("peek-ready ", CMD_PEEK_READY);
}
END_TEST

START_TEST(nul_bytes_rejected)
{
    BAD("delete 5\0", CMD_DELETE);
    BAD("delete \0" "5", CMD_DELETE);
    BAD("stats\0", CMD_STATS);
    BAD("use fo\0o", CMD_USE);
    BAD("put 1 2 3 4\0", CMD_PUT);
    BAD("put 1 2\0 3 4", CMD_PUT);
    BAD("pause-tube foo\0 5", CMD_PAUSE_TUBE);
    BAD("quit\0", CMD_QUIT);
    BAD("reserve\0", CMD_RESERVE);
    /* Even when no command word matches. */
    Cmd c;
    ck_assert_int_eq(parse_command("\0", 1, &c), PARSE_BAD_FORMAT);
    ck_assert_int_eq(parse_command("foo\0bar", 7, &c), PARSE_BAD_FORMAT);
    ck_assert_int_eq(parse_command("\0stats", 6, &c), PARSE_BAD_FORMAT);
}
END_TEST

static void name_line(char *line, size_t cap, const char *cmd, size_t n,
                      char fill, const char *suffix)
{
    size_t w = strlen(cmd);

    ck_assert_uint_lt(w + n + strlen(suffix), cap);
    memcpy(line, cmd, w);
    memset(line + w, fill, n);
    strcpy(line + w + n, suffix);
}

START_TEST(tube_name_lengths)
{
    static const struct {
        const char *word;
        CmdType type;
    } cmds[] = {
        {"use ", CMD_USE},
        {"watch ", CMD_WATCH},
        {"ignore ", CMD_IGNORE},
        {"stats-tube ", CMD_STATS_TUBE},
    };
    char line[512];
    Cmd c;

    for (size_t k = 0; k < sizeof cmds / sizeof cmds[0]; k++) {
        name_line(line, sizeof line, cmds[k].word, 200, 'a', "");
        ck_assert_int_eq(parse_command(line, strlen(line), &c), PARSE_OK);
        ck_assert_int_eq(c.type, cmds[k].type);
        ck_assert_uint_eq(c.name_len, 200);
        ck_assert_ptr_eq(c.name, line + strlen(cmds[k].word));

        name_line(line, sizeof line, cmds[k].word, 201, 'a', "");
        expect_bad(line, strlen(line), cmds[k].type, 0);
    }
    name_line(line, sizeof line, "pause-tube ", 200, 'b', " 3");
    ck_assert_int_eq(parse_command(line, strlen(line), &c), PARSE_OK);
    ck_assert_uint_eq(c.name_len, 200);
    ck_assert_uint_eq(c.delay, 3);
    /* 201 name characters: not a legal name, but counted. */
    name_line(line, sizeof line, "pause-tube ", 201, 'b', " 3");
    expect_bad(line, strlen(line), CMD_PAUSE_TUBE, 1);
}
END_TEST

START_TEST(tube_name_characters)
{
    BAD("use -foo", CMD_USE);
    BAD("watch -", CMD_WATCH);
    BAD("ignore -x", CMD_IGNORE);
    BAD("stats-tube -x", CMD_STATS_TUBE);
    BAD("use foo!", CMD_USE);
    BAD("use foo*", CMD_USE);
    BAD("use fo o", CMD_USE);
    BAD("use a,b", CMD_USE);
    BAD("use a:b", CMD_USE);
    BAD("use a\\b", CMD_USE);
    BAD("use \"a\"", CMD_USE);
    BAD("use a\tb", CMD_USE);
    BAD("use a\rb", CMD_USE);
    BAD("use \xc3\xa9t\xc3\xa9", CMD_USE);
    BAD("use \x7f", CMD_USE);
    BAD("watch foo#", CMD_WATCH);
    /* The rest of the line is the name: two spaces make it malformed. */
    BAD("use  x", CMD_USE);
    BAD("watch  x", CMD_WATCH);
    BAD("ignore  x", CMD_IGNORE);
    BAD("stats-tube  default", CMD_STATS_TUBE);
}
END_TEST

START_TEST(counted_flag)
{
    /* put: four numbers parsed, then junk: counted. */
    BAD_COUNTED("put 1 2 3 4 5", CMD_PUT);
    BAD_COUNTED("put 1 2 3 4x", CMD_PUT);
    BAD_COUNTED("put 1 2 3 4 ", CMD_PUT);
    BAD_COUNTED("put 1 2 3 4 junk", CMD_PUT);
    BAD_COUNTED("put 1 2 3 4294967295x", CMD_PUT);
    /* put failing before its fourth number: not counted. */
    BAD("put 1 2 3 x", CMD_PUT);
    BAD("put 1 2 3 4294967296", CMD_PUT);
    BAD("put 1 2 3 -4", CMD_PUT);
    /* pause-tube whose name has only name characters but is illegal. */
    BAD_COUNTED("pause-tube -x 5", CMD_PAUSE_TUBE);
    BAD_COUNTED("pause-tube - 0", CMD_PAUSE_TUBE);
    /* Other pause-tube failures are not counted. */
    BAD("pause-tube x! 5", CMD_PAUSE_TUBE);
    BAD("pause-tube -x", CMD_PAUSE_TUBE);
    BAD("pause-tube x 5x", CMD_PAUSE_TUBE);
    BAD("pause-tube x -5", CMD_PAUSE_TUBE);
    /* No other command sets it. */
    BAD("delete 5x", CMD_DELETE);
    BAD("release 1 2 3 4", CMD_RELEASE);
    BAD("use -x", CMD_USE);
    BAD("statsx", CMD_STATS);
}
END_TEST

START_TEST(tube_name_valid_direct)
{
    char name[MAX_TUBE_NAME + 2];

    ck_assert(tube_name_valid("default", 7));
    ck_assert(tube_name_valid("a", 1));
    ck_assert(tube_name_valid("A-Za-z0-9+/;.$_()", 17));
    ck_assert(!tube_name_valid("", 0));
    ck_assert(!tube_name_valid("-a", 2));
    ck_assert(!tube_name_valid("a b", 3));
    ck_assert(!tube_name_valid("a\0b", 3));
    ck_assert(tube_name_valid("ab!", 2)); /* only [name, name+len) */
    memset(name, 'z', sizeof name);
    ck_assert(tube_name_valid(name, MAX_TUBE_NAME));
    ck_assert(!tube_name_valid(name, MAX_TUBE_NAME + 1));
    /* Each byte value on its own. */
    for (int ch = 0; ch < 256; ch++) {
        char s[2] = {'a', (char)ch};
        int want = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                   (ch >= '0' && ch <= '9') || strchr("-+/;.$_()", ch);
        if (ch == 0)
            want = 0;
        ck_assert_msg(tube_name_valid(s, 2) == want, "byte 0x%02x", ch);
    }
}
END_TEST

START_TEST(cmd_names)
{
    static const struct {
        CmdType type;
        const char *name;
    } want[] = {
        {CMD_PUT, "put"},
        {CMD_PEEK, "peek"},
        {CMD_PEEK_READY, "peek-ready"},
        {CMD_PEEK_DELAYED, "peek-delayed"},
        {CMD_PEEK_BURIED, "peek-buried"},
        {CMD_RESERVE_TIMEOUT, "reserve-with-timeout"},
        {CMD_RESERVE_JOB, "reserve-job"},
        {CMD_RESERVE, "reserve"},
        {CMD_DELETE, "delete"},
        {CMD_RELEASE, "release"},
        {CMD_BURY, "bury"},
        {CMD_KICK, "kick"},
        {CMD_KICK_JOB, "kick-job"},
        {CMD_TOUCH, "touch"},
        {CMD_STATS_JOB, "stats-job"},
        {CMD_STATS_TUBE, "stats-tube"},
        {CMD_STATS, "stats"},
        {CMD_USE, "use"},
        {CMD_WATCH, "watch"},
        {CMD_IGNORE, "ignore"},
        {CMD_LIST_TUBES_WATCHED, "list-tubes-watched"},
        {CMD_LIST_TUBE_USED, "list-tube-used"},
        {CMD_LIST_TUBES, "list-tubes"},
        {CMD_QUIT, "quit"},
        {CMD_PAUSE_TUBE, "pause-tube"},
        {CMD_STATS_TUBES, "stats-tubes"},
        {CMD_STATS_BINLOG, "stats-binlog"},
        {CMD_STATS_LISTENERS, "stats-listeners"},
        {CMD_FLUSH_TUBE, "flush-tube"},
        {CMD_LIST_JOBS, "list-jobs"},
        {CMD_MOVE_JOB, "move-job"},
        {CMD_STATS_REPLICATION, "stats-replication"},
        {CMD_REPLICATE, "replicate"},
        {CMD_PROMOTE, "promote"},
        {CMD_FOLLOW, "follow"},
    };

    ck_assert_uint_eq(sizeof want / sizeof want[0], CMD_COUNT);
    for (size_t k = 0; k < CMD_COUNT; k++) {
        ck_assert_str_eq(cmd_name(want[k].type), want[k].name);
        /* Stable across calls (it is cached). */
        ck_assert_ptr_eq(cmd_name(want[k].type), cmd_name(want[k].type));
    }
    ck_assert_str_eq(cmd_name(CMD_COUNT), "unknown");
    ck_assert_str_eq(cmd_name((CmdType)1000), "unknown");
}
END_TEST

/* Every command round-trips: its own name plus a valid argument list
 * parses as that command. */
START_TEST(names_round_trip)
{
    static const char *const args[CMD_COUNT] = {
        [CMD_PUT] = " 1 2 3 4",
        [CMD_PEEK] = " 1",
        [CMD_RESERVE_TIMEOUT] = " 1",
        [CMD_RESERVE_JOB] = " 1",
        [CMD_DELETE] = " 1",
        [CMD_RELEASE] = " 1 2 3",
        [CMD_BURY] = " 1 2",
        [CMD_KICK] = " 1",
        [CMD_KICK_JOB] = " 1",
        [CMD_TOUCH] = " 1",
        [CMD_STATS_JOB] = " 1",
        [CMD_STATS_TUBE] = " t",
        [CMD_USE] = " t",
        [CMD_WATCH] = " t",
        [CMD_IGNORE] = " t",
        [CMD_PAUSE_TUBE] = " t 1",
        [CMD_FLUSH_TUBE] = " t",
        [CMD_LIST_JOBS] = " t all 1 10",
        [CMD_MOVE_JOB] = " 1 t",
        [CMD_REPLICATE] = " 1 2",
        [CMD_FOLLOW] = " 127.0.0.1:11300",
    };
    char line[64];
    Cmd c;

    for (int t = 0; t < CMD_COUNT; t++) {
        int n = snprintf(line, sizeof line, "%s%s", cmd_name((CmdType)t),
                         args[t] ? args[t] : "");
        ck_assert_msg(parse_command(line, (size_t)n, &c) == PARSE_OK, "%s",
                      line);
        ck_assert_msg(c.type == (CmdType)t, "'%s' parsed as %d", line, c.type);
    }
}
END_TEST

/* Replication's commands (doc/replication.md): their shapes. */
START_TEST(replication_forms)
{
    Cmd c;

    ck_assert_int_eq(parse_command("replicate 3 18446744073709551615", 32, &c), PARSE_OK);
    ck_assert_int_eq(c.type, CMD_REPLICATE);
    ck_assert_uint_eq(c.id, 3);
    ck_assert_uint_eq(c.id2, UINT64_MAX);
    ck_assert_int_eq(parse_command("replicate 3", 11, &c), PARSE_BAD_FORMAT);
    ck_assert_int_eq(parse_command("replicate 3 4 5", 15, &c), PARSE_BAD_FORMAT);
    ck_assert_int_eq(parse_command("replicate -1 4", 14, &c), PARSE_BAD_FORMAT);
    ck_assert_int_eq(parse_command("follow [::1]:11300", 18, &c), PARSE_OK);
    ck_assert_int_eq(c.type, CMD_FOLLOW);
    ck_assert_int_eq((int)c.name_len, 11);
    ck_assert_int_eq(parse_command("follow unix:/run/t.sock", 23, &c), PARSE_OK);
    ck_assert_int_eq(parse_command("follow a b", 10, &c), PARSE_BAD_FORMAT);
    ck_assert_int_eq(parse_command("follow ", 7, &c), PARSE_BAD_FORMAT);
    {
        /* The address: at most 200 bytes (doc/protocol.md). */
        char line[7 + 202];
        memcpy(line, "follow ", 7);
        memset(line + 7, 'a', 201);
        ck_assert_int_eq(parse_command(line, 7 + 200, &c), PARSE_OK);
        ck_assert_int_eq((int)c.name_len, 200);
        ck_assert_int_eq(parse_command(line, 7 + 201, &c), PARSE_BAD_FORMAT);
    }
    ck_assert_int_eq(parse_command("promote", 7, &c), PARSE_OK);
    ck_assert_int_eq(c.type, CMD_PROMOTE);
    ck_assert_int_eq(parse_command("promote 1", 9, &c), PARSE_BAD_FORMAT);
    ck_assert_int_eq(parse_command("stats-replication", 17, &c), PARSE_OK);
    ck_assert_int_eq(c.type, CMD_STATS_REPLICATION);
}
END_TEST

/* tubed's extensions: every well-formed shape, and the malformed ones
 * answer BAD_FORMAT (extensions.md §2). */
START_TEST(extension_forms)
{
    static const struct {
        const char *line;
        ParseResult r;
    } cases[] = {
        {"flush-tube q", PARSE_OK},
        {"flush-tube", PARSE_UNKNOWN},   /* the word needs its space */
        {"flush-tube -q", PARSE_BAD_FORMAT},
        {"flush-tube q ", PARSE_BAD_FORMAT},
        {"stats-tubes", PARSE_OK},
        {"stats-tubes x", PARSE_BAD_FORMAT},
        {"stats-binlog", PARSE_OK},
        {"stats-binlogs", PARSE_BAD_FORMAT},
        {"list-jobs q ready 0 1", PARSE_OK},
        {"list-jobs q delayed 5 1000", PARSE_OK},
        {"list-jobs q reserved 1 7", PARSE_OK},
        {"list-jobs q buried 1 7", PARSE_OK},
        {"list-jobs q all 18446744073709551615 1", PARSE_OK},
        {"list-jobs q all 1 0", PARSE_BAD_FORMAT},
        {"list-jobs q all 1 1001", PARSE_BAD_FORMAT},
        {"list-jobs q every 1 1", PARSE_BAD_FORMAT},
        {"list-jobs q readyx 1 1", PARSE_BAD_FORMAT},
        {"list-jobs q all 1", PARSE_BAD_FORMAT},
        {"list-jobs q all 1 1 1", PARSE_BAD_FORMAT},
        {"list-jobs -q all 1 1", PARSE_BAD_FORMAT},
        {"list-jobs q all -1 1", PARSE_BAD_FORMAT},
        {"move-job 1 q", PARSE_OK},
        {"move-job 1 q+x", PARSE_OK},
        {"move-job x q", PARSE_BAD_FORMAT},
        {"move-job 1", PARSE_BAD_FORMAT},
        {"move-job 1 -q", PARSE_BAD_FORMAT},
        {"move-job 1 q r", PARSE_BAD_FORMAT},
    };
    Cmd c;

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_msg(parse_command(cases[i].line, strlen(cases[i].line), &c) == cases[i].r,
                      "%s", cases[i].line);
    ck_assert_int_eq(parse_command("list-jobs q buried 42 9", 23, &c), PARSE_OK);
    ck_assert_int_eq(c.state, 3);
    ck_assert_uint_eq(c.id, 42);
    ck_assert_uint_eq(c.count, 9);
    ck_assert_int_eq(parse_command("list-jobs q all 0 1", 19, &c), PARSE_OK);
    ck_assert_int_eq(c.state, -1);
    ck_assert_int_eq(parse_command("move-job 7 dlq", 14, &c), PARSE_OK);
    ck_assert_uint_eq(c.id, 7);
    ck_assert_uint_eq(c.name_len, 3);
}
END_TEST

static Suite *parse_suite(void)
{
    Suite *s = suite_create("parse");
    TCase *tc = unit_tcase("valid");

    tcase_add_test(tc, valid_put);
    tcase_add_test(tc, extension_forms);
    tcase_add_test(tc, valid_id_commands);
    tcase_add_test(tc, valid_count_commands);
    tcase_add_test(tc, timeout_fraction);
    tcase_add_test(tc, valid_release_bury);
    tcase_add_test(tc, valid_no_arg_commands);
    tcase_add_test(tc, valid_tube_commands);
    tcase_add_test(tc, leading_zeros_accepted);
    tcase_add_test(tc, multiple_spaces_accepted);
    tcase_add_test(tc, longest_line);
    tcase_add_test(tc, reads_only_len);
    suite_add_tcase(s, tc);

    tc = unit_tcase("malformed");
    tcase_add_test(tc, empty_and_unknown);
    tcase_add_test(tc, bare_words_without_space_unknown);
    tcase_add_test(tc, prefix_rules);
    tcase_add_test(tc, missing_args);
    tcase_add_test(tc, extra_args);
    tcase_add_test(tc, junk_in_numbers);
    tcase_add_test(tc, signs_rejected);
    tcase_add_test(tc, overflow_rejected);
    tcase_add_test(tc, trailing_space_rejected);
    tcase_add_test(tc, nul_bytes_rejected);
    tcase_add_test(tc, tube_name_lengths);
    tcase_add_test(tc, tube_name_characters);
    tcase_add_test(tc, counted_flag);
    suite_add_tcase(s, tc);

    tc = unit_tcase("names");
    tcase_add_test(tc, tube_name_valid_direct);
    tcase_add_test(tc, cmd_names);
    tcase_add_test(tc, names_round_trip);
    tcase_add_test(tc, replication_forms);
    suite_add_tcase(s, tc);
    return s;
}

UNIT_MAIN(parse_suite)
