/* Unit tests for httpparse.c: every decision documented in httpparse.h,
 * each request fed both whole and one byte at a time (the answers and the
 * fields must not depend on the split). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "httpparse.h"
#include "unit.h"

#define S(lit) lit, sizeof(lit) - 1

/* Field by field (the struct's padding is not compared). */
static int same(const HttpRequest *a, const HttpRequest *b)
{
    return a->method == b->method && a->method_str == b->method_str &&
           a->method_len == b->method_len && a->target == b->target &&
           a->target_len == b->target_len && a->path == b->path &&
           a->path_len == b->path_len && a->query == b->query &&
           a->query_len == b->query_len && a->host == b->host &&
           a->host_len == b->host_len && a->version_minor == b->version_minor &&
           a->keep_alive == b->keep_alive &&
           a->has_content_length == b->has_content_length &&
           a->content_length == b->content_length && a->head_len == b->head_len;
}

/* Feed one byte more at a time until a decision; check the one-shot parse
 * of the whole input agrees (result and every field). */
static HttpResult parse(const char *in, size_t n, HttpRequest *req)
{
    HttpParser inc, whole;
    HttpRequest r1, r2;
    HttpResult a = HTTP_NEED_MORE, b;
    size_t l;

    http_parser_init(&inc);
    for (l = 1; l <= n && a == HTTP_NEED_MORE; l++)
        a = http_parse(&inc, in, l, &r1);
    http_parser_init(&whole);
    b = http_parse(&whole, in, n, &r2);
    ck_assert_msg(a == b, "'%s': byte by byte %d, whole %d", unit_show(in, n), a, b);
    if (a == HTTP_DONE) {
        ck_assert_msg(same(&r1, &r2), "'%s': fields differ", unit_show(in, n));
        ck_assert(r1.head_len <= n && r1.head_len <= HTTP_MAX_HEAD);
    } else if (a != HTTP_NEED_MORE) {
        ck_assert_str_eq(r1.error, r2.error);
    }
    /* a decision is final: the same parser says it again */
    if (a != HTTP_NEED_MORE)
        ck_assert_int_eq(http_parse(&inc, in, n, &r1), a);
    *req = r2;
    return b;
}

static HttpRequest done(const char *in, size_t n)
{
    HttpRequest r;
    HttpResult res = parse(in, n, &r);

    ck_assert_msg(res == HTTP_DONE, "'%s': result %d (%s), want DONE", unit_show(in, n), res,
                  res == HTTP_BAD || res == HTTP_TOO_LARGE ? r.error : "-");
    return r;
}

static void bad(const char *in, size_t n)
{
    HttpRequest r;
    HttpResult res = parse(in, n, &r);

    ck_assert_msg(res == HTTP_BAD, "'%s': result %d, want BAD", unit_show(in, n), res);
    ck_assert(r.error != NULL);
}

static void need_more(const char *in, size_t n)
{
    HttpRequest r;
    HttpResult res = parse(in, n, &r);

    ck_assert_msg(res == HTTP_NEED_MORE, "'%s': result %d, want NEED_MORE", unit_show(in, n),
                  res);
}

static void eq(const char *p, size_t n, const char *want)
{
    ck_assert_msg(p && n == strlen(want) && !memcmp(p, want, n), "'%s', want '%s'",
                  p ? unit_show(p, n) : "(null)", want);
}

START_TEST(simple_get)
{
    static const char in[] = "GET /metrics HTTP/1.1\r\nHost: localhost:9100\r\n"
                             "User-Agent: Prometheus/2.45\r\nAccept: */*\r\n\r\n";
    HttpRequest r = done(S(in));

    ck_assert_int_eq(r.method, HTTP_GET);
    eq(r.method_str, r.method_len, "GET");
    eq(r.path, r.path_len, "/metrics");
    eq(r.target, r.target_len, "/metrics");
    ck_assert_ptr_null(r.query);
    eq(r.host, r.host_len, "localhost:9100");
    ck_assert_int_eq(r.version_minor, 1);
    ck_assert_int_eq(r.keep_alive, 1);
    ck_assert_int_eq(r.has_content_length, 0);
    ck_assert_uint_eq(r.head_len, sizeof in - 1);
    /* pointers into the input */
    ck_assert(r.path >= in && r.path + r.path_len <= in + sizeof in);
}
END_TEST

START_TEST(methods)
{
    ck_assert_int_eq(done(S("HEAD / HTTP/1.1\r\nHost: a\r\n\r\n")).method, HTTP_HEAD);
    ck_assert_int_eq(done(S("POST / HTTP/1.1\r\nHost: a\r\n\r\n")).method, HTTP_OTHER);
    /* methods are case-sensitive: "get" is some other method (405) */
    ck_assert_int_eq(done(S("get / HTTP/1.1\r\nHost: a\r\n\r\n")).method, HTTP_OTHER);
    ck_assert_int_eq(done(S("GETS / HTTP/1.1\r\nHost: a\r\n\r\n")).method, HTTP_OTHER);
    ck_assert_int_eq(done(S("M-SEARCH / HTTP/1.1\r\nHost: a\r\n\r\n")).method, HTTP_OTHER);
    bad(S("G(T / HTTP/1.1\r\nHost: a\r\n\r\n"));
    bad(S(" / HTTP/1.1\r\nHost: a\r\n\r\n"));
    bad(S("G\xc3\xa9T / HTTP/1.1\r\nHost: a\r\n\r\n"));
}
END_TEST

START_TEST(query)
{
    HttpRequest r = done(S("GET /metrics?name[]=a&x HTTP/1.1\r\nHost: a\r\n\r\n"));

    eq(r.path, r.path_len, "/metrics");
    eq(r.query, r.query_len, "name[]=a&x");
    eq(r.target, r.target_len, "/metrics?name[]=a&x");
    r = done(S("GET /? HTTP/1.1\r\nHost: a\r\n\r\n"));
    eq(r.path, r.path_len, "/");
    ck_assert_ptr_nonnull(r.query);
    ck_assert_uint_eq(r.query_len, 0);
    r = done(S("GET /a?b?c HTTP/1.1\r\nHost: a\r\n\r\n"));
    eq(r.query, r.query_len, "b?c");
    /* no decoding: the raw path */
    r = done(S("GET /%6detrics/ HTTP/1.1\r\nHost: a\r\n\r\n"));
    eq(r.path, r.path_len, "/%6detrics/");
}
END_TEST

START_TEST(targets)
{
    HttpRequest r = done(S("GET http://example.com:9100/metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n"));

    eq(r.path, r.path_len, "/metrics");
    eq(r.query, r.query_len, "x=1");
    eq(r.target, r.target_len, "http://example.com:9100/metrics?x=1");
    r = done(S("GET HTTPS://h/ HTTP/1.1\r\nHost: a\r\n\r\n"));
    eq(r.path, r.path_len, "/");
    bad(S("GET http://example.com HTTP/1.1\r\nHost: a\r\n\r\n"));
    bad(S("GET http://example.com?x HTTP/1.1\r\nHost: a\r\n\r\n"));
    bad(S("GET http:///x HTTP/1.1\r\nHost: a\r\n\r\n"));
    bad(S("GET ftp://h/x HTTP/1.1\r\nHost: a\r\n\r\n"));
    bad(S("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n"));
    bad(S("CONNECT example.com:443 HTTP/1.1\r\nHost: a\r\n\r\n"));
    bad(S("GET metrics HTTP/1.1\r\nHost: a\r\n\r\n"));
    bad(S("GET /a#frag HTTP/1.1\r\nHost: a\r\n\r\n"));
    bad(S("GET /caf\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n"));
    bad(S("GET /a\tb HTTP/1.1\r\nHost: a\r\n\r\n"));
}
END_TEST

START_TEST(request_line_shape)
{
    bad(S("GET  / HTTP/1.1\r\nHost: a\r\n\r\n"));
    bad(S("GET /  HTTP/1.1\r\nHost: a\r\n\r\n"));
    bad(S("GET / HTTP/1.1 \r\nHost: a\r\n\r\n"));
    bad(S("GET /\r\nHost: a\r\n\r\n"));
    bad(S("GET\r\n\r\n"));
    bad(S("GET / HTTP/1.1 x\r\nHost: a\r\n\r\n"));
    bad(S("\tGET / HTTP/1.1\r\nHost: a\r\n\r\n"));
}
END_TEST

START_TEST(versions)
{
    HttpRequest r = done(S("GET / HTTP/1.0\r\n\r\n"));

    ck_assert_int_eq(r.version_minor, 0);
    ck_assert_ptr_null(r.host);
    ck_assert_int_eq(r.keep_alive, 0);
    r = done(S("GET / HTTP/1.9\r\nHost: a\r\n\r\n"));
    ck_assert_int_eq(r.version_minor, 9);
    ck_assert_int_eq(r.keep_alive, 1);
    bad(S("GET / HTTP/2.0\r\nHost: a\r\n\r\n"));
    bad(S("GET / HTTP/0.9\r\nHost: a\r\n\r\n"));
    bad(S("GET / http/1.1\r\nHost: a\r\n\r\n"));
    bad(S("GET / HTTP/1.10\r\nHost: a\r\n\r\n"));
    bad(S("GET / HTTP/1\r\nHost: a\r\n\r\n"));
    bad(S("GET / HTTP/1.x\r\nHost: a\r\n\r\n"));
    bad(S("GET / HTTP/11\r\nHost: a\r\n\r\n"));
}
END_TEST

START_TEST(keep_alive)
{
    ck_assert_int_eq(done(S("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")).keep_alive, 0);
    ck_assert_int_eq(done(S("GET / HTTP/1.1\r\nHost: a\r\nconnection: Upgrade, CLOSE\r\n\r\n")).keep_alive, 0);
    ck_assert_int_eq(done(S("GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\n\r\n")).keep_alive, 1);
    ck_assert_int_eq(done(S("GET / HTTP/1.1\r\nHost: a\r\nConnection: closed\r\n\r\n")).keep_alive, 1);
    ck_assert_int_eq(done(S("GET / HTTP/1.1\r\nHost: a\r\nConnection: foo\r\nConnection: close\r\n\r\n")).keep_alive, 0);
    ck_assert_int_eq(done(S("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")).keep_alive, 1);
    ck_assert_int_eq(done(S("GET / HTTP/1.0\r\nConnection: ,, keep-alive ,\r\n\r\n")).keep_alive, 1);
    ck_assert_int_eq(done(S("GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n")).keep_alive, 0);
    ck_assert_int_eq(done(S("GET / HTTP/1.0\r\nConnection: close\r\n\r\n")).keep_alive, 0);
}
END_TEST

START_TEST(host)
{
    HttpRequest r = done(S("GET / HTTP/1.1\r\nhOsT:   tubed.example:9100 \t\r\n\r\n"));

    eq(r.host, r.host_len, "tubed.example:9100");
    r = done(S("GET / HTTP/1.1\r\nHost:\r\n\r\n")); /* empty is allowed */
    ck_assert_ptr_nonnull(r.host);
    ck_assert_uint_eq(r.host_len, 0);
    bad(S("GET / HTTP/1.1\r\n\r\n"));
    bad(S("GET / HTTP/1.1\r\nX-Host: a\r\n\r\n"));
    bad(S("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n"));
    bad(S("GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n"));
}
END_TEST

START_TEST(content_length)
{
    HttpRequest r = done(S("POST /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello"));

    ck_assert_int_eq(r.method, HTTP_OTHER);
    ck_assert_int_eq(r.has_content_length, 1);
    ck_assert_uint_eq(r.content_length, 5);
    ck_assert_int_eq(r.keep_alive, 0); /* the body is never read */
    ck_assert_uint_eq(r.head_len, sizeof "POST /metrics HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\n" - 1);
    r = done(S("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n"));
    ck_assert_int_eq(r.has_content_length, 1);
    ck_assert_int_eq(r.keep_alive, 1);
    r = done(S("GET / HTTP/1.1\r\nHost: a\r\ncontent-length: 007\r\nContent-Length: 7\r\n\r\n"));
    ck_assert_uint_eq(r.content_length, 7);
    r = done(S("PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 18446744073709551615\r\n\r\n"));
    ck_assert_uint_eq(r.content_length, UINT64_MAX);
    bad(S("PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 18446744073709551616\r\n\r\n"));
    bad(S("PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999\r\n\r\n"));
    bad(S("PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n"));
    bad(S("PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: +1\r\n\r\n"));
    bad(S("PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 1 2\r\n\r\n"));
    bad(S("PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n"));
    bad(S("PUT / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n"));
    bad(S("PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x10\r\n\r\n"));
    bad(S("PUT / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"));
}
END_TEST

START_TEST(transfer_encoding)
{
    bad(S("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"));
    bad(S("GET / HTTP/1.1\r\nHost: a\r\ntransfer-encoding: gzip, chunked\r\n\r\n"));
    bad(S("GET / HTTP/1.0\r\nTransfer-Encoding: identity\r\n\r\n"));
    bad(S("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"));
}
END_TEST

START_TEST(fields)
{
    HttpRequest r = done(S("GET / HTTP/1.1\r\nHost: a\r\nX-Name: caf\xc3\xa9 \x80\xff\r\n"
                           "Empty:\r\nTabs:\tx\ty\t\r\n\r\n"));

    ck_assert_int_eq(r.keep_alive, 1);
    bad(S("GET / HTTP/1.1\r\nHost : a\r\n\r\n"));
    bad(S("GET / HTTP/1.1\r\nHost\t: a\r\n\r\n"));
    bad(S("GET / HTTP/1.1\r\nHost: a\r\n: x\r\n\r\n"));
    bad(S("GET / HTTP/1.1\r\nHost: a\r\nno colon\r\n\r\n"));
    bad(S("GET / HTTP/1.1\r\nHost: a\r\nX(y): z\r\n\r\n"));
    bad(S("GET / HTTP/1.1\r\nHost: a\r\nN\xc3\xa9: z\r\n\r\n"));
    /* obs-fold */
    bad(S("GET / HTTP/1.1\r\nHost: a\r\nX-Long: one\r\n two\r\n\r\n"));
    bad(S("GET / HTTP/1.1\r\nHost: a\r\nX-Long: one\r\n\ttwo\r\n\r\n"));
    /* whitespace between the request line and the first field */
    bad(S("GET / HTTP/1.1\r\n Host: a\r\n\r\n"));
}
END_TEST

START_TEST(field_count)
{
    char in[HTTP_MAX_HEAD];
    size_t n = (size_t)snprintf(in, sizeof in, "GET / HTTP/1.1\r\nHost: a\r\n");

    for (int i = 1; i < HTTP_MAX_FIELDS; i++)
        n += (size_t)snprintf(in + n, sizeof in - n, "X-%d: %d\r\n", i, i);
    memcpy(in + n, "\r\n", 2);
    done(in, n + 2);
    n += (size_t)snprintf(in + n, sizeof in - n, "X-Last: 1\r\n\r\n");
    bad(in, n);
    /* a flood of tiny fields is refused at the count, not the size */
    n = (size_t)snprintf(in, sizeof in, "GET / HTTP/1.1\r\nHost: a\r\n");
    while (n + 6 < sizeof in)
        n += (size_t)snprintf(in + n, sizeof in - n, "a:\r\n");
    memcpy(in + n, "\r\n", 2);
    bad(in, n + 2);
}
END_TEST

START_TEST(line_ends)
{
    HttpRequest r = done(S("GET /x HTTP/1.1\nHost: a\n\n"));

    eq(r.path, r.path_len, "/x");
    eq(r.host, r.host_len, "a");
    ck_assert_uint_eq(r.head_len, sizeof "GET /x HTTP/1.1\nHost: a\n\n" - 1);
    done(S("GET / HTTP/1.1\r\nHost: a\n\r\n"));
    done(S("GET / HTTP/1.1\nHost: a\r\n\n"));
    /* a bare CR is refused wherever it is */
    bad(S("GET / HTTP/1.1\rHost: a\r\n\r\n"));
    bad(S("GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n"));
    bad(S("GET / HTTP/1.1\r\nHost: a\r\n\r\r\n"));
    bad(S("GET / HTTP/1.1\r\r\n"));
    /* a CR at the end is undecided until its next byte */
    need_more(S("GET / HTTP/1.1\r"));
    need_more(S("GET / HTTP/1.1\r\nHost: a\r\n\r"));
}
END_TEST

START_TEST(leading_empty_lines)
{
    HttpRequest r = done(S("\r\n\n\r\nGET /metrics HTTP/1.1\r\nHost: a\r\n\r\n"));

    eq(r.path, r.path_len, "/metrics");
    ck_assert_uint_eq(r.head_len, sizeof "\r\n\n\r\nGET /metrics HTTP/1.1\r\nHost: a\r\n\r\n" - 1);
    need_more(S("\r\n\r\n\r\n"));
}
END_TEST

START_TEST(control_bytes)
{
    /* refused as soon as they arrive, before the head ends */
    bad(S("GET /\0"));
    bad(S("GET / HTTP/1.1\r\nHost: a\0"));
    bad(S("GET / HTTP/1.1\r\nX: \x01"));
    bad(S("GET / HTTP/1.1\r\nX: a\x7f"));
    bad(S("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")); /* a TLS ClientHello */
    bad(S("GET / HTTP/1.1\r\nX: \x1b[31m\r\nHost: a\r\n\r\n"));
}
END_TEST

START_TEST(early_bad_request_line)
{
    /* junk is refused at the end of its first line, not at 8 KiB */
    bad(S("SSH-2.0-OpenSSH_9.2\r\n"));
    bad(S("stats\r\n"));
    bad(S("put 0 0 60 5\r\n"));
    need_more(S("GET / HTTP/1.1\r\nHost: a\r\n"));
    need_more(S("GET /metrics HTT"));
    need_more(S(""));
}
END_TEST

START_TEST(size_limit)
{
    static char in[HTTP_MAX_HEAD + 64];
    const char *pre = "GET /", *post = " HTTP/1.1\r\nHost: a\r\n\r\n";
    size_t np = strlen(pre), nq = strlen(post), path = HTTP_MAX_HEAD - np - nq;
    HttpRequest r;

    memcpy(in, pre, np);
    memset(in + np, 'a', path);
    memcpy(in + np + path, post, nq);
    /* exactly HTTP_MAX_HEAD bytes: fits */
    r = done(in, HTTP_MAX_HEAD);
    ck_assert_uint_eq(r.head_len, HTTP_MAX_HEAD);
    ck_assert_uint_eq(r.path_len, path + 1);
    /* one byte more: too large, however much more arrives */
    memset(in + np, 'a', path + 1);
    memcpy(in + np + path + 1, post, nq);
    ck_assert_int_eq(parse(in, HTTP_MAX_HEAD + 1, &r), HTTP_TOO_LARGE);
    ck_assert_int_eq(parse(in, HTTP_MAX_HEAD, &r), HTTP_TOO_LARGE);
    ck_assert_int_eq(parse(in, HTTP_MAX_HEAD - 1, &r), HTTP_NEED_MORE);
    /* the CR at the last byte can only end past the limit */
    memset(in, 'a', sizeof in);
    memcpy(in, "GET / HTTP/1.1\r\nX: ", 19);
    in[HTTP_MAX_HEAD - 1] = '\r';
    in[HTTP_MAX_HEAD] = '\n';
    ck_assert_int_eq(parse(in, HTTP_MAX_HEAD, &r), HTTP_TOO_LARGE);
    ck_assert_int_eq(parse(in, HTTP_MAX_HEAD - 1, &r), HTTP_NEED_MORE);
}
END_TEST

START_TEST(pipelined)
{
    static const char in[] = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
                             "HEAD /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
                             "GET /c";
    HttpParser p;
    HttpRequest r;
    size_t off = 0;

    http_parser_init(&p);
    ck_assert_int_eq(http_parse(&p, in, sizeof in - 1, &r), HTTP_DONE);
    eq(r.path, r.path_len, "/a");
    off += r.head_len;
    http_parser_init(&p);
    ck_assert_int_eq(http_parse(&p, in + off, sizeof in - 1 - off, &r), HTTP_DONE);
    eq(r.path, r.path_len, "/b");
    ck_assert_int_eq(r.method, HTTP_HEAD);
    ck_assert_int_eq(r.keep_alive, 0);
    off += r.head_len;
    http_parser_init(&p);
    ck_assert_int_eq(http_parse(&p, in + off, sizeof in - 1 - off, &r), HTTP_NEED_MORE);
}
END_TEST

START_TEST(buffer_moves)
{
    /* the parser keeps offsets, so the caller may realloc between reads */
    static const char in[] = "GET /metrics?x HTTP/1.1\r\nHost: a\r\n\r\n";
    char *one = malloc(sizeof in), *two = malloc(sizeof in);
    HttpParser p;
    HttpRequest r;

    memcpy(one, in, sizeof in);
    memcpy(two, in, sizeof in);
    http_parser_init(&p);
    ck_assert_int_eq(http_parse(&p, one, 20, &r), HTTP_NEED_MORE);
    memset(one, 'X', sizeof in);
    ck_assert_int_eq(http_parse(&p, two, sizeof in - 1, &r), HTTP_DONE);
    ck_assert(r.path == two + 4);
    eq(r.query, r.query_len, "x");
    free(one);
    free(two);
}
END_TEST

START_TEST(final_answers_stick)
{
    HttpParser p;
    HttpRequest r;
    static const char in[] = "GET / HTTP/1.1\r\nHost a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n";

    http_parser_init(&p);
    ck_assert_int_eq(http_parse(&p, in, sizeof in - 1, &r), HTTP_BAD);
    ck_assert_int_eq(http_parse(&p, in, sizeof in - 1, &r), HTTP_BAD);
    ck_assert_ptr_nonnull(r.error);
}
END_TEST

/* Random requests from pieces, fed in random splits: the answer for each
 * split agrees with the whole (parse() checks that). */
START_TEST(random_pieces)
{
    static const char *const pieces[] = {
        "GET ", "HEAD ", "POST ", "/metrics", "/", "?a=b", " HTTP/1.1", " HTTP/1.0",
        "\r\n", "\n", "\r", "Host: a", "Connection: close", "Connection: keep-alive",
        "Content-Length: 3", "Transfer-Encoding: chunked", " ", "\t", ":", "X", "\0",
        "\x80", "http://h", "#",
    };
    Rng rng;
    char in[256];

    rng_seed(&rng, 42);
    for (int i = 0; i < 20000; i++) {
        size_t n = 0;
        HttpRequest r;
        int k = 1 + (int)rng_below(&rng, 12);
        while (k-- > 0) {
            const char *s = pieces[rng_below(&rng, sizeof pieces / sizeof pieces[0])];
            size_t l = s[0] ? strlen(s) : 1;
            if (n + l > sizeof in)
                break;
            memcpy(in + n, s, l);
            n += l;
        }
        parse(in, n, &r);
    }
}
END_TEST

static Suite *httpparse_suite(void)
{
    Suite *s = suite_create("httpparse");
    TCase *tc = unit_tcase("core");

    tcase_add_test(tc, simple_get);
    tcase_add_test(tc, methods);
    tcase_add_test(tc, query);
    tcase_add_test(tc, targets);
    tcase_add_test(tc, request_line_shape);
    tcase_add_test(tc, versions);
    tcase_add_test(tc, keep_alive);
    tcase_add_test(tc, host);
    tcase_add_test(tc, content_length);
    tcase_add_test(tc, transfer_encoding);
    tcase_add_test(tc, fields);
    tcase_add_test(tc, field_count);
    tcase_add_test(tc, line_ends);
    tcase_add_test(tc, leading_empty_lines);
    tcase_add_test(tc, control_bytes);
    tcase_add_test(tc, early_bad_request_line);
    tcase_add_test(tc, size_limit);
    tcase_add_test(tc, pipelined);
    tcase_add_test(tc, buffer_moves);
    tcase_add_test(tc, final_answers_stick);
    tcase_add_test(tc, random_pieces);
    suite_add_tcase(s, tc);
    return s;
}

UNIT_MAIN(httpparse_suite)
