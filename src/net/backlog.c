#include "backlog.h"

#include <string.h>

#include "alloc.h"
#include "blcodec.h"

int bk_init(Backlog *b, size_t cap)
{
    memset(b, 0, sizeof *b);
    if (!cap)
        return 0;
    if (!(b->ring = tb_malloc(cap)))
        return -1;
    b->cap = cap;
    return 0;
}

void bk_free(Backlog *b)
{
    tb_free(b->ring);
    tb_free(b->marks);
    memset(b, 0, sizeof *b);
}

/* The oldest offset still in the ring. */
uint64_t bk_start(const Backlog *b)
{
    return b->end > b->cap ? b->end - b->cap : 0;
}

/* Marks that point before the ring's start can no longer be read from. */
static void trim(Backlog *b)
{
    uint64_t start = bk_start(b);

    while (b->mlen && b->marks[b->mhead].off < start) {
        b->mhead = (b->mhead + 1) % b->mcap;
        b->mlen--;
    }
}

void bk_reset(Backlog *b, uint64_t pos)
{
    if (!b->cap)
        return;
    /* Offsets stay monotonic: a reader's old cursor can never look valid. */
    b->end += b->cap;
    b->mlen = 0;
    bk_mark(b, pos);
}

void bk_append(Backlog *b, const void *p, size_t n)
{
    const char *s = p;

    if (!b->cap)
        return;
    if (n > b->cap) { /* only the tail can stay */
        s += n - b->cap;
        b->end += n - b->cap;
        n = b->cap;
    }
    while (n) {
        size_t at = (size_t)(b->end % b->cap), k = b->cap - at;
        if (k > n)
            k = n;
        memcpy(b->ring + at, s, k);
        s += k;
        n -= k;
        b->end += k;
    }
    trim(b);
}

int bk_mark(Backlog *b, uint64_t pos)
{
    if (!b->cap)
        return 0;
    if (b->mlen && b->marks[(b->mhead + b->mlen - 1) % b->mcap].off == b->end) {
        b->marks[(b->mhead + b->mlen - 1) % b->mcap].pos = pos; /* no bytes since */
        return 0;
    }
    if (b->mlen == b->mcap) {
        size_t cap = b->mcap ? b->mcap * 2 : 64;
        BkMark *m = tb_malloc(cap * sizeof *m);
        if (!m) {
            b->end += b->cap; /* nothing old can be found again */
            b->mlen = 0;
            return -1;
        }
        for (size_t i = 0; i < b->mlen; i++)
            m[i] = b->marks[(b->mhead + i) % b->mcap];
        tb_free(b->marks);
        b->marks = m;
        b->mhead = 0;
        b->mcap = cap;
    }
    b->marks[(b->mhead + b->mlen) % b->mcap] = (BkMark){pos, b->end};
    b->mlen++;
    return 0;
}

int bk_range(const Backlog *b, uint64_t *first, uint64_t *last)
{
    if (!b->cap || !b->mlen)
        return 0;
    *first = b->marks[b->mhead].pos;
    *last = b->marks[(b->mhead + b->mlen - 1) % b->mcap].pos;
    return 1;
}

long bk_read(const Backlog *b, uint64_t off, void *dst, size_t n)
{
    char *d = dst;
    size_t done = 0;

    if (!b->cap || off < bk_start(b) || off > b->end)
        return -1;
    if (n > b->end - off)
        n = (size_t)(b->end - off);
    while (done < n) {
        size_t at = (size_t)((off + done) % b->cap), k = b->cap - at;
        if (k > n - done)
            k = n - done;
        memcpy(d + done, b->ring + at, k);
        done += k;
    }
    return (long)done;
}

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

int bk_find(const Backlog *b, uint64_t pos, uint64_t *off)
{
    size_t lo = 0, hi = b->mlen;
    BkMark m;
    uint64_t at, have;

    if (!b->cap || !b->mlen || pos < b->marks[b->mhead].pos)
        return -1;
    /* the latest mark at or below pos (marks' positions never go down) */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (b->marks[(b->mhead + mid) % b->mcap].pos <= pos)
            lo = mid + 1;
        else
            hi = mid;
    }
    m = b->marks[(b->mhead + lo - 1) % b->mcap];
    at = m.off;
    have = m.pos;
    /* Walk the records after the mark; each but P advances the position. */
    while (have < pos) {
        unsigned char h[BL_REC_HEAD + 1];
        if (bk_read(b, at, h, sizeof h) != (long)sizeof h)
            return -1; /* the end came first: pos is past what we have */
        if (le32(h) == 0 || le32(h) > b->end - at - BL_REC_HEAD)
            return -1;
        if (h[BL_REC_HEAD] != BL_POS)
            have++;
        at += BL_REC_HEAD + le32(h);
    }
    *off = at;
    return 0;
}
