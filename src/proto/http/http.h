/*
 * http.h — the HTTP/1.1 front-end of the metrics port: GET /metrics,
 * /healthz, / (the status page) and /tubes.json (doc/monitoring.md).
 *
 * Contract: http_init() fills an Http whose proto member main.c hands to
 * server_listen(s, &h->proto, "metrics", port); http_free() (after
 * server_free) stops its timer. Each connection parses request heads
 * with httpparse.h from the bytes the connection layer offers (a head may
 * arrive in any number of reads; pipelined requests are answered in
 * order), answers GET and HEAD, and never reads a body. Nothing here
 * changes a job: the only engine call that moves state is
 * engine_expire_all(), the same one `stats` makes before counting.
 *
 * Per connection, memory is bounded: an unfinished head is at most
 * HTTP_MAX_HEAD bytes (then 400 and close), replies wait in the
 * connection's output, and input is not read while that holds OUT_HIGH
 * bytes (conn.h's back-pressure). Over all connections too: once replies
 * of OUT_BUDGET bytes (conn.h, shared with the other protocols) wait
 * unread in the others' outputs, /metrics and /tubes.json answer 503 and
 * close instead of adding one more copy (a scrape of 10,000 tubes is
 * 9 MB: a few hundred clients that ask and never read would otherwise
 * hold gigabytes).
 *
 * Slow clients: a connection must send a complete head within
 * HTTP_IDLE_NS of connecting or of its previous request; bytes trickling in
 * do not extend that (slowloris). A connection whose replies are still
 * being written gets more time only while the client keeps reading them.
 * The front-end keeps its connections in a list ordered by deadline
 * (every deadline is "now + HTTP_IDLE_NS", so appending keeps the order)
 * and arms one of the event loop's timers (event.h) for the earliest.
 */
#ifndef TUBED_HTTP_H
#define TUBED_HTTP_H

#include <stdint.h>

#include "buf.h"
#include "conn.h"
#include "event.h"
#include "httpparse.h"
#include "list.h"
#include "server.h"
#include "srvstats.h"

#define HTTP_IDLE_NS (10 * 1000000000LL)

typedef struct Http {
    Proto proto;            /* first: conns reach this via their proto */
    Server *srv;
    StatsSource src;        /* a front-end's counters: beanstalk's commands */
    List by_deadline;       /* HttpConn.link, earliest deadline first */
    EvTimer timer;          /* for the earliest deadline */
    Buf body;               /* a reply body being rendered (reused) */
    uint64_t requests;      /* answered, every status */
} Http;

typedef struct HttpConn {
    Conn conn;
    HttpParser parser;      /* of the request now arriving */
    List link;              /* Http.by_deadline */
    int64_t deadline;       /* monotonic ns */
    size_t out_left;        /* reply bytes unwritten at the last deadline */
} HttpConn;

/* 0 (it cannot fail; an int for the callers' error paths). */
int http_init(Http *h, Server *s, StatsSource src);
void http_free(Http *h);

#endif
