/* Unit tests for watch.c: a worker's watch list, narrow and wide. */
#include <string.h>

#include "unit.h"

#include "engine.h"
#include "tube.h"
#include "watch.h"

typedef struct {
    Engine s;
    Worker c;
    Tube *tubes[600];
} Fix;

static Fix *fix_new(void)
{
    Fix *f = calloc(1, sizeof *f);
    char name[32];

    ck_assert_int_eq(tubes_init(&f->s.tubes), 0);
    for (int i = 0; i < 600; i++) {
        snprintf(name, sizeof name, "t%d", i);
        f->tubes[i] = tubes_get(&f->s.tubes, name, strlen(name));
        tube_ref(f->tubes[i]); /* the fixture keeps every tube alive */
    }
    f->c.watch = &f->c.watch0;
    f->c.watch_cap = 1;
    return f;
}

static void fix_free(Fix *f)
{
    watch_clear(&f->s, &f->c);
    if (f->c.watch != &f->c.watch0)
        free(f->c.watch);
    tubes_free(&f->s.tubes);
    free(f);
}

/* Every entry is found at its own index; a reference model agrees. */
static void check_consistent(const Worker *c, const int *model, int nmodel, Tube **tubes)
{
    REQ_UEQ(c->nwatch, (unsigned)nmodel);
    for (int i = 0; i < nmodel; i++) {
        REQ_PEQ(c->watch[i].tube, tubes[model[i]]);
        REQ_IEQ(watch_find(c, tubes[model[i]]), i);
    }
    REQUIRE(!!watch_is_wide(c) == (c->nwatch > WATCH_WIDE / 2 && c->wset != NULL));
}

START_TEST(random_against_model)
{
    Fix *f = fix_new();
    int model[600], n = 0;
    Rng r;

    rng_seed(&r, (uint64_t)_i + 1);
    for (int step = 0; step < 20000; step++) {
        int t = (int)rng_below(&r, 600);
        int at = -1;
        for (int i = 0; i < n; i++)
            if (model[i] == t)
                at = i;
        REQ_IEQ(watch_find(&f->c, f->tubes[t]), at);
        if (at < 0 && (rng_below(&r, 3) || n == 0)) {
            REQ_IEQ(watch_add(&f->c, f->tubes[t]), 0);
            model[n++] = t;
        } else if (at >= 0) {
            watch_remove(&f->s, &f->c, at);
            model[at] = model[--n];
        }
        if (step % 97 == 0)
            check_consistent(&f->c, model, n, f->tubes);
    }
    check_consistent(&f->c, model, n, f->tubes);
    fix_free(f);
}
END_TEST

START_TEST(wide_after_sixteen_and_refcounts)
{
    Fix *f = fix_new();

    for (int i = 0; i < WATCH_WIDE; i++)
        watch_add(&f->c, f->tubes[i]);
    ck_assert(!watch_is_wide(&f->c));
    watch_add(&f->c, f->tubes[WATCH_WIDE]);
    ck_assert(watch_is_wide(&f->c));
    ck_assert_uint_eq(f->tubes[3]->refs, 2);
    ck_assert_uint_eq(f->tubes[3]->watching_ct, 1);
    watch_remove(&f->s, &f->c, watch_find(&f->c, f->tubes[3]));
    ck_assert_uint_eq(f->tubes[3]->refs, 1);
    ck_assert_uint_eq(f->tubes[3]->watching_ct, 0);
    ck_assert_int_eq(watch_find(&f->c, f->tubes[3]), -1);
    while (f->c.nwatch > 2)
        watch_remove(&f->s, &f->c, 0);
    ck_assert(!watch_is_wide(&f->c));
    fix_free(f);
}
END_TEST

START_TEST(index_allocation_failure_stays_narrow)
{
    Fix *f = fix_new();

    for (int i = 0; i < WATCH_WIDE; i++)
        watch_add(&f->c, f->tubes[i]);
    /* The 17th add grows the full array (first allocation) and then builds
     * the index (second allocation): make the second one fail. */
    ck_assert_uint_eq(f->c.nwatch, f->c.watch_cap);
    alloc_fail_after(2);
    ck_assert_int_eq(watch_add(&f->c, f->tubes[WATCH_WIDE]), 0);
    alloc_fail_after(0);
    ck_assert(!watch_is_wide(&f->c));
    ck_assert_int_eq(watch_find(&f->c, f->tubes[WATCH_WIDE]), WATCH_WIDE);
    fix_free(f);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("watch");
    TCase *tc = tcase_create("watch");

    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, random_against_model, 0, 4);
    tcase_add_test(tc, wide_after_sixteen_and_refcounts);
    tcase_add_test(tc, index_allocation_failure_stays_narrow);
    suite_add_tcase(s, tc);
    return s;
}

UNIT_MAIN(suite)
