#include "mcstats.h"

#include <stdlib.h>
#include <string.h>

#include "access.h"
#include "alloc.h"
#include "clock.h"
#include "conf.h"
#include "srvstats.h"

/* ---- per-tube counters -------------------------------------------------- */

void mcstats_forget(Tube *t)
{
    memset(&t->mc, 0, sizeof t->mc);
}

/* ---- a tube's figures --------------------------------------------------- */

enum {
    TS_ITEMS, TS_BYTES, TS_TOTAL_ITEMS, TS_LOGSIZE, TS_EXPIRED, TS_MEM_ITEMS,
    TS_MEM_BYTES, TS_AGE, TS_DISCARDED, TS_WAITERS, TS_OPEN, TS_TRANSACTIONS,
    TS_CANCELED, TS_FLUSHES, TS_REWRITES, TS_ROTATIONS, TS_COUNT
};

static const char *const tube_keys[TS_COUNT] = {
    "items", "bytes", "total_items", "logsize", "expired_items", "mem_items",
    "mem_bytes", "age", "discarded", "waiters", "open_transactions",
    "transactions", "canceled_transactions", "total_flushes",
    "journal_rewrites", "journal_rotations",
};

/* Jobs not reserved (ready, delayed, buried) and their body bytes. */
static uint64_t items_of(const TubeStats *t)
{
    return t->ready + t->delayed + t->buried;
}

static uint64_t bytes_of(const TubeStats *t)
{
    return t->bytes - t->reserved_bytes;
}

static void tube_values(const TubeStats *t, uint64_t v[TS_COUNT])
{
    memset(v, 0, TS_COUNT * sizeof *v);
    v[TS_ITEMS] = items_of(t);
    v[TS_BYTES] = bytes_of(t);
    v[TS_TOTAL_ITEMS] = t->total_jobs;
    v[TS_EXPIRED] = t->total_expired;
    /* Read-behind: jobs whose body is on disk only are not in memory (a
     * reserved job's body always is, spill.h). */
    v[TS_MEM_ITEMS] = v[TS_ITEMS] - t->spilled;
    v[TS_MEM_BYTES] = v[TS_BYTES] - t->spilled_bytes;
    v[TS_DISCARDED] = t->total_discarded;
    v[TS_WAITERS] = t->waiting;
    v[TS_OPEN] = t->reserved;
    v[TS_AGE] = t->mc.age_ms;
    v[TS_TRANSACTIONS] = t->mc.transactions;
    v[TS_CANCELED] = t->mc.canceled;
    v[TS_FLUSHES] = t->mc.flushes;
}

/* A fanout parent's children that listener l may see (NULL: all),
 * comma-separated in name order; 0 if it has none (no key then). */
static int children_of(const Tube *t, const Listener *l, Buf *out)
{
    const Tube *v[64], **all = v;
    size_t n = 0, cap = 64;

    if (!t->pol.fanout || list_empty(&t->children))
        return 0;
    for (const List *c = t->children.next; c != &t->children; c = c->next) {
        if (n == cap) {
            const Tube **bigger = tb_malloc(2 * cap * sizeof *bigger);
            if (!bigger) {
                out->oom = 1;
                break;
            }
            memcpy(bigger, all, n * sizeof *all);
            if (all != v)
                tb_free(all);
            all = bigger;
            cap *= 2;
        }
        all[n] = container_of(c, Tube, child_link);
        n += access_tube(l, (Tube *)all[n]);
    }
    if (!n) {
        if (all != v)
            tb_free(all);
        return 0;
    }
    qsort(all, n, sizeof *all, engine_tube_cmp);
    for (size_t i = 0; i < n; i++) {
        if (i)
            buf_append(out, ",", 1);
        buf_append(out, all[i]->name, all[i]->name_len);
    }
    if (all != v)
        tb_free(all);
    return 1;
}

/* ---- stats -------------------------------------------------------------- */

static uint64_t secs(int64_t ns)
{
    return ns > 0 ? (uint64_t)(ns / NS_PER_SEC) : 0;
}

static void global_stats(const Memcache *f, Buf *b)
{
    const McCounters *c = &f->ct;
    ServerStats ss;
    uint64_t bytes, reserved;

    server_stats(f->srv, NULL, &ss);
    engine_body_bytes(&f->srv->eng, &bytes, &reserved);
    buf_printf(b,
               "STAT uptime %llu\r\n"
               "STAT time %llu\r\n"
               "STAT version %s\r\n"
               "STAT curr_items %llu\r\n"
               "STAT total_items %llu\r\n"
               "STAT bytes %llu\r\n"
               "STAT reserved_memory_ratio 0.000\r\n"
               "STAT curr_connections %llu\r\n"
               "STAT total_connections %llu\r\n",
               (unsigned long long)secs(ss.engine.uptime_ns),
               (unsigned long long)secs(clock_wall()), TUBED_VERSION,
               (unsigned long long)(ss.engine.jobs.ready + ss.engine.jobs.delayed +
                                    ss.engine.jobs.buried),
               (unsigned long long)ss.engine.total_jobs,
               (unsigned long long)(bytes - reserved),
               (unsigned long long)ss.conns, (unsigned long long)ss.total_conns);
    buf_printf(b,
               "STAT cmd_get %llu\r\n"
               "STAT cmd_set %llu\r\n"
               "STAT cmd_peek %llu\r\n"
               "STAT get_hits %llu\r\n"
               "STAT get_misses %llu\r\n"
               "STAT bytes_read %llu\r\n"
               "STAT bytes_written %llu\r\n"
               "STAT queue_creates %llu\r\n"
               "STAT queue_deletes %llu\r\n"
               "STAT queue_expires 0\r\n",
               (unsigned long long)c->cmd_get, (unsigned long long)c->cmd_set,
               (unsigned long long)c->cmd_peek, (unsigned long long)c->get_hits,
               (unsigned long long)c->get_misses, (unsigned long long)c->bytes_read,
               (unsigned long long)c->bytes_written,
               (unsigned long long)c->queue_creates,
               (unsigned long long)c->queue_deletes);
}

void mcstats_server(Memcache *f, const Listener *l, Buf *b)
{
    Tube **v;
    Buf kids = {0};
    size_t n;

    global_stats(f, b);
    if (!(v = srvstats_tubes(f->srv, l, &n))) {
        b->oom = 1;
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const Tube *t = v[i];
        TubeStats ts;
        uint64_t val[TS_COUNT];

        engine_tube_stats(&f->srv->eng, t, &ts);
        tube_values(&ts, val);
        for (int k = 0; k < TS_COUNT; k++)
            buf_printf(b, "STAT queue_%s_%s %llu\r\n", ts.name, tube_keys[k],
                       (unsigned long long)val[k]);
        kids.len = 0;
        if (children_of(t, l, &kids))
            buf_printf(b, "STAT queue_%s_children %.*s\r\n", ts.name, (int)kids.len,
                       kids.data ? kids.data : "");
        b->oom |= kids.oom;
    }
    buf_free(&kids);
    tb_free(v);
    buf_append(b, "END\r\n", 5);
}

/* ---- dump_stats --------------------------------------------------------- */

static void dump_tube(const Memcache *f, const Listener *l, const Tube *t, Buf *b, Buf *kids)
{
    TubeStats ts;
    uint64_t val[TS_COUNT];

    engine_tube_stats(&f->srv->eng, t, &ts);
    tube_values(&ts, val);
    buf_printf(b, "queue '%s' {\r\n", ts.name);
    for (int k = 0; k < TS_COUNT; k++)
        buf_printf(b, "  %s=%llu\r\n", tube_keys[k], (unsigned long long)val[k]);
    kids->len = 0;
    if (children_of(t, l, kids))
        buf_printf(b, "  children=%.*s\r\n", (int)kids->len, kids->data ? kids->data : "");
    b->oom |= kids->oom;
    buf_append(b, "}\r\n", 3);
}

typedef struct Name {
    const char *p;
    size_t n;
} Name;

static int by_name(const void *a, const void *b)
{
    const Name *x = a, *y = b;

    return engine_name_cmp(x->p, x->n, y->p, y->n);
}

/* The names of the list, in name order; *n of them. NULL: none given, or
 * out of memory (b->oom set then). */
static Name *given_names(McNames names, size_t *n, Buf *b)
{
    McNames it = names;
    const char *p;
    size_t len, cap = 0;
    Name *v;

    *n = 0;
    while (mc_names_next(&it, &p, &len))
        cap++;
    if (!cap)
        return NULL;
    if (!(v = tb_malloc(cap * sizeof *v))) {
        b->oom = 1;
        return NULL;
    }
    it = names;
    while (*n < cap && mc_names_next(&it, &p, &len))
        v[(*n)++] = (Name){p, len};
    qsort(v, *n, sizeof *v, by_name);
    return v;
}

void mcstats_dump(Memcache *f, const Listener *l, McNames names, Buf *b)
{
    const Engine *e = &f->srv->eng;
    Buf kids = {0};
    size_t n;
    Name *given;

    given = given_names(names, &n, b);
    if (b->oom)
        return;
    if (given) {
        for (size_t i = 0; i < n; i++) {
            Tube *t = engine_tube_find(e, given[i].p, given[i].n);
            if (t && access_tube(l, t))
                dump_tube(f, l, t, b, &kids);
            else /* kestrel's empty block for a queue it does not have */
                buf_printf(b, "queue '%.*s' {\r\n  \r\n}\r\n", (int)given[i].n, given[i].p);
        }
        tb_free(given);
    } else {
        size_t k;
        Tube **v = srvstats_tubes(f->srv, l, &k);
        if (!v) {
            b->oom = 1;
            return;
        }
        for (size_t i = 0; i < k; i++)
            dump_tube(f, l, v[i], b, &kids);
        tb_free(v);
    }
    buf_free(&kids);
    buf_append(b, "END\r\n", 5);
}

/* ---- dump_config -------------------------------------------------------- */

static const char *boolean(bool v)
{
    return v ? "true" : "false";
}

/* The move_expired_to target as this listener may see it: a restricted
 * listener names no tube outside its patterns, this one included. */
static const char *expiry_target(const Listener *l, const TubePolicy *p)
{
    if (!p->move_expired_to[0])
        return "(none)";
    if (!access_name(l, p->move_expired_to, strlen(p->move_expired_to)))
        return "(a tube not served here)";
    return p->move_expired_to;
}

static void config_block(const Listener *l, const char *name, size_t len,
                         const TubePolicy *p, Buf *b)
{
    buf_printf(b, "queue '%.*s' {\r\n", (int)len, name);
    buf_printf(b, "  %s=%llu\r\n", conf_tube_key_name(TK_MAX_ITEMS),
               (unsigned long long)p->max_items);
    buf_printf(b, "  %s=%llu\r\n", conf_tube_key_name(TK_MAX_SIZE),
               (unsigned long long)p->max_size);
    buf_printf(b, "  %s=%u\r\n", conf_tube_key_name(TK_MAX_ITEM_SIZE), p->max_item_size);
    buf_printf(b, "  %s=%s\r\n", conf_tube_key_name(TK_DISCARD_OLD_WHEN_FULL),
               boolean(p->discard_old_when_full));
    buf_printf(b, "  %s=%llums\r\n", conf_tube_key_name(TK_MAX_AGE),
               (unsigned long long)p->max_age_ms);
    buf_printf(b, "  %s=%s\r\n", conf_tube_key_name(TK_MOVE_EXPIRED_TO),
               expiry_target(l, p));
    buf_printf(b, "  %s=%u\r\n", conf_tube_key_name(TK_MAX_TIMEOUTS), p->max_timeouts);
    buf_printf(b, "  %s=%s\r\n", conf_tube_key_name(TK_FANOUT), boolean(p->fanout));
    buf_printf(b, "  %s=%s\r\n", conf_tube_key_name(TK_JOURNAL), boolean(p->journal));
    buf_printf(b, "  %s=%s\r\n", conf_tube_key_name(TK_SYNC_JOURNAL),
               boolean(p->sync_journal));
    buf_printf(b, "  %s=%u\r\n", conf_tube_key_name(TK_PRIORITY), p->priority);
    buf_printf(b, "  %s=%llums\r\n", conf_tube_key_name(TK_TTR),
               (unsigned long long)p->ttr_ms);
    buf_printf(b, "  %s=%llu\r\n", conf_tube_key_name(TK_MAX_MEMORY_SIZE),
               (unsigned long long)p->max_memory_size);
    buf_append(b, "}\r\n", 3);
}

void mcstats_config(Memcache *f, const Listener *l, Buf *b)
{
    const Engine *e = &f->srv->eng;
    const ConfFile *cf = f->srv->cfg.conf;
    Tube *const *list = engine_tube_list(e);
    size_t nsec = cf ? cf->n_exact : 0, n = 0;
    Name *v = tb_malloc((engine_tube_count(e) + nsec + 1) * sizeof *v);

    if (!v) {
        b->oom = 1;
        return;
    }
    /* A listener with tubes names no other tube, live or configured. */
    for (size_t i = 0; i < engine_tube_count(e); i++)
        if (access_tube(l, list[i]))
            v[n++] = (Name){list[i]->name, list[i]->name_len};
    for (size_t i = 0; i < nsec; i++)
        if (access_name(l, cf->exact[i].name, cf->exact[i].len))
            v[n++] = (Name){cf->exact[i].name, cf->exact[i].len};
    qsort(v, n, sizeof *v, by_name);
    for (size_t i = 0; i < n; i++) {
        const Tube *t;
        TubePolicy pol;

        if (i && by_name(&v[i - 1], &v[i]) == 0)
            continue; /* a tube that has its own section */
        t = engine_tube_find(e, v[i].p, v[i].n);
        if (!t)
            conf_policy(cf, v[i].p, v[i].n, f->srv->cfg.max_job_size, &pol);
        config_block(l, v[i].p, v[i].n, t ? &t->pol : &pol, b);
    }
    tb_free(v);
    buf_append(b, "END\r\n", 5);
}
