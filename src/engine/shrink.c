#include "shrink.h"

#include <string.h>

#include "alloc.h"
#include "queue.h"
#include "store.h"

/* A reload gave t a budget its bodies in memory exceed: the bodies that
 * live in their jobs (put under no or a larger budget) are turned into
 * spilled ones, a batch per loop iteration, the last in line first: each
 * job's record is written again, the job takes the spilled form, and its
 * body goes once that record is written (spill_after_commit()). */
#define SHRINK_BATCH 512

/* 1: j now spilled, 0: not a candidate, -1: no room or memory (stop). */
static int shrink_job(Engine *e, Job *j)
{
    int64_t off;
    Job *n;

    if (j->state == JOB_RESERVED || !j->file || job_dead(j) || (j->spilled && !j->loaded))
        return 0;
    if (j->spilled) {
        spill_note(e, j); /* its body goes at the next commit */
        return 1;
    }
    n = queue_job_new_spilled(e, j->id, j->body_size, 0, 1, 0);
    if (!n)
        return -1;
    if ((off = binlog_rewrite(e, j)) < 0) {
        queue_job_free(e, n);
        return -1;
    }
    memcpy(job_body_mut(n), j->body, j->body_size);
    job_spill_set_off(n, (uint64_t)off);
    queue_relocate(e, j, n);
    spill_note(e, n);
    return 1;
}

/* Phase 2 starts at the end of t's buried list (the last to be kicked). */
static void bur_at(Tube *t, List *n)
{
    Job *j;

    if (n == &t->buried) {
        t->shrink_bid = 0;
        return;
    }
    j = job_of_link(n);
    t->shrink_bid = j->id;
    t->shrink_bseq = job_ext(j)->bury_seq;
}

/* The buried job phase 2 looks at next, the cursor moved past it; NULL
 * once the list is looked through. A cursor job that left the list
 * (kicked, deleted, moved, flushed) sends the walk back to the end:
 * what it spilled already is passed over cheaply. */
static Job *bur_next(Engine *e, Tube *t)
{
    Job *j = t->shrink_bid ? job_table_find(&e->jobs, t->shrink_bid) : NULL;

    if (t->shrink_bid && (!j || j->tube != t || j->state != JOB_BURIED || job_dead(j) ||
                          job_ext(j)->bury_seq != t->shrink_bseq)) {
        bur_at(t, t->buried.prev);
        j = t->shrink_bid ? job_of_link(t->buried.prev) : NULL;
    }
    if (j)
        bur_at(t, job_ext(j)->link.prev);
    return j;
}

/* One batch of t; 0 once t is done (within budget, or looked through). */
static int shrink_tube(Engine *e, Tube *t)
{
    uint64_t budget = t->pol.max_memory_size, over, freed = 0;
    int n = 0, looked = 0;

    if (t->shrink_yield) {
        /* Make room for the ready bodies on disk (spill_yield()): as much
         * as they need, at most all that delayed and buried jobs hold. */
        if (!budget || !t->pol.journal || !t->spilled_bytes)
            return 0;
        over = t->spilled_bytes;
    } else if (!budget || !t->pol.journal || spill_tube_mem_bytes(t) <= budget) {
        return 0;
    } else {
        over = spill_tube_mem_bytes(t) - budget;
    }
    /* Bounded work per iteration: what it spills and what it looks at. */
    while (freed < over && n < SHRINK_BATCH && looked++ < 16 * SHRINK_BATCH) {
        Heap *h = t->shrink_phase == 0 ? &t->ready : &t->delay;
        uint32_t size;
        Job *j;
        int r;

        if (t->shrink_phase == 2) {
            /* Buried jobs count against the budget like the others, and a
             * tube's buried pile is what sits longest. */
            if (!(j = bur_next(e, t))) {
                /* Jobs that came in meanwhile (moves, expiry into a
                 * dead-letter tube, workers' releases and buries) may sit
                 * behind the cursor: another pass while this one found
                 * something. */
                if (!t->shrink_moved || t->shrink_yield)
                    return 0;
                t->shrink_moved = 0;
                t->shrink_phase = 0;
                t->shrink_pos = t->ready.len;
                continue;
            }
        } else {
            if (t->shrink_pos > h->len)
                t->shrink_pos = h->len;
            if (t->shrink_pos == 0) {
                if (t->shrink_phase == 0) {
                    t->shrink_phase = 1;
                    t->shrink_pos = t->delay.len;
                } else {
                    t->shrink_phase = 2;
                    bur_at(t, t->buried.prev);
                }
                continue;
            }
            j = h->items[--t->shrink_pos];
        }
        size = j->body_size;
        if ((r = shrink_job(e, j)) < 0)
            return 1; /* try again next time */
        if (r) {
            freed += size;
            n++;
            t->shrink_moved = 1;
        }
    }
    return 1;
}

void shrink_tubes(Engine *e)
{
    unsigned left = 0;

    for (size_t i = 0; i < e->tubes.len; i++) {
        Tube *t = e->tubes.list[i];
        if (t->shrink && !(t->shrink = (uint8_t)shrink_tube(e, t)))
            continue;
        left += t->shrink;
    }
    e->spill.shrinking = left;
}

void shrink_back(Engine *e)
{
    Spill *s = &e->spill;

    if (!s->nback)
        return;
    /* (With the binlog unhealthy no record can be written: they stay.) */
    for (size_t i = 0; i < s->nback && e->binlog.healthy; i++) {
        Job *j = job_table_find(&e->jobs, s->back[i]);
        const Tube *t = j ? j->tube : NULL;

        if (!j || j->spilled || j->state == JOB_RESERVED || job_dead(j) ||
            !t->pol.max_memory_size || !t->pol.journal ||
            spill_tube_mem_bytes(t) <= t->pol.max_memory_size)
            continue;
        if (shrink_job(e, j) < 0)
            break; /* no log room or memory: it stays in memory */
    }
    s->nback = 0;
    if (s->back_cap > 4096) {
        tb_free(s->back);
        s->back = NULL;
        s->back_cap = 0;
    }
}
