#ifndef TUBED_BENCH_BUF_H
#define TUBED_BENCH_BUF_H
/*
 * buf.h - growable byte buffer for socket input and output.
 *
 * Contract: data[off, len) holds the bytes not yet consumed.  Capacity only
 * ever doubles, so a steady workload stops allocating after warm-up (no
 * per-request allocation).  Running out of memory is fatal (message on
 * stderr, exit 1): a load generator has nothing useful to do without memory,
 * and checking at every append would hide the real logic.
 */
#include <stddef.h>

struct buf {
	char *data;
	size_t off; /* first unconsumed byte */
	size_t len; /* end of valid bytes */
	size_t cap;
};

void buf_init(struct buf *b, size_t cap);
void buf_free(struct buf *b);
/* Make room for n more bytes after len; returns where they go. */
char *buf_space(struct buf *b, size_t n);
void buf_append(struct buf *b, const void *p, size_t n);
/* Mark n bytes at off as used; an emptied buffer restarts at offset 0. */
void buf_consume(struct buf *b, size_t n);
size_t buf_pending(const struct buf *b);

#endif
