#include "httpparse.h"

#include <string.h>

#include "numparse.h"

/* RFC 9110 §5.6.2 token characters. */
static int is_tchar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return 1;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* Bytes refused anywhere in a head, checked as they arrive. */
static int is_forbidden(unsigned char c)
{
    return (c < 0x20 && c != '\t' && c != '\r' && c != '\n') || c == 0x7f;
}

static int is_ows(char c)
{
    return c == ' ' || c == '\t';
}

static int lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

/* Case-insensitive compare of [s, s+n) with a lowercase literal. */
static int ieq(const char *s, size_t n, const char *lit)
{
    size_t k = strlen(lit);

    if (n != k)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (lower((unsigned char)s[i]) != lit[i])
            return 0;
    return 1;
}

void http_parser_init(HttpParser *p)
{
    memset(p, 0, sizeof *p);
}

/* ---- request line -------------------------------------------------- */

static const char *parse_method(const char *s, size_t n, HttpRequest *r)
{
    if (n == 0)
        return "empty method";
    for (size_t i = 0; i < n; i++)
        if (!is_tchar((unsigned char)s[i]))
            return "bad method";
    r->method_str = s;
    r->method_len = n;
    if (n == 3 && !memcmp(s, "GET", 3))
        r->method = HTTP_GET;
    else if (n == 4 && !memcmp(s, "HEAD", 4))
        r->method = HTTP_HEAD;
    else
        r->method = HTTP_OTHER;
    return NULL;
}

/* Length of an "http://" or "https://" prefix, case-insensitive; 0 if none. */
static size_t scheme_len(const char *s, size_t n)
{
    if (n >= 7 && ieq(s, 7, "http://"))
        return 7;
    if (n >= 8 && ieq(s, 8, "https://"))
        return 8;
    return 0;
}

static const char *parse_target(const char *s, size_t n, HttpRequest *r)
{
    size_t start = 0, q;

    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f || s[i] == '#')
            return "bad target";
    if (n == 0)
        return "empty target";
    if (s[0] != '/') {
        /* absolute-form: skip scheme and a non-empty authority */
        size_t k = scheme_len(s, n);
        if (k == 0)
            return "target is not a path";
        start = k;
        while (start < n && s[start] != '/' && s[start] != '?')
            start++;
        if (start == k || start == n || s[start] != '/')
            return "absolute target without host or path";
    }
    r->target = s;
    r->target_len = n;
    for (q = start; q < n && s[q] != '?'; q++)
        ;
    r->path = s + start;
    r->path_len = q - start;
    r->query = q < n ? s + q + 1 : NULL;
    r->query_len = q < n ? n - q - 1 : 0;
    return NULL;
}

static const char *parse_version(const char *s, size_t n, HttpRequest *r)
{
    if (n != 8 || memcmp(s, "HTTP/", 5) || s[6] != '.' || s[5] < '0' || s[5] > '9' ||
        s[7] < '0' || s[7] > '9')
        return "bad version";
    if (s[5] != '1')
        return "unsupported version";
    r->version_minor = s[7] - '0';
    return NULL;
}

/* METHOD SP TARGET SP VERSION, exactly one SP each (the line has no CR/LF). */
static const char *parse_request_line(const char *s, size_t n, HttpRequest *r)
{
    const char *sp1 = memchr(s, ' ', n), *sp2, *err;

    if (!sp1)
        return "bad request line";
    sp2 = memchr(sp1 + 1, ' ', n - (size_t)(sp1 + 1 - s));
    if (!sp2)
        return "bad request line";
    if ((err = parse_method(s, (size_t)(sp1 - s), r)))
        return err;
    if ((err = parse_target(sp1 + 1, (size_t)(sp2 - sp1 - 1), r)))
        return err;
    return parse_version(sp2 + 1, n - (size_t)(sp2 + 1 - s), r);
}

/* ---- fields ---------------------------------------------------------- */

typedef struct Fields {
    unsigned count, hosts;
    int conn_close, conn_keep_alive;
} Fields;

/* Every comma-separated token of a Connection value. */
static void connection_tokens(const char *v, size_t n, Fields *f)
{
    size_t i = 0;

    while (i < n) {
        size_t a, b;
        while (i < n && (is_ows(v[i]) || v[i] == ','))
            i++;
        a = i;
        while (i < n && v[i] != ',')
            i++;
        b = i;
        while (b > a && is_ows(v[b - 1]))
            b--;
        if (ieq(v + a, b - a, "close"))
            f->conn_close = 1;
        else if (ieq(v + a, b - a, "keep-alive"))
            f->conn_keep_alive = 1;
    }
}

static const char *content_length(const char *v, size_t n, HttpRequest *r)
{
    uint64_t cl;

    if (parse_u64(v, n, &cl) < 0)
        return "bad content-length";
    if (r->has_content_length && r->content_length != cl)
        return "conflicting content-length";
    r->has_content_length = 1;
    r->content_length = cl;
    return NULL;
}

/* One field line (no CR/LF, not empty). */
static const char *parse_field(const char *s, size_t n, HttpRequest *r, Fields *f)
{
    const char *colon = memchr(s, ':', n), *v;
    size_t nl, vl;

    if (is_ows(s[0]))
        return "obs-fold or leading whitespace";
    if (++f->count > HTTP_MAX_FIELDS)
        return "too many header fields";
    if (!colon || colon == s)
        return "bad header field";
    nl = (size_t)(colon - s);
    for (size_t i = 0; i < nl; i++)
        if (!is_tchar((unsigned char)s[i]))
            return "bad header field name";
    v = colon + 1;
    vl = n - nl - 1;
    while (vl && is_ows(v[0]))
        v++, vl--;
    while (vl && is_ows(v[vl - 1]))
        vl--;
    if (ieq(s, nl, "host")) {
        f->hosts++;
        r->host = v;
        r->host_len = vl;
    } else if (ieq(s, nl, "connection")) {
        connection_tokens(v, vl, f);
    } else if (ieq(s, nl, "content-length")) {
        return content_length(v, vl, r);
    } else if (ieq(s, nl, "transfer-encoding")) {
        return "transfer-encoding not supported";
    }
    return NULL;
}

/* ---- the whole head -------------------------------------------------- */

/* The line at *pos (up to LF, CR stripped); advances *pos past the LF.
 * Only called within a complete head, so an LF lies before end. */
static size_t next_line(const char *buf, size_t end, size_t *pos, const char **line)
{
    const char *s = buf + *pos, *lf = memchr(s, '\n', end - *pos);
    size_t n = (size_t)(lf - s);

    *pos += n + 1;
    if (n && s[n - 1] == '\r')
        n--;
    *line = s;
    return n;
}

static const char *finish(const Fields *f, HttpRequest *r)
{
    if (f->hosts > 1)
        return "more than one host";
    if (r->version_minor >= 1 && f->hosts == 0)
        return "missing host";
    if (r->version_minor >= 1)
        r->keep_alive = !f->conn_close;
    else
        r->keep_alive = f->conn_keep_alive && !f->conn_close;
    if (r->content_length > 0)
        r->keep_alive = 0; /* the body is never read: close after the reply */
    return NULL;
}

/* Parse the complete head [buf, buf+head_len). */
static const char *parse_head(const char *buf, size_t head_len, HttpRequest *r)
{
    Fields f = {0};
    size_t pos = 0, n;
    const char *line, *err;

    memset(r, 0, sizeof *r);
    while ((n = next_line(buf, head_len, &pos, &line)) == 0)
        ; /* empty lines before the request line */
    if ((err = parse_request_line(line, n, r)))
        return err;
    while ((n = next_line(buf, head_len, &pos, &line)) != 0)
        if ((err = parse_field(line, n, r, &f)))
            return err;
    r->head_len = pos;
    return finish(&f, r);
}

static HttpResult fail(HttpParser *p, HttpResult res, const char *why, HttpRequest *req)
{
    p->state = res;
    p->error = why;
    req->error = why;
    return res;
}

/* A line [line_start, end) just ended at an LF: 1 if it ends the head. */
static int line_ended(HttpParser *p, const char *buf, size_t end, HttpRequest *req)
{
    size_t n = end - p->line_start;
    HttpRequest tmp;

    if (n && buf[end - 1] == '\r')
        n--;
    if (n == 0)
        return p->first_line_done; /* leading empty lines are skipped */
    if (!p->first_line_done) {
        /* judge the request line at once, so junk is refused early */
        const char *err = parse_request_line(buf + p->line_start, n, &tmp);
        if (err) {
            fail(p, HTTP_BAD, err, req);
            return 0;
        }
        p->first_line_done = 1;
    }
    return 0;
}

/* Scan new bytes for the end of the head; 0 while undecided. */
static HttpResult scan_head(HttpParser *p, const char *buf, size_t len, HttpRequest *req,
                            size_t *head_len)
{
    size_t lim = len < HTTP_MAX_HEAD ? len : HTTP_MAX_HEAD, i;

    for (i = p->scanned; i < lim; i++) {
        unsigned char c = (unsigned char)buf[i];
        if (is_forbidden(c))
            return fail(p, HTTP_BAD, "control byte in head", req);
        if (c == '\r') {
            if (i + 1 >= HTTP_MAX_HEAD)
                break; /* its LF could only come past the limit */
            if (i + 1 >= len)
                break; /* undecided until the next byte arrives */
            if (buf[i + 1] != '\n')
                return fail(p, HTTP_BAD, "bare CR", req);
        } else if (c == '\n') {
            if (line_ended(p, buf, i, req)) {
                *head_len = i + 1;
                return HTTP_DONE;
            }
            if (p->state)
                return (HttpResult)p->state;
            p->line_start = i + 1;
        }
    }
    p->scanned = i;
    if (len >= HTTP_MAX_HEAD && i + 1 >= HTTP_MAX_HEAD)
        return fail(p, HTTP_TOO_LARGE, "head larger than 8 KiB", req);
    return HTTP_NEED_MORE;
}

HttpResult http_parse(HttpParser *p, const char *buf, size_t len, HttpRequest *req)
{
    size_t head_len = 0;
    HttpResult res;
    const char *err;

    if (p->state == HTTP_BAD || p->state == HTTP_TOO_LARGE) {
        req->error = p->error;
        return (HttpResult)p->state;
    }
    if (p->state == HTTP_DONE)
        head_len = p->scanned;
    else if ((res = scan_head(p, buf, len, req, &head_len)) != HTTP_DONE)
        return res;
    p->state = HTTP_DONE;
    p->scanned = head_len;
    err = parse_head(buf, head_len, req);
    if (err)
        return fail(p, HTTP_BAD, err, req);
    return HTTP_DONE;
}
