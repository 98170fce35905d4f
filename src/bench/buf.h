/*
 * buf.h - growable byte buffer for socket input and output.
 *
 * Contract: data[off, len) holds the bytes not yet consumed.  Capacity only
 * ever doubles, so a steady workload stops allocating after warm-up (no
 * per-request allocation).  Running out of memory is fatal (message on
 * stderr, exit 1): a load generator has nothing useful to do without memory,
 * and checking at every append would hide the real logic.
 */
#ifndef TUBED_BENCH_BUF_H
#define TUBED_BENCH_BUF_H
#include <stddef.h>

typedef struct Buf Buf;
struct Buf {
	char *data;
	size_t off; /* first unconsumed byte */
	size_t len; /* end of valid bytes */
	size_t cap;
};

void buf_init(Buf *b, size_t cap);
void buf_free(Buf *b);
/* Make room for n more bytes after len; returns where they go. */
char *buf_space(Buf *b, size_t n);
void buf_append(Buf *b, const void *p, size_t n);
/* Mark n bytes at off as used; an emptied buffer restarts at offset 0. */
void buf_consume(Buf *b, size_t n);
size_t buf_pending(const Buf *b);

#endif
