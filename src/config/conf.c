#include "conf.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "ascii.h"
#include "numparse.h"

#define MAX_STRING_VALUE 4096            /* a path, an address, a user */
#define MAX_FILE_SIZE (16u * 1024 * 1024)

/* ---- the keys ---------------------------------------------------------- */

enum ValueType {
    VT_INT,  /* decimal digits */
    VT_SIZE, /* digits with an optional K, M or G (powers of 1024) */
    VT_DUR,  /* digits with an optional ms, s, m, h or d; bare = seconds */
    VT_SECS, /* a duration that must be whole seconds */
    VT_BOOL, /* true or false */
    VT_NAME, /* a legal tube name */
    VT_STR,  /* any printable text */
};

/* A key: where its value is stored (offset and size in TubePolicy or
 * ConfServer) and the range it accepts, in the stored unit. One table,
 * so parsing, merging and the key names cannot drift apart. */
typedef struct KeyDef {
    const char *name;
    unsigned char type;
    bool server;
    unsigned char id;
    size_t off, size;
    uint64_t min, max;
} KeyDef;

#define TKEY(n, t, id, f, lo, hi) \
    {n, t, false, id, offsetof(TubePolicy, f), sizeof(((TubePolicy *)0)->f), lo, hi}
#define SKEY(n, t, id, f, lo, hi) \
    {n, t, true, id, offsetof(ConfServer, f), sizeof(((ConfServer *)0)->f), lo, hi}

/* Tube keys first, in TK_ order, then server keys in SK_ order: the
 * name functions index this table directly. */
static const KeyDef keys[] = {
    TKEY("max_items", VT_INT, TK_MAX_ITEMS, max_items, 0, UINT64_MAX),
    TKEY("max_size", VT_SIZE, TK_MAX_SIZE, max_size, 0, UINT64_MAX),
    TKEY("max_item_size", VT_SIZE, TK_MAX_ITEM_SIZE, max_item_size, 0, MAX_JOB_SIZE_LIMIT),
    TKEY("discard_old_when_full", VT_BOOL, TK_DISCARD_OLD_WHEN_FULL, discard_old_when_full, 0, 1),
    TKEY("max_age", VT_DUR, TK_MAX_AGE, max_age_ms, 0, CONF_MAX_DURATION_MS),
    TKEY("move_expired_to", VT_NAME, TK_MOVE_EXPIRED_TO, move_expired_to, 0, 0),
    TKEY("max_timeouts", VT_INT, TK_MAX_TIMEOUTS, max_timeouts, 0, UINT32_MAX),
    TKEY("fanout", VT_BOOL, TK_FANOUT, fanout, 0, 1),
    TKEY("journal", VT_BOOL, TK_JOURNAL, journal, 0, 1),
    TKEY("sync_journal", VT_BOOL, TK_SYNC_JOURNAL, sync_journal, 0, 1),
    TKEY("priority", VT_INT, TK_PRIORITY, priority, 0, UINT32_MAX),
    TKEY("ttr", VT_SECS, TK_TTR, ttr_ms, 1000, CONF_MAX_DURATION_MS),
    TKEY("max_memory_size", VT_SIZE, TK_MAX_MEMORY_SIZE, max_memory_size, 0, UINT64_MAX),
    SKEY("listen", VT_STR, SK_LISTEN, listen, 0, 0),
    SKEY("port", VT_INT, SK_PORT, port, 0, 65535),
    SKEY("max_job_size", VT_SIZE, SK_MAX_JOB_SIZE, max_job_size, 0, MAX_JOB_SIZE_LIMIT),
    SKEY("user", VT_STR, SK_USER, user, 0, 0),
    SKEY("binlog_dir", VT_STR, SK_BINLOG_DIR, binlog_dir, 0, 0),
    SKEY("fsync_ms", VT_INT, SK_FSYNC_MS, fsync_ms, 0, UINT32_MAX),
    SKEY("no_fsync", VT_BOOL, SK_NO_FSYNC, no_fsync, 0, 1),
    SKEY("binlog_file_size", VT_SIZE, SK_BINLOG_FILE_SIZE, binlog_file_size, 0, UINT32_MAX),
    SKEY("verbose", VT_INT, SK_VERBOSE, verbose, 0, INT_MAX),
    SKEY("max_connections", VT_INT, SK_MAX_CONNECTIONS, max_connections, 0, UINT32_MAX),
    SKEY("stall_timeout", VT_SECS, SK_STALL_TIMEOUT, stall_timeout_ms, 1000, 86400000),
    SKEY("job_memory", VT_SIZE, SK_JOB_MEMORY, job_memory, 0, UINT64_MAX),
    SKEY("recover", VT_BOOL, SK_RECOVER, recover, 0, 1),
    SKEY("memcache_port", VT_INT, SK_MEMCACHE_PORT, memcache_port, 0, 65535),
    SKEY("metrics_port", VT_INT, SK_METRICS_PORT, metrics_port, 0, 65535),
    SKEY("allow_shutdown", VT_BOOL, SK_ALLOW_SHUTDOWN, allow_shutdown, 0, 1),
    SKEY("main_listener", VT_BOOL, SK_MAIN_LISTENER, main_listener, 0, 1),
    SKEY("replica_of", VT_STR, SK_REPLICA_OF, replica_of, 0, 0),
    SKEY("sync_replicas", VT_INT, SK_SYNC_REPLICAS, sync_replicas, 0, 255),
    SKEY("allow_remote_admin", VT_BOOL, SK_ALLOW_REMOTE_ADMIN, allow_remote_admin, 0, 1),
    SKEY("repl_backlog", VT_SIZE, SK_REPL_BACKLOG, repl_backlog, 0, (uint64_t)1 << 40),
    SKEY("import_beanstalkd", VT_STR, SK_IMPORT_BEANSTALKD, import_beanstalkd, 0, 0),
};
#define N_KEYS (sizeof keys / sizeof keys[0])

const char *conf_tube_key_name(int key)
{
    return key >= 0 && key < TK_COUNT ? keys[key].name : NULL;
}

const char *conf_server_key_name(int key)
{
    return key >= 0 && key < SK_COUNT ? keys[TK_COUNT + key].name : NULL;
}

static const KeyDef *find_key(const char *s, size_t n)
{
    for (size_t i = 0; i < N_KEYS; i++)
        if (strlen(keys[i].name) == n && !memcmp(keys[i].name, s, n))
            return &keys[i];
    return NULL;
}

/* ---- values ------------------------------------------------------------ */

static int parse_size(const char *s, size_t n, uint64_t *out)
{
    unsigned shift = 0;
    uint64_t v;

    if (n > 1 && (s[n - 1] == 'K' || s[n - 1] == 'M' || s[n - 1] == 'G')) {
        shift = s[n - 1] == 'K' ? 10 : s[n - 1] == 'M' ? 20 : 30;
        n--;
    }
    if (parse_u64(s, n, &v) < 0 || v > (UINT64_MAX >> shift))
        return -1;
    *out = v << shift;
    return 0;
}

static int parse_duration(const char *s, size_t n, uint64_t *ms)
{
    /* "ms" before "m" and "s", which it ends with and starts with. */
    static const struct { const char *unit; uint64_t ms; } units[] = {
        {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {"d", 86400000},
    };
    uint64_t mult = 1000, v;

    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        size_t ul = strlen(units[i].unit);
        if (n > ul && !memcmp(s + n - ul, units[i].unit, ul)) {
            mult = units[i].ms;
            n -= ul;
            break;
        }
    }
    if (parse_u64(s, n, &v) < 0 || v > UINT64_MAX / mult)
        return -1;
    *ms = v * mult;
    return 0;
}

static int parse_bool(const char *s, size_t n, uint64_t *out)
{
    if (n == 4 && !memcmp(s, "true", 4))
        *out = 1;
    else if (n == 5 && !memcmp(s, "false", 5))
        *out = 0;
    else
        return -1;
    return 0;
}

/* A number of any numeric type, checked against the key's range. */
static int parse_number(const KeyDef *k, const char *s, size_t n, uint64_t *out)
{
    int r;

    switch (k->type) {
    case VT_INT: r = parse_u64(s, n, out); break;
    case VT_SIZE: r = parse_size(s, n, out); break;
    case VT_DUR: r = parse_duration(s, n, out); break;
    case VT_SECS: r = parse_duration(s, n, out); break;
    default: r = parse_bool(s, n, out); break;
    }
    if (r < 0 || *out < k->min || *out > k->max)
        return -1;
    return k->type == VT_SECS && *out % 1000 ? -1 : 0;
}

/* What a key wants, for "bad value" messages. */
static void describe(const KeyDef *k, char *buf, size_t cap)
{
    unsigned long long lo = k->min, hi = k->max;

    switch (k->type) {
    case VT_INT:
        snprintf(buf, cap, "a whole number from %llu to %llu", lo, hi);
        break;
    case VT_SIZE:
        snprintf(buf, cap, "a size in bytes up to %llu, with an optional K, M or G", hi);
        break;
    case VT_DUR:
        snprintf(buf, cap, "a duration up to %llus: a number with an optional ms, s, m, h "
                 "or d", hi / 1000);
        break;
    case VT_SECS:
        snprintf(buf, cap, "whole seconds from %llus to %llus: a number with an optional "
                 "s, m, h or d", lo / 1000, hi / 1000);
        break;
    default:
        snprintf(buf, cap, "true or false");
        break;
    }
}

static void store_number(void *field, size_t size, uint64_t v)
{
    if (size == sizeof(uint64_t)) {
        memcpy(field, &v, sizeof v);
    } else if (size == sizeof(uint32_t)) {
        uint32_t x = (uint32_t)v;
        memcpy(field, &x, sizeof x);
    } else {
        bool b = v != 0;
        memcpy(field, &b, sizeof b);
    }
}

/* ---- the parser -------------------------------------------------------- */

typedef struct Parser {
    ConfFile *cf;
    ConfSection *secs; /* every [tube] section, in file order while parsing */
    size_t n, cap;
    ConfSection *cur;  /* where tube keys go: &cf->top or the last section */
    ConfListen *lis;   /* the [listen] section being read, or NULL */
    size_t nlis_cap;
    unsigned long line;
    char *err;
    size_t errlen;
} Parser;

static void vmessage(char *err, size_t errlen, const char *path, unsigned long line,
                     const char *fmt, va_list ap)
{
    int n;

    if (!errlen)
        return;
    n = line ? snprintf(err, errlen, "%s:%lu: ", path, line)
             : snprintf(err, errlen, "%s: ", path);
    if (n >= 0 && (size_t)n < errlen)
        vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
}

/* "PATH:LINE: what" (or "PATH: what" for line 0) into err; returns -1. */
static int __attribute__((format(printf, 5, 6)))
message(char *err, size_t errlen, const char *path, unsigned long line, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vmessage(err, errlen, path, line, fmt, ap);
    va_end(ap);
    return -1;
}

static int __attribute__((format(printf, 2, 3))) fail(Parser *p, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vmessage(p->err, p->errlen, p->cf->path, p->line, fmt, ap);
    va_end(ap);
    return -1;
}

static int out_of_memory(Parser *p)
{
    p->line = 0;
    return fail(p, "out of memory");
}

static bool blank(char c)
{
    return c == ' ' || c == '\t';
}

static void trim(const char **s, size_t *n)
{
    while (*n && blank(**s))
        (*s)++, (*n)--;
    while (*n && blank((*s)[*n - 1]))
        (*n)--;
}

/* The file's listen: a host (name, IPv4 or bare IPv6 address) or
 * unix:PATH. A port in it ("127.0.0.1:11300", "[::1]", "host 11300", the
 * [listen] sections' form) passed --check-config and then failed the
 * start's name lookup, so it is refused here, pointing at the port key. */
static int listen_value_ok(const char *v, size_t n)
{
    size_t colons = 0;

    if (n >= 5 && !memcmp(v, "unix:", 5))
        return 1;
    for (size_t i = 0; i < n; i++) {
        if (blank(v[i]) || v[i] == '[' || v[i] == ']' || v[i] == '/')
            return 0;
        colons += v[i] == ':';
    }
    return colons != 1;
}

/* Store a string or name value. */
static int store_text(Parser *p, const KeyDef *k, void *field, const char *v, size_t n)
{
    char q[CONF_QUOTED_SIZE];
    char *copy;

    if (k->type == VT_NAME) {
        if (!tube_name_valid(v, n))
            return fail(p, "illegal tube name '%s' for %s",
                        ascii_text_cut(q, sizeof q, v, n), k->name);
        memset(field, 0, k->size);
        memcpy(field, v, n);
        return 0;
    }
    if (n > MAX_STRING_VALUE)
        return fail(p, "value of %s too long (%zu bytes, at most %d)", k->name, n,
                    MAX_STRING_VALUE);
    if (k->server && k->id == SK_LISTEN && !listen_value_ok(v, n))
        return fail(p, "bad value for listen: '%s' (want a host name or address, "
                    "without a port, or unix:/path; the port is the port key)",
                    ascii_text_cut(q, sizeof q, v, n));
    if (!(copy = tb_malloc(n + 1)))
        return out_of_memory(p);
    memcpy(copy, v, n);
    copy[n] = '\0';
    memcpy(field, &copy, sizeof copy);
    return 0;
}

static int store_value(Parser *p, const KeyDef *k, void *field, const char *v, size_t n)
{
    char q[CONF_QUOTED_SIZE], want[160];
    uint64_t num;

    if (k->type == VT_NAME || k->type == VT_STR)
        return store_text(p, k, field, v, n);
    if (parse_number(k, v, n, &num) < 0) {
        describe(k, want, sizeof want);
        return fail(p, "bad value for %s: '%s' (want %s)", k->name,
                    ascii_text_cut(q, sizeof q, v, n), want);
    }
    store_number(field, k->size, num);
    return 0;
}

static int listen_key(Parser *p, const char *key, size_t kn, const char *v, size_t vn)
{
    char why[300];
    int r = conf_listen_key(p->lis, key, kn, v, vn, p->line, why, sizeof why);

    if (r == -2)
        return out_of_memory(p);
    return r < 0 ? fail(p, "%s", why) : 0;
}

static int key_value(Parser *p, const char *s, size_t n, const char *eq)
{
    const char *key = s, *v = eq + 1;
    size_t kn = (size_t)(eq - s), vn = n - kn - 1;
    char q[CONF_QUOTED_SIZE];
    const KeyDef *k;
    void *base;
    uint32_t *set;
    unsigned long *lines;

    trim(&key, &kn);
    trim(&v, &vn);
    if (!kn)
        return fail(p, "missing key before '='");
    if (p->lis)
        return listen_key(p, key, kn, v, vn);
    if (!(k = find_key(key, kn)))
        return fail(p, "unknown key '%s'", ascii_text_cut(q, sizeof q, key, kn));
    if (k->server && p->cur != &p->cf->top)
        return fail(p, "%s is a server setting: allowed only at the top level, before "
                    "the first [tube] section", k->name);
    base = k->server ? (void *)&p->cf->server : (void *)&p->cur->own;
    set = k->server ? &p->cf->server.set : &p->cur->own.set;
    lines = k->server ? p->cf->server_line : p->cur->own_line;
    if (*set & CONF_BIT(k->id))
        return fail(p, "duplicate key %s (first set at line %lu)", k->name, lines[k->id]);
    if (!vn)
        return fail(p, "missing value for %s", k->name);
    if (store_value(p, k, (char *)base + k->off, v, vn) < 0)
        return -1;
    *set |= CONF_BIT(k->id);
    lines[k->id] = p->line;
    return 0;
}

/* "[listen NAME]": name already trimmed. */
static int add_listen(Parser *p, const char *name, size_t len)
{
    ConfFile *cf = p->cf;
    char why[200];

    if (cf->n_listen == CONF_MAX_LISTEN)
        return fail(p, "too many [listen] sections (at most %d)", CONF_MAX_LISTEN);
    if (cf->n_listen == p->nlis_cap) {
        size_t cap = p->nlis_cap ? p->nlis_cap * 2 : 4;
        ConfListen *grown;

        if (cap > CONF_MAX_LISTEN)
            cap = CONF_MAX_LISTEN;
        if (!(grown = tb_realloc(cf->listen, cap * sizeof *grown)))
            return out_of_memory(p);
        cf->listen = grown;
        p->nlis_cap = cap;
    }
    p->lis = &cf->listen[cf->n_listen];
    if (conf_listen_start(p->lis, name, len, p->line, why, sizeof why) < 0) {
        memset(p->lis, 0, sizeof *p->lis);
        p->lis = NULL;
        return fail(p, "%s", why);
    }
    cf->n_listen++;
    return 0;
}

static int add_section(Parser *p, const char *name, size_t len, bool is_prefix)
{
    ConfSection *sec;

    if (p->n == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 8;
        ConfSection *grown;

        if (cap > SIZE_MAX / sizeof *grown ||
            !(grown = tb_realloc(p->secs, cap * sizeof *grown)))
            return out_of_memory(p);
        p->secs = grown;
        p->cap = cap;
    }
    sec = &p->secs[p->n++];
    memset(sec, 0, sizeof *sec);
    memcpy(sec->name, name, len);
    sec->len = len;
    sec->is_prefix = is_prefix;
    sec->line = p->line;
    sec->parent = -1;
    p->cur = sec;
    p->lis = NULL;
    return 0;
}

/* "[tube NAME]" or "[tube PREFIX*]", already trimmed, starting with '['. */
static int header(Parser *p, const char *s, size_t n)
{
    const char *in = s + 1, *name;
    size_t inn, w = 0, nn;
    char q[CONF_QUOTED_SIZE];
    bool is_prefix;

    if (n < 2 || s[n - 1] != ']')
        return fail(p, "malformed section header '%s' (missing ']')",
                    ascii_text_cut(q, sizeof q, s, n));
    inn = n - 2;
    trim(&in, &inn);
    while (w < inn && !blank(in[w]))
        w++;
    name = in + w;
    nn = inn - w;
    trim(&name, &nn);
    if (w == 6 && !memcmp(in, "listen", 6)) {
        if (!nn)
            return fail(p, "missing listener name in section header");
        return add_listen(p, name, nn);
    }
    if (w != 4 || memcmp(in, "tube", 4))
        return fail(p, "unknown section '%s' (want [tube NAME], [tube PREFIX*] or "
                    "[listen NAME])", ascii_text_cut(q, sizeof q, s, n));
    if (!nn)
        return fail(p, "missing tube name in section header");
    is_prefix = name[nn - 1] == '*';
    if (is_prefix && nn == 1)
        return fail(p, "empty prefix in [tube *]: keys for every tube go at the top level");
    if (!tube_name_valid(name, nn - is_prefix))
        return fail(p, "illegal tube name%s '%s' in section header", is_prefix ? " prefix" : "",
                    ascii_text_cut(q, sizeof q, name, nn));
    return add_section(p, name, nn - is_prefix, is_prefix);
}

static int parse_line(Parser *p, const char *s, size_t n)
{
    const char *hash = memchr(s, '#', n), *eq;
    char q[CONF_QUOTED_SIZE];

    if (hash)
        n = (size_t)(hash - s);
    else if (n && s[n - 1] == '\r') /* CRLF files */
        n--;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return fail(p, "control character (byte 0x%02x) in line", c);
    }
    trim(&s, &n);
    if (!n)
        return 0;
    if (s[0] == '[')
        return header(p, s, n);
    if (!(eq = memchr(s, '=', n)))
        return fail(p, "malformed line '%s' (want key = value, [tube NAME] or # comment)",
                    ascii_text_cut(q, sizeof q, s, n));
    return key_value(p, s, n, eq);
}

static int parse_lines(Parser *p, const char *buf, size_t len)
{
    size_t pos = 0;

    while (pos < len) {
        const char *nl = memchr(buf + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - buf) : len;

        p->line++;
        if (parse_line(p, buf + pos, end - pos) < 0)
            return -1;
        pos = end + 1;
    }
    return 0;
}

/* ---- after parsing: sort, check for duplicates, merge ------------------ */

static int name_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);

    return c ? c : (an > bn) - (an < bn);
}

/* Exact sections first, then prefix ones; each by name, then file order. */
static int section_cmp(const void *x, const void *y)
{
    const ConfSection *a = x, *b = y;
    int c;

    if (a->is_prefix != b->is_prefix)
        return a->is_prefix ? 1 : -1;
    if ((c = name_cmp(a->name, a->len, b->name, b->len)))
        return c;
    return (a->line > b->line) - (a->line < b->line);
}

/* The earliest line where a section header repeats an earlier one. The
 * sections are sorted, so a repeat sits right after its first one. */
static const ConfSection *first_duplicate(const ConfSection *s, size_t n)
{
    const ConfSection *best = NULL;

    for (size_t i = 1; i < n; i++)
        if (s[i].is_prefix == s[i - 1].is_prefix &&
            !name_cmp(s[i].name, s[i].len, s[i - 1].name, s[i - 1].len) &&
            (!best || s[i].line < best->line))
            best = &s[i];
    return best;
}

/* The last prefix section that sorts at or before name; -1 if none. */
static long last_not_after(const ConfSection *a, size_t n, const char *name, size_t len)
{
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (name_cmp(a[mid].name, a[mid].len, name, len) <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return (long)lo - 1;
}

/* The longest prefix section name starts with, searching from i down its
 * chain of parents. Why the chain suffices: every string that sorts
 * between a prefix P of name and name itself starts with P, so each prefix
 * of name in the set is a prefix of the last one sorting at or before
 * name, and the parent links visit those from the longest down. */
static long longest_prefix(const ConfSection *a, long i, const char *name, size_t len)
{
    while (i >= 0) {
        if (a[i].len <= len && !memcmp(a[i].name, name, a[i].len))
            return i;
        i = a[i].parent;
    }
    return -1;
}

/* Take from src every key dst does not have yet. */
static void fill(ConfSection *dst, const ConfSection *src)
{
    for (int k = 0; k < TK_COUNT; k++) {
        uint32_t bit = CONF_BIT(k);
        if ((dst->eff.set & bit) || !(src->eff.set & bit))
            continue;
        memcpy((char *)&dst->eff + keys[k].off, (const char *)&src->eff + keys[k].off,
               keys[k].size);
        dst->eff_line[k] = src->eff_line[k];
        dst->eff.set |= bit;
    }
}

static void start_eff(ConfSection *s)
{
    memcpy(&s->eff, &s->own, sizeof s->eff);
    memcpy(s->eff_line, s->own_line, sizeof s->eff_line);
}

/* Parents come before children in sorted order (a prefix sorts first), so
 * one pass merges each prefix section with its chain, already merged. */
static void merge(ConfFile *cf)
{
    ConfSection *pre = cf->prefix;

    start_eff(&cf->top);
    for (size_t i = 0; i < cf->n_prefix; i++) {
        start_eff(&pre[i]);
        pre[i].parent = longest_prefix(pre, (long)i - 1, pre[i].name, pre[i].len);
        fill(&pre[i], pre[i].parent >= 0 ? &pre[pre[i].parent] : &cf->top);
    }
    for (size_t i = 0; i < cf->n_exact; i++) {
        ConfSection *e = &cf->exact[i];
        long d = longest_prefix(pre, last_not_after(pre, cf->n_prefix, e->name, e->len),
                                e->name, e->len);
        start_eff(e);
        fill(e, d >= 0 ? &pre[d] : &cf->top);
    }
}

static int finish(Parser *p, int parsed)
{
    ConfFile *cf = p->cf;
    const ConfSection *dup;
    size_t n_exact = 0;

    if (p->n)
        qsort(p->secs, p->n, sizeof *p->secs, section_cmp);
    /* Sections parsed so far all precede a failing line, so a repeat
     * among them is the earlier error. */
    if ((dup = first_duplicate(p->secs, p->n))) {
        p->line = dup->line;
        return fail(p, "duplicate section [tube %.*s%s] (first at line %lu)", (int)dup->len,
                    dup->name, dup->is_prefix ? "*" : "", (dup - 1)->line);
    }
    if (parsed < 0)
        return -1;
    if (cf->n_listen) {
        char why[400];
        unsigned long line = conf_listen_finish(cf->listen, cf->n_listen, why, sizeof why);

        if (line) {
            p->line = line;
            return fail(p, "%s", why);
        }
    }
    while (n_exact < p->n && !p->secs[n_exact].is_prefix)
        n_exact++;
    cf->exact = p->secs;
    cf->n_exact = n_exact;
    cf->prefix = p->secs ? p->secs + n_exact : NULL;
    cf->n_prefix = p->n - n_exact;
    p->secs = NULL;
    merge(cf);
    return 0;
}

int conf_parse(const char *path, const char *buf, size_t len, ConfFile **out, char *err,
               size_t errlen)
{
    Parser p = {.err = err, .errlen = errlen};
    ConfFile *cf = tb_calloc(1, sizeof *cf);
    size_t pn = strlen(path);

    *out = NULL;
    if (!cf || !(cf->path = tb_malloc(pn + 1))) {
        tb_free(cf);
        return message(err, errlen, path, 0, "out of memory");
    }
    memcpy(cf->path, path, pn + 1);
    cf->top.parent = -1;
    p.cf = cf;
    p.cur = &cf->top;
    /* A UTF-8 byte-order mark, as some Windows editors write, is not part
     * of the first key (systemd's unit files skip it too). */
    if (len >= 3 && !memcmp(buf, "\xef\xbb\xbf", 3))
        buf += 3, len -= 3;
    if (finish(&p, parse_lines(&p, buf, len)) < 0) {
        tb_free(p.secs);
        conf_free(cf);
        return -1;
    }
    *out = cf;
    return 0;
}

/* ---- reading the file -------------------------------------------------- */

static int read_all(FILE *f, char **buf, size_t *len)
{
    size_t cap = 0, n = 0;
    char *b = NULL;

    for (;;) {
        if (n == cap) {
            char *grown;
            cap = cap ? cap * 2 : 4096;
            if (cap > MAX_FILE_SIZE + 1)
                cap = MAX_FILE_SIZE + 1;
            if (n == cap) { /* full at the cap: too large */
                tb_free(b);
                errno = EFBIG;
                return -1;
            }
            if (!(grown = tb_realloc(b, cap))) {
                tb_free(b);
                errno = ENOMEM;
                return -1;
            }
            b = grown;
        }
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    if (ferror(f)) {
        tb_free(b);
        return -1;
    }
    *buf = b;
    *len = n;
    return 0;
}

/* Open the file for reading without ever blocking the loop: a FIFO (or a
 * socket) at the path is refused, at start as at reload. fopen() of a
 * FIFO waited for a writer (a reload hung the server), and a pipe given
 * at start (--config <(...)) read empty at every reload, which then put
 * an empty configuration in force. NULL with errno set, or *what set for
 * a path that is not a file. */
static FILE *open_file(const char *path, const char **what)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC), fl;
    FILE *f;

    *what = NULL;
    if (fd < 0)
        return NULL;
    if (fstat(fd, &st) < 0 || (fl = fcntl(fd, F_GETFL)) < 0 ||
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return NULL;
    }
    if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)) {
        *what = S_ISFIFO(st.st_mode) ? "a pipe, not a file" : "a socket, not a file";
        close(fd);
        return NULL;
    }
    if (!(f = fdopen(fd, "rb"))) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return f;
}

int conf_readable(const char *path, char *err, size_t errlen)
{
    const char *what;
    FILE *f = open_file(path, &what);

    if (f) {
        fclose(f);
        return 0;
    }
    snprintf(err, errlen, "%s", what ? what : strerror(errno));
    return -1;
}

int conf_load(const char *path, ConfFile **out, char *err, size_t errlen)
{
    const char *what;
    FILE *f = open_file(path, &what);
    char *buf = NULL;
    size_t len = 0;
    int r;

    *out = NULL;
    if (!f)
        return message(err, errlen, path, 0, "cannot read: %s", what ? what : strerror(errno));
    errno = EIO;
    r = read_all(f, &buf, &len);
    fclose(f);
    if (r < 0 && errno == EFBIG)
        return message(err, errlen, path, 0, "cannot read: larger than %u bytes",
                         MAX_FILE_SIZE);
    if (r < 0)
        return message(err, errlen, path, 0, "cannot read: %s", strerror(errno));
    r = conf_parse(path, buf ? buf : "", len, out, err, errlen);
    tb_free(buf);
    if (r == 0 && (*out)->n_listen) {
        char why[300];
        unsigned long line = conf_listen_resolve((*out)->listen, (*out)->n_listen, why,
                                                 sizeof why);
        if (line) {
            conf_free(*out);
            *out = NULL;
            return message(err, errlen, path, line, "%s", why);
        }
    }
    return r;
}

/* ---- checks that need the command line --------------------------------- */

typedef struct Problem {
    unsigned long line; /* 0: none found yet */
    char msg[400];
} Problem;

static void where(const ConfSection *s, char *buf, size_t cap)
{
    if (s->line)
        snprintf(buf, cap, "[tube %.*s%s]", (int)s->len, s->name, s->is_prefix ? "*" : "");
    else
        snprintf(buf, cap, "tubes in no section");
}

/* Keep the problem of the earliest line, so the report does not depend on
 * the order sections are checked in. */
static void check_section(const ConfSection *s, const char *binlog_dir, Problem *pb)
{
    const TubePolicy *e = &s->eff;
    unsigned long mline = s->eff_line[TK_MAX_MEMORY_SIZE], jline = s->eff_line[TK_JOURNAL];
    char w[MAX_TUBE_NAME + 16];

    if (!(e->set & CONF_BIT(TK_MAX_MEMORY_SIZE)) || !e->max_memory_size)
        return;
    if (!binlog_dir) {
        if (!pb->line || mline < pb->line) {
            pb->line = mline;
            snprintf(pb->msg, sizeof pb->msg, "max_memory_size needs a binlog: "
                     "give -b DIR or binlog_dir");
        }
        return;
    }
    if (!(e->set & CONF_BIT(TK_JOURNAL)) || e->journal)
        return;
    unsigned long line = mline > jline ? mline : jline;
    if (pb->line && line >= pb->line)
        return;
    where(s, w, sizeof w);
    pb->line = line;
    snprintf(pb->msg, sizeof pb->msg, "max_memory_size (line %lu) and journal = false "
             "(line %lu) both apply to %s: read-behind keeps bodies in the binlog",
             mline, jline, w);
}

int conf_validate(const ConfFile *cf, const char *binlog_dir, char *err, size_t errlen)
{
    Problem pb = {0};

    check_section(&cf->top, binlog_dir, &pb);
    for (size_t i = 0; i < cf->n_exact; i++)
        check_section(&cf->exact[i], binlog_dir, &pb);
    for (size_t i = 0; i < cf->n_prefix; i++)
        check_section(&cf->prefix[i], binlog_dir, &pb);
    return pb.line ? message(err, errlen, cf->path, pb.line, "%s", pb.msg) : 0;
}

/* ---- resolving a tube's policy ----------------------------------------- */

static const ConfSection *find_section(const ConfFile *cf, const char *name, size_t len)
{
    long i = last_not_after(cf->exact, cf->n_exact, name, len);

    if (i >= 0 && !name_cmp(cf->exact[i].name, cf->exact[i].len, name, len))
        return &cf->exact[i];
    i = longest_prefix(cf->prefix, last_not_after(cf->prefix, cf->n_prefix, name, len),
                       name, len);
    return i >= 0 ? &cf->prefix[i] : &cf->top;
}

void conf_policy(const ConfFile *cf, const char *name, size_t len, uint32_t max_job_size,
                 TubePolicy *out)
{
    TubePolicy d;

    /* Every byte of out is written by memset or memcpy, never by a member
     * store, so padding stays zero and memcmp compares policies. */
    memset(out, 0, sizeof *out);
    if (cf)
        memcpy(out, &find_section(cf, name, len)->eff, sizeof *out);
    memset(&d, 0, sizeof d);
    d.max_item_size = max_job_size;
    d.journal = true;
    d.priority = DEFAULT_TUBE_PRIORITY;
    d.ttr_ms = DEFAULT_TUBE_TTR_MS;
    for (int k = 0; k < TK_COUNT; k++)
        if (!(out->set & CONF_BIT(k)))
            memcpy((char *)out + keys[k].off, (const char *)&d + keys[k].off, keys[k].size);
    if (out->max_item_size > max_job_size)
        memcpy((char *)out + keys[TK_MAX_ITEM_SIZE].off, &max_job_size, sizeof max_job_size);
}

void conf_free(ConfFile *cf)
{
    if (!cf)
        return;
    tb_free(cf->server.listen);
    tb_free(cf->server.user);
    tb_free(cf->server.binlog_dir);
    tb_free(cf->server.replica_of);
    tb_free(cf->server.import_beanstalkd);
    tb_free(cf->exact);
    conf_listen_free(cf->listen, cf->n_listen);
    tb_free(cf->path);
    tb_free(cf);
}
