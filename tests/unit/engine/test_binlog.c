/* Unit tests for binlog.c through its public API, on real files in a
 * temporary directory: replay of every durable state, deletes, files
 * rolling over and going away, compaction keeping the disk bounded under
 * churn, torn tails, damage (refused, or kept past with --recover), a
 * missing file, and the directory lock; fanout children's records outliving
 * their files; the record stream's subscribers.
 *
 * Each test builds a Server as server_init() does (listening on
 * 127.0.0.1 port 0, no clients), opens the binlog, drives it the way
 * cmd.c and the event loop do, frees the server and opens a second one on
 * the same directory to look at what came back. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "binlog.h"
#include "bsconn.h"
#include "engine.h"
#include "blcodec.h"
#include "clock.h"
#include "conf.h"
#include "conn.h"
#include "job.h"
#include "opts.h"
#include "queue.h"
#include "serve.h"
#include "stats.h"
#include "store.h"
#include "tube.h"
#include "syncwait.h"
#include "unit.h"

#define FILE_SIZE 8192
#define MAX_JOB 1024

/* ---- temporary directories -------------------------------------------- */

/* The suite's base directory, made in the parent (unchecked fixture) so a
 * test that dies still has its files removed at the end. */
static char base_dir[64];
/* This test's binlog directory, inside base_dir. */
static char dir[128];
static int test_seq;

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    return remove(path);
}

static void rm_tree(const char *path)
{
    nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Captured stderr of a test that died while capturing: show it. */
static void show_leftover_captures(void)
{
    DIR *d = opendir(base_dir);
    struct dirent *e;

    if (!d)
        return;
    while ((e = readdir(d))) {
        char path[512], line[1024];
        FILE *f;
        if (strncmp(e->d_name, "stderr.", 7))
            continue;
        snprintf(path, sizeof path, "%s/%s", base_dir, e->d_name);
        if (!(f = fopen(path, "r")))
            continue;
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "tubed: ", 7))
                fputs(line, stderr);
        fclose(f);
    }
    closedir(d);
}

static void suite_setup(void)
{
    strcpy(base_dir, "/tmp/tubed-unit-binlog-XXXXXX");
    if (!mkdtemp(base_dir)) {
        perror("mkdtemp");
        abort();
    }
}

static void suite_teardown(void)
{
    show_leftover_captures();
    rm_tree(base_dir);
}

static void test_setup(void)
{
    snprintf(dir, sizeof dir, "%s/t%d.%ld", base_dir, test_seq++, (long)getpid());
    ck_assert_int_eq(mkdir(dir, 0700), 0);
}

static void test_teardown(void)
{
    rm_tree(dir);
}

/* ---- stderr capture --------------------------------------------------- */

/* The server logs a line or two per open and close; keep them out of the
 * test output, and keep them for tests that check a message. Anything not
 * from the server's log (a sanitizer report, say) still reaches stderr. */
static int saved_stderr = -1;
static char cap_path[256];
static char captured[16384];

static void capture_begin(void)
{
    int fd;

    snprintf(cap_path, sizeof cap_path, "%s/stderr.%ld", base_dir, (long)getpid());
    fd = open(cap_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ck_assert_int_ge(fd, 0);
    fflush(stderr);
    saved_stderr = dup(STDERR_FILENO);
    ck_assert_int_ge(saved_stderr, 0);
    dup2(fd, STDERR_FILENO);
    close(fd);
}

/* Ends the capture; returns what the server logged. */
static const char *capture_end(void)
{
    FILE *f;
    char line[1024];
    size_t len = 0;

    fflush(stderr);
    dup2(saved_stderr, STDERR_FILENO);
    close(saved_stderr);
    saved_stderr = -1;
    captured[0] = 0;
    f = fopen(cap_path, "r");
    ck_assert_ptr_nonnull(f);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "tubed: ", 7)) {
            fputs(line, stderr);
            continue;
        }
        if (len + strlen(line) < sizeof captured) {
            memcpy(captured + len, line, strlen(line) + 1);
            len += strlen(line);
        }
    }
    fclose(f);
    unlink(cap_path);
    return captured;
}

/* ---- servers ---------------------------------------------------------- */

static void config(Config *cfg)
{
    opts_defaults(cfg);
    cfg->listen_addr = "127.0.0.1";
    cfg->port = 0;
    cfg->binlog_dir = dir;
    cfg->binlog_size = FILE_SIZE;
    cfg->max_job_size = MAX_JOB;
    cfg->fsync_ms = 0;
}

/* server_init() and binlog_open(); the result of binlog_open() in *rc and
 * its message in err. */
static Server *try_open(const Config *cfg, int *rc, char *err, size_t errlen)
{
    Server *s = calloc(1, sizeof *s);

    ck_assert_ptr_nonnull(s);
    err[0] = 0;
    capture_begin();
    if (server_init(s, cfg) < 0) {
        capture_end();
        ck_abort_msg("server_init failed: %s", captured);
    }
    *rc = binlog_open(&s->eng, err, errlen);
    capture_end();
    return s;
}

static Server *open_cfg(const Config *cfg)
{
    char err[512];
    int rc;
    Server *s = try_open(cfg, &rc, err, sizeof err);

    ck_assert_msg(rc == 0, "binlog_open failed: %s", err);
    ck_assert(s->eng.binlog.enabled);
    ck_assert(s->eng.binlog.healthy);
    return s;
}

static Server *open_srv(void)
{
    Config cfg;

    config(&cfg);
    return open_cfg(&cfg);
}

static void close_srv(Server *s)
{
    capture_begin();
    server_free(s);
    capture_end();
    free(s);
}

/* A binlog_open() that failed may leave replayed jobs in the table that
 * were never placed in their tubes; take them out by hand, then free. */
typedef struct JobList {
    Job **jobs;
    size_t n;
} JobList;

static void forget_all(HashNode *n, void *arg)
{
    JobList *l = arg;

    l->jobs[l->n++] = container_of(n, Job, hnode);
}

static void close_failed(Server *s)
{
    JobList l = {calloc(s->eng.jobs.len + 1, sizeof(Job *)), 0};

    ck_assert_ptr_nonnull(l.jobs);
    hash_each(&s->eng.jobs, forget_all, &l);
    for (size_t i = 0; i < l.n; i++) {
        Job *j = l.jobs[i];
        Tube *t = j->tube;
        job_table_remove(&s->eng.jobs, j);
        job_free(j);
        tube_unref(&s->eng.tubes, t);
    }
    free(l.jobs);
    close_srv(s);
}

/* One loop iteration's binlog work, as server_run() does it. */
static void iterate(Server *s)
{
    binlog_commit(&s->eng);
    s->eng.now = clock_mono();
    binlog_tick(&s->eng);
}

/* ---- jobs, driven as cmd.c drives them -------------------------------- */

static Job *put_job(Server *s, const char *tube, uint32_t pri, uint32_t delay,
                    uint32_t ttr, const void *body, uint32_t n)
{
    Tube *t = tubes_get(&s->eng.tubes, tube, strlen(tube));
    Job *j;

    ck_assert_ptr_nonnull(t);
    j = job_alloc(s->eng.next_id++, n);
    ck_assert_ptr_nonnull(j);
    if (n)
        memcpy(j->body, body, n);
    j->pri = pri;
    if (delay) {
        ck_assert_ptr_nonnull(job_ext_get(j));
        job_ext(j)->delay = delay;
    }
    j->ttr = ttr ? ttr : 1;
    job_set_created(j, s->eng.now);
    j->tube = t;
    ck_assert_int_eq(binlog_reserve_put(&s->eng, j), 0);
    ck_assert_int_eq(queue_add(&s->eng, j, t), 0);
    binlog_put(&s->eng, j);
    ck_assert_uint_ne(j->file, 0);
    return j;
}

/* A job whose body is its id and a fill byte, n bytes long. */
static Job *put_filled(Server *s, const char *tube, uint32_t n)
{
    char body[MAX_JOB];
    uint64_t id = s->eng.next_id;

    ck_assert_uint_le(n, sizeof body);
    memset(body, (int)('a' + id % 26), n);
    if (n >= 8)
        memcpy(body, &id, 8);
    return put_job(s, tube, 100, 0, 60, body, n);
}

static void check_filled(const Job *j, uint32_t n)
{
    char body[MAX_JOB];
    uint64_t id = j->id;

    memset(body, (int)('a' + id % 26), n);
    if (n >= 8)
        memcpy(body, &id, 8);
    ck_assert_uint_eq(j->body_size, n);
    ck_assert_msg(memcmp(j->body, body, n) == 0, "job %llu: body differs",
                  (unsigned long long)j->id);
}

static void delete_job(Server *s, Job *j)
{
    binlog_delete(&s->eng, j);
    queue_delete(&s->eng, j);
}

static void bury_job(Server *s, Job *j)
{
    ck_assert_int_eq(binlog_reserve_state(&s->eng), 0);
    ck_assert_ptr_nonnull(job_ext_get(j)); /* a ready job may have none */
    queue_detach(&s->eng, j);
    job_ext(j)->buries++;
    queue_bury(&s->eng, j);
    binlog_state(&s->eng, j);
}

/* A worker that only holds reserved jobs. */
static Worker *fake_conn(void)
{
    Worker *c = calloc(1, sizeof *c);

    ck_assert_ptr_nonnull(c);
    list_init(&c->reserved);
    list_init(&c->wide_link);
    return c;
}

static void reserve_job(Server *s, Worker *c, Job *j)
{
    int logged = j->state != JOB_READY;

    if (logged)
        ck_assert_int_eq(binlog_reserve_state(&s->eng), 0);
    ck_assert_int_eq(queue_reserve(&s->eng, c, j), 0);
    if (logged)
        binlog_state(&s->eng, j);
}

static void release_job(Server *s, Job *j, uint32_t pri, uint32_t delay)
{
    ck_assert_int_eq(j->state, JOB_RESERVED);
    ck_assert_int_eq(binlog_reserve_state(&s->eng), 0);
    queue_detach(&s->eng, j);
    j->pri = pri;
    job_ext(j)->delay = delay;
    job_ext(j)->releases++;
    ck_assert_int_eq(queue_enqueue(&s->eng, j, delay), 0);
    binlog_state(&s->eng, j);
}

static void kick_job(Server *s, Job *j)
{
    ck_assert_int_eq(binlog_reserve_state(&s->eng), 0);
    ck_assert_int_eq(queue_kick_job(&s->eng, j), 0);
    binlog_state(&s->eng, j);
}

static Job *find(Server *s, uint64_t id)
{
    return job_table_find(&s->eng.jobs, id);
}

/* ---- looking at the directory ----------------------------------------- */

static void path_of(uint32_t index, char *out, size_t n)
{
    snprintf(out, n, "%s/binlog.%u", dir, index);
}

static int file_exists(uint32_t index)
{
    char p[256];
    struct stat st;

    path_of(index, p, sizeof p);
    return stat(p, &st) == 0;
}

static off_t file_size(uint32_t index)
{
    char p[256];
    struct stat st;

    path_of(index, p, sizeof p);
    ck_assert_msg(stat(p, &st) == 0, "stat %s: %s", p, strerror(errno));
    return st.st_size;
}

/* binlog.N files in dir: how many, their total size, lowest and highest. */
typedef struct DirInfo {
    size_t count;
    uint64_t bytes;
    uint32_t lo, hi;
} DirInfo;

static DirInfo scan_dir(void)
{
    DirInfo di = {0, 0, UINT32_MAX, 0};
    DIR *d = opendir(dir);
    struct dirent *e;

    ck_assert_ptr_nonnull(d);
    while ((e = readdir(d))) {
        char *end;
        unsigned long idx;
        if (strncmp(e->d_name, "binlog.", 7))
            continue;
        idx = strtoul(e->d_name + 7, &end, 10);
        ck_assert_msg(*end == 0 && idx > 0, "odd file %s", e->d_name);
        di.count++;
        di.bytes += (uint64_t)file_size((uint32_t)idx);
        if (idx < di.lo)
            di.lo = (uint32_t)idx;
        if (idx > di.hi)
            di.hi = (uint32_t)idx;
    }
    closedir(d);
    return di;
}

static void read_file(uint32_t index, char **data, size_t *len)
{
    char p[256];
    FILE *f;
    long n;

    path_of(index, p, sizeof p);
    f = fopen(p, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *data = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(*data);
    ck_assert_uint_eq(fread(*data, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
}

static void write_at(uint32_t index, off_t off, const void *p, size_t n)
{
    char path[256];
    int fd;

    path_of(index, path, sizeof path);
    fd = open(path, O_WRONLY);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pwrite(fd, p, n, off), (ssize_t)n);
    close(fd);
}

static void truncate_file(uint32_t index, off_t len)
{
    char path[256];

    path_of(index, path, sizeof path);
    ck_assert_int_eq(truncate(path, len), 0);
}

/* Offsets of the records in a file, walking them with bl_decode();
 * returns how many, and the offset where they end. */
static size_t record_offsets(uint32_t index, size_t *offs, size_t max, size_t *end)
{
    char *p;
    size_t len, off = BL_HEADER_SIZE, k = 0;

    read_file(index, &p, &len);
    ck_assert_int_eq(bl_check_header(p, len), 0);
    while (off < len) {
        BlRecord r;
        long n = bl_decode(p + off, len - off, &r);
        if (n <= 0)
            break;
        if (k < max)
            offs[k] = off;
        k++;
        off += (size_t)n;
    }
    free(p);
    *end = off;
    return k;
}

/* ---- replay ----------------------------------------------------------- */

static const char bin_body[] = "line one\r\nline two\0after nul\r\n\xff\x80";

START_TEST(replay_restores_states)
{
    Server *s = open_srv();
    Worker *c = fake_conn();
    Job *a, *b, *bu, *r, *rel, *kk, *kd;
    uint64_t ida, idb, idbu, idr, idrel, idkk, idkd;

    a = put_job(s, "alpha", 5, 0, 30, bin_body, sizeof bin_body);
    ida = a->id;
    b = put_job(s, "beta", 7, 3600, 40, "delayed", 7);
    idb = b->id;
    ck_assert_int_eq(b->state, JOB_DELAYED);
    bu = put_job(s, "default", 9, 0, 50, "buried", 6);
    idbu = bu->id;
    bury_job(s, bu);
    iterate(s);
    r = put_job(s, "alpha", 11, 0, 60, "reserved", 8);
    idr = r->id;
    reserve_job(s, c, r); /* not logged: comes back ready */
    rel = put_job(s, "alpha", 100, 0, 70, "released", 8);
    idrel = rel->id;
    reserve_job(s, c, rel);
    release_job(s, rel, 3, 0); /* the new priority survives */
    iterate(s);
    kk = put_job(s, "gamma", 13, 0, 80, "kicked", 6);
    idkk = kk->id;
    bury_job(s, kk);
    kick_job(s, kk);
    kd = put_job(s, "gamma", 15, 7200, 90, "kicked-delayed", 14);
    idkd = kd->id;
    kick_job(s, kd);
    iterate(s);
    ck_assert_uint_eq(s->eng.next_id, idkd + 1);
    close_srv(s);
    free(c);

    s = open_srv();
    ck_assert_uint_eq(s->eng.jobs.len, 7);
    ck_assert_uint_eq(s->eng.binlog.replayed_jobs, 7);
    ck_assert_uint_eq(s->eng.next_id, idkd + 1);

    a = find(s, ida);
    ck_assert_ptr_nonnull(a);
    ck_assert_int_eq(a->state, JOB_READY);
    ck_assert_uint_eq(a->pri, 5);
    ck_assert_uint_eq(a->ttr, 30);
    ck_assert_uint_eq(job_ext_view(a)->delay, 0);
    ck_assert_uint_eq(a->body_size, sizeof bin_body);
    ck_assert(memcmp(a->body, bin_body, sizeof bin_body) == 0);
    ck_assert_str_eq(a->tube->name, "alpha");
    ck_assert_uint_ne(a->file, 0);
    /* Age goes on: created a moment ago, not at replay. */
    ck_assert_int_le(job_created(a), s->eng.now);
    ck_assert_int_lt(s->eng.now - job_created(a), 30 * NS_PER_SEC);

    b = find(s, idb);
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(b->state, JOB_DELAYED);
    ck_assert_uint_eq(job_ext_view(b)->delay, 3600);
    ck_assert_uint_eq(b->pri, 7);
    ck_assert_uint_eq(b->ttr, 40);
    ck_assert_str_eq(b->tube->name, "beta");
    ck_assert_int_gt(job_ext(b)->deadline, s->eng.now + 3590 * NS_PER_SEC);
    ck_assert_int_le(job_ext(b)->deadline, s->eng.now + 3600 * NS_PER_SEC + NS_PER_SEC);
    ck_assert_uint_eq(b->tube->delay.len, 1);

    bu = find(s, idbu);
    ck_assert_ptr_nonnull(bu);
    ck_assert_int_eq(bu->state, JOB_BURIED);
    ck_assert_uint_eq(job_ext_view(bu)->buries, 1);
    ck_assert_str_eq(bu->tube->name, "default");
    ck_assert_ptr_eq(bu->tube, s->eng.default_tube);
    ck_assert_uint_eq(bu->tube->buried_ct, 1);

    r = find(s, idr);
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(r->state, JOB_READY);
    ck_assert_uint_eq(r->pri, 11);
    ck_assert_uint_eq(r->body_size, 8);
    ck_assert(memcmp(r->body, "reserved", 8) == 0);

    rel = find(s, idrel);
    ck_assert_ptr_nonnull(rel);
    ck_assert_int_eq(rel->state, JOB_READY);
    ck_assert_uint_eq(rel->pri, 3);
    ck_assert_uint_eq(job_ext_view(rel)->releases, 1);
    ck_assert_uint_eq(job_ext_view(rel)->reserves, 1);
    ck_assert_uint_eq(rel->ttr, 70);

    kk = find(s, idkk);
    ck_assert_ptr_nonnull(kk);
    ck_assert_int_eq(kk->state, JOB_READY);
    ck_assert_uint_eq(job_ext_view(kk)->buries, 1);
    ck_assert_uint_eq(job_ext_view(kk)->kicks, 1);
    ck_assert_str_eq(kk->tube->name, "gamma");

    kd = find(s, idkd);
    ck_assert_ptr_nonnull(kd);
    ck_assert_int_eq(kd->state, JOB_READY);
    ck_assert_uint_eq(job_ext_view(kd)->kicks, 1);
    ck_assert_uint_eq(kd->body_size, 14);

    /* Counts and containers agree with the states. */
    ck_assert_uint_eq(s->eng.jobs_ct.ready, 5);
    ck_assert_uint_eq(s->eng.jobs_ct.delayed, 1);
    ck_assert_uint_eq(s->eng.jobs_ct.buried, 1);
    ck_assert_uint_eq(s->eng.jobs_ct.reserved, 0);
    ck_assert_ptr_eq(heap_top(&a->tube->ready), rel); /* pri 3 first */
    ck_assert_uint_eq(a->tube->ready.len, 3);
    ck_assert_uint_eq(kk->tube->ready.len, 2);

    /* Ids continue; a put in the second life replays in the third. */
    {
        Job *n = put_job(s, "alpha", 1, 0, 10, "third", 5);
        ck_assert_uint_eq(n->id, idkd + 1);
        iterate(s);
    }
    close_srv(s);
    s = open_srv();
    ck_assert_uint_eq(s->eng.jobs.len, 8);
    ck_assert_ptr_nonnull(find(s, idkd + 1));
    ck_assert_uint_eq(s->eng.next_id, idkd + 2);
    ck_assert_int_eq(find(s, idb)->state, JOB_DELAYED);
    close_srv(s);
}
END_TEST

START_TEST(replay_buried_jobs)
{
    Server *s = open_srv();
    Job *j[6];
    uint64_t ids[6];

    for (int i = 0; i < 6; i++) {
        j[i] = put_filled(s, "t", 20);
        ids[i] = j[i]->id;
    }
    /* Bury in an order different from the ids. */
    bury_job(s, j[3]);
    bury_job(s, j[1]);
    bury_job(s, j[5]);
    iterate(s);
    close_srv(s);

    s = open_srv();
    {
        Tube *t = tubes_find(&s->eng.tubes, "t", 1);
        size_t k = 0;
        ck_assert_ptr_nonnull(t);
        ck_assert_uint_eq(t->buried_ct, 3);
        ck_assert_uint_eq(s->eng.jobs_ct.buried, 3);
        for (List *n = t->buried.next; n != &t->buried; n = n->next, k++) {
            Job *b = job_of_link(n);
            ck_assert_int_eq(b->state, JOB_BURIED);
            ck_assert(b->id == ids[1] || b->id == ids[3] || b->id == ids[5]);
        }
        ck_assert_uint_eq(k, 3);
        ck_assert_uint_eq(t->ready.len, 3);
    }
    for (int i = 0; i < 6; i++)
        check_filled(find(s, ids[i]), 20);
    close_srv(s);
}
END_TEST

START_TEST(replay_delay_passed_becomes_ready)
{
    Server *s = open_srv();
    Job *j = put_job(s, "d", 1, 1, 10, "soon", 4);
    uint64_t id = j->id;
    struct timespec ts = {1, 200 * 1000 * 1000};

    iterate(s);
    close_srv(s);
    nanosleep(&ts, NULL);
    s = open_srv();
    j = find(s, id);
    ck_assert_ptr_nonnull(j);
    /* Delayed with its deadline already passed; the first tick makes it
     * ready. */
    ck_assert(j->state == JOB_READY || job_ext(j)->deadline <= s->eng.now);
    s->eng.now = clock_mono();
    engine_tick(&s->eng);
    ck_assert_int_eq(j->state, JOB_READY);
    close_srv(s);
}
END_TEST

/* A record's realtimes are those of the job as the server held it, even
 * when the loop iteration began long before its first record (e->now is
 * the iteration's start; a long replay or a slow machine before it): a
 * realtime read then but paired with e->now logged the deadline late by
 * the gap, and the next replay kept it (crashfuzz saw a delayed job past
 * its time after a restart). */
START_TEST(logged_deadline_ignores_a_stale_now)
{
    Server *s = open_srv();
    Job *j;
    uint64_t id;
    int64_t left;

    s->eng.now = clock_mono() - NS_PER_SEC;
    j = put_job(s, "d", 1, 10, 10, "late", 4);
    id = j->id;
    ck_assert_int_eq(j->state, JOB_DELAYED);
    binlog_commit(&s->eng);
    close_srv(s);
    s = open_srv();
    j = find(s, id);
    ck_assert_ptr_nonnull(j);
    ck_assert_int_eq(j->state, JOB_DELAYED);
    /* Due 9 s after now: 10 s after the stale start of the put's loop. */
    left = job_ext(j)->deadline - clock_mono();
    ck_assert_msg(left > 8 * NS_PER_SEC && left < 9 * NS_PER_SEC + NS_PER_SEC / 4,
                  "deadline %lld ms away, expected 9000", (long long)(left / 1000000));
    close_srv(s);
}
END_TEST

/* A named tube whose only job is deleted, then used again: replay frees
 * the tube at the delete and must not hand the freed tube to the next
 * job record of that name. */
START_TEST(replay_tube_emptied_then_reused)
{
    Server *s = open_srv();
    Job *j;
    uint64_t id1, id2, id3;
    Tube *t;

    j = put_job(s, "solo", 1, 0, 10, "first", 5);
    id1 = j->id;
    iterate(s);
    delete_job(s, j);
    iterate(s);
    ck_assert_ptr_null(tubes_find(&s->eng.tubes, "solo", 4));
    id2 = put_job(s, "solo", 2, 0, 10, "second", 6)->id;
    id3 = put_job(s, "other", 3, 0, 10, "third", 5)->id;
    iterate(s);
    close_srv(s);

    s = open_srv();
    ck_assert_uint_eq(s->eng.jobs.len, 2);
    ck_assert_ptr_null(find(s, id1));
    j = find(s, id2);
    ck_assert_ptr_nonnull(j);
    t = tubes_find(&s->eng.tubes, "solo", 4);
    ck_assert_ptr_nonnull(t);
    ck_assert_ptr_eq(j->tube, t);
    ck_assert_str_eq(j->tube->name, "solo");
    ck_assert_uint_eq(t->ready.len, 1);
    ck_assert_ptr_eq(find(s, id3)->tube, tubes_find(&s->eng.tubes, "other", 5));
    close_srv(s);
}
END_TEST

/* A job bigger than -z at replay comes back all the same. */
START_TEST(replay_ignores_smaller_max_job_size)
{
    Server *s = open_srv();
    Config cfg;
    Job *j = put_filled(s, "big", 1000);
    uint64_t id = j->id;

    iterate(s);
    close_srv(s);
    config(&cfg);
    cfg.max_job_size = 100;
    s = open_cfg(&cfg);
    j = find(s, id);
    ck_assert_ptr_nonnull(j);
    check_filled(j, 1000);
    close_srv(s);
}
END_TEST

START_TEST(deleted_jobs_stay_deleted)
{
    Server *s = open_srv();
    Worker *c = fake_conn();
    uint64_t ids[12];
    Job *j;

    for (int i = 0; i < 10; i++)
        ids[i] = put_filled(s, "x", 30)->id;
    iterate(s);
    /* Delete the even ones: ready, and in other states too. */
    bury_job(s, find(s, ids[2]));
    reserve_job(s, c, find(s, ids[4]));
    for (int i = 0; i < 10; i += 2)
        delete_job(s, find(s, ids[i]));
    j = put_job(s, "x", 1, 500, 10, "delayed", 7);
    ids[10] = j->id;
    delete_job(s, j);
    /* Put and deleted in one iteration. */
    ids[11] = put_filled(s, "y", 10)->id;
    delete_job(s, find(s, ids[11]));
    iterate(s);
    close_srv(s);

    s = open_srv();
    ck_assert_uint_eq(s->eng.jobs.len, 5);
    for (int i = 0; i < 10; i++) {
        j = find(s, ids[i]);
        if (i % 2) {
            ck_assert_ptr_nonnull(j);
            check_filled(j, 30);
        } else {
            ck_assert_msg(j == NULL, "deleted job %llu came back",
                          (unsigned long long)ids[i]);
        }
    }
    ck_assert_ptr_null(find(s, ids[10]));
    ck_assert_ptr_null(find(s, ids[11]));
    ck_assert_ptr_null(tubes_find(&s->eng.tubes, "y", 1));
    ck_assert_uint_eq(s->eng.next_id, ids[11] + 1);
    /* Deleted in the second life, from a record of the first. */
    delete_job(s, find(s, ids[1]));
    delete_job(s, find(s, ids[9]));
    iterate(s);
    close_srv(s);

    s = open_srv();
    ck_assert_uint_eq(s->eng.jobs.len, 3);
    ck_assert_ptr_null(find(s, ids[1]));
    ck_assert_ptr_null(find(s, ids[9]));
    ck_assert_ptr_nonnull(find(s, ids[3]));
    close_srv(s);
    free(c);
}
END_TEST

/* ---- files ------------------------------------------------------------ */

START_TEST(files_roll_over)
{
    Server *s = open_srv();
    uint64_t ids[60];
    DirInfo di;

    ck_assert_uint_eq(s->eng.binlog.file_size, FILE_SIZE);
    for (int i = 0; i < 60; i++) {
        ids[i] = put_filled(s, "roll", 500)->id;
        iterate(s);
    }
    di = scan_dir();
    /* 60 records of ~580 bytes in 8 KiB files. */
    ck_assert_uint_ge(di.count, 4);
    ck_assert_uint_ge(s->eng.binlog.nfiles, 4);
    ck_assert_uint_eq(di.lo, 1);
    ck_assert_uint_eq(s->eng.binlog.files[0].index, 1);
    /* Every file left behind is cut to what it holds and starts with a
     * valid header; the current one is preallocated. */
    for (size_t i = 0; i + 1 < s->eng.binlog.nfiles; i++) {
        uint32_t idx = s->eng.binlog.files[i].index;
        size_t offs[32], end;
        size_t n = record_offsets(idx, offs, 32, &end);
        ck_assert_uint_le((uint64_t)file_size(idx), FILE_SIZE);
        ck_assert_uint_eq((uint64_t)file_size(idx), end);
        ck_assert_uint_gt(n, 0);
        ck_assert_uint_gt(end + 580, FILE_SIZE); /* filled up before leaving */
    }
    ck_assert_uint_eq((uint64_t)file_size(s->eng.binlog.files[s->eng.binlog.nfiles - 1].index),
                      FILE_SIZE);
    ck_assert_uint_eq(s->eng.binlog.disk_bytes, di.bytes);
    close_srv(s);

    /* Closed: the current file is cut to its used size too. */
    di = scan_dir();
    ck_assert_uint_lt(di.bytes, (uint64_t)di.count * FILE_SIZE);
    s = open_srv();
    ck_assert_uint_eq(s->eng.jobs.len, 60);
    for (int i = 0; i < 60; i++) {
        Job *j = find(s, ids[i]);
        ck_assert_ptr_nonnull(j);
        check_filled(j, 500);
        ck_assert_uint_ge(j->file, 1);
        ck_assert_uint_le(j->file, di.hi);
    }
    /* The new life writes a new file after the newest. */
    ck_assert_uint_eq(s->eng.binlog.files[s->eng.binlog.nfiles - 1].index, di.hi + 1);
    close_srv(s);
}
END_TEST

START_TEST(dead_files_removed)
{
    Server *s = open_srv();
    uint64_t ids[60];
    DirInfo di;
    uint32_t cur;

    for (int i = 0; i < 60; i++) {
        ids[i] = put_filled(s, "dead", 500)->id;
        iterate(s);
    }
    ck_assert_uint_ge(scan_dir().count, 4);
    /* Deleting the jobs of the oldest file lets it go at the next tick. */
    for (int i = 0; i < 60 && find(s, ids[i])->file == 1; i++)
        delete_job(s, find(s, ids[i]));
    iterate(s);
    ck_assert(!file_exists(1));
    ck_assert_uint_eq(s->eng.binlog.files[0].index, 2);
    ck_assert(file_exists(2));
    /* All of them: only the current file is left. */
    for (int i = 0; i < 60; i++)
        if (find(s, ids[i]))
            delete_job(s, find(s, ids[i]));
    iterate(s);
    cur = s->eng.binlog.files[s->eng.binlog.nfiles - 1].index;
    di = scan_dir();
    ck_assert_uint_eq(s->eng.binlog.nfiles, 1);
    ck_assert_uint_eq(di.count, 1 + s->eng.binlog.nspares);
    ck_assert_uint_eq(di.lo, cur);
    ck_assert_uint_eq(s->eng.binlog.live_bytes, 0);
    ck_assert_uint_eq(s->eng.binlog.reserved, 0);
    ck_assert_uint_eq(s->eng.binlog.disk_bytes, di.bytes);
    close_srv(s);

    s = open_srv();
    ck_assert_uint_eq(s->eng.jobs.len, 0);
    ck_assert_uint_eq(s->eng.next_id, ids[59] + 1);
    iterate(s);
    /* The file of the first life held nothing live: gone at the tick. */
    ck_assert(!file_exists(cur));
    close_srv(s);
}
END_TEST

/* ---- compaction ------------------------------------------------------- */

static void check_bounded(Server *s, int cycle, size_t *max_files, uint64_t *max_bytes)
{
    Binlog *b = &s->eng.binlog;
    DirInfo di = scan_dir();
    uint64_t bound = 2 * b->live_bytes + 3 * b->file_size;

    ck_assert_msg(di.bytes <= bound,
                  "cycle %d: %llu bytes in %zu files on disk > 2 x %llu live + 3 x %llu",
                  cycle, (unsigned long long)di.bytes, di.count,
                  (unsigned long long)b->live_bytes, (unsigned long long)b->file_size);
    ck_assert_msg(b->disk_bytes <= bound, "cycle %d: disk_bytes %llu > bound %llu", cycle,
                  (unsigned long long)b->disk_bytes, (unsigned long long)bound);
    ck_assert_msg(b->disk_bytes == di.bytes, "cycle %d: disk_bytes %llu, files hold %llu",
                  cycle, (unsigned long long)b->disk_bytes, (unsigned long long)di.bytes);
    ck_assert_uint_eq(di.count, b->nfiles + b->nspares);
    if (di.count > *max_files)
        *max_files = di.count;
    if (di.bytes > *max_bytes)
        *max_bytes = di.bytes;
}

/* Put/delete churn around a few long-lived jobs that pin the oldest file. */
START_TEST(compaction_bounds_put_delete_churn)
{
    Server *s;
    Config cfg;
    Job *keep[3];
    uint64_t keep_ids[3], last = 0;
    size_t max_files = 0;
    uint64_t max_bytes = 0;
    int cycles = 1200;

    config(&cfg);
    cfg.fsync_never = 1; /* thousands of commits; the logic is the same */
    s = open_cfg(&cfg);
    keep[0] = put_job(s, "keep", 1, 0, 10, bin_body, sizeof bin_body);
    keep[1] = put_job(s, "keep", 2, 0, 10, "buried", 6);
    bury_job(s, keep[1]);
    keep[2] = put_job(s, "keep", 3, 86400, 10, "delayed", 7);
    for (int i = 0; i < 3; i++)
        keep_ids[i] = keep[i]->id;
    iterate(s);
    for (int i = 0; i < cycles; i++) {
        Job *j = put_filled(s, "churn", 500);
        last = j->id;
        iterate(s);
        delete_job(s, j);
        iterate(s);
        check_bounded(s, i, &max_files, &max_bytes);
    }
    ck_assert_uint_gt(s->eng.binlog.records_migrated, 0);
    /* ~700 KB went through the log, ~90 files' worth; a handful of files
     * were ever there at once. */
    ck_assert_uint_le(max_files, 5);
    ck_assert_uint_gt(s->eng.binlog.files[0].index, 60);
    close_srv(s);

    s = open_cfg(&cfg);
    ck_assert_uint_eq(s->eng.jobs.len, 3);
    ck_assert_uint_eq(s->eng.next_id, last + 1);
    ck_assert_int_eq(find(s, keep_ids[0])->state, JOB_READY);
    ck_assert_uint_eq(find(s, keep_ids[0])->body_size, sizeof bin_body);
    ck_assert(memcmp(find(s, keep_ids[0])->body, bin_body, sizeof bin_body) == 0);
    ck_assert_int_eq(find(s, keep_ids[1])->state, JOB_BURIED);
    ck_assert_uint_eq(job_ext_view(find(s, keep_ids[1]))->buries, 1);
    ck_assert_int_eq(find(s, keep_ids[2])->state, JOB_DELAYED);
    ck_assert_int_gt(job_ext(find(s, keep_ids[2]))->deadline, s->eng.now + 86000 * NS_PER_SEC);
    close_srv(s);
}
END_TEST

/* Jobs released again and again: state records pile up in new files
 * while the jobs' full records pin the old ones. */
START_TEST(compaction_bounds_release_churn)
{
    Server *s;
    Config cfg;
    Worker *c = fake_conn();
    Job *live[20];
    uint64_t ids[20];
    size_t max_files = 0;
    uint64_t max_bytes = 0;

    config(&cfg);
    cfg.fsync_never = 1;
    s = open_cfg(&cfg);
    for (int i = 0; i < 20; i++) {
        live[i] = put_filled(s, "rel", 300);
        ids[i] = live[i]->id;
    }
    iterate(s);
    for (int round = 0; round < 200; round++) {
        for (int i = 0; i < 20; i++) {
            reserve_job(s, c, live[i]);
            release_job(s, live[i], (uint32_t)round, 0);
        }
        iterate(s);
        check_bounded(s, round, &max_files, &max_bytes);
    }
    ck_assert_uint_gt(s->eng.binlog.records_migrated, 0);
    close_srv(s);
    free(c);

    s = open_cfg(&cfg);
    ck_assert_uint_eq(s->eng.jobs.len, 20);
    for (int i = 0; i < 20; i++) {
        Job *j = find(s, ids[i]);
        ck_assert_ptr_nonnull(j);
        check_filled(j, 300);
        ck_assert_uint_eq(j->pri, 199);
        ck_assert_uint_eq(job_ext_view(j)->releases, 200);
        ck_assert_uint_eq(job_ext_view(j)->reserves, 200);
    }
    close_srv(s);
}
END_TEST

/* A promotion's id jump (engine_skip_ids) is one delete record of the
 * last id skipped. Records of old jobs alone can then fill and roll over
 * file after file, and compaction drops the file that held it: the jump
 * must go on in the newest file, or a restart hands out skipped ids. */
START_TEST(id_jump_outlives_its_file)
{
    Server *s;
    Config cfg;
    Worker *c = fake_conn();
    Job *live[20];
    uint64_t jump_to;

    config(&cfg);
    cfg.fsync_never = 1;
    s = open_cfg(&cfg);
    for (int i = 0; i < 20; i++)
        live[i] = put_filled(s, "jump", 300);
    iterate(s);
    ck_assert_int_eq(engine_skip_ids(&s->eng, 1u << 20), 0);
    jump_to = s->eng.next_id;
    for (int round = 0; round < 200; round++) {
        for (int i = 0; i < 20; i++) {
            reserve_job(s, c, live[i]);
            release_job(s, live[i], (uint32_t)round, 0);
        }
        iterate(s);
    }
    ck_assert_uint_eq(s->eng.next_id, jump_to); /* no put since */
    ck_assert_uint_gt(s->eng.binlog.records_migrated, 0);
    ck_assert(!file_exists(1));
    close_srv(s);
    free(c);

    s = open_cfg(&cfg);
    ck_assert_uint_eq(s->eng.jobs.len, 20);
    ck_assert_uint_ge(s->eng.next_id, jump_to);
    close_srv(s);
}
END_TEST

/* More live data than one file: compaction keeps all of it. */
START_TEST(compaction_keeps_many_live_jobs)
{
    Server *s;
    Config cfg;
    uint64_t ids[100];
    size_t max_files = 0;
    uint64_t max_bytes = 0;

    config(&cfg);
    cfg.fsync_never = 1;
    s = open_cfg(&cfg);
    for (int i = 0; i < 100; i++)
        ids[i] = put_filled(s, "many", 400)->id; /* ~5 files of live data */
    iterate(s);
    for (int i = 0; i < 800; i++) {
        Job *j = put_filled(s, "churn", 700);
        iterate(s);
        delete_job(s, j);
        iterate(s);
        check_bounded(s, i, &max_files, &max_bytes);
    }
    ck_assert_uint_gt(s->eng.binlog.records_migrated, 0);
    close_srv(s);
    s = open_cfg(&cfg);
    ck_assert_uint_eq(s->eng.jobs.len, 100);
    for (int i = 0; i < 100; i++)
        check_filled(find(s, ids[i]), 400);
    close_srv(s);
}
END_TEST

/* ---- torn tails ------------------------------------------------------- */

/* Five jobs in binlog.1; returns their ids and the last record's offset. */
static size_t five_jobs(uint64_t ids[5])
{
    Server *s = open_srv();
    size_t offs[8], end;

    for (int i = 0; i < 5; i++) {
        ids[i] = put_filled(s, "torn", 100)->id;
        iterate(s);
    }
    close_srv(s);
    ck_assert_uint_eq(record_offsets(1, offs, 8, &end), 5);
    ck_assert_uint_eq((uint64_t)file_size(1), end);
    return offs[4];
}

static void expect_four_of_five(const uint64_t ids[5], size_t cut)
{
    Server *s = open_srv();
    char want[128];

    snprintf(want, sizeof want, "torn record at offset %zu", cut);
    ck_assert_msg(strstr(captured, want) && strstr(captured, "binlog.1"),
                  "no warning naming binlog.1 and offset %zu: %s", cut, captured);
    ck_assert_uint_eq(s->eng.jobs.len, 4);
    for (int i = 0; i < 4; i++)
        check_filled(find(s, ids[i]), 100);
    ck_assert_ptr_null(find(s, ids[4]));
    /* Cut off at the torn record. */
    ck_assert_uint_eq((uint64_t)file_size(1), cut);
    close_srv(s);
    /* And a third start is clean. */
    s = open_srv();
    ck_assert_ptr_null(strstr(captured, "torn"));
    ck_assert_uint_eq(s->eng.jobs.len, 4);
    close_srv(s);
}

START_TEST(torn_tail_truncated)
{
    uint64_t ids[5];
    size_t last = five_jobs(ids);
    off_t size = file_size(1);

    for (off_t cut = size - 1; cut > (off_t)last; cut -= 13) {
        /* Each cut on a fresh copy of the same data. */
        char *data;
        size_t len;
        read_file(1, &data, &len);
        truncate_file(1, cut);
        {
            Server *s = open_srv();
            ck_assert_uint_eq(s->eng.jobs.len, 4);
            ck_assert_ptr_null(find(s, ids[4]));
            ck_assert_uint_eq((uint64_t)file_size(1), last);
            close_srv(s);
        }
        /* Put the file back as it was, drop the files the open made. */
        truncate_file(1, 0);
        write_at(1, 0, data, len);
        for (uint32_t i = 2; file_exists(i); i++) {
            char p[256];
            path_of(i, p, sizeof p);
            unlink(p);
        }
        free(data);
    }
    truncate_file(1, (off_t)last + 3);
    expect_four_of_five(ids, last);
}
END_TEST

/* A crash mid-write in a preallocated file: the record's end is zeros,
 * and zeros follow it. */
START_TEST(torn_tail_zero_filled)
{
    uint64_t ids[5];
    size_t last = five_jobs(ids);
    off_t size = file_size(1);
    char zeros[4096];

    memset(zeros, 0, sizeof zeros);
    /* Zero the second half of the last record, then zero-fill the file
     * to a preallocated length. */
    write_at(1, (off_t)last + ((size_t)size - last) / 2, zeros, ((size_t)size - last + 1) / 2);
    write_at(1, size, zeros, sizeof zeros);
    expect_four_of_five(ids, last);
}
END_TEST

/* The length of the last record is garbage pointing past the end. */
START_TEST(torn_tail_bad_length)
{
    uint64_t ids[5];
    size_t last = five_jobs(ids);
    char len[4] = {(char)0xff, (char)0xff, 0x00, 0x00};

    write_at(1, (off_t)last, len, 4);
    expect_four_of_five(ids, last);
}
END_TEST

/* A process that dies without closing the binlog (no cut, no final sync
 * beyond the strict commits) replays everything it acknowledged. */
static void crash_child(int njobs, uint32_t body, int *spares)
{
    int pfd[2];
    pid_t pid;
    int st, got[2] = {0, 0};

    ck_assert_int_eq(pipe(pfd), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        Server *s;
        Config cfg;
        char err[512];
        int out[2];
        close(pfd[0]);
        /* A process crash, not a power cut: what was written is in the
         * page cache either way; skip the fsyncs to keep the test quick. */
        {
            int null = open("/dev/null", O_WRONLY);
            if (null >= 0)
                dup2(null, STDERR_FILENO);
        }
        config(&cfg);
        cfg.fsync_never = 1;
        s = calloc(1, sizeof *s);
        if (!s || server_init(s, &cfg) < 0 || binlog_open(&s->eng, err, sizeof err) < 0)
            _exit(2);
        for (int i = 0; i < njobs; i++) {
            Tube *t = tubes_get(&s->eng.tubes, "crash", 5);
            Job *j = job_alloc(s->eng.next_id++, body);
            if (!t || !j)
                _exit(3);
            memset(j->body, 'c', body);
            j->ttr = 1;
            job_set_created(j, s->eng.now);
            j->tube = t;
            if (binlog_reserve_put(&s->eng, j) < 0)
                _exit(4);
            queue_add(&s->eng, j, t);
            binlog_put(&s->eng, j);
            binlog_commit(&s->eng);
            s->eng.now = clock_mono();
            binlog_tick(&s->eng);
        }
        out[0] = (int)s->eng.binlog.nspares;
        out[1] = (int)s->eng.binlog.files[s->eng.binlog.nfiles - 1].index;
        if (write(pfd[1], out, sizeof out) != (ssize_t)sizeof out)
            _exit(5);
        _exit(0); /* no server_free: a crash */
    }
    close(pfd[1]);
    ck_assert_int_eq(read(pfd[0], got, sizeof got), (ssize_t)sizeof got);
    close(pfd[0]);
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    spares[0] = got[0];
    spares[1] = got[1];
}

START_TEST(crash_without_close_replays)
{
    int info[2];
    Server *s;

    crash_child(50, 100, info);
    ck_assert_uint_eq((uint64_t)file_size((uint32_t)info[1]), FILE_SIZE); /* not cut */
    s = open_srv();
    ck_assert_uint_eq(s->eng.jobs.len, 50);
    for (uint64_t id = 1; id <= 50; id++)
        ck_assert_ptr_nonnull(find(s, id));
    close_srv(s);
}
END_TEST

/* Crash mid-write while spare files stand ready after the current one:
 * the torn record is at the end of the last file holding data. */
START_TEST(crash_torn_with_spares)
{
    int info[2];
    uint32_t cur;
    size_t offs[1], end, n;
    char zeros[8] = {0};
    Server *s;
    char err[512];
    int rc;
    Config cfg;

    /* Many small live jobs: their future delete records need more room
     * than the current file has, so spares are made ahead. */
    crash_child(700, 1, info);
    cur = (uint32_t)info[1];
    ck_assert_msg(info[0] > 0, "expected spare files (have %d)", info[0]);
    ck_assert(file_exists(cur + 1));
    n = record_offsets(cur, offs, 0, &end);
    ck_assert_uint_gt(n, 0);
    /* Tear the last record: zero its last bytes. */
    write_at(cur, (off_t)end - 4, zeros, 4);
    config(&cfg);
    s = try_open(&cfg, &rc, err, sizeof err);
    if (rc != 0) {
        close_failed(s);
        ck_abort_msg("crash mid-write with a spare file after binlog.%u: "
                     "binlog_open failed: %s", cur, err);
    }
    ck_assert_uint_eq(s->eng.jobs.len, 699);
    close_srv(s);
}
END_TEST

/* ---- damage ----------------------------------------------------------- */

/* Jobs across several files, all live; returns the highest file index. */
static uint32_t several_files(uint64_t *ids, int n)
{
    Server *s = open_srv();
    uint32_t hi;

    for (int i = 0; i < n; i++) {
        ids[i] = put_filled(s, "dmg", 500)->id;
        iterate(s);
    }
    hi = s->eng.binlog.files[s->eng.binlog.nfiles - 1].index;
    ck_assert_uint_ge(hi, 3);
    close_srv(s);
    return hi;
}

START_TEST(damaged_older_file_refused)
{
    uint64_t ids[40];
    size_t offs[16], end;
    char err[512], want[128], byte;
    Server *s;
    Config cfg;
    int rc;

    several_files(ids, 40);
    ck_assert_uint_ge(record_offsets(1, offs, 16, &end), 5);
    /* Flip one byte inside the third record's body. */
    {
        char *data;
        size_t len;
        read_file(1, &data, &len);
        byte = (char)(data[offs[2] + 100] ^ 0x10);
        free(data);
    }
    write_at(1, (off_t)offs[2] + 100, &byte, 1);

    config(&cfg);
    s = try_open(&cfg, &rc, err, sizeof err);
    ck_assert_int_eq(rc, -1);
    snprintf(want, sizeof want, "offset %zu", offs[2]);
    ck_assert_msg(strstr(err, "binlog.1") && strstr(err, want),
                  "message should name binlog.1 and %s: %s", want, err);
    close_failed(s);

    /* --recover: starts, keeps everything but the damaged record. */
    cfg.recover = 1;
    s = open_cfg(&cfg);
    ck_assert_msg(strstr(captured, "binlog.1") && strstr(captured, "dropped"),
                  "no report of the dropped range: %s", captured);
    ck_assert_uint_eq(s->eng.jobs.len, 39);
    for (int i = 0; i < 40; i++) {
        Job *j = find(s, ids[i]);
        if (i == 2) {
            ck_assert_ptr_null(j);
            continue;
        }
        ck_assert_ptr_nonnull(j);
        check_filled(j, 500);
    }
    close_srv(s);
}
END_TEST

/* Damage in the newest file that is not at its end is damage too. */
START_TEST(damaged_newest_file_middle_refused)
{
    uint64_t ids[40];
    uint32_t hi = several_files(ids, 40);
    size_t offs[16], end;
    char err[512], want[128], byte = 0x55;
    Server *s;
    Config cfg;
    int rc;

    ck_assert_uint_ge(record_offsets(hi, offs, 16, &end), 2);
    write_at(hi, (off_t)offs[0] + 20, &byte, 1);
    config(&cfg);
    s = try_open(&cfg, &rc, err, sizeof err);
    ck_assert_int_eq(rc, -1);
    snprintf(want, sizeof want, "binlog.%u", hi);
    ck_assert_msg(strstr(err, want) && strstr(err, "offset 16"),
                  "message should name %s and offset 16: %s", want, err);
    close_failed(s);
}
END_TEST

START_TEST(damaged_header_refused)
{
    uint64_t ids[40];
    char err[512], bad = 'X', zeros[BL_HEADER_SIZE];
    Server *s;
    Config cfg;
    int rc;

    several_files(ids, 40);
    write_at(2, 3, &bad, 1);
    config(&cfg);
    s = try_open(&cfg, &rc, err, sizeof err);
    ck_assert_int_eq(rc, -1);
    ck_assert_msg(strstr(err, "binlog.2") && strstr(err, "header") && strstr(err, "offset 0"),
                  "%s", err);
    close_failed(s);

    /* An older file that is all zeros. */
    memset(zeros, 0, sizeof zeros);
    write_at(2, 0, zeros, sizeof zeros);
    {
        char *data;
        size_t len;
        read_file(2, &data, &len);
        memset(data, 0, len);
        write_at(2, 0, data, len);
        free(data);
    }
    s = try_open(&cfg, &rc, err, sizeof err);
    ck_assert_int_eq(rc, -1);
    ck_assert_msg(strstr(err, "binlog.2") && strstr(err, "zero"), "%s", err);
    close_failed(s);

    cfg.recover = 1;
    s = open_cfg(&cfg);
    ck_assert_uint_gt(s->eng.jobs.len, 0);
    ck_assert_uint_lt(s->eng.jobs.len, 40);
    close_srv(s);
}
END_TEST

START_TEST(missing_middle_file_refused)
{
    uint64_t ids[40];
    int kept[40];
    char err[512], p[256];
    Server *s;
    Config cfg;
    int rc;

    several_files(ids, 40);
    path_of(2, p, sizeof p);
    ck_assert_int_eq(unlink(p), 0);
    config(&cfg);
    s = try_open(&cfg, &rc, err, sizeof err);
    ck_assert_int_eq(rc, -1);
    ck_assert_msg(strstr(err, "binlog.2") && strstr(err, "missing"), "%s", err);
    close_failed(s);

    /* --recover goes on without it: the jobs of 1 and 3.. come back. */
    cfg.recover = 1;
    s = open_cfg(&cfg);
    ck_assert_uint_gt(s->eng.jobs.len, 0);
    ck_assert_uint_lt(s->eng.jobs.len, 40);
    ck_assert_ptr_nonnull(find(s, ids[0]));
    ck_assert_ptr_nonnull(find(s, ids[39]));
    for (int i = 0; i < 40; i++)
        kept[i] = find(s, ids[i]) != NULL;
    close_srv(s);

    /* Its rewrite spans several new files, numbered after the gap: each
     * must count its jobs (a lookup that took the numbering for whole
     * found another file, or none, and a file holding rewritten jobs went
     * as if dead), so every job recovered is there after two restarts. */
    cfg.recover = 0;
    for (int round = 0; round < 2; round++) {
        s = open_cfg(&cfg);
        for (int i = 0; i < 40; i++) {
            Job *j = find(s, ids[i]);
            ck_assert_msg((j != NULL) == kept[i], "job %llu %s after restart %d",
                          (unsigned long long)ids[i], kept[i] ? "lost" : "back", round + 1);
            if (j)
                check_filled(j, 500);
        }
        close_srv(s);
    }
}
END_TEST

/* bl_file_of() finds a file by its number when --recover went on past
 * missing ones: the list then has gaps (1, 3, 4, 7), and taking the
 * numbering for whole found another file's entry, or none; the live
 * counts went to the wrong files and a file holding jobs was removed. */
START_TEST(file_lookup_with_gaps)
{
    Binlog b = {0};
    const uint32_t have[] = {1, 3, 4, 7, 8, 12};

    for (size_t i = 0; i < sizeof have / sizeof *have; i++)
        ck_assert_int_eq(bl_files_push(&b, have[i]), 0);
    for (uint32_t k = 0; k <= 14; k++) {
        BlFile *f = bl_file_of(&b, k);
        int want = 0;
        for (size_t i = 0; i < sizeof have / sizeof *have; i++)
            want |= have[i] == k;
        ck_assert_msg(want ? f && f->index == k : f == NULL, "binlog.%u: %s", k,
                      f ? "another file's entry" : "not found");
    }
    tb_free(b.files);
}
END_TEST

/* ---- the lock --------------------------------------------------------- */

START_TEST(second_open_refused_while_locked)
{
    Server *a = open_srv(), *b;
    Config cfg;
    char err[512];
    int rc;
    uint64_t id;

    config(&cfg);
    b = try_open(&cfg, &rc, err, sizeof err);
    ck_assert_int_eq(rc, -1);
    ck_assert_msg(strstr(err, "lock") && strstr(err, "in use"), "%s", err);
    ck_assert_msg(strstr(err, dir), "message should name the directory: %s", err);
    close_failed(b);

    /* The first server is unaffected, and its files are intact. */
    id = put_filled(a, "lk", 50)->id;
    iterate(a);
    close_srv(a);
    b = open_srv();
    ck_assert_ptr_nonnull(find(b, id));
    close_srv(b);
}
END_TEST


/* ---- disk faults: a full disk, a failing write, a failing fsync ------- */

static int fail_fallocate(int fd, off_t off, off_t len)
{
    (void)fd, (void)off, (void)len;
    return ENOSPC;
}

static ssize_t fail_pwrite(int fd, const void *p, size_t n, off_t off)
{
    (void)fd, (void)p, (void)n, (void)off;
    errno = EIO;
    return -1;
}

static int fail_fdatasync(int fd)
{
    (void)fd;
    errno = EIO;
    return -1;
}

static void restore_disk(void)
{
    bl_disk.fallocate = posix_fallocate;
    bl_disk.pwrite = pwrite;
    bl_disk.fdatasync = fdatasync;
}

/* A binlog that may need a new file for the next record: a full disk is
 * a refused reservation (OUT_OF_MEMORY for the client), never damage, and
 * it passes by itself when space returns. */
START_TEST(full_disk_refuses_then_recovers)
{
    Server *a = open_srv();
    uint64_t before = 0, first = 0;
    int refused = 0;

    bl_disk.fallocate = fail_fallocate;
    for (int i = 0; i < 200 && !refused; i++) {
        Tube *t = tubes_get(&a->eng.tubes, "full", 4);
        Job *j = job_alloc(a->eng.next_id++, 300);
        ck_assert_ptr_nonnull(j);
        memset(j->body, 'f', 300);
        j->ttr = 1;
        j->tube = t;
        if (binlog_reserve_put(&a->eng, j) < 0) {
            refused = 1;
            job_free(j);
            if (t->refs == 0) {
                tube_ref(t);
                tube_unref(&a->eng.tubes, t);
            }
            break;
        }
        ck_assert_int_eq(queue_add(&a->eng, j, t), 0);
        binlog_put(&a->eng, j);
        iterate(a);
        before = j->id;
        if (!first)
            first = j->id;
    }
    ck_assert_msg(refused, "a full disk never refused a put");
    ck_assert(a->eng.binlog.healthy); /* full is not broken */
    /* Deletes always have room, even on a full disk. */
    ck_assert_uint_gt(first, 0);
    delete_job(a, find(a, first));
    iterate(a);
    ck_assert(a->eng.binlog.healthy);
    restore_disk();
    {
        Job *j = put_filled(a, "full", 300); /* space is back */
        iterate(a);
        ck_assert_uint_gt(j->id, before);
    }
    close_srv(a);
    a = open_srv();
    ck_assert_ptr_nonnull(find(a, before));
    ck_assert_ptr_null(find(a, first)); /* the delete made on a full disk held */
    close_srv(a);
}
END_TEST

/* A failed write is never silent: the binlog turns unhealthy, durable
 * commands are refused, and a fresh file with the whole state makes it
 * healthy again. */
START_TEST(failed_write_unhealthy_then_recovers)
{
    Server *a = open_srv();
    Job *kept = put_filled(a, "w", 40);
    uint64_t kept_id = kept->id;
    Job *lost;

    iterate(a);
    bl_disk.pwrite = fail_pwrite;
    lost = put_filled(a, "w", 40); /* placed, but its write fails */
    capture_begin();
    binlog_commit(&a->eng);
    capture_end();
    ck_assert(!a->eng.binlog.healthy);
    ck_assert_msg(strstr(captured, "binlog") && strstr(captured, "unhealthy"),
                  "the failure was not logged: %s", captured);
    ck_assert_int_eq(binlog_reserve_state(&a->eng), -1);
    ck_assert_int_eq(binlog_reserve_put(&a->eng, lost), -1);
    {
        Buf b = {0};
        Beanstalk f;
        beanstalk_init(&f, a);
        stats_server(&f, &b);
        ck_assert_ptr_nonnull(strstr(b.data, "binlog-healthy: false\n"));
        buf_free(&b);
    }
    restore_disk();
    a->eng.now += 2 * NS_PER_SEC; /* recovery is tried once a second */
    capture_begin();
    binlog_tick(&a->eng);
    capture_end();
    ck_assert_msg(a->eng.binlog.healthy, "not healthy again: %s", captured);
    ck_assert_int_eq(binlog_reserve_state(&a->eng), 0);
    close_srv(a);
    a = open_srv();
    ck_assert_ptr_nonnull(find(a, kept_id));
    close_srv(a);
}
END_TEST

/* The same for an fsync that fails on the sync thread. */
START_TEST(failed_fsync_unhealthy_then_recovers)
{
    Server *a = open_srv();
    uint64_t id;

    bl_disk.fdatasync = fail_fdatasync;
    id = put_filled(a, "s", 40)->id;
    capture_begin();
    binlog_commit(&a->eng);   /* starts the sync on the thread */
    binlog_settle(&a->eng);   /* waits for it */
    capture_end();
    ck_assert(!a->eng.binlog.healthy);
    ck_assert_msg(strstr(captured, "fsync"), "the failure was not logged: %s", captured);
    restore_disk();
    a->eng.now += 2 * NS_PER_SEC;
    capture_begin();
    binlog_tick(&a->eng);
    capture_end();
    ck_assert(a->eng.binlog.healthy);
    close_srv(a);
    a = open_srv();
    ck_assert_ptr_nonnull(find(a, id));
    close_srv(a);
}
END_TEST

/* ---- -f N: the fsyncs that make records durable actually happen ------- */

/* Counts the binlog's data syncs (the sync thread calls it too). */
static atomic_int nsyncs;

static int counting_fdatasync(int fd)
{
    atomic_fetch_add(&nsyncs, 1);
    return fdatasync(fd);
}

/* -f N: records written since the last sync are synced by the tick once
 * N ms have passed (on the sync thread). */
START_TEST(interval_tick_syncs_written_records)
{
    Config cfg;
    Server *a;
    int before;

    config(&cfg);
    cfg.fsync_ms = 100;
    a = open_cfg(&cfg);
    bl_disk.fdatasync = counting_fdatasync;
    put_filled(a, "s", 40);
    binlog_commit(&a->eng);
    before = atomic_load(&nsyncs);
    a->eng.now += 200 * NS_PER_MSEC;
    binlog_tick(&a->eng);
    ck_assert_msg(a->eng.binlog.syncer.busy, "the tick started no sync of the written records");
    binlog_settle(&a->eng);
    ck_assert_int_gt(atomic_load(&nsyncs), before);
    restore_disk();
    close_srv(a);
}
END_TEST

/* -f N: what the interval has not synced yet is synced when the binlog
 * settles (shutdown), on the loop's own thread. */
START_TEST(settle_syncs_what_the_interval_has_not)
{
    Config cfg;
    Server *a;
    int before;
    uint64_t id;

    config(&cfg);
    cfg.fsync_ms = 3600 * 1000;
    a = open_cfg(&cfg);
    bl_disk.fdatasync = counting_fdatasync;
    id = put_filled(a, "s", 40)->id;
    binlog_commit(&a->eng);
    before = atomic_load(&nsyncs);
    binlog_settle(&a->eng);
    ck_assert_int_gt(atomic_load(&nsyncs), before);
    restore_disk();
    close_srv(a);
    a = open_srv();
    ck_assert_ptr_nonnull(find(a, id));
    close_srv(a);
}
END_TEST

/* ---- -f 0: a sync that ended while the loop was busy ------------------ */

/* Until the sync thread's eventfd is readable: the sync has ended, and
 * the loop has not looked. */
static void wait_sync_ended(Server *s)
{
    struct pollfd p = {.fd = s->eng.binlog.syncer.efd, .events = POLLIN};

    ck_assert_int_eq(poll(&p, 1, 10000), 1);
}

/* The next commit takes the ended sync (its records are durable at once)
 * and starts one for what it just wrote, without waiting for the loop to
 * read the eventfd first. */
START_TEST(strict_commit_takes_an_ended_sync)
{
    Server *a = open_srv();
    uint64_t first, second;

    put_filled(a, "s", 40);
    first = a->eng.binlog.lsn;
    binlog_commit(&a->eng); /* starts the sync on the thread */
    ck_assert(a->eng.binlog.syncer.busy);
    wait_sync_ended(a);
    ck_assert_uint_lt(a->eng.binlog.durable_lsn, first); /* nobody looked yet */
    put_filled(a, "s", 40);
    second = a->eng.binlog.lsn;
    binlog_commit(&a->eng);
    ck_assert_uint_ge(a->eng.binlog.durable_lsn, first);
    ck_assert_uint_lt(a->eng.binlog.durable_lsn, second);
    ck_assert(a->eng.binlog.syncer.busy); /* the next one runs */
    ck_assert_uint_eq(a->eng.binlog.sync_target, second);
    binlog_settle(&a->eng);
    ck_assert_uint_eq(a->eng.binlog.durable_lsn, second);
    close_srv(a);
}
END_TEST

/* The same with a failed fsync: the commit finds the failure, the binlog
 * turns unhealthy and starts no sync on the failed file. */
START_TEST(strict_commit_takes_a_failed_sync)
{
    Server *a = open_srv();
    uint64_t first;

    bl_disk.fdatasync = fail_fdatasync;
    put_filled(a, "s", 40);
    first = a->eng.binlog.lsn;
    binlog_commit(&a->eng);
    wait_sync_ended(a);
    restore_disk();
    put_filled(a, "s", 40);
    capture_begin();
    binlog_commit(&a->eng);
    capture_end();
    ck_assert(!a->eng.binlog.healthy);
    ck_assert_msg(strstr(captured, "fsync"), "the failure was not logged: %s", captured);
    ck_assert(!a->eng.binlog.syncer.busy);
    ck_assert_uint_lt(a->eng.binlog.durable_lsn, first);
    close_srv(a);
}
END_TEST

/* A sync thread held at a gate: each sync waits for one byte. */
static int gate[2];

static int gated_fdatasync(int fd)
{
    char c;

    if (read(gate[0], &c, 1) != 1)
        return -1;
    return fdatasync(fd);
}

static void open_gate(void)
{
    ck_assert_int_eq(write(gate[1], "g", 1), 1);
}

/* binlog_poll_sync() takes an ended sync in the middle of an iteration
 * (a replica's long apply): what it covered is durable at once, records
 * written after it started get the next sync; records only placed (not
 * written) are not synced and not durable; with no sync running it does
 * nothing. */
START_TEST(poll_sync_takes_an_ended_sync)
{
    Server *a = open_srv();
    uint64_t first, second, third;

    ck_assert_int_eq(pipe(gate), 0);
    binlog_poll_sync(&a->eng); /* none runs: nothing happens */
    ck_assert(!a->eng.binlog.syncer.busy);
    bl_disk.fdatasync = gated_fdatasync;
    put_filled(a, "s", 40);
    first = a->eng.binlog.lsn;
    binlog_commit(&a->eng); /* starts the sync on the thread: held */
    ck_assert(a->eng.binlog.syncer.busy);
    put_filled(a, "s", 40);
    second = a->eng.binlog.lsn;
    binlog_commit(&a->eng); /* written; its sync waits for the running one */
    ck_assert_uint_eq(a->eng.binlog.sync_target, first);
    binlog_poll_sync(&a->eng); /* still running: nothing */
    ck_assert_uint_lt(a->eng.binlog.durable_lsn, first);
    open_gate();
    wait_syncer_done(&a->eng.binlog.syncer);
    put_filled(a, "s", 40); /* placed only, as an apply goes on */
    third = a->eng.binlog.lsn;
    ck_assert_uint_lt(a->eng.binlog.durable_lsn, first); /* nobody looked yet */
    binlog_poll_sync(&a->eng);
    ck_assert_uint_ge(a->eng.binlog.durable_lsn, first);
    ck_assert_uint_lt(a->eng.binlog.durable_lsn, second);
    ck_assert(a->eng.binlog.syncer.busy); /* the written ones' sync runs */
    ck_assert_uint_eq(a->eng.binlog.sync_target, second);
    open_gate();
    wait_syncer_done(&a->eng.binlog.syncer);
    restore_disk();
    binlog_settle(&a->eng);
    ck_assert_uint_eq(a->eng.binlog.durable_lsn, third);
    close_srv(a);
    close(gate[0]);
    close(gate[1]);
}
END_TEST

/* A sync_journal tube's record written while a sync runs is not covered
 * by that sync: when it ends, the record still waits (and the next sync
 * starts for it), so a later commit of other records does not report it
 * durable before its own fsync. */
START_TEST(sync_journal_record_waits_past_a_running_sync)
{
    static const char text[] = "[tube s]\nsync_journal = true\n";
    char err[256];
    Config cfg;
    Server *a;
    Tube *t;
    uint64_t first, second, third;

    config(&cfg);
    cfg.fsync_ms = 3600 * 1000; /* only sync_journal's own syncs run */
    ck_assert_msg(conf_parse("t.conf", text, sizeof text - 1, &cfg.conf, err, sizeof err) == 0,
                  "conf_parse: %s", err);
    a = open_cfg(&cfg);
    ck_assert_ptr_nonnull(t = engine_tube(&a->eng, "s", 1));
    engine_tube_ref(t);
    ck_assert(t->pol.sync_journal);
    ck_assert_int_eq(pipe(gate), 0);
    bl_disk.fdatasync = gated_fdatasync;
    put_filled(a, "s", 40);
    first = a->eng.binlog.lsn;
    binlog_commit(&a->eng); /* its sync starts, held at the gate */
    ck_assert(a->eng.binlog.syncer.busy);
    ck_assert_uint_lt(a->eng.binlog.durable_lsn, first);
    put_filled(a, "s", 40);
    second = a->eng.binlog.lsn;
    binlog_commit(&a->eng); /* written while the first sync runs */
    ck_assert_uint_lt(a->eng.binlog.durable_lsn, first);
    open_gate();
    wait_sync_ended(a);
    ev_poll(&a->loop, 1000); /* the loop sees the sync's end */
    ck_assert_uint_ge(a->eng.binlog.durable_lsn, first);
    ck_assert_uint_lt(a->eng.binlog.durable_lsn, second);
    ck_assert_msg(a->eng.binlog.syncer.busy, "no sync started for the record it did not cover");
    put_filled(a, "other", 40);
    third = a->eng.binlog.lsn;
    binlog_commit(&a->eng);
    ck_assert_msg(a->eng.binlog.durable_lsn < second,
                  "a sync_journal record reported durable before its fsync");
    open_gate();
    wait_syncer_done(&a->eng.binlog.syncer);
    restore_disk();
    binlog_settle(&a->eng);
    ck_assert_uint_eq(a->eng.binlog.durable_lsn, third);
    engine_tube_unref(&a->eng, t);
    close_srv(a);
    conf_free(cfg.conf);
    close(gate[0]);
    close(gate[1]);
}
END_TEST

/* ---- fanout children: C records that outlive their files -------------- */

static Tube *register_child(Server *s, const char *name)
{
    Tube *t = tubes_get(&s->eng.tubes, name, strlen(name));

    ck_assert_ptr_nonnull(t);
    t->registered = 1;
    tube_ref(t);
    binlog_child(&s->eng, t, 1);
    ck_assert_uint_eq(t->child_file, s->eng.binlog.files[s->eng.binlog.nfiles - 1].index);
    return t;
}

/* A child registered in binlog.1 survives: churn makes compaction move its
 * record forward and every old file go; a failed write's recovery writes
 * it again in the fresh file; one let go stays gone; a restart brings
 * back exactly the registered ones, counted live in their files. */
START_TEST(children_outlive_their_files)
{
    Server *a = open_srv();
    Binlog *b = &a->eng.binlog;
    Tube *kept = register_child(a, "P+kept");
    Tube *gone = register_child(a, "P+gone");
    uint32_t first = kept->child_file;
    uint64_t reserved = b->reserved;
    int i;

    ck_assert_uint_gt(reserved, 0); /* the let-go records' room */
    iterate(a);
    for (i = 0; i < 3000 && b->files[0].index <= first; i++) {
        delete_job(a, put_filled(a, "churn", 600));
        if (i % 4 == 3)
            iterate(a);
    }
    ck_assert_msg(b->files[0].index > first, "binlog.%u still there after %d puts", first, i);
    ck_assert_uint_gt(kept->child_file, first);
    ck_assert_uint_gt(b->records_migrated, 0);
    binlog_child(&a->eng, gone, 0);
    ck_assert_uint_eq(gone->child_file, 0);
    gone->registered = 0;
    tube_unref(&a->eng.tubes, gone);
    ck_assert_uint_lt(b->reserved, reserved); /* its room given back */
    iterate(a);

    bl_disk.pwrite = fail_pwrite;
    put_filled(a, "churn", 10);
    capture_begin();
    binlog_commit(&a->eng);
    capture_end();
    restore_disk();
    a->eng.now += 2 * NS_PER_SEC;
    capture_begin();
    binlog_tick(&a->eng);
    capture_end();
    ck_assert(b->healthy);
    ck_assert_uint_eq(kept->child_file, b->files[b->nfiles - 1].index);
    iterate(a);
    close_srv(a);

    a = open_srv();
    b = &a->eng.binlog;
    kept = tubes_find(&a->eng.tubes, "P+kept", 6);
    ck_assert_ptr_nonnull(kept);
    ck_assert(kept->registered);
    ck_assert_ptr_nonnull(bl_file_of(b, kept->child_file));
    ck_assert_uint_ge(bl_file_of(b, kept->child_file)->live_jobs, 1);
    ck_assert_ptr_null(tubes_find(&a->eng.tubes, "P+gone", 6));
    close_srv(a);
}
END_TEST

/* ---- the record stream: every written record, to each subscriber ------ */

#define SEEN_MAX 512

/* What one subscriber saw: each record's type and id, in order, the
 * sequence number of each write's last record, and its resets. */
typedef struct Seen {
    char type[SEEN_MAX];
    uint64_t id[SEEN_MAX];
    size_t n;
    uint64_t last_lsn;
    int lsn_backwards;     /* a write's lsn did not grow */
    int order_seen;        /* the call's place among all subscribers' calls */
    int resets;
} Seen;

static int calls;

static void seen_write(void *arg, const char *data, size_t len, uint64_t pos, uint64_t lsn)
{
    Seen *v = arg;
    size_t off = 0;

    (void)pos;
    v->order_seen = calls++;
    if (lsn <= v->last_lsn)
        v->lsn_backwards = 1;
    v->last_lsn = lsn;
    while (off < len) {
        BlRecord r;
        long n = bl_decode(data + off, len - off, &r);
        ck_assert_int_gt(n, 0); /* only whole, valid records */
        ck_assert_uint_lt(v->n, SEEN_MAX);
        v->type[v->n] = (char)r.type;
        v->id[v->n++] = r.id;
        off += (size_t)n;
    }
}

static void seen_reset(void *arg)
{
    ((Seen *)arg)->resets++;
}

static void check_same(const Seen *a, const Seen *b)
{
    ck_assert_uint_eq(a->n, b->n);
    ck_assert_int_eq(memcmp(a->type, b->type, a->n), 0);
    ck_assert_int_eq(memcmp(a->id, b->id, a->n * sizeof *a->id), 0);
    ck_assert_uint_eq(a->last_lsn, b->last_lsn);
    ck_assert_int_eq(a->resets, b->resets);
}

/* Two subscribers see the same records, in the order they were written
 * (across files rolling over), each write once, the first subscriber
 * first; a rewrite after a failed write resets both; unsubscribing stops
 * the calls. */
START_TEST(stream_two_subscribers_and_reset)
{
    Server *a = open_srv();
    Seen *x = calloc(1, sizeof *x), *y = calloc(1, sizeof *y);
    StoreSub sx = {seen_write, seen_reset, x}, sy = {seen_write, seen_reset, y};
    uint64_t ids[40];
    size_t jn = 0;

    ck_assert_ptr_nonnull(x);
    ck_assert_ptr_nonnull(y);
    ck_assert_int_eq(store_subscribe(&a->eng, &sx), 0);
    ck_assert_int_eq(store_subscribe(&a->eng, &sy), 0);
    ck_assert_int_eq(store_subscribe(&a->eng, &sx), 0); /* the same: replaced */
    calls = 0;
    /* 40 jobs of 500 bytes: several 8 KiB files; every 4th deleted. */
    for (int i = 0; i < 40; i++) {
        Job *j = put_filled(a, "st", 500);
        ids[i] = j->id;
        if (i % 4 == 3)
            delete_job(a, j);
        if (i % 3 == 2)
            iterate(a);
    }
    iterate(a);
    ck_assert_uint_gt(a->eng.binlog.files[a->eng.binlog.nfiles - 1].index, 2);
    check_same(x, y);
    ck_assert(!x->lsn_backwards);
    ck_assert_uint_eq(x->last_lsn, a->eng.binlog.lsn);
    ck_assert_int_lt(x->order_seen, y->order_seen); /* x subscribed first */
    ck_assert_int_eq(calls % 2, 0); /* once each per write, not twice for x */
    /* The jobs' records in put order, each deleted one's D right after. */
    for (size_t k = 0; k < x->n; k++) {
        if (x->type[k] != BL_JOB)
            continue;
        ck_assert_uint_lt(jn, 40);
        ck_assert_uint_eq(x->id[k], ids[jn]);
        if (jn % 4 == 3) {
            ck_assert_uint_lt(k + 1, x->n);
            ck_assert_int_eq(x->type[k + 1], BL_DELETE);
            ck_assert_uint_eq(x->id[k + 1], ids[jn]);
        }
        jn++;
    }
    ck_assert_uint_eq(jn, 40);

    /* A failed write: the records of that iteration never reach the
     * stream; the recovery's rewrite resets every subscriber, then its
     * records (every live job) follow. */
    bl_disk.pwrite = fail_pwrite;
    put_filled(a, "st", 500);
    {
        size_t before = x->n;
        capture_begin();
        binlog_commit(&a->eng);
        capture_end();
        ck_assert_uint_eq(x->n, before);
    }
    restore_disk();
    a->eng.now += 2 * NS_PER_SEC;
    x->n = y->n = 0;
    capture_begin();
    binlog_tick(&a->eng);
    capture_end();
    ck_assert(a->eng.binlog.healthy);
    ck_assert_int_eq(x->resets, 1);
    check_same(x, y);
    {
        size_t jobs = 0;
        for (size_t k = 0; k < x->n; k++)
            jobs += x->type[k] == BL_JOB;
        ck_assert_uint_eq(jobs, a->eng.jobs.len);
    }

    /* Unsubscribed: y hears nothing more; x goes on. */
    store_unsubscribe(&a->eng, &sy);
    x->n = y->n = 0;
    put_filled(a, "st", 10);
    iterate(a);
    ck_assert_uint_eq(y->n, 0);
    ck_assert_uint_eq(x->n, 1);
    close_srv(a);
    free(x);
    free(y);
}
END_TEST

/* The list itself: full at STORE_SUBS, and a removal keeps the others'
 * order. */
START_TEST(stream_list_bounds)
{
    StoreStream st = {0};
    Seen v[STORE_SUBS + 1];
    StoreSub subs[STORE_SUBS + 1];

    memset(v, 0, sizeof v);
    for (int i = 0; i <= STORE_SUBS; i++) {
        subs[i] = (StoreSub){seen_write, NULL, &v[i]};
        ck_assert_int_eq(stream_subscribe(&st, &subs[i]), i < STORE_SUBS ? 0 : -1);
    }
    stream_unsubscribe(&st, &subs[1]);
    ck_assert_uint_eq(st.n, STORE_SUBS - 1);
    ck_assert_ptr_eq(st.subs[0].arg, &v[0]);
    ck_assert_ptr_eq(st.subs[1].arg, &v[2]);
    stream_reset(&st); /* no reset callbacks: nothing to call */
    {
        char rec[BL_DELETE_SIZE];
        BlRecord r = {.type = BL_DELETE, .id = 7};
        bl_encode(&r, rec);
        calls = 0;
        stream_publish(&st, rec, sizeof rec, 1, 5);
        stream_publish(&st, rec, 0, 1, 6); /* nothing written: nothing sent */
    }
    ck_assert_int_eq(calls, STORE_SUBS - 1);
    ck_assert_uint_eq(v[0].n, 1);
    ck_assert_uint_eq(v[1].n, 0);
    ck_assert_uint_eq(v[2].id[0], 7);
    ck_assert_uint_eq(v[2].last_lsn, 5);
}
END_TEST

static Suite *binlog_suite(void)
{
    Suite *s = suite_create("binlog");
    TCase *rp = unit_tcase("replay");
    TCase *fl = unit_tcase("files");
    TCase *cp = unit_tcase("compaction");
    TCase *dm = unit_tcase("damage");
    TCase *fa = unit_tcase("faults");
    TCase *sm = unit_tcase("stream");
    TCase *all[] = {rp, fl, cp, dm, fa, sm};

    for (size_t i = 0; i < 6; i++) {
        tcase_add_unchecked_fixture(all[i], suite_setup, suite_teardown);
        tcase_add_checked_fixture(all[i], test_setup, test_teardown);
    }
    tcase_set_timeout(cp, 300);

    tcase_add_test(rp, replay_restores_states);
    tcase_add_test(rp, replay_buried_jobs);
    tcase_add_test(rp, replay_delay_passed_becomes_ready);
    tcase_add_test(rp, logged_deadline_ignores_a_stale_now);
    tcase_add_test(rp, replay_tube_emptied_then_reused);
    tcase_add_test(rp, replay_ignores_smaller_max_job_size);
    tcase_add_test(rp, deleted_jobs_stay_deleted);
    suite_add_tcase(s, rp);

    tcase_add_test(fl, files_roll_over);
    tcase_add_test(fl, id_jump_outlives_its_file);
    tcase_add_test(fl, dead_files_removed);
    tcase_add_test(fl, second_open_refused_while_locked);
    suite_add_tcase(s, fl);

    tcase_add_test(cp, compaction_bounds_put_delete_churn);
    tcase_add_test(cp, compaction_bounds_release_churn);
    tcase_add_test(cp, compaction_keeps_many_live_jobs);
    suite_add_tcase(s, cp);

    tcase_add_test(dm, torn_tail_truncated);
    tcase_add_test(dm, torn_tail_zero_filled);
    tcase_add_test(dm, torn_tail_bad_length);
    tcase_add_test(dm, crash_without_close_replays);
    tcase_add_test(dm, crash_torn_with_spares);
    tcase_add_test(dm, damaged_older_file_refused);
    tcase_add_test(dm, damaged_newest_file_middle_refused);
    tcase_add_test(dm, damaged_header_refused);
    tcase_add_test(dm, missing_middle_file_refused);
    tcase_add_test(dm, file_lookup_with_gaps);
    suite_add_tcase(s, dm);

    tcase_add_test(fa, full_disk_refuses_then_recovers);
    tcase_add_test(fa, failed_write_unhealthy_then_recovers);
    tcase_add_test(fa, failed_fsync_unhealthy_then_recovers);
    tcase_add_test(fa, strict_commit_takes_an_ended_sync);
    tcase_add_test(fa, strict_commit_takes_a_failed_sync);
    tcase_add_test(fa, poll_sync_takes_an_ended_sync);
    tcase_add_test(fa, sync_journal_record_waits_past_a_running_sync);
    tcase_add_test(fa, interval_tick_syncs_written_records);
    tcase_add_test(fa, settle_syncs_what_the_interval_has_not);
    suite_add_tcase(s, fa);

    tcase_add_test(sm, stream_two_subscribers_and_reset);
    tcase_add_test(sm, stream_list_bounds);
    tcase_add_test(cp, children_outlive_their_files);
    suite_add_tcase(s, sm);
    return s;
}

UNIT_MAIN(binlog_suite)
