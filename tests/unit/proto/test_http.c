/* Unit tests for the HTTP front-end (http.c, metrics.c, tubesjson.c): the
 * JSON string escaper and number check, the YAML-to-JSON conversion of the
 * stats documents, and whole requests through a real Server over a
 * socketpair (one loop iteration at a time, as server_run does): the
 * /healthz reasons (draining, an unhealthy binlog), tube order in
 * /metrics, a request split at every byte, pipelining, 400 and close. */
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
}
END_TEST

START_TEST(json_numbers)
{
    static const char *const yes[] = {"0", "7", "-1", "1234567890123456789", "0.5",
                                      "1.204000", "-0.0", "1e5", "1E+5", "2.5e-3"};
    static const char *const no[] = {"", "-", "01", "+1", "1.", ".5", "1e", "1e+", "0x10",
                                     "1 ", " 1", "NaN", "inf", "true", "0a1b", "1.2.3", "--1"};

    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        ck_assert_msg(json_is_number(yes[i], strlen(yes[i])), "%s is a number", yes[i]);
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        ck_assert_msg(!json_is_number(no[i], strlen(no[i])), "%s is no number", no[i]);
}
END_TEST

START_TEST(yaml_to_json_members)
{
    static const char doc[] = "current-jobs-ready: 4\n"
                              "rusage-utime: 1.204000\n"
                              "version: \"0.1.0\"\n"
                              "id: 0123456789\n"
                              "draining: false\n"
                              "binlog-healthy: true\n"
                              "os: \"#1 \\\"quoted\\\" \\\\ x\"\n"
                              "weird: 12abc\n"
                              "\"next\":\n";
    static const char tube[] = "  name: \"a;b\"\n"
                               "  pause: 0\n"
                               "\"c\":\n";
    Buf b = {0};
    size_t used = yaml_members_json(&b, doc, strlen(doc), 0);

    ck_assert_uint_eq(used, strlen(doc) - strlen("\"next\":\n"));
    expect_buf(&b, "\"current-jobs-ready\":4,\"rusage-utime\":1.204000,"
                   "\"version\":\"0.1.0\",\"id\":\"0123456789\",\"draining\":false,"
                   "\"binlog-healthy\":true,\"os\":\"#1 \\\"quoted\\\" \\\\ x\","
                   "\"weird\":\"12abc\"");
    used = yaml_members_json(&b, tube, strlen(tube), 2);
    ck_assert_uint_eq(used, strlen(tube) - 5);
    expect_buf(&b, "\"name\":\"a;b\",\"pause\":0");
    /* a line indented deeper or not at all ends the members */
    used = yaml_members_json(&b, "   x: 1\n", 8, 2);
    ck_assert_uint_eq(used, 0);
    ck_assert_uint_eq(b.len, 0);
    buf_free(&b);
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
    ck_assert_int_eq(http_init(&r->http, &r->s, &r->bs), 0);
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
    metrics_render(&r->bs, NULL, &b);
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
    tubes_json(&r->bs, NULL, &b);
    ck_assert_int_eq(b.oom, 0);
    ck_assert(b.len > 2 && !memcmp(b.data, "{\"server\":{\"current-jobs-urgent\":0,", 35));
    ck_assert(!memcmp(b.data + b.len - 3, "}}\n", 3));
    buf_append(&b, "", 1);
    ck_assert(strstr(b.data, "\"tubes\":{\"B\":{\"name\":\"B\",\"current-jobs-urgent\":0,"));
    buf_free(&b);
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
        metrics_render(&r->bs, NULL, &b);
        tubes_json(&r->bs, NULL, &b);
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
    tcase_add_test(t, json_numbers);
    tcase_add_test(t, yaml_to_json_members);
    tcase_add_test(t, healthz_reasons);
    tcase_add_test(t, split_at_every_byte_and_pipelined);
    tcase_add_test(t, bad_request_closes);
    tcase_add_test(t, metrics_tubes_in_name_order);
    tcase_add_test(t, render_out_of_memory);
    suite_add_tcase(s, t);
    return s;
}

UNIT_MAIN(suite)
