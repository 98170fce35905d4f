/*
 * client.h — one blocking beanstalk-protocol connection, with a deadline on
 * every wait.
 *
 * Contract: client_open() connects to "HOST" + port (a name or an IPv4/IPv6
 * literal, every address tried in turn) or to "unix:/path" (port ignored).
 * No wait (connect, send, receive) lasts longer than timeout_ms without the
 * server making progress; a stalled or vanished server is ST_CONN, never a
 * hang. client_read() reads one reply: its line, and for "OK <n>",
 * "FOUND <id> <n>" and "RESERVED <id> <n>" the n bytes of data after it
 * (their CRLF checked and dropped). A reply that breaks the framing is
 * ST_SERVER. Requests may be pipelined: send several, then read each reply.
 * Writing to a closed connection is an error, never SIGPIPE.
 */
#ifndef TUBED_CLI_CLIENT_H
#define TUBED_CLI_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "cli.h"

typedef struct Client {
    int fd;
    Buf in;              /* received bytes not yet taken as replies */
    int timeout_ms;
    char where[300];     /* "127.0.0.1:11300", "[::1]:11300", "unix:/path" */
} Client;

typedef struct Reply {
    char *line;          /* the reply line without CRLF */
    char *body;          /* the data (NUL added after it), or NULL */
    size_t body_len;
} Reply;

Status client_open(Client *c, const char *host, const char *port,
                   int timeout_ms, Err *e);
void client_close(Client *c);

Status client_send(Client *c, const void *p, size_t n, Err *e);
Status client_read(Client *c, Reply *r, Err *e);
/* Send one command line (CRLF added) and read its reply. */
Status client_cmd(Client *c, Reply *r, Err *e, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void reply_free(Reply *r);

/* 1 if the reply line is `word` alone or `word` followed by a space. */
int reply_is(const Reply *r, const char *word);
/* "WORD <n>" exactly: 0 and *n, else -1. */
int reply_num(const Reply *r, const char *word, uint64_t *n);
/* A reply the caller did not expect, as an error: NOT_FOUND is
 * ST_NOT_FOUND, everything else ST_SERVER, with the server's words
 * explained. `what` names the request, e.g. "stats-tube foo". */
Status reply_unexpected(const Reply *r, const char *what, Err *e);

#endif
