/*
 * agering.h — a tube's jobs that expire max_age after their creation, in
 * the order they were put: the cheap half of expiry.
 *
 * Contract. With max_age on a tube, a job put without a client's expiry
 * expires at created + max_age. Puts come in time order, so these jobs
 * expire in the order they were put, and a ring of (id, created) in put
 * order replaces a heap entry and a JobExt per job: 16 bytes, no
 * allocation but the ring's own growth. A job that leaves its tube (is
 * deleted, moved, expires) stays in the ring as a stale entry: the ring
 * cannot find it, and the caller validates each entry by id when it
 * reaches the front (age_ring_front/pop) or when a compaction passes it.
 *
 * `live` counts the entries that are not stale; the caller keeps it up to
 * date (age_ring_push() counts one; the caller calls age_ring_left() when
 * a job stops being one of them). Stale entries are reclaimed by an
 * incremental compaction: once the ring holds more than twice its live
 * entries (plus some slack), every push moves it on by a few entries, so
 * the ring stays within a small multiple of its live count and no single
 * call walks it all. The front is always the oldest entry not known to be
 * stale; compaction keeps the order.
 *
 * Pure data structure: no engine, no clock. Not thread-safe.
 */
#ifndef TUBED_AGERING_H
#define TUBED_AGERING_H

#include <stddef.h>
#include <stdint.h>

typedef struct AgeEntry {
    uint64_t id;
    int64_t created;     /* monotonic ns */
} AgeEntry;

/* The entries in order are v[head, cw) then v[cr, tail). While no
 * compaction runs, cw == cr == tail; during one, [cw, cr) is the hole it
 * closes as it goes. */
typedef struct AgeRing {
    AgeEntry *v;
    size_t head, cw, cr, tail, cap;
    size_t live;
} AgeRing;

/* Is this entry still live? The caller's judgment (a job table lookup). */
typedef int (*AgeValid)(void *arg, const AgeEntry *a);

/* Append; 0, or -1 when the ring cannot grow (nothing changed). Then, if
 * a compaction runs, `steps` entries of it with valid(). */
int age_ring_push(AgeRing *r, uint64_t id, int64_t created, AgeValid valid, void *arg,
                  unsigned steps);
/* Take back the entry just pushed, still live (a put that failed after
 * it). */
void age_ring_unpush(AgeRing *r);
/* The oldest entry, or NULL when empty. */
const AgeEntry *age_ring_front(const AgeRing *r);
/* The newest entry (live or stale), or NULL when empty. */
const AgeEntry *age_ring_back(const AgeRing *r);
/* Drop the front entry (the caller says whether it was live). */
void age_ring_pop(AgeRing *r, int was_live);
/* A live entry went stale. */
static inline void age_ring_left(AgeRing *r)
{
    if (r->live)
        r->live--;
}
/* Entries held, stale ones included. */
size_t age_ring_len(const AgeRing *r);
/* Empty it and give its memory back. */
void age_ring_clear(AgeRing *r);

#endif
