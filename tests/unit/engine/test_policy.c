/* Unit tests for policy.c: the decisions of the tube policies (spec
 * extensions.md §1) made in-process: max_items and max_size refusing or
 * discarding the oldest (ready, then delayed, then buried, never a
 * reserved job), max_age deleting or moving to a dead-letter tube,
 * max_timeouts burying, fanout copying into children, and a reload
 * applying new keys to the jobs already queued. No sockets, no binlog. */
#include "eworld.h"
#include "policy.h"

#define SEC NS_PER_SEC

static uint64_t live(EWorld *x, Tube *t)
{
    Counts c = ew_counts(x, t);

    return c.ready + c.delayed + c.buried + c.reserved;
}

START_TEST(max_items_refuses_when_full)
{
    EWorld x;
    Tube *t;
    uint64_t a, id;

    ew_init(&x, "[tube q]\nmax_items = 2\n");
    t = ew_tube(&x, "q");
    ck_assert_uint_eq(t->pol.max_items, 2);
    a = ew_put(&x, t, "a", 0, 0, 60);
    ew_put(&x, t, "b", 0, 50, 60);
    ck_assert_int_eq(ew_put_r(&x, t, "c", 0, 0, 60, &id), ENG_FULL);
    ck_assert_ptr_null(engine_find(&x.e, id));
    ck_assert_uint_eq(live(&x, t), 2);
    ck_assert_int_eq(ew_state(&x, a), JOB_READY);
    /* Another tube has no limit. */
    ew_put(&x, x.e.default_tube, "c", 0, 0, 60);
    ew_put(&x, x.e.default_tube, "d", 0, 0, 60);
    ew_put(&x, x.e.default_tube, "e", 0, 0, 60);
    ck_assert_uint_eq(live(&x, x.e.default_tube), 3);
    /* Room again once a job is gone. */
    ck_assert_int_eq(engine_delete(&x.e, NULL, a), ENG_OK);
    ew_put(&x, t, "c", 0, 0, 60);
    ew_free(&x);
}
END_TEST

/* discard_old_when_full: ready jobs go first (oldest first), then delayed,
 * then buried; a reserved job never. */
START_TEST(discard_order_ready_delayed_buried)
{
    EWorld x;
    Rec r;
    Tube *t;
    uint64_t held, buried, delayed, r1, r2, id;

    ew_init(&x, "[tube q]\nmax_items = 5\ndiscard_old_when_full = true\n");
    t = ew_tube(&x, "q");
    rec_init(&x, &r, "q");
    held = ew_put(&x, t, "held", 0, 0, 60);
    ck_assert_uint_eq(ew_reserve(&x, &r), held);
    buried = ew_put(&x, t, "buried", 0, 0, 60);
    ck_assert_uint_eq(ew_reserve(&x, &r), buried);
    ck_assert_int_eq(engine_bury(&x.e, &r.w, buried, 0), ENG_OK);
    delayed = ew_put(&x, t, "delayed", 0, 100, 60);
    r1 = ew_put(&x, t, "r1", 9, 0, 60);   /* the older ready job, though */
    r2 = ew_put(&x, t, "r2", 0, 0, 60);   /* r2 goes out first */
    ck_assert_uint_eq(live(&x, t), 5);

    ew_put(&x, t, "n1", 0, 0, 60);
    ck_assert_ptr_null(engine_find(&x.e, r1));
    ck_assert_ptr_nonnull(engine_find(&x.e, r2));
    ew_put(&x, t, "n2", 0, 0, 60);
    ck_assert_ptr_null(engine_find(&x.e, r2));
    ck_assert_uint_eq(t->total_discarded, 2);
    ck_assert_uint_eq(live(&x, t), 5);
    ck_assert_ptr_nonnull(engine_find(&x.e, delayed));
    ck_assert_ptr_nonnull(engine_find(&x.e, buried));
    ck_assert_int_eq(ew_state(&x, held), JOB_RESERVED);
    /* Take the new ready ones out of the way: now the delayed, then the
     * buried job goes; the reserved one stays. */
    ck_assert_uint_eq(ew_reserve(&x, &r) != 0, 1);
    ck_assert_uint_eq(ew_reserve(&x, &r) != 0, 1);
    ew_put(&x, t, "n3", 0, 0, 60);
    ck_assert_ptr_null(engine_find(&x.e, delayed));
    ck_assert_ptr_nonnull(engine_find(&x.e, buried));
    ck_assert_uint_eq(ew_reserve(&x, &r) != 0, 1);
    ew_put(&x, t, "n4", 0, 0, 60);
    ck_assert_ptr_null(engine_find(&x.e, buried));
    ck_assert_uint_eq(ew_reserve(&x, &r) != 0, 1);
    /* Five reserved: nothing can be discarded, the put is refused and
     * nothing was deleted. */
    ck_assert_uint_eq(ew_counts(&x, t).reserved, 5);
    ck_assert_int_eq(ew_put_r(&x, t, "n5", 0, 0, 60, &id), ENG_FULL);
    ck_assert_uint_eq(live(&x, t), 5);
    ck_assert_int_eq(ew_state(&x, held), JOB_RESERVED);
    worker_fini(&x.e, &r.w);
    ew_free(&x);
}
END_TEST

START_TEST(max_size_counts_body_bytes)
{
    EWorld x;
    Tube *t;
    uint64_t a, id;

    ew_init(&x, "[tube q]\nmax_size = 10\n");
    t = ew_tube(&x, "q");
    a = ew_put(&x, t, "123456", 0, 0, 60);
    ck_assert_int_eq(ew_put_r(&x, t, "12345", 0, 0, 60, &id), ENG_FULL);
    ew_put(&x, t, "1234", 0, 0, 60);        /* exactly 10 */
    ck_assert_uint_eq(t->cur_bytes, 10);
    ck_assert_int_eq(ew_put_r(&x, t, "1", 0, 0, 60, &id), ENG_FULL);
    ck_assert_int_eq(engine_delete(&x.e, NULL, a), ENG_OK);
    ck_assert_uint_eq(t->cur_bytes, 4);
    ew_put(&x, t, "123456", 0, 0, 60);
    ew_free(&x);
}
END_TEST

/* A job larger than the whole budget is refused even with discarding, and
 * nothing is deleted for it. */
START_TEST(discard_never_for_an_impossible_job)
{
    EWorld x;
    Tube *t;
    uint64_t a, id;

    ew_init(&x, "[tube q]\nmax_size = 4\ndiscard_old_when_full = true\n");
    t = ew_tube(&x, "q");
    a = ew_put(&x, t, "abc", 0, 0, 60);
    ck_assert_int_eq(ew_put_r(&x, t, "abcde", 0, 0, 60, &id), ENG_FULL);
    ck_assert_ptr_nonnull(engine_find(&x.e, a));
    ck_assert_uint_eq(t->total_discarded, 0);
    ew_free(&x);
}
END_TEST

START_TEST(max_item_size_caps_the_body)
{
    EWorld x;

    ew_init(&x, "[tube q]\nmax_item_size = 100\n");
    ck_assert_uint_eq(engine_max_body(&x.e, ew_tube(&x, "q")), 100);
    ck_assert_uint_eq(engine_max_body(&x.e, x.e.default_tube), x.cfg.max_job_size);
    ew_free(&x);
}
END_TEST

/* max_age: a job expires max_age after it entered its tube, in any state
 * but reserved; an expired job is never found. */
START_TEST(max_age_deletes)
{
    EWorld x;
    Tube *t;
    uint64_t a, d;
    int64_t t0;

    ew_init(&x, "[tube q]\nmax_age = 10s\n");
    t = ew_tube(&x, "q");
    t0 = x.e.now;
    a = ew_put(&x, t, "a", 0, 0, 60);
    d = ew_put(&x, t, "d", 0, 100, 60);     /* delayed past its age */
    ew_at(&x, t0 + 10 * SEC - 1);
    ck_assert_ptr_nonnull(engine_find(&x.e, a));
    /* At its time, even before a sweep: the lookup expires it. */
    x.e.now = t0 + 10 * SEC;
    ck_assert_ptr_null(engine_find(&x.e, a));
    ew_at(&x, t0 + 10 * SEC);
    ck_assert_ptr_null(engine_find(&x.e, d));
    ck_assert_uint_eq(t->total_expired, 2);
    ck_assert_uint_eq(live(&x, t), 0);
    ew_free(&x);
}
END_TEST

/* A reserved job is not expired while held; it expires when released. */
START_TEST(max_age_spares_reserved_until_released)
{
    EWorld x;
    Rec r;
    Tube *t;
    uint64_t a;
    int64_t t0;

    ew_init(&x, "[tube q]\nmax_age = 2s\n");
    t = ew_tube(&x, "q");
    rec_init(&x, &r, "q");
    t0 = x.e.now;
    a = ew_put(&x, t, "a", 0, 0, 60);
    ck_assert_uint_eq(ew_reserve(&x, &r), a);
    ew_at(&x, t0 + 5 * SEC);
    ck_assert_int_eq(ew_state(&x, a), JOB_RESERVED);
    ck_assert_int_eq(engine_release(&x.e, &r.w, a, 0, 0), ENG_OK);
    ck_assert_ptr_null(engine_find(&x.e, a));
    ck_assert_uint_eq(t->total_expired, 1);
    worker_fini(&x.e, &r.w);
    ew_free(&x);
}
END_TEST

/* flush-tube keeps the tube's reserved jobs: one that was in the age ring
 * (the flush empties it) keeps its expiry: released before it, it is
 * expired in its tube when the time comes. */
START_TEST(max_age_kept_by_a_reserved_job_over_a_flush)
{
    EWorld x;
    Rec r;
    Tube *t;
    uint64_t a, b;
    int64_t t0;

    ew_init(&x, "[tube q]\nmax_age = 2s\n");
    t = ew_tube(&x, "q");
    rec_init(&x, &r, "q");
    t0 = x.e.now;
    a = ew_put(&x, t, "a", 0, 0, 60);
    b = ew_put(&x, t, "b", 1, 0, 60);
    ck_assert_uint_eq(ew_reserve(&x, &r), a);
    ck_assert_int_eq(engine_flush_tube(&x.e, t), 1); /* b; a is reserved */
    ck_assert_ptr_null(engine_find(&x.e, b));
    ew_at(&x, t0 + 1 * SEC);
    ck_assert_int_eq(engine_release(&x.e, &r.w, a, 0, 0), ENG_OK);
    ck_assert_int_eq(ew_state(&x, a), JOB_READY); /* not due yet */
    ew_at(&x, t0 + 5 * SEC);
    ck_assert_msg(engine_find(&x.e, a) == NULL, "the released job outlived its max_age");
    ck_assert_uint_eq(t->total_expired, 1);
    worker_fini(&x.e, &r.w);
    ew_free(&x);
}
END_TEST

/* move_expired_to: the same job (id, priority, TTR) goes ready into the
 * dead-letter tube, its age clock restarted there. */
START_TEST(max_age_moves_to_dead_letters)
{
    EWorld x;
    Tube *t, *dead;
    Job *j;
    uint64_t a;
    int64_t t0;

    ew_init(&x, "[tube q]\nmax_age = 3s\nmove_expired_to = dead\n"
                "[tube dead]\nmax_age = 4s\n");
    t = ew_tube(&x, "q");
    t0 = x.e.now;
    a = ew_put(&x, t, "a", 77, 40, 33);
    ew_at(&x, t0 + 3 * SEC);
    j = engine_find(&x.e, a);
    ck_assert_ptr_nonnull(j);
    dead = ew_tube(&x, "dead");
    ck_assert_ptr_eq(j->tube, dead);
    ck_assert_int_eq(j->state, JOB_READY);
    ck_assert_uint_eq(j->pri, 77);
    ck_assert_uint_eq(j->ttr, 33);
    ck_assert_uint_eq(live(&x, t), 0);
    ck_assert_uint_eq(live(&x, dead), 1);
    ck_assert_uint_eq(t->total_expired, 1);
    /* Its clock restarted in dead: 4s from the move, not from the put. */
    ew_at(&x, t0 + 3 * SEC + 4 * SEC - 1);
    ck_assert_ptr_nonnull(engine_find(&x.e, a));
    ew_at(&x, t0 + 7 * SEC);
    ck_assert_ptr_null(engine_find(&x.e, a));
    ck_assert_uint_eq(dead->total_expired, 1);
    ew_free(&x);
}
END_TEST

/* A lookup of a later job past its time (a peek, stats-job) before the
 * sweep came: the earlier one expires first, as the sweep would have done
 * it, so in a full dead-letter tube the later one stays, not the earlier. */
START_TEST(lookup_keeps_expiry_order)
{
    EWorld x;
    Tube *t, *dead;
    Job *j;
    uint64_t a, b;
    int64_t t0;

    ew_init(&x, "[tube q]\nmax_age = 3s\nmove_expired_to = dead\n"
                "[tube dead]\nmax_items = 1\ndiscard_old_when_full = true\n");
    t = ew_tube(&x, "q");
    dead = ew_tube(&x, "dead");
    t0 = x.e.now;
    a = ew_put(&x, t, "a", 0, 0, 60);
    x.e.now = t0 + 1;
    b = ew_put(&x, t, "b", 0, 0, 60);
    x.e.now = t0 + 3 * SEC + 1;            /* both due; no sweep yet */
    j = engine_find(&x.e, b);
    ck_assert_ptr_nonnull(j);
    ck_assert_ptr_eq(j->tube, dead);
    ck_assert_ptr_null(engine_find(&x.e, a)); /* moved, then discarded */
    ck_assert_uint_eq(live(&x, t), 0);
    ck_assert_uint_eq(live(&x, dead), 1);
    ck_assert_uint_eq(t->total_expired, 2);
    ew_free(&x);
}
END_TEST

/* max_timeouts: the job whose TTR ran out that many times is buried. */
START_TEST(max_timeouts_buries)
{
    EWorld x;
    Rec r;
    Tube *t;
    uint64_t a;

    ew_init(&x, "[tube q]\nmax_timeouts = 2\n");
    t = ew_tube(&x, "q");
    rec_init(&x, &r, "q");
    a = ew_put(&x, t, "a", 0, 0, 1);
    ck_assert_uint_eq(ew_reserve(&x, &r), a);
    ew_later(&x, SEC);
    ck_assert_int_eq(ew_state(&x, a), JOB_READY);
    ck_assert_uint_eq(ew_reserve(&x, &r), a);
    ew_later(&x, SEC);
    ck_assert_int_eq(ew_state(&x, a), JOB_BURIED);
    ck_assert_uint_eq(job_ext(engine_find(&x.e, a))->timeouts, 2);
    ck_assert_uint_eq(ew_counts(&x, t).buried, 1);
    worker_fini(&x.e, &r.w);
    ew_free(&x);
}
END_TEST

/* fanout: a child named after the parent gets a copy (own id, same
 * priority, delay and TTR) of each later put; a full child drops its copy
 * and the parent's put still succeeds. */
START_TEST(fanout_copies_into_children)
{
    EWorld x;
    Tube *p, *c1, *c2;
    uint64_t before, id;
    Job *cj;

    ew_init(&x, "[tube p]\nfanout = true\n[tube p+small]\nmax_items = 1\n");
    p = ew_tube(&x, "p");
    before = ew_put(&x, p, "before", 0, 0, 60);
    c1 = ew_tube(&x, "p+a");
    c2 = ew_tube(&x, "p+small");
    ck_assert(c1->registered);
    ck_assert(c2->registered);
    ck_assert_ptr_eq(c1->parent, p);
    id = ew_put(&x, p, "one", 5, 7, 9);
    ck_assert_uint_eq(live(&x, p), 2);
    ck_assert_uint_eq(live(&x, c1), 1);   /* not the job put before */
    ck_assert_uint_eq(live(&x, c2), 1);
    cj = engine_peek(&x.e, c1, JOB_DELAYED);
    ck_assert_ptr_nonnull(cj);
    ck_assert_uint_ne(cj->id, id);
    ck_assert_uint_ne(cj->id, before);
    ck_assert_uint_eq(cj->pri, 5);
    ck_assert_uint_eq(cj->ttr, 9);
    ck_assert_uint_eq(cj->body_size, 3);
    ck_assert_int_eq(memcmp(engine_body(&x.e, cj), "one", 3), 0);
    ew_put(&x, p, "two", 0, 0, 60);
    ck_assert_uint_eq(live(&x, c1), 2);
    ck_assert_uint_eq(live(&x, c2), 1);     /* full: its copy dropped */
    ck_assert_uint_eq(c2->total_discarded, 1);
    ck_assert_uint_eq(live(&x, p), 3);
    /* Unregistered: no more copies. */
    policy_unregister(&x.e, c1);
    ew_put(&x, p, "three", 0, 0, 60);
    ck_assert_uint_eq(live(&x, c1), 2);
    ew_free(&x);
}
END_TEST

/* Without fanout, '+' is an ordinary character. */
START_TEST(no_fanout_no_children)
{
    EWorld x;
    Tube *c;

    ew_init(&x, NULL);
    ew_tube(&x, "p");
    c = ew_tube(&x, "p+a");
    ck_assert(!c->registered);
    ew_put(&x, ew_tube(&x, "p"), "x", 0, 0, 60);
    ck_assert_uint_eq(live(&x, c), 0);
    ew_free(&x);
}
END_TEST

/* A reload applies to the jobs already queued: a lower max_age expires
 * old jobs at once; a new limit refuses the next put. */
START_TEST(reload_applies_to_queued_jobs)
{
    EWorld x;
    Tube *t;
    uint64_t old, young, id;
    int64_t t0;

    ew_init(&x, "[tube q]\nmax_age = 1h\n");
    t = ew_tube(&x, "q");
    t0 = x.e.now;
    old = ew_put(&x, t, "old", 0, 0, 60);
    ew_at(&x, t0 + 20 * SEC);
    young = ew_put(&x, t, "young", 0, 0, 60);
    ew_at(&x, t0 + 25 * SEC);
    ew_reload(&x, "[tube q]\nmax_age = 10s\nmax_items = 1\n");
    ck_assert_uint_eq(t->pol.max_age_ms, 10000);
    ck_assert_uint_eq(t->pol.max_items, 1);
    ew_at(&x, t0 + 25 * SEC);
    ck_assert_ptr_null(engine_find(&x.e, old));   /* 25s old */
    ck_assert_ptr_nonnull(engine_find(&x.e, young)); /* 5s old */
    ck_assert_int_eq(ew_put_r(&x, t, "new", 0, 0, 60, &id), ENG_FULL);
    ew_at(&x, t0 + 30 * SEC);
    ck_assert_ptr_null(engine_find(&x.e, young));
    /* Back to no limits: nothing expires, puts are taken. */
    ew_reload(&x, "");
    ck_assert_uint_eq(t->pol.max_age_ms, 0);
    id = ew_put(&x, t, "a", 0, 0, 60);
    ew_put(&x, t, "b", 0, 0, 60);
    ew_at(&x, t0 + 100000 * SEC);
    ck_assert_ptr_nonnull(engine_find(&x.e, id));
    ew_free(&x);
}
END_TEST

/* A reload turning fanout on registers nothing by itself; a child named
 * afterwards is registered, and turning fanout off unlinks the children. */
START_TEST(reload_fanout_on_and_off)
{
    EWorld x;
    Tube *p, *c;

    ew_init(&x, NULL);
    p = ew_tube(&x, "p");
    ew_reload(&x, "[tube p]\nfanout = true\n");
    c = ew_tube(&x, "p+c");
    ck_assert(c->registered);
    ew_put(&x, p, "x", 0, 0, 60);
    ck_assert_uint_eq(live(&x, c), 1);
    ew_reload(&x, "");
    ew_put(&x, p, "y", 0, 0, 60);
    ck_assert_uint_eq(live(&x, c), 1);
    ew_free(&x);
}
END_TEST

/* The dead-letter tube is full and cannot discard: the expired job stays
 * where it was and is tried again a second later, and moves once there is
 * room. */
START_TEST(dead_letters_full_then_room)
{
    EWorld x;
    Tube *q, *dead;
    uint64_t a, filler;
    int64_t t0;

    ew_init(&x, "[tube q]\nmax_age = 2s\nmove_expired_to = dead\n"
                "[tube dead]\nmax_items = 1\n");
    q = ew_tube(&x, "q");
    dead = ew_tube(&x, "dead");
    t0 = x.e.now;
    filler = ew_put(&x, dead, "f", 0, 0, 60);
    a = ew_put(&x, q, "a", 0, 0, 60);
    ew_at(&x, t0 + 2 * SEC);
    ck_assert_ptr_eq(job_table_find(&x.e.jobs, a)->tube, q);
    ck_assert_uint_eq(q->total_expired, 0);
    ck_assert_uint_eq(live(&x, dead), 1);
    ck_assert_int_eq(engine_delete(&x.e, NULL, filler), ENG_OK);
    ew_at(&x, t0 + 3 * SEC + 1);
    ck_assert_ptr_eq(job_table_find(&x.e.jobs, a)->tube, dead);
    ck_assert_uint_eq(q->total_expired, 1);
    ck_assert_uint_eq(live(&x, q), 0);
    ew_free(&x);
}
END_TEST

/* A prefix section's keys apply to every tube that starts with it; an
 * exact section wins key by key. */
START_TEST(prefix_sections_and_precedence)
{
    EWorld x;

    ew_init(&x, "max_items = 9\n[tube app-*]\nmax_items = 3\nmax_age = 1m\n"
                "[tube app-x]\nmax_items = 5\n");
    ck_assert_uint_eq(ew_tube(&x, "app-a")->pol.max_items, 3);
    ck_assert_uint_eq(ew_tube(&x, "app-a")->pol.max_age_ms, 60000);
    ck_assert_uint_eq(ew_tube(&x, "app-x")->pol.max_items, 5);
    ck_assert_uint_eq(ew_tube(&x, "app-x")->pol.max_age_ms, 60000);
    ck_assert_uint_eq(ew_tube(&x, "other")->pol.max_items, 9);
    ck_assert_uint_eq(ew_tube(&x, "other")->pol.max_age_ms, 0);
    ck_assert_uint_eq(x.e.default_tube->pol.max_items, 9);
    ew_free(&x);
}
END_TEST

static Suite *policy_suite(void)
{
    Suite *s = suite_create("policy");
    TCase *tc = unit_tcase("limits");

    tcase_add_test(tc, max_items_refuses_when_full);
    tcase_add_test(tc, lookup_keeps_expiry_order);
    tcase_add_test(tc, discard_order_ready_delayed_buried);
    tcase_add_test(tc, max_size_counts_body_bytes);
    tcase_add_test(tc, discard_never_for_an_impossible_job);
    tcase_add_test(tc, max_item_size_caps_the_body);
    tcase_add_test(tc, prefix_sections_and_precedence);
    suite_add_tcase(s, tc);
    tc = unit_tcase("expiry");
    tcase_add_test(tc, max_age_deletes);
    tcase_add_test(tc, max_age_spares_reserved_until_released);
    tcase_add_test(tc, max_age_kept_by_a_reserved_job_over_a_flush);
    tcase_add_test(tc, max_age_moves_to_dead_letters);
    tcase_add_test(tc, max_timeouts_buries);
    tcase_add_test(tc, dead_letters_full_then_room);
    suite_add_tcase(s, tc);
    tc = unit_tcase("fanout");
    tcase_add_test(tc, fanout_copies_into_children);
    tcase_add_test(tc, no_fanout_no_children);
    suite_add_tcase(s, tc);
    tc = unit_tcase("reload");
    tcase_add_test(tc, reload_applies_to_queued_jobs);
    tcase_add_test(tc, reload_fanout_on_and_off);
    suite_add_tcase(s, tc);
    return s;
}

UNIT_MAIN(policy_suite)
