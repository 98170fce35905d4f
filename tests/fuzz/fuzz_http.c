/*
 * fuzz_http.c — http_parse() (src/proto/http/httpparse.h) on arbitrary
 * bytes arriving in arbitrary splits.
 *
 * Input: bytes 0-1 seed the split points, the rest is what the client sends.
 * Each call gets a fresh heap copy of exactly the bytes received so far, so
 * AddressSanitizer catches any read past them.
 *
 * Checks: NEED_MORE never at HTTP_MAX_HEAD bytes or more; TOO_LARGE only
 * then; the answer and every field are the same however the bytes were
 * split (one call with the same bytes agrees), and a decision is final
 * (the whole input gives it again); DONE: head_len <= bytes given and
 * <= HTTP_MAX_HEAD, ends with LF, every pointer lies inside the head, the
 * path starts with '/', lies inside the target and has no query, the
 * request is well formed in its own terms (version, keep-alive rules, Host
 * for 1.1); and the request written back in canonical form parses to the
 * same method, path, query, version, keep-alive and Content-Length.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "httpparse.h"

#define CHECK(cond, ...)                                          \
    do {                                                          \
        if (!(cond)) {                                            \
            fprintf(stderr, "\nFUZZ CHECK FAILED: " __VA_ARGS__); \
            fprintf(stderr, "\n");                                \
            abort();                                              \
        }                                                         \
    } while (0)

/* A request's fields as offsets, so parses of different copies compare. */
typedef struct Flat {
    int result, method, version_minor, keep_alive, has_cl;
    uint64_t cl;
    size_t head_len;
    long method_off, target_off, path_off, query_off, host_off;
    size_t method_len, target_len, path_len, query_len, host_len;
} Flat;

static long off(const char *p, const char *base)
{
    return p ? (long)(p - base) : -1;
}

static Flat flatten(HttpResult res, const HttpRequest *r, const char *base)
{
    Flat f;

    memset(&f, 0, sizeof f);
    f.result = res;
    if (res != HTTP_DONE)
        return f;
    f.method = r->method;
    f.version_minor = r->version_minor;
    f.keep_alive = r->keep_alive;
    f.has_cl = r->has_content_length;
    f.cl = r->content_length;
    f.head_len = r->head_len;
    f.method_off = off(r->method_str, base);
    f.target_off = off(r->target, base);
    f.path_off = off(r->path, base);
    f.query_off = off(r->query, base);
    f.host_off = off(r->host, base);
    f.method_len = r->method_len;
    f.target_len = r->target_len;
    f.path_len = r->path_len;
    f.query_len = r->query_len;
    f.host_len = r->host_len;
    return f;
}

static int flat_eq(const Flat *a, const Flat *b)
{
    return a->result == b->result && a->method == b->method &&
           a->version_minor == b->version_minor && a->keep_alive == b->keep_alive &&
           a->has_cl == b->has_cl && a->cl == b->cl && a->head_len == b->head_len &&
           a->method_off == b->method_off && a->target_off == b->target_off &&
           a->path_off == b->path_off && a->query_off == b->query_off &&
           a->host_off == b->host_off && a->method_len == b->method_len &&
           a->target_len == b->target_len && a->path_len == b->path_len &&
           a->query_len == b->query_len && a->host_len == b->host_len;
}

/* One call on a fresh heap copy of exactly n bytes. */
static Flat parse_copy(HttpParser *p, const uint8_t *data, size_t n, HttpRequest *out)
{
    char *copy = malloc(n ? n : 1);
    HttpRequest r;
    HttpResult res;
    Flat f;

    CHECK(copy, "malloc");
    memcpy(copy, data, n);
    memset(&r, 0x5a, sizeof r);
    res = http_parse(p, copy, n, &r);
    CHECK(res == HTTP_NEED_MORE || res == HTTP_DONE || res == HTTP_BAD ||
              res == HTTP_TOO_LARGE, "result %d", res);
    CHECK(res != HTTP_NEED_MORE || n < HTTP_MAX_HEAD, "NEED_MORE at %zu bytes", n);
    CHECK(res != HTTP_TOO_LARGE || n >= HTTP_MAX_HEAD, "TOO_LARGE at %zu bytes", n);
    if (res == HTTP_BAD || res == HTTP_TOO_LARGE)
        CHECK(r.error && r.error[0], "no reason for %d", res);
    f = flatten(res, &r, copy);
    if (out)
        *out = r;
    free(copy);
    return f;
}

static int inside(long o, size_t len, size_t lo, size_t hi)
{
    return o >= (long)lo && (size_t)o + len <= hi;
}

/* A DONE request is well formed in its own terms. */
static void check_done(const Flat *f, const uint8_t *d, size_t n)
{
    size_t h = f->head_len;

    CHECK(h >= 2 && h <= n && h <= HTTP_MAX_HEAD, "head_len %zu of %zu", h, n);
    CHECK(d[h - 1] == '\n', "head does not end with LF");
    CHECK(!memchr(d, 0, h), "NUL inside a DONE head");
    CHECK(f->method_len > 0 && inside(f->method_off, f->method_len, 0, h), "method");
    CHECK(inside(f->target_off, f->target_len, 0, h), "target outside the head");
    CHECK(inside(f->path_off, f->path_len, (size_t)f->target_off,
                 (size_t)f->target_off + f->target_len), "path outside the target");
    CHECK(f->path_len >= 1 && d[f->path_off] == '/', "path without '/'");
    CHECK(!memchr(d + f->path_off, '?', f->path_len), "query inside the path");
    CHECK(f->query_off < 0 || (inside(f->query_off, f->query_len, 0, h) &&
                               d[f->query_off - 1] == '?' &&
                               (size_t)f->query_off + f->query_len ==
                                   (size_t)f->target_off + f->target_len),
          "query");
    for (size_t i = 0; i < f->target_len; i++) {
        uint8_t c = d[f->target_off + (long)i];
        CHECK(c > 0x20 && c < 0x7f && c != '#', "byte 0x%02x in the target", c);
    }
    CHECK(f->host_off < 0 || inside(f->host_off, f->host_len, 0, h), "host");
    CHECK(f->version_minor >= 0 && f->version_minor <= 9, "version 1.%d", f->version_minor);
    CHECK(f->version_minor == 0 || f->host_off >= 0, "HTTP/1.1 without Host");
    CHECK(f->keep_alive == 0 || f->keep_alive == 1, "keep_alive %d", f->keep_alive);
    CHECK(!(f->cl > 0 && f->keep_alive), "keep-alive with a body");
    CHECK(f->has_cl || f->cl == 0, "content_length without the field");
    if (f->method == HTTP_GET)
        CHECK(f->method_len == 3 && !memcmp(d + f->method_off, "GET", 3), "GET");
    if (f->method == HTTP_HEAD)
        CHECK(f->method_len == 4 && !memcmp(d + f->method_off, "HEAD", 4), "HEAD");
}

static void put(char *out, size_t *n, const void *p, size_t len)
{
    memcpy(out + *n, p, len);
    *n += len;
}

/* Written back canonically, the request means the same. */
static void check_canonical(const Flat *f, const uint8_t *d)
{
    static char out[3 * HTTP_MAX_HEAD];
    char line[96];
    size_t n = 0;
    HttpParser p;
    Flat g;
    HttpRequest r;

    put(out, &n, d + f->method_off, f->method_len);
    put(out, &n, " ", 1);
    put(out, &n, d + f->path_off, f->path_len);
    if (f->query_off >= 0) {
        put(out, &n, "?", 1);
        put(out, &n, d + f->query_off, f->query_len);
    }
    snprintf(line, sizeof line, " HTTP/1.%d\r\n", f->version_minor);
    put(out, &n, line, strlen(line));
    if (f->host_off >= 0) {
        put(out, &n, "Host: ", 6);
        put(out, &n, d + f->host_off, f->host_len);
        put(out, &n, "\r\n", 2);
    }
    if (f->version_minor >= 1 && !f->keep_alive)
        put(out, &n, "Connection: close\r\n", 19);
    if (f->version_minor == 0 && f->keep_alive)
        put(out, &n, "Connection: keep-alive\r\n", 24);
    if (f->has_cl) {
        snprintf(line, sizeof line, "Content-Length: %llu\r\n", (unsigned long long)f->cl);
        put(out, &n, line, strlen(line));
    }
    put(out, &n, "\r\n", 2);
    if (n > HTTP_MAX_HEAD)
        return; /* the original's absolute-form or spacing could be longer */
    http_parser_init(&p);
    g = parse_copy(&p, (const uint8_t *)out, n, &r);
    CHECK(g.result == HTTP_DONE, "canonical form answers %d: %s", g.result,
          g.result == HTTP_DONE ? "" : r.error);
    CHECK(g.method == f->method && g.version_minor == f->version_minor &&
              g.keep_alive == f->keep_alive && g.has_cl == f->has_cl && g.cl == f->cl &&
              g.path_len == f->path_len && g.query_len == f->query_len &&
              (g.query_off < 0) == (f->query_off < 0) &&
              !memcmp(out + g.path_off, d + f->path_off, f->path_len),
          "canonical form parses differently");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint32_t seed;
    HttpParser inc, one;
    Flat a = {0}, b, c;
    size_t n = 0;

    if (size < 2)
        return 0;
    seed = (uint32_t)data[0] << 8 | data[1];
    data += 2;
    size -= 2;
    http_parser_init(&inc);
    a.result = HTTP_NEED_MORE;
    /* Grow the received prefix by pseudo-random steps, mostly small. */
    while (a.result == HTTP_NEED_MORE && n < size) {
        size_t step;
        seed = seed * 1103515245u + 12345u;
        step = (seed >> 16) % 8 == 0 ? size - n : 1 + (seed >> 16) % 64;
        n = n + step > size ? size : n + step;
        a = parse_copy(&inc, data, n, NULL);
    }
    http_parser_init(&one);
    b = parse_copy(&one, data, n, NULL);
    CHECK(flat_eq(&a, &b), "split parse %d, one call %d (at %zu bytes)", a.result, b.result,
          n);
    /* decisions are final: the whole input says the same */
    http_parser_init(&one);
    c = parse_copy(&one, data, size, NULL);
    if (a.result != HTTP_NEED_MORE)
        CHECK(flat_eq(&a, &c), "at %zu bytes %d, whole input %d", n, a.result, c.result);
    if (a.result == HTTP_DONE) {
        check_done(&a, data, n);
        check_canonical(&a, data);
    }
    return 0;
}
