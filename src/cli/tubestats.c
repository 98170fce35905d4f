/* tubestats.c — every tube's stats, and their table; see tubestats.h. */
#include "tubestats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "jsonout.h"

/* stats-tube requests in flight at once on the fallback path: enough to
 * hide round trips, few enough that requests and replies fit the socket
 * buffers (the server answers in order, so nothing can deadlock). */
#define PIPELINE 64

double mono_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const NamedDict *)a)->name, ((const NamedDict *)b)->name);
}

static Status parse_failed(Client *c, const char *what, const char *why, Err *e)
{
    return err_set(e, ST_SERVER, "%s: %s: cannot read the reply: %s", c->where,
                   what, why);
}

/* tubed: one request. ST_NO_EXT when the server does not know it. */
static Status fetch_ext(Client *c, TubeSet *out, Err *e)
{
    Reply r;
    char why[160];
    Status st;

    if (client_cmd(c, &r, e, "stats-tubes") != ST_OK)
        return e->code;
    if (reply_is(&r, "BAD_FORMAT") || reply_is(&r, "UNKNOWN_COMMAND")) {
        reply_free(&r);
        return err_set(e, ST_NO_EXT, "the server does not know stats-tubes");
    }
    if (!reply_is(&r, "OK") || !r.body) {
        st = reply_unexpected(&r, "stats-tubes", e);
        reply_free(&r);
        return st;
    }
    st = ST_OK;
    if (yaml_tubes(r.body, r.body_len, &out->tubes, why, sizeof why) < 0)
        st = parse_failed(c, "stats-tubes", why, e);
    out->extended = 1;
    reply_free(&r);
    return st;
}

static Status list_tubes(Client *c, StrList *names, Err *e)
{
    Reply r;
    char why[160];
    Status st = ST_OK;

    if (client_cmd(c, &r, e, "list-tubes") != ST_OK)
        return e->code;
    if (!reply_is(&r, "OK") || !r.body)
        st = reply_unexpected(&r, "list-tubes", e);
    else if (yaml_list(r.body, r.body_len, names, why, sizeof why) < 0)
        st = parse_failed(c, "list-tubes", why, e);
    reply_free(&r);
    return st;
}

/* Append one stats-tube reply to out (NOT_FOUND: the tube went away). */
static Status take_stats(Client *c, const char *name, DictList *out, Err *e)
{
    Reply r;
    char why[160];
    Status st = ST_OK;
    NamedDict *t;

    if (client_read(c, &r, e) != ST_OK)
        return e->code;
    if (reply_is(&r, "NOT_FOUND")) {
        reply_free(&r);
        return ST_OK;
    }
    if (!reply_is(&r, "OK") || !r.body) {
        st = reply_unexpected(&r, "stats-tube", e);
        reply_free(&r);
        return st;
    }
    t = &out->items[out->n];
    t->name = tb_malloc(strlen(name) + 1);
    if (!t->name)
        st = err_set(e, ST_LOCAL, "out of memory");
    else if (yaml_dict(r.body, r.body_len, &t->dict, why, sizeof why) < 0)
        st = parse_failed(c, "stats-tube", why, e);
    if (st == ST_OK) {
        memcpy(t->name, name, strlen(name) + 1);
        out->n++;
    } else {
        tb_free(t->name);
    }
    reply_free(&r);
    return st;
}

/* beanstalkd: list-tubes, then stats-tube for each, PIPELINE at a time. */
static Status fetch_each(Client *c, TubeSet *out, Err *e)
{
    StrList names;
    Buf req = {0};
    Status st;

    if ((st = list_tubes(c, &names, e)) != ST_OK)
        return st;
    out->tubes.items = tb_calloc(names.n ? names.n : 1, sizeof *out->tubes.items);
    if (!out->tubes.items) {
        strlist_free(&names);
        return err_set(e, ST_LOCAL, "out of memory");
    }
    out->tubes.cap = names.n;
    for (size_t i = 0; i < names.n && st == ST_OK; i += PIPELINE) {
        size_t end = i + PIPELINE < names.n ? i + PIPELINE : names.n;
        req.len = 0;
        for (size_t k = i; k < end; k++)
            buf_printf(&req, "stats-tube %s\r\n", names.items[k]);
        if (req.oom)
            st = err_set(e, ST_LOCAL, "out of memory");
        else
            st = client_send(c, req.data, req.len, e);
        for (size_t k = i; k < end && st == ST_OK; k++)
            st = take_stats(c, names.items[k], &out->tubes, e);
    }
    buf_free(&req);
    strlist_free(&names);
    return st;
}

Status tubes_fetch(Client *c, TubeSource *src, TubeSet *out, Err *e)
{
    Status st = ST_NO_EXT;

    memset(out, 0, sizeof *out);
    out->at = mono_now();
    if (!src->probed || src->has_ext) {
        st = fetch_ext(c, out, e);
        src->probed = 1;
        src->has_ext = st != ST_NO_EXT;
    }
    if (st == ST_NO_EXT)
        st = fetch_each(c, out, e);
    if (st != ST_OK) {
        tubeset_free(out);
        return st;
    }
    if (out->tubes.n > 1)
        qsort(out->tubes.items, out->tubes.n, sizeof *out->tubes.items, by_name);
    return ST_OK;
}

void tubeset_free(TubeSet *s)
{
    dictlist_free(&s->tubes);
}

void fmt_duration(char *out, size_t n, unsigned long long s)
{
    if (s < 60)
        snprintf(out, n, "%llus", s);
    else if (s < 3600)
        snprintf(out, n, "%llum%llus", s / 60, s % 60);
    else if (s < 86400)
        snprintf(out, n, "%lluh%llum", s / 3600, s % 3600 / 60);
    else
        snprintf(out, n, "%llud%lluh", s / 86400, s % 86400 / 3600);
}

void fmt_bytes(char *out, size_t n, unsigned long long b)
{
    static const char units[] = "KMGTPE";
    double v = (double)b;
    int u = -1;

    if (b < 1024) {
        snprintf(out, n, "%llu", b);
        return;
    }
    while (v >= 1024 && u < 5)
        v /= 1024, u++;
    snprintf(out, n, v < 10 ? "%.1f%c" : "%.0f%c", v, units[u]);
}

static const NamedDict *find(const TubeSet *s, const char *name)
{
    NamedDict key = {.name = (char *)name};

    if (!s || s->tubes.n == 0)
        return NULL;
    return bsearch(&key, s->tubes.items, s->tubes.n, sizeof key, by_name);
}

/* The columns, left to right; `drop` ranks what goes first when narrow. */
enum {
    C_TUBE, C_READY, C_RESERVED, C_DELAYED, C_BURIED, C_TOTAL, C_PUTS,
    C_DELS, C_OLDEST, C_WAITING, C_WATCHING, C_USING, C_PAUSED, C_BYTES,
    C_EXPIRED, C_DISCARDED, C_TIMEOUTS, C_COUNT
};

static const struct {
    const char *title, *key;
    int drop;
    int ext;   /* only in tubed's stats-tubes */
    int rate;  /* only with rates */
} COLS[C_COUNT] = {
    [C_TUBE] = {"TUBE", "name", 0, 0, 0},
    [C_READY] = {"READY", "current-jobs-ready", 0, 0, 0},
    [C_RESERVED] = {"RESERVED", "current-jobs-reserved", 0, 0, 0},
    [C_DELAYED] = {"DELAYED", "current-jobs-delayed", 3, 0, 0},
    [C_BURIED] = {"BURIED", "current-jobs-buried", 0, 0, 0},
    [C_TOTAL] = {"TOTAL", "total-jobs", 6, 0, 0},
    [C_PUTS] = {"PUT/S", "total-jobs", 1, 0, 1},
    [C_DELS] = {"DEL/S", "cmd-delete", 2, 0, 1},
    [C_OLDEST] = {"OLDEST", "oldest-ready-age", 7, 1, 0},
    [C_WAITING] = {"WAITING", "current-waiting", 5, 0, 0},
    [C_WATCHING] = {"WATCHING", "current-watching", 9, 0, 0},
    [C_USING] = {"USING", "current-using", 10, 0, 0},
    [C_PAUSED] = {"PAUSED", "pause-time-left", 4, 0, 0},
    [C_BYTES] = {"BYTES", "current-bytes", 8, 1, 0},
    [C_EXPIRED] = {"EXPIRED", "total-expired", 11, 1, 0},
    [C_DISCARDED] = {"DISCARDED", "total-discarded", 12, 1, 0},
    [C_TIMEOUTS] = {"TIMEOUTS", "total-timeouts", 13, 1, 0},
};

static void rate_cell(Table *t, size_t row, size_t col, const NamedDict *cur,
                      const NamedDict *old, double dt, const char *key)
{
    unsigned long long now = dict_num(&cur->dict, key, 0);
    unsigned long long then = old ? dict_num(&old->dict, key, 0) : 0;
    double r;

    /* A counter that went down means the tube was deleted and made anew. */
    if (!old || dt <= 0 || now < then) {
        table_set(t, row, col, STY_DIM, "-");
        return;
    }
    r = (double)(now - then) / dt;
    table_set(t, row, col, r > 0 ? STY_PLAIN : STY_DIM, r < 100 ? "%.1f" : "%.0f", r);
}

static void count_cell(Table *t, size_t row, size_t col, unsigned long long v,
                       Style nonzero)
{
    table_set(t, row, col, v ? nonzero : STY_DIM, "%llu", v);
}

static void time_cell(Table *t, size_t row, size_t col, unsigned long long secs,
                      Style nonzero)
{
    char s[32];

    if (secs == 0) {
        table_set(t, row, col, STY_DIM, "-");
        return;
    }
    fmt_duration(s, sizeof s, secs);
    table_set(t, row, col, nonzero, "%s", s);
}

static void tube_row(Table *t, const size_t *col, const NamedDict *d,
                     const TubeSet *prev, double dt)
{
    size_t row = table_row(t);
    const NamedDict *old = find(prev, d->name);
    char s[32];

    for (int i = 0; i < C_COUNT; i++) {
        unsigned long long v = dict_num(&d->dict, COLS[i].key, 0);
        if (col[i] == (size_t)-1)
            continue;
        switch (i) {
        case C_TUBE: table_set(t, row, col[i], STY_PLAIN, "%s", d->name); break;
        case C_PUTS:
        case C_DELS: rate_cell(t, row, col[i], d, old, dt, COLS[i].key); break;
        case C_BURIED: count_cell(t, row, col[i], v, STY_BAD); break;
        case C_WAITING: count_cell(t, row, col[i], v, STY_GOOD); break;
        case C_OLDEST:
            /* Ready jobs younger than a second are not "no job". */
            if (v == 0 && dict_num(&d->dict, "current-jobs-ready", 0))
                table_set(t, row, col[i], STY_PLAIN, "0s");
            else
                time_cell(t, row, col[i], v, STY_PLAIN);
            break;
        case C_PAUSED: time_cell(t, row, col[i], v, STY_WARN); break;
        case C_BYTES:
            fmt_bytes(s, sizeof s, v);
            table_set(t, row, col[i], v ? STY_PLAIN : STY_DIM, "%s", s);
            break;
        default: count_cell(t, row, col[i], v, STY_PLAIN); break;
        }
    }
}

void tubes_table(Table *t, const TubeSet *cur, const TubeSet *prev,
                 int with_rates)
{
    size_t col[C_COUNT];
    double dt = prev ? cur->at - prev->at : 0;

    table_init(t);
    for (int i = 0; i < C_COUNT; i++) {
        col[i] = (size_t)-1;
        if ((COLS[i].ext && !cur->extended) || (COLS[i].rate && !with_rates))
            continue;
        col[i] = table_col(t, COLS[i].title, i != C_TUBE, COLS[i].drop,
                           i == C_TUBE);
    }
    for (size_t k = 0; k < cur->tubes.n; k++)
        tube_row(t, col, &cur->tubes.items[k], prev, dt);
}

void tubes_json(Buf *b, const TubeSet *s)
{
    static const char *const strings[] = {"name", NULL};

    buf_append(b, "{", 1);
    for (size_t i = 0; i < s->tubes.n; i++) {
        if (i)
            buf_append(b, ",", 1);
        json_cstr(b, s->tubes.items[i].name);
        buf_append(b, ":", 1);
        json_dict(b, &s->tubes.items[i].dict, strings);
    }
    buf_append(b, "}", 1);
}
