/*
 * fuzz_http_conn.c — the HTTP front-end (src/proto/http/http.c) on a real
 * Server: arbitrary bytes in arbitrary splits on 1..3 connections (socket
 * pairs, the harness is the client), with drain mode, an unhealthy binlog
 * and allocation failure thrown in.
 *
 * Input: byte 0 flags: bits 0-1 connections-1 (at most 3); bit 2 start
 * draining; bit 3 a few tubes with odd names; bit 4 allocation failure
 * after byte 1 + 1 allocations; bit 5 the binlog reported unhealthy; bit 6
 * jobs in a few tubes (ready, urgent, delayed, buried, one reserved, a
 * paused tube); bit 7 the failure index is bytes 1-2 (big endian, for
 * the allocation failure sweep) and the steps start at byte 3. Then
 * steps: a header byte h, connection (h & 3) modulo the count, op h >> 2:
 *   0..47  a length byte L, then L bytes written to the connection
 *   48..55 the client reads its replies and checks them
 *   56..59 the client shuts down its write side
 *   60..62 one more loop iteration
 *   63     the clock advances by the next byte x 100 ms (HTTP_IDLE_NS is
 *          10 s: idle connections, heads not complete in time, slow
 *          readers of a big reply)
 * After every step one loop iteration runs as server_run() does
 * (fz_loop_once() in fuzz_util.h), on a virtual clock that stands still
 * but for op 63: the pages show the same jobs at every step (the delayed
 * ones are an hour away, the paused tube a minute, the held job's TTR
 * too). At the end the clock passes every idle deadline twice, so each
 * connection is timed out (408 for a head left half-sent) and closed.
 *
 * Checks: what a client reads is a run of whole replies: "HTTP/1.1 NNN
 * Reason\r\n", known statuses only, a Content-Length and no
 * Transfer-Encoding, headers ending in an empty line, then exactly that
 * many body bytes (none for a HEAD: no body starts with "HTTP/1.1 ", so a
 * reply right after a head means the head answered a HEAD); a 400 or 408
 * reply is the last. At the end the server's counters agree with a recount
 * (fz_check_server_with()) and server_free() leaves nothing behind
 * (LeakSanitizer).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "alloc.h"
#include "bsconn.h"
#include "fuzz_util.h"
#include "http.h"
#include "stats.h"
#include "serve.h"

#define MAX_CONNS 3

typedef struct Client {
    int fd;
    int shut;
    char *got;              /* replies read and not yet checked */
    size_t len, cap;
    int ended;              /* a 400/408 came: nothing may follow */
} Client;

static const char *find2(const char *p, size_t n, const char *pat)
{
    for (size_t i = 0; i + 4 <= n; i++)
        if (!memcmp(p + i, pat, 4))
            return p + i;
    return NULL;
}

static long content_length(const char *head, size_t n)
{
    static const char k[] = "\r\nContent-Length: ";
    long v = -1;

    for (size_t i = 0; i + sizeof k - 1 <= n; i++)
        if (!memcmp(head + i, k, sizeof k - 1)) {
            FZ_CHECK(v < 0, "two Content-Length fields");
            v = strtol(head + i + sizeof k - 1, NULL, 10);
        }
    return v;
}

static int known_status(int st)
{
    return st == 200 || st == 400 || st == 404 || st == 405 || st == 408 || st == 500 ||
           st == 503;
}

/* Check the whole replies at the front of c->got; keep a partial one. */
static void check_replies(Client *c)
{
    size_t pos = 0;

    while (pos < c->len) {
        const char *p = c->got + pos, *end;
        size_t left = c->len - pos, hlen;
        long cl;
        int st;

        FZ_CHECK(!c->ended, "bytes after a 400/408 reply");
        if (left < 9 || !(end = find2(p, left, "\r\n\r\n")))
            break;
        FZ_CHECK(!memcmp(p, "HTTP/1.1 ", 9), "reply does not start with HTTP/1.1: %.20s", p);
        st = atoi(p + 9);
        FZ_CHECK(known_status(st), "status %d", st);
        hlen = (size_t)(end - p) + 4;
        FZ_CHECK(!find2(p, hlen, "ansf"), "Transfer-Encoding in a reply");
        cl = content_length(p, hlen);
        FZ_CHECK(cl >= 0, "reply without Content-Length");
        /* No body starts with "HTTP/1.1 ": a reply right after the head
         * means this one answered a HEAD. */
        if (left - hlen < 9) {
            if (memcmp(p + hlen, "HTTP/1.1 ", left - hlen) == 0 || left < hlen + (size_t)cl)
                break; /* cannot tell yet */
        } else if (!memcmp(p + hlen, "HTTP/1.1 ", 9)) {
            cl = 0;
        } else if (left < hlen + (size_t)cl) {
            break; /* the body is still coming */
        }
        if (st == 400 || st == 408)
            c->ended = 1;
        pos += hlen + (size_t)cl;
    }
    memmove(c->got, c->got + pos, c->len - pos);
    c->len -= pos;
}

static void client_read(Client *c)
{
    for (;;) {
        ssize_t n;
        if (c->cap - c->len < 65536) {
            c->cap = c->cap * 2 + 65536;
            c->got = realloc(c->got, c->cap);
            FZ_CHECK(c->got, "realloc");
        }
        n = read(c->fd, c->got + c->len, c->cap - c->len);
        if (n <= 0)
            break;
        if (fz_echo) /* FUZZ_ECHO=1: what the client reads, to stderr */
            fprintf(stderr, "[fd %d] %.*s\n", c->fd, (int)n, c->got + c->len);
        c->len += (size_t)n;
    }
    check_replies(c);
}

/* ---- jobs for the pages to show ------------------------------------------ */

static void no_wake(Worker *w, WaitEnd how, Job *j)
{
    fz_fail("the harness's worker never waits");
}

static const WorkerOps harness_ops = {no_wake};

static uint64_t put_job(Engine *e, const char *tube, uint32_t pri, uint32_t delay,
                        const char *body)
{
    size_t n = strlen(body);
    Tube *t = engine_tube(e, tube, strlen(tube));
    Job *j = engine_job_new(e, NULL, (uint32_t)n, pri, delay, 60);
    uint64_t id;

    FZ_CHECK(t && j, "out of memory setting up jobs");
    memcpy(j->body, body, n);
    id = j->id;
    FZ_CHECK(engine_put(e, j, t) == ENG_OK, "put in %s failed", tube);
    return id;
}

/* Ready jobs (one urgent) in two tubes, delayed ones, a buried one, one
 * reserved by w (held until the end), and a paused tube. */
static void make_jobs(Engine *e, Worker *w)
{
    Job *j;
    uint64_t b;

    put_job(e, "default", 100, 0, "a default job");
    put_job(e, "emails", 2000, 0, "{\"to\":\"a@example.org\"}");
    put_job(e, "emails", 10, 0, "urgent");
    put_job(e, "emails", 2000, 30, "later");
    put_job(e, "reports", 1024, 3600, "tomorrow");
    b = put_job(e, "reports", 1024, 0, "to bury");
    put_job(e, "reports", 1024, 0, "to hold");
    put_job(e, "paused", 1024, 0, "waits");
    FZ_CHECK(engine_pause(e, engine_tube_find(e, "paused", 6), 60) == ENG_OK, "pause");
    worker_init(e, w, &harness_ops);
    FZ_CHECK(engine_reserve_job(e, w, b, &j) == ENG_OK &&
             engine_bury(e, w, b, 5000) == ENG_OK, "bury");
    FZ_CHECK(engine_reserve_job(e, w, b + 1, &j) == ENG_OK, "reserve");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static Server srv;
    static Beanstalk bs;
    static Http http;
    static const char *const tubes[] = {"a;b", "$x", "(p)", "z+y/w", "default2"};
    static Worker holder;
    Client cl[MAX_CONNS];
    Config cfg;
    size_t pos = data && size && (data[0] & 128) ? 3 : 2, n;
    unsigned long fail_at;
    int nconns, jobs;

    if (size < pos)
        return 0;
    fail_at = pos == 3 ? (unsigned long)data[1] << 8 | data[2] : data[1];
    nconns = (data[0] & 3) % MAX_CONNS + 1;
    jobs = (data[0] & 64) != 0;
    opts_defaults(&cfg);
    fz_save_signals();
    if (server_init(&srv, &cfg) < 0)
        fz_fail("server_init");
    fz_restore_signals();
    beanstalk_init(&bs, &srv);
    if (http_init(&http, &srv, bs_stats_source(&bs)) < 0)
        fz_fail("http_init");
    srv.draining = (data[0] & 4) != 0;
    if (data[0] & 8)
        for (size_t i = 0; i < sizeof tubes / sizeof tubes[0]; i++) {
            Tube *t = engine_tube(&srv.eng, tubes[i], strlen(tubes[i]));
            if (t)
                engine_tube_ref(t);
        }
    if (jobs)
        make_jobs(&srv.eng, &holder);
    if (data[0] & 32) {
        srv.eng.binlog.healthy = 0;
        snprintf(srv.eng.binlog.last_error, sizeof srv.eng.binlog.last_error, "fuzz");
    }
    memset(cl, 0, sizeof cl);
    for (int i = 0; i < nconns; i++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
            fz_fail("socketpair");
        cl[i].fd = sv[1];
        if (!conn_new(&srv, sv[0], &http.proto))
            fz_fail("conn_new");
    }
    srv.loop.on_wake = fz_fake_wake; /* the clock stands still */
    fz_vnow = srv.eng.now;
    if (data[0] & 16)
        fz_alloc_arm(fail_at + 1);

    while (pos < size) {
        uint8_t h = data[pos++];
        Client *c = &cl[(h & 3) % nconns];
        int op = h >> 2;

        if (op < 48) {
            if (pos >= size)
                break;
            n = data[pos++];
            if (n > size - pos)
                n = size - pos;
            if (!c->shut && n && write(c->fd, data + pos, n) < 0)
                (void)0; /* closed by the server: fine */
            pos += n;
        } else if (op < 56) {
            client_read(c);
        } else if (op < 60) {
            if (!c->shut)
                shutdown(c->fd, SHUT_WR);
            c->shut = 1;
        } else if (op == 63 && pos < size) {
            fz_vnow += (int64_t)data[pos++] * 100 * NS_PER_MSEC;
        }
        fz_loop_once(&srv);
    }
    fz_alloc_disarm();
    for (int k = 0; k < 4; k++)
        fz_loop_once(&srv);
    /* Every connection's idle deadline passes: a client reads what it was
     * sent (a 408 at most), then a second span closes the rest. */
    for (int k = 0; k < 2; k++) {
        fz_vnow += HTTP_IDLE_NS + NS_PER_SEC;
        fz_loop_once(&srv);
        for (int i = 0; i < nconns; i++)
            client_read(&cl[i]);
        fz_loop_once(&srv);
    }
    for (int i = 0; i < nconns; i++) {
        client_read(&cl[i]);
        close(cl[i].fd);
        free(cl[i].got);
    }
    if (jobs)
        worker_fini(&srv.eng, &holder);
    if (data[0] & 8) /* the harness's references to the odd tubes */
        for (size_t i = 0; i < sizeof tubes / sizeof tubes[0]; i++) {
            Tube *t = engine_tube_find(&srv.eng, tubes[i], strlen(tubes[i]));
            if (t)
                engine_tube_unref(&srv.eng, t);
        }
    for (int k = 0; k < 2; k++)
        fz_loop_once(&srv);
    fz_check_server_with(&srv, &bs.proto, NULL);
    srv.eng.binlog.enabled = 0;
    server_free(&srv);
    http_free(&http);
    opts_free(&srv.cfg);
    return 0;
}
