/* Unit tests for the HTTP front-end (http.c, metrics.c, tubesjson.c): the
 * JSON string escaper and number check, the YAML-to-JSON conversion of the
 * stats documents, and whole requests through a real Server over a
 * socketpair (one loop iteration at a time, as server_run does): the
 * /healthz reasons (draining, an unhealthy binlog), tube order in
 * /metrics, a request split at every byte, pipelining, 400 and close, the
 * idle deadline after a reply read slowly. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bsconn.h"
#include "http.h"
#include "metrics.h"
#include "serve.h"
#include "status_page.h"
#include "stats.h"
#include "tubesjson.h"
#include "unit.h"

static void expect_buf(Buf *b, const char *want)
{
    ck_assert_int_eq(b->oom, 0);
    ck_assert_msg(b->len == strlen(want) && !memcmp(b->data, want, b->len),
                  "got:\n%.*s\nwant:\n%s", (int)b->len, b->data ? b->data : "", want);
    buf_free(b);
}

START_TEST(json_string_escapes)
{
    Buf b = {0};

    json_string(&b, "plain", 5);
    expect_buf(&b, "\"plain\"");
    json_string(&b, "a\"b\\c", 5);
    expect_buf(&b, "\"a\\\"b\\\\c\"");
    json_string(&b, "\b\f\n\r\t", 5);
    expect_buf(&b, "\"\\b\\f\\n\\r\\t\"");
    json_string(&b, "\x00\x01\x1f\x7f", 4);
    expect_buf(&b, "\"\\u0000\\u0001\\u001f\\u007f\"");
    /* UTF-8 passes as it is; '/' and '<' need nothing */
    json_string(&b, "\xc3\xa9</script>", 11);
    expect_buf(&b, "\"\xc3\xa9</script>\"");
    json_string(&b, "", 0);
    expect_buf(&b, "\"\"");
    /* bytes that are not UTF-8: one U+FFFD each, the rest kept (they
     * went out raw, and a strict reader refused the whole document) */
    json_string(&b, "unix:/caf\xe9.sock", 15);
    expect_buf(&b, "\"unix:/caf\\ufffd.sock\"");
    json_string(&b, "\xc3\xa9\xc3\x22\x80\xed\xa0\x80\xf0\x9f\x98", 11);
    expect_buf(&b, "\"\xc3\xa9\\ufffd\\\"\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\"");
}
END_TEST

/* ---- a real server over a socketpair ----------------------------------- */

typedef struct Rig {
    Server s;
    Beanstalk bs;
    Http http;
    int client;             /* our end */
    Conn *conn;
} Rig;

static Rig *rig_new(void)
{
    Rig *r = calloc(1, sizeof *r);
    Config cfg;
    int sv[2];

    ck_assert_ptr_nonnull(r);
    opts_defaults(&cfg);
    ck_assert_int_eq(server_init(&r->s, &cfg), 0);
    beanstalk_init(&r->bs, &r->s);
    ck_assert_int_eq(http_init(&r->http, &r->s, bs_stats_source(&r->bs)), 0);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    r->client = sv[1];
    r->conn = conn_new(&r->s, sv[0], &r->http.proto);
    ck_assert_ptr_nonnull(r->conn);
    return r;
}

static void free_dead(Server *s)
{
    List *n;

    while ((n = list_first(&s->dead)))
        conn_free(container_of(n, Conn, link));
}

/* A few loop iterations, as server_run does them, less the engine's part:
 * these tests make no job, and one fakes a binlog that is not there. */
static void pump(Rig *r)
{
    for (int i = 0; i < 4; i++) {
        conn_flush_all(&r->s);
        free_dead(&r->s);
        ev_poll(&r->s.loop, 0);
    }
}

static void rig_free(Rig *r)
{
    close(r->client);
    server_free(&r->s);
    http_free(&r->http);
    opts_free(&r->s.cfg);
    free(r);
}

static void say(Rig *r, const char *s, size_t n)
{
    ck_assert_int_eq(write(r->client, s, n), (ssize_t)n);
    pump(r);
}

/* Everything the server sent so far (NUL-terminated; free it); *eof set
 * when it closed. */
static char *hear(Rig *r, size_t *len, int *eof)
{
    size_t cap = 1 << 16, n = 0;
    char *out = malloc(cap + 1);
    ssize_t k;

    *eof = 0;
    for (;;) {
        if (n == cap) {
            cap *= 2;
            out = realloc(out, cap + 1);
        }
        k = read(r->client, out + n, cap - n);
        if (k > 0) {
            n += (size_t)k;
            continue;
        }
        if (k == 0)
            *eof = 1;
        break;
    }
    out[n] = '\0';
    *len = n;
    return out;
}

static const char *body_of(const char *resp)
{
    const char *p = strstr(resp, "\r\n\r\n");

    return p ? p + 4 : "";
}

START_TEST(healthz_reasons)
{
    static const char req[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    Rig *r = rig_new();
    size_t len;
    int eof;
    char *got;

    say(r, req, sizeof req - 1);
    got = hear(r, &len, &eof);
    ck_assert_msg(!strncmp(got, "HTTP/1.1 200 OK\r\n", 17), "%s", got);
    ck_assert_str_eq(body_of(got), "ok\n");
    ck_assert(strstr(got, "Content-Length: 3\r\n"));
    free(got);

    r->s.draining = 1;
    say(r, req, sizeof req - 1);
    got = hear(r, &len, &eof);
    ck_assert_msg(!strncmp(got, "HTTP/1.1 503 Service Unavailable\r\n", 34), "%s", got);
    ck_assert_str_eq(body_of(got), "draining\n");
    free(got);

    r->s.eng.binlog.enabled = 1;
    r->s.eng.binlog.healthy = 0;
    snprintf(r->s.eng.binlog.last_error, sizeof r->s.eng.binlog.last_error, "write failed");
    say(r, req, sizeof req - 1);
    got = hear(r, &len, &eof);
    ck_assert_str_eq(body_of(got), "draining\nbinlog unhealthy: write failed\n");
    free(got);

    r->s.draining = 0;
    say(r, req, sizeof req - 1);
    got = hear(r, &len, &eof);
    ck_assert_msg(strstr(got, " 503 "), "%s", got);
    ck_assert_str_eq(body_of(got), "binlog unhealthy: write failed\n");
    ck_assert_int_eq(eof, 0);
    free(got);
    r->s.eng.binlog.enabled = 0; /* nothing for server_free to close */
    rig_free(r);
}
END_TEST

START_TEST(split_at_every_byte_and_pipelined)
{
    static const char req[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                              "HEAD /nope HTTP/1.1\r\nHost: x\r\n\r\n"
                              "DELETE / HTTP/1.1\r\nHost: x\r\n\r\n"
                              "GET /healthz HTTP/1.0\r\n\r\n";
    Rig *r = rig_new();
    size_t len;
    int eof;
    char *got;
    const char *p;

    for (size_t i = 0; i < sizeof req - 1; i++)
        say(r, req + i, 1);
    got = hear(r, &len, &eof);
    p = strstr(got, "HTTP/1.1 200 OK\r\n");
    ck_assert_msg(p == got, "%s", got);
    p = strstr(p + 1, "HTTP/1.1 404 Not Found\r\n");
    ck_assert_msg(p, "%s", got);
    p = strstr(p + 1, "HTTP/1.1 405 Method Not Allowed\r\n");
    ck_assert_msg(p && strstr(p, "Allow: GET, HEAD\r\n"), "%s", got);
    p = strstr(p + 1, "HTTP/1.1 200 OK\r\n");
    ck_assert_msg(p && strstr(p, "Connection: close\r\n"), "%s", got);
    ck_assert_str_eq(body_of(p), "ok\n");
    /* the HEAD reply has no body: "not found\n" appears nowhere */
    ck_assert_ptr_null(strstr(got, "not found\n"));
    ck_assert_int_eq(eof, 1); /* HTTP/1.0 without keep-alive: closed */
    free(got);
    rig_free(r);
}
END_TEST

START_TEST(bad_request_closes)
{
    Rig *r = rig_new();
    size_t len;
    int eof;
    char *got;

    say(r, "GET /healthz HTTP/1.1\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 57);
    got = hear(r, &len, &eof);
    ck_assert_msg(!strncmp(got, "HTTP/1.1 400 Bad Request\r\n", 26), "%s", got);
    ck_assert(strstr(got, "Connection: close\r\n"));
    ck_assert_str_eq(body_of(got), "bad request\n");
    ck_assert_int_eq(eof, 1);
    free(got);
    rig_free(r);
}
END_TEST

START_TEST(metrics_tubes_in_name_order)
{
    static const char *const names[] = {"zeta", "a;b", "B", "default2", "a"};
    Rig *r = rig_new();
    Engine *e = &r->s.eng;
    Buf b = {0};
    const char *p, *last = NULL;

    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        engine_tube_ref(engine_tube(e, names[i], strlen(names[i])));
    metrics_render(&r->s, &r->http.src, NULL, &b);
    ck_assert_int_eq(b.oom, 0);
    buf_append(&b, "", 1);
    /* byte order: "B" < "a" < "a;b" < "default" < "default2" < "zeta" */
    {
        static const char *const order[] = {"B", "a", "a;b", "default", "default2", "zeta"};
        for (size_t i = 0; i < 6; i++) {
            char want[64];
            snprintf(want, sizeof want, "tubed_tube_paused{tube=\"%s\"} 0\n", order[i]);
            p = strstr(b.data, want);
            ck_assert_msg(p, "no %s", want);
            ck_assert_msg(!last || p > last, "%s out of order", order[i]);
            last = p;
        }
    }
    ck_assert(strstr(b.data, "tubed_tubes 6\n"));
    ck_assert(strstr(b.data, "tubed_tube_jobs{tube=\"a;b\",state=\"buried\"} 0\n"));
    buf_free(&b);
    tubes_json(&r->s, &r->http.src, NULL, &b);
    ck_assert_int_eq(b.oom, 0);
    ck_assert(b.len > 2 && !memcmp(b.data, "{\"server\":{\"current-jobs-urgent\":0,", 35));
    ck_assert(!memcmp(b.data + b.len - 3, "}}\n", 3));
    buf_append(&b, "", 1);
    ck_assert(strstr(b.data, "\"tubes\":{\"B\":{\"name\":\"B\",\"current-jobs-urgent\":0,"));
    buf_free(&b);
    rig_free(r);
}
END_TEST

/* Every "key: value" line of YAML document y (after its "---\n", keys
 * indented by indent) is a member of JSON j with the same value: a YAML
 * quoted string is the same JSON string (both escape only '"' and '\'
 * here), a bare id a JSON string, numbers and booleans as they are. The
 * CPU times are left out: they may tick between the two renderings. */
static void expect_same_members(const Buf *y, const char *j, const char *indent)
{
    const char *p = y->data + 4, *end = y->data + y->len;
    size_t ind = strlen(indent), seen = 0;

    ck_assert(y->len > 4 && !memcmp(y->data, "---\n", 4));
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p)), *colon;
        char want[512];

        ck_assert_ptr_nonnull(nl);
        if ((size_t)(nl - p) < ind || memcmp(p, indent, ind) || p[ind] == ' ')
            break;
        colon = memchr(p, ':', (size_t)(nl - p));
        ck_assert_ptr_nonnull(colon);
        if ((size_t)(colon - p) - ind > 6 && !memcmp(p + ind, "rusage", 6)) {
            p = nl + 1;
            continue;
        }
        snprintf(want, sizeof want, "\"%.*s\":%s%.*s%s", (int)(colon - p - (ptrdiff_t)ind),
                 p + ind, colon[2] != '"' && !memcmp(p + ind, "id:", 3) ? "\"" : "",
                 (int)(nl - colon - 2), colon + 2,
                 colon[2] != '"' && !memcmp(p + ind, "id:", 3) ? "\"" : "");
        ck_assert_msg(strstr(j, want), "%s not in %s", want, j);
        seen++;
        p = nl + 1;
    }
    ck_assert_uint_gt(seen, 10);
}

START_TEST(json_renders_the_yaml_walk)
{
    Rig *r = rig_new();
    Engine *e = &r->s.eng;
    Tube *t = engine_tube(e, "a;b", 3);
    Buf y = {0}, j = {0};

    ck_assert_ptr_nonnull(t);
    engine_tube_ref(t);
    r->bs.cmd_ct[CMD_PUT] = 7;
    r->bs.cmd_ct[CMD_STATS_TUBES] = 3; /* a metric only, no `stats` key */
    r->bs.producer_ct = 2;
    r->s.draining = 1;
    stats_server(&r->bs, &y);
    tubes_json(&r->s, &r->http.src, NULL, &j);
    ck_assert_int_eq(y.oom | j.oom, 0);
    buf_append(&j, "", 1);
    expect_same_members(&y, j.data, "");
    ck_assert(strstr(j.data, "\"cmd-put\":7,"));
    ck_assert(strstr(j.data, "\"draining\":true,"));
    ck_assert(!strstr(j.data, "cmd-stats-tubes"));
    y.len = 0;
    stats_tubes(&r->s, NULL, &y);
    ck_assert_int_eq(y.oom, 0);
    /* the tube's block: its lines after "\"a;b\":\n" */
    {
        const char *at = strstr(y.data, "\"a;b\":\n");
        Buf one = {0};
        ck_assert_ptr_nonnull(at);
        buf_append(&one, "---\n", 4);
        buf_append(&one, at + 7, y.len - (size_t)(at + 7 - y.data));
        expect_same_members(&one, strstr(j.data, "\"a;b\":{"), "  ");
        buf_free(&one);
    }
    buf_free(&y);
    buf_free(&j);
    rig_free(r);
}
END_TEST

/* The deadline of a connection whose client read the last of a big reply
 * during the span: it has a whole span for its next request from then.
 * It was closed as idle at the deadline of the request it had just read
 * the answer to (a 10,000-tube scrape read in more than 10 s on a loaded
 * machine, then a second request on the same connection: "connection
 * closed"). Once a span passes with nothing left to read and nothing
 * asked, it is idle and closed, as before. */
static void pass_deadline(Rig *r)
{
    HttpConn *hc = container_of(r->conn, HttpConn, conn);

    /* as if the span had passed: what happened in it, a span earlier */
    hc->deadline -= HTTP_IDLE_NS;
    r->conn->written_at -= HTTP_IDLE_NS;
    ev_timer_set(&r->s.loop, &r->http.timer, 0);
    pump(r);
}

START_TEST(reply_read_during_the_span_is_not_idle)
{
    static const char req[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    static const char ping[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    Rig *r = rig_new();
    int small = 4096, eof = 0;
    size_t len, total = 0;
    char *got;

    ck_assert_int_eq(setsockopt(r->conn->ev.fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
    say(r, req, sizeof req - 1);
    ck_assert_msg(r->conn->out.len > r->conn->out_off, "the page fit in the socket: "
                  "nothing left to read later");
    /* the client reads it all; the server writes the rest as it does */
    do {
        got = hear(r, &len, &eof);
        free(got);
        total += len;
        pump(r);
    } while (len || r->conn->out.len > r->conn->out_off);
    ck_assert_uint_gt(total, status_page_len);
    ck_assert_int_eq(eof, 0);

    pass_deadline(r);
    got = hear(r, &len, &eof);
    free(got);
    ck_assert_msg(!eof, "closed as idle right after its reply was read");
    say(r, ping, sizeof ping - 1);
    got = hear(r, &len, &eof);
    ck_assert_msg(!strncmp(got, "HTTP/1.1 200 OK\r\n", 17), "%s", got);
    free(got);

    /* a span with nothing to read and nothing asked: idle, closed */
    pass_deadline(r);
    got = hear(r, &len, &eof);
    free(got);
    ck_assert_int_eq(eof, 1);
    rig_free(r);
}
END_TEST

START_TEST(render_out_of_memory)
{
    Rig *r = rig_new();
    unsigned long n;

    /* every allocation of a render failing in turn: b->oom, no leak */
    for (n = 1; n < 50; n++) {
        Buf b = {0};
        alloc_fail_after(n);
        metrics_render(&r->s, &r->http.src, NULL, &b);
        tubes_json(&r->s, &r->http.src, NULL, &b);
        alloc_fail_after(0);
        buf_free(&b);
    }
    rig_free(r);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("http");
    TCase *t = unit_tcase("core");

    signal(SIGPIPE, SIG_IGN);
    tcase_add_test(t, json_string_escapes);
    tcase_add_test(t, healthz_reasons);
    tcase_add_test(t, split_at_every_byte_and_pipelined);
    tcase_add_test(t, bad_request_closes);
    tcase_add_test(t, metrics_tubes_in_name_order);
    tcase_add_test(t, json_renders_the_yaml_walk);
    tcase_add_test(t, render_out_of_memory);
    tcase_add_test(t, reply_read_during_the_span_is_not_idle);
    suite_add_tcase(s, t);
    return s;
}

UNIT_MAIN(suite)
