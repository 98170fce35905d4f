#include "tube.h"

#include <string.h>

#include "alloc.h"
#include "clock.h"
#include "job.h"

static uint64_t tube_node_hash(const HashNode *n)
{
    const Tube *t = container_of(n, Tube, hnode);

    return hash_bytes(t->name, t->name_len);
}

typedef struct {
    const char *name;
    size_t len;
} NameKey;

static int tube_name_eq(const HashNode *n, const void *key)
{
    const Tube *t = container_of(n, Tube, hnode);
    const NameKey *k = key;

    return t->name_len == k->len && memcmp(t->name, k->name, k->len) == 0;
}

static int timer_less(const void *a, const void *b)
{
    return ((const Tube *)a)->timer_at < ((const Tube *)b)->timer_at;
}

static void timer_setpos(void *x, size_t pos)
{
    ((Tube *)x)->timer_pos = pos;
}

int tubes_init(TubeSet *ts)
{
    ts->list = NULL;
    ts->len = ts->cap = 0;
    ts->on_create = ts->on_destroy = NULL;
    ts->hook_arg = NULL;
    ts->freed = 0;
    heap_init(&ts->timers, timer_less, timer_setpos);
    return hash_init(&ts->by_name, tube_node_hash);
}

static void tube_destroy(Tube *t)
{
    heap_free(&t->ready);
    heap_free(&t->delay);
    heap_free(&t->expiry);
    age_ring_clear(&t->age);
    tb_free(t->waitq);
    tb_free(t);
}

void tubes_free(TubeSet *ts)
{
    for (size_t i = 0; i < ts->len; i++)
        tube_destroy(ts->list[i]);
    tb_free(ts->list);
    heap_free(&ts->timers);
    hash_free(&ts->by_name);
    ts->list = NULL;
    ts->len = ts->cap = 0;
}

Tube *tubes_find(const TubeSet *ts, const char *name, size_t len)
{
    NameKey k = {name, len};
    HashNode *n = hash_find(&ts->by_name, hash_bytes(name, len), tube_name_eq, &k);

    return n ? container_of(n, Tube, hnode) : NULL;
}

static int list_reserve(TubeSet *ts)
{
    Tube **nl;
    size_t cap;

    if (ts->len < ts->cap)
        return 0;
    cap = ts->cap ? ts->cap * 2 : 16;
    nl = tb_realloc(ts->list, cap * sizeof *nl);
    if (!nl)
        return -1;
    ts->list = nl;
    ts->cap = cap;
    return 0;
}

static void list_shrink(TubeSet *ts)
{
    Tube **nl;

    if (ts->cap <= 16 || ts->len >= ts->cap / 4)
        return;
    nl = tb_realloc(ts->list, ts->cap / 2 * sizeof *nl);
    if (nl) { /* best effort */
        ts->list = nl;
        ts->cap /= 2;
    }
}

Tube *tubes_get(TubeSet *ts, const char *name, size_t len)
{
    Tube *t = tubes_find(ts, name, len);

    if (t)
        return t;
    if (list_reserve(ts) < 0)
        return NULL;
    t = tb_calloc(1, sizeof *t);
    if (!t)
        return NULL;
    memcpy(t->name, name, len);
    t->name_len = (uint8_t)len;
    heap_init(&t->ready, job_ready_less, job_set_heap_pos);
    heap_init(&t->delay, job_deadline_less, job_set_heap_pos);
    heap_init(&t->expiry, job_expiry_less, job_set_exp_pos);
    list_init(&t->buried);
    list_init(&t->children);
    list_init(&t->child_link);
    list_init(&t->ready_link);
    list_init(&t->post_link);
    t->timer_at = INT64_MAX;
    t->list_pos = ts->len;
    ts->list[ts->len++] = t;
    hash_insert(&ts->by_name, &t->hnode);
    if (ts->on_create)
        ts->on_create(ts->hook_arg, t);
    return t;
}

/* Take t out of the set: no longer found by name, listed or timed. */
static void unlink_tube(TubeSet *ts, Tube *t)
{
    if (ts->on_destroy)
        ts->on_destroy(ts->hook_arg, t);
    if (t->timer_at != INT64_MAX)
        heap_remove(&ts->timers, t->timer_pos);
    t->timer_at = INT64_MAX;
    hash_remove(&ts->by_name, &t->hnode);
    ts->list[t->list_pos] = ts->list[--ts->len];
    ts->list[t->list_pos]->list_pos = t->list_pos;
    list_shrink(ts);
    t->unlinked = 1;
}

void tube_unref(TubeSet *ts, Tube *t)
{
    if (--t->refs > t->grave_refs)
        return;
    /* Only flushed jobs waiting to be freed hold it: the tube is gone for
     * every client now (a new one of the same name may be made), and is
     * freed with the last of them. */
    if (!t->unlinked)
        unlink_tube(ts, t);
    if (t->refs > 0)
        return;
    tube_destroy(t);
    ts->freed++;
}

void tube_unref_grave(TubeSet *ts, Tube *t)
{
    t->grave_refs--;
    tube_unref(ts, t);
}

static int64_t tube_due(const Tube *t)
{
    int64_t due = INT64_MAX;
    const Job *j = heap_top(&t->delay);
    const AgeEntry *a;

    if (j)
        due = job_ext(j)->deadline;
    if (t->pause && t->unpause_at < due)
        due = t->unpause_at;
    if ((j = heap_top(&t->expiry)) && job_ext(j)->expires < due)
        due = job_ext(j)->expires;
    if (t->pol.max_age_ms && (a = age_ring_front(&t->age))) {
        int64_t at = a->created + (int64_t)t->pol.max_age_ms * NS_PER_MSEC;
        if (at < t->age_retry_at)
            at = t->age_retry_at;
        if (at < due)
            due = at;
    }
    return due;
}

int tube_timer_update(TubeSet *ts, Tube *t)
{
    int64_t due = tube_due(t);

    if (due == t->timer_at)
        return 0;
    if (due == INT64_MAX) {
        heap_remove(&ts->timers, t->timer_pos);
        t->timer_at = INT64_MAX;
        return 0;
    }
    if (t->timer_at == INT64_MAX) {
        t->timer_at = due;
        if (heap_insert(&ts->timers, t) < 0) {
            t->timer_at = INT64_MAX;
            return -1;
        }
        return 0;
    }
    t->timer_at = due;
    heap_fix(&ts->timers, t->timer_pos);
    return 0;
}
