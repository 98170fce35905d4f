/* Unit tests for mcparse.c: line framing, every command of spec kestrel.md
 * §5 in its valid forms with the exact fields it fills, every get option
 * and combination, and every malformed form with its exact reply line and
 * connection fate. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "mcparse.h"
#include "unit.h"

/* What a line must parse to. Fields left out are expected zero, except
 * max, where 0 stands for "not given" (UINT32_MAX); max_zero asks for 0. */
typedef struct Want {
    McCmdType type;
    McErr err;
    int has_body, noreply, max_zero;
    uint32_t bytes, flags, timeout_ms, seconds, max, count;
    int32_t exptime;
    unsigned opts;
    const char *key;  /* NULL: none */
    const char *name; /* NULL: none */
    const char *names; /* dump_stats: the names joined by ',' */
} Want;

static void expect_str(const char *what, const char *line, size_t len,
                       const char *got, size_t got_len, const char *want)
{
    if (!want) {
        ck_assert_msg(got_len == 0, "'%s': %s '%s', want none", unit_show(line, len),
                      what, unit_show(got, got_len));
        return;
    }
    ck_assert_msg(got && got_len == strlen(want) && memcmp(got, want, got_len) == 0,
                  "'%s': %s '%s', want '%s'", unit_show(line, len), what,
                  got ? unit_show(got, got_len) : "(null)", want);
    /* Pointers into the line, never a copy. */
    ck_assert_msg(got >= line && got + got_len <= line + len,
                  "'%s': %s outside the line", unit_show(line, len), what);
}

static void expect_names(const char *line, size_t len, McNames it, const char *want)
{
    char got[512];
    size_t o = 0;
    const char *p;
    size_t n;

    got[0] = '\0';
    while (mc_names_next(&it, &p, &n)) {
        ck_assert(p >= line && p + n <= line + len && n > 0);
        o += (size_t)snprintf(got + o, sizeof got - o, "%s%.*s", o ? "," : "",
                              (int)n, p);
    }
    ck_assert_msg(strcmp(got, want ? want : "") == 0, "'%s': names '%s', want '%s'",
                  unit_show(line, len), got, want ? want : "");
}

static void expect(const char *line, size_t len, Want w)
{
    McCmd c;
    McErr r;
    const char *l = unit_show(line, len);
    uint32_t max = w.max_zero ? 0 : w.max ? w.max : UINT32_MAX;

    memset(&c, 0xa5, sizeof c); /* mc_parse must fill every field */
    r = mc_parse(line, len, &c);
    ck_assert_msg(r == c.err, "'%s': returned %d, cmd.err %d", l, r, c.err);
    ck_assert_msg(c.err == w.err, "'%s': err %d, want %d", l, c.err, w.err);
    ck_assert_msg(c.type == w.type, "'%s': type %s, want %s", l,
                  mc_cmd_name(c.type), mc_cmd_name(w.type));
    ck_assert_msg(c.has_body == w.has_body, "'%s': has_body %d", l, c.has_body);
    ck_assert_msg(c.bytes == w.bytes, "'%s': bytes %u, want %u", l, c.bytes, w.bytes);
    ck_assert_msg(c.noreply == w.noreply, "'%s': noreply %d", l, c.noreply);
    ck_assert_msg(c.flags == w.flags, "'%s': flags %u", l, c.flags);
    ck_assert_msg(c.exptime == w.exptime, "'%s': exptime %d, want %d", l,
                  c.exptime, w.exptime);
    ck_assert_msg(c.opts == w.opts, "'%s': opts %#x, want %#x", l, c.opts, w.opts);
    ck_assert_msg(c.timeout_ms == w.timeout_ms, "'%s': timeout %u, want %u", l,
                  c.timeout_ms, w.timeout_ms);
    ck_assert_msg(c.seconds == w.seconds, "'%s': seconds %u", l, c.seconds);
    ck_assert_msg(c.max == max, "'%s': max %u, want %u", l, c.max, max);
    ck_assert_msg(c.count == w.count, "'%s': count %u", l, c.count);
    expect_str("key", line, len, c.key, c.key_len, w.key);
    expect_str("name", line, len, c.name, c.name_len, w.name);
    expect_names(line, len, c.names, w.names);
}

/* Literal lines: sizeof keeps embedded NUL bytes. */
#define P(line, ...) expect(line, sizeof(line) - 1, (Want){__VA_ARGS__})

/* ---- framing ---------------------------------------------------------- */

static void frame(const char *buf, size_t len, McLine want, size_t want_len,
                  size_t want_used)
{
    size_t line_len = 777, used = 888;
    McLine r = mc_find_line(buf, len, &line_len, &used);

    ck_assert_msg(r == want, "'%s': frame %d, want %d", unit_show(buf, len), r, want);
    if (want == MC_LINE_OK) {
        ck_assert_msg(line_len == want_len && used == want_used,
                      "'%s': line %zu used %zu, want %zu %zu", unit_show(buf, len),
                      line_len, used, want_len, want_used);
    } else {
        ck_assert_msg(line_len == 777 && used == 888, "'%s': outputs touched",
                      unit_show(buf, len));
    }
}

#define FRAME(s, want, ll, u) frame(s, sizeof(s) - 1, want, ll, u)

START_TEST(frame_terminators)
{
    FRAME("get q\n", MC_LINE_OK, 5, 6);
    FRAME("get q\r\n", MC_LINE_OK, 5, 7);
    FRAME("\n", MC_LINE_OK, 0, 1);
    FRAME("\r\n", MC_LINE_OK, 0, 2);
    /* Only the one CR right before the LF is dropped. */
    FRAME("get q\r\r\n", MC_LINE_OK, 6, 8);
    FRAME("get\rq\n", MC_LINE_OK, 5, 6);
    /* The first line only; the rest stays for the next call. */
    FRAME("get a\r\nget b\r\n", MC_LINE_OK, 5, 7);
    FRAME("a\nb\n", MC_LINE_OK, 1, 2);
    /* A NUL is data. */
    FRAME("get \0q\n", MC_LINE_OK, 6, 7);
}
END_TEST

START_TEST(frame_incomplete)
{
    FRAME("", MC_LINE_INCOMPLETE, 0, 0);
    FRAME("get q", MC_LINE_INCOMPLETE, 0, 0);
    FRAME("get q\r", MC_LINE_INCOMPLETE, 0, 0);
    frame(NULL, 0, MC_LINE_INCOMPLETE, 0, 0);
}
END_TEST

/* 2048 bytes with the terminator are fine, 2049 are not, whether the LF
 * has arrived or not. */
START_TEST(frame_limits)
{
    static char buf[MC_MAX_LINE + 64];

    memset(buf, 'x', sizeof buf);
    buf[MC_MAX_LINE - 1] = '\n';
    frame(buf, MC_MAX_LINE, MC_LINE_OK, MC_MAX_LINE - 1, MC_MAX_LINE);
    buf[MC_MAX_LINE - 2] = '\r';
    frame(buf, MC_MAX_LINE, MC_LINE_OK, MC_MAX_LINE - 2, MC_MAX_LINE);
    frame(buf, sizeof buf, MC_LINE_OK, MC_MAX_LINE - 2, MC_MAX_LINE);

    memset(buf, 'x', sizeof buf);
    buf[MC_MAX_LINE] = '\n';
    frame(buf, MC_MAX_LINE + 1, MC_LINE_TOO_LONG, 0, 0);
    buf[MC_MAX_LINE - 1] = '\r';
    frame(buf, MC_MAX_LINE + 1, MC_LINE_TOO_LONG, 0, 0);

    /* Without an LF: waiting while it may still fit, refused once it
     * cannot (the 2048th byte is not an LF). */
    memset(buf, 'x', sizeof buf);
    frame(buf, MC_MAX_LINE - 1, MC_LINE_INCOMPLETE, 0, 0);
    frame(buf, MC_MAX_LINE, MC_LINE_TOO_LONG, 0, 0);
    frame(buf, sizeof buf, MC_LINE_TOO_LONG, 0, 0);
    buf[MC_MAX_LINE - 2] = '\r';
    frame(buf, MC_MAX_LINE - 1, MC_LINE_INCOMPLETE, 0, 0);
    /* An LF far past the limit does not rescue the line. */
    buf[sizeof buf - 1] = '\n';
    frame(buf, sizeof buf, MC_LINE_TOO_LONG, 0, 0);
}
END_TEST

/* What a connection does: frame, then parse, line after line. */
START_TEST(frame_then_parse_pipeline)
{
    const char in[] = "set q 0 0 2\r\nhi\r\nGET  q/open\nget q/close\r\n";
    size_t off = 0, len, used;
    McCmd c;

    ck_assert_int_eq(mc_find_line(in, sizeof in - 1, &len, &used), MC_LINE_OK);
    ck_assert_int_eq(mc_parse(in, len, &c), MC_OK);
    ck_assert_int_eq(c.type, MC_CMD_SET);
    ck_assert(c.has_body && c.bytes == 2);
    off = used + c.bytes + 2;
    ck_assert_int_eq(mc_find_line(in + off, sizeof in - 1 - off, &len, &used), MC_LINE_OK);
    ck_assert_int_eq(mc_parse(in + off, len, &c), MC_OK);
    ck_assert_int_eq(c.type, MC_CMD_GET);
    ck_assert_uint_eq(c.opts, MC_OPT_OPEN);
    off += used;
    ck_assert_int_eq(mc_find_line(in + off, sizeof in - 1 - off, &len, &used), MC_LINE_OK);
    ck_assert_int_eq(mc_parse(in + off, len, &c), MC_OK);
    ck_assert_uint_eq(c.opts, MC_OPT_CLOSE);
    ck_assert_uint_eq(off + used, sizeof in - 1);
}
END_TEST

/* ---- set -------------------------------------------------------------- */

START_TEST(set_valid)
{
    P("set q 0 0 5", .type = MC_CMD_SET, .has_body = 1, .bytes = 5, .key = "q",
      .name = "q");
    P("set jobs 7 60 0", .type = MC_CMD_SET, .has_body = 1, .flags = 7,
      .exptime = 60, .key = "jobs", .name = "jobs");
    P("set q 4294967295 2147483647 2147483647", .type = MC_CMD_SET, .has_body = 1,
      .flags = UINT32_MAX, .exptime = INT32_MAX, .bytes = MC_MAX_BYTES, .key = "q",
      .name = "q");
    P("set q 0 -1 1", .type = MC_CMD_SET, .has_body = 1, .exptime = -1, .bytes = 1,
      .key = "q", .name = "q");
    P("set q 0 -2147483648 1", .type = MC_CMD_SET, .has_body = 1,
      .exptime = INT32_MIN, .bytes = 1, .key = "q", .name = "q");
    P("set q 0 -0 1", .type = MC_CMD_SET, .has_body = 1, .bytes = 1, .key = "q",
      .name = "q");
    P("set q 007 0010 0003", .type = MC_CMD_SET, .has_body = 1, .flags = 7,
      .exptime = 10, .bytes = 3, .key = "q", .name = "q");
    /* Every tube name character; '.' is fine (kestrel refuses it). */
    P("set azAZ09+;.$_() 0 0 1", .type = MC_CMD_SET, .has_body = 1, .bytes = 1,
      .key = "azAZ09+;.$_()", .name = "azAZ09+;.$_()");
    P("set a- 0 0 1", .type = MC_CMD_SET, .has_body = 1, .bytes = 1, .key = "a-",
      .name = "a-");
}
END_TEST

START_TEST(set_noreply)
{
    P("set q 0 0 5 noreply", .type = MC_CMD_SET, .has_body = 1, .bytes = 5,
      .noreply = 1, .key = "q", .name = "q");
    P("set q 0 0 5 noreply   ", .type = MC_CMD_SET, .has_body = 1, .bytes = 5,
      .noreply = 1, .key = "q", .name = "q");
    /* Case-sensitive, whole token, the last one (memcached's rule). */
    P("set q 0 0 5 NOREPLY", .type = MC_CMD_SET, .has_body = 1, .bytes = 5,
      .key = "q", .name = "q");
    P("set q 0 0 5 noreplyx", .type = MC_CMD_SET, .has_body = 1, .bytes = 5,
      .key = "q", .name = "q");
    P("set q 0 0 5 x", .type = MC_CMD_SET, .has_body = 1, .bytes = 5, .key = "q",
      .name = "q");
    P("set q 0 0 5 noreply x", .type = MC_CMD_SET, .has_body = 1, .bytes = 5,
      .key = "q", .name = "q");
    P("set q 0 0 5 x noreply", .type = MC_CMD_SET, .has_body = 1, .bytes = 5,
      .noreply = 1, .key = "q", .name = "q");
    /* A queue named noreply is a queue. */
    P("set noreply 0 0 5", .type = MC_CMD_SET, .has_body = 1, .bytes = 5,
      .key = "noreply", .name = "noreply");
}
END_TEST

/* Bad flags or exptime: the body is read, then BAD_FORMAT, kept. */
START_TEST(set_bad_flags_exptime)
{
    static const char *const lines[] = {
        "set q x 0 5", "set q -1 0 5", "set q 4294967296 0 5", "set q 1.5 0 5",
        "set q +1 0 5", "set q 0x1 0 5", "set q 99999999999999999999999 0 5",
        "set q 0 x 5", "set q 0 2147483648 5", "set q 0 -2147483649 5",
        "set q 0 - 5", "set q 0 -- 5", "set q 0 +5 5", "set q 0 1e3 5",
        "set q 0 5- 5", "set q 0 4294967296 5",
    };

    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        McCmd c;
        ck_assert_msg(mc_parse(lines[i], strlen(lines[i]), &c) == MC_ERR_BAD_FORMAT,
                      "'%s': err %d", lines[i], c.err);
        ck_assert_msg(c.type == MC_CMD_SET && c.has_body && c.bytes == 5, "'%s'",
                      lines[i]);
        ck_assert_int_eq(c.key_len, 1);
    }
    /* With noreply too: the error is still answered (see mcparse.h). */
    P("set q x 0 5 noreply", .type = MC_CMD_SET, .err = MC_ERR_BAD_FORMAT,
      .has_body = 1, .bytes = 5, .noreply = 1, .key = "q", .name = "q");
    /* A bad number comes before a bad name. */
    P("set q/x x 0 5", .type = MC_CMD_SET, .err = MC_ERR_BAD_FORMAT, .has_body = 1,
      .bytes = 5, .key = "q/x");
}
END_TEST

/* Missing arguments or a bad <bytes>: the body cannot be delimited, the
 * reply is sent and the connection closed, nothing is read. */
START_TEST(set_bad_bytes_closes)
{
    P("set", .type = MC_CMD_SET, .err = MC_ERR_BAD_FORMAT_CLOSE);
    P("set ", .type = MC_CMD_SET, .err = MC_ERR_BAD_FORMAT_CLOSE);
    P("set q", .type = MC_CMD_SET, .err = MC_ERR_BAD_FORMAT_CLOSE, .key = "q");
    P("set q 0", .type = MC_CMD_SET, .err = MC_ERR_BAD_FORMAT_CLOSE, .key = "q");
    P("set q 0 0", .type = MC_CMD_SET, .err = MC_ERR_BAD_FORMAT_CLOSE, .key = "q");
    P("set q 0 0   ", .type = MC_CMD_SET, .err = MC_ERR_BAD_FORMAT_CLOSE, .key = "q");
    P("set q 0 0 x", .type = MC_CMD_SET, .err = MC_ERR_BAD_FORMAT_CLOSE, .key = "q");
    P("set q 0 0 -1", .type = MC_CMD_SET, .err = MC_ERR_BAD_FORMAT_CLOSE, .key = "q");
    P("set q 0 0 +1", .type = MC_CMD_SET, .err = MC_ERR_BAD_FORMAT_CLOSE, .key = "q");
    P("set q 0 0 2147483648", .type = MC_CMD_SET, .err = MC_ERR_BAD_FORMAT_CLOSE,
      .key = "q");
    P("set q 0 0 4294967296", .type = MC_CMD_SET, .err = MC_ERR_BAD_FORMAT_CLOSE,
      .key = "q");
    P("set q 0 0 5x", .type = MC_CMD_SET, .err = MC_ERR_BAD_FORMAT_CLOSE, .key = "q");
    /* Even with everything else wrong too. */
    P("set /bad x y z", .type = MC_CMD_SET, .err = MC_ERR_BAD_FORMAT_CLOSE,
      .key = "/bad");
    /* A tab is no separator. */
    P("set q 0 0\t5", .type = MC_CMD_SET, .err = MC_ERR_BAD_FORMAT_CLOSE, .key = "q");
}
END_TEST

/* A bad queue name: the body is read and dropped, kept. */
START_TEST(set_bad_queue_name)
{
    char line[300];
    int n;

    P("set q/open 0 0 3", .type = MC_CMD_SET, .err = MC_ERR_BAD_QUEUE_NAME,
      .has_body = 1, .bytes = 3, .key = "q/open");
    P("set / 0 0 3", .type = MC_CMD_SET, .err = MC_ERR_BAD_QUEUE_NAME,
      .has_body = 1, .bytes = 3, .key = "/");
    P("set -q 0 0 3", .type = MC_CMD_SET, .err = MC_ERR_BAD_QUEUE_NAME,
      .has_body = 1, .bytes = 3, .key = "-q");
    P("set a~b 0 0 3", .type = MC_CMD_SET, .err = MC_ERR_BAD_QUEUE_NAME,
      .has_body = 1, .bytes = 3, .key = "a~b");
    P("set a\rb 0 0 3", .type = MC_CMD_SET, .err = MC_ERR_BAD_QUEUE_NAME,
      .has_body = 1, .bytes = 3, .key = "a\rb");
    {
        /* A NUL is a byte of the key, which then is no name. */
        static const char nul[] = "set a\0b 0 0 3";
        McCmd c;
        ck_assert_int_eq(mc_parse(nul, sizeof nul - 1, &c), MC_ERR_BAD_QUEUE_NAME);
        ck_assert(c.has_body && c.bytes == 3 && c.key == nul + 4 && c.key_len == 3);
    }
    P("set q\xc3\xa9 0 0 3", .type = MC_CMD_SET, .err = MC_ERR_BAD_QUEUE_NAME,
      .has_body = 1, .bytes = 3, .key = "q\xc3\xa9");
    /* 200 bytes are fine, 201 are not. */
    memset(line, 'n', sizeof line);
    memcpy(line, "set ", 4);
    n = 4 + MAX_TUBE_NAME;
    n += snprintf(line + n, sizeof line - (size_t)n, " 1 2 3");
    {
        McCmd c;
        ck_assert_int_eq(mc_parse(line, (size_t)n, &c), MC_OK);
        ck_assert_uint_eq(c.name_len, MAX_TUBE_NAME);
        ck_assert_ptr_eq(c.name, line + 4);
        memset(line, 'n', sizeof line);
        memcpy(line, "set ", 4);
        n = 4 + MAX_TUBE_NAME + 1;
        n += snprintf(line + n, sizeof line - (size_t)n, " 1 2 3");
        ck_assert_int_eq(mc_parse(line, (size_t)n, &c), MC_ERR_BAD_QUEUE_NAME);
        ck_assert(c.has_body && c.bytes == 3 && c.name_len == 0);
        ck_assert_uint_eq(c.key_len, MAX_TUBE_NAME + 1);
    }
}
END_TEST

START_TEST(set_spacing_and_case)
{
    P("SET q 1 2 3", .type = MC_CMD_SET, .has_body = 1, .flags = 1, .exptime = 2,
      .bytes = 3, .key = "q", .name = "q");
    P("Set q 1 2 3", .type = MC_CMD_SET, .has_body = 1, .flags = 1, .exptime = 2,
      .bytes = 3, .key = "q", .name = "q");
    P("  set   q  1   2    3   ", .type = MC_CMD_SET, .has_body = 1, .flags = 1,
      .exptime = 2, .bytes = 3, .key = "q", .name = "q");
    /* Keys are case-sensitive: Q is another queue. */
    P("set Q 0 0 1", .type = MC_CMD_SET, .has_body = 1, .bytes = 1, .key = "Q",
      .name = "Q");
}
END_TEST

/* add, replace, append, prepend, cas: unknown (closed), body read first
 * when its size parses. */
START_TEST(storage_commands_unknown)
{
    static const char *const words[] = {"add", "replace", "append", "prepend", "cas",
                                        "ADD", "Cas"};

    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        char line[64];
        McCmd c;
        int n = snprintf(line, sizeof line, "%s k 0 0 9 77 noreply", words[i]);
        ck_assert_int_eq(mc_parse(line, (size_t)n, &c), MC_ERR_UNKNOWN_COMMAND);
        ck_assert_msg(c.type == MC_CMD_UNKNOWN && c.has_body && c.bytes == 9, "%s",
                      line);
        ck_assert_int_eq(c.noreply, 0);
        n = snprintf(line, sizeof line, "%s k 0 0", words[i]);
        ck_assert_int_eq(mc_parse(line, (size_t)n, &c), MC_ERR_UNKNOWN_COMMAND);
        ck_assert_msg(!c.has_body && c.bytes == 0, "%s", line);
        n = snprintf(line, sizeof line, "%s k 0 0 x", words[i]);
        ck_assert_int_eq(mc_parse(line, (size_t)n, &c), MC_ERR_UNKNOWN_COMMAND);
        ck_assert_msg(!c.has_body, "%s", line);
        n = snprintf(line, sizeof line, "%s k 0 0 2147483648", words[i]);
        ck_assert_int_eq(mc_parse(line, (size_t)n, &c), MC_ERR_UNKNOWN_COMMAND);
        ck_assert_msg(!c.has_body, "%s", line);
    }
    /* Other numbers are not looked at: only the size matters. */
    P("add k x y 4", .err = MC_ERR_UNKNOWN_COMMAND, .has_body = 1, .bytes = 4);
    P("cas k 0 0 2147483647 1", .err = MC_ERR_UNKNOWN_COMMAND, .has_body = 1,
      .bytes = MC_MAX_BYTES);
}
END_TEST

/* ---- get -------------------------------------------------------------- */

START_TEST(get_plain)
{
    P("get q", .type = MC_CMD_GET, .key = "q", .name = "q");
    P("gets q", .type = MC_CMD_GET, .key = "q", .name = "q");
    P("GET q", .type = MC_CMD_GET, .key = "q", .name = "q");
    P("GeTs q", .type = MC_CMD_GET, .key = "q", .name = "q");
    P("get  q", .type = MC_CMD_GET, .key = "q", .name = "q");
    P("  get q  ", .type = MC_CMD_GET, .key = "q", .name = "q");
    /* Extra keys are ignored, even bad ones. */
    P("get a b c", .type = MC_CMD_GET, .key = "a", .name = "a");
    P("get a/open b/peek ~~", .type = MC_CMD_GET, .opts = MC_OPT_OPEN,
      .key = "a/open", .name = "a");
    P("get a.b", .type = MC_CMD_GET, .key = "a.b", .name = "a.b");
}
END_TEST

START_TEST(get_each_option)
{
    P("get q/open", .type = MC_CMD_GET, .opts = MC_OPT_OPEN, .key = "q/open",
      .name = "q");
    P("get q/close", .type = MC_CMD_GET, .opts = MC_OPT_CLOSE, .key = "q/close",
      .name = "q");
    P("get q/abort", .type = MC_CMD_GET, .opts = MC_OPT_ABORT, .key = "q/abort",
      .name = "q");
    P("get q/peek", .type = MC_CMD_GET, .opts = MC_OPT_PEEK, .key = "q/peek",
      .name = "q");
    P("get q/t=500", .type = MC_CMD_GET, .timeout_ms = 500, .key = "q/t=500",
      .name = "q");
}
END_TEST

/* Every subset of {open, close, abort, peek}, with and without t=:
 * allowed exactly when kestrel allows it. */
START_TEST(get_option_combinations)
{
    static const char *const opt[4] = {"open", "close", "abort", "peek"};

    for (unsigned set = 0; set < 16; set++) {
        for (int with_t = 0; with_t < 2; with_t++) {
            char line[128];
            int n = snprintf(line, sizeof line, "get q%s", with_t ? "/t=25" : "");
            McCmd c;
            int refused = ((set & (MC_OPT_PEEK | MC_OPT_ABORT)) &&
                           (set & (MC_OPT_OPEN | MC_OPT_CLOSE))) ||
                          ((set & MC_OPT_PEEK) && (set & MC_OPT_ABORT));

            for (int i = 3; i >= 0; i--) /* reverse order: order is free */
                if (set & (1u << i))
                    n += snprintf(line + n, sizeof line - (size_t)n, "/%s", opt[i]);
            mc_parse(line, (size_t)n, &c);
            ck_assert_msg(c.type == MC_CMD_GET && c.opts == set, "%s: opts %#x", line,
                          c.opts);
            ck_assert_msg(c.err == (refused ? MC_ERR_CONFLICTING_OPTIONS : MC_OK),
                          "%s: err %d", line, c.err);
            ck_assert_msg(c.timeout_ms == (with_t ? 25u : 0u), "%s", line);
            ck_assert_msg(c.key == line + 4 && c.key_len == (size_t)n - 4, "%s", line);
            if (!refused)
                ck_assert_msg(c.name == line + 4 && c.name_len == 1, "%s", line);
            ck_assert(mc_error(c.err) == NULL || mc_error(c.err)->close);
        }
    }
    /* Exactly the five refusals of spec kestrel.md §5. */
    P("get q/peek/open", .type = MC_CMD_GET, .err = MC_ERR_CONFLICTING_OPTIONS,
      .opts = MC_OPT_PEEK | MC_OPT_OPEN, .key = "q/peek/open");
    P("get q/close/peek", .type = MC_CMD_GET, .err = MC_ERR_CONFLICTING_OPTIONS,
      .opts = MC_OPT_PEEK | MC_OPT_CLOSE, .key = "q/close/peek");
    P("get q/abort/open", .type = MC_CMD_GET, .err = MC_ERR_CONFLICTING_OPTIONS,
      .opts = MC_OPT_ABORT | MC_OPT_OPEN, .key = "q/abort/open");
    P("get q/abort/close", .type = MC_CMD_GET, .err = MC_ERR_CONFLICTING_OPTIONS,
      .opts = MC_OPT_ABORT | MC_OPT_CLOSE, .key = "q/abort/close");
    P("get q/peek/abort", .type = MC_CMD_GET, .err = MC_ERR_CONFLICTING_OPTIONS,
      .opts = MC_OPT_ABORT | MC_OPT_PEEK, .key = "q/peek/abort");
    /* Allowed together. */
    P("get q/close/open", .type = MC_CMD_GET, .opts = MC_OPT_CLOSE | MC_OPT_OPEN,
      .key = "q/close/open", .name = "q");
    P("get q/open/t=1000/close", .type = MC_CMD_GET, .timeout_ms = 1000,
      .opts = MC_OPT_CLOSE | MC_OPT_OPEN, .key = "q/open/t=1000/close", .name = "q");
    P("get q/peek/t=3", .type = MC_CMD_GET, .timeout_ms = 3, .opts = MC_OPT_PEEK,
      .key = "q/peek/t=3", .name = "q");
    /* Repeats change nothing. */
    P("get q/open/open", .type = MC_CMD_GET, .opts = MC_OPT_OPEN,
      .key = "q/open/open", .name = "q");
}
END_TEST

START_TEST(get_timeouts)
{
    P("get q/t=0", .type = MC_CMD_GET, .key = "q/t=0", .name = "q");
    P("get q/t=-5", .type = MC_CMD_GET, .key = "q/t=-5", .name = "q");
    P("get q/t=-0", .type = MC_CMD_GET, .key = "q/t=-0", .name = "q");
    P("get q/t=-2147483648", .type = MC_CMD_GET, .key = "q/t=-2147483648",
      .name = "q");
    P("get q/t=2147483647", .type = MC_CMD_GET, .timeout_ms = 2147483647u,
      .key = "q/t=2147483647", .name = "q");
    P("get q/t=0000000000000000000001", .type = MC_CMD_GET, .timeout_ms = 1,
      .key = "q/t=0000000000000000000001", .name = "q");
    /* The last t= wins. */
    P("get q/t=5/t=7", .type = MC_CMD_GET, .timeout_ms = 7, .key = "q/t=5/t=7",
      .name = "q");
    P("get q/t=5/t=0", .type = MC_CMD_GET, .key = "q/t=5/t=0", .name = "q");
}
END_TEST

START_TEST(get_bad_timeouts)
{
    static const char *const keys[] = {
        "q/t=", "q/t=x", "q/t=2147483648", "q/t=-2147483649", "q/t=+5", "q/t=1.5",
        "q/t=5ms", "q/t= 5", "q/t=-", "q/t=99999999999999999999999",
        "q/open/t=x", "q/t=1/t=y", "q/t=y/t=1",
    };

    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char line[64];
        McCmd c;
        int n = snprintf(line, sizeof line, "get %s", keys[i]);
        /* "q/t= 5": the space ends the key; "5" is an extra key. */
        ck_assert_msg(mc_parse(line, (size_t)n, &c) == MC_ERR_BAD_TIMEOUT, "%s: %d",
                      line, c.err);
        ck_assert_msg(c.type == MC_CMD_GET && c.name_len == 1 && !c.has_body, "%s",
                      line);
        ck_assert_int_eq(mc_error(c.err)->close, 0);
    }
}
END_TEST

START_TEST(get_unknown_options_ignored)
{
    P("get q/xyz", .type = MC_CMD_GET, .key = "q/xyz", .name = "q");
    P("get q/", .type = MC_CMD_GET, .key = "q/", .name = "q");
    P("get q//open", .type = MC_CMD_GET, .opts = MC_OPT_OPEN, .key = "q//open",
      .name = "q");
    P("get q/open/", .type = MC_CMD_GET, .opts = MC_OPT_OPEN, .key = "q/open/",
      .name = "q");
    P("get q///", .type = MC_CMD_GET, .key = "q///", .name = "q");
    /* Options are case-sensitive (kestrel compares exactly). */
    P("get q/OPEN", .type = MC_CMD_GET, .key = "q/OPEN", .name = "q");
    P("get q/T=5", .type = MC_CMD_GET, .key = "q/T=5", .name = "q");
    P("get q/opened", .type = MC_CMD_GET, .key = "q/opened", .name = "q");
    P("get q/t", .type = MC_CMD_GET, .key = "q/t", .name = "q");
    P("get q/~!\x01", .type = MC_CMD_GET, .key = "q/~!\x01", .name = "q");
}
END_TEST

START_TEST(get_refusals_and_names)
{
    /* Empty name: refused, closed. */
    P("get /open", .type = MC_CMD_GET, .err = MC_ERR_EMPTY_QUEUE_NAME,
      .opts = MC_OPT_OPEN, .key = "/open");
    P("get /", .type = MC_CMD_GET, .err = MC_ERR_EMPTY_QUEUE_NAME, .key = "/");
    P("get //t=5", .type = MC_CMD_GET, .err = MC_ERR_EMPTY_QUEUE_NAME,
      .timeout_ms = 5, .key = "//t=5");
    /* A bad name: kept. */
    P("get -q", .type = MC_CMD_GET, .err = MC_ERR_BAD_QUEUE_NAME, .key = "-q");
    P("get a~b/open", .type = MC_CMD_GET, .err = MC_ERR_BAD_QUEUE_NAME,
      .opts = MC_OPT_OPEN, .key = "a~b/open");
    P("get a\rb", .type = MC_CMD_GET, .err = MC_ERR_BAD_QUEUE_NAME, .key = "a\rb");
    /* A CR that was not right before the LF stays in the key. */
    P("get q\r", .type = MC_CMD_GET, .err = MC_ERR_BAD_QUEUE_NAME, .key = "q\r");
    /* Missing key: kept. */
    P("get", .type = MC_CMD_GET, .err = MC_ERR_MISSING_ARGS);
    P("gets   ", .type = MC_CMD_GET, .err = MC_ERR_MISSING_ARGS);
}
END_TEST

/* Several faults: the refusals that close win, then the name, then the
 * timeout. */
START_TEST(get_error_precedence)
{
    P("get /t=x", .type = MC_CMD_GET, .err = MC_ERR_EMPTY_QUEUE_NAME, .key = "/t=x");
    P("get /peek/open", .type = MC_CMD_GET, .err = MC_ERR_EMPTY_QUEUE_NAME,
      .opts = MC_OPT_PEEK | MC_OPT_OPEN, .key = "/peek/open");
    P("get ~/peek/open", .type = MC_CMD_GET, .err = MC_ERR_CONFLICTING_OPTIONS,
      .opts = MC_OPT_PEEK | MC_OPT_OPEN, .key = "~/peek/open");
    P("get q/t=x/abort/close", .type = MC_CMD_GET, .err = MC_ERR_CONFLICTING_OPTIONS,
      .opts = MC_OPT_ABORT | MC_OPT_CLOSE, .key = "q/t=x/abort/close");
    P("get ~/t=x", .type = MC_CMD_GET, .err = MC_ERR_BAD_QUEUE_NAME, .key = "~/t=x");
}
END_TEST

START_TEST(get_long_key)
{
    /* A 200-byte name with options is fine, though over memcached's 250. */
    char line[MC_MAX_LINE];
    int n = snprintf(line, sizeof line, "get ");
    McCmd c;

    memset(line + n, 'k', MAX_TUBE_NAME);
    n += MAX_TUBE_NAME;
    for (int i = 0; i < 100; i++)
        n += snprintf(line + n, sizeof line - (size_t)n, "/open/t=9");
    ck_assert_int_eq(mc_parse(line, (size_t)n, &c), MC_OK);
    ck_assert_uint_eq(c.name_len, MAX_TUBE_NAME);
    ck_assert_uint_eq(c.key_len, (size_t)n - 4);
    ck_assert_uint_eq(c.timeout_ms, 9);
    ck_assert_uint_eq(c.opts, MC_OPT_OPEN);
}
END_TEST

/* ---- queue administration -------------------------------------------- */

START_TEST(delete_forms)
{
    P("delete q", .type = MC_CMD_DELETE, .key = "q", .name = "q");
    P("DELETE q", .type = MC_CMD_DELETE, .key = "q", .name = "q");
    P("delete q noreply", .type = MC_CMD_DELETE, .noreply = 1, .key = "q", .name = "q");
    /* python-memcache's delete with a time, memcached's last-token rule. */
    P("delete q 0", .type = MC_CMD_DELETE, .key = "q", .name = "q");
    P("delete q 0 noreply", .type = MC_CMD_DELETE, .noreply = 1, .key = "q",
      .name = "q");
    P("delete noreply", .type = MC_CMD_DELETE, .key = "noreply", .name = "noreply");
    P("delete", .type = MC_CMD_DELETE, .err = MC_ERR_MISSING_ARGS);
    P("delete q/open", .type = MC_CMD_DELETE, .err = MC_ERR_BAD_QUEUE_NAME,
      .key = "q/open");
    P("delete -q noreply", .type = MC_CMD_DELETE, .err = MC_ERR_BAD_QUEUE_NAME,
      .noreply = 1, .key = "-q");
}
END_TEST

START_TEST(flush_forms)
{
    P("flush q", .type = MC_CMD_FLUSH, .key = "q", .name = "q");
    P("FLUSH q extra", .type = MC_CMD_FLUSH, .key = "q", .name = "q");
    P("flush", .type = MC_CMD_FLUSH, .err = MC_ERR_MISSING_ARGS);
    P("flush a/b", .type = MC_CMD_FLUSH, .err = MC_ERR_BAD_QUEUE_NAME, .key = "a/b");
    P("flush_expired q", .type = MC_CMD_FLUSH_EXPIRED, .key = "q", .name = "q");
    P("flush_expired", .type = MC_CMD_FLUSH_EXPIRED, .err = MC_ERR_MISSING_ARGS);
    P("flush_expired ~", .type = MC_CMD_FLUSH_EXPIRED, .err = MC_ERR_BAD_QUEUE_NAME,
      .key = "~");
    P("flush_all", .type = MC_CMD_FLUSH_ALL);
    P("flush_all noreply", .type = MC_CMD_FLUSH_ALL, .noreply = 1);
    /* pymemcache sends a delay first. */
    P("flush_all 0", .type = MC_CMD_FLUSH_ALL);
    P("flush_all 0 noreply", .type = MC_CMD_FLUSH_ALL, .noreply = 1);
    P("Flush_All   noreply  ", .type = MC_CMD_FLUSH_ALL, .noreply = 1);
    P("flush_all_expired", .type = MC_CMD_FLUSH_ALL_EXPIRED);
    P("flush_all_expired q", .type = MC_CMD_FLUSH_ALL_EXPIRED);
}
END_TEST

/* ---- server commands -------------------------------------------------- */

START_TEST(argument_free_commands)
{
    P("version", .type = MC_CMD_VERSION);
    P("VERSION x", .type = MC_CMD_VERSION);
    P("stats", .type = MC_CMD_STATS);
    P("stats items", .type = MC_CMD_STATS);
    P("stats slabs 1 2 3", .type = MC_CMD_STATS);
    P("dump_config", .type = MC_CMD_DUMP_CONFIG);
    P("dump_config q", .type = MC_CMD_DUMP_CONFIG);
    P("reload", .type = MC_CMD_RELOAD);
    P("reload now", .type = MC_CMD_RELOAD);
    P("shutdown", .type = MC_CMD_SHUTDOWN);
    P("SHUTDOWN please", .type = MC_CMD_SHUTDOWN);
    P("quit", .type = MC_CMD_QUIT);
    P("quit now", .type = MC_CMD_QUIT);
    P("Quit", .type = MC_CMD_QUIT);
}
END_TEST

START_TEST(status_forms)
{
    P("status", .type = MC_CMD_STATUS);
    P("status   ", .type = MC_CMD_STATUS);
    P("STATUS", .type = MC_CMD_STATUS);
    P("status up", .type = MC_CMD_STATUS, .err = MC_ERR_STATUS_READ_ONLY);
    P("status readonly", .type = MC_CMD_STATUS, .err = MC_ERR_STATUS_READ_ONLY);
    P("status x y", .type = MC_CMD_STATUS, .err = MC_ERR_STATUS_READ_ONLY);
}
END_TEST

START_TEST(dump_stats_names)
{
    P("dump_stats", .type = MC_CMD_DUMP_STATS);
    P("dump_stats   ", .type = MC_CMD_DUMP_STATS);
    P("dump_stats q", .type = MC_CMD_DUMP_STATS, .names = "q");
    P("DUMP_STATS a  b   c ", .type = MC_CMD_DUMP_STATS, .names = "a,b,c");
    /* Not checked: an illegal name is just not a tube. */
    P("dump_stats ~ a/b", .type = MC_CMD_DUMP_STATS, .names = "~,a/b");
}
END_TEST

START_TEST(names_iterator)
{
    const char *s = "x  yy zzz";
    McNames it = {s, s + strlen(s)}, none = {NULL, NULL};
    const char *p = NULL;
    size_t n = 0;

    ck_assert(mc_names_next(&it, &p, &n) && p == s && n == 1);
    ck_assert(mc_names_next(&it, &p, &n) && p == s + 3 && n == 2);
    ck_assert(mc_names_next(&it, &p, &n) && p == s + 6 && n == 3);
    ck_assert(!mc_names_next(&it, &p, &n));
    ck_assert(!mc_names_next(&it, &p, &n));
    ck_assert(p == s + 6 && n == 3); /* untouched at the end */
    ck_assert(!mc_names_next(&none, &p, &n));
}
END_TEST

START_TEST(monitor_forms)
{
    P("monitor q 10", .type = MC_CMD_MONITOR, .seconds = 10, .key = "q", .name = "q");
    P("monitor q 10 1", .type = MC_CMD_MONITOR, .seconds = 10, .max = 1, .key = "q",
      .name = "q");
    P("monitor q 0 0", .type = MC_CMD_MONITOR, .max_zero = 1, .key = "q", .name = "q");
    P("MONITOR  q  4294967295  4294967294 x", .type = MC_CMD_MONITOR,
      .seconds = UINT32_MAX, .max = UINT32_MAX - 1, .key = "q", .name = "q");
    P("monitor", .type = MC_CMD_MONITOR, .err = MC_ERR_MISSING_ARGS);
    P("monitor q", .type = MC_CMD_MONITOR, .err = MC_ERR_MISSING_ARGS);
    P("monitor q x", .type = MC_CMD_MONITOR, .err = MC_ERR_BAD_FORMAT, .key = "q",
      .name = "q");
    P("monitor q -1", .type = MC_CMD_MONITOR, .err = MC_ERR_BAD_FORMAT, .key = "q",
      .name = "q");
    P("monitor q 4294967296", .type = MC_CMD_MONITOR, .err = MC_ERR_BAD_FORMAT,
      .key = "q", .name = "q");
    P("monitor q 1 x", .type = MC_CMD_MONITOR, .err = MC_ERR_BAD_FORMAT,
      .seconds = 1, .key = "q", .name = "q");
    P("monitor q/open 1", .type = MC_CMD_MONITOR, .err = MC_ERR_BAD_QUEUE_NAME,
      .seconds = 1, .key = "q/open");
    P("monitor ~ x", .type = MC_CMD_MONITOR, .err = MC_ERR_BAD_FORMAT, .key = "~");
}
END_TEST

START_TEST(confirm_forms)
{
    P("confirm q 1", .type = MC_CMD_CONFIRM, .count = 1, .key = "q", .name = "q");
    P("confirm q 0", .type = MC_CMD_CONFIRM, .key = "q", .name = "q");
    P("Confirm q 4294967295 extra", .type = MC_CMD_CONFIRM, .count = UINT32_MAX,
      .key = "q", .name = "q");
    P("confirm", .type = MC_CMD_CONFIRM, .err = MC_ERR_MISSING_ARGS);
    P("confirm q", .type = MC_CMD_CONFIRM, .err = MC_ERR_MISSING_ARGS);
    P("confirm q x", .type = MC_CMD_CONFIRM, .err = MC_ERR_BAD_FORMAT, .key = "q",
      .name = "q");
    P("confirm q -1", .type = MC_CMD_CONFIRM, .err = MC_ERR_BAD_FORMAT, .key = "q",
      .name = "q");
    P("confirm -q 1", .type = MC_CMD_CONFIRM, .err = MC_ERR_BAD_QUEUE_NAME,
      .count = 1, .key = "-q");
}
END_TEST

/* ---- unknown ---------------------------------------------------------- */

START_TEST(unknown_commands)
{
    static const char *const lines[] = {
        "", " ", "   ", "foo", "foo bar", "getq", "get_q", "gett q", "ge q",
        "get\tq", "\tget q", "incr q 1", "decr q 1", "touch q 0", "verbosity 1",
        "flushall", "flush-all", "dump", "stat", "statsx", "set_q 0 0 1",
        "gat 0 q", "mg q v", "ms q 2", "\r", "\x00get q", "versionversionversionversion",
    };

    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
        McCmd c;
        size_t n = strlen(lines[i]);
        if (i == sizeof lines / sizeof lines[0] - 2)
            n = 6; /* "\0get q" */
        ck_assert_msg(mc_parse(lines[i], n, &c) == MC_ERR_UNKNOWN_COMMAND, "'%s'",
                      unit_show(lines[i], n));
        ck_assert_msg(c.type == MC_CMD_UNKNOWN && !c.has_body && !c.key && !c.name,
                      "'%s'", unit_show(lines[i], n));
    }
    P("get\0 q", .err = MC_ERR_UNKNOWN_COMMAND);
    P("set\0 q 0 0 1", .err = MC_ERR_UNKNOWN_COMMAND);
    {
        McCmd c;
        ck_assert_int_eq(mc_parse(NULL, 0, &c), MC_ERR_UNKNOWN_COMMAND);
    }
}
END_TEST

/* Lines real clients send (seen in memcached -vv traces). */
START_TEST(client_lines)
{
    /* libmemcached's memcstat, with its trailing space. */
    P("stats ", .type = MC_CMD_STATS);
    P("version", .type = MC_CMD_VERSION);
    /* pymemcache with its default noreply. */
    P("set pymemcache_1_2 0 0 3 noreply", .type = MC_CMD_SET, .has_body = 1,
      .bytes = 3, .noreply = 1, .key = "pymemcache_1_2", .name = "pymemcache_1_2");
    P("flush_all 0 noreply", .type = MC_CMD_FLUSH_ALL, .noreply = 1);
    P("delete q noreply", .type = MC_CMD_DELETE, .noreply = 1, .key = "q", .name = "q");
    /* php-memcached, python-memcache, npm memcached. */
    P("set php_memcached_9_1 0 0 5", .type = MC_CMD_SET, .has_body = 1, .bytes = 5,
      .key = "php_memcached_9_1", .name = "php_memcached_9_1");
    P("get node_memcached_9_1/t=300/open", .type = MC_CMD_GET, .timeout_ms = 300,
      .opts = MC_OPT_OPEN, .key = "node_memcached_9_1/t=300/open",
      .name = "node_memcached_9_1");
    P("gets q/close/open", .type = MC_CMD_GET, .opts = MC_OPT_CLOSE | MC_OPT_OPEN,
      .key = "q/close/open", .name = "q");
    P("quit", .type = MC_CMD_QUIT);
}
END_TEST

/* The parser reads exactly len bytes. */
START_TEST(reads_only_len)
{
    McCmd c;

    ck_assert_int_eq(mc_parse("get q/open", 5, &c), MC_OK);
    ck_assert_uint_eq(c.key_len, 1);
    ck_assert_uint_eq(c.opts, 0);
    ck_assert_int_eq(mc_parse("set q 0 0 12", 11, &c), MC_OK);
    ck_assert_uint_eq(c.bytes, 1);
    ck_assert_int_eq(mc_parse("statusx", 6, &c), MC_OK);
    ck_assert_int_eq(c.type, MC_CMD_STATUS);
    ck_assert_int_eq(mc_parse("status x", 6, &c), MC_OK);
    ck_assert_int_eq(mc_parse("get q/t=12", 9, &c), MC_OK);
    ck_assert_uint_eq(c.timeout_ms, 1);
}
END_TEST

/* ---- replies, names, expiry ------------------------------------------- */

/* Every error reply, exactly, with its fate (spec kestrel.md §3, §5). */
START_TEST(error_table)
{
    static const struct {
        McErr err;
        const char *line;
        int close;
    } want[] = {
        {MC_ERR_LINE_TOO_LONG, "CLIENT_ERROR line too long\r\n", 1},
        {MC_ERR_UNKNOWN_COMMAND, "CLIENT_ERROR unknown command\r\n", 1},
        {MC_ERR_BAD_FORMAT, "CLIENT_ERROR bad command line format\r\n", 0},
        {MC_ERR_BAD_FORMAT_CLOSE, "CLIENT_ERROR bad command line format\r\n", 1},
        {MC_ERR_BAD_QUEUE_NAME, "CLIENT_ERROR bad queue name\r\n", 0},
        {MC_ERR_BAD_TIMEOUT, "CLIENT_ERROR bad timeout\r\n", 0},
        {MC_ERR_EMPTY_QUEUE_NAME, "CLIENT_ERROR empty queue name\r\n", 1},
        {MC_ERR_CONFLICTING_OPTIONS, "CLIENT_ERROR conflicting options\r\n", 1},
        {MC_ERR_MISSING_ARGS, "CLIENT_ERROR missing arguments\r\n", 0},
        {MC_ERR_STATUS_READ_ONLY, "CLIENT_ERROR status is changed by signal only\r\n", 1},
        {MC_ERR_BAD_DATA_CHUNK, "CLIENT_ERROR bad data chunk\r\n", 1},
        {MC_ERR_DRAINING, "SERVER_ERROR\r\n", 1},
        {MC_ERR_OPEN_HELD, "ERROR\r\n", 1},
        {MC_ERR_NOTHING_OPEN, "ERROR\r\n", 0},
        {MC_ERR_SHUTDOWN_DISABLED, "CLIENT_ERROR shutdown disabled\r\n", 0},
        {MC_ERR_NOT_ALLOWED, "CLIENT_ERROR not allowed\r\n", 0},
        {MC_ERR_REPLICA, "SERVER_ERROR replica\r\n", 0},
        {MC_ERR_BUSY_GET, "SERVER_ERROR out of memory writing get response\r\n", 0},
        {MC_ERR_BUSY_STATS, "SERVER_ERROR out of memory writing stats\r\n", 0},
    };

    ck_assert_uint_eq(sizeof want / sizeof want[0], MC_ERR_COUNT - 1);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const McErrorReply *e = mc_error(want[i].err);
        ck_assert_msg(e && strcmp(e->line, want[i].line) == 0, "err %d: '%s'",
                      want[i].err, e ? e->line : "(null)");
        ck_assert_uint_eq(e->len, strlen(want[i].line));
        ck_assert_int_eq(e->close, want[i].close);
    }
    ck_assert_ptr_null(mc_error(MC_OK));
    ck_assert_ptr_null(mc_error(MC_ERR_COUNT));
    ck_assert_ptr_null(mc_error((McErr)-1));
}
END_TEST

START_TEST(command_names_round_trip)
{
    static const char *const args[MC_CMD_COUNT] = {
        [MC_CMD_SET] = " q 0 0 1", [MC_CMD_GET] = " q", [MC_CMD_DELETE] = " q",
        [MC_CMD_FLUSH] = " q", [MC_CMD_FLUSH_EXPIRED] = " q",
        [MC_CMD_MONITOR] = " q 1", [MC_CMD_CONFIRM] = " q 1",
    };

    ck_assert_str_eq(mc_cmd_name(MC_CMD_UNKNOWN), "unknown");
    ck_assert_str_eq(mc_cmd_name(MC_CMD_COUNT), "unknown");
    ck_assert_str_eq(mc_cmd_name(MC_CMD_FLUSH_ALL_EXPIRED), "flush_all_expired");
    for (int t = 1; t < MC_CMD_COUNT; t++) {
        char line[64];
        McCmd c;
        int n = snprintf(line, sizeof line, "%s%s", mc_cmd_name((McCmdType)t),
                         args[t] ? args[t] : "");
        ck_assert_msg(mc_parse(line, (size_t)n, &c) == MC_OK, "%s: %d", line, c.err);
        ck_assert_msg(c.type == (McCmdType)t, "'%s' parsed as %d", line, c.type);
    }
}
END_TEST

START_TEST(expiry_rule)
{
    const int64_t now = 1700000000;
    int64_t at = 42;

    ck_assert_int_eq(mc_expiry(0, now, &at), 0);
    ck_assert_int_eq(at, 42); /* untouched */
    ck_assert(mc_expiry(1, now, &at) == 1 && at == now + 1);
    ck_assert(mc_expiry(60, now, &at) == 1 && at == now + 60);
    ck_assert(mc_expiry(999999, now, &at) == 1 && at == now + 999999);
    /* kestrel's cutoff, not memcached's 30 days (2592000). */
    ck_assert(mc_expiry(1000000, now, &at) == 1 && at == 1000000);
    ck_assert(mc_expiry(2592000, now, &at) == 1 && at == 2592000);
    ck_assert(mc_expiry(1800000000, now, &at) == 1 && at == 1800000000);
    ck_assert(mc_expiry(INT32_MAX, now, &at) == 1 && at == INT32_MAX);
    /* Negative: already expired. */
    ck_assert(mc_expiry(-1, now, &at) == 1 && at == now - 1 && at < now);
    ck_assert(mc_expiry(INT32_MIN, now, &at) == 1 && at == now + INT32_MIN);
    /* Far-out clocks saturate rather than overflow. */
    ck_assert(mc_expiry(5, INT64_MAX - 2, &at) == 1 && at == INT64_MAX);
    ck_assert(mc_expiry(-5, INT64_MIN + 2, &at) == 1 && at == INT64_MIN);
    ck_assert(mc_expiry(5, INT64_MAX - 5, &at) == 1 && at == INT64_MAX);
    ck_assert(mc_expiry(-5, INT64_MIN + 5, &at) == 1 && at == INT64_MIN);
}
END_TEST

/* Random lines of command words, keys, options and numbers: the result
 * is always consistent (fields inside the line, errors from the table). */
START_TEST(random_lines_consistent)
{
    static const char *const parts[] = {
        "set", "get", "GETS", "delete", "flush_all", "monitor", "confirm", "status",
        "dump_stats", "add", " ", "  ", "q", "q/open", "q/close", "q/abort", "q/peek",
        "/t=5", "/t=x", "/open", "0", "-1", "5", "4294967296", "2147483648",
        "noreply", "~", "-x", "\r", "/", "a.b",
    };
    Rng r;
    char line[256];

    rng_seed(&r, 12345);
    for (int iter = 0; iter < 20000; iter++) {
        size_t n = 0;
        int k = (int)rng_below(&r, 8);
        McCmd c;

        for (int i = 0; i < k; i++) {
            const char *s = parts[rng_below(&r, sizeof parts / sizeof parts[0])];
            size_t sl = strlen(s);
            if (n + sl + 1 >= sizeof line)
                break;
            memcpy(line + n, s, sl);
            n += sl;
            if (rng_below(&r, 2))
                line[n++] = ' ';
        }
        mc_parse(line, n, &c);
        REQUIRE(c.err < MC_ERR_COUNT && c.type < MC_CMD_COUNT);
        REQUIRE(c.err == MC_OK || mc_error(c.err) != NULL);
        REQUIRE(!c.key_len || (c.key >= line && c.key + c.key_len <= line + n));
        REQUIRE(!c.name_len || (c.name == c.key && c.name_len <= c.key_len));
        REQUIRE(!c.name_len || tube_name_valid(c.name, c.name_len));
        REQUIRE(!c.has_body || c.bytes <= MC_MAX_BYTES);
        REQUIRE(c.err != MC_OK || c.type != MC_CMD_UNKNOWN);
    }
}
END_TEST

static Suite *mcparse_suite(void)
{
    Suite *s = suite_create("mcparse");
    TCase *tc = unit_tcase("framing");

    tcase_add_test(tc, frame_terminators);
    tcase_add_test(tc, frame_incomplete);
    tcase_add_test(tc, frame_limits);
    tcase_add_test(tc, frame_then_parse_pipeline);
    suite_add_tcase(s, tc);

    tc = unit_tcase("set");
    tcase_add_test(tc, set_valid);
    tcase_add_test(tc, set_noreply);
    tcase_add_test(tc, set_bad_flags_exptime);
    tcase_add_test(tc, set_bad_bytes_closes);
    tcase_add_test(tc, set_bad_queue_name);
    tcase_add_test(tc, set_spacing_and_case);
    tcase_add_test(tc, storage_commands_unknown);
    suite_add_tcase(s, tc);

    tc = unit_tcase("get");
    tcase_add_test(tc, get_plain);
    tcase_add_test(tc, get_each_option);
    tcase_add_test(tc, get_option_combinations);
    tcase_add_test(tc, get_timeouts);
    tcase_add_test(tc, get_bad_timeouts);
    tcase_add_test(tc, get_unknown_options_ignored);
    tcase_add_test(tc, get_refusals_and_names);
    tcase_add_test(tc, get_error_precedence);
    tcase_add_test(tc, get_long_key);
    suite_add_tcase(s, tc);

    tc = unit_tcase("other commands");
    tcase_add_test(tc, delete_forms);
    tcase_add_test(tc, flush_forms);
    tcase_add_test(tc, argument_free_commands);
    tcase_add_test(tc, status_forms);
    tcase_add_test(tc, dump_stats_names);
    tcase_add_test(tc, names_iterator);
    tcase_add_test(tc, monitor_forms);
    tcase_add_test(tc, confirm_forms);
    tcase_add_test(tc, unknown_commands);
    tcase_add_test(tc, reads_only_len);
    tcase_add_test(tc, client_lines);
    suite_add_tcase(s, tc);

    tc = unit_tcase("tables");
    tcase_add_test(tc, error_table);
    tcase_add_test(tc, command_names_round_trip);
    tcase_add_test(tc, expiry_rule);
    tcase_add_test(tc, random_lines_consistent);
    suite_add_tcase(s, tc);
    return s;
}

UNIT_MAIN(mcparse_suite)
