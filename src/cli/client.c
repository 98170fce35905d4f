/* client.c — a blocking beanstalk connection with deadlines; see client.h. */
#include "client.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "numparse.h"

/* Reply lines of the protocol are short; a longer one is a broken server,
 * not something to buffer without end. */
#define MAX_LINE 1024
/* Larger than any body tubed sends (max job size 1 GiB, stats of every
 * tube); a length past it is a broken reply, not an allocation to try. */
#define MAX_BODY ((size_t)4 << 30)
#define READ_CHUNK 65536
/* How often a connect to a Unix socket whose backlog is full is retried. */
#define UNIX_RETRY_MS 20

/* Wait until fd is ready for `events`; ST_CONN after timeout_ms idle. */
static Status wait_fd(Client *c, short events, Err *e)
{
    struct pollfd p = {.fd = c->fd, .events = events};
    int r;

    do
        r = poll(&p, 1, c->timeout_ms);
    while (r < 0 && errno == EINTR);
    if (r < 0)
        return err_set(e, ST_CONN, "%s: poll: %s", c->where, strerror(errno));
    if (r == 0)
        return err_set(e, ST_CONN, "%s: no answer from the server within %d ms",
                       c->where, c->timeout_ms);
    return ST_OK;
}

static int open_unix(Client *c, const char *path, Err *e)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};

    snprintf(c->where, sizeof c->where, "unix:%s", path);
    if (strlen(path) >= sizeof sa.sun_path)
        return err_set(e, ST_USAGE, "unix socket path too long: %s", path);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        return err_set(e, ST_LOCAL, "socket: %s", strerror(errno));
    /* A local connect succeeds or fails at once, but for a full backlog (a
     * server that stopped accepting): a blocking connect would wait for
     * it forever, a non-blocking one says EAGAIN and cannot be polled for,
     * so it is tried again until the deadline. */
    for (int waited = 0;; waited += UNIX_RETRY_MS) {
        if (connect(c->fd, (struct sockaddr *)&sa, sizeof sa) == 0)
            return ST_OK;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN) {
            err_set(e, ST_CONN, "cannot connect to %s: %s", c->where, strerror(errno));
            break;
        }
        if (waited >= c->timeout_ms) {
            err_set(e, ST_CONN, "%s: the server accepts no connection (backlog full) "
                    "within %d ms", c->where, c->timeout_ms);
            break;
        }
        nanosleep(&(struct timespec){0, UNIX_RETRY_MS * 1000000L}, NULL);
    }
    close(c->fd);
    c->fd = -1;
    return ST_CONN;
}

/* One address: a non-blocking connect bounded by the timeout. */
static int try_addr(Client *c, const struct addrinfo *ai, Err *e)
{
    int soerr = 0, one = 1;
    socklen_t len = sizeof soerr;

    c->fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                   ai->ai_protocol);
    if (c->fd < 0)
        return err_set(e, ST_LOCAL, "socket: %s", strerror(errno));
    if (connect(c->fd, ai->ai_addr, ai->ai_addrlen) < 0) {
        if (errno != EINPROGRESS) {
            soerr = errno;
        } else if (wait_fd(c, POLLOUT, e) != ST_OK) {
            soerr = ETIMEDOUT;
        } else if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0) {
            soerr = errno;
        }
    }
    if (soerr) {
        err_set(e, ST_CONN, "cannot connect to %s: %s", c->where, strerror(soerr));
        close(c->fd);
        c->fd = -1;
        return ST_CONN;
    }
    /* Requests are single small writes waiting for an answer: no Nagle. */
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return ST_OK;
}

Status client_open(Client *c, const char *host, const char *port,
                   int timeout_ms, Err *e)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res, *ai;
    char bare[256];
    size_t hl;
    int rc;
    Status st = ST_CONN;

    memset(c, 0, sizeof *c);
    c->fd = -1;
    c->timeout_ms = timeout_ms;
    if (strncmp(host, "unix:", 5) == 0)
        return open_unix(c, host + 5, e);
    /* "[::1]" as well as "::1": the form `follow` and --replica-of take,
     * which scripts split from HOST:PORT. */
    hl = strlen(host);
    if (hl >= 2 && hl < sizeof bare && host[0] == '[' && host[hl - 1] == ']') {
        memcpy(bare, host + 1, hl - 2);
        bare[hl - 2] = '\0';
        host = bare;
    }
    snprintf(c->where, sizeof c->where, strchr(host, ':') ? "[%s]:%s" : "%s:%s",
             host, port);
    rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0)
        return err_set(e, ST_CONN, "cannot resolve %s: %s", c->where,
                       gai_strerror(rc));
    for (ai = res; ai; ai = ai->ai_next) {
        st = try_addr(c, ai, e);
        if (st == ST_OK)
            break;
    }
    freeaddrinfo(res);
    return st;
}

void client_close(Client *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    buf_free(&c->in);
}

Status client_send(Client *c, const void *p, size_t n, Err *e)
{
    const char *s = p;

    while (n > 0) {
        ssize_t w = send(c->fd, s, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            s += w;
            n -= (size_t)w;
        } else if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (wait_fd(c, POLLOUT, e) != ST_OK)
                return ST_CONN;
        } else if (w < 0 && errno != EINTR) {
            return err_set(e, ST_CONN, "%s: connection lost: %s", c->where,
                           strerror(errno));
        }
    }
    return ST_OK;
}

/* Read at least one more byte into c->in. */
static Status fill(Client *c, Err *e)
{
    ssize_t r;

    if (buf_reserve(&c->in, READ_CHUNK) < 0)
        return err_set(e, ST_LOCAL, "out of memory");
    for (;;) {
        r = recv(c->fd, c->in.data + c->in.len, c->in.cap - c->in.len,
                 MSG_DONTWAIT);
        if (r > 0) {
            c->in.len += (size_t)r;
            return ST_OK;
        }
        if (r == 0)
            return err_set(e, ST_CONN, "%s: the server closed the connection",
                           c->where);
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            if (wait_fd(c, POLLIN, e) != ST_OK)
                return ST_CONN;
        } else if (errno != EINTR) {
            return err_set(e, ST_CONN, "%s: connection lost: %s", c->where,
                           strerror(errno));
        }
    }
}

/* Take "bytes\r\n" off the front of c->in as a NUL-terminated copy. */
static Status take_line(Client *c, char **out, Err *e)
{
    char *crlf;

    for (;;) {
        crlf = c->in.len ? memmem(c->in.data, c->in.len, "\r\n", 2) : NULL;
        if (crlf)
            break;
        if (c->in.len > MAX_LINE)
            return err_set(e, ST_SERVER, "%s: reply line longer than %d bytes",
                           c->where, MAX_LINE);
        if (fill(c, e) != ST_OK)
            return e->code;
    }
    size_t n = (size_t)(crlf - c->in.data);
    for (size_t i = 0; i < n; i++)
        if (c->in.data[i] < 0x20 || c->in.data[i] > 0x7e)
            return err_set(e, ST_SERVER, "%s: reply line with a control or "
                           "non-ASCII byte", c->where);
    *out = tb_malloc(n + 1);
    if (!*out)
        return err_set(e, ST_LOCAL, "out of memory");
    memcpy(*out, c->in.data, n);
    (*out)[n] = '\0';
    buf_consume(&c->in, n + 2);
    return ST_OK;
}

/* The data length a reply line announces, or 0 with *has = 0 for none. */
static int body_len(const char *line, size_t *n, int *has)
{
    const char *sp = strrchr(line, ' ');
    uint64_t v;
    int words = 1;

    *has = 0;
    for (const char *p = line; *p; p++)
        words += *p == ' ';
    if (!(strncmp(line, "OK ", 3) == 0 && words == 2) &&
        !((strncmp(line, "FOUND ", 6) == 0 || strncmp(line, "RESERVED ", 9) == 0) &&
          words == 3))
        return 0;
    if (parse_u64_str(sp + 1, &v) < 0 || v > MAX_BODY)
        return -1;
    *n = (size_t)v;
    *has = 1;
    return 0;
}

static Status take_body(Client *c, Reply *r, size_t n, Err *e)
{
    while (c->in.len < n + 2)
        if (fill(c, e) != ST_OK)
            return e->code;
    if (memcmp(c->in.data + n, "\r\n", 2) != 0)
        return err_set(e, ST_SERVER, "%s: data of '%s' not followed by CRLF",
                       c->where, r->line);
    r->body = tb_malloc(n + 1);
    if (!r->body)
        return err_set(e, ST_LOCAL, "out of memory for %zu bytes of reply", n);
    memcpy(r->body, c->in.data, n);
    r->body[n] = '\0';
    r->body_len = n;
    buf_consume(&c->in, n + 2);
    return ST_OK;
}

Status client_read(Client *c, Reply *r, Err *e)
{
    size_t n;
    int has;

    memset(r, 0, sizeof *r);
    if (take_line(c, &r->line, e) != ST_OK)
        return e->code;
    if (body_len(r->line, &n, &has) < 0) {
        err_set(e, ST_SERVER, "%s: bad data length in reply '%s'", c->where,
                r->line);
        reply_free(r);
        return ST_SERVER;
    }
    if (has && take_body(c, r, n, e) != ST_OK) {
        reply_free(r);
        return e->code;
    }
    return ST_OK;
}

Status client_cmd(Client *c, Reply *r, Err *e, const char *fmt, ...)
{
    char line[MAX_LINE];
    va_list ap;
    int n;

    memset(r, 0, sizeof *r);
    va_start(ap, fmt);
    n = vsnprintf(line, sizeof line - 2, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof line - 2)
        return err_set(e, ST_USAGE, "command too long");
    memcpy(line + n, "\r\n", 2);
    if (client_send(c, line, (size_t)n + 2, e) != ST_OK)
        return e->code;
    return client_read(c, r, e);
}

void reply_free(Reply *r)
{
    tb_free(r->line);
    tb_free(r->body);
    memset(r, 0, sizeof *r);
}

int reply_is(const Reply *r, const char *word)
{
    size_t n = strlen(word);

    return r->line && strncmp(r->line, word, n) == 0 &&
           (r->line[n] == '\0' || r->line[n] == ' ');
}

int reply_num(const Reply *r, const char *word, uint64_t *n)
{
    size_t w = strlen(word);

    if (!reply_is(r, word) || r->line[w] != ' ')
        return -1;
    return parse_u64_str(r->line + w + 1, n);
}

/* What each error reply of the protocol means to the person reading it. */
static const char *explain(const char *line)
{
    static const struct { const char *word, *text; } known[] = {
        {"OUT_OF_MEMORY", "the server is out of memory, or the tube is full; "
                          "try again later"},
        {"INTERNAL_ERROR", "the server reports an internal error"},
        {"BAD_FORMAT", "the server did not understand the request"},
        {"UNKNOWN_COMMAND", "the server does not know this command"},
        /* A draining server refuses put; a replica every change. */
        {"DRAINING", "the server takes no changes now: it is draining, or a "
                     "replica (change its primary)"},
        {"JOB_TOO_BIG", "the body is larger than the server's max-job-size"},
        {"EXPECTED_CRLF", "the server expected CRLF after the body"},
        {"NOT_ALLOWED", "refused: this listener's role or tubes do not allow it"},
    };

    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(line, known[i].word) == 0)
            return known[i].text;
    /* The wrong port at 3 a.m.: tubed's metrics or memcache listener. */
    if (strncmp(line, "HTTP/", 5) == 0)
        return "an HTTP server answered, not beanstalk: is this the metrics port?";
    if (strncmp(line, "STAT ", 5) == 0 || strncmp(line, "CLIENT_ERROR", 12) == 0 ||
        strncmp(line, "SERVER_ERROR", 12) == 0 || strcmp(line, "ERROR") == 0)
        return "a memcache server answered, not beanstalk: is this the memcache "
               "port?";
    return "unexpected reply";
}

Status reply_unexpected(const Reply *r, const char *what, Err *e)
{
    if (reply_is(r, "NOT_FOUND"))
        return err_set(e, ST_NOT_FOUND, "%s: not found", what);
    return err_set(e, ST_SERVER, "%s: %s (%s)", what, explain(r->line), r->line);
}
