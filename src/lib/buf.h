/*
 * buf.h — a growable byte buffer with a sticky out-of-memory flag.
 *
 * Contract: appends either add all their bytes or none; when the buffer
 * cannot grow, the append returns -1 and sets b->oom, so a run of appends
 * (a stats reply, say) can be checked once at the end. A zero Buf is empty
 * and valid; buf_free() returns it to that state.
 */
#ifndef TUBED_BUF_H
#define TUBED_BUF_H

#include <stddef.h>

typedef struct Buf {
    char *data;
    size_t len, cap;
    int oom;
} Buf;

int buf_reserve(Buf *b, size_t extra);
int buf_append(Buf *b, const void *p, size_t n);
int buf_printf(Buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Drop the first n bytes. */
void buf_consume(Buf *b, size_t n);
void buf_free(Buf *b);

#endif
