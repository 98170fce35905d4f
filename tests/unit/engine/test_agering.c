/*
 * Unit tests: the age ring (src/engine/agering.c), against a model: a
 * random walk of pushes, pops and entries going stale, with the ring's
 * order and contents checked after every step, its length kept within a
 * multiple of its live entries by the compaction, and failed growth
 * leaving it unchanged.
 */
#include <stdlib.h>
#include <string.h>

#include "agering.h"
#include "unit.h"

/* The model: every id ever pushed, in order, and whether it is live. */
#define MAXID 200000
static unsigned char live_ids[MAXID];

static int valid(void *arg, const AgeEntry *a)
{
    (void)arg;
    return a->id < MAXID && live_ids[a->id];
}

/* Every entry in ring order, stale ones included; how many. */
static size_t entries(const AgeRing *r, uint64_t *out)
{
    size_t n = 0;

    for (size_t i = r->head; i < r->cw; i++)
        out[n++] = r->v[i].id;
    for (size_t i = r->cr; i < r->tail; i++)
        out[n++] = r->v[i].id;
    return n;
}

START_TEST(fifo_order)
{
    AgeRing r = {0};

    for (uint64_t id = 1; id <= 1000; id++) {
        live_ids[id] = 1;
        ck_assert_int_eq(age_ring_push(&r, id, (int64_t)id * 10, valid, NULL, 4), 0);
    }
    ck_assert_uint_eq(r.live, 1000);
    for (uint64_t id = 1; id <= 1000; id++) {
        const AgeEntry *a = age_ring_front(&r);
        ck_assert_ptr_nonnull(a);
        ck_assert_uint_eq(a->id, id);
        ck_assert_int_eq(a->created, (int64_t)id * 10);
        age_ring_pop(&r, 1);
        live_ids[id] = 0;
    }
    ck_assert_ptr_null(age_ring_front(&r));
    ck_assert_uint_eq(r.live, 0);
    ck_assert_uint_eq(age_ring_len(&r), 0);
    age_ring_clear(&r);
}
END_TEST

/* Entries that go stale behind a live front (a job that stays, others put
 * and deleted at once) are reclaimed as puts go on: the ring stays within
 * twice its live entries plus the slack, and keeps the live ones in order. */
START_TEST(compaction_bounds_stale)
{
    AgeRing r = {0};
    uint64_t *seen = malloc(sizeof *seen * 4096);
    size_t most = 0;

    ck_assert_ptr_nonnull(seen);
    live_ids[1] = 1;
    ck_assert_int_eq(age_ring_push(&r, 1, 1, valid, NULL, 4), 0);
    for (uint64_t id = 2; id < 100000; id++) {
        live_ids[id] = 1;
        ck_assert_int_eq(age_ring_push(&r, id, (int64_t)id, valid, NULL, 4), 0);
        /* The newest entry is the one just pushed, compacting or not. */
        REQ_UEQ(age_ring_back(&r)->id, id);
        if (id % 1000) { /* all but every 1000th goes at once */
            live_ids[id] = 0;
            age_ring_left(&r);
        }
        if (age_ring_len(&r) > most)
            most = age_ring_len(&r);
    }
    ck_assert_uint_eq(r.live, 1 + 99);
    ck_assert_uint_le(most, 4 * (r.live + 256));
    ck_assert_uint_le(age_ring_len(&r), 4096);
    /* Live entries are all there, in order. */
    {
        size_t n = entries(&r, seen);
        uint64_t prev = 0, nlive = 0;
        for (size_t i = 0; i < n; i++) {
            REQUIRE(seen[i] > prev);
            prev = seen[i];
            nlive += live_ids[seen[i]];
        }
        ck_assert_uint_eq(nlive, r.live);
    }
    ck_assert_uint_eq(age_ring_front(&r)->id, 1);
    for (uint64_t id = 1; id < 100000; id++)
        live_ids[id] = 0;
    age_ring_clear(&r);
    free(seen);
}
END_TEST

/* A random walk against the model: pushes, pops from the front (live or
 * stale), entries going stale anywhere; after each step the ring holds
 * every live id, in push order, and its front is the oldest entry left. */
START_TEST(random_walk)
{
    AgeRing r = {0};
    uint64_t *seen = malloc(sizeof *seen * (MAXID + 1));
    uint64_t *pushed = malloc(sizeof *pushed * MAXID);
    size_t npushed = 0, first = 0; /* pushed[first..] not yet popped */
    uint64_t next = 1;
    Rng g;

    ck_assert_ptr_nonnull(seen);
    ck_assert_ptr_nonnull(pushed);
    rng_seed(&g, 11 + (uint64_t)_i);
    memset(live_ids, 0, sizeof live_ids);
    for (int step = 0; step < 60000; step++) {
        unsigned op = (unsigned)rng_below(&g, 10);

        if (op < 5 && next < MAXID) {
            live_ids[next] = 1;
            REQUIRE(age_ring_push(&r, next, (int64_t)next, valid, NULL,
                                  (unsigned)rng_below(&g, 5)) == 0);
            pushed[npushed++] = next++;
        } else if (op < 8 && first < npushed) {
            /* A live id goes stale, anywhere in the ring. */
            uint64_t id = pushed[first + rng_below(&g, npushed - first)];
            if (live_ids[id]) {
                live_ids[id] = 0;
                age_ring_left(&r);
            }
        } else if (age_ring_front(&r)) {
            uint64_t id = age_ring_front(&r)->id;
            while (first < npushed && pushed[first] != id)
                REQUIRE(!live_ids[pushed[first++]]); /* skipped: stale */
            REQUIRE(first < npushed);
            first++;
            age_ring_pop(&r, live_ids[id]);
            live_ids[id] = 0;
        }
        /* The ring: a subsequence of the unpopped pushes, in order, with
         * every live one. */
        size_t n = entries(&r, seen), k = first, nlive = 0;
        for (size_t i = 0; i < n; i++) {
            while (k < npushed && pushed[k] != seen[i])
                REQUIRE(!live_ids[pushed[k++]]);
            REQUIRE(k < npushed);
            nlive += live_ids[pushed[k++]];
        }
        while (k < npushed)
            REQUIRE(!live_ids[pushed[k++]]);
        REQ_UEQ(nlive, r.live);
        /* The newest entry is the last of them, mid-compaction too. */
        if (n)
            REQ_UEQ(age_ring_back(&r)->id, seen[n - 1]);
        else
            REQUIRE(age_ring_back(&r) == NULL);
        REQUIRE(r.head <= r.cw && r.cw <= r.cr && r.cr <= r.tail && r.tail <= r.cap);
    }
    age_ring_clear(&r);
    memset(live_ids, 0, sizeof live_ids);
    free(seen);
    free(pushed);
}
END_TEST

/* A push that cannot grow the ring fails and changes nothing. */
START_TEST(push_fails_cleanly)
{
    AgeRing r = {0};
    int failed = 0;

    for (uint64_t id = 1; id <= 5000; id++) {
        AgeRing before = r;
        live_ids[id] = 1;
        alloc_fail_after(1);
        if (age_ring_push(&r, id, 0, valid, NULL, 4) < 0) {
            failed++;
            ck_assert_mem_eq(&before, &r, sizeof r);
            alloc_fail_after(0);
            ck_assert_int_eq(age_ring_push(&r, id, 0, valid, NULL, 4), 0);
        }
        alloc_fail_after(0);
    }
    ck_assert_int_gt(failed, 3); /* it grew a few times */
    ck_assert_uint_eq(age_ring_len(&r), 5000);
    ck_assert_uint_eq(age_ring_front(&r)->id, 1);
    for (uint64_t id = 1; id <= 5000; id++)
        live_ids[id] = 0;
    age_ring_clear(&r);
}
END_TEST

/* unpush during a compaction: the entry goes and the order holds, also
 * when it was the last one the compaction had still to look at. */
START_TEST(unpush_while_compacting)
{
    AgeRing r = {0};
    uint64_t id;

    for (id = 1; id <= 600; id++) {
        live_ids[id] = 1;
        ck_assert_int_eq(age_ring_push(&r, id, 0, valid, NULL, 0), 0);
        if (id > 1) { /* all but the first go stale */
            live_ids[id] = 0;
            age_ring_left(&r);
        }
    }
    /* 600 entries, 1 live: the next push starts a compaction. */
    live_ids[id] = 1;
    ck_assert_int_eq(age_ring_push(&r, id, 0, valid, NULL, 1), 0);
    ck_assert(r.cw != r.tail);
    age_ring_unpush(&r);
    live_ids[id] = 0;
    ck_assert_uint_eq(r.live, 1);
    /* A push whose steps leave only itself to look at, taken back: that
     * ends the compaction. */
    {
        size_t remaining = r.tail - r.cr;
        ck_assert_int_eq(age_ring_push(&r, ++id, 0, valid, NULL, (unsigned)remaining), 0);
        ck_assert(r.cw != r.tail);
        ck_assert_uint_eq(r.tail - r.cr, 1);
        age_ring_unpush(&r);
    }
    ck_assert(r.cw == r.tail && r.cr == r.tail); /* over */
    ck_assert_uint_eq(r.live, 1);
    ck_assert_uint_eq(age_ring_len(&r), 1); /* the stale ones are gone */
    ck_assert_uint_eq(age_ring_front(&r)->id, 1);
    live_ids[1] = 0;
    age_ring_clear(&r);
}
END_TEST

/* unpush takes back the last entry; a drained ring gives its memory back. */
START_TEST(unpush_and_memory)
{
    AgeRing r = {0};

    for (uint64_t id = 1; id <= 10000; id++) {
        live_ids[id] = 1;
        ck_assert_int_eq(age_ring_push(&r, id, 0, valid, NULL, 4), 0);
    }
    age_ring_unpush(&r);
    live_ids[10000] = 0;
    ck_assert_uint_eq(age_ring_len(&r), 9999);
    ck_assert_uint_eq(r.live, 9999);
    while (age_ring_len(&r) > 100) {
        live_ids[age_ring_front(&r)->id] = 0;
        age_ring_pop(&r, 1);
    }
    ck_assert_uint_le(r.cap, 4096); /* shrunk as it drained */
    ck_assert_uint_eq(age_ring_front(&r)->id, 9900);
    while (age_ring_front(&r)) {
        live_ids[age_ring_front(&r)->id] = 0;
        age_ring_pop(&r, 1);
    }
    ck_assert_uint_eq(r.live, 0);
    age_ring_clear(&r);
    ck_assert_ptr_null(r.v);
}
END_TEST

static Suite *agering_suite(void)
{
    Suite *s = suite_create("agering");
    TCase *tc = unit_tcase("agering");

    tcase_add_test(tc, fifo_order);
    tcase_add_test(tc, compaction_bounds_stale);
    tcase_add_loop_test(tc, random_walk, 0, 3);
    tcase_add_test(tc, push_fails_cleanly);
    tcase_add_test(tc, unpush_and_memory);
    tcase_add_test(tc, unpush_while_compacting);
    suite_add_tcase(s, tc);
    return s;
}

UNIT_MAIN(agering_suite)
