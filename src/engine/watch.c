#include "watch.h"

#include <string.h>

#include "alloc.h"
#include "core.h"
#include "tube.h"

/* ---- the hash index: open addressing, linear probing ------------------ */

static uint32_t slot_of(const Worker *w, const Tube *t)
{
    uint64_t h = (uint64_t)(uintptr_t)t * 0x9e3779b97f4a7c15ULL;

    return (uint32_t)(h >> 32) & (w->wset_cap - 1);
}

static void set_put(Worker *w, Tube *t, uint32_t idx)
{
    uint32_t i = slot_of(w, t);

    while (w->wset[i].tube)
        i = (i + 1) & (w->wset_cap - 1);
    w->wset[i].tube = t;
    w->wset[i].idx = idx;
}

static int set_build(Worker *w, uint32_t cap)
{
    WatchSlot *old = w->wset;

    w->wset = tb_calloc(cap, sizeof *w->wset);
    if (!w->wset) {
        w->wset = old; /* keep what we had (possibly none) */
        return -1;
    }
    w->wset_cap = cap;
    for (uint32_t i = 0; i < w->nwatch; i++)
        set_put(w, w->watch[i].tube, i);
    tb_free(old);
    return 0;
}

static uint32_t set_lookup(const Worker *w, const Tube *t)
{
    uint32_t i = slot_of(w, t);

    while (w->wset[i].tube && w->wset[i].tube != t)
        i = (i + 1) & (w->wset_cap - 1);
    return i;
}

/* Delete slot i and shift later members of its probe run back, so no
 * tombstones are needed. */
static void set_del(Worker *w, uint32_t i)
{
    uint32_t mask = w->wset_cap - 1, j = i;

    w->wset[i].tube = NULL;
    for (;;) {
        uint32_t home;
        j = (j + 1) & mask;
        if (!w->wset[j].tube)
            return;
        home = slot_of(w, w->wset[j].tube);
        /* Move j back to i when its home is not within (i, j]. */
        if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
            w->wset[i] = w->wset[j];
            w->wset[j].tube = NULL;
            i = j;
        }
    }
}

/* ---- the list --------------------------------------------------------- */

int watch_find(const Worker *w, const Tube *t)
{
    if (w->wset) {
        uint32_t i = set_lookup(w, t);
        return w->wset[i].tube ? (int)w->wset[i].idx : -1;
    }
    for (uint32_t i = 0; i < w->nwatch; i++)
        if (w->watch[i].tube == t)
            return (int)i;
    return -1;
}

static int grow(Worker *w)
{
    uint32_t cap = w->watch_cap * 2;
    Watch *list;

    if (w->watch == &w->watch0) {
        list = tb_malloc(cap * sizeof *list);
        if (list)
            list[0] = w->watch0;
    } else {
        list = tb_realloc(w->watch, cap * sizeof *list);
    }
    if (!list)
        return -1;
    w->watch = list;
    w->watch_cap = cap;
    return 0;
}

int watch_add(Worker *w, Tube *t)
{
    Watch *wt;

    if (w->nwatch == w->watch_cap && grow(w) < 0)
        return -1;
    wt = &w->watch[w->nwatch++];
    wt->tube = t;
    wt->worker = w;
    tube_ref(t);
    t->watching_ct++;
    if (w->wset && w->nwatch * 2 > w->wset_cap)
        set_build(w, w->wset_cap * 2); /* on failure: fuller, still works */
    else if (w->wset)
        set_put(w, t, w->nwatch - 1);
    else if (w->nwatch > WATCH_WIDE)
        set_build(w, 64);
    return 0;
}

void watch_remove(Engine *e, Worker *w, int i)
{
    Tube *t = w->watch[i].tube;
    uint32_t last = --w->nwatch;

    if (w->wset) {
        set_del(w, set_lookup(w, t));
        if ((uint32_t)i != last)
            w->wset[set_lookup(w, w->watch[last].tube)].idx = (uint32_t)i;
    }
    w->watch[i] = w->watch[last];
    if (w->wset && w->nwatch <= WATCH_WIDE / 2) {
        tb_free(w->wset);
        w->wset = NULL;
        w->wset_cap = 0;
    }
    t->watching_ct--;
    tube_unref(&e->tubes, t);
}

void watch_clear(Engine *e, Worker *w)
{
    /* beanstalkd drops items[0] of its swap-removal set until empty: the
     * first, then from the last back to the second. list-tubes shows the
     * order in which tubes disappear. */
    for (uint32_t k = 0; k < w->nwatch; k++) {
        Tube *t = w->watch[k == 0 ? 0 : w->nwatch - k].tube;
        t->watching_ct--;
        tube_unref(&e->tubes, t);
    }
    w->nwatch = 0;
    tb_free(w->wset);
    w->wset = NULL;
    w->wset_cap = 0;
}
