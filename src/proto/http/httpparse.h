/*
 * httpparse.h — an incremental HTTP/1.1 request-head parser for the metrics
 * port (GET /metrics, /healthz, /, /tubes.json).
 *
 * Contract: pure. No I/O, no allocation, no global state. The caller keeps
 * every byte received since the request began in one buffer and calls
 * http_parse() after each read with the whole of it; an HttpParser (a few
 * offsets, never pointers, so the buffer may move between calls) remembers
 * how far the bytes were already checked, so a head trickled in byte by
 * byte costs linear time. A zeroed HttpParser is a fresh one; results never
 * depend on how the bytes were split across calls. The answer is one of:
 *
 *   HTTP_NEED_MORE  no decision yet: read more and call again.
 *   HTTP_DONE       a complete, valid head; *req is filled; its pointers
 *                   point into the buffer passed to this call.
 *   HTTP_BAD        malformed: answer 400 and close (req->error says why).
 *   HTTP_TOO_LARGE  no end of head within HTTP_MAX_HEAD bytes: 400, close.
 *
 * Only the head is parsed; a body is never read. After DONE the caller
 * drops req->head_len bytes and starts a fresh HttpParser for the next
 * (pipelined) request. BAD, TOO_LARGE and DONE are final for that parser:
 * calling again with a longer buffer gives the same answer.
 *
 * Decisions (RFC 9112 leaves these to the recipient; each is tested):
 *  - Line ends: CRLF, or a bare LF (RFC 9112 §2.2 allows it; hand-typed
 *    requests and some health checkers send it). A CR not followed by LF
 *    is BAD. The head ends at the first empty line.
 *  - Empty lines before the request line are skipped (§2.2), counted in
 *    head_len and in the size limit.
 *  - Bytes: NUL, other control bytes except HTAB/CR/LF, and DEL are BAD
 *    wherever they appear, as soon as they arrive. Bytes >= 0x80 are
 *    allowed only in field values (obs-text).
 *  - Request line: METHOD SP TARGET SP HTTP/1.D with exactly one SP each.
 *    The method is a token, case-sensitive ("get" is not GET: method
 *    HTTP_OTHER, so the handler answers 405). The version must be
 *    HTTP/1.0 or HTTP/1.D with D >= 1 (treated as 1.1); anything else
 *    (HTTP/2.0, HTTP/0.9, lowercase "http/") is BAD.
 *  - Target: origin-form "/path[?query]" of visible ASCII; '#' is BAD.
 *    Absolute-form "http://host/path" (and https) is accepted and reduced
 *    to its path; one without a path, asterisk-form "*" and authority-form
 *    are BAD. No percent-decoding or dot-segment removal: the handler
 *    compares the raw path ("/metrics/" and "/%6detrics" are not
 *    "/metrics"). The query is the part after the first '?'.
 *  - Fields: NAME ":" OWS VALUE OWS. Whitespace before the colon is BAD
 *    (§5.1); an empty name is BAD; a line starting with SP/HTAB (obs-fold,
 *    or whitespace before the first field) is BAD (§5.2). At most
 *    HTTP_MAX_FIELDS fields, else BAD.
 *  - Host: HTTP/1.1 requires exactly one Host field (§3.2): none, or more
 *    than one, is BAD. HTTP/1.0 may omit it. Its value is not checked.
 *  - Connection: a comma list of tokens, case-insensitive, over every
 *    Connection field. HTTP/1.1 keeps the connection open unless "close"
 *    is listed; HTTP/1.0 closes unless "keep-alive" is listed and "close"
 *    is not.
 *  - Content-Length: 1*DIGIT that fits in 64 bits; several fields must
 *    agree; a comma list, a sign, spaces inside or overflow is BAD. The
 *    size is only reported: the body is never read, so a request that
 *    announces one (content_length > 0) gets keep_alive = 0 (the handler
 *    answers, 405 since only GET and HEAD are served, and closes).
 *  - Transfer-Encoding (chunked or any other) is BAD (400, not 411: we
 *    accept no body of any length, so asking for a length would mislead).
 */
#ifndef TUBED_HTTPPARSE_H
#define TUBED_HTTPPARSE_H

#include <stddef.h>
#include <stdint.h>

/* The head, from the first byte to the end of its empty line, must fit. */
#define HTTP_MAX_HEAD 8192
#define HTTP_MAX_FIELDS 100

typedef enum HttpResult {
    HTTP_NEED_MORE,
    HTTP_DONE,
    HTTP_BAD,
    HTTP_TOO_LARGE,
} HttpResult;

typedef enum HttpMethod {
    HTTP_GET,
    HTTP_HEAD,
    HTTP_OTHER, /* any other token: the handler answers 405 */
} HttpMethod;

typedef struct HttpRequest {
    HttpMethod method;
    const char *method_str; /* the token as sent */
    size_t method_len;
    const char *target; /* the whole target as sent (absolute-form too) */
    size_t target_len;
    const char *path; /* starts with '/', no query */
    size_t path_len;
    const char *query; /* after '?'; NULL when there is no '?' */
    size_t query_len;
    const char *host; /* NULL when absent (HTTP/1.0 only) */
    size_t host_len;
    int version_minor;  /* 0 for HTTP/1.0, >= 1 as sent otherwise */
    int keep_alive;     /* 1: the connection stays open after the reply */
    int has_content_length;
    uint64_t content_length; /* 0 when absent */
    size_t head_len;    /* bytes consumed: through the head's empty line */
    const char *error;  /* HTTP_BAD / HTTP_TOO_LARGE: a short static reason */
} HttpRequest;

/* How far the bytes were checked; zero it (or http_parser_init) per
 * request. Fields are private to httpparse.c. */
typedef struct HttpParser {
    size_t scanned; /* bytes before this offset hold no end of head */
    size_t line_start; /* start of the line the scan is in */
    int first_line_done; /* the request line was checked (early BAD) */
    int state;           /* 0 running, else the final HttpResult */
    const char *error;
} HttpParser;

void http_parser_init(HttpParser *p);

/* Parse the head in [buf, buf+len): see the contract above. req is written
 * only on HTTP_DONE (all fields) and on HTTP_BAD/HTTP_TOO_LARGE (error). */
HttpResult http_parse(HttpParser *p, const char *buf, size_t len, HttpRequest *req);

#endif
