/*
 * test_repl.c — replication's pieces without sockets: the BL_POS and
 * BL_SNAP_END records (blcodec), a replica applying a stream
 * (replica_feed() into engine_apply()), the snapshot's sweep, positions
 * and epochs over a restart, and promote; the backlog ring (backlog.h)
 * and a replica going on from its position (CONTINUING and the I record).
 */
#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backlog.h"
#include "blcodec.h"
#include "blfile.h"
#include "engine.h"
#include "log.h"
#include "repl.h"
#include "replid.h"
#include "serve.h"
#include "syncwait.h"
#include "unit.h"

static char dir[128];

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    return remove(path);
}

static void setup(void)
{
    /* mkdtemp, not a name from the pid: a failed test skips its teardown,
     * and the directory it leaves made a later run whose child drew the
     * same pid fail at mkdir (pids wrap at 32768 here). */
    strcpy(dir, "/tmp/tubed-unit-repl-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    log_verbosity = -1;
}

static void teardown(void)
{
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static Server srv;

/* srv with a binlog in dir (never synced), replication started: a
 * replica of replica_of, or a primary (NULL). */
static Server *open_server(const char *replica_of)
{
    Config cfg;
    char err[256];

    opts_defaults(&cfg);
    cfg.listen_addr = "127.0.0.1";
    cfg.binlog_dir = dir;
    cfg.fsync_never = 1;
    cfg.replica_of = replica_of;
    ck_assert_int_eq(server_init(&srv, &cfg), 0);
    ck_assert_msg(engine_open_binlog(&srv.eng, err, sizeof err) == 0, "%s", err);
    repl_start(&srv);
    return &srv;
}

static Server *open_replica(void)
{
    return open_server("127.0.0.1:1");
}

/* ---- the stream, built by hand ----------------------------------------- */

typedef struct {
    char data[8192];
    size_t len;
} Stream;

static void add(Stream *s, const BlRecord *r)
{
    size_t n = bl_record_size(r);

    ck_assert_uint_le(s->len + n, sizeof s->data);
    bl_encode(r, s->data + s->len);
    s->len += n;
}

static void add_job(Stream *s, uint64_t id, const char *tube, const char *body, int state)
{
    BlRecord r;

    memset(&r, 0, sizeof r);
    r.type = BL_JOB;
    r.id = id;
    r.pri = (uint32_t)id;
    r.ttr = 30;
    r.state = (uint8_t)state;
    if (state == 2) {
        r.delay = 600;
        r.deadline_wall = (int64_t)4e18;
    }
    r.created_wall = 1700000000LL * 1000000000LL;
    r.tube = tube;
    r.tube_len = (uint8_t)strlen(tube);
    r.body = body;
    r.body_size = (uint32_t)strlen(body);
    add(s, &r);
}

static void add_simple(Stream *s, int type, uint64_t id, uint64_t pos)
{
    BlRecord r;

    memset(&r, 0, sizeof r);
    r.type = (uint8_t)type;
    r.id = id;
    r.pos = pos;
    if (type == BL_STATE)
        r.state = 3; /* buried */
    add(s, &r);
}

/* The replica's own jobs, before it connects: st's records applied as
 * its binlog's replay would leave them. */
static void apply_own(Server *s, const Stream *st)
{
    for (size_t off = 0; off < st->len;) {
        BlRecord rec;
        long n = bl_decode(st->data + off, st->len - off, &rec);
        ck_assert_int_gt(n, 0);
        ck_assert_int_eq(engine_apply(&s->eng, &rec), 0);
        off += (size_t)n;
    }
    engine_commit(&s->eng);
}

static void feed(Server *s, const char *p, size_t n)
{
    Repl *r = s->repl;

    ck_assert_msg(replica_feed(s, p, n) == 0, "feed failed: %s", r->last_error);
    engine_commit(&s->eng);
}

START_TEST(pos_and_end_records_round_trip)
{
    BlRecord r = {.type = BL_POS, .id = 7, .pos = 123456789, .epoch_start = 42,
                  .flags = BL_POS_FOLLOWER}, d;
    char buf[64];

    ck_assert_uint_eq(bl_record_size(&r), BL_POS_SIZE);
    bl_encode(&r, buf);
    ck_assert_int_eq(bl_decode(buf, sizeof buf, &d), BL_POS_SIZE);
    ck_assert_uint_eq(d.type, BL_POS);
    ck_assert_uint_eq(d.id, 7);
    ck_assert_uint_eq(d.pos, 123456789);
    ck_assert_uint_eq(d.epoch_start, 42);
    ck_assert_uint_eq(d.flags, BL_POS_FOLLOWER);
    buf[BL_REC_HEAD + 17] = 9; /* flags beyond the known bit: damage */
    ck_assert_int_eq(bl_decode(buf, sizeof buf, &d), BL_CORRUPT);
    /* "told to follow, the primary's epoch not heard" is known */
    r.flags = BL_POS_FOLLOWER | BL_POS_UNHEARD;
    bl_encode(&r, buf);
    ck_assert_int_eq(bl_decode(buf, sizeof buf, &d), BL_POS_SIZE);
    ck_assert_uint_eq(d.flags, BL_POS_FOLLOWER | BL_POS_UNHEARD);
    r.flags = 4;
    bl_encode(&r, buf);
    ck_assert_int_eq(bl_decode(buf, sizeof buf, &d), BL_CORRUPT);

    r = (BlRecord){.type = BL_SNAP_END, .id = 99, .pos = 5};
    bl_encode(&r, buf);
    ck_assert_int_eq(bl_decode(buf, sizeof buf, &d), BL_SNAP_END_SIZE);
    ck_assert_uint_eq(d.id, 99);
    ck_assert_uint_eq(d.pos, 5);
}
END_TEST

/* A snapshot, live records inside and after it, the sweep of the jobs the
 * replica had, positions, and all of it back after a restart. */
START_TEST(replica_applies_a_stream)
{
    Server *s = open_replica();
    Repl *r = s->repl;
    Stream st = {.len = 0};
    const char *answer = "REPLICATING 3 10 4\r\n";
    uint64_t epoch, pos, start;
    Job *j;

    /* Jobs of its own first: 50 goes at the sweep, 2 is replaced. */
    add_job(&st, 50, "stale", "old", 0);
    add_job(&st, 2, "default", "stale body", 0);
    apply_own(s, &st);
    ck_assert_uint_eq(s->eng.jobs.len, 2);

    replica_expect_answer(s);
    st.len = 0;
    add_job(&st, 1, "default", "one", 0);
    add_job(&st, 2, "default", "two", 2);
    add_job(&st, 7, "t", "live inside", 0);  /* a live put during the snapshot */
    add_simple(&st, BL_POS, 3, 11);         /* ignored until E */
    add_job(&st, 3, "t", "three", 0);
    add_simple(&st, BL_SNAP_END, 8, 11);
    add_simple(&st, BL_STATE, 1, 0);        /* bury 1 */
    add_simple(&st, BL_DELETE, 3, 0);
    add_simple(&st, BL_POS, 3, 13);
    /* The answer, then the stream in two pieces cut mid-record. */
    feed(s, answer, strlen(answer));
    ck_assert_int_eq(r->rstate, RS_STREAM);
    ck_assert(r->snapshot);
    feed(s, st.data, 100);
    feed(s, st.data + 100, st.len - 100);
    ck_assert(!r->snapshot);

    ck_assert_uint_eq(s->eng.jobs.len, 3);  /* 1, 2, 7 */
    ck_assert_ptr_null(engine_find(&s->eng, 50));
    ck_assert_ptr_null(engine_find(&s->eng, 3));
    ck_assert_ptr_nonnull(j = engine_find(&s->eng, 1));
    ck_assert_int_eq(j->state, JOB_BURIED);
    ck_assert_ptr_nonnull(j = engine_find(&s->eng, 2));
    ck_assert_int_eq(j->state, JOB_DELAYED);
    ck_assert_int_eq(memcmp(job_body(j), "two", 3), 0);
    /* the stale job, and its own job 2 that another job (another body)
     * under the same id replaced */
    ck_assert_uint_eq(r->discarded, 2);
    ck_assert_uint_ge(s->eng.next_id, 8);
    engine_repl_state(&s->eng, &epoch, &pos, &start);
    ck_assert_uint_eq(epoch, 3);
    ck_assert_uint_eq(pos, 13);
    ck_assert_uint_eq(start, 4);
    server_free(&srv);

    /* kill -9 or not: its binlog has the jobs and the position. */
    s = open_replica();
    ck_assert_uint_eq(s->eng.jobs.len, 3);
    engine_repl_state(&s->eng, &epoch, &pos, &start);
    ck_assert_uint_eq(epoch, 3);
    ck_assert_uint_eq(pos, 13);

    /* promote: a new epoch from here, ids jump, timers run again. */
    {
        char err[128];
        uint64_t next = s->eng.next_id;
        ck_assert_uint_eq(repl_promote(s, err, sizeof err), 4);
        ck_assert_uint_gt(s->eng.next_id, next);
        ck_assert(!s->eng.passive);
        ck_assert(!repl_is_replica(s));
        ck_assert_uint_eq(repl_promote(s, err, sizeof err), 4); /* again: same */
        engine_commit(&s->eng);
    }
    server_free(&srv);
    s = open_replica();
    engine_repl_state(&s->eng, &epoch, &pos, &start);
    ck_assert_uint_eq(epoch, 4);
    ck_assert_uint_eq(start, 13);
    server_free(&srv);
}
END_TEST

/* The jobs a replica had that the snapshot sends again all stay, whatever
 * the order the primary's records name them in: a live record of a job
 * ahead of the snapshot's cursor (here 5, the middle of the sorted list of
 * the replica's jobs) comes before the snapshot reaches the lower ones. */
START_TEST(sweep_keeps_jobs_sent_out_of_order)
{
    Server *s = open_replica();
    Stream st = {.len = 0};
    const char *answer = "REPLICATING 1 20 0\r\n";

    for (uint64_t id = 1; id <= 9; id++)
        add_job(&st, id, "default", "mine", 0);
    apply_own(s, &st);
    ck_assert_uint_eq(s->eng.jobs.len, 9);

    replica_expect_answer(s);
    st.len = 0;
    /* (the same jobs: the same bodies; another body would be another job,
     * discarded: sweep_counts_jobs_replaced_by_others) */
    add_job(&st, 5, "moved", "mine", 0);    /* live: moved ahead of the cursor */
    add_job(&st, 8, "moved", "mine", 0);
    for (uint64_t id = 1; id <= 9; id++)
        add_job(&st, id, id == 5 || id == 8 ? "moved" : "default", "mine", 0);
    add_simple(&st, BL_SNAP_END, 10, 20);
    feed(s, answer, strlen(answer));
    feed(s, st.data, st.len);
    ck_assert(!s->repl->snapshot);
    for (uint64_t id = 1; id <= 9; id++)
        ck_assert_msg(engine_find(&s->eng, id) != NULL, "job %llu swept", (unsigned long long)id);
    ck_assert_uint_eq(s->repl->discarded, 0);
    server_free(&srv);
}
END_TEST

/* Two primaries promoted in one partition give out the same ids: the
 * snapshot of the one followed replaces the other's jobs instead of
 * sweeping them. Each replaced by another job (another body) is discarded
 * as surely as a swept one, and counted once, whatever records follow. */
START_TEST(sweep_counts_jobs_replaced_by_others)
{
    Server *s = open_replica();
    Stream st = {.len = 0};
    const char *answer = "REPLICATING 1 20 0\r\n";

    for (uint64_t id = 1; id <= 6; id++)
        add_job(&st, id, "default", id <= 3 ? "shared" : "own tail", 0);
    apply_own(s, &st);

    replica_expect_answer(s);
    st.len = 0;
    add_job(&st, 5, "moved", "their five", 0); /* live, ahead of the cursor */
    add_job(&st, 5, "moved2", "their five", 0); /* and moved again */
    for (uint64_t id = 1; id <= 5; id++)
        add_job(&st, id, id == 5 ? "moved2" : "default", id <= 3 ? "shared" : "theirs", 0);
    add_simple(&st, BL_SNAP_END, 10, 20);
    feed(s, answer, strlen(answer));
    feed(s, st.data, st.len);
    ck_assert(!s->repl->snapshot);
    ck_assert_uint_eq(s->eng.jobs.len, 5);
    /* 4 and 5 replaced, 6 swept; 1 to 3 the same jobs */
    ck_assert_uint_eq(s->repl->discarded, 3);
    server_free(&srv);
}
END_TEST

/* ---- acknowledgements leave as soon as the sync ends ------------------- */

/* What the primary's end of the link has received so far ("" if none). */
static const char *received(int fd)
{
    static char got[256];
    ssize_t n = recv(fd, got, sizeof got - 1, MSG_DONTWAIT);

    got[n > 0 ? n : 0] = '\0';
    return got;
}

/* A batch of n live puts from id, then the P record of position pos. */
static void live_batch(Stream *st, uint64_t id, int n, uint64_t pos)
{
    st->len = 0;
    for (int i = 0; i < n; i++)
        add_job(st, id + (uint64_t)i, "default", "body", 0);
    add_simple(st, BL_POS, 1, pos);
}

/* A -f 0 replica (srv) streaming from a primary at the other end of
 * sv[1], its snapshot over (sv[0] is its link). */
static Repl *streaming_replica(int sv[2])
{
    Config cfg;
    char err[256];
    Server *s = &srv;
    Repl *r;
    Stream st = {.len = 0};
    const char *answer = "REPLICATING 1 0 0\r\n";

    opts_defaults(&cfg);
    cfg.listen_addr = "127.0.0.1";
    cfg.binlog_dir = dir;
    cfg.fsync_ms = 0; /* -f 0 */
    cfg.replica_of = "127.0.0.1:1";
    ck_assert_int_eq(server_init(&srv, &cfg), 0);
    ck_assert_msg(engine_open_binlog(&srv.eng, err, sizeof err) == 0, "%s", err);
    repl_start(&srv);
    r = s->repl;
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    ck_assert_int_eq(ev_add(&s->loop, &r->ev, sv[0], EPOLLIN), 0);
    replica_expect_answer(s);
    add_simple(&st, BL_SNAP_END, 1, 0);
    feed(s, answer, strlen(answer));
    feed(s, st.data, st.len);
    ck_assert_int_eq(r->rstate, RS_STREAM);
    return r;
}

/* With -f 0, a batch's ACK leaves the moment the binlog reports the sync
 * that holds it, not at the next replica_tick(): (1) a sync that ended
 * while a later read is applied is looked at during that apply, and the
 * ACK is on the socket when replica_feed() returns; (2) the loop seeing
 * the sync's eventfd sends it from the durable report. Nothing is
 * acknowledged before its sync ended. */
START_TEST(ack_leaves_when_the_sync_ends)
{
    char want[32];
    int sv[2];
    Server *s = &srv;
    Repl *r = streaming_replica(sv);
    Stream st = {.len = 0};

    ck_assert(!r->snapshot);
    engine_settle(&s->eng);
    ck_assert_str_eq(received(sv[1]), ""); /* (the snapshot's end is not acknowledged) */

    live_batch(&st, 1, 3, 3);
    feed(s, st.data, st.len); /* applied, written, its sync started */
    ck_assert(s->eng.binlog.syncer.busy);
    ck_assert_str_eq(received(sv[1]), ""); /* not synced: no ACK */
    wait_syncer_done(&s->eng.binlog.syncer);
    live_batch(&st, 4, 40, 43); /* more records than a look's interval */
    ck_assert_int_eq(replica_feed(s, st.data, st.len), 0);
    ck_assert_str_eq(received(sv[1]), "ACK 3\r\n");

    engine_commit(&s->eng); /* the second batch: written, synced */
    ck_assert(s->eng.binlog.syncer.busy);
    wait_syncer_done(&s->eng.binlog.syncer);
    s->eng.binlog.sync_ev.handler(&s->eng.binlog.sync_ev, EPOLLIN);
    snprintf(want, sizeof want, "ACK %d\r\n", 43);
    ck_assert_str_eq(received(sv[1]), want);
    server_free(&srv);
    close(sv[1]);
}
END_TEST

/* A primary behind our epoch is not followed; garbage ends the link. */
START_TEST(replica_refuses_stale_primary_and_garbage)
{
    Server *s = open_replica();
    Repl *r = s->repl;
    const char *old = "REPLICATING 0 5 0\r\n";
    Stream st = {.len = 0};

    replica_expect_answer(s);
    ck_assert_int_eq(replica_feed(s, old, strlen(old)), -1);
    ck_assert_int_eq(r->rstate, RS_IDLE);
    ck_assert_ptr_nonnull(strstr(r->last_error, "lower than ours"));

    replica_expect_answer(s);
    ck_assert_int_eq(replica_feed(s, "REPLICATING 1 0 0\r\n", 19), 0);
    add_job(&st, 1, "default", "x", 0);
    st.data[6] ^= 1; /* its checksum no longer holds */
    ck_assert_int_eq(replica_feed(s, st.data, st.len), -1);
    ck_assert_ptr_nonnull(strstr(r->last_error, "damaged"));
    ck_assert_uint_eq(s->eng.jobs.len, 0);

    replica_expect_answer(s);
    ck_assert_int_eq(replica_feed(s, "UNKNOWN_COMMAND\r\n", 17), -1);
    ck_assert_ptr_nonnull(strstr(r->last_error, "does not replicate"));
    server_free(&srv);
}
END_TEST

/* The N-th allocation of a replication session fails, for every N the
 * session reaches: the link fails cleanly (last-error) or goes on, the
 * server frees everything (LeakSanitizer under `make asan`), and its own
 * binlog reopens with the jobs it held. */
START_TEST(alloc_failure_sweep)
{
    Stream st = {.len = 0};
    const char *answer = "REPLICATING 2 10 4\r\n";
    unsigned long n;

    add_job(&st, 1, "default", "one", 0);
    add_job(&st, 2, "a", "two", 2);
    add_job(&st, 9, "b", "live", 0);
    add_simple(&st, BL_STATE, 2, 0);
    add_job(&st, 4, "a", "four", 0);
    add_simple(&st, BL_SNAP_END, 10, 11);
    add_simple(&st, BL_DELETE, 1, 0);
    add_job(&st, 11, "default", "eleven", 0);
    add_simple(&st, BL_POS, 2, 13);
    for (n = 1; n < 2000; n++) {
        Server *s = open_replica();
        Repl *r = s->repl;
        unsigned long before = alloc_failures();
        size_t jobs;
        int rc = 0;

        for (uint64_t id = 3; id <= 60; id += 19) { /* jobs of its own */
            Stream own = {.len = 0};
            BlRecord rec;
            add_job(&own, id, "own", "mine", 0);
            ck_assert_int_gt(bl_decode(own.data, own.len, &rec), 0);
            ck_assert_int_eq(engine_apply(&s->eng, &rec), 0);
        }
        engine_commit(&s->eng);
        replica_expect_answer(s);
        alloc_fail_after(n);
        if (replica_feed(s, answer, strlen(answer)) < 0)
            rc = -1;
        for (size_t off = 0; rc == 0 && off < st.len; off += 37)
            rc = replica_feed(s, st.data + off, st.len - off < 37 ? st.len - off : 37);
        engine_commit(&s->eng);
        alloc_fail_after(0);
        if (rc < 0)
            ck_assert_msg(r->last_error[0], "N=%lu: failed without a last-error", n);
        jobs = s->eng.jobs.len;
        ck_assert_uint_eq(s->eng.jobs_ct.reserved, 0);
        server_free(&srv);
        s = open_replica();
        ck_assert_msg(s->eng.jobs.len == jobs, "N=%lu: %zu jobs, %zu after a restart", n,
                      jobs, s->eng.jobs.len);
        server_free(&srv);
        nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
        ck_assert_int_eq(mkdir(dir, 0700), 0);
        if (alloc_failures() == before)
            break; /* the whole session ran: every index was tried */
    }
    ck_assert_uint_lt(n, 2000);
    ck_assert_uint_gt(n, 10);
    if (getenv("UNIT_VERBOSE"))
        fprintf(stderr, "alloc_failure_sweep: %lu allocations swept\n", n - 1);
}
END_TEST

/* ---- the backlog ----------------------------------------------------------- */

/* One write of the primary: k job records (ids from *next) and a P at the
 * position they reach, appended and marked as repl.c does. */
static void bk_batch(Backlog *b, uint64_t *next, uint64_t *pos, int k)
{
    Stream st = {.len = 0};

    for (int i = 0; i < k; i++)
        add_job(&st, (*next)++, "t", "a body of some bytes", 0);
    *pos += (uint64_t)k;
    add_simple(&st, BL_POS, 1, *pos);
    bk_append(b, st.data, st.len);
    ck_assert_int_eq(bk_mark(b, *pos), 0);
}

/* The record at off in the backlog: its id (decoded from a copy). */
static uint64_t bk_id_at(const Backlog *b, uint64_t off, int *type)
{
    char buf[512];
    BlRecord rec;
    long n = bk_read(b, off, buf, sizeof buf);

    ck_assert_int_gt(n, BL_REC_HEAD);
    ck_assert_int_gt(bl_decode(buf, (size_t)n, &rec), 0);
    *type = rec.type;
    return rec.id;
}

START_TEST(backlog_finds_positions)
{
    Backlog b;
    uint64_t next = 1, pos = 100, off, first, last;
    int type;

    ck_assert_int_eq(bk_init(&b, 64 * 1024), 0);
    ck_assert_int_eq(bk_find(&b, 100, &off), -1); /* nothing yet */
    bk_reset(&b, 100);
    for (int i = 0; i < 10; i++)
        bk_batch(&b, &next, &pos, 3); /* records 101..130, ids 1..30 */
    ck_assert(bk_range(&b, &first, &last));
    ck_assert_uint_eq(first, 100);
    ck_assert_uint_eq(last, 130);
    /* At a mark, and between marks (the walk over the records). */
    for (uint64_t p = 100; p < 130; p++) {
        ck_assert_int_eq(bk_find(&b, p, &off), 0);
        ck_assert_uint_eq(bk_id_at(&b, off, &type), p - 100 + 1);
        ck_assert_int_eq(type, BL_JOB);
    }
    ck_assert_int_eq(bk_find(&b, 130, &off), 0);
    ck_assert_uint_eq(off, b.end); /* caught up: nothing to send */
    ck_assert_int_eq(bk_read(&b, off, &type, 1), 0);
    ck_assert_int_eq(bk_find(&b, 131, &off), -1); /* beyond what it has */
    ck_assert_int_eq(bk_find(&b, 99, &off), -1);  /* before it began */
    ck_assert_int_eq(bk_find(&b, UINT64_MAX, &off), -1);
    /* Back from offsets: every byte of the stream, a record cut anywhere
     * counting only once it is whole. */
    {
        uint64_t start, at, p, o, prev = 100;
        ck_assert_int_eq(bk_find(&b, 100, &start), 0);
        ck_assert_int_eq(bk_pos_at(&b, start, &p), 0);
        ck_assert_uint_eq(p, 100);
        for (at = start; at <= b.end; at++) {
            ck_assert_int_eq(bk_pos_at(&b, at, &p), 0);
            ck_assert_uint_ge(p, prev); /* never goes down */
            ck_assert_uint_le(p, prev + 1);
            if (p > 100) { /* record p began before at */
                ck_assert_int_eq(bk_find(&b, p - 1, &o), 0);
                ck_assert_uint_lt(o, at);
            }
            prev = p;
        }
        ck_assert_uint_eq(prev, 130);
        ck_assert_int_eq(bk_pos_at(&b, start - 1, &p), -1); /* before the first mark */
    }
    bk_free(&b);
}
END_TEST

START_TEST(backlog_wraps_and_forgets)
{
    Backlog b;
    uint64_t next = 1, pos = 0, off, first, last, keep_off;
    int type;
    char buf[64];

    ck_assert_int_eq(bk_init(&b, 1000), 0); /* a few records' worth */
    bk_reset(&b, 0);
    bk_batch(&b, &next, &pos, 2);
    ck_assert_int_eq(bk_find(&b, 1, &keep_off), 0);
    for (int i = 0; i < 40; i++)
        bk_batch(&b, &next, &pos, 2); /* wraps many times over */
    ck_assert(bk_range(&b, &first, &last));
    ck_assert_uint_eq(last, pos);
    ck_assert_uint_gt(first, 1);
    ck_assert_uint_le(pos - first, 1000 / 40);
    /* The oldest kept positions are found, and their bytes are right even
     * where a record straddles the ring's end. */
    for (uint64_t p = first; p < pos; p++) {
        ck_assert_int_eq(bk_find(&b, p, &off), 0);
        ck_assert_uint_eq(bk_id_at(&b, off, &type), p + 1);
    }
    ck_assert_int_eq(bk_find(&b, first - 1, &off), -1); /* too old */
    ck_assert_int_eq(bk_find(&b, 1, &off), -1);
    ck_assert_int_eq(bk_read(&b, keep_off, buf, sizeof buf), -1); /* overwritten */
    /* A reset forgets everything; old offsets stay invalid. */
    bk_reset(&b, 5000);
    ck_assert(bk_range(&b, &first, &last));
    ck_assert_uint_eq(first, 5000);
    ck_assert_uint_eq(last, 5000);
    ck_assert_int_eq(bk_find(&b, pos, &off), -1);
    ck_assert_int_eq(bk_read(&b, keep_off, buf, sizeof buf), -1);
    /* A write bigger than the ring keeps its tail only: nothing to resume
     * from but its end. */
    {
        uint64_t p2 = 5000;
        bk_batch(&b, &next, &p2, 30);
        ck_assert_int_eq(bk_find(&b, 5000, &off), -1);
        ck_assert_int_eq(bk_find(&b, 5030, &off), 0);
    }
    bk_free(&b);

    ck_assert_int_eq(bk_init(&b, 0), 0); /* off: nothing, no crash */
    bk_reset(&b, 3);
    bk_append(&b, "x", 1);
    ck_assert_int_eq(bk_mark(&b, 4), 0);
    ck_assert(!bk_range(&b, &first, &last));
    ck_assert_int_eq(bk_find(&b, 3, &off), -1);
    bk_free(&b);
}
END_TEST

/* ---- going on from a position ---------------------------------------------- */

static void add_id(Stream *s, uint64_t history, uint64_t stream)
{
    replid_record(history, stream, s->data + s->len);
    s->len += REPLID_RECORD_SIZE;
}

/* A replica at position 13 of history 0xabc: a snapshot first, then a
 * CONTINUING whose I record names its history goes on (new epoch, the
 * stream's id kept), one naming another is refused and the next
 * handshake asks for a snapshot. */
START_TEST(replica_continues_on_its_history)
{
    Server *s = open_replica();
    Repl *r = s->repl;
    Stream st = {.len = 0};
    const char *answer = "REPLICATING 1 12 0\r\n";
    uint64_t epoch, pos, start;

    replica_expect_answer(s);
    add_id(&st, 0, 0xabc);
    add_job(&st, 1, "default", "one", 0);
    add_simple(&st, BL_SNAP_END, 5, 12);
    add_job(&st, 6, "default", "six", 0);
    add_simple(&st, BL_POS, 1, 13);
    feed(s, answer, strlen(answer));
    feed(s, st.data, st.len);
    ck_assert_uint_eq(r->sid, 0xabc);
    engine_repl_state(&s->eng, &epoch, &pos, &start);
    ck_assert_uint_eq(pos, 13);
    server_free(&srv);

    /* After a restart: the id and the position are back. */
    s = open_replica();
    r = s->repl;
    ck_assert_uint_eq(r->sid, 0xabc);
    engine_repl_state(&s->eng, &epoch, &pos, &start);
    ck_assert_uint_eq(pos, 13);

    /* Another history: refused, and the next ask is for a snapshot. */
    r->claimed = 13;
    replica_expect_answer(s);
    st.len = 0;
    add_id(&st, 0xdef, 0xdef);
    feed(s, "CONTINUING 1 20 0\r\n", 19);
    ck_assert_int_eq(replica_feed(s, st.data, st.len), -1);
    ck_assert_ptr_nonnull(strstr(r->last_error, "another history"));
    ck_assert(r->force_full);
    ck_assert_uint_eq(s->eng.jobs.len, 2);

    /* Its own history (after a promotion there: epoch 2, a new id). */
    r->force_full = 0;
    r->claimed = 13;
    replica_expect_answer(s);
    st.len = 0;
    add_id(&st, 0xabc, 0x123);
    add_simple(&st, BL_DELETE, 1, 0);
    add_job(&st, 7, "default", "seven", 0);
    add_simple(&st, BL_POS, 2, 15);
    feed(s, "CONTINUING 2 15 14\r\n", 20);
    feed(s, st.data, st.len);
    ck_assert_int_eq(r->rstate, RS_STREAM);
    ck_assert_uint_eq(r->sid, 0x123);
    ck_assert_uint_eq(r->partial_resyncs, 1);
    ck_assert_uint_eq(s->eng.jobs.len, 2); /* 6 and 7 */
    ck_assert_ptr_null(engine_find(&s->eng, 1));
    engine_repl_state(&s->eng, &epoch, &pos, &start);
    ck_assert_uint_eq(epoch, 2);
    ck_assert_uint_eq(pos, 15);
    ck_assert_uint_eq(start, 14);

    /* A P record that disagrees with the count: the link ends, and the
     * next ask is for a snapshot. */
    st.len = 0;
    add_job(&st, 8, "default", "eight", 0);
    add_simple(&st, BL_POS, 2, 99);
    ck_assert_int_eq(replica_feed(s, st.data, st.len), -1);
    ck_assert(r->force_full);
    ck_assert_ptr_nonnull(strstr(r->last_error, "position is not ours"));
    server_free(&srv);

    s = open_replica();
    r = s->repl;
    ck_assert_uint_eq(r->sid, 0x123);
    /* CONTINUING without the I record first, or for a position not asked */
    r->claimed = 0;
    replica_expect_answer(s);
    ck_assert_int_eq(replica_feed(s, "CONTINUING 2 30 14\r\n", 20), -1);
    r->claimed = 16;
    replica_expect_answer(s);
    feed(s, "CONTINUING 2 30 14\r\n", 20);
    st.len = 0;
    add_job(&st, 9, "default", "nine", 0);
    ck_assert_int_eq(replica_feed(s, st.data, st.len), -1);
    ck_assert_ptr_nonnull(strstr(r->last_error, "which history"));
    server_free(&srv);
}
END_TEST

/* DIR/replication-id: saved, loaded, removed; a malformed file is no id;
 * the I record round-trips and a damaged one is not taken for one. */
START_TEST(replication_id_file_and_record)
{
    char path[256], rec[REPLID_RECORD_SIZE];
    uint64_t h, st;
    FILE *f;

    ck_assert_uint_eq(replid_load(dir), 0);
    ck_assert_int_eq(replid_save(dir, 0, 0x0123456789abcdefULL), 0);
    ck_assert_uint_eq(replid_load(dir), 0x0123456789abcdefULL);
    ck_assert_int_eq(replid_save(dir, 1, 42), 0);
    ck_assert_uint_eq(replid_load(dir), 42);
    ck_assert_int_eq(replid_save(dir, 0, 0), 0);
    ck_assert_uint_eq(replid_load(dir), 0);
    snprintf(path, sizeof path, "%s/replication-id", dir);
    ck_assert_ptr_nonnull(f = fopen(path, "w"));
    fputs("0123456789abcdeg\n", f);
    fclose(f);
    ck_assert_uint_eq(replid_load(dir), 0);
    ck_assert_uint_ne(replid_new(), 0);
    ck_assert_uint_ne(replid_new(), replid_new());

    replid_record(7, 0xfeedULL << 40, rec);
    ck_assert_int_eq(replid_decode(rec, sizeof rec, &h, &st), 1);
    ck_assert_uint_eq(h, 7);
    ck_assert_uint_eq(st, 0xfeedULL << 40);
    ck_assert_int_eq(replid_decode(rec, sizeof rec - 1, &h, &st), -1);
    rec[12] ^= 1;
    ck_assert_int_eq(replid_decode(rec, sizeof rec, &h, &st), 0);
    rec[8] = 'J';
    ck_assert_int_eq(replid_decode(rec, sizeof rec, &h, &st), 0);
}
END_TEST

/* A sync held until the test lets it go: one byte per fdatasync. */
static int gate[2];

static int gated_fdatasync(int fd)
{
    char c;

    if (read(gate[0], &c, 1) != 1)
        return -1;
    return fdatasync(fd);
}

static void let_one_sync_end(Server *s)
{
    ck_assert_int_eq(write(gate[1], "g", 1), 1);
    wait_syncer_done(&s->eng.binlog.syncer);
    s->eng.binlog.sync_ev.handler(&s->eng.binlog.sync_ev, EPOLLIN);
}

/* A batch written while the previous batch's sync runs is not covered by
 * it: when that sync ends, the ACK names the previous batch's position
 * only; the later batch is acknowledged when its own sync ends. */
START_TEST(ack_covers_only_the_synced_batches)
{
    int sv[2];
    Server *s = &srv;
    Stream st = {.len = 0};

    streaming_replica(sv);
    engine_settle(&s->eng);
    ck_assert_str_eq(received(sv[1]), "");

    ck_assert_int_eq(pipe(gate), 0);
    bl_disk.fdatasync = gated_fdatasync;
    live_batch(&st, 1, 3, 3);
    feed(s, st.data, st.len); /* written; its sync starts, held */
    ck_assert(s->eng.binlog.syncer.busy);
    live_batch(&st, 4, 5, 8);
    feed(s, st.data, st.len); /* written while the first sync runs */
    ck_assert_str_eq(received(sv[1]), "");
    let_one_sync_end(s);
    ck_assert_str_eq(received(sv[1]), "ACK 3\r\n");
    ck_assert(s->eng.binlog.syncer.busy); /* the second batch's sync */
    let_one_sync_end(s);
    ck_assert_str_eq(received(sv[1]), "ACK 8\r\n");
    bl_disk.fdatasync = fdatasync;
    server_free(&srv);
    close(sv[1]);
    close(gate[0]);
    close(gate[1]);
}
END_TEST

/* A record written after the replication state is gone (at shutdown the
 * binlog's close writes what a last spill or shrink placed after
 * server_free()'s commit, repl_free() having run) must not go to the
 * subscriber that was freed (under ASan: SEGV in on_write, seen once in
 * CI's disk-full crash fuzzing). */
START_TEST(free_with_a_pending_record)
{
    Job *j;

    open_server(NULL);
    repl_free(&srv);
    j = engine_job_new(&srv.eng, engine_tube(&srv.eng, "default", 7), 1, 0, 0, 60);
    ck_assert_ptr_nonnull(j);
    memcpy(job_body_mut(j), "x", 1);
    ck_assert_int_eq(engine_put(&srv.eng, j, engine_tube(&srv.eng, "default", 7)), ENG_OK);
    ck_assert_uint_gt(srv.eng.binlog.wbuf.len, 0);
    server_free(&srv);
}
END_TEST

static Suite *repl_suite(void)
{
    Suite *s = suite_create("repl");
    TCase *tc = unit_tcase("stream");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, pos_and_end_records_round_trip);
    tcase_add_test(tc, free_with_a_pending_record);
    tcase_add_test(tc, replica_applies_a_stream);
    tcase_add_test(tc, sweep_keeps_jobs_sent_out_of_order);
    tcase_add_test(tc, sweep_counts_jobs_replaced_by_others);
    tcase_add_test(tc, replica_refuses_stale_primary_and_garbage);
    tcase_add_test(tc, alloc_failure_sweep);
    tcase_add_test(tc, backlog_finds_positions);
    tcase_add_test(tc, backlog_wraps_and_forgets);
    tcase_add_test(tc, replica_continues_on_its_history);
    tcase_add_test(tc, replication_id_file_and_record);
    tcase_add_test(tc, ack_leaves_when_the_sync_ends);
    tcase_add_test(tc, ack_covers_only_the_synced_batches);
    suite_add_tcase(s, tc);
    return s;
}

UNIT_MAIN(repl_suite)
