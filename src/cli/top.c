/* top.c — `tubed-cli top`: the tubes table, redrawn every second in place,
 * with rates, until q or Ctrl-C.
 *
 * One loop, one poll: the keyboard, a signal pipe (resize, termination)
 * and the next tick. A sample is `stats` plus every tube's stats; rates
 * come from two successive samples. A lost connection is shown on screen
 * and retried every tick rather than ending the session: top is what
 * people watch while they restart servers. The terminal is restored on
 * every way out (q, Ctrl-C, SIGTERM/SIGHUP, exit) by term_leave().
 */
#include "commands.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "table.h"
#include "term.h"
#include "tubestats.h"

#define TICK 1.0
/* Lines above the table: title, jobs, rates, status. */
#define HEAD_LINES 4

typedef struct Sample {
    Dict stats;
    TubeSet tubes;
    int ok;
} Sample;

typedef struct Top {
    const Cli *cli;
    Client *c;
    int timeout_ms;    /* for reconnecting: top's shorter one */
    int connected;
    TubeSource src;
    Sample cur, prev;
    char status[sizeof(((Err *)0)->msg) + 16]; /* the last error, shown until a sample succeeds */
    int rows, cols;
    size_t scroll;
    int quit;
} Top;

static void sample_free(Sample *s)
{
    dict_free(&s->stats);
    tubeset_free(&s->tubes);
    s->ok = 0;
}

static Status fetch_stats(Client *c, Dict *d, Err *e)
{
    Reply r;
    char why[160];
    Status st = ST_OK;

    if (client_cmd(c, &r, e, "stats") != ST_OK)
        return e->code;
    if (!reply_is(&r, "OK") || !r.body)
        st = reply_unexpected(&r, "stats", e);
    else if (yaml_dict(r.body, r.body_len, d, why, sizeof why) < 0)
        st = err_set(e, ST_SERVER, "stats: cannot read the reply: %s", why);
    reply_free(&r);
    return st;
}

/* Take a sample; on any failure drop the connection (a reply may be half
 * read) and say why on the status line. */
static void take_sample(Top *t)
{
    Sample s = {0};
    Err e;
    int fresh = !t->connected;

    if (!t->connected) {
        if (client_open(t->c, t->cli->host, t->cli->port, t->timeout_ms,
                        &e) != ST_OK) {
            snprintf(t->status, sizeof t->status, "%s (retrying)", e.msg);
            return;
        }
        t->connected = 1;
        memset(&t->src, 0, sizeof t->src);
    }
    if (fetch_stats(t->c, &s.stats, &e) != ST_OK ||
        tubes_fetch(t->c, &t->src, &s.tubes, &e) != ST_OK) {
        snprintf(t->status, sizeof t->status, "%s (retrying)", e.msg);
        sample_free(&s);
        client_close(t->c);
        t->connected = 0;
        return;
    }
    s.ok = 1;
    t->status[0] = '\0';
    sample_free(&t->prev);
    t->prev = t->cur;
    t->cur = s;
    /* The first sample of a new connection starts the rates afresh: the
     * server may have restarted (counters from zero, or from a server that
     * counted more meanwhile), and the time between includes the outage. */
    if (fresh)
        sample_free(&t->prev);
}

/* "12.5" per second from two samples of a server-wide counter, or "-". */
static void server_rate(const Top *t, const char *key, char *out, size_t n)
{
    unsigned long long a, b;
    double dt = t->cur.tubes.at - t->prev.tubes.at;

    if (!t->prev.ok || dt <= 0 ||
        (a = dict_num(&t->prev.stats, key, 0)) > (b = dict_num(&t->cur.stats, key, 0))) {
        snprintf(out, n, "-");
        return;
    }
    snprintf(out, n, "%.1f", (double)(b - a) / dt);
}

/* One line of the frame, cut to the width, in an optional style. */
static void line(Top *t, Buf *f, Style st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void line(Top *t, Buf *f, Style st, const char *fmt, ...)
{
    char s[1024];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(s, sizeof s, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    if (n > (int)sizeof s - 1)
        n = (int)sizeof s - 1;
    text_safe(s, (size_t)n); /* the version, an error: the server's text */
    if (n > t->cols)
        n = t->cols;
    if (t->cli->color && st != STY_PLAIN)
        buf_printf(f, "%s%.*s\x1b[0m\n", style_sgr(st), n, s);
    else
        buf_printf(f, "%.*s\n", n, s);
}

static void draw_head(Top *t, Buf *f)
{
    const Dict *d = &t->cur.stats;
    char up[32], puts[32], dels[32], clock[16];
    time_t now = time(NULL);
    struct tm tm;

    localtime_r(&now, &tm);
    strftime(clock, sizeof clock, "%H:%M:%S", &tm);
    fmt_duration(up, sizeof up, dict_num(d, "uptime", 0));
    server_rate(t, "cmd-put", puts, sizeof puts);
    server_rate(t, "cmd-delete", dels, sizeof dels);
    line(t, f, STY_BOLD, "%s  version %s  up %s  %s", t->c->where,
         dict_get(d, "version") ? dict_get(d, "version") : "?", up, clock);
    line(t, f, STY_PLAIN, "jobs: %llu ready, %llu reserved, %llu delayed, "
         "%llu buried   connections %llu, waiting %llu",
         dict_num(d, "current-jobs-ready", 0), dict_num(d, "current-jobs-reserved", 0),
         dict_num(d, "current-jobs-delayed", 0), dict_num(d, "current-jobs-buried", 0),
         dict_num(d, "current-connections", 0), dict_num(d, "current-waiting", 0));
    line(t, f, STY_PLAIN, "puts/s %s   deletes/s %s   tubes %zu%s", puts, dels,
         t->cur.tubes.tubes.n,
         strcmp(dict_get(d, "draining") ? dict_get(d, "draining") : "", "true") == 0
             ? "   DRAINING" : "");
}

/* How many table rows fit under the head, the table header and a footer. */
static size_t body_rows(const Top *t)
{
    int n = t->rows - HEAD_LINES - 2;
    return n > 0 ? (size_t)n : 0;
}

static void draw_table(Top *t, Buf *f)
{
    Table tab;
    size_t fit = body_rows(t), n = t->cur.tubes.tubes.n;
    TableView v = {t->cols, t->cli->color, 1, "\n", 0, fit};

    if (t->scroll + fit > n)
        t->scroll = n > fit ? n - fit : 0;
    v.first = t->scroll;
    tubes_table(&tab, &t->cur.tubes, t->prev.ok ? &t->prev.tubes : NULL, 1);
    table_render(&tab, f, &v);
    table_free(&tab);
    /* With no room for a single row there is no range to show ("tubes
     * 1-0 of N" read as nonsense). */
    if (n > fit && !fit)
        line(t, f, STY_DIM, "%zu tubes: no room to list them", n);
    else if (n > fit)
        line(t, f, STY_DIM, "tubes %zu-%zu of %zu  (up/down, PgUp/PgDn)",
             t->scroll + 1, t->scroll + fit < n ? t->scroll + fit : n, n);
}

/* Lines ended by '\n' become screen rows: each cleared to its end, and
 * no line break after the last row (it would scroll the screen). */
static void frame_out(const Top *t, const Buf *lines)
{
    Buf out = {0};
    const char *p = lines->data, *end = lines->data + lines->len;
    int row = 0;

    buf_append(&out, "\x1b[H", 3);
    while (p < end && row < t->rows) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (row)
            buf_append(&out, "\r\n", 2);
        buf_append(&out, p, n);
        buf_append(&out, "\x1b[K", 3);
        p += n + 1;
        row++;
    }
    buf_append(&out, "\x1b[J", 3);
    for (size_t off = 0; off < out.len && !out.oom;) {
        ssize_t w = write(STDOUT_FILENO, out.data + off, out.len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    buf_free(&out);
}

static void draw(Top *t)
{
    Buf f = {0};

    if (term_size(STDOUT_FILENO, &t->rows, &t->cols) < 0 || t->cols <= 0 ||
        t->rows <= 0)
        t->rows = 24, t->cols = 80;
    if (t->cur.ok) {
        draw_head(t, &f);
    } else {
        line(t, &f, STY_BOLD, "%s", t->c->where);
        line(t, &f, STY_PLAIN, "%s", "");
        line(t, &f, STY_PLAIN, "%s", "");
    }
    if (t->status[0])
        line(t, &f, STY_BAD, "%s", t->status);
    else
        line(t, &f, STY_DIM, "q quits");
    if (t->cur.ok)
        draw_table(t, &f);
    frame_out(t, &f);
    buf_free(&f);
}

/* Keys: q, Q, Ctrl-C, Ctrl-\ quit; arrows, j/k, PgUp/PgDn, g/G scroll. */
static void keys(Top *t, const char *s, size_t n)
{
    size_t page = body_rows(t) ? body_rows(t) : 1;

    for (size_t i = 0; i < n; i++) {
        if (s[i] == 'q' || s[i] == 'Q' || s[i] == 3 || s[i] == 28) {
            t->quit = 1;
        } else if (s[i] == 'k') {
            t->scroll = t->scroll ? t->scroll - 1 : 0;
        } else if (s[i] == 'j') {
            t->scroll++;
        } else if (s[i] == 'g') {
            t->scroll = 0;
        } else if (s[i] == 'G') {
            t->scroll = (size_t)-1 / 2;
        } else if (s[i] == 27 && i + 2 < n && s[i + 1] == '[') {
            char k = s[i + 2];
            i += 2;
            if (k == 'A')
                t->scroll = t->scroll ? t->scroll - 1 : 0;
            else if (k == 'B')
                t->scroll++;
            else if (k == '5' || k == '6') {
                t->scroll = k == '6' ? t->scroll + page
                                     : (t->scroll > page ? t->scroll - page : 0);
                i += i + 1 < n && s[i + 1] == '~';
            }
        }
    }
}

/* Wait for a key, a signal or the next tick, and act on what came. */
static void wait_events(Top *t, int sigfd, double until)
{
    struct pollfd p[2] = {{.fd = STDIN_FILENO, .events = POLLIN},
                          {.fd = sigfd, .events = POLLIN}};
    double left = until - mono_now();
    int ms = left > 0 ? (int)(left * 1000) + 1 : 0;
    char buf[64];
    ssize_t n;

    if (poll(p, 2, ms) <= 0)
        return;
    if (p[1].revents) {
        int sig = term_signal_take(sigfd);
        if (sig & TERM_SIG_QUIT)
            t->quit = 1;
        if (sig & TERM_SIG_RESIZE)
            draw(t);
    }
    if (p[0].revents & (POLLHUP | POLLERR))
        t->quit = 1;
    else if (p[0].revents & POLLIN) {
        n = read(STDIN_FILENO, buf, sizeof buf);
        if (n > 0) {
            keys(t, buf, (size_t)n);
            if (!t->quit)
                draw(t);
        }
    }
}

static void run(Top *t, int sigfd)
{
    double next = mono_now();

    while (!t->quit) {
        if (mono_now() >= next) {
            take_sample(t);
            draw(t);
            next += TICK;
            /* After a slow sample, tick from now rather than catch up. */
            if (next < mono_now())
                next = mono_now() + TICK;
        }
        wait_events(t, sigfd, next);
    }
}

Status cmd_top(const Cli *cli, Client *c, char **args, int nargs, Err *e)
{
    Top t;
    Term term;
    int sigfd;

    if (cli->json)
        return err_set(e, ST_USAGE, "top has no --json: use 'tubes --json' "
                       "once a second");
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))
        return err_set(e, ST_USAGE, "top needs a terminal on standard input "
                       "and output (try 'tubes')");
    memset(&t, 0, sizeof t);
    t.cli = cli;
    t.c = c;
    t.connected = 1;
    /* Keys wait while a request does: a stalled server must not make q
     * take the whole --timeout to work. */
    if (c->timeout_ms > 3000)
        c->timeout_ms = 3000;
    t.timeout_ms = c->timeout_ms;
    if ((sigfd = term_signals(e)) < 0)
        return e->code;
    if (term_enter(&term, STDIN_FILENO, STDOUT_FILENO, e) != ST_OK)
        return e->code;
    run(&t, sigfd);
    term_leave(&term);
    sample_free(&t.cur);
    sample_free(&t.prev);
    return ST_OK;
}
