#include "listjobs.h"

#include <stdlib.h>

#include "idheap.h"
#include "policy.h"
#include "queue.h"

/* The `count` smallest ids >= from seen so far, in a max-heap that lives
 * in the caller's array: the largest kept id is on top, ready to go. */
typedef struct Page {
    IdHeap h;
    uint64_t from;
} Page;

static void page_offer(Page *p, uint64_t id)
{
    if (id < p->from || !p->h.cap)
        return;
    if (idheap_push(&p->h, id) < 0 && id < idheap_top(&p->h))
        idheap_replace_top(&p->h, id); /* full: it beats the largest */
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* A job list-jobs shows for t and state (-1: any): t's, live, and not
 * one that policy_check() would expire now (a reserved one expires only
 * when it comes back; one whose move to a full dead-letter tube failed
 * stays, as peek and stats-tube show it). */
static int listed(const Engine *e, const Job *j, const Tube *t, int state)
{
    if (j->tube != t || job_dead(j) || (state >= 0 && (int)j->state != state))
        return 0;
    return !policy_due(e, j);
}

/* Offer the jobs of heap h that list-jobs shows for t. */
static void offer_heap(const Engine *e, Page *p, const Heap *h, const Tube *t)
{
    for (size_t i = 0; i < h->len; i++)
        if (listed(e, h->items[i], t, -1))
            page_offer(p, ((const Job *)h->items[i])->id);
}

/* Ids in ascending order straight from the job table: cheap when the tube
 * holds many of the ids from `from` on (consecutive ids share cache lines
 * of the table). Gives up (-1) after `budget` ids; else how many it found. */
static long list_by_id(const Engine *e, const Tube *t, int state, uint64_t from,
                       uint32_t count, uint64_t *out, uint64_t budget)
{
    uint32_t n = 0;

    for (uint64_t id = from ? from : 1; id < e->next_id && n < count; id++) {
        const Job *j;
        if (!budget--)
            return -1;
        if ((j = job_table_find(&e->jobs, id)) && listed(e, j, t, state))
            out[n++] = id;
    }
    return n;
}

/* Ids looked up before a page falls back to scanning the state's jobs. */
#define LIST_BUDGET 65536

uint32_t listjobs_page(Engine *e, Tube *t, int state, uint64_t from, uint32_t count,
                       uint64_t *out)
{
    Page p = {.from = from};
    size_t in_state = state == JOB_READY ? t->ready.len : state == JOB_DELAYED ? t->delay.len
                    : state == JOB_BURIED ? t->buried_ct : state == JOB_RESERVED ? t->reserved_ct
                    : t->ready.len + t->delay.len + t->buried_ct + t->reserved_ct;
    long n;

    idheap_init_fixed(&p.h, 1, out, count);
    /* A state with many jobs in this tube: walk the ids (each page is then
     * about `count` lookups when the tube's ids are dense). A rare state,
     * or ids spread thin among other tubes': scan that state's jobs. */
    if (in_state > LIST_BUDGET / 4 &&
        (n = list_by_id(e, t, state, from, count, out, LIST_BUDGET)) >= 0)
        return (uint32_t)n;

    /* A scan of the jobs of the state asked for, no more: a page of a rare
     * state is cheap even in a huge tube. Expired jobs are not listed (a
     * listing changes nothing, so they are not expired here either). */
    if (state < 0 || state == JOB_READY)
        offer_heap(e, &p, &t->ready, t);
    if (state < 0 || state == JOB_DELAYED)
        offer_heap(e, &p, &t->delay, t);
    if ((state < 0 || state == JOB_RESERVED) && t->reserved_ct)
        offer_heap(e, &p, &e->ttr, t);
    if (state < 0 || state == JOB_BURIED)
        for (List *l = t->buried.next; l != &t->buried; l = l->next)
            if (listed(e, job_of_link(l), t, -1))
                page_offer(&p, job_of_link(l)->id);
    qsort(out, p.h.len, sizeof *out, cmp_u64);
    return (uint32_t)p.h.len;
}
