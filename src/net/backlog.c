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

/* The index (from mhead) just past the last mark whose position (by_off
 * 0) or offset (by_off 1) is at or below key; 0 when there is none. */
static size_t marks_upto(const Backlog *b, uint64_t key, int by_off)
{
    size_t lo = 0, hi = b->mlen;

    /* (marks' positions and offsets never go down) */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const BkMark *m = &b->marks[(b->mhead + mid) % b->mcap];
        if ((by_off ? m->off : m->pos) <= key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The frame of the record at offset at: its whole size in *size and
 * whether it is a P record; -1 when its head is not held or is damaged. */
static int frame_at(const Backlog *b, uint64_t at, uint64_t *size, int *is_pos)
{
    unsigned char h[BL_REC_HEAD + 1];

    if (bk_read(b, at, h, sizeof h) != (long)sizeof h)
        return -1;
    if (le32(h) == 0 || le32(h) > b->end - at - BL_REC_HEAD)
        return -1;
    *size = BL_REC_HEAD + (uint64_t)le32(h);
    *is_pos = h[BL_REC_HEAD] == BL_POS;
    return 0;
}

int bk_find(const Backlog *b, uint64_t pos, uint64_t *off)
{
    size_t k;
    BkMark m;
    uint64_t at, have;

    if (!b->cap || !b->mlen || pos < b->marks[b->mhead].pos)
        return -1;
    k = marks_upto(b, pos, 0);
    m = b->marks[(b->mhead + k - 1) % b->mcap];
    at = m.off;
    have = m.pos;
    /* Walk the records after the mark; each but P advances the position. */
    while (have < pos) {
        uint64_t size;
        int is_pos;
        if (frame_at(b, at, &size, &is_pos) < 0)
            return -1; /* the end came first: pos is past what we have */
        if (!is_pos)
            have++;
        at += size;
    }
    *off = at;
    return 0;
}

int bk_pos_at(const Backlog *b, uint64_t off, uint64_t *pos)
{
    size_t k;
    BkMark m;
    uint64_t at;

    if (!b->cap || !b->mlen || (k = marks_upto(b, off, 1)) == 0)
        return -1;
    m = b->marks[(b->mhead + k - 1) % b->mcap];
    *pos = m.pos;
    for (at = m.off; at < off;) {
        uint64_t size;
        int is_pos;
        if (frame_at(b, at, &size, &is_pos) < 0)
            return -1;
        if (at + size > off)
            break; /* a record cut by off: not all of it is there */
        if (!is_pos)
            (*pos)++;
        at += size;
    }
    return 0;
}
