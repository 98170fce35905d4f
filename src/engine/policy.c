#include "policy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "clock.h"
#include "log.h"
#include "oldest.h"
#include "queue.h"
#include "store.h"

/* ---- resolving ---------------------------------------------------------- */

static void resolve(const Engine *e, Tube *t)
{
    conf_policy(e->cfg->conf, t->name, t->name_len, e->cfg->max_job_size, &t->pol);
}

static Tube *find_parent(const Engine *e, const Tube *t)
{
    return t->parent_len ? tubes_find(&e->tubes, t->name, t->parent_len) : NULL;
}

/* Link a registered child to its parent tube if that exists, else keep it
 * among the orphans until the parent is created. */
static void link_child(Engine *e, Tube *c)
{
    Tube *p = find_parent(e, c);

    list_remove(&c->child_link);
    c->parent = p;
    list_insert_tail(p ? &p->children : &e->orphans, &c->child_link);
}

/* Whether t's fanout parent (by name) has fanout on in the config in force. */
static bool parent_fanout(const Engine *e, const Tube *t)
{
    TubePolicy pp;

    if (!t->parent_len)
        return false;
    conf_policy(e->cfg->conf, t->name, t->parent_len, e->cfg->max_job_size, &pp);
    return pp.fanout;
}

static void on_create(void *arg, Tube *t)
{
    Engine *e = arg;
    const char *plus = memchr(t->name, '+', t->name_len);

    resolve(e, t);
    t->parent_len = plus && plus > t->name ? (uint8_t)(plus - t->name) : 0;
    t->parent_fanout = parent_fanout(e, t);
    /* A new tube may be the parent of children registered before it. */
    for (List *n = e->orphans.next; n != &e->orphans;) {
        Tube *c = container_of(n, Tube, child_link);
        n = n->next;
        if (c->parent_len == t->name_len && !memcmp(c->name, t->name, t->name_len))
            link_child(e, c);
    }
}

static void on_destroy(void *arg, Tube *t)
{
    Engine *e = arg;
    List *n;

    /* Its children stay registered, waiting for a parent of that name. */
    while ((n = list_first(&t->children))) {
        Tube *c = container_of(n, Tube, child_link);
        list_remove(n);
        c->parent = NULL;
        list_insert_tail(&e->orphans, &c->child_link);
    }
    list_remove(&t->child_link);
    oldest_free(t);
    spill_tube_gone(e, t);
}

void policy_init(Engine *e)
{
    list_init(&e->orphans);
    e->tubes.on_create = on_create;
    e->tubes.on_destroy = on_destroy;
    e->tubes.hook_arg = e;
}

/* ---- limits ------------------------------------------------------------- */

uint32_t policy_max_body(const Engine *e, const Tube *t)
{
    return t->pol.max_item_size < e->cfg->max_job_size ? t->pol.max_item_size
                                                        : e->cfg->max_job_size;
}

static uint64_t jobs_in(const Tube *t)
{
    return t->ready.len + t->delay.len + t->reserved_ct + t->buried_ct;
}

static int fits(const Tube *t, uint64_t jobs, uint64_t bytes, uint32_t n)
{
    return (!t->pol.max_items || jobs + 1 <= t->pol.max_items) &&
           (!t->pol.max_size || bytes + n <= t->pol.max_size);
}

/* The job a full tube gives up first is oldest_pick()'s: its oldest ready
 * job, else its oldest delayed one, else its oldest buried one. */
int policy_make_room(Engine *e, Tube *t, uint32_t n)
{
    if (fits(t, jobs_in(t), t->cur_bytes, n))
        return 0;
    /* Reserved jobs are never discarded: if the rest cannot make room,
     * nothing is deleted. */
    if (!t->pol.discard_old_when_full || !fits(t, t->reserved_ct, t->reserved_bytes, n))
        return -1;
    tube_ref(t); /* discarding its last job must not free it */
    while (!fits(t, jobs_in(t), t->cur_bytes, n)) {
        Job *j = oldest_pick(e, t);
        t->total_discarded++;
        binlog_delete(e, j);
        queue_delete(e, j);
    }
    tube_unref(&e->tubes, t);
    return 0;
}

/* ---- moving ------------------------------------------------------------- */

/* policy_move() with dst held by the caller. */
static int move_held(Engine *e, Job *j, Tube *dst, int to_ready)
{
    Tube *src = j->tube;
    JobExt *x;
    int64_t entered;
    int was = j->state, ok;

    if (was == JOB_RESERVED || !(x = job_ext_get(j)))
        return -1;
    /* Its record is written again in dst: its body must be here. */
    if (spill_load(e, j) < 0)
        return -1;
    j->ringed = 0; /* src's ring has it; dst's does not */
    /* Everything that can fail first: heap room, and log room for the
     * record the job will have (in dst, its clock restarted); only then
     * the discards that make room in dst, so a move refused for want of
     * log room has deleted nothing. */
    entered = x->entered;
    j->tube = dst;
    x->entered = e->now;
    ok = heap_reserve(&dst->ready, dst->ready.len + 1) == 0 &&
         heap_reserve(&dst->delay, dst->delay.len + 1) == 0 &&
         heap_reserve(&dst->expiry, dst->expiry.len + 1) == 0 &&
         binlog_reserve_put(e, j) == 0;
    j->tube = src;
    x->entered = entered;
    if (!ok || (dst != src && policy_make_room(e, dst, j->body_size) < 0))
        return -1;
    binlog_leave(e, j, dst->pol.journal);
    queue_detach(e, j);
    queue_expiry_remove(e, j);
    src->cur_bytes -= j->body_size;
    tube_ref(dst);
    j->tube = dst;
    dst->cur_bytes += j->body_size;
    x->entered = e->now;
    x->unaged = 1; /* its clock restarted: the heap's side (queue.h) */
    if (to_ready || was == JOB_READY) {
        if (queue_enqueue(e, j, 0) < 0)
            queue_bury(e, j);
    } else if (queue_place(e, j) < 0) {
        queue_bury(e, j);
    }
    queue_expiry_update(e, j); /* room was reserved */
    binlog_put(e, j);
    spill_check_budget(e, dst); /* a body that came in may go to disk */
    tube_unref(&e->tubes, src);
    return 0;
}

int policy_move(Engine *e, Job *j, Tube *dst, int to_ready)
{
    int r;

    /* Making room in dst may delete its last job, and a failed move may
     * leave it unused: it lives until the move is over either way. */
    tube_ref(dst);
    r = move_held(e, j, dst, to_ready);
    tube_unref(&e->tubes, dst);
    return r;
}

/* ---- expiry ------------------------------------------------------------- */

static void retry_later(Engine *e, Job *j)
{
    job_ext(j)->expires = e->now + NS_PER_SEC;
    heap_fix(&j->tube->expiry, job_ext(j)->exp_pos);
    tube_timer_update(&e->tubes, j->tube);
}

/* Move an expired job to its tube's move_expired_to: 0, or -1 if it could
 * not go (the target is full and cannot discard, or out of memory). The
 * client's expiry stays behind, as in kestrel (the dead-letter queue gets
 * the item without one): kept, it would expire again at once in the
 * dead-letter tube, and bounce for ever between two tubes that name each
 * other. Only the dead-letter tube's own max_age applies there. */
static int move_expired(Engine *e, Job *j)
{
    const char *to = j->tube->pol.move_expired_to;
    Tube *dst = tubes_get(&e->tubes, to, strlen(to));
    int64_t exptime = job_ext(j) ? job_ext(j)->exptime : 0;
    int r;

    if (!dst)
        return -1;
    tube_ref(dst); /* created just now, it must outlive a failed move */
    if (exptime)
        job_ext(j)->exptime = 0;
    r = policy_move(e, j, dst, 1);
    if (r < 0 && exptime)
        job_ext(j)->exptime = exptime;
    tube_unref(&e->tubes, dst);
    return r;
}

static void expire_now(Engine *e, Job *j)
{
    Tube *t = j->tube;

    if (t->pol.move_expired_to[0]) {
        /* Moving its last job out may free t (a job released or given
         * back by a worker no longer watching it): held until counted. */
        tube_ref(t);
        if (move_expired(e, j) == 0) {
            t->total_expired++;
        } else {
            /* The dead-letter tube is full: the job stays where it was
             * and is tried again in a second. */
            log_warn("tube %s: cannot move expired job %llu to %s (full); retrying",
                     t->name, (unsigned long long)j->id, t->pol.move_expired_to);
            if (queue_age_member(j)) {
                t->age_retry_at = e->now + NS_PER_SEC; /* the ring's front waits */
                tube_timer_update(&e->tubes, t); /* timed already: cannot fail */
            } else if (job_ext(j) && job_ext(j)->expires)
                retry_later(e, j);
        }
        tube_unref(&e->tubes, t);
        return;
    }
    t->total_expired++;
    binlog_delete(e, j);
    queue_delete(e, j);
}

/* Expire j found past its time, and before it every job of its tube that
 * was due earlier, in the sweep's order: a lookup of a later job (a peek,
 * stats-job) must not let it pass an earlier one that the sweep has not
 * reached yet (the earlier one moved to a full dead-letter tube would then
 * discard it). These are due now, so the sweep would take them next. */
static void expire_in_order(Engine *e, Job *j)
{
    Tube *t = j->tube;
    uint64_t id = j->id;

    tube_ref(t);
    for (;;) {
        Job *k = job_table_find(&e->jobs, id);
        if (!k || job_dead(k) || k->tube != t)
            break; /* j expired: deleted or moved */
        if (policy_expire_due(e, t, 1) == 0) {
            /* Nothing of t is due by the sweep's order: k's move failed
             * and waits for its retry, or (should not be) k is in neither
             * order, so it expires at once as before. */
            if (!(queue_age_member(k) && t->age_retry_at > e->now) &&
                !(job_ext(k) && job_ext(k)->expires > e->now))
                expire_now(e, k);
            break;
        }
    }
    tube_unref(&e->tubes, t);
}

int policy_due(const Engine *e, const Job *j)
{
    int64_t exp;

    if (j->state == JOB_RESERVED || e->passive)
        return 0;
    exp = queue_expiry_of(j);
    if (!exp || exp > e->now)
        return 0;
    if (job_ext(j) && job_ext(j)->expires > e->now)
        return 0; /* a move that failed waits for its retry */
    if (queue_age_member(j) && j->tube->age_retry_at > e->now)
        return 0; /* the same, for the jobs of the age ring */
    return 1;
}

int policy_check(Engine *e, Job *j)
{
    if (!policy_due(e, j))
        return 0;
    expire_in_order(e, j);
    return 1;
}

/* When the front of t's age ring is due, INT64_MAX if never. */
static int64_t age_due(const Tube *t)
{
    const AgeEntry *a = t->pol.max_age_ms ? age_ring_front(&t->age) : NULL;
    int64_t at;

    if (!a)
        return INT64_MAX;
    at = a->created + (int64_t)t->pol.max_age_ms * NS_PER_MSEC;
    return at < t->age_retry_at ? t->age_retry_at : at;
}

/* The front of t's age ring is due: expire its job, or drop the entry if
 * it is stale. 0, or -1 when the front must wait (a move failed: then
 * t->age_retry_at says until when). */
static int expire_age_front(Engine *e, Tube *t)
{
    AgeCtx c = {e, t};
    AgeEntry a = *age_ring_front(&t->age);
    Job *j;

    if (!queue_age_valid(&c, &a)) {
        age_ring_pop(&t->age, 0);
    } else if ((j = job_table_find(&e->jobs, a.id))->state == JOB_RESERVED) {
        /* It expires when it comes back (engine.c checks then), from the
         * heap's side. */
        age_ring_pop(&t->age, 1);
        job_ext(j)->unaged = 1;
    } else {
        expire_now(e, j); /* deleted or moved: its entry went stale */
        if (queue_age_valid(&c, &a))
            return -1; /* still here: the move failed, retried in a second */
        age_ring_pop(&t->age, 0);
    }
    /* A new front: the tube is timed already, so this cannot fail. */
    tube_timer_update(&e->tubes, t);
    return 0;
}

uint64_t policy_expire_due(Engine *e, Tube *t, uint64_t budget)
{
    uint64_t n = 0;

    tube_ref(t);
    while (n < budget) {
        Job *j = heap_top(&t->expiry);
        int64_t heap_at = j ? job_ext(j)->expires : INT64_MAX, ring_at = age_due(t);

        if (ring_at <= e->now && ring_at <= heap_at) {
            n++;
            expire_age_front(e, t); /* if it must wait, age_due() says so */
            continue;
        }
        if (heap_at > e->now)
            break;
        n++;
        if (j->state == JOB_RESERVED) {
            /* It expires when it comes back (engine.c checks then). */
            queue_expiry_remove(e, j);
            continue;
        }
        expire_now(e, j);
    }
    tube_unref(&e->tubes, t);
    return n;
}

void policy_expire_all(Engine *e)
{
    if (e->passive)
        return; /* a replica: the primary's records expire jobs */
    for (size_t i = 0; i < e->tubes.len; i++) {
        Tube *t = e->tubes.list[i];
        const Job *j = heap_top(&t->expiry);

        if ((j && job_ext(j)->expires <= e->now) || age_due(t) <= e->now) {
            size_t before = e->tubes.len;
            policy_expire_due(e, t, UINT64_MAX);
            if (e->tubes.len < before)
                i = (size_t)-1; /* the list changed under us: start again */
        }
    }
}

/* ---- reload ------------------------------------------------------------- */

static void unage_one(Job *j)
{
    if (job_ext(j))
        job_ext(j)->unaged = 1;
}

/* Every job of t takes the heap's side of expiry (queue.h). */
static void unage(Engine *e, Tube *t)
{
    for (size_t i = 0; i < t->ready.len; i++)
        unage_one(t->ready.items[i]);
    for (size_t i = 0; i < t->delay.len; i++)
        unage_one(t->delay.items[i]);
    for (List *l = t->buried.next; l != &t->buried; l = l->next)
        unage_one(job_of_link(l));
    for (size_t i = 0; i < e->ttr.len; i++)
        if (((Job *)e->ttr.items[i])->tube == t)
            unage_one(e->ttr.items[i]);
}

/* Every job of t may gain, lose or change its expiry. queue_expiry_update()
 * touches only the expiry and timer heaps, so the jobs are visited where
 * they are. It cannot fail: policy_reload_prepare() made the room. */
static void rekey(Engine *e, Tube *t, uint64_t old_age)
{
    if (!t->pol.max_age_ms) {
        /* No max_age: no ring; its members' markers mean nothing now. */
        age_ring_clear(&t->age);
        t->age_retry_at = 0;
    } else if (!old_age) {
        /* max_age from now on: the jobs there already take the heap's side
         * (policy_reload_prepare() gave each its JobExt). */
        unage(e, t);
    }
    /* A new max_age, or none, moves the ring's due time (room for the
     * timer heap was made by policy_reload_prepare()). */
    tube_timer_update(&e->tubes, t);
    if (!t->pol.max_age_ms && !t->expiry.len)
        return;
    for (size_t i = 0; i < t->ready.len; i++)
        queue_expiry_update(e, t->ready.items[i]);
    for (size_t i = 0; i < t->delay.len; i++)
        queue_expiry_update(e, t->delay.items[i]);
    for (List *l = t->buried.next; l != &t->buried; l = l->next)
        queue_expiry_update(e, job_of_link(l));
    for (size_t i = 0; i < e->ttr.len; i++)
        if (((Job *)e->ttr.items[i])->tube == t)
            queue_expiry_update(e, e->ttr.items[i]);
}

int policy_reload_prepare(Engine *e, const ConfFile *next)
{
    for (size_t i = 0; i < e->tubes.len; i++) {
        Tube *t = e->tubes.list[i];
        TubePolicy p;

        conf_policy(next, t->name, t->name_len, e->cfg->max_job_size, &p);
        if (!p.max_age_ms || p.max_age_ms == t->pol.max_age_ms)
            continue;
        /* Each of its jobs may enter the expiry heap: room for all, and
         * the JobExt that holds the time (only a ready job may lack one).
         * A tube with a max_age already keeps its age ring's jobs there,
         * in the same order under any max_age: they need neither. */
        if (heap_reserve(&t->expiry, t->ready.len + t->delay.len + t->buried_ct +
                                         t->reserved_ct) < 0)
            return -1;
        for (size_t k = 0; k < t->ready.len && !t->pol.max_age_ms; k++)
            if (!job_ext_get(t->ready.items[k]))
                return -1;
    }
    /* Any tube may become timed. */
    return heap_reserve(&e->tubes.timers, e->tubes.len);
}

void policy_reload(Engine *e)
{
    /* Tubes whose jobs gain or change an expiry first, then those whose
     * jobs lose it: a heap that empties may give its array back, and the
     * room policy_reload_prepare() took must still be there for the rest. */
    for (size_t i = 0; i < e->tubes.len; i++) {
        Tube *t = e->tubes.list[i];
        TubePolicy p;

        conf_policy(e->cfg->conf, t->name, t->name_len, e->cfg->max_job_size, &p);
        if (p.max_age_ms && p.max_age_ms != t->pol.max_age_ms) {
            uint64_t old = t->pol.max_age_ms;
            memcpy(&t->pol, &p, sizeof p); /* bytes and all, as conf_policy() */
            rekey(e, t, old);
        }
    }
    for (size_t i = 0; i < e->tubes.len; i++) {
        Tube *t = e->tubes.list[i];
        uint64_t age = t->pol.max_age_ms;

        resolve(e, t);
        if (age != t->pol.max_age_ms)
            rekey(e, t, age);
    }
    /* Read-behind: a tube now over its budget spills what it holds, a
     * batch per loop iteration (engine.c). */
    for (size_t i = 0; i < e->tubes.len; i++) {
        Tube *t = e->tubes.list[i];

        spill_check_budget(e, t);
    }
    /* Children of a parent whose fanout is now off are let go. A tube
     * named P+CHILD that exists when P's fanout turns on is a child from
     * now on, as if a client named it now: a worker already watching it
     * gets the copies of what is put into P after the reload (and the
     * children let go by an earlier reload that turned fanout off come
     * back the same way). On a replica the primary's records decide. */
    for (size_t i = 0; i < e->tubes.len; i++) {
        Tube *t = e->tubes.list[i];
        bool was = t->parent_fanout;

        t->parent_fanout = parent_fanout(e, t);
        if (!t->registered && t->parent_fanout && !was && !e->passive)
            policy_named(e, t); /* registers: adds a reference, removes no tube */
    }
    /* Resolved once above: the restarts below only compare flags. */
    for (size_t i = 0; i < e->tubes.len; i++) {
        Tube *t = e->tubes.list[i];

        if (t->registered && !t->parent_fanout) {
            policy_unregister(e, t);
            i = (size_t)-1; /* the tube may be gone: start again */
        }
    }
}

/* ---- fanout ------------------------------------------------------------- */

void policy_named(Engine *e, Tube *t)
{
    TubePolicy pp;

    if (t->registered || !t->parent_len)
        return;
    conf_policy(e->cfg->conf, t->name, t->parent_len, e->cfg->max_job_size, &pp);
    if (!pp.fanout)
        return;
    t->registered = 1;
    tube_ref(t);
    link_child(e, t);
    binlog_child(e, t, 1); /* journaled like every other change */
}

void policy_unregister(Engine *e, Tube *t)
{
    if (!t->registered)
        return;
    t->registered = 0;
    list_remove(&t->child_link);
    t->parent = NULL;
    binlog_child(e, t, 0);
    tube_unref(&e->tubes, t);
}

int policy_child_apply(Engine *e, const char *name, size_t len, int on)
{
    Tube *t = on ? tubes_get(&e->tubes, name, len) : tubes_find(&e->tubes, name, len);

    if (!t)
        return on ? -1 : 0;
    if (!on) {
        policy_unregister(e, t);
        return 0;
    }
    t->child_sweep = 0; /* the primary has it (engine_sweep_end) */
    if (!t->registered) {
        t->registered = 1;
        tube_ref(t);
        link_child(e, t);
    }
    binlog_child(e, t, 1);
    return 0;
}

void policy_fanout(Engine *e, Tube *t, const Job *j)
{
    if (!t->pol.fanout)
        return;
    for (List *n = t->children.next; n != &t->children; n = n->next) {
        Tube *c = container_of(n, Tube, child_link);
        const JobExt *x = job_ext_view(j);
        Job *copy;

        /* A child follows its own keys: too big for it, or no room. */
        if (j->body_size > policy_max_body(e, c)) {
            c->total_discarded++;
            continue;
        }
        /* Its id is taken only once it has room (below). */
        copy = queue_job_new_for(e, c, e->next_id, j->body_size, 0);
        if (!copy || ((x->delay || x->exptime) && !job_ext_get(copy))) {
            queue_job_free(e, copy);
            c->total_discarded++;
            continue;
        }
        memcpy(job_body_mut(copy), job_body(j), j->body_size);
        copy->pri = j->pri;
        copy->ttr = j->ttr;
        job_set_created(copy, e->now);
        if (x->delay)
            job_ext(copy)->delay = x->delay;
        /* A memcache set's exptime is the item's, copies included (kestrel
         * adds each child's copy with the same expiry); the child's own
         * max_age still clamps it. */
        if (x->exptime)
            job_ext(copy)->exptime = x->exptime;
        copy->tube = c;
        /* Log room before the discards that make room in c: a copy that
         * cannot be logged must not have cost c its old jobs. */
        if (binlog_reserve_put(e, copy) < 0 || policy_make_room(e, c, j->body_size) < 0) {
            queue_job_free(e, copy);
            c->total_discarded++;
            continue;
        }
        e->next_id++;
        if (queue_add(e, copy, c) == -2) {
            queue_job_free(e, copy);
            c->total_discarded++;
            continue;
        }
        binlog_put(e, copy);
    }
}

/* DIR/fanout, one registered child per line: where a version before the
 * BL_CHILD record kept them. Read once: each child is registered and
 * journaled, and the file goes once those records are on disk. */
static int migrate_children(Engine *e, char *err, size_t errlen)
{
    char path[4096], line[512];
    FILE *f;
    size_t n = 0;

    /* An older version wrote DIR/fanout.tmp then renamed it; a crash in
     * between left the temporary, which nothing reads any more. */
    snprintf(path, sizeof path, "%s/fanout.tmp", e->binlog.dir);
    if (unlink(path) < 0 && errno != ENOENT)
        log_warn("fanout: cannot remove %s: %s", path, strerror(errno));
    snprintf(path, sizeof path, "%s/fanout", e->binlog.dir);
    f = fopen(path, "r");
    if (!f)
        return errno == ENOENT ? 0 : (snprintf(err, errlen, "cannot read %s: %s", path,
                                               strerror(errno)), -1);
    while (fgets(line, sizeof line, f)) {
        size_t len = strcspn(line, "\n");
        const char *plus = memchr(line, '+', len);

        if (!tube_name_valid(line, len) || !plus || plus == line)
            continue; /* not a child's name: dropped with the file */
        if (policy_child_apply(e, line, len, 1) < 0) {
            fclose(f);
            snprintf(err, errlen, "out of memory reading %s", path);
            return -1;
        }
        n++;
    }
    fclose(f);
    /* Kept when the records could not be written: read again next start
     * (a child registered twice is registered once). */
    if (binlog_write_now(e) < 0)
        return 0;
    if (unlink(path) < 0)
        log_warn("fanout: cannot remove %s: %s", path, strerror(errno));
    else if (!e->cfg->fsync_never)
        fsync(e->binlog.dirfd);
    log_info("fanout: %zu children from %s now journaled in the binlog; file removed", n,
             path);
    return 0;
}

int policy_children_replayed(Engine *e, char *err, size_t errlen)
{
    /* The replay registered them (BL_CHILD records); link each to its
     * parent, or keep it among the orphans until the parent exists. */
    for (size_t i = 0; i < e->tubes.len; i++)
        if (e->tubes.list[i]->registered)
            link_child(e, e->tubes.list[i]);
    return migrate_children(e, err, errlen);
}
