#include "watch.h"

#include <string.h>

#include "alloc.h"
#include "server.h"
#include "tube.h"

/* ---- the hash index: open addressing, linear probing ------------------ */

static uint32_t slot_of(const Conn *c, const Tube *t)
{
    uint64_t h = (uint64_t)(uintptr_t)t * 0x9e3779b97f4a7c15ULL;

    return (uint32_t)(h >> 32) & (c->wset_cap - 1);
}

static void set_put(Conn *c, Tube *t, uint32_t idx)
{
    uint32_t i = slot_of(c, t);

    while (c->wset[i].tube)
        i = (i + 1) & (c->wset_cap - 1);
    c->wset[i].tube = t;
    c->wset[i].idx = idx;
}

static int set_build(Conn *c, uint32_t cap)
{
    WatchSlot *old = c->wset;

    c->wset = tb_calloc(cap, sizeof *c->wset);
    if (!c->wset) {
        c->wset = old; /* keep what we had (possibly none) */
        return -1;
    }
    c->wset_cap = cap;
    for (uint32_t i = 0; i < c->nwatch; i++)
        set_put(c, c->watch[i].tube, i);
    tb_free(old);
    return 0;
}

static uint32_t set_lookup(const Conn *c, const Tube *t)
{
    uint32_t i = slot_of(c, t);

    while (c->wset[i].tube && c->wset[i].tube != t)
        i = (i + 1) & (c->wset_cap - 1);
    return i;
}

/* Delete slot i and shift later members of its probe run back, so no
 * tombstones are needed. */
static void set_del(Conn *c, uint32_t i)
{
    uint32_t mask = c->wset_cap - 1, j = i;

    c->wset[i].tube = NULL;
    for (;;) {
        uint32_t home;
        j = (j + 1) & mask;
        if (!c->wset[j].tube)
            return;
        home = slot_of(c, c->wset[j].tube);
        /* Move j back to i when its home is not within (i, j]. */
        if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
            c->wset[i] = c->wset[j];
            c->wset[j].tube = NULL;
            i = j;
        }
    }
}

/* ---- the list --------------------------------------------------------- */

int watch_find(const Conn *c, const Tube *t)
{
    if (c->wset) {
        uint32_t i = set_lookup(c, t);
        return c->wset[i].tube ? (int)c->wset[i].idx : -1;
    }
    for (uint32_t i = 0; i < c->nwatch; i++)
        if (c->watch[i].tube == t)
            return (int)i;
    return -1;
}

static int grow(Conn *c)
{
    uint32_t cap = c->watch_cap * 2;
    Watch *w;

    if (c->watch == &c->watch0) {
        w = tb_malloc(cap * sizeof *w);
        if (w)
            w[0] = c->watch0;
    } else {
        w = tb_realloc(c->watch, cap * sizeof *w);
    }
    if (!w)
        return -1;
    for (uint32_t i = 0; i < c->nwatch; i++)
        list_init(&w[i].wait_link); /* not waiting: nothing is linked */
    c->watch = w;
    c->watch_cap = cap;
    return 0;
}

int watch_add(Conn *c, Tube *t)
{
    Watch *w;

    if (c->nwatch == c->watch_cap && grow(c) < 0)
        return -1;
    w = &c->watch[c->nwatch++];
    w->tube = t;
    w->conn = c;
    list_init(&w->wait_link);
    tube_ref(t);
    t->watching_ct++;
    if (c->wset && c->nwatch * 2 > c->wset_cap)
        set_build(c, c->wset_cap * 2); /* on failure: fuller, still works */
    else if (c->wset)
        set_put(c, t, c->nwatch - 1);
    else if (c->nwatch > WATCH_WIDE)
        set_build(c, 64);
    return 0;
}

void watch_remove(Conn *c, int i)
{
    Tube *t = c->watch[i].tube;
    uint32_t last = --c->nwatch;

    if (c->wset) {
        set_del(c, set_lookup(c, t));
        if ((uint32_t)i != last)
            c->wset[set_lookup(c, c->watch[last].tube)].idx = (uint32_t)i;
    }
    c->watch[i] = c->watch[last];
    list_init(&c->watch[i].wait_link);
    if (c->wset && c->nwatch <= WATCH_WIDE / 2) {
        tb_free(c->wset);
        c->wset = NULL;
        c->wset_cap = 0;
    }
    t->watching_ct--;
    tube_unref(&c->srv->tubes, t);
}

void watch_clear(Conn *c)
{
    /* beanstalkd drops items[0] of its swap-removal set until empty: the
     * first, then from the last back to the second. list-tubes shows the
     * order in which tubes disappear. */
    for (uint32_t k = 0; k < c->nwatch; k++) {
        Tube *t = c->watch[k == 0 ? 0 : c->nwatch - k].tube;
        t->watching_ct--;
        tube_unref(&c->srv->tubes, t);
    }
    c->nwatch = 0;
    tb_free(c->wset);
    c->wset = NULL;
    c->wset_cap = 0;
}
