#include "grave.h"

#include "alloc.h"
#include "queue.h"
#include "store.h"

/* The table shrinks once, straight to its size, when every hold is gone. */
void grave_hold_shrink(Engine *e, unsigned who, int on)
{
    unsigned before = e->shrink_holds;

    e->shrink_holds = on ? before | who : before & ~who;
    if (!before != !e->shrink_holds)
        hash_hold_shrink(&e->jobs, e->shrink_holds != 0);
}


static int bury_heap_room(Engine *e)
{
    size_t cap = e->graves_cap ? e->graves_cap * 2 : 4;
    struct Grave *g = tb_realloc(e->graves, cap * sizeof *g);

    if (!g)
        return -1;
    e->graves = g;
    e->graves_cap = cap;
    return 0;
}

/* The ids of t's reserved jobs (they survive a flush). */
static uint64_t *reserved_ids(Engine *e, const Tube *t, uint32_t *n)
{
    uint64_t *ids = tb_malloc((t->reserved_ct + 1) * sizeof *ids);

    *n = 0;
    if (!ids)
        return NULL;
    for (size_t i = 0; i < e->ttr.len && *n < t->reserved_ct; i++) {
        const Job *j = e->ttr.items[i];
        if (j->tube == t)
            ids[(*n)++] = j->id;
    }
    return ids;
}


/* Hand heap h's jobs to the graveyard in O(1): the heap starts afresh. */
static int bury_heap(Engine *e, Heap *h)
{
    if (!h->len)
        return 0;
    if (e->ngraves == e->graves_cap && bury_heap_room(e) < 0)
        return -1;
    e->graves[e->ngraves++] = (struct Grave){h->items, h->len};
    grave_hold_shrink(e, HOLD_GRAVE, 1); /* released when the graveyard is empty */
    e->grave_jobs += h->len;
    h->items = NULL;
    h->len = h->cap = 0;
    return 0;
}

static void free_grave_job(Engine *e, Job *j)
{
    Tube *t = j->tube;

    binlog_unpin(e, j);
    job_table_remove(&e->jobs, j);
    queue_job_free(e, j);
    tube_unref_grave(&e->tubes, t);
    e->grave_jobs--;
}

uint64_t grave_free(Engine *e, uint64_t budget)
{
    uint64_t n = 0;
    List *l;

    while (n < budget && (l = list_first(&e->grave_buried))) {
        list_remove(l);
        free_grave_job(e, job_of_link(l));
        n++;
    }
    while (n < budget && e->ngraves) {
        struct Grave *g = &e->graves[e->ngraves - 1];
        while (n < budget && g->len) {
            free_grave_job(e, g->items[--g->len]);
            n++;
        }
        if (!g->len) {
            tb_free(g->items);
            e->ngraves--;
        }
    }
    if (!e->ngraves && list_empty(&e->grave_buried))
        grave_hold_shrink(e, HOLD_GRAVE, 0);
    return n;
}

int64_t grave_flush_tube(Engine *e, Tube *t)
{
    uint64_t n, *keep;
    uint32_t nkeep;

    if (!(keep = reserved_ids(e, t, &nkeep)))
        return -1;
    /* Room first: two graveyard entries and the record, or nothing. */
    if ((e->ngraves + 2 > e->graves_cap && bury_heap_room(e) < 0) ||
        binlog_flush(e, t, e->next_id - 1, keep, nkeep,
                     t->ready.len + t->delay.len + t->buried_ct) < 0) {
        tb_free(keep);
        return -1;
    }
    n = t->ready.len + t->delay.len + t->buried_ct;
    tube_ref(t); /* its jobs leaving must not free it here */
    /* Every job leaves at once, however many: the ready and delayed heaps
     * and the buried list go to the graveyard and the counters drop now;
     * freeing the jobs is spread over the next loop iterations, so other
     * clients never wait for it. */
    e->jobs_ct.ready -= t->ready.len;
    e->jobs_ct.urgent -= t->urgent_ct;
    e->jobs_ct.delayed -= t->delay.len;
    e->jobs_ct.buried -= t->buried_ct;
    t->grave_refs += n; /* they hold it, invisibly */
    t->urgent_ct = 0;
    t->flushed_bury_seq = t->bury_seq;
    list_splice_tail(&e->grave_buried, &t->buried);
    e->grave_jobs += t->buried_ct;
    t->buried_ct = 0;
    if (n)
        grave_hold_shrink(e, HOLD_GRAVE, 1); /* released when the graveyard is empty */
    bury_heap(e, &t->ready);
    bury_heap(e, &t->delay);
    t->cur_bytes = t->reserved_bytes;
    spill_tube_flushed(e, t);
    queue_ready_update(e, t);
    queue_expiry_reset(e, t);
    tube_timer_update(&e->tubes, t); /* its heaps are empty: never grows */
    tube_unref(&e->tubes, t);
    tb_free(keep);
    return (int64_t)n;
}

int grave_pending(const Engine *e)
{
    return e->ngraves || !list_empty(&e->grave_buried);
}

void grave_fini(Engine *e)
{
    grave_free(e, UINT64_MAX);
    tb_free(e->graves);
    e->graves = NULL;
}
