/*
 * test_conn.c — the order in which queued replies are written.
 *
 * conn_mark_first() puts a connection ahead of every one queued before it
 * (a primary's batch for its replicas goes out before the replies that
 * wait on that batch's round trip, doc/replication.md); everything queued
 * is still written, once, by the next conn_flush_all().
 *
 * conn_hold() counts the acknowledgements each hold keeps back (what
 * stats-replication's waiting-replies adds up): one per reply, a reply
 * held twice (no reply queued between the calls) once, released with its
 * hold. A third hold folds into the second; a hold at the end of what was
 * written keeps back what is queued after it; lost records withdraw the
 * replies that wait for them and close the connection.
 *
 * A put whose heap cannot grow (every allocation failed in turn) answers
 * BURIED with its job buried.
 *
 * Server.out_unread follows every change of a connection's unsent
 * replies (queued, held, partly or wholly written, closed): it counts the
 * buffer of each connection with bytes unsent, never a replica's stream,
 * and conn_out_refuse() refuses only large replies, only while the
 * others hold OUT_BUDGET.
 *
 * A large body is sent from where it lies when nothing is queued before
 * it: what the socket takes never enters the buffer, the rest follows in
 * order; behind an earlier reply or a hold it waits its turn like any
 * other reply, and while a record placed in this iteration is not yet
 * written (the body may be of a job put in it).
 */
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "alloc.h"
#include "bsconn.h"
#include "engine.h"
#include "job.h"
#include "serve.h"
#include "unit.h"

#define NCONN 4

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    return remove(path);
}

typedef struct Rig {
    Server s;
    Beanstalk bs;
    int peer[NCONN]; /* our ends */
    Conn *c[NCONN];
} Rig;

/* The beanstalk front-end and NCONN connections, each with its peer. */
static void rig_connect(Rig *r)
{
    beanstalk_init(&r->bs, &r->s);
    for (int i = 0; i < NCONN; i++) {
        int sv[2];
        ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv),
                         0);
        r->peer[i] = sv[1];
        r->c[i] = conn_new(&r->s, sv[0], &r->bs.proto);
        ck_assert_ptr_nonnull(r->c[i]);
    }
}

static Rig *rig_new(void)
{
    Rig *r = calloc(1, sizeof *r);
    Config cfg;

    ck_assert_ptr_nonnull(r);
    opts_defaults(&cfg);
    ck_assert_int_eq(server_init(&r->s, &cfg), 0);
    rig_connect(r);
    return r;
}

static void rig_free(Rig *r)
{
    for (int i = 0; i < NCONN; i++)
        close(r->peer[i]);
    server_free(&r->s);
    opts_free(&r->s.cfg);
    free(r);
}

/* The connections queued for writing, in the order they will be written;
 * their count. */
static int queued(Rig *r, Conn **out)
{
    int n = 0;

    for (List *l = r->s.pending_out.next; l != &r->s.pending_out; l = l->next) {
        ck_assert_int_lt(n, NCONN);
        out[n++] = container_of(l, Conn, out_link);
    }
    return n;
}

static void heard(Rig *r, int i, const char *want)
{
    char got[64];
    ssize_t n = read(r->peer[i], got, sizeof got);

    ck_assert_int_eq(n, (ssize_t)strlen(want));
    ck_assert(memcmp(got, want, (size_t)n) == 0);
    n = read(r->peer[i], got, sizeof got);
    ck_assert(n < 0 && errno == EAGAIN); /* nothing more: written once */
}

/* cmd through connection 0's handler with allocation n failing (0: none),
 * then what the loop's flush sends: what the peer reads (its length). */
static ssize_t run_failing(Rig *r, const char *cmd, unsigned long n, char *got, size_t size)
{
    Conn *c = r->c[0];
    ssize_t len;

    ck_assert_int_eq(write(r->peer[0], cmd, strlen(cmd)), (ssize_t)strlen(cmd));
    alloc_fail_after(n);
    c->ev.handler(&c->ev, EPOLLIN);
    alloc_fail_after(0);
    conn_flush_all(&r->s);
    len = read(r->peer[0], got, size - 1);
    got[len > 0 ? len : 0] = '\0';
    return len;
}

START_TEST(mark_first_goes_ahead)
{
    Rig *r = rig_new();
    Conn *q[NCONN];

    conn_reply(r->c[0], "a\r\n", 3);
    conn_reply(r->c[1], "b\r\n", 3);
    conn_reply(r->c[2], "c\r\n", 3);
    /* already queued (behind 0 and 1): moved ahead, queued once */
    conn_mark_first(r->c[2]);
    ck_assert_int_eq(queued(r, q), 3);
    ck_assert_ptr_eq(q[0], r->c[2]);
    ck_assert_ptr_eq(q[1], r->c[0]);
    ck_assert_ptr_eq(q[2], r->c[1]);
    /* not queued yet: ahead of all, and a later reply keeps it there */
    conn_mark_first(r->c[3]);
    conn_reply(r->c[3], "d\r\n", 3);
    ck_assert_int_eq(queued(r, q), 4);
    ck_assert_ptr_eq(q[0], r->c[3]);
    ck_assert_ptr_eq(q[1], r->c[2]);
    /* the same again changes nothing */
    conn_mark_first(r->c[3]);
    ck_assert_int_eq(queued(r, q), 4);
    ck_assert_ptr_eq(q[0], r->c[3]);
    ck_assert_ptr_eq(q[3], r->c[1]);
    conn_flush_all(&r->s);
    ck_assert_int_eq(queued(r, q), 0);
    heard(r, 0, "a\r\n");
    heard(r, 1, "b\r\n");
    heard(r, 2, "c\r\n");
    heard(r, 3, "d\r\n");
    rig_free(r);
}
END_TEST

START_TEST(holds_count_replies)
{
    Rig *r = rig_new();
    Conn *c = r->c[0];

    conn_hold(c, 5, 5);                   /* INSERTED, ticket 5 */
    conn_reply(c, "I1\r\n", 4);
    conn_hold(c, 5, 5);                   /* pipelined: the same ticket */
    conn_reply(c, "I2\r\n", 4);
    conn_reply(c, "R\r\n", 3);        /* a read behind them: no hold */
    ck_assert_uint_eq(conn_held_replies(c, 0, 100), 2);
    conn_hold(c, 7, 7);                   /* a tube's record ... */
    conn_hold(c, 8, 8);                   /* ... then the change's: one reply */
    conn_reply(c, "S\r\n", 3);
    ck_assert_int_eq(c->nholds, 2);
    ck_assert_uint_eq(conn_held_replies(c, 0, 100), 3);
    ck_assert_uint_eq(conn_held_replies(c, 0, 5), 2);   /* ticket 5's */
    ck_assert_uint_eq(conn_held_replies(c, 5, 100), 1); /* after 5 */
    /* the oldest replica ticket among them (none at or below 4) */
    ck_assert_uint_eq(conn_first_held(c, 0, 100), 5);
    ck_assert_uint_eq(conn_first_held(c, 5, 100), 8);
    ck_assert_uint_eq(conn_first_held(c, 0, 4), UINT64_MAX);
    conn_hold(c, 9, 9);                   /* a third hold joins the second */
    conn_reply(c, "T\r\n", 3);
    ck_assert_uint_eq(conn_held_replies(c, 5, 100), 2);
    conn_durable(&r->s, 5);
    ck_assert_uint_eq(conn_held_replies(c, 0, 100), 2);
    conn_durable(&r->s, 9);
    ck_assert_int_eq(c->nholds, 0);
    ck_assert_uint_eq(conn_held_replies(c, 0, 100), 0);
    conn_flush_all(&r->s);
    heard(r, 0, "I1\r\nI2\r\nR\r\nS\r\nT\r\n");
    rig_free(r);
}
END_TEST

/* A hold replicas need not confirm (a journal = false put's id mark)
 * goes once durable here; one behind a hold that waits for replicas stays
 * behind it (replies keep their order). */
/* Records from `from` on were lost: a connection whose newest hold waits
 * for one of them (its ticket is `from` itself, too) has its held replies
 * taken back and is closed after what came before the hold; one whose
 * holds all wait for earlier records keeps them, released as usual. */
START_TEST(lost_records_withdraw_held_replies)
{
    Rig *r = rig_new();
    Conn *c = r->c[0];
    Conn *d = r->c[1];
    char got[64];
    ssize_t n;

    conn_reply(c, "A\r\n", 3);   /* not held */
    conn_hold(c, 5, 5);
    conn_reply(c, "B\r\n", 3);   /* waits for record 5 */
    conn_hold(d, 4, 4);
    conn_reply(d, "D\r\n", 3);   /* waits for record 4 */
    conn_lost(&r->s, 5);
    conn_reply(c, "F\r\n", 3); /* after the withdrawal: never sent (it would
                                * answer the command of the reply taken back) */
    conn_durable_split(&r->s, 4, 4);
    conn_flush_all(&r->s);
    n = read(r->peer[0], got, sizeof got);
    ck_assert_int_eq(n, 3);
    ck_assert(memcmp(got, "A\r\n", 3) == 0);
    n = read(r->peer[0], got, sizeof got);
    ck_assert_msg(n == 0, "the connection whose reply was lost is not closed (read %zd)", n);
    heard(r, 1, "D\r\n");
    rig_free(r);
}
END_TEST

/* A connection keeps two holds at most: a third folds into the second,
 * which then waits for the newest local ticket too (and the newest
 * replicas' one, here older). Nothing behind the second
 * hold is written before the third's record is durable. */
START_TEST(third_hold_folds_into_the_second)
{
    Rig *r = rig_new();
    Conn *c = r->c[0];

    conn_hold(c, 3, 3);
    conn_reply(c, "A\r\n", 3);
    conn_hold(c, 5, 5);
    conn_reply(c, "B\r\n", 3);
    conn_hold(c, 8, 5);                /* its record needs no replica */
    conn_reply(c, "C\r\n", 3);
    ck_assert_int_eq(c->nholds, 2);
    conn_durable_split(&r->s, 5, 5);   /* A and B's records, not C's */
    conn_flush_all(&r->s);
    heard(r, 0, "A\r\n");              /* B shares C's hold now */
    conn_durable_split(&r->s, 5, 8);
    conn_flush_all(&r->s);
    heard(r, 0, "B\r\nC\r\n");
    ck_assert_int_eq(c->nholds, 0);
    rig_free(r);
}
END_TEST

/* A hold at the very end of what is queued (a change with no reply of
 * its own, memcache's noreply) keeps back the replies queued after it,
 * once everything before it is written and the buffer starts again. */
START_TEST(hold_at_the_end_holds_later_replies)
{
    Rig *r = rig_new();
    Conn *c = r->c[0];
    char got[64];

    conn_reply(c, "A\r\n", 3);
    conn_hold(c, 5, 5);                /* nothing queued behind it yet */
    conn_flush_all(&r->s);
    heard(r, 0, "A\r\n");
    conn_reply(c, "LONGER\r\n", 8);    /* after the change: waits for it */
    conn_flush_all(&r->s);
    ck_assert_msg(read(r->peer[0], got, sizeof got) < 0 && errno == EAGAIN,
                  "a reply behind the hold was written before its record was durable");
    conn_durable(&r->s, 5);
    conn_flush_all(&r->s);
    heard(r, 0, "LONGER\r\n");
    rig_free(r);
}
END_TEST

/* A put whose job cannot join its tube's ready heap (no memory to grow
 * it) is kept, buried, and its reply says so: BURIED <id>, never
 * INSERTED. Every allocation of a put is made to fail in turn; one of
 * them is the heap's. */
START_TEST(put_buried_when_its_heap_cannot_grow)
{
    int buried = 0;

    for (unsigned long n = 1; n < 400; n++) {
        Rig *r = rig_new();
        char got[64];
        unsigned long long id;
        unsigned long before = alloc_failures();

        run_failing(r, "put 0 0 60 1\r\nx\r\n", n, got, sizeof got);
        if (sscanf(got, "BURIED %llu\r\n", &id) == 1) {
            Job *j = engine_find(&r->s.eng, id);
            ck_assert_ptr_nonnull(j);
            ck_assert_int_eq(j->state, JOB_BURIED);
            buried++;
        } else if (sscanf(got, "INSERTED %llu\r\n", &id) == 1) {
            Job *j = engine_find(&r->s.eng, id);
            ck_assert_ptr_nonnull(j);
            ck_assert_msg(j->state == JOB_READY, "job %llu answered INSERTED is in state %d",
                          id, j->state);
        }
        rig_free(r);
        if (alloc_failures() == before)
            break; /* the put made fewer than n allocations: all tried */
    }
    ck_assert_msg(buried > 0, "no put answered BURIED when its heap could not grow");
}
END_TEST

/* A rig whose server keeps a -f 0 binlog in a fresh directory (bdir). */
static Rig *rig_with_binlog(char *bdir)
{
    Rig *r = calloc(1, sizeof *r);
    Config cfg;
    char err[256];

    ck_assert_ptr_nonnull(r);
    strcpy(bdir, "/tmp/tubed-unit-conn-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(bdir));
    opts_defaults(&cfg);
    cfg.binlog_dir = bdir;
    cfg.binlog_size = 131072;
    cfg.fsync_ms = 0;
    ck_assert_int_eq(server_init(&r->s, &cfg), 0);
    ck_assert_msg(engine_open_binlog(&r->s.eng, err, sizeof err) == 0, "%s", err);
    rig_connect(r);
    return r;
}

/* One command through c's handler, its records written and synced, its
 * replies sent: what the peer reads. */
static void run_durably(Rig *r, const char *cmd, char *got, size_t n)
{
    Conn *c = r->c[0];
    ssize_t len;

    ck_assert_int_eq(write(r->peer[0], cmd, strlen(cmd)), (ssize_t)strlen(cmd));
    c->ev.handler(&c->ev, EPOLLIN);
    engine_settle(&r->s.eng);
    conn_flush_all(&r->s);
    len = read(r->peer[0], got, n - 1);
    got[len > 0 ? len : 0] = '\0';
}

/* A release answered BURIED because the ready heap cannot grow (out of
 * memory) changed the job as any release does: the answer waits for the
 * bury's record like RELEASED would (-f 0). Each allocation of the
 * release fails in turn; those that answer BURIED must have sent nothing
 * before their record was synced. */
START_TEST(release_buried_for_memory_waits_for_its_record)
{
    int buried = 0;

    for (unsigned long n = 1; n < 400; n++) {
        char bdir[64], got[128];
        Rig *r = rig_with_binlog(bdir);
        unsigned long before;
        ssize_t len;

        run_durably(r, "put 0 0 60 1\r\nx\r\n", got, sizeof got);
        ck_assert_str_eq(got, "INSERTED 1\r\n");
        run_durably(r, "reserve\r\n", got, sizeof got);
        ck_assert_str_eq(got, "RESERVED 1 1\r\nx\r\n");
        before = alloc_failures();
        len = run_failing(r, "release 1 0 0\r\n", n, got, sizeof got);
        ck_assert_msg(strncmp(got, "BURIED", 6) != 0,
                      "allocation %lu failed: BURIED sent before its record was synced", n);
        if (len <= 0) {
            engine_settle(&r->s.eng);
            conn_flush_all(&r->s);
            len = read(r->peer[0], got, sizeof got - 1);
            got[len > 0 ? len : 0] = '\0';
            if (!strcmp(got, "BURIED\r\n")) {
                ck_assert_int_eq(engine_find(&r->s.eng, 1)->state, JOB_BURIED);
                buried++;
            }
        }
        rig_free(r);
        nftw(bdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        if (alloc_failures() == before)
            break; /* the release made fewer than n allocations: all tried */
    }
    ck_assert_msg(buried > 0, "no release answered BURIED when the heap could not grow");
}
END_TEST

START_TEST(split_holds_wait_for_their_own_tickets)
{
    Rig *r = rig_new();
    Conn *c = r->c[0];
    Conn *d = r->c[1];

    conn_hold(c, 4, 0);          /* a memory-only put */
    conn_reply(c, "M\r\n", 3);
    conn_hold(d, 5, 5);          /* a journaled put */
    conn_reply(d, "J\r\n", 3);
    conn_hold(d, 6, 5);          /* then a memory-only one behind it */
    conn_reply(d, "K\r\n", 3);
    ck_assert_uint_eq(conn_held_replies(c, 0, 10), 0); /* none waits for replicas */
    ck_assert_uint_eq(conn_held_replies(d, 0, 10), 2);
    conn_durable_split(&r->s, 0, 6);   /* durable here, no replica yet */
    ck_assert_int_eq(c->nholds, 0);
    ck_assert_int_eq(d->nholds, 2);
    conn_durable_split(&r->s, 5, 6);   /* the replica confirms 5 */
    ck_assert_int_eq(d->nholds, 0);
    conn_flush_all(&r->s);
    heard(r, 0, "M\r\n");
    heard(r, 1, "J\r\nK\r\n");
    rig_free(r);
}
END_TEST

/* What the rig's connections' unsent replies hold, as conn.c should count. */
static uint64_t expected_unread(Rig *r)
{
    uint64_t sum = 0;

    for (int i = 0; i < NCONN; i++) {
        Conn *c = r->c[i];
        if (c && !(c->flags & (CONN_DEAD | CONN_UNCOUNTED)) && conn_out_pending(c))
            sum += c->out.cap;
    }
    return sum;
}

START_TEST(unsent_replies_are_counted_server_wide)
{
    Rig *r = rig_new();
    char *big = malloc(OUT_BUDGET);
    char sink[65536];

    ck_assert_ptr_nonnull(big);
    memset(big, 'x', OUT_BUDGET);
    ck_assert_uint_eq(r->s.out_unread, 0);
    conn_reply(r->c[1], "small\r\n", 7);
    ck_assert_uint_eq(r->s.out_unread, expected_unread(r));
    ck_assert_uint_gt(r->s.out_unread, 0);
    /* a replica's stream is not counted, before or after it queues */
    conn_reply(r->c[3], "stream", 6);
    conn_uncount(r->c[3]);
    conn_reply(r->c[3], big, 1 << 20);
    ck_assert_uint_eq(r->s.out_unread, expected_unread(r));
    /* under the budget nothing is refused */
    ck_assert(!conn_out_refuse(r->c[2], SIZE_MAX));
    /* c0 holds the budget: a large reply elsewhere is refused, a small one
     * never, and c0's own never (back-pressure bounds it) */
    conn_reply_body(r->c[0], "FOUND 1 x\r\n", 11, big, OUT_BUDGET - 64);
    ck_assert_uint_eq(r->s.out_unread, expected_unread(r));
    ck_assert_uint_ge(r->s.out_unread, OUT_BUDGET);
    ck_assert(conn_out_refuse(r->c[2], OUT_SMALL + 1));
    ck_assert(conn_out_refuse(r->c[2], SIZE_MAX));
    ck_assert(!conn_out_refuse(r->c[2], OUT_SMALL));
    ck_assert(!conn_out_refuse(r->c[0], SIZE_MAX));
    ck_assert_uint_eq(r->s.out_refused, 2);
    /* a held reply is unsent too */
    conn_hold(r->c[2], 7, 0);
    conn_reply(r->c[2], "INSERTED 9\r\n", 12);
    ck_assert_uint_eq(r->s.out_unread, expected_unread(r));
    /* written in part (the socket takes some): the buffer still counts */
    conn_flush_all(&r->s);
    ck_assert_uint_gt(conn_out_pending(r->c[0]), 0);
    ck_assert_uint_eq(r->s.out_unread, expected_unread(r));
    heard(r, 1, "small\r\n"); /* written whole: no longer counted */
    ck_assert_uint_eq(conn_out_pending(r->c[1]), 0);
    ck_assert(conn_out_refuse(r->c[1], SIZE_MAX));
    /* released and written */
    conn_durable(&r->s, 7);
    conn_flush_all(&r->s);
    heard(r, 2, "INSERTED 9\r\n");
    ck_assert_uint_eq(r->s.out_unread, expected_unread(r));
    /* c0's client reads some: nothing changes until its last byte leaves;
     * then it closes and the budget is back */
    while (read(r->peer[0], sink, sizeof sink) > 0)
        ;
    conn_flush_all(&r->s);
    ck_assert_uint_eq(r->s.out_unread, expected_unread(r));
    conn_close(r->c[0]);
    r->c[0] = NULL;
    ck_assert_uint_eq(r->s.out_unread, expected_unread(r));
    ck_assert_uint_eq(r->s.out_unread, 0);
    ck_assert(!conn_out_refuse(r->c[1], SIZE_MAX));
    ck_assert_uint_eq(r->s.out_refused, 3);
    free(big);
    rig_free(r);
}
END_TEST

/* Everything the peer of connection i can read, until n bytes came:
 * writing in between, as the loop does when the socket has room again. */
static char *read_all(Rig *r, int i, size_t n)
{
    char *got = malloc(n + 1);
    size_t have = 0;

    ck_assert_ptr_nonnull(got);
    for (int spins = 0; have < n && spins < 100000; spins++) {
        ssize_t k = read(r->peer[i], got + have, n + 1 - have);
        if (k > 0) {
            have += (size_t)k;
        } else {
            conn_mark_pending(r->c[i]); /* (the loop: EPOLLOUT) */
            conn_flush_all(&r->s);
        }
    }
    ck_assert_uint_eq(have, n);
    return got;
}

static void nothing_heard(Rig *r, int i)
{
    char b[16];

    ck_assert(read(r->peer[i], b, sizeof b) < 0 && errno == EAGAIN);
}

START_TEST(large_body_goes_out_directly)
{
    Rig *r = rig_new();
    size_t blen = 1 << 20;
    char *body = malloc(blen), *want = malloc(blen + 64), *got;
    const char head[] = "RESERVED 1 1048576\r\n";
    size_t hlen = sizeof head - 1, total = hlen + blen + 2;

    ck_assert_ptr_nonnull(body);
    ck_assert_ptr_nonnull(want);
    for (size_t i = 0; i < blen; i++)
        body[i] = (char)('a' + i % 23);
    memcpy(want, head, hlen);
    memcpy(want + hlen, body, blen);
    memcpy(want + hlen + blen, "\r\nX\r\n", 5);
    /* nothing queued: the socket takes what it can at once, straight from
     * the body; the rest waits in the buffer, and a reply after it too */
    conn_reply_body(r->c[0], head, hlen, body, blen);
    ck_assert_uint_gt(conn_out_pending(r->c[0]), 0);
    ck_assert_uint_lt(conn_out_pending(r->c[0]), total);
    conn_reply(r->c[0], "X\r\n", 3);
    got = read_all(r, 0, total + 3);
    ck_assert(memcmp(got, want, total + 3) == 0);
    free(got);
    /* behind a reply not yet written: all of it queued, in order */
    conn_reply(r->c[1], "X\r\n", 3);
    conn_reply_body(r->c[1], head, hlen, body, blen);
    ck_assert_uint_eq(conn_out_pending(r->c[1]), total + 3);
    nothing_heard(r, 1);
    got = read_all(r, 1, total + 3);
    ck_assert(memcmp(got, "X\r\n", 3) == 0 && memcmp(got + 3, want, total) == 0);
    free(got);
    /* behind a hold: nothing leaves before the record is durable */
    conn_hold(r->c[2], 5, 5);
    conn_reply_body(r->c[2], head, hlen, body, blen);
    conn_flush_all(&r->s);
    nothing_heard(r, 2);
    conn_durable(&r->s, 5);
    got = read_all(r, 2, total);
    ck_assert(memcmp(got, want, total) == 0);
    free(got);
    /* a small body is queued as before (one write for a burst) */
    conn_reply_body(r->c[3], "FOUND 2 5\r\n", 11, "hello", 5);
    nothing_heard(r, 3);
    ck_assert_uint_eq(conn_out_pending(r->c[3]), 18);
    conn_flush_all(&r->s);
    heard(r, 3, "FOUND 2 5\r\nhello\r\n");
    free(body);
    free(want);
    rig_free(r);
}
END_TEST

/* A job put in this iteration has its record placed, not yet written: a
 * large body of it is not sent ahead of the commit (replies queued now go
 * out after it); once written, it is. */
START_TEST(large_body_waits_for_unwritten_records)
{
    char bdir[64], cmd[32];
    Rig *r = rig_with_binlog(bdir);
    size_t blen = 20000, total;
    char *put = malloc(blen + 64), *want = malloc(blen + 64), *got;
    int n = snprintf(cmd, sizeof cmd, "put 0 0 60 %zu\r\n", blen);
    size_t hlen;

    ck_assert_ptr_nonnull(put);
    ck_assert_ptr_nonnull(want);
    memcpy(put, cmd, (size_t)n);
    memset(put + n, 'b', blen);
    memcpy(put + n + blen, "\r\n", 2);
    hlen = (size_t)snprintf(want, 64, "FOUND 1 %zu\r\n", blen);
    memset(want + hlen, 'b', blen);
    memcpy(want + hlen + blen, "\r\n", 2);
    total = hlen + blen + 2;
    ck_assert_int_eq(write(r->peer[0], put, (size_t)n + blen + 2), (ssize_t)((size_t)n + blen + 2));
    r->c[0]->ev.handler(&r->c[0]->ev, EPOLLIN);
    ck_assert(!engine_all_written(&r->s.eng));
    ck_assert_int_eq(write(r->peer[1], "peek 1\r\n", 8), 8);
    r->c[1]->ev.handler(&r->c[1]->ev, EPOLLIN);
    ck_assert_uint_eq(conn_out_pending(r->c[1]), total);
    nothing_heard(r, 1);
    engine_commit(&r->s.eng);
    ck_assert(engine_all_written(&r->s.eng));
    got = read_all(r, 1, total);
    ck_assert(memcmp(got, want, total) == 0);
    free(got);
    /* written: the next peek leaves at once, nothing queued */
    ck_assert_int_eq(write(r->peer[1], "peek 1\r\n", 8), 8);
    r->c[1]->ev.handler(&r->c[1]->ev, EPOLLIN);
    ck_assert_uint_eq(conn_out_pending(r->c[1]), 0);
    got = read_all(r, 1, total);
    ck_assert(memcmp(got, want, total) == 0);
    free(got);
    free(put);
    free(want);
    engine_settle(&r->s.eng);
    rig_free(r);
    nftw(bdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("conn");
    TCase *t = unit_tcase("core");

    signal(SIGPIPE, SIG_IGN);
    tcase_add_test(t, mark_first_goes_ahead);
    tcase_add_test(t, split_holds_wait_for_their_own_tickets);
    tcase_add_test(t, holds_count_replies);
    tcase_add_test(t, unsent_replies_are_counted_server_wide);
    tcase_add_test(t, lost_records_withdraw_held_replies);
    tcase_add_test(t, third_hold_folds_into_the_second);
    tcase_add_test(t, hold_at_the_end_holds_later_replies);
    tcase_add_test(t, put_buried_when_its_heap_cannot_grow);
    tcase_add_test(t, release_buried_for_memory_waits_for_its_record);
    tcase_add_test(t, large_body_goes_out_directly);
    tcase_add_test(t, large_body_waits_for_unwritten_records);
    suite_add_tcase(s, t);
    return s;
}

UNIT_MAIN(suite)
