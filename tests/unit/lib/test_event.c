/* Unit tests for event.c: posted callbacks (after the handler, in order,
 * once, cancellable) and timers (earliest first, moved, stopped, fired
 * after the handlers, the sleep bounded by the earliest). */
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "clock.h"
#include "event.h"
#include "unit.h"

/* What ran, in order, as letters. */
static char trace[64];
static size_t ntrace;

static void mark(char c)
{
    ck_assert_uint_lt(ntrace, sizeof trace - 1);
    trace[ntrace++] = c;
    trace[ntrace] = 0;
}

typedef struct Post {
    EvPost p;
    char name;
    EvLoop *loop;
    struct Post *then; /* posted by this one when it runs */
} Post;

static void run_post(EvPost *p)
{
    Post *x = container_of(p, Post, p);

    mark(x->name);
    if (x->then)
        ev_post(x->loop, &x->then->p);
}

static void post_init(Post *x, char name, EvLoop *l)
{
    memset(x, 0, sizeof *x);
    x->p.fn = run_post;
    x->name = name;
    x->loop = l;
}

static void reset(void)
{
    ntrace = 0;
    trace[0] = 0;
}

START_TEST(posted_run_in_order_once)
{
    EvLoop l;
    Post a, b, c;

    ck_assert_int_eq(ev_init(&l), 0);
    post_init(&a, 'a', &l);
    post_init(&b, 'b', &l);
    post_init(&c, 'c', &l);
    reset();
    ev_post(&l, &a.p);
    ev_post(&l, &b.p);
    ev_post(&l, &a.p); /* already queued: nothing */
    ev_post(&l, &c.p);
    ck_assert_str_eq(trace, "");
    ev_run_posted(&l);
    ck_assert_str_eq(trace, "abc");
    ev_run_posted(&l);
    ck_assert_str_eq(trace, "abc");
    ev_close(&l);
}
END_TEST

START_TEST(posted_from_a_posted_one_runs_in_the_same_pass)
{
    EvLoop l;
    Post a, b;

    ck_assert_int_eq(ev_init(&l), 0);
    post_init(&a, 'a', &l);
    post_init(&b, 'b', &l);
    a.then = &b;
    reset();
    ev_post(&l, &a.p);
    ev_run_posted(&l);
    ck_assert_str_eq(trace, "ab");
    /* Once run, each may be posted again. */
    ev_post(&l, &a.p);
    ev_run_posted(&l);
    ck_assert_str_eq(trace, "abab");
    ev_close(&l);
}
END_TEST

START_TEST(unpost_anywhere_in_the_queue)
{
    EvLoop l;
    Post a, b, c, d;

    ck_assert_int_eq(ev_init(&l), 0);
    post_init(&a, 'a', &l);
    post_init(&b, 'b', &l);
    post_init(&c, 'c', &l);
    post_init(&d, 'd', &l);
    reset();
    ev_post(&l, &a.p);
    ev_post(&l, &b.p);
    ev_post(&l, &c.p);
    ev_unpost(&l, &b.p); /* middle */
    ev_unpost(&l, &c.p); /* tail: the tail pointer must follow */
    ev_unpost(&l, &d.p); /* never queued: nothing */
    ev_post(&l, &d.p);
    ev_run_posted(&l);
    ck_assert_str_eq(trace, "ad");
    ev_post(&l, &a.p);
    ev_unpost(&l, &a.p); /* the only one */
    ev_post(&l, &c.p);
    ev_run_posted(&l);
    ck_assert_str_eq(trace, "adc");
    ev_close(&l);
}
END_TEST

/* A handler that posts: its posted callback runs before the next
 * handler of the same poll. */
typedef struct Src {
    EvSource src;
    int fd;
    char name;
    Post *post;
} Src;

static void on_src(EvSource *s, uint32_t events)
{
    Src *x = container_of(s, Src, src);
    uint64_t v;

    (void)events;
    ck_assert_int_eq(read(x->fd, &v, sizeof v), (int)sizeof v);
    mark(x->name);
    if (x->post)
        ev_post(x->post->loop, &x->post->p);
}

START_TEST(posted_run_right_after_their_handler)
{
    EvLoop l;
    Src s1, s2;
    Post p1;
    uint64_t one = 1;

    ck_assert_int_eq(ev_init(&l), 0);
    post_init(&p1, 'p', &l);
    memset(&s1, 0, sizeof s1);
    memset(&s2, 0, sizeof s2);
    s1.name = 'x';
    s2.name = 'y';
    s1.post = s2.post = &p1;
    s1.fd = eventfd(0, EFD_NONBLOCK);
    s2.fd = eventfd(0, EFD_NONBLOCK);
    s1.src.handler = s2.src.handler = on_src;
    ck_assert_int_eq(ev_add(&l, &s1.src, s1.fd, EPOLLIN), 0);
    ck_assert_int_eq(ev_add(&l, &s2.src, s2.fd, EPOLLIN), 0);
    ck_assert_int_eq(write(s1.fd, &one, sizeof one), (int)sizeof one);
    ck_assert_int_eq(write(s2.fd, &one, sizeof one), (int)sizeof one);
    reset();
    ck_assert_int_eq(ev_poll(&l, 1000), 2);
    /* Either order of the two handlers, each followed by its post. */
    ck_assert_msg(!strcmp(trace, "xpyp") || !strcmp(trace, "ypxp"), "%s", trace);
    /* Posted between polls: run at the start of the next poll, which then
     * does not sleep. */
    reset();
    ev_post(&l, &p1.p);
    int64_t t0 = clock_mono();
    ck_assert_int_eq(ev_poll(&l, 60000), 0);
    ck_assert_str_eq(trace, "p");
    ck_assert_int_lt(clock_mono() - t0, 30 * NS_PER_SEC); /* did not sleep 60 s */
    close(s1.fd);
    close(s2.fd);
    ev_close(&l);
}
END_TEST

typedef struct Tm {
    EvTimer t;
    char name;
    EvLoop *loop;
    int64_t again; /* re-arm this far ahead once, if set */
} Tm;

static void on_tm(EvTimer *t)
{
    Tm *x = container_of(t, Tm, t);

    mark(x->name);
    ck_assert(!list_linked(&t->link)); /* disarmed before it runs */
    if (x->again) {
        ev_timer_set(x->loop, t, x->loop->now + x->again);
        x->again = 0;
    }
}

static void tm_init(Tm *x, char name, EvLoop *l)
{
    memset(x, 0, sizeof *x);
    ev_timer_init(&x->t, on_tm);
    x->name = name;
    x->loop = l;
}

START_TEST(timers_fire_earliest_first)
{
    EvLoop l;
    Tm a, b, c, d;
    int64_t now = clock_mono();

    ck_assert_int_eq(ev_init(&l), 0);
    tm_init(&a, 'a', &l);
    tm_init(&b, 'b', &l);
    tm_init(&c, 'c', &l);
    tm_init(&d, 'd', &l);
    ev_timer_set(&l, &c.t, now - 1);
    ev_timer_set(&l, &a.t, now - 3);
    ev_timer_set(&l, &b.t, now - 2);
    ev_timer_set(&l, &d.t, now + 3600 * NS_PER_SEC); /* not due */
    reset();
    ck_assert_int_eq(ev_poll(&l, 0), 0);
    ck_assert_str_eq(trace, "abc");
    ck_assert(list_linked(&d.t.link));
    /* Moved earlier, then stopped. */
    ev_timer_set(&l, &d.t, now - 5);
    ev_timer_set(&l, &a.t, now - 4);
    ev_timer_stop(&a.t);
    ev_timer_stop(&a.t); /* twice: harmless */
    ck_assert_int_eq(ev_poll(&l, 0), 0);
    ck_assert_str_eq(trace, "abcd");
    /* INT64_MAX disarms. */
    ev_timer_set(&l, &b.t, now - 1);
    ev_timer_set(&l, &b.t, INT64_MAX);
    ck_assert(!list_linked(&b.t.link));
    ck_assert_int_eq(ev_poll(&l, 0), 0);
    ck_assert_str_eq(trace, "abcd");
    ev_close(&l);
}
END_TEST

START_TEST(a_timer_bounds_the_sleep_and_may_rearm)
{
    EvLoop l;
    Tm a;
    int64_t t0;

    ck_assert_int_eq(ev_init(&l), 0);
    tm_init(&a, 'a', &l);
    a.again = 20 * NS_PER_MSEC;
    t0 = clock_mono();
    ev_timer_set(&l, &a.t, t0 + 20 * NS_PER_MSEC);
    reset();
    /* "Forever", but the timer wakes it; the ceiling is generous. */
    for (int i = 0; i < 100 && ntrace < 2; i++)
        ck_assert_int_ge(ev_poll(&l, -1), 0);
    ck_assert_str_eq(trace, "aa");
    ck_assert_int_ge(clock_mono() - t0, 40 * NS_PER_MSEC); /* never early */
    ck_assert_int_lt(clock_mono() - t0, 30 * NS_PER_SEC);
    ck_assert(!list_linked(&a.t.link));
    ev_close(&l);
}
END_TEST

static Suite *event_suite(void)
{
    Suite *s = suite_create("event");
    TCase *tc = unit_tcase("posted");

    tcase_add_test(tc, posted_run_in_order_once);
    tcase_add_test(tc, posted_from_a_posted_one_runs_in_the_same_pass);
    tcase_add_test(tc, unpost_anywhere_in_the_queue);
    tcase_add_test(tc, posted_run_right_after_their_handler);
    suite_add_tcase(s, tc);
    tc = unit_tcase("timers");
    tcase_add_test(tc, timers_fire_earliest_first);
    tcase_add_test(tc, a_timer_bounds_the_sleep_and_may_rearm);
    suite_add_tcase(s, tc);
    return s;
}

UNIT_MAIN(event_suite)
