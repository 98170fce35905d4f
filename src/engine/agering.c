#include "agering.h"

#include <string.h>

#include "alloc.h"

/* Compaction starts past 2 x live + SLACK entries. */
#define SLACK 256
#define MIN_CAP 64

size_t age_ring_len(const AgeRing *r)
{
    return (r->cw - r->head) + (r->tail - r->cr);
}

static int compacting(const AgeRing *r)
{
    return r->cw != r->tail;
}

void age_ring_clear(AgeRing *r)
{
    tb_free(r->v);
    memset(r, 0, sizeof *r);
}

/* Slide everything down to index 0 (the space before head is free). */
static void slide(AgeRing *r)
{
    size_t h = r->head;

    if (!h)
        return;
    memmove(r->v, r->v + h, (r->tail - h) * sizeof *r->v);
    r->head = 0;
    r->cw -= h;
    r->cr -= h;
    r->tail -= h;
}

/* Mostly empty: half the array back (if realloc says no, it stays). */
static void shrink(AgeRing *r)
{
    AgeEntry *v;

    slide(r);
    if ((v = tb_realloc(r->v, r->cap / 2 * sizeof *v))) {
        r->v = v;
        r->cap /= 2;
    }
}

/* Room for one more at the tail: reuse the space popped from the front
 * when it is at least half the array, else double it. */
static int room(AgeRing *r)
{
    size_t cap;
    AgeEntry *v;

    if (r->tail < r->cap)
        return 0;
    if (r->head >= r->cap / 2 && r->head) {
        slide(r);
        return 0;
    }
    cap = r->cap ? r->cap * 2 : MIN_CAP;
    if (!(v = tb_realloc(r->v, cap * sizeof *v)))
        return -1;
    r->v = v;
    r->cap = cap;
    return 0;
}

/* One step of the compaction: the entry at cr moves down to cw if live. */
static void compact_step(AgeRing *r, AgeValid valid, void *arg)
{
    if (r->v[r->cr].id && valid(arg, &r->v[r->cr]))
        r->v[r->cw++] = r->v[r->cr];
    if (++r->cr == r->tail)
        r->tail = r->cr = r->cw; /* done: the hole is closed */
}

int age_ring_push(AgeRing *r, uint64_t id, int64_t created, AgeValid valid, void *arg,
                  unsigned steps)
{
    if (room(r) < 0)
        return -1;
    r->v[r->tail].id = id;
    r->v[r->tail].created = created;
    if (!compacting(r))
        r->cw = r->cr = r->tail + 1;
    r->tail++;
    r->live++;
    if (!compacting(r) && age_ring_len(r) > 2 * r->live + SLACK)
        r->cw = r->cr = r->head; /* start one: everything is still to look at */
    while (steps-- && compacting(r))
        compact_step(r, valid, arg);
    return 0;
}

void age_ring_unpush(AgeRing *r)
{
    if (age_ring_len(r) == 0)
        return;
    if (!compacting(r)) {
        r->cw = r->cr = r->tail - 1;
        r->tail--;
    } else if (--r->tail == r->cr) {
        r->tail = r->cr = r->cw; /* nothing left to compact */
    }
    age_ring_left(r);
}

const AgeEntry *age_ring_front(const AgeRing *r)
{
    if (r->head < r->cw)
        return &r->v[r->head];
    return r->cr < r->tail ? &r->v[r->cr] : NULL;
}

void age_ring_pop(AgeRing *r, int was_live)
{
    if (r->head < r->cw) {
        r->head++;
    } else if (r->cr < r->tail) {
        r->cr++;
        if (r->cr == r->tail)
            r->tail = r->cr = r->cw;
    } else {
        return;
    }
    if (was_live)
        age_ring_left(r);
    if (age_ring_len(r) == 0) {
        /* Empty: start again at the bottom, and give a big array back. */
        r->head = r->cw = r->cr = r->tail = 0;
        if (r->cap > 4096)
            age_ring_clear(r);
    } else if (r->cap > 4096 && age_ring_len(r) < r->cap / 8 && !compacting(r)) {
        shrink(r);
    }
}

const AgeEntry *age_ring_back(const AgeRing *r)
{
    if (r->cr < r->tail)
        return &r->v[r->tail - 1];
    return r->head < r->cw ? &r->v[r->cw - 1] : NULL;
}
