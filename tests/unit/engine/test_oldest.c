/* Unit tests for oldest.c: the discard order of a full tube, kept by an
 * index of ids, against a brute-force scan of the tube's containers after
 * every step of a random walk through the engine's operations, with and
 * without allocation failures. */
#include <stdint.h>
#include <string.h>

#include "alloc.h"
#include "engine.h"
#include "event.h"
#include "oldest.h"
#include "unit.h"

typedef struct World {
    EvLoop loop;
    Config cfg;
    Engine e;
    Worker w;
    Tube *t;
} World;

static void no_wake(Worker *w, WaitEnd how, Job *j) { (void)w; (void)how; (void)j; }
static const WorkerOps ops = {.wake = no_wake};

static void world_init(World *x)
{
    memset(x, 0, sizeof *x);
    opts_defaults(&x->cfg);
    ck_assert_int_eq(ev_init(&x->loop), 0);
    ck_assert_int_eq(engine_init(&x->e, &x->cfg, &x->loop), 0);
    worker_init(&x->e, &x->w, &ops);
    x->t = engine_tube(&x->e, "d", 1);
    ck_assert_ptr_nonnull(x->t);
    engine_tube_ref(x->t);
    x->t->pol.discard_old_when_full = 1;
}

static void world_free(World *x)
{
    worker_release_all(&x->e, &x->w);
    worker_fini(&x->e, &x->w);
    engine_tube_unref(&x->e, x->t);
    engine_free(&x->e);
    ev_close(&x->loop);
}

/* What the index must answer: the lowest id of the ready jobs, else of
 * the delayed ones, else of the buried ones. */
static Job *brute(Tube *t)
{
    const Heap *hs[2] = {&t->ready, &t->delay};
    Job *best = NULL;

    for (int k = 0; k < 2 && !best; k++)
        for (size_t i = 0; i < hs[k]->len; i++) {
            Job *j = hs[k]->items[i];
            if (!best || j->id < best->id)
                best = j;
        }
    if (!best)
        for (List *n = t->buried.next; n != &t->buried; n = n->next) {
            Job *b = job_of_link(n);
            if (!best || b->id < best->id)
                best = b;
        }
    return best;
}

/* The ids put so far that may still be live (dead ones are dropped as
 * they are met). */
static uint64_t known[4096];
static size_t nknown;

static uint64_t put(World *x, uint32_t delay)
{
    Job *j = engine_job_new(&x->e, NULL, 1, 0, delay, 60);
    uint64_t id;

    if (!j)
        return 0;
    id = j->id;
    j->body[0] = 'x';
    switch (engine_put(&x->e, j, x->t)) {
    case ENG_OK:
    case ENG_BURIED:
        break;
    default:
        engine_job_drop(&x->e, j);
        return 0;
    }
    if (nknown < sizeof known / sizeof known[0])
        known[nknown++] = id;
    return id;
}

/* A job of the tube in state st, picked at random, or 0. */
static uint64_t any_in(World *x, Rng *r, JobState st)
{
    uint64_t ids[64];
    size_t n = 0;

    for (size_t i = 0; i < nknown;) {
        Job *j = engine_find(&x->e, known[i]);
        if (!j) {
            known[i] = known[--nknown];
            continue;
        }
        if (j->state == st && n < 64)
            ids[n++] = known[i];
        i++;
    }
    return n ? ids[rng_next(r) % n] : 0;
}

static void walk(uint64_t seed, int with_failures)
{
    World x;
    Rng r;

    world_init(&x);
    nknown = 0;
    rng_seed(&r, seed);
    x.t->pol.max_items = 20;
    for (int step = 0; step < 3000; step++) {
        unsigned op = (unsigned)(rng_next(&r) % 100);
        uint64_t id;
        Job *j;

        if (with_failures && rng_next(&r) % 7 == 0)
            alloc_fail_after(rng_next(&r) % 3);
        if (op < 40) {
            put(&x, rng_next(&r) % 5 == 0 ? 3600 : 0);
        } else if (op < 55 && (id = any_in(&x, &r, JOB_READY))) {
            engine_reserve_job(&x.e, &x.w, id, &j);
        } else if (op < 65 && (id = any_in(&x, &r, JOB_RESERVED))) {
            if (rng_next(&r) % 2)
                engine_release(&x.e, &x.w, id, 0, rng_next(&r) % 4 == 0 ? 10 : 0);
            else
                engine_bury(&x.e, &x.w, id, 0);
        } else if (op < 75) {
            if ((id = any_in(&x, &r, rng_next(&r) % 2 ? JOB_BURIED : JOB_DELAYED)))
                engine_kick_job(&x.e, id);
        } else if (op < 85) {
            if ((id = any_in(&x, &r, (JobState)(rng_next(&r) % 4))))
                engine_delete(&x.e, &x.w, id);
        } else if (op < 87) {
            engine_flush_tube(&x.e, x.t);
        } else if (op < 89) {
            /* The policy goes off and on again (a reload). */
            x.t->pol.discard_old_when_full = 0;
            put(&x, 0);
            x.t->pol.discard_old_when_full = 1;
        }
        alloc_fail_after(0);
        engine_commit(&x.e);
        ck_assert_ptr_eq(oldest_pick(&x.e, x.t), brute(x.t));
    }
    ck_assert_uint_gt(x.t->total_discarded, 100);
    world_free(&x);
}

START_TEST(random_walk_matches_a_scan)
{
    walk(1 + (uint64_t)_i, 0);
}
END_TEST

START_TEST(random_walk_with_allocation_failures)
{
    walk(100 + (uint64_t)_i, 1);
}
END_TEST

START_TEST(empty_and_reserved_only)
{
    World x;
    Job *j;
    uint64_t a;

    world_init(&x);
    ck_assert_ptr_null(oldest_pick(&x.e, x.t));
    a = put(&x, 0);
    ck_assert_uint_eq(engine_reserve_job(&x.e, &x.w, a, &j), ENG_OK);
    ck_assert_ptr_null(oldest_pick(&x.e, x.t)); /* never a reserved job */
    ck_assert_uint_eq(engine_release(&x.e, &x.w, a, 0, 0), ENG_OK);
    ck_assert_uint_eq(oldest_pick(&x.e, x.t)->id, a);
    world_free(&x);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("oldest");
    TCase *tc = unit_tcase("oldest");

    tcase_add_test(tc, empty_and_reserved_only);
    tcase_add_loop_test(tc, random_walk_matches_a_scan, 0, 4);
    tcase_add_loop_test(tc, random_walk_with_allocation_failures, 0, 4);
    suite_add_tcase(s, tc);
    return s;
}

UNIT_MAIN(suite)
