/* buf.c - growable byte buffer; see buf.h. */
#include "buf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n);
	if (!q) {
		fprintf(stderr, "tubed-bench: out of memory (%zu bytes)\n", n);
		exit(1);
	}
	return q;
}

void buf_init(Buf *b, size_t cap)
{
	b->data = xrealloc(NULL, cap);
	b->off = b->len = 0;
	b->cap = cap;
}

void buf_free(Buf *b)
{
	free(b->data);
	b->data = NULL;
	b->off = b->len = b->cap = 0;
}

char *buf_space(Buf *b, size_t n)
{
	if (b->cap - b->len >= n)
		return b->data + b->len;
	/* Moving the unconsumed tail to the front is cheaper than growing:
	 * it is usually a partial reply or request of a few bytes. */
	if (b->off > 0) {
		memmove(b->data, b->data + b->off, b->len - b->off);
		b->len -= b->off;
		b->off = 0;
	}
	if (b->cap - b->len < n) {
		size_t cap = b->cap ? b->cap : 64;
		while (cap - b->len < n)
			cap *= 2;
		b->data = xrealloc(b->data, cap);
		b->cap = cap;
	}
	return b->data + b->len;
}

void buf_append(Buf *b, const void *p, size_t n)
{
	memcpy(buf_space(b, n), p, n);
	b->len += n;
}

void buf_consume(Buf *b, size_t n)
{
	b->off += n;
	if (b->off == b->len)
		b->off = b->len = 0;
}

size_t buf_pending(const Buf *b)
{
	return b->len - b->off;
}
