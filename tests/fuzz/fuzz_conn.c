/*
 * fuzz_conn.c — the whole connection state machine under arbitrary byte
 * streams split at arbitrary positions.
 *
 * Each input builds a real Server (server_init() on 127.0.0.1 port 0,
 * optionally with a binlog in a tmpfs directory), opens 1..4 connections
 * as socketpairs (conn_new() on one end, the harness is the client on the
 * other), and plays a script taken from the input. After every step it
 * runs one iteration of the server loop exactly as server_run() does
 * (fz_loop_once() in fuzz_util.h: engine_commit, conn_flush_all, free
 * dead, ev_poll(0), engine_tick) with a virtual clock, reads the replies of the
 * clients that read, checks that they are well-formed protocol replies,
 * and recounts every server counter (fuzz_util.h). At the end the clock
 * jumps a day ahead, everything is drained, and server_free() must leave
 * nothing behind (LeakSanitizer).
 *
 * Input format (README.md has it too):
 *   byte 0    flags: bits 0-1 connections-1; bit 2 binlog (-b, -F);
 *             bit 3 allocation failure injection (bytes 1-2: which
 *             allocation fails, counted from the first script step);
 *             bit 4 small max job size (100); bit 5 -VV logging;
 *             bit 6 binlog with -f 0 instead of -F; bit 7 start draining
 *   bytes 1-2 failure index (big endian), present always
 *   then steps, each a header byte h:
 *     c = h & 3 (connection, modulo the count), op = h >> 2
 *     op < 48:   a length byte L follows, then L bytes written to c
 *                (fewer if the input ends)
 *     op 48..51: the clock advances by (next byte) * 10^(op-48) ms
 *     op 52:     client c shuts down its write side
 *     op 53:     client c closes its end
 *     op 54:     client c stops / starts reading replies (toggle)
 *     op 55:     drain mode toggles (SIGUSR1 / SIGUSR2)
 *     op 56..63: (op-55) extra loop iterations
 *
 * Connections 2 and 3 (with three or four) come through restricted
 * listeners (spec access.md), so refusals run under the same checks: 2 is
 * a producer,read listener on "a*, default", 3 a worker listener on "b*"
 * (default outside: it starts using and watching nothing).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "alloc.h"
#include "bsconn.h"
#include "engine.h"
#include "clock.h"
#include "conn.h"
#include "fuzz_util.h"
#include "log.h"
#include "opts.h"
#include "serve.h"

#define MAXC 4
#define RBUF (1 << 20)

typedef struct Client {
    int fd;            /* our end, -1 once closed */
    int reading;       /* read replies after each step */
    int eof;
    char *rb;          /* replies not yet checked */
    size_t rlen;
} Client;

static const char *const plain[] = {
    "DELETED", "RELEASED", "TOUCHED", "NOT_FOUND", "NOT_IGNORED", "PAUSED",
    "TIMED_OUT", "DEADLINE_SOON", "UNKNOWN_COMMAND", "BAD_FORMAT",
    "EXPECTED_CRLF", "JOB_TOO_BIG", "DRAINING", "OUT_OF_MEMORY",
    "INTERNAL_ERROR", "BURIED", "KICKED", "MOVED", "NOT_ALLOWED", "FOLLOWING",
    "NO_BINLOG",
};

static int all_digits(const char *p, size_t n)
{
    if (!n || n > 20)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (p[i] < '0' || p[i] > '9')
            return 0;
    return 1;
}

/* Length of the reply at p if it is complete, 0 if not yet; aborts on a
 * malformed reply. */
static size_t check_reply(const char *p, size_t n)
{
    const char *e = memmem(p, n, "\r\n", 2);
    size_t ll, body = 0;
    char w[32];
    const char *sp;

    if (!e) {
        FZ_CHECK(n < 300, "no CRLF in %zu reply bytes: %.60s", n, p);
        return 0;
    }
    ll = (size_t)(e - p);
    FZ_CHECK(!memchr(p, '\n', ll), "bare LF in a reply line");
    sp = memchr(p, ' ', ll);
    snprintf(w, sizeof w, "%.*s", (int)((sp ? (size_t)(sp - p) : ll) > 31 ? 31 : (sp ? (size_t)(sp - p) : ll)), p);
    if (!sp) {
        for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
            if (!strcmp(w, plain[i]))
                return ll + 2;
        fz_fail("unknown reply line '%.*s'", (int)(ll > 80 ? 80 : ll), p);
    }
    {
        const char *a = sp + 1, *end = p + ll, *sp2 = memchr(a, ' ', (size_t)(end - a));
        if (!strcmp(w, "INSERTED") || !strcmp(w, "BURIED") || !strcmp(w, "WATCHING") ||
            !strcmp(w, "KICKED") || !strcmp(w, "FLUSHED") || !strcmp(w, "PROMOTED")) {
            FZ_CHECK(all_digits(a, (size_t)(end - a)), "bad number in '%.*s'", (int)ll, p);
            return ll + 2;
        }
        if (!strcmp(w, "USING")) {
            FZ_CHECK(tube_name_valid(a, (size_t)(end - a)), "bad tube in '%.*s'", (int)ll, p);
            return ll + 2;
        }
        if (!strcmp(w, "OK")) {
            FZ_CHECK(all_digits(a, (size_t)(end - a)), "bad OK line '%.*s'", (int)ll, p);
            body = strtoull(a, NULL, 10);
        } else if (!strcmp(w, "RESERVED") || !strcmp(w, "FOUND")) {
            FZ_CHECK(sp2 && all_digits(a, (size_t)(sp2 - a)) &&
                     all_digits(sp2 + 1, (size_t)(end - sp2 - 1)),
                     "bad job reply '%.*s'", (int)ll, p);
            body = strtoull(sp2 + 1, NULL, 10);
        } else {
            fz_fail("unknown reply line '%.*s'", (int)(ll > 80 ? 80 : ll), p);
        }
    }
    if (n < ll + 2 + body + 2)
        return 0;
    FZ_CHECK(p[ll + 2 + body] == '\r' && p[ll + 2 + body + 1] == '\n',
             "reply body of %zu bytes not followed by CRLF", body);
    return ll + 2 + body + 2;
}

static void client_read(Client *c)
{
    if (c->fd < 0 || !c->reading || c->eof)
        return;
    for (;;) {
        ssize_t n;
        size_t used = 0, k;

        if (c->rlen == RBUF)
            fz_fail("reply buffer full");
        n = read(c->fd, c->rb + c->rlen, RBUF - c->rlen);
        if (n == 0) {
            c->eof = 1;
            return;
        }
        if (n < 0) {
            if (errno != EAGAIN && errno != EINTR)
                c->eof = 1;
            return;
        }
        c->rlen += (size_t)n;
        while ((k = check_reply(c->rb + used, c->rlen - used)) > 0)
            used += k;
        memmove(c->rb, c->rb + used, c->rlen - used);
        c->rlen -= used;
    }
}

static void step_done(Server *s, Client *cl, int nc)
{
    fz_loop_once(s);
    for (int i = 0; i < nc; i++)
        client_read(&cl[i]);
    fz_check_server(s);
}

static void client_write(Server *s, Client *cl, int nc, Client *c, const uint8_t *p, size_t n)
{
    int stuck = 0;

    while (n && c->fd >= 0 && stuck < 4) {
        ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
            stuck = 0;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return;  /* EPIPE: the server closed it */
        /* The pipe is full: let the server read, then try again. */
        step_done(s, cl, nc);
        stuck++;
    }
}

static const char access_conf[] =
    "[listen p]\naddress = 127.0.0.1:1\nrole = producer, read\ntubes = a*, default\n"
    "[listen w]\naddress = 127.0.0.1:2\nrole = worker\ntubes = b*\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ConfFile *acf = NULL;
    char aerr[256];
    static Server srv;
    static Beanstalk front;
    Server *s = &srv;
    Client cl[MAXC];
    Config cfg;
    uint8_t flags;
    unsigned fail_at;
    int nc;
    size_t pos = 3;

    if (size < 3)
        return 0;
    flags = data[0];
    fail_at = (unsigned)data[1] << 8 | data[2];
    nc = (flags & 3) + 1;

    opts_defaults(&cfg);
    cfg.listen_addr = "127.0.0.1";
    cfg.port = 0;
    if (flags & 0x10)
        cfg.max_job_size = 100;
    if (flags & 0x04) {
        fz_clear_dir(fz_tmpdir());
        cfg.binlog_dir = fz_tmpdir();
        cfg.binlog_size = 0;  /* raised to max_job_size + 4096: small files */
        if (flags & 0x40)
            cfg.fsync_ms = 0;
        else
            cfg.fsync_never = 1;
    }
    log_verbosity = (flags & 0x20) ? 2 : 0;
    fz_save_signals();
    if (server_init(s, &cfg) < 0)
        fz_fail("server_init failed");
    fz_restore_signals();
    s->loop.on_wake = fz_fake_wake;
    fz_vnow = s->eng.now;
    if (cfg.binlog_dir) {
        char err[256];
        if (engine_open_binlog(&s->eng, err, sizeof err) < 0)
            fz_fail("binlog_open: %s", err);
    }
    s->draining = (flags & 0x80) != 0;
    beanstalk_init(&front, s);
    if (conf_parse("access.conf", access_conf, sizeof access_conf - 1, &acf, aerr,
                   sizeof aerr) < 0)
        fz_fail("access config: %s", aerr);

    memset(cl, 0, sizeof cl);
    for (int i = 0; i < nc; i++) {
        int sv[2];
        Conn *cn;
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
            fz_fail("socketpair: %s", strerror(errno));
        if (i >= 2)
            cn = conn_new_on(s, sv[0], fz_fake_listener(s, &front.proto, &acf->listen[i - 2]));
        else
            cn = conn_new(s, sv[0], &front.proto);
        if (!cn)
            fz_fail("conn_new failed");
        cl[i].fd = sv[1];
        cl[i].reading = 1;
        cl[i].rb = malloc(RBUF);
    }
    if (flags & 0x08)
        fz_alloc_arm(fail_at + 1);

    while (pos < size) {
        uint8_t h = data[pos++];
        Client *c = &cl[(h & 3) % nc];
        unsigned op = h >> 2;

        if (op < 48) {
            size_t len = pos < size ? data[pos++] : 0;
            if (len > size - pos)
                len = size - pos;
            client_write(s, cl, nc, c, data + pos, len);
            pos += len;
        } else if (op < 52) {
            int64_t ms = pos < size ? data[pos++] : 1;
            for (unsigned k = 48; k < op; k++)
                ms *= 10;
            fz_vnow += ms * NS_PER_MSEC;
        } else if (op == 52) {
            if (c->fd >= 0)
                shutdown(c->fd, SHUT_WR);
        } else if (op == 53) {
            if (c->fd >= 0)
                close(c->fd);
            c->fd = -1;
        } else if (op == 54) {
            c->reading = !c->reading;
        } else if (op == 55) {
            s->draining = !s->draining;
        } else {
            for (unsigned k = 55; k < op; k++)
                step_done(s, cl, nc);
        }
        step_done(s, cl, nc);
    }

    /* Wind down: every client reads, every timer fires. */
    fz_alloc_disarm();
    fz_winding_down = 1;
    for (int i = 0; i < nc; i++)
        cl[i].reading = 1;
    for (int k = 0; k < 3; k++)
        step_done(s, cl, nc);
    fz_vnow += 86400 * NS_PER_SEC;
    for (int k = 0; k < 3; k++)
        step_done(s, cl, nc);

    server_free(s);
    conf_free(acf);
    fz_winding_down = 0;
    for (int i = 0; i < nc; i++) {
        if (cl[i].fd >= 0)
            close(cl[i].fd);
        free(cl[i].rb);
    }
    return 0;
}
