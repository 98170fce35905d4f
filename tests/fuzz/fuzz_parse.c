/*
 * fuzz_parse.c — parse_command() (src/parse.h) on arbitrary bytes, plus the
 * number parser and tube_name_valid() against reference implementations.
 *
 * Checks: the result is one of the three; a line with a NUL is never
 * PARSE_OK; a PARSE_OK line starts with its command word; a name is inside
 * the line and is a valid tube name; numbers are what the line says (the
 * command is printed back in canonical form and must parse to the same
 * Cmd); PARSE_UNKNOWN only when no command word prefixes the line.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numparse.h"
#include "parse.h"

#define CHECK(cond, ...)                                          \
    do {                                                          \
        if (!(cond)) {                                            \
            fprintf(stderr, "\nFUZZ CHECK FAILED: " __VA_ARGS__); \
            fprintf(stderr, "\n");                                \
            abort();                                              \
        }                                                         \
    } while (0)

/* The command words, in the table's order (parse.h). */
static const char *const words[CMD_COUNT] = {
#define X(e, w, a) [CMD_##e] = w,
    TUBED_COMMANDS(X)
#undef X
};

static int ref_name_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           strchr("-+/;.$_()", c) != NULL;
}

static int ref_name_valid(const char *p, size_t n)
{
    if (n < 1 || n > 200 || p[0] == '-')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!p[i] || !ref_name_char((unsigned char)p[i]))
            return 0;
    return 1;
}

static int ref_parse(const char *p, size_t n, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;

    if (n == 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned d;
        if (p[i] < '0' || p[i] > '9')
            return -1;
        d = (unsigned)(p[i] - '0');
        if (v > (max - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

static void check_numbers(const char *p, size_t n)
{
    uint64_t a = 12345, r = 0;
    uint32_t b = 54321;
    int ra = parse_u64(p, n, &a), rr = ref_parse(p, n, UINT64_MAX, &r);

    CHECK(ra == rr, "parse_u64 returned %d, reference %d", ra, rr);
    CHECK(ra < 0 ? a == 12345 : a == r, "parse_u64 value %llu, reference %llu",
          (unsigned long long)a, (unsigned long long)r);
    ra = parse_u32(p, n, &b);
    rr = ref_parse(p, n, UINT32_MAX, &r);
    CHECK(ra == rr, "parse_u32 returned %d, reference %d", ra, rr);
    CHECK(ra < 0 ? b == 54321 : b == r, "parse_u32 value %u, reference %llu", b,
          (unsigned long long)r);
    CHECK(tube_name_valid(p, n) == ref_name_valid(p, n), "tube_name_valid disagrees");
}

static int inside(const char *q, size_t qn, const char *line, size_t len)
{
    return q >= line && q + qn <= line + len;
}

/* The command in canonical form: its word, one space, decimal numbers. */
static size_t canonical(const Cmd *c, char *out, size_t cap)
{
    const char *w = words[c->type];
    int n = 0;

    switch (c->type) {
    case CMD_PUT:
        n = snprintf(out, cap, "%s%u %u %u %u", w, c->pri, c->delay, c->ttr, c->bytes);
        break;
    case CMD_PEEK: case CMD_RESERVE_JOB: case CMD_DELETE: case CMD_KICK_JOB:
    case CMD_TOUCH: case CMD_STATS_JOB:
        n = snprintf(out, cap, "%s%llu", w, (unsigned long long)c->id);
        break;
    case CMD_RESERVE_TIMEOUT: case CMD_KICK:
        n = snprintf(out, cap, "%s%u", w, c->count);
        break;
    case CMD_RELEASE:
        n = snprintf(out, cap, "%s%llu %u %u", w, (unsigned long long)c->id, c->pri, c->delay);
        break;
    case CMD_BURY:
        n = snprintf(out, cap, "%s%llu %u", w, (unsigned long long)c->id, c->pri);
        break;
    case CMD_STATS_TUBE: case CMD_USE: case CMD_WATCH: case CMD_IGNORE:
    case CMD_FLUSH_TUBE:
        n = snprintf(out, cap, "%s%.*s", w, (int)c->name_len, c->name);
        break;
    case CMD_LIST_JOBS: {
        static const char *const st[] = {"ready", "reserved", "delayed", "buried"};
        n = snprintf(out, cap, "%s%.*s %s %llu %u", w, (int)c->name_len, c->name,
                     c->state < 0 ? "all" : st[c->state], (unsigned long long)c->id,
                     c->count);
        break;
    }
    case CMD_MOVE_JOB:
        n = snprintf(out, cap, "%s%llu %.*s", w, (unsigned long long)c->id,
                     (int)c->name_len, c->name);
        break;
    case CMD_PAUSE_TUBE:
        n = snprintf(out, cap, "%s %.*s %u", w, (int)c->name_len, c->name, c->delay);
        break;
    case CMD_REPLICATE:
        n = snprintf(out, cap, "%s%llu %llu", w, (unsigned long long)c->id,
                     (unsigned long long)c->id2);
        break;
    case CMD_FOLLOW: /* the address: the rest of the line */
        n = snprintf(out, cap, "%s%.*s", w, (int)c->name_len, c->name);
        break;
    default:
        n = snprintf(out, cap, "%s", w);
        break;
    }
    return n < 0 ? 0 : (size_t)n;
}

static int has_name(CmdType t)
{
    return t == CMD_STATS_TUBE || t == CMD_USE || t == CMD_WATCH || t == CMD_IGNORE ||
           t == CMD_PAUSE_TUBE || t == CMD_FLUSH_TUBE || t == CMD_LIST_JOBS ||
           t == CMD_MOVE_JOB;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An exact-size copy, so ASan sees any read past the line. */
    char *line = malloc(size ? size : 1);
    Cmd cmd, again;
    ParseResult r;
    int prefixed = -1;

    memcpy(line, data, size);
    check_numbers(line, size);
    r = parse_command(line, size, &cmd);
    CHECK(r == PARSE_OK || r == PARSE_BAD_FORMAT || r == PARSE_UNKNOWN, "result %d", r);
    for (int t = 0; t < CMD_COUNT && prefixed < 0; t++)
        if (size >= strlen(words[t]) && !memcmp(line, words[t], strlen(words[t])))
            prefixed = t;
    if (r == PARSE_UNKNOWN)
        CHECK(prefixed < 0, "UNKNOWN but the line starts with '%s'", words[prefixed]);
    if (r != PARSE_UNKNOWN) {
        CHECK(cmd.type < CMD_COUNT, "type %d", cmd.type);
        CHECK(prefixed == (int)cmd.type || (prefixed < 0 && memchr(line, 0, size)),
              "type %d but the first matching word is %d", cmd.type, prefixed);
        CHECK(cmd_name(cmd.type) && cmd_name(cmd.type)[0], "cmd_name");
    }
    if (r == PARSE_OK) {
        char buf[512];
        size_t n;

        CHECK(!memchr(line, 0, size), "PARSE_OK with a NUL byte");
        CHECK(!cmd.counted, "counted set on PARSE_OK");
        if (has_name(cmd.type)) {
            CHECK(cmd.name && inside(cmd.name, cmd.name_len, line, size),
                  "name outside the line");
            CHECK(ref_name_valid(cmd.name, cmd.name_len), "PARSE_OK with invalid name '%.*s'",
                  (int)cmd.name_len, cmd.name);
        }
        /* Round trip through the canonical form. */
        n = canonical(&cmd, buf, sizeof buf);
        CHECK(n < sizeof buf, "canonical form too long");
        CHECK(parse_command(buf, n, &again) == PARSE_OK, "canonical form '%.*s' not OK",
              (int)n, buf);
        CHECK(again.type == cmd.type && again.id == cmd.id && again.pri == cmd.pri &&
              again.delay == cmd.delay && again.ttr == cmd.ttr && again.bytes == cmd.bytes &&
              again.id2 == cmd.id2 &&
              again.count == cmd.count && again.state == cmd.state &&
              again.name_len == cmd.name_len &&
              (!cmd.name_len || !memcmp(again.name, cmd.name, cmd.name_len)),
              "canonical form '%.*s' parses differently", (int)n, buf);
        /* Nothing but the word, digits, spaces and name characters; a
         * follow's address: printable bytes, no space. */
        for (size_t i = strlen(words[cmd.type]); i < size; i++)
            if (cmd.type == CMD_FOLLOW)
                CHECK(line[i] > ' ' && line[i] <= '~', "follow with byte 0x%02x at %zu",
                      (unsigned char)line[i], i);
            else
                CHECK(line[i] == ' ' || ref_name_char((unsigned char)line[i]),
                      "PARSE_OK with byte 0x%02x at %zu", (unsigned char)line[i], i);
    }
    if (r == PARSE_BAD_FORMAT && cmd.counted)
        CHECK(cmd.type == CMD_PUT || cmd.type == CMD_PAUSE_TUBE, "counted on type %d",
              cmd.type);
    free(line);
    return 0;
}
