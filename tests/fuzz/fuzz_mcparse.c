/*
 * fuzz_mcparse.c — the memcache parser (src/proto/memcache/mcparse.h) on
 * arbitrary bytes: the input is framed line by line with mc_find_line(),
 * as a connection would, and every line goes through mc_parse(); the whole
 * input is also parsed as one line.
 *
 * Checks: framing results agree with a reference (an LF within the first
 * MC_MAX_LINE bytes, a CR before it dropped); the parse result is
 * internally consistent (err and type in range, err from the table,
 * pointers inside the line, name a legal tube name at the start of the
 * key, body only for set and the storage commands, fields only for the
 * commands that have them); parsing is unchanged when the command word's
 * case is flipped or every space is doubled; a successful command printed
 * back in canonical form parses to the same fields; mc_expiry() follows
 * kestrel's rule.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcparse.h"
#include "names.h"

#define CHECK(cond, ...)                                          \
    do {                                                          \
        if (!(cond)) {                                            \
            fprintf(stderr, "\nFUZZ CHECK FAILED: " __VA_ARGS__); \
            fprintf(stderr, "\n");                                \
            abort();                                              \
        }                                                         \
    } while (0)

static int inside(const char *q, size_t qn, const char *line, size_t len)
{
    return qn == 0 || (q >= line && q + qn <= line + len);
}

static int same_bytes(const char *a, size_t an, const char *b, size_t bn)
{
    return an == bn && (an == 0 || memcmp(a, b, an) == 0);
}

/* ---- framing ---------------------------------------------------------- */

static void check_frame(const char *buf, size_t len, McLine r, size_t line_len,
                        size_t used)
{
    size_t scan = len < MC_MAX_LINE ? len : MC_MAX_LINE;
    const char *lf = len ? memchr(buf, '\n', scan) : NULL;

    if (!lf) {
        CHECK(r == (len >= MC_MAX_LINE ? MC_LINE_TOO_LONG : MC_LINE_INCOMPLETE),
              "frame %d for %zu bytes without an LF in reach", r, len);
        return;
    }
    CHECK(r == MC_LINE_OK, "frame %d with an LF at %zu", r, (size_t)(lf - buf));
    CHECK(used == (size_t)(lf - buf) + 1 && used <= MC_MAX_LINE && used <= len,
          "used %zu, LF at %zu", used, (size_t)(lf - buf));
    CHECK(line_len == used - 1 ||
              (line_len == used - 2 && buf[line_len] == '\r'),
          "line_len %zu, used %zu", line_len, used);
    CHECK((used >= 2 && buf[used - 2] == '\r') == (line_len == used - 2),
          "the CR before the LF not dropped (or another byte dropped)");
}

/* ---- one parse -------------------------------------------------------- */

static int takes_queue(McCmdType t)
{
    return t == MC_CMD_SET || t == MC_CMD_GET || t == MC_CMD_DELETE ||
           t == MC_CMD_FLUSH || t == MC_CMD_FLUSH_EXPIRED || t == MC_CMD_MONITOR ||
           t == MC_CMD_CONFIRM;
}

static void check_names(const McCmd *c, const char *line, size_t len)
{
    McNames it = c->names;
    const char *p;
    size_t n;
    int k = 0;

    while (mc_names_next(&it, &p, &n)) {
        CHECK(c->type == MC_CMD_DUMP_STATS, "names on %s", mc_cmd_name(c->type));
        CHECK(n > 0 && inside(p, n, line, len) && !memchr(p, ' ', n),
              "bad name token");
        CHECK(++k <= (int)len, "names never end");
    }
}

static void check_cmd(const McCmd *c, McErr r, const char *line, size_t len)
{
    const McErrorReply *e = mc_error(c->err);

    CHECK(r == c->err, "returned %d, err %d", r, c->err);
    CHECK(c->err < MC_ERR_COUNT && c->type < MC_CMD_COUNT, "err %d type %d", c->err,
          c->type);
    CHECK((c->err == MC_OK) == (e == NULL), "mc_error(%d)", c->err);
    if (e)
        CHECK(e->len == strlen(e->line) && e->len >= 3 &&
                  !strcmp(e->line + e->len - 2, "\r\n"),
              "reply of %d", c->err);
    CHECK(c->type != MC_CMD_UNKNOWN || c->err == MC_ERR_UNKNOWN_COMMAND,
          "unknown with err %d", c->err);
    CHECK(c->err != MC_ERR_UNKNOWN_COMMAND || c->type == MC_CMD_UNKNOWN,
          "unknown command error on %s", mc_cmd_name(c->type));
    CHECK(inside(c->key, c->key_len, line, len), "key outside the line");
    CHECK(!c->key_len || !memchr(c->key, ' ', c->key_len), "space in key");
    if (c->name_len) {
        CHECK(c->name == c->key && c->name_len <= c->key_len, "name not at key");
        CHECK(tube_name_valid(c->name, c->name_len) &&
                  !memchr(c->name, '/', c->name_len),
              "illegal name '%.*s'", (int)c->name_len, c->name);
        CHECK(c->name_len == c->key_len || c->key[c->name_len] == '/',
              "name does not end at '/'");
        CHECK(takes_queue(c->type), "name on %s", mc_cmd_name(c->type));
    }
    if (c->err == MC_OK && takes_queue(c->type))
        CHECK(c->name_len > 0, "%s without a name", mc_cmd_name(c->type));
    if (c->type != MC_CMD_GET && c->name_len)
        CHECK(c->name_len == c->key_len, "options on %s", mc_cmd_name(c->type));
    CHECK(c->has_body == 0 || c->has_body == 1, "has_body %d", c->has_body);
    CHECK(!c->has_body || c->type == MC_CMD_SET || c->type == MC_CMD_UNKNOWN,
          "body on %s", mc_cmd_name(c->type));
    CHECK(c->has_body ? c->bytes <= MC_MAX_BYTES : c->bytes == 0, "bytes %u",
          c->bytes);
    CHECK(c->type != MC_CMD_SET || c->has_body || c->err == MC_ERR_BAD_FORMAT_CLOSE,
          "set without body, err %d", c->err);
    CHECK(!c->noreply || c->type == MC_CMD_SET || c->type == MC_CMD_DELETE ||
              c->type == MC_CMD_FLUSH_ALL,
          "noreply on %s", mc_cmd_name(c->type));
    CHECK(c->type == MC_CMD_GET || (c->opts == 0 && c->timeout_ms == 0),
          "options on %s", mc_cmd_name(c->type));
    CHECK(!(c->opts & ~0xfu) && c->timeout_ms <= MC_MAX_BYTES, "opts %#x", c->opts);
    CHECK(c->type == MC_CMD_SET || (c->flags == 0 && c->exptime == 0), "set fields");
    CHECK(c->type == MC_CMD_MONITOR || (c->seconds == 0 && c->max == UINT32_MAX),
          "monitor fields");
    CHECK(c->type == MC_CMD_CONFIRM || c->count == 0, "confirm fields");
    if (c->err == MC_OK && c->type == MC_CMD_GET) {
        unsigned o = c->opts;
        CHECK(!((o & (MC_OPT_PEEK | MC_OPT_ABORT)) && (o & (MC_OPT_OPEN | MC_OPT_CLOSE))) &&
                  !((o & MC_OPT_PEEK) && (o & MC_OPT_ABORT)),
              "conflicting options accepted: %#x", o);
    }
    check_names(c, line, len);
}

/* The fields that describe the command (not where it lies). */
static void check_same(const McCmd *a, const McCmd *b, const char *why)
{
    McNames ia = a->names, ib = b->names;
    const char *pa, *pb;
    size_t na, nb;

    CHECK(a->err == b->err && a->type == b->type, "%s: err %d/%d type %d/%d", why,
          a->err, b->err, a->type, b->type);
    CHECK(a->has_body == b->has_body && a->bytes == b->bytes && a->noreply == b->noreply,
          "%s: body or noreply", why);
    CHECK(a->opts == b->opts && a->timeout_ms == b->timeout_ms, "%s: options", why);
    CHECK(a->flags == b->flags && a->exptime == b->exptime, "%s: set fields", why);
    CHECK(a->seconds == b->seconds && a->max == b->max && a->count == b->count,
          "%s: counts", why);
    CHECK(same_bytes(a->key, a->key_len, b->key, b->key_len), "%s: key", why);
    CHECK(same_bytes(a->name, a->name_len, b->name, b->name_len), "%s: name", why);
    for (;;) {
        int ka = mc_names_next(&ia, &pa, &na), kb = mc_names_next(&ib, &pb, &nb);
        CHECK(ka == kb, "%s: name lists differ in length", why);
        if (!ka)
            break;
        CHECK(same_bytes(pa, na, pb, nb), "%s: name lists differ", why);
    }
}

static McErr parse_exact(const char *line, size_t len, McCmd *c)
{
    McErr r = mc_parse(line, len, c);

    check_cmd(c, r, line, len);
    return r;
}

/* Same line with the command word's letters in the other case. */
static void check_case(const char *line, size_t len, const McCmd *c)
{
    char *v = malloc(len ? len : 1);
    size_t i = 0;
    McCmd again;

    memcpy(v, line, len);
    while (i < len && v[i] == ' ')
        i++;
    for (; i < len && v[i] != ' '; i++) {
        if (v[i] >= 'a' && v[i] <= 'z')
            v[i] = (char)(v[i] - 'a' + 'A');
        else if (v[i] >= 'A' && v[i] <= 'Z')
            v[i] = (char)(v[i] - 'A' + 'a');
    }
    parse_exact(v, len, &again);
    check_same(c, &again, "case flipped");
    free(v);
}

/* Same line with every space doubled, and one leading and trailing. */
static void check_spacing(const char *line, size_t len, const McCmd *c)
{
    char *v = malloc(2 * len + 2);
    size_t n = 0;
    McCmd again;

    v[n++] = ' ';
    for (size_t i = 0; i < len; i++) {
        if (line[i] == ' ')
            v[n++] = ' ';
        v[n++] = line[i];
    }
    v[n++] = ' ';
    parse_exact(v, n, &again);
    check_same(c, &again, "spaces doubled");
    free(v);
}

/* A growing canonical line; keys may hold any byte but space (a NUL
 * too), so they are copied, not printed with %s. */
typedef struct Out {
    char *p;
    size_t n, cap;
} Out;

static void out_bytes(Out *o, const char *s, size_t n)
{
    CHECK(o->n + n <= o->cap, "canonical form too long");
    if (n)
        memcpy(o->p + o->n, s, n);
    o->n += n;
}

static void out_str(Out *o, const char *s)
{
    out_bytes(o, s, strlen(s));
}

static void out_num(Out *o, long long v)
{
    char num[32];
    int n = snprintf(num, sizeof num, " %lld", v);

    out_bytes(o, num, (size_t)n);
}

/* A successful command in canonical form (lower-case word, one space,
 * plain decimals) parses to the same fields. */
static void check_canonical(const McCmd *c, size_t len)
{
    Out o = {malloc(2 * len + 96), 0, 2 * len + 96};
    McNames it = c->names;
    const char *p;
    size_t pn;
    McCmd again;

    out_str(&o, mc_cmd_name(c->type));
    if (c->key_len) {
        out_str(&o, " ");
        out_bytes(&o, c->key, c->key_len);
    }
    switch (c->type) {
    case MC_CMD_SET:
        out_num(&o, c->flags);
        out_num(&o, c->exptime);
        out_num(&o, c->bytes);
        break;
    case MC_CMD_MONITOR:
        out_num(&o, c->seconds);
        out_num(&o, c->max);
        break;
    case MC_CMD_CONFIRM:
        out_num(&o, c->count);
        break;
    case MC_CMD_DUMP_STATS:
        while (mc_names_next(&it, &p, &pn)) {
            out_str(&o, " ");
            out_bytes(&o, p, pn);
        }
        break;
    default:
        break;
    }
    if (c->noreply)
        out_str(&o, " noreply");
    parse_exact(o.p, o.n, &again);
    check_same(c, &again, "canonical form");
    free(o.p);
}

static void check_expiry(int32_t exptime)
{
    const int64_t now = 1700000000;
    int64_t at = -7;
    int r = mc_expiry(exptime, now, &at);

    if (exptime == 0)
        CHECK(r == 0 && at == -7, "exptime 0 expires");
    else if (exptime < 1000000)
        CHECK(r == 1 && at == now + exptime, "relative exptime %d gave %lld", exptime,
              (long long)at);
    else
        CHECK(r == 1 && at == exptime, "absolute exptime %d gave %lld", exptime,
              (long long)at);
}

/* One line, in an exact-size copy so ASan sees any read past it. */
static void one_line(const char *src, size_t len)
{
    char *line = malloc(len ? len : 1);
    McCmd c;

    memcpy(line, src, len);
    memset(&c, 0x5a, sizeof c);
    parse_exact(line, len, &c);
    check_case(line, len, &c);
    check_spacing(line, len, &c);
    if (c.err == MC_OK)
        check_canonical(&c, len);
    if (c.type == MC_CMD_SET && c.err == MC_OK)
        check_expiry(c.exptime);
    free(line);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size ? size : 1);
    size_t off = 0;

    memcpy(buf, data, size);
    one_line(buf, size);
    for (;;) {
        size_t line_len = SIZE_MAX, used = SIZE_MAX;
        McLine r = mc_find_line(buf + off, size - off, &line_len, &used);

        check_frame(buf + off, size - off, r, line_len, used);
        if (r != MC_LINE_OK) {
            CHECK(line_len == SIZE_MAX && used == SIZE_MAX, "outputs set on %d", r);
            break;
        }
        one_line(buf + off, line_len);
        off += used;
    }
    free(buf);
    return 0;
}
