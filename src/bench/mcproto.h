/*
 * mcproto.h - the client side of the memcache text protocol as tubed-bench
 * speaks it (kestrel's dialect on tubed, plain memcached): request encoding,
 * reply framing and reply checks.  Pure functions over bytes, no sockets.
 *
 * Contract: as proto.h, over the same Reply.  mcproto_frame() cuts
 * the stream into replies: a reply is one \r\n-terminated line, except that
 * a "VALUE <key> <flags> <bytes>" line takes its data, the data's \r\n and
 * the "END\r\n" line after it into the same reply (tubed-bench asks for one
 * key per get, so a second VALUE, or anything else before END, cannot be a
 * reply to it and is malformed).  The checks then match a framed reply
 * exactly.
 */
#ifndef TUBED_BENCH_MCPROTO_H
#define TUBED_BENCH_MCPROTO_H
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "buf.h"
#include "proto.h"

/* Frame the reply at the start of p[0, n); returns as proto_frame() does. */
ssize_t mcproto_frame(const char *p, size_t n, Reply *r, size_t *need);

/* What follows the key in a set request: " 0 0 <size>\r\n<body>\r\n". */
void mcproto_set_tail(Buf *out, const char *body, size_t size);
/* "set <key>" + the tail made by mcproto_set_tail(). */
void mcproto_set(Buf *out, const char *key, const Buf *tail);
/* "get <key><suffix>\r\n", e.g. suffix "/open"; suffix may be "". */
void mcproto_get(Buf *out, const char *key, const char *suffix);

/* The reply is "VALUE <key><suffix> 0 <n>" with its data (n bytes). */
bool mcreply_value(const Reply *r, const char *key, const char *suffix);

#endif
