/*
 * proto.h - the client side of the beanstalk protocol: request encoding,
 * reply framing and reply checks.  Pure functions over bytes, no sockets.
 *
 * Contract: encoders append one complete request (ending in \r\n) to a buf.
 * proto_frame() cuts the reply stream into replies without knowing which
 * request each one answers: a reply is one \r\n-terminated line, plus, for
 * RESERVED/FOUND/OK lines, a body of the size in the line's last number and
 * its \r\n.  The reply_* checks then match a framed reply exactly, so that a
 * reply with extra or missing bytes counts as unexpected.
 */
#ifndef TUBED_BENCH_PROTO_H
#define TUBED_BENCH_PROTO_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "buf.h"

/* Longest reply line we accept before calling the stream garbage. */
#define PROTO_MAX_LINE 1024
/* Largest body a reply may announce (beanstalkd's -z limit). */
#define PROTO_MAX_BODY (1024u * 1024u * 1024u)

typedef struct Reply Reply;
struct Reply {
	const char *line; /* without the \r\n */
	size_t line_len;
	const char *body; /* NULL when the reply has no body */
	size_t body_len;
};

/*
 * Frame the reply at the start of p[0, n).  Returns its total size when it
 * is complete; 0 when more bytes are needed (then *need is the total size if
 * already known, else 0); -1 when the bytes cannot be a beanstalk reply.
 */
ssize_t proto_frame(const char *p, size_t n, Reply *r, size_t *need);
/* Only the reply line at the start of p[0, n) (both protocols end lines in
 * \r\n and never send a bare \n): r gets the line and no body; returns the
 * line's size with its \r\n, 0 if incomplete, -1 if malformed or too long. */
ssize_t proto_frame_line(const char *p, size_t n, Reply *r);

void proto_put(Buf *out, uint32_t pri, uint32_t delay, uint32_t ttr,
	       const char *body, size_t size);
void proto_line(Buf *out, const char *cmd);                    /* "reserve" */
void proto_line_name(Buf *out, const char *cmd, const char *name); /* "watch t" */
void proto_line_u64(Buf *out, const char *cmd, uint64_t v);       /* "delete 7" */

/* The line is exactly `word`. */
bool reply_is(const Reply *r, const char *word);
/* The line is "word <n>" with n a plain decimal; stores n. */
bool reply_word_u64(const Reply *r, const char *word, uint64_t *n);
/* The line is "word <name>". */
bool reply_word_name(const Reply *r, const char *word, const char *name);
/* The line is "RESERVED <id> <bytes>" with its body; stores id. */
bool reply_reserved(const Reply *r, uint64_t *id);

#endif
