/*
 * backlog.h — the replication backlog: the recent bytes of the stream (the
 * binlog records exactly as a replica receives them, doc/replication.md)
 * in a bounded ring, so a replica that reconnects at a position still in
 * it gets only what follows (a partial resync) instead of a snapshot.
 *
 * Contract. Bytes are appended whole records at a time; bk_mark(pos)
 * then says "the bytes so far bring the stream to position pos" (the
 * number of the primary's records, not counting its P records). When the
 * ring is full the oldest bytes, and the marks that point into them, go.
 * bk_find(pos) gives the stream offset of the first byte after the
 * record that reaches pos: from the latest mark at or below pos it walks
 * the records (whose framing it reads from the ring), counting every one
 * but P. Offsets are absolute (bytes ever appended), so a reader keeps a
 * cursor and bk_read() says when the ring has overwritten it. It
 * allocates nothing until bk_init(); it never calls the engine.
 */
#ifndef TUBED_BACKLOG_H
#define TUBED_BACKLOG_H

#include <stddef.h>
#include <stdint.h>

typedef struct BkMark {
    uint64_t pos, off;
} BkMark;

typedef struct Backlog {
    char *ring;
    size_t cap;            /* bytes; 0: no backlog */
    uint64_t end;          /* absolute offset of the next byte appended */
    BkMark *marks;         /* oldest first, a ring of mcap */
    size_t mhead, mlen, mcap;
} Backlog;

/* A ring of cap bytes (0: none, every call then does nothing): 0, or -1
 * out of memory (then no backlog either). */
int bk_init(Backlog *b, size_t cap);
void bk_free(Backlog *b);
/* Forget every byte and mark: the stream starts again at position pos. */
void bk_reset(Backlog *b, uint64_t pos);
static inline int bk_on(const Backlog *b)
{
    return b->cap != 0;
}

/* Whole records; then bk_mark(). -1 out of memory for a mark: the
 * backlog is reset (empty, no position: nothing can resume from it). */
void bk_append(Backlog *b, const void *p, size_t n);
int bk_mark(Backlog *b, uint64_t pos);

/* The oldest byte still held, and the positions a replica may resume
 * from: [first, last]; 0 when there is no mark (empty). */
uint64_t bk_start(const Backlog *b);
int bk_range(const Backlog *b, uint64_t *first, uint64_t *last);
/* The offset a replica at pos resumes from, or -1 when pos is not in the
 * backlog (too old, too new, or the bytes are not whole records). */
int bk_find(const Backlog *b, uint64_t pos, uint64_t *off);
/* The position the whole records before offset off bring the stream to
 * (what a reader sent the bytes up to off has): -1 when off is before the
 * first mark or the bytes from that mark are not held. */
int bk_pos_at(const Backlog *b, uint64_t off, uint64_t *pos);
/* Copy up to n bytes from offset off: the count (0 at the end), or -1 when
 * off is no longer held (overwritten). */
long bk_read(const Backlog *b, uint64_t off, void *dst, size_t n);

#endif
