#include "mcparse.h"

#include <string.h>

#include "numparse.h"

/* ---- the error table ------------------------------------------------- */

static const McErrorReply errors[MC_ERR_COUNT] = {
#define X(e, line, close) [MC_ERR_##e] = {line "\r\n", sizeof(line) + 1, close},
    MC_ERRORS(X)
#undef X
};

const McErrorReply *mc_error(McErr err)
{
    if (err <= MC_OK || err >= MC_ERR_COUNT)
        return NULL;
    return &errors[err];
}

/* ---- command words ---------------------------------------------------- */

static const char *const cmd_names[MC_CMD_COUNT] = {
    [MC_CMD_UNKNOWN] = "unknown",
#define X(e, w) [MC_CMD_##e] = w,
    MC_COMMANDS(X)
#undef X
};

const char *mc_cmd_name(McCmdType type)
{
    if (type >= MC_CMD_COUNT)
        return "unknown";
    return cmd_names[type];
}

/* How the arguments after the word are read. */
enum Shape {
    SH_IGNORE,  /* arguments ignored */
    SH_SET,     /* <q> <flags> <exptime> <bytes> [noreply] */
    SH_STORAGE, /* add & co: not run, but their body must be read */
    SH_GET,     /* <key> [more keys, ignored] */
    SH_DELETE,  /* <q> [noreply] */
    SH_QUEUE,   /* <q> */
    SH_FLUSH_ALL, /* [noreply] */
    SH_NAMES,   /* [q ...] */
    SH_STATUS,  /* nothing allowed */
    SH_MONITOR, /* <q> <seconds> [max] */
    SH_CONFIRM, /* <q> <count> */
};

static const struct {
    const char *word;
    unsigned char type, shape;
} words[] = {
    {"set", MC_CMD_SET, SH_SET},
    {"get", MC_CMD_GET, SH_GET},
    {"gets", MC_CMD_GET, SH_GET},
    {"delete", MC_CMD_DELETE, SH_DELETE},
    {"flush", MC_CMD_FLUSH, SH_QUEUE},
    {"flush_all", MC_CMD_FLUSH_ALL, SH_FLUSH_ALL},
    {"flush_expired", MC_CMD_FLUSH_EXPIRED, SH_QUEUE},
    {"flush_all_expired", MC_CMD_FLUSH_ALL_EXPIRED, SH_IGNORE},
    {"version", MC_CMD_VERSION, SH_IGNORE},
    {"stats", MC_CMD_STATS, SH_IGNORE},
    {"dump_stats", MC_CMD_DUMP_STATS, SH_NAMES},
    {"dump_config", MC_CMD_DUMP_CONFIG, SH_IGNORE},
    {"reload", MC_CMD_RELOAD, SH_IGNORE},
    {"shutdown", MC_CMD_SHUTDOWN, SH_IGNORE},
    {"status", MC_CMD_STATUS, SH_STATUS},
    {"monitor", MC_CMD_MONITOR, SH_MONITOR},
    {"confirm", MC_CMD_CONFIRM, SH_CONFIRM},
    {"quit", MC_CMD_QUIT, SH_IGNORE},
    /* memcache storage commands kestrel lacks: answered as unknown, but
     * only after their body, or it would be read as commands. */
    {"add", MC_CMD_UNKNOWN, SH_STORAGE},
    {"replace", MC_CMD_UNKNOWN, SH_STORAGE},
    {"append", MC_CMD_UNKNOWN, SH_STORAGE},
    {"prepend", MC_CMD_UNKNOWN, SH_STORAGE},
    {"cas", MC_CMD_UNKNOWN, SH_STORAGE},
};

/* Longer than any word above: such a token is no command. */
#define MAX_WORD 24

/* Index into words[] of the command word [t, t+n), or -1. */
static int find_word(const char *t, size_t n)
{
    char low[MAX_WORD];

    if (n >= MAX_WORD)
        return -1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)t[i];
        low[i] = (char)(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
    }
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++)
        if (strlen(words[w].word) == n && memcmp(words[w].word, low, n) == 0)
            return (int)w;
    return -1;
}

/* ---- tokens ----------------------------------------------------------- */

/* A cursor over the line; tokens are runs of non-space bytes. */
typedef struct Cur {
    const char *p, *end;
} Cur;

typedef struct Tok {
    const char *p;
    size_t n;
} Tok;

static int next_tok(Cur *c, Tok *t)
{
    while (c->p < c->end && *c->p == ' ')
        c->p++;
    if (c->p == c->end)
        return 0;
    t->p = c->p;
    while (c->p < c->end && *c->p != ' ')
        c->p++;
    t->n = (size_t)(c->p - t->p);
    return 1;
}

/* Read up to max tokens into t[]; returns how many there were. */
static size_t take_toks(Cur *c, Tok *t, size_t max)
{
    size_t k = 0;

    while (k < max && next_tok(c, &t[k]))
        k++;
    return k;
}

static int tok_is(Tok t, const char *s)
{
    size_t n = strlen(s);

    return t.n == n && memcmp(t.p, s, n) == 0;
}

/* memcached's rule: noreply is the last token after the required ones. */
static int last_is_noreply(Cur c)
{
    Tok t, last = {NULL, 0};

    while (next_tok(&c, &t))
        last = t;
    return last.p && tok_is(last, "noreply");
}

int mc_names_next(McNames *it, const char **name, size_t *len)
{
    Cur c = {it->p, it->end};
    Tok t;

    if (!it->p || !next_tok(&c, &t))
        return 0;
    it->p = c.p;
    *name = t.p;
    *len = t.n;
    return 1;
}

/* ---- numbers ---------------------------------------------------------- */

/* Decimal with an optional '-', within int32_t (kestrel's toInt, without
 * the '+' Java also takes). */
static int parse_i32(const char *s, size_t n, int32_t *out)
{
    size_t neg = n > 0 && s[0] == '-';
    uint64_t v;

    if (parse_u64(s + neg, n - neg, &v) < 0 || v > (uint64_t)INT32_MAX + neg)
        return -1;
    *out = neg ? (int32_t)(-(int64_t)v) : (int32_t)v;
    return 0;
}

static int parse_bytes(Tok t, uint32_t *out)
{
    uint32_t v;

    if (parse_u32(t.p, t.n, &v) < 0 || v > MC_MAX_BYTES)
        return -1;
    *out = v;
    return 0;
}

/* ---- keys ------------------------------------------------------------- */

/* A bare queue name (every command but get): a legal tube name, no '/'. */
static McErr take_queue(McCmd *c, Tok t)
{
    c->key = t.p;
    c->key_len = t.n;
    if (memchr(t.p, '/', t.n) || !tube_name_valid(t.p, t.n))
        return MC_ERR_BAD_QUEUE_NAME;
    c->name = t.p;
    c->name_len = t.n;
    return MC_OK;
}

/* One get option; sets *bad_timeout on a t= that is not a number. */
static void take_option(McCmd *c, Tok o, int *bad_timeout)
{
    int32_t ms;

    if (o.n >= 2 && o.p[0] == 't' && o.p[1] == '=') {
        if (parse_i32(o.p + 2, o.n - 2, &ms) < 0)
            *bad_timeout = 1;
        else
            c->timeout_ms = ms > 0 ? (uint32_t)ms : 0;
    } else if (tok_is(o, "open")) {
        c->opts |= MC_OPT_OPEN;
    } else if (tok_is(o, "close")) {
        c->opts |= MC_OPT_CLOSE;
    } else if (tok_is(o, "abort")) {
        c->opts |= MC_OPT_ABORT;
    } else if (tok_is(o, "peek")) {
        c->opts |= MC_OPT_PEEK;
    } /* anything else is ignored, as in kestrel */
}

/* kestrel refuses these (and closes): peek or abort with open or close,
 * and peek with abort. */
static int options_conflict(unsigned o)
{
    unsigned fetch = o & (MC_OPT_OPEN | MC_OPT_CLOSE);

    return ((o & (MC_OPT_PEEK | MC_OPT_ABORT)) && fetch) ||
           ((o & MC_OPT_PEEK) && (o & MC_OPT_ABORT));
}

/* NAME[/opt/opt...]. The refusals that close come before the errors that
 * keep the connection, so a key with several faults closes. */
static McErr take_get_key(McCmd *c, Tok k)
{
    const char *slash = memchr(k.p, '/', k.n);
    size_t name_len = slash ? (size_t)(slash - k.p) : k.n;
    int bad_timeout = 0;

    c->key = k.p;
    c->key_len = k.n;
    if (slash) {
        Cur opts = {slash + 1, k.p + k.n};
        while (opts.p < opts.end) {
            const char *s = memchr(opts.p, '/', (size_t)(opts.end - opts.p));
            Tok o = {opts.p, (size_t)((s ? s : opts.end) - opts.p)};
            take_option(c, o, &bad_timeout);
            opts.p = s ? s + 1 : opts.end;
        }
    }
    if (name_len == 0)
        return MC_ERR_EMPTY_QUEUE_NAME;
    if (options_conflict(c->opts))
        return MC_ERR_CONFLICTING_OPTIONS;
    if (!tube_name_valid(k.p, name_len))
        return MC_ERR_BAD_QUEUE_NAME;
    c->name = k.p;
    c->name_len = name_len;
    return bad_timeout ? MC_ERR_BAD_TIMEOUT : MC_OK;
}

/* ---- commands --------------------------------------------------------- */

/* set: without a good <bytes> the body cannot be delimited, so the
 * connection closes; past that point the body is read whatever else is
 * wrong, and the connection is kept. */
static McErr parse_set(McCmd *c, Cur *cur)
{
    Tok t[4];
    size_t n = take_toks(cur, t, 4);
    McErr name_err;

    if (n > 0) {
        c->key = t[0].p;
        c->key_len = t[0].n;
    }
    if (n < 4 || parse_bytes(t[3], &c->bytes) < 0)
        return MC_ERR_BAD_FORMAT_CLOSE;
    c->has_body = 1;
    c->noreply = last_is_noreply(*cur);
    name_err = take_queue(c, t[0]);
    if (parse_u32(t[1].p, t[1].n, &c->flags) < 0 ||
        parse_i32(t[2].p, t[2].n, &c->exptime) < 0)
        return MC_ERR_BAD_FORMAT;
    return name_err;
}

/* add, replace, append, prepend, cas: <key> <flags> <exptime> <bytes>. */
static McErr parse_storage(McCmd *c, Cur *cur)
{
    Tok t[4];

    if (take_toks(cur, t, 4) == 4 && parse_bytes(t[3], &c->bytes) == 0)
        c->has_body = 1;
    return MC_ERR_UNKNOWN_COMMAND;
}

/* monitor <q> <seconds> [max], confirm <q> <count>. */
static McErr parse_counted(McCmd *c, Cur *cur, int monitor)
{
    Tok t[3];
    size_t n = take_toks(cur, t, monitor ? 3 : 2);
    McErr name_err;
    int bad;

    if (n < 2)
        return MC_ERR_MISSING_ARGS;
    name_err = take_queue(c, t[0]);
    if (monitor)
        bad = parse_u32(t[1].p, t[1].n, &c->seconds) < 0 ||
              (n == 3 && parse_u32(t[2].p, t[2].n, &c->max) < 0);
    else
        bad = parse_u32(t[1].p, t[1].n, &c->count) < 0;
    return bad ? MC_ERR_BAD_FORMAT : name_err;
}

static McErr parse_args(McCmd *c, int shape, Cur *cur)
{
    Tok t;

    switch (shape) {
    case SH_SET:
        return parse_set(c, cur);
    case SH_STORAGE:
        return parse_storage(c, cur);
    case SH_GET:
        return next_tok(cur, &t) ? take_get_key(c, t) : MC_ERR_MISSING_ARGS;
    case SH_DELETE:
        if (!next_tok(cur, &t))
            return MC_ERR_MISSING_ARGS;
        c->noreply = last_is_noreply(*cur);
        return take_queue(c, t);
    case SH_QUEUE:
        return next_tok(cur, &t) ? take_queue(c, t) : MC_ERR_MISSING_ARGS;
    case SH_FLUSH_ALL:
        c->noreply = last_is_noreply(*cur);
        return MC_OK;
    case SH_NAMES:
        c->names.p = cur->p;
        c->names.end = cur->end;
        return MC_OK;
    case SH_STATUS:
        return next_tok(cur, &t) ? MC_ERR_STATUS_READ_ONLY : MC_OK;
    case SH_MONITOR:
        return parse_counted(c, cur, 1);
    case SH_CONFIRM:
        return parse_counted(c, cur, 0);
    default:
        return MC_OK;
    }
}

McErr mc_parse(const char *line, size_t len, McCmd *cmd)
{
    Cur cur;
    Tok word;
    int w;

    memset(cmd, 0, sizeof *cmd);
    cmd->max = UINT32_MAX;
    cmd->err = MC_ERR_UNKNOWN_COMMAND;
    if (len == 0) /* no pointer arithmetic on a possibly NULL line */
        return cmd->err;
    cur.p = line;
    cur.end = line + len;
    if (!next_tok(&cur, &word) || (w = find_word(word.p, word.n)) < 0)
        return cmd->err;
    cmd->type = (McCmdType)words[w].type;
    cmd->err = parse_args(cmd, words[w].shape, &cur);
    return cmd->err;
}

/* ---- framing and expiry ----------------------------------------------- */

McLine mc_find_line(const char *buf, size_t len, size_t *line_len, size_t *used)
{
    const char *lf;
    size_t n;

    if (len == 0)
        return MC_LINE_INCOMPLETE;
    /* Only the first MC_MAX_LINE bytes can hold an acceptable LF. */
    lf = memchr(buf, '\n', len < MC_MAX_LINE ? len : MC_MAX_LINE);
    if (!lf)
        return len >= MC_MAX_LINE ? MC_LINE_TOO_LONG : MC_LINE_INCOMPLETE;
    n = (size_t)(lf - buf);
    *used = n + 1;
    if (n > 0 && buf[n - 1] == '\r')
        n--;
    *line_len = n;
    return MC_LINE_OK;
}

/* kestrel's cutoff is 1,000,000 seconds (about 11.6 days), not memcached's
 * 30 days. A relative time that would overflow saturates. */
#define MC_RELATIVE_LIMIT 1000000

int mc_expiry(int32_t exptime, int64_t now, int64_t *at)
{
    if (exptime == 0)
        return 0;
    if (exptime >= MC_RELATIVE_LIMIT)
        *at = exptime;
    else if (exptime > 0 && now > INT64_MAX - exptime)
        *at = INT64_MAX;
    else if (exptime < 0 && now < INT64_MIN - exptime)
        *at = INT64_MIN;
    else
        *at = now + exptime;
    return 1;
}
