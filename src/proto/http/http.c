#include "http.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "engine.h"
#include "log.h"
#include "repl.h"
#include "metrics.h"
#include "promtext.h"
#include "status_page.h"
#include "tubesjson.h"

/* A rendered body buffer larger than this is given back after its reply. */
#define BODY_KEEP (256 * 1024)

#define TEXT_PLAIN "text/plain; charset=utf-8"

static HttpConn *hconn(Conn *c) { return (HttpConn *)c; }
static Http *front(const Conn *c) { return container_of(c->proto, Http, proto); }

static size_t out_pending(const Conn *c)
{
    return c->out.len - c->out_off;
}

/* ---- deadlines ---------------------------------------------------------- */

/* Arm the timer for the earliest deadline, unless it is already set to
 * fire no later (an early firing only re-arms it). */
static void timer_arm(Http *h)
{
    List *n = list_first(&h->by_deadline);
    int64_t at;

    if (!n)
        return;
    at = container_of(n, HttpConn, link)->deadline;
    if (h->timer.at > at)
        ev_timer_set(&h->srv->loop, &h->timer, at);
}

/* The next request head is due HTTP_IDLE_NS from now. Every deadline is
 * now + the same span and now never goes back, so the tail is its place. */
static void set_deadline(Http *h, HttpConn *hc)
{
    hc->deadline = engine_now(&h->srv->eng) + HTTP_IDLE_NS;
    hc->out_left = out_pending(&hc->conn);
    list_remove(&hc->link);
    list_insert_tail(&h->by_deadline, &hc->link);
    timer_arm(h);
}

static void reply_timeout(Conn *c);

/* A deadline passed: a client still reading its replies gets more time
 * (as long as it makes progress), and one that read the last of them
 * after the iteration that made them has a span from now for its next
 * request (its idle time counts from its replies, not from its request);
 * one in the middle of a head hears 408 and has one more span to read
 * it; the rest are closed. */
static void deadline_passed(Http *h, HttpConn *hc)
{
    Conn *c = &hc->conn;
    size_t left = out_pending(c);

    if (left && left < hc->out_left) {
        set_deadline(h, hc); /* it reads: a big reply on a slow link */
    } else if (c->state == CONN_CLOSING) {
        conn_close(c); /* its last reply is not being read */
    } else if (!left && c->written_at > hc->deadline - HTTP_IDLE_NS) {
        set_deadline(h, hc); /* it read them all during the span */
    } else if (c->in.len && !left) {
        log_msg(LOG_CONN, "fd %d: request head not complete in time; closing", c->ev.fd);
        reply_timeout(c);
        set_deadline(h, hc); /* closed for good if even that is not read */
    } else {
        log_msg(LOG_CONN, "fd %d: idle HTTP connection; closing", c->ev.fd);
        conn_close(c);
    }
}

static void on_timer(EvTimer *t)
{
    Http *h = container_of(t, Http, timer);
    int64_t now = engine_now(&h->srv->eng);
    List *n;

    while ((n = list_first(&h->by_deadline))) {
        HttpConn *hc = container_of(n, HttpConn, link);
        if (hc->deadline > now)
            break;
        deadline_passed(h, hc);
    }
    timer_arm(h);
}

/* ---- replies ------------------------------------------------------------ */

static const char *reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    }
    return "Unknown";
}

/* RFC 9110 §6.6.1: an origin server with a clock sends Date. */
static void http_date(char *out, size_t n)
{
    time_t t = (time_t)(clock_wall() / NS_PER_SEC);
    struct tm tm;

    if (!gmtime_r(&t, &tm) || !strftime(out, n, "%a, %d %b %Y %H:%M:%S GMT", &tm))
        snprintf(out, n, "Thu, 01 Jan 1970 00:00:00 GMT");
}

enum { R_KEEP, R_CLOSE };

/* One reply: the head, then the body unless the request was HEAD. how:
 * R_KEEP keeps the connection as the request asked, R_CLOSE closes it
 * after the reply. A 405 says which methods are served. */
static void respond(Conn *c, const HttpRequest *req, int status, const char *ctype,
                    const char *body, size_t blen, int how)
{
    char head[512], date[64];
    int closing = how != R_KEEP || !req || !req->keep_alive, n;
    const char *conn_hdr = closing ? "Connection: close\r\n"
                           : req->version_minor == 0 ? "Connection: keep-alive\r\n"
                                                     : "";

    http_date(date, sizeof date);
    n = snprintf(head, sizeof head,
                 "HTTP/1.1 %d %s\r\n"
                 "Content-Type: %s\r\n"
                 "Content-Length: %zu\r\n"
                 "Cache-Control: no-store\r\n"
                 "Date: %s\r\n"
                 "%s%s\r\n",
                 status, reason(status), ctype, blen, date,
                 status == 405 ? "Allow: GET, HEAD\r\n" : "",
                 conn_hdr);
    conn_reply(c, head, (size_t)n);
    if (blen && !(req && req->method == HTTP_HEAD))
        conn_reply(c, body, blen);
    front(c)->requests++;
    if (closing)
        conn_finish(c);
}

static void respond_text(Conn *c, const HttpRequest *req, int status, const char *text,
                         int how)
{
    respond(c, req, status, TEXT_PLAIN, text, strlen(text), how);
}

static void reply_timeout(Conn *c)
{
    respond_text(c, NULL, 408, "request timeout\n", R_CLOSE);
}

/* ---- the paths ---------------------------------------------------------- */

typedef void (*Render)(Server *s, const StatsSource *src, const Listener *l, Buf *b);

/* A rendered body: expire due jobs (an expired job is never counted),
 * render, answer. Rendering is the only work: nothing waits. Not while
 * the other clients leave OUT_BUDGET bytes unread (http.h, conn.h): the
 * check comes first, so a refusal costs no rendering (a scrape is always
 * larger than OUT_SMALL). */
static void respond_rendered(Conn *c, const HttpRequest *req, Render render,
                             const char *ctype)
{
    Http *h = front(c);

    if (conn_out_refuse(c, SIZE_MAX)) {
        respond_text(c, req, 503, "busy: replies to other clients are still unread\n",
                     R_CLOSE);
        return;
    }
    engine_expire_all(&h->srv->eng);
    h->body.len = 0;
    h->body.oom = 0;
    render(h->srv, &h->src, c->lis, &h->body);
    if (h->body.oom)
        respond_text(c, req, 500, "out of memory\n", R_CLOSE);
    else
        respond(c, req, 200, ctype, h->body.data, h->body.len, R_KEEP);
    if (h->body.cap > BODY_KEEP || h->body.oom)
        buf_free(&h->body);
}

static void healthz(Conn *c, const HttpRequest *req)
{
    Http *h = front(c);
    EngineStats es;
    char text[256];
    int n = 0;

    engine_stats(&h->srv->eng, &es);
    if (h->srv->draining)
        n += snprintf(text + n, sizeof text - (size_t)n, "draining\n");
    if (!es.binlog.healthy)
        n += snprintf(text + n, sizeof text - (size_t)n, "binlog unhealthy: %s\n",
                      es.binlog.last_error[0] ? es.binlog.last_error : "unknown error");
    if (h->srv->repl) {
        ReplInfo i;
        repl_info(h->srv, &i);
        if (i.waiting_long && (size_t)n < sizeof text)
            n += snprintf(text + n, sizeof text - (size_t)n, "waiting for replicas\n");
    }
    if (n)
        respond_text(c, req, 503, text, R_KEEP);
    else
        respond_text(c, req, 200, "ok\n", R_KEEP);
}

/* GET /primary: 200 only for a primary that takes writes (spec
 * replication.md §2). A draining one (SIGUSR1) answers DRAINING to every
 * put, one whose binlog failed OUT_OF_MEMORY until it recovers: a load
 * balancer must not send writers there. */
static void primary_check(Conn *c, const HttpRequest *req, int role)
{
    Server *s = front(c)->srv;
    EngineStats es;

    if (role != ROLE_PRIMARY) {
        respond_text(c, req, 503, "replica\n", R_KEEP);
        return;
    }
    engine_stats(&s->eng, &es);
    if (s->draining)
        respond_text(c, req, 503, "primary, draining\n", R_KEEP);
    else if (!es.binlog.healthy)
        respond_text(c, req, 503, "primary, binlog unhealthy\n", R_KEEP);
    else
        respond_text(c, req, 200, "primary\n", R_KEEP);
}

/* GET /primary and /replica: the health checks of load balancers
 * (spec/replication.md §2). */
static void role_check(Conn *c, const HttpRequest *req, int want)
{
    Http *h = front(c);
    ReplInfo i;
    char text[300];

    if (!h->srv->repl) {
        if (want == ROLE_PRIMARY)
            primary_check(c, req, ROLE_PRIMARY);
        else
            respond_text(c, req, 503, "primary, not a replica\n", R_KEEP);
        return;
    }
    repl_info(h->srv, &i);
    if (want == ROLE_PRIMARY) {
        primary_check(c, req, i.role);
        return;
    }
    if (i.role == ROLE_PRIMARY) {
        respond_text(c, req, 503, "primary, not a replica\n", R_KEEP);
    } else if (i.caught_up) {
        respond_text(c, req, 200, "replica\n", R_KEEP);
    } else {
        if (!i.connected)
            snprintf(text, sizeof text, "replica, not connected to its primary%s%s\n",
                     i.last_error[0] ? ": " : "", i.last_error);
        else
            snprintf(text, sizeof text, "replica, catching up: %llu records behind\n",
                     (unsigned long long)i.lag);
        respond_text(c, req, 503, text, R_KEEP);
    }
}

static int path_is(const HttpRequest *req, const char *path)
{
    size_t n = strlen(path);

    return req->path_len == n && !memcmp(req->path, path, n);
}

static void handle(Conn *c, const HttpRequest *req)
{
    log_msg(LOG_CMD, "fd %d: HTTP %.*s %.*s", c->ev.fd, (int)req->method_len,
            req->method_str, (int)req->target_len, req->target);
    if (req->method == HTTP_OTHER)
        respond_text(c, req, 405, "method not allowed\n", R_KEEP);
    else if (path_is(req, "/metrics"))
        respond_rendered(c, req, metrics_render, PROM_CONTENT_TYPE);
    else if (path_is(req, "/healthz"))
        healthz(c, req);
    else if (path_is(req, "/"))
        respond(c, req, 200, "text/html; charset=utf-8", status_page_html, status_page_len,
                R_KEEP);
    else if (path_is(req, "/tubes.json"))
        respond_rendered(c, req, tubes_json, "application/json");
    else if (path_is(req, "/primary"))
        role_check(c, req, ROLE_PRIMARY);
    else if (path_is(req, "/replica"))
        role_check(c, req, ROLE_REPLICA);
    else
        respond_text(c, req, 404, "not found\n", R_KEEP);
}

/* ---- the connection ----------------------------------------------------- */

static int http_open(Conn *c)
{
    HttpConn *hc = hconn(c);

    http_parser_init(&hc->parser);
    list_init(&hc->link);
    set_deadline(front(c), hc);
    return 0;
}

static void http_close(Conn *c)
{
    list_remove(&hconn(c)->link);
}

/* Never paused: nothing to end. */
static void http_hangup(Conn *c)
{
}

/* Answer every complete request head in [p, p+len), in order. */
static size_t http_consume(Conn *c, const char *p, size_t len)
{
    HttpConn *hc = hconn(c);
    size_t pos = 0;

    while (pos < len && conn_takes_input(c)) {
        HttpRequest req;
        HttpResult r = http_parse(&hc->parser, p + pos, len - pos, &req);

        if (r == HTTP_NEED_MORE)
            return pos;
        if (r != HTTP_DONE) {
            log_msg(LOG_CONN, "fd %d: bad HTTP request: %s; closing", c->ev.fd,
                    req.error ? req.error : "?");
            respond_text(c, NULL, 400, "bad request\n", R_CLOSE);
            set_deadline(front(c), hc);
            return len;
        }
        http_parser_init(&hc->parser);
        handle(c, &req);
        set_deadline(front(c), hc);
        if (c->state == CONN_CLOSING)
            return len; /* what follows is never read */
        pos += req.head_len;
    }
    return pos;
}

int http_init(Http *h, Server *s, StatsSource src)
{
    memset(h, 0, sizeof *h);
    h->srv = s;
    h->src = src;
    list_init(&h->by_deadline);
    h->proto = (Proto){
        .name = "metrics",
        .size = sizeof(HttpConn),
        .open = http_open,
        .consume = http_consume,
        .hangup = http_hangup,
        .close = http_close,
        .refusal = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
                   "Content-Length: 21\r\nConnection: close\r\n\r\n"
                   "too many connections\n",
    };
    ev_timer_init(&h->timer, on_timer);
    return 0;
}

void http_free(Http *h)
{
    ev_timer_stop(&h->timer);
    buf_free(&h->body);
}
