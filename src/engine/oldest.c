#include "oldest.h"

#include <string.h>

#include "alloc.h"
#include "idheap.h"

/* One per state a full tube discards from, in the order it does. */
enum { NSTATES = 3 };
static const JobState order[NSTATES] = {JOB_READY, JOB_DELAYED, JOB_BURIED};

struct OldestIdx {
    IdHeap by_state[NSTATES];
};

/* ---- a state's jobs ------------------------------------------------------- */

/* How many jobs are in state s: what a heap of live entries would hold. */
static size_t jobs_in_state(const Tube *t, int s)
{
    return order[s] == JOB_READY ? t->ready.len
         : order[s] == JOB_DELAYED ? t->delay.len : t->buried_ct;
}

static int in_state(const Engine *e, const Tube *t, int s, uint64_t id)
{
    const Job *j = job_table_find(&e->jobs, id);

    return j && j->tube == t && j->state == order[s] && !job_dead(j);
}

/* The heap of state s made anew from the state's container: -1 if out of
 * memory (the heap is then empty). */
static int rebuild(Tube *t, int s)
{
    IdHeap *h = &t->oldest->by_state[s];
    const Heap *src = order[s] == JOB_READY ? &t->ready : &t->delay;
    size_t k;

    h->len = 0;
    if (order[s] == JOB_BURIED) {
        for (List *l = t->buried.next; l != &t->buried; l = l->next)
            if (idheap_push(h, job_of_link(l)->id) < 0)
                return -1;
        return 0;
    }
    if (idheap_reserve(h, src->len) < 0)
        return -1;
    for (k = 0; k < src->len; k++)
        h->v[k] = ((const Job *)src->items[k])->id;
    h->len = k;
    idheap_heapify(h);
    return 0;
}

static int build(Tube *t)
{
    if (!(t->oldest = tb_calloc(1, sizeof *t->oldest)))
        return -1;
    for (int s = 0; s < NSTATES; s++)
        idheap_init(&t->oldest->by_state[s], 0); /* smallest id on top */
    for (int s = 0; s < NSTATES; s++)
        if (rebuild(t, s) < 0) {
            oldest_free(t);
            return -1;
        }
    return 0;
}

static int state_index(JobState st)
{
    for (int s = 0; s < NSTATES; s++)
        if (order[s] == st)
            return s;
    return -1;
}

/* ---- the API -------------------------------------------------------------- */

void oldest_note(Engine *e, Job *j)
{
    Tube *t = j->tube;
    int s = state_index((JobState)j->state);
    IdHeap *h;

    (void)e;
    if (!t->pol.discard_old_when_full) {
        oldest_free(t); /* the policy changed: nothing to keep up */
        return;
    }
    if (s < 0)
        return;
    h = &t->oldest->by_state[s];
    if (idheap_push(h, j->id) < 0) {
        oldest_free(t); /* built again, complete, at the next pick */
        return;
    }
    /* Mostly stale (jobs that left the state): start again from the
     * container, which costs what the pushes since the last time did. */
    if (h->len > 2 * jobs_in_state(t, s) + 64 && rebuild(t, s) < 0)
        oldest_free(t);
}

/* The old way, when there is no memory for the index: a scan. */
static Job *scan(Tube *t)
{
    Job *best = NULL;

    for (int s = 0; s < NSTATES && !best; s++) {
        if (order[s] == JOB_BURIED) {
            for (List *l = t->buried.next; l != &t->buried; l = l->next) {
                Job *b = job_of_link(l);
                if (!best || b->id < best->id)
                    best = b;
            }
            continue;
        }
        const Heap *src = order[s] == JOB_READY ? &t->ready : &t->delay;
        for (size_t i = 0; i < src->len; i++) {
            Job *j = src->items[i];
            if (!best || j->id < best->id)
                best = j;
        }
    }
    return best;
}

Job *oldest_pick(Engine *e, Tube *t)
{
    if (!t->oldest && build(t) < 0)
        return scan(t);
    for (int s = 0; s < NSTATES; s++) {
        IdHeap *h = &t->oldest->by_state[s];
        while (h->len && !in_state(e, t, s, idheap_top(h)))
            idheap_pop(h);
        if (h->len)
            return job_table_find(&e->jobs, idheap_top(h));
    }
    return NULL;
}

void oldest_free(Tube *t)
{
    if (!t->oldest)
        return;
    for (int s = 0; s < NSTATES; s++)
        idheap_free(&t->oldest->by_state[s]);
    tb_free(t->oldest);
    t->oldest = NULL;
}
