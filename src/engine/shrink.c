#include "shrink.h"

#include <string.h>

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

/* One batch of t; 0 once t is done (within budget, or looked through). */
static int shrink_tube(Engine *e, Tube *t)
{
    uint64_t budget = t->pol.max_memory_size, over, freed = 0;
    int n = 0, looked = 0;

    if (!budget || !t->pol.journal || spill_tube_mem_bytes(t) <= budget)
        return 0;
    over = spill_tube_mem_bytes(t) - budget;
    /* Bounded work per iteration: what it spills and what it looks at. */
    while (freed < over && n < SHRINK_BATCH && looked++ < 16 * SHRINK_BATCH) {
        Heap *h = t->shrink_phase == 0 ? &t->ready : &t->delay;
        uint32_t size;
        Job *j;
        int r;

        if (t->shrink_pos > h->len)
            t->shrink_pos = h->len;
        if (t->shrink_pos == 0) {
            if (t->shrink_phase == 0) {
                t->shrink_phase = 1;
                t->shrink_pos = t->delay.len;
                continue;
            }
            /* Jobs that came in meanwhile (moves, expiry into a dead-letter
             * tube) may sit behind the cursor: another pass while this one
             * found something. */
            if (!t->shrink_moved)
                return 0;
            t->shrink_moved = 0;
            t->shrink_phase = 0;
            t->shrink_pos = t->ready.len;
            continue;
        }
        j = h->items[--t->shrink_pos];
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
