#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"

int buf_reserve(Buf *b, size_t extra)
{
    size_t cap;
    char *d;

    if (b->cap - b->len >= extra)
        return 0;
    cap = b->cap ? b->cap : 256;
    while (cap - b->len < extra)
        cap *= 2;
    d = tb_realloc(b->data, cap);
    if (!d) {
        b->oom = 1;
        return -1;
    }
    b->data = d;
    b->cap = cap;
    return 0;
}

int buf_append(Buf *b, const void *p, size_t n)
{
    if (n == 0)
        return 0; /* a zero Buf has no array: memcpy to NULL is undefined */
    if (buf_reserve(b, n) < 0)
        return -1;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    return 0;
}

int buf_printf(Buf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (buf_reserve(b, 128) < 0)
        return -1;
    va_start(ap, fmt);
    n = vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
        return -1;
    }
    if ((size_t)n >= b->cap - b->len) {
        if (buf_reserve(b, (size_t)n + 1) < 0)
            return -1;
        va_start(ap, fmt);
        vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
    }
    b->len += (size_t)n;
    return 0;
}

void buf_consume(Buf *b, size_t n)
{
    if (n >= b->len) {
        b->len = 0;
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
}

void buf_free(Buf *b)
{
    tb_free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->oom = 0;
}
