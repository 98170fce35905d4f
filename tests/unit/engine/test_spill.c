/* Unit tests for read-behind (spill.c) and the spilled job form (job.c):
 * the form itself, puts past a tube's max_memory_size, bodies dropped
 * after the commit, read back on the loop (spill_load) and ahead of need
 * by the reader thread, reserve loading a body, replay bringing a tube
 * back on disk only, compaction moving spilled records, a damaged record,
 * and allocation failure over a random walk of the engine's operations.
 *
 * Each test builds an Engine on a real event loop with a binlog in a
 * temporary directory and a config file giving tube "s" a budget
 * (test_oldest.c builds the same without a binlog). The loop is driven as
 * server_run() drives it: engine_commit(), ev_poll() (the reader thread's
 * eventfd), engine_tick(). Bodies are a function of the job's id and
 * size, so any body read back can be checked byte for byte.
 *
 * The "regressions" case holds reproductions of the bugs this suite found
 * in the first read-behind engine (each failed, or ASan reported, until
 * its fix). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "binlog.h"
#include "blcodec.h"
#include "blfile.h"
#include "clock.h"
#include "conf.h"
#include "engine.h"
#include "event.h"
#include "job.h"
#include "queue.h"
#include "spill.h"
#include "unit.h"
#include "watch.h"

#define BUDGET 1000
#define BODY 100
#define MAX_JOB 1024
#define SMALL_FILE 8192

static const char conf_text[] =
    "[tube s]\nmax_memory_size = 1000\n"
    "[tube big]\nmax_memory_size = 1M\n"
    "[tube f]\nfanout = true\nmax_memory_size = 500\n"
    "[tube f+c]\nmax_memory_size = 300\n"
    "[tube e]\nmax_memory_size = 200\nmax_age = 1s\nmove_expired_to = dead\n"
    "[tube dead]\nmax_memory_size = 400\n";

/* ---- temporary directories -------------------------------------------- */

static char base_dir[64];
static char dir[128];
static int test_seq;

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    return remove(path);
}

/* The server logs a line or two per open and close, and one per damaged
 * record: they go to a file, and what is not from the server's log (a
 * sanitizer's report) is shown at the end of the test, or by the suite's
 * teardown for a test that died. */
static int saved_stderr = -1;

static void show_captured(const char *path)
{
    char line[1024];
    FILE *f = fopen(path, "r");

    if (!f)
        return;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "tubed: ", 7))
            fputs(line, stderr);
    fclose(f);
    unlink(path);
}

static void capture_path(char *out, size_t n, long pid)
{
    snprintf(out, n, "%s/stderr.%ld", base_dir, pid);
}

static void suite_setup(void)
{
    strcpy(base_dir, "/tmp/tubed-unit-spill-XXXXXX");
    if (!mkdtemp(base_dir)) {
        perror("mkdtemp");
        abort();
    }
}

static void suite_teardown(void)
{
    DIR *d = opendir(base_dir);
    struct dirent *e;

    while (d && (e = readdir(d))) {
        char path[512];
        if (strncmp(e->d_name, "stderr.", 7))
            continue;
        snprintf(path, sizeof path, "%s/%s", base_dir, e->d_name);
        show_captured(path);
    }
    if (d)
        closedir(d);
    nftw(base_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void test_setup(void)
{
    char path[256];
    int fd;

    snprintf(dir, sizeof dir, "%s/t%d.%ld", base_dir, test_seq++, (long)getpid());
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    capture_path(path, sizeof path, (long)getpid());
    fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    ck_assert_int_ge(fd, 0);
    fflush(stderr);
    saved_stderr = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    close(fd);
}

static void test_teardown(void)
{
    char path[256];

    fflush(stderr);
    if (saved_stderr >= 0) {
        dup2(saved_stderr, STDERR_FILENO);
        close(saved_stderr);
        saved_stderr = -1;
    }
    capture_path(path, sizeof path, (long)getpid());
    show_captured(path);
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- bodies ----------------------------------------------------------- */

/* Job id's body of n bytes: every byte value, CR, LF and NUL among them. */
static void fill(uint64_t id, uint32_t n, char *out)
{
    for (uint32_t i = 0; i < n; i++)
        out[i] = (char)(id * 131 + i * 7 + (i >> 3) * 13);
    if (n >= 8)
        memcpy(out, &id, 8);
}

static int body_ok(const Job *j, const char *body)
{
    char want[MAX_JOB];

    if (!body || j->body_size > sizeof want)
        return 0;
    fill(j->id, j->body_size, want);
    return memcmp(body, want, j->body_size) == 0;
}

static void flip_byte(uint32_t index, uint64_t off)
{
    char path[256];
    unsigned char c;
    int fd;

    snprintf(path, sizeof path, "%s/binlog.%u", dir, index);
    fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pread(fd, &c, 1, (off_t)off), 1);
    c ^= 0x20;
    ck_assert_int_eq(pwrite(fd, &c, 1, (off_t)off), 1);
    close(fd);
}

/* Where the last byte of j's body is in its file. */
static uint64_t body_end(const Job *j)
{
    return job_spill_off(j) + bl_job_record_size(j) - 1;
}

/* ---- an engine with a binlog ------------------------------------------ */

typedef struct World {
    EvLoop loop;
    Config cfg;
    ConfFile *conf;
    Engine e;
    Worker w;
    Tube *s;       /* budget BUDGET */
    Tube *p;       /* no budget */
} World;

/* What the last wake of a parked worker said. */
static struct {
    int n;
    WaitEnd how;
    uint64_t id;
    int body_ok;
} woke;

static int body_ok(const Job *j, const char *body);

static void record_wake(Worker *w, WaitEnd how, Job *j)
{
    (void)w;
    woke.n++;
    woke.how = how;
    woke.id = j ? j->id : 0;
    woke.body_ok = j && how == WAIT_RESERVED && body_ok(j, job_body(j));
}
static const WorkerOps ops = {.wake = record_wake};

static void world_config(World *x, uint64_t file_size)
{
    char err[256];

    memset(x, 0, sizeof *x);
    opts_defaults(&x->cfg);
    x->cfg.binlog_dir = dir;
    x->cfg.binlog_size = file_size;
    x->cfg.max_job_size = MAX_JOB;
    x->cfg.fsync_never = 1;
    ck_assert_msg(conf_parse("t.conf", conf_text, sizeof conf_text - 1, &x->conf, err,
                             sizeof err) == 0, "%s", err);
    x->cfg.conf = x->conf;
}

/* Open the engine on dir (replaying what is there); -1 and err if the
 * binlog refuses. */
static int world_try_open(World *x, char *err, size_t errlen)
{
    ck_assert_int_eq(ev_init(&x->loop), 0);
    ck_assert_int_eq(engine_init(&x->e, &x->cfg, &x->loop), 0);
    if (engine_open_binlog(&x->e, err, errlen) < 0)
        return -1;
    worker_init(&x->e, &x->w, &ops);
    x->s = engine_tube(&x->e, "s", 1);
    x->p = engine_tube(&x->e, "p", 1);
    ck_assert_ptr_nonnull(x->s);
    ck_assert_ptr_nonnull(x->p);
    engine_tube_ref(x->s);
    engine_tube_ref(x->p);
    /* The worker watches s alone (a worker watching one tube parks for a
     * spilled body: spill_fetch()). */
    ck_assert_int_eq(watch_add(&x->w, x->s), 0);
    watch_remove(&x->e, &x->w, watch_find(&x->w, engine_tube_find(&x->e, "default", 7)));
    ck_assert_uint_eq(x->w.nwatch, 1);
    ck_assert_uint_eq(x->s->pol.max_memory_size, BUDGET);
    return 0;
}

static void world_open(World *x)
{
    char err[512];

    ck_assert_msg(world_try_open(x, err, sizeof err) == 0, "binlog_open: %s", err);
}

static void world_close(World *x)
{
    worker_release_all(&x->e, &x->w);
    worker_fini(&x->e, &x->w);
    engine_tube_unref(&x->e, x->s);
    engine_tube_unref(&x->e, x->p);
    engine_commit(&x->e);
    engine_settle(&x->e);
    engine_free(&x->e);
    ev_close(&x->loop);
}

static void world_free(World *x)
{
    world_close(x);
    conf_free(x->conf);
}

/* Close and open again on the same directory (a restart). */
static void world_restart(World *x)
{
    world_close(x);
    memset(&x->e, 0, sizeof x->e);
    memset(&x->w, 0, sizeof x->w);
    world_open(x);
}

/* Swap the config in force for text, as a reload does. */
static void reload(World *x, const char *text)
{
    ConfFile *next, *old;
    char err[256];

    ck_assert_msg(conf_parse("t.conf", text, strlen(text), &next, err, sizeof err) == 0,
                  "%s", err);
    ck_assert_int_eq(engine_reload_prepare(&x->e, next), 0);
    old = x->cfg.conf;
    x->cfg.conf = x->conf = next;
    engine_reload(&x->e);
    conf_free(old);
}

/* Read-back requests the thread has not answered or the loop not taken. */
static size_t pending_reads(Engine *e)
{
    size_t n;

    if (!e->spill.running)
        return 0;
    pthread_mutex_lock(&e->spill.mu);
    n = e->spill.len - e->spill.head;
    pthread_mutex_unlock(&e->spill.mu);
    return n;
}

/* Loop iterations until every read-ahead asked for has come back. */
static void settle(World *x)
{
    for (int i = 0; i < 3000; i++) {
        engine_commit(&x->e);
        if (!pending_reads(&x->e))
            return;
        ev_poll(&x->loop, 10);
    }
    ck_abort_msg("the read-ahead never settled");
}

/* One whole loop iteration without waiting. */
static void iterate(World *x)
{
    engine_commit(&x->e);
    ev_poll(&x->loop, 0);
    x->e.now = clock_mono();
    engine_tick(&x->e);
}

static Job *put_in(World *x, Tube *t, uint32_t n, uint32_t pri, uint32_t delay)
{
    Job *j = engine_job_new(&x->e, t, n, pri, delay, 60);
    uint64_t id;

    ck_assert_ptr_nonnull(j);
    id = j->id;
    fill(id, n, job_body_mut(j));
    ck_assert_int_eq(engine_put(&x->e, j, t), ENG_OK);
    j = job_table_find(&x->e.jobs, id);
    ck_assert_ptr_nonnull(j);
    return j;
}

static Job *find(World *x, uint64_t id)
{
    return job_table_find(&x->e.jobs, id);
}

/* ---- recounting ------------------------------------------------------- */

typedef struct Count {
    const Tube *t;
    uint64_t ct, bytes, cur, all_ct, all_bytes, jobs;
} Count;

static void count_one(HashNode *n, void *arg)
{
    Count *c = arg;
    Job *j = container_of(n, Job, hnode);
    int disk = j->spilled && !j->loaded;

    REQUIRE_MSG(!j->loaded || j->spilled, "job %llu loaded but not spilled",
                (unsigned long long)j->id);
    REQUIRE_MSG(!disk || job_body(j) == NULL, "job %llu on disk has a body",
                (unsigned long long)j->id);
    REQUIRE_MSG(disk || job_body(j) != NULL, "job %llu in memory has no body",
                (unsigned long long)j->id);
    REQUIRE_MSG(j->state != JOB_RESERVED || !disk, "reserved job %llu is on disk",
                (unsigned long long)j->id);
    REQUIRE_MSG(!j->reading || disk, "job %llu read ahead but in memory",
                (unsigned long long)j->id);
    if (disk) {
        c->all_ct++;
        c->all_bytes += j->body_size;
    }
    if (j->tube != c->t || job_dead(j))
        return;
    c->jobs++;
    c->cur += j->body_size;
    if (disk) {
        c->ct++;
        c->bytes += j->body_size;
    }
}

/* The counters of read-behind against a recount of every job. */
static void check_counts(World *x)
{
    Tube *ts[] = {x->s, x->p};

    for (size_t i = 0; i < 2; i++) {
        Count c = {.t = ts[i]};
        hash_each(&x->e.jobs, count_one, &c);
        REQ_UEQ(ts[i]->spilled_ct, c.ct);
        REQ_UEQ(ts[i]->spilled_bytes, c.bytes);
        REQ_UEQ(ts[i]->cur_bytes, c.cur);
        REQ_UEQ(x->e.spill.jobs, c.all_ct);
        REQ_UEQ(x->e.spill.bytes, c.all_bytes);
    }
}

/* ---- the spilled form ------------------------------------------------- */

START_TEST(spilled_form_with_body)
{
    Job *j = job_alloc_spilled(7, 50, 1, 0);
    char want[50];
    JobBody *b;

    ck_assert_ptr_nonnull(j);
    ck_assert_uint_eq(j->id, 7);
    ck_assert_uint_eq(j->body_size, 50);
    ck_assert(j->spilled && j->loaded && !j->reading);
    ck_assert_uint_eq(j->file, 0);
    ck_assert_ptr_null(job_ext(j));
    ck_assert_ptr_nonnull(job_body(j));
    ck_assert_ptr_eq(job_body(j), job_body_mut(j));
    fill(7, 50, job_body_mut(j));
    fill(7, 50, want);
    ck_assert(memcmp(job_body(j), want, 50) == 0);
    /* The header only, whatever the body. */
    ck_assert_uint_eq(job_mem(j), job_spilled_cost());
    ck_assert_uint_lt(job_spilled_cost(), job_cost(50));
    ck_assert_uint_eq(job_spilled_cost(), job_cost(8));

    /* The record's offset travels with the body, and stays when it goes. */
    ck_assert_uint_eq(job_spill_off(j), 0);
    job_spill_set_off(j, 123456789012ULL);
    ck_assert_uint_eq(job_spill_off(j), 123456789012ULL);
    job_unload(j);
    ck_assert(j->spilled && !j->loaded);
    ck_assert_ptr_null(job_body(j));
    ck_assert_ptr_null(job_body_mut(j));
    ck_assert_uint_eq(job_spill_off(j), 123456789012ULL);
    job_spill_set_off(j, 4242);
    ck_assert_uint_eq(job_spill_off(j), 4242);

    /* A body read back comes with its record's head in front. */
    b = job_body_alloc(20 + 50);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq(b->cap, 70);
    b->off = 4242;
    b->skip = 20;
    memset(b->data, 'h', 20);
    memcpy(b->data + 20, want, 50);
    job_load(j, b);
    ck_assert(j->loaded);
    ck_assert_ptr_eq(job_body(j), b->data + 20);
    ck_assert(memcmp(job_body(j), want, 50) == 0);
    ck_assert_uint_eq(job_spill_off(j), 4242);
    job_spill_set_off(j, 99);
    ck_assert_uint_eq(b->off, 99);
    job_free(j); /* frees b (LSan) */
}
END_TEST

START_TEST(spilled_form_without_body)
{
    Job *j = job_alloc_spilled(9, 1 << 20, 0, 777);
    JobBody *b;

    ck_assert_ptr_nonnull(j);
    ck_assert(j->spilled && !j->loaded);
    ck_assert_uint_eq(j->body_size, 1 << 20);
    ck_assert_ptr_null(job_body(j));
    ck_assert_uint_eq(job_spill_off(j), 777);
    ck_assert_uint_eq(job_mem(j), job_spilled_cost());
    job_free(j);

    /* An empty body, loaded and unloaded. */
    j = job_alloc_spilled(10, 0, 1, 0);
    ck_assert_ptr_nonnull(j);
    ck_assert_ptr_nonnull(job_body(j));
    job_unload(j);
    ck_assert_ptr_null(job_body(j));
    b = job_body_alloc(0);
    ck_assert_ptr_nonnull(b);
    b->off = 16;
    job_load(j, b);
    ck_assert_ptr_nonnull(job_body(j));
    ck_assert_uint_eq(job_spill_off(j), 16);
    job_free(j);

    /* A JobExt goes with the job too. */
    j = job_alloc_spilled(11, 3, 0, 5);
    ck_assert_ptr_nonnull(job_ext_get(j));
    job_free(j);

    /* The plain form is untouched by all this. */
    j = job_alloc(12, 5);
    ck_assert(!j->spilled && !j->loaded);
    ck_assert_ptr_eq(job_body(j), j->body);
    ck_assert_uint_eq(job_mem(j), job_cost(5));
    job_free(j);
}
END_TEST

START_TEST(spilled_form_out_of_memory)
{
    unsigned long before = alloc_failures();
    Job *j;

    /* The header, then the body: either failing leaves nothing behind. */
    alloc_fail_after(1);
    ck_assert_ptr_null(job_alloc_spilled(1, 10, 1, 0));
    alloc_fail_after(2);
    ck_assert_ptr_null(job_alloc_spilled(2, 10, 1, 0));
    alloc_fail_after(1);
    ck_assert_ptr_null(job_alloc_spilled(3, 10, 0, 0));
    alloc_fail_after(0);
    ck_assert_uint_eq(alloc_failures() - before, 3);
    j = job_alloc_spilled(4, 10, 1, 0);
    ck_assert_ptr_nonnull(j);
    job_free(j);
}
END_TEST

/* ---- spilling at put, dropping at commit ------------------------------ */

START_TEST(puts_past_the_budget_spill)
{
    World x;
    Job *j;
    uint64_t ids[30];

    world_config(&x, 0);
    world_open(&x);
    for (int i = 0; i < 30; i++) {
        j = put_in(&x, x.s, BODY, 10, 0);
        ids[i] = j->id;
        /* The first BUDGET bytes are plain jobs; past it the spilled form,
         * still holding its body until the commit. */
        ck_assert_int_eq(j->spilled, i >= BUDGET / BODY);
        ck_assert(!j->spilled || j->loaded);
        ck_assert(body_ok(j, job_body(j)));
        ck_assert_uint_ne(j->file, 0);
    }
    /* A tube without a budget never spills. */
    for (int i = 0; i < 30; i++)
        ck_assert(!put_in(&x, x.p, BODY, 10, 0)->spilled);
    ck_assert_uint_eq(x.e.spill.jobs, 0);
    ck_assert_uint_eq(x.s->spilled_ct, 0);
    check_counts(&x);

    engine_commit(&x.e);
    ck_assert_uint_eq(x.e.spill.jobs, 20);
    ck_assert_uint_eq(x.e.spill.bytes, 20 * BODY);
    ck_assert_uint_eq(x.s->spilled_ct, 20);
    ck_assert_uint_eq(x.s->spilled_bytes, 20 * BODY);
    ck_assert_uint_eq(spill_tube_mem_bytes(x.s), BUDGET);
    ck_assert_uint_eq(spill_tube_mem_bytes(x.p), 30 * BODY);
    for (int i = 0; i < 30; i++) {
        j = find(&x, ids[i]);
        if (i < 10) {
            ck_assert(body_ok(j, job_body(j)));
        } else {
            ck_assert(j->spilled && !j->loaded);
            ck_assert_ptr_null(job_body(j));
            ck_assert_uint_ne(job_spill_off(j), 0);
        }
    }
    /* The budget is full: nothing to read ahead. */
    settle(&x);
    ck_assert_uint_eq(x.e.spill.reads, 0);
    ck_assert_uint_eq(x.e.spill.waits, 0);
    check_counts(&x);

    /* Read on the loop: the same bytes, counted as a wait. */
    j = find(&x, ids[20]);
    ck_assert_int_eq(spill_load(&x.e, j), 0);
    ck_assert(j->loaded);
    ck_assert(body_ok(j, job_body(j)));
    ck_assert_uint_eq(x.e.spill.waits, 1);
    ck_assert_uint_eq(x.e.spill.jobs, 19);
    ck_assert_uint_eq(x.s->spilled_bytes, 19 * BODY);
    ck_assert_uint_eq(spill_tube_mem_bytes(x.s), BUDGET + BODY);
    /* Loaded already: nothing to do, no wait. */
    ck_assert_int_eq(spill_load(&x.e, j), 0);
    ck_assert_int_eq(spill_load(&x.e, find(&x, ids[0])), 0); /* plain form */
    ck_assert_uint_eq(x.e.spill.waits, 1);
    check_counts(&x);

    /* engine_body() (a peek): read, then dropped again at the commit since
     * the tube is over budget. spill_load() alone does not note it. */
    j = find(&x, ids[25]);
    ck_assert(body_ok(j, engine_body(&x.e, j)));
    ck_assert_uint_eq(x.e.spill.waits, 2);
    engine_commit(&x.e);
    ck_assert(!j->loaded);
    ck_assert(find(&x, ids[20])->loaded);
    check_counts(&x);
    world_free(&x);
}
END_TEST

/* Bodies of every size, an empty one among them, and one that takes the
 * whole budget. */
START_TEST(odd_sizes_read_back)
{
    World x;
    uint64_t ids[40];
    uint32_t sizes[40];

    world_config(&x, 0);
    world_open(&x);
    for (int i = 0; i < 40; i++) {
        sizes[i] = i == 0 ? BUDGET : i % 7 == 0 ? 0 : (uint32_t)(i * 37 % MAX_JOB);
        ids[i] = put_in(&x, x.s, sizes[i], (uint32_t)i, 0)->id;
    }
    engine_commit(&x.e);
    ck_assert_uint_gt(x.s->spilled_ct, 30);
    check_counts(&x);
    for (int i = 0; i < 40; i++) {
        Job *j = find(&x, ids[i]);
        ck_assert_uint_eq(j->body_size, sizes[i]);
        ck_assert_int_eq(spill_load(&x.e, j), 0);
        ck_assert_msg(body_ok(j, job_body(j)), "job %d (size %u) differs", i, sizes[i]);
    }
    ck_assert_uint_eq(x.e.spill.jobs, 0);
    ck_assert_uint_eq(x.e.spill.errors, 0);
    check_counts(&x);
    world_free(&x);
}
END_TEST

/* ---- reading ahead ---------------------------------------------------- */

START_TEST(read_ahead_after_deletes)
{
    World x;
    uint64_t ids[30];

    world_config(&x, 0);
    world_open(&x);
    for (int i = 0; i < 30; i++)
        ids[i] = put_in(&x, x.s, BODY, 10, 0)->id;
    engine_commit(&x.e);
    ck_assert_uint_eq(x.s->spilled_ct, 20);

    /* Room for five: the reader brings the next five back, in order. */
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(engine_delete(&x.e, &x.w, ids[i]), ENG_OK);
    engine_commit(&x.e);
    ck_assert_uint_eq(x.s->spill->inflight, 5 * BODY);
    for (int i = 10; i < 15; i++)
        ck_assert(find(&x, ids[i])->reading);
    ck_assert(!find(&x, ids[15])->reading);
    settle(&x);
    ck_assert_uint_eq(x.e.spill.reads, 5);
    ck_assert_uint_eq(x.e.spill.waits, 0);
    ck_assert_uint_eq(x.s->spill->inflight, 0);
    for (int i = 10; i < 30; i++) {
        Job *j = find(&x, ids[i]);
        ck_assert_int_eq(j->loaded, i < 15);
        ck_assert(!j->reading);
        if (i < 15)
            ck_assert(body_ok(j, job_body(j)));
    }
    ck_assert_uint_eq(spill_tube_mem_bytes(x.s), BUDGET);
    check_counts(&x);

    /* A worker draining the tube finds every body in memory. */
    for (int i = 5; i < 30; i++) {
        Job *j;
        ck_assert_int_eq(worker_reserve(&x.e, &x.w, 0, &j), WAIT_RESERVED);
        ck_assert_uint_eq(j->id, ids[i]);
        ck_assert(body_ok(j, job_body(j)));
        ck_assert_int_eq(engine_delete(&x.e, &x.w, j->id), ENG_OK);
        settle(&x);
        check_counts(&x);
        ck_assert_uint_le(spill_tube_mem_bytes(x.s), BUDGET);
    }
    ck_assert_uint_eq(x.e.spill.waits, 0);
    ck_assert_uint_eq(x.e.spill.reads, 20);
    ck_assert_uint_eq(x.e.spill.jobs, 0);
    ck_assert_uint_eq(x.e.spill.bytes, 0);
    ck_assert_uint_eq(x.s->cur_bytes, 0);
    world_free(&x);
}
END_TEST

/* A job deleted, or read on the loop, while its read-ahead is in flight:
 * the answer is dropped, the counts stay right. */
START_TEST(stale_read_ahead_answers)
{
    World x;
    uint64_t ids[30];
    Job *j;

    world_config(&x, 0);
    world_open(&x);
    for (int i = 0; i < 30; i++)
        ids[i] = put_in(&x, x.s, BODY, 10, 0)->id;
    engine_commit(&x.e);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(engine_delete(&x.e, &x.w, ids[i]), ENG_OK);
    engine_commit(&x.e); /* reads of ids[10..13] asked for */
    ck_assert(find(&x, ids[13])->reading);
    ck_assert_int_eq(engine_delete(&x.e, &x.w, ids[10]), ENG_OK);
    ck_assert_int_eq(engine_reserve_job(&x.e, &x.w, ids[11], &j), ENG_OK);
    ck_assert(j->loaded && !j->reading);
    ck_assert_uint_eq(x.e.spill.waits, 1);
    ck_assert(body_ok(j, job_body(j)));
    j = find(&x, ids[12]);
    ck_assert(body_ok(j, engine_body(&x.e, j)));
    ck_assert_uint_eq(x.e.spill.waits, 2);
    check_counts(&x);
    settle(&x);
    check_counts(&x);
    /* ids[13] came from the thread; the others' answers went. */
    ck_assert(find(&x, ids[13])->loaded);
    ck_assert(body_ok(find(&x, ids[13]), job_body(find(&x, ids[13]))));
    ck_assert_uint_le(spill_tube_mem_bytes(x.s), BUDGET);
    for (int i = 14; i < 30; i++) {
        j = find(&x, ids[i]);
        if (j->state == JOB_RESERVED)
            continue;
        ck_assert_int_eq(spill_load(&x.e, j), 0);
        ck_assert(body_ok(j, job_body(j)));
    }
    ck_assert_uint_eq(x.e.spill.errors, 0);
    check_counts(&x);
    world_free(&x);
}
END_TEST

/* The job a reserve picks is read on the loop when the read-ahead has not
 * reached it (a priority jump), and the reserved job keeps its body. */
START_TEST(reserve_loads_a_spilled_job)
{
    World x;
    uint64_t ids[20], urgent;
    Job *j;

    world_config(&x, 0);
    world_open(&x);
    for (int i = 0; i < 20; i++)
        ids[i] = put_in(&x, x.s, BODY, 100, 0)->id;
    urgent = put_in(&x, x.s, BODY, 1, 0)->id; /* spilled, but next in line */
    engine_commit(&x.e);
    ck_assert(!find(&x, urgent)->loaded);
    ck_assert_int_eq(worker_reserve(&x.e, &x.w, 0, &j), WAIT_RESERVED);
    ck_assert_uint_eq(j->id, urgent);
    ck_assert(j->loaded);
    ck_assert(body_ok(j, job_body(j)));
    ck_assert_uint_eq(x.e.spill.waits, 1);
    /* Reserved: never dropped, however far over budget the tube is. */
    engine_commit(&x.e);
    ck_assert(j->loaded);
    check_counts(&x);
    /* Released, it keeps its body; reserve-job of a spilled one loads it. */
    ck_assert_int_eq(engine_release(&x.e, &x.w, urgent, 1, 0), ENG_OK);
    ck_assert(j->loaded);
    ck_assert_int_eq(engine_reserve_job(&x.e, &x.w, ids[15], &j), ENG_OK);
    ck_assert(j->loaded && j->state == JOB_RESERVED);
    ck_assert(body_ok(j, job_body(j)));
    ck_assert_uint_eq(x.e.spill.waits, 2);
    /* A buried spilled job: kicked and reserved. */
    ck_assert_int_eq(engine_bury(&x.e, &x.w, ids[15], 5), ENG_OK);
    check_counts(&x);
    ck_assert_int_eq(engine_kick_job(&x.e, ids[15]), ENG_OK);
    ck_assert_int_eq(engine_reserve_job(&x.e, &x.w, ids[16], &j), ENG_OK);
    ck_assert(body_ok(j, job_body(j)));
    check_counts(&x);
    world_free(&x);
}
END_TEST

/* A worker that may wait parks until the reader brings the body of the
 * job it is to get, and is served from the loop's answer. */
START_TEST(waiting_reserve_parks_for_the_reader)
{
    World x;
    uint64_t ids[20], urgent;
    Job *j;
    int r;

    world_config(&x, 0);
    world_open(&x);
    for (int i = 0; i < 20; i++)
        ids[i] = put_in(&x, x.s, BODY, 100, 0)->id;
    urgent = put_in(&x, x.s, BODY, 1, 0)->id;
    engine_commit(&x.e);
    ck_assert(!find(&x, urgent)->loaded);
    memset(&woke, 0, sizeof woke);
    r = worker_reserve(&x.e, &x.w, 10 * NS_PER_SEC, &j);
    ck_assert_int_eq(r, WAIT_PENDING);
    ck_assert_ptr_null(j);
    ck_assert(x.w.waiting);
    ck_assert(find(&x, urgent)->reading);
    ck_assert_uint_eq(x.e.spill.waits, 1);
    ck_assert_int_eq(woke.n, 0);
    settle(&x);
    ck_assert_int_eq(woke.n, 1);
    ck_assert_int_eq(woke.how, WAIT_RESERVED);
    ck_assert_uint_eq(woke.id, urgent);
    ck_assert(woke.body_ok);
    ck_assert(!x.w.waiting);
    ck_assert_int_eq(find(&x, urgent)->state, JOB_RESERVED);
    ck_assert_uint_eq(x.e.spill.reads, 1);
    check_counts(&x);
    ck_assert_int_eq(engine_delete(&x.e, &x.w, urgent), ENG_OK);

    /* Its record damaged: buried on the answer, and the worker goes on
     * with the next job. */
    urgent = put_in(&x, x.s, BODY, 1, 0)->id;
    engine_commit(&x.e);
    j = find(&x, urgent);
    ck_assert(!j->loaded);
    flip_byte(j->file, body_end(j));
    memset(&woke, 0, sizeof woke);
    ck_assert_int_eq(worker_reserve(&x.e, &x.w, 10 * NS_PER_SEC, &j), WAIT_PENDING);
    settle(&x);
    ck_assert_int_eq(find(&x, urgent)->state, JOB_BURIED);
    ck_assert_uint_eq(x.e.spill.errors, 1);
    ck_assert_int_eq(woke.n, 1);
    ck_assert_int_eq(woke.how, WAIT_RESERVED);
    ck_assert_uint_eq(woke.id, ids[0]);
    ck_assert(woke.body_ok);
    check_counts(&x);
    world_free(&x);
}
END_TEST

/* Moving a spilled job to another tube reads its body first; the copy in
 * the new tube is logged whole. */
START_TEST(move_and_flush)
{
    World x;
    uint64_t ids[30];
    Tube *big;
    Job *j;

    world_config(&x, 0);
    world_open(&x);
    big = engine_tube(&x.e, "big", 3);
    engine_tube_ref(big);
    for (int i = 0; i < 30; i++)
        ids[i] = put_in(&x, x.s, BODY, 10, i == 25 ? 3600 : 0)->id;
    engine_commit(&x.e);
    ck_assert(!find(&x, ids[20])->loaded);
    ck_assert_int_eq(engine_move_job(&x.e, ids[20], x.p), ENG_OK);
    ck_assert_int_eq(engine_move_job(&x.e, ids[21], big), ENG_OK);
    ck_assert_int_eq(engine_move_job(&x.e, ids[25], x.p), ENG_OK);
    j = find(&x, ids[25]);
    ck_assert_int_eq(j->state, JOB_DELAYED);
    ck_assert(body_ok(j, job_body(j)));
    check_counts(&x);
    engine_commit(&x.e);
    /* In tubes under (or without) a budget they stay in memory. */
    ck_assert(find(&x, ids[20])->loaded && find(&x, ids[21])->loaded);
    ck_assert(body_ok(find(&x, ids[20]), job_body(find(&x, ids[20]))));
    check_counts(&x);

    /* One in flight, then the flush: every count goes to zero. */
    ck_assert_int_eq(engine_delete(&x.e, &x.w, ids[0]), ENG_OK);
    ck_assert_int_eq(engine_reserve_job(&x.e, &x.w, ids[29], &j), ENG_OK);
    settle(&x);
    ck_assert_int_eq(engine_flush_tube(&x.e, x.s), 25);
    ck_assert_uint_eq(x.s->spilled_ct, 0);
    ck_assert_uint_eq(x.s->spilled_bytes, 0);
    ck_assert_uint_eq(x.s->cur_bytes, BODY); /* the reserved one */
    check_counts(&x);
    for (int i = 0; i < 5; i++)
        iterate(&x);
    ck_assert_uint_eq(x.e.spill.jobs, 0);
    ck_assert_uint_eq(x.e.spill.bytes, 0);
    check_counts(&x);
    /* The tube spills again from scratch. */
    for (int i = 0; i < 15; i++)
        put_in(&x, x.s, BODY, 10, 0);
    engine_commit(&x.e);
    ck_assert_uint_eq(x.s->spilled_ct, 6);
    check_counts(&x);
    world_restart(&x);
    ck_assert(body_ok(find(&x, ids[20]), engine_body(&x.e, find(&x, ids[20]))));
    ck_assert(body_ok(find(&x, ids[21]), engine_body(&x.e, find(&x, ids[21]))));
    ck_assert(body_ok(find(&x, ids[29]), engine_body(&x.e, find(&x, ids[29]))));
    ck_assert_ptr_null(find(&x, ids[1]));
    world_free(&x);
}
END_TEST

/* A reload that turns a tube's journal off leaves the records of the jobs
 * it already holds in the binlog (they are deleted, released, buried there
 * as before). A flush-tube of it must still write its record: the old
 * code wrote none for an unjournaled tube, and the flushed jobs came back
 * at the next start. */
START_TEST(flush_after_journal_turned_off)
{
    static const char off[] = "[tube p]\njournal = false\n";
    char text[sizeof conf_text + sizeof off];
    World x;
    uint64_t a, b, c;
    Job *j;

    world_config(&x, 0);
    world_open(&x);
    a = put_in(&x, x.p, BODY, 10, 0)->id;
    b = put_in(&x, x.p, BODY, 10, 3600)->id;
    c = put_in(&x, x.p, BODY, 10, 0)->id;
    engine_commit(&x.e);
    snprintf(text, sizeof text, "%s%s", conf_text, off);
    reload(&x, text);
    ck_assert(!x.p->pol.journal);
    /* c is reserved: it stays with its worker, and comes back ready. */
    ck_assert_int_eq(engine_reserve_job(&x.e, &x.w, c, &j), ENG_OK);
    ck_assert_int_eq(engine_flush_tube(&x.e, x.p), 2);
    for (int i = 0; i < 5; i++)
        iterate(&x);
    world_restart(&x);
    ck_assert_msg(!find(&x, a), "flushed job %llu came back", (unsigned long long)a);
    ck_assert_msg(!find(&x, b), "flushed job %llu came back", (unsigned long long)b);
    ck_assert_ptr_nonnull(find(&x, c));
    ck_assert_int_eq(find(&x, c)->state, JOB_READY);
    world_free(&x);
}
END_TEST

static int no_room(int fd, off_t off, off_t len)
{
    (void)fd, (void)off, (void)len;
    return ENOSPC;
}

/* A put or a move into a full tube that discards its oldest jobs, refused
 * because the binlog has no room for its record (a full disk), deletes
 * nothing. The old code discarded first and looked for log room after:
 * the client got OUT_OF_MEMORY and the tube had lost its oldest jobs for
 * nothing (policy_fanout had the same order for a child). */
START_TEST(no_log_room_discards_nothing)
{
    static const char cap_conf[] = "[tube cap]\nmax_items = 2\ndiscard_old_when_full = true\n";
    char text[sizeof conf_text + sizeof cap_conf];
    World x;
    Tube *cap;
    Job *j;
    uint64_t a, b, m;
    int full = 0;

    world_config(&x, 0);
    world_open(&x);
    snprintf(text, sizeof text, "%s%s", conf_text, cap_conf);
    reload(&x, text);
    cap = engine_tube(&x.e, "cap", 3);
    ck_assert_ptr_nonnull(cap);
    engine_tube_ref(cap);
    ck_assert_uint_eq(cap->pol.max_items, 2);
    a = put_in(&x, cap, BODY, 10, 0)->id;
    b = put_in(&x, cap, BODY, 10, 0)->id;
    m = put_in(&x, x.p, BODY, 10, 0)->id;
    engine_commit(&x.e);
    /* The disk is full: puts go on until the binlog's room is used up. */
    bl_disk.fallocate = no_room;
    for (int i = 0; i < 10000 && !full; i++) {
        j = engine_job_new(&x.e, x.p, BODY, 10, 0, 60);
        ck_assert_ptr_nonnull(j);
        fill(j->id, BODY, job_body_mut(j));
        if (engine_put(&x.e, j, x.p) == ENG_NO_MEMORY) {
            engine_job_drop(&x.e, j);
            full = 1;
        }
        engine_commit(&x.e);
    }
    ck_assert_msg(full, "the binlog never ran out of room");
    j = engine_job_new(&x.e, cap, BODY, 10, 0, 60);
    ck_assert_ptr_nonnull(j);
    fill(j->id, BODY, job_body_mut(j));
    ck_assert_int_eq(engine_put(&x.e, j, cap), ENG_NO_MEMORY);
    engine_job_drop(&x.e, j);
    ck_assert_int_ne(engine_move_job(&x.e, m, cap), ENG_OK);
    engine_commit(&x.e);
    ck_assert_msg(find(&x, a) && find(&x, b), "a refused put or move discarded %s",
                  find(&x, a) ? "the second job" : "the oldest job");
    ck_assert_ptr_eq(find(&x, m)->tube, x.p);
    ck_assert_uint_eq(cap->total_discarded, 0);
    bl_disk.fallocate = posix_fallocate;
    engine_tube_unref(&x.e, cap);
    world_restart(&x);
    ck_assert_ptr_nonnull(find(&x, a));
    ck_assert_ptr_nonnull(find(&x, b));
    world_free(&x);
}
END_TEST

/* Fanout copies into a child with its own budget take the spilled form
 * there; a copy's body is its parent job's. */
START_TEST(fanout_copies_spill)
{
    World x;
    Tube *f, *c;
    uint64_t ids[20];
    char want[BODY];

    world_config(&x, 0);
    world_open(&x);
    f = engine_tube(&x.e, "f", 1);
    engine_tube_ref(f);
    c = engine_tube(&x.e, "f+c", 3);
    ck_assert_ptr_eq(c->parent, f);
    for (int i = 0; i < 20; i++)
        ids[i] = put_in(&x, f, BODY, 10, 0)->id;
    engine_commit(&x.e);
    ck_assert_uint_eq(f->spilled_ct, 15);
    ck_assert_uint_eq(c->spilled_ct, 17);
    ck_assert_uint_eq(spill_tube_mem_bytes(c), 300);
    for (int i = 0; i < 20; i++) {
        Job *copy = find(&x, ids[i] + 1);
        ck_assert_ptr_eq(copy->tube, c);
        fill(ids[i], BODY, want);
        ck_assert(memcmp(engine_body(&x.e, copy), want, BODY) == 0);
        ck_assert(body_ok(find(&x, ids[i]), engine_body(&x.e, find(&x, ids[i]))));
    }
    engine_commit(&x.e);
    ck_assert_uint_eq(c->spilled_ct, 17);
    world_restart(&x);
    f = engine_tube_find(&x.e, "f", 1);
    c = engine_tube_find(&x.e, "f+c", 3);
    ck_assert_uint_eq(f->spilled_ct, 20);
    ck_assert_uint_eq(c->spilled_ct, 20);
    for (int i = 0; i < 20; i++) {
        fill(ids[i], BODY, want);
        ck_assert(memcmp(engine_body(&x.e, find(&x, ids[i] + 1)), want, BODY) == 0);
    }
    world_free(&x);
}
END_TEST

/* A job past its max_age moves to the dead-letter tube: its body is read
 * to be logged there, and the dead-letter tube's own budget applies. */
START_TEST(expiry_moves_spilled_jobs)
{
    World x;
    Tube *t, *dead;
    uint64_t ids[10];

    world_config(&x, 0);
    world_open(&x);
    t = engine_tube(&x.e, "e", 1);
    engine_tube_ref(t);
    for (int i = 0; i < 10; i++)
        ids[i] = put_in(&x, t, BODY, 10, 0)->id;
    engine_commit(&x.e);
    ck_assert_uint_eq(t->spilled_ct, 8);
    x.e.now += 2 * NS_PER_SEC;
    engine_tick(&x.e);
    engine_commit(&x.e);
    dead = engine_tube_find(&x.e, "dead", 4);
    ck_assert_ptr_nonnull(dead);
    ck_assert_uint_eq(t->cur_bytes, 0);
    ck_assert_uint_eq(t->spilled_ct, 0);
    ck_assert_uint_eq(dead->cur_bytes, 10 * BODY);
    ck_assert_uint_le(spill_tube_mem_bytes(dead), 400);
    ck_assert_uint_eq(x.e.spill.errors, 0);
    for (int i = 0; i < 10; i++) {
        Job *j = find(&x, ids[i]);
        ck_assert_ptr_eq(j->tube, dead);
        ck_assert(body_ok(j, engine_body(&x.e, j)));
    }
    engine_tube_unref(&x.e, t);
    world_restart(&x);
    for (int i = 0; i < 10; i++)
        ck_assert(body_ok(find(&x, ids[i]), engine_body(&x.e, find(&x, ids[i]))));
    world_free(&x);
}
END_TEST

/* A reload that lifts a tube's budget: the reader brings every body back;
 * one that sets it again: new puts spill. */
START_TEST(reload_changes_the_budget)
{
    static const char lifted[] = "[tube big]\nmax_memory_size = 1M\n";
    World x;
    uint64_t ids[30];

    world_config(&x, 0);
    world_open(&x);
    for (int i = 0; i < 30; i++)
        ids[i] = put_in(&x, x.s, BODY, 10, 0)->id;
    engine_commit(&x.e);
    ck_assert_uint_eq(x.s->spilled_ct, 20);
    reload(&x, lifted);
    ck_assert_uint_eq(x.s->pol.max_memory_size, 0);
    settle(&x);
    ck_assert_uint_eq(x.s->spilled_ct, 0);
    ck_assert_uint_eq(x.e.spill.reads, 20);
    for (int i = 0; i < 30; i++)
        ck_assert(body_ok(find(&x, ids[i]), job_body(find(&x, ids[i]))));
    /* No budget: nothing spills, nothing is dropped. */
    ck_assert(!put_in(&x, x.s, BODY, 10, 0)->spilled);
    engine_commit(&x.e);
    ck_assert_uint_eq(x.s->spilled_ct, 0);
    check_counts(&x);

    reload(&x, conf_text);
    /* The jobs there keep their form; new ones spill. */
    ck_assert(put_in(&x, x.s, BODY, 10, 0)->spilled);
    engine_commit(&x.e);
    ck_assert_uint_eq(x.s->spilled_ct, 1);
    check_counts(&x);
    world_free(&x);
}
END_TEST

/* A reload that gives a tube a budget it exceeds: its plain jobs are
 * written again and take the spilled form (queue_relocate()), a batch per
 * commit, and their bodies go at the next one, down to the budget. */
START_TEST(reload_spills_plain_jobs)
{
    World x;
    uint64_t ids[1200];
    Job *j;
    int n = 0;

    world_config(&x, 0);
    world_open(&x);
    for (int i = 0; i < 1200; i++)
        ids[i] = put_in(&x, x.p, 50 + (uint32_t)(i % 40), (uint32_t)(i % 7),
                        i % 9 == 0 ? 3600 : 0)->id;
    ck_assert_int_eq(engine_reserve_job(&x.e, &x.w, ids[5], &j), ENG_OK);
    engine_commit(&x.e);
    reload(&x, "[tube s]\nmax_memory_size = 1000\n[tube p]\nmax_memory_size = 2000\n");
    ck_assert_uint_eq(x.p->pol.max_memory_size, 2000);
    while (spill_tube_mem_bytes(x.p) > 2000 && n++ < 20) {
        engine_commit(&x.e);
        check_counts(&x);
    }
    ck_assert_uint_le(spill_tube_mem_bytes(x.p), 2000);
    ck_assert_uint_gt(n, 2); /* in batches */
    ck_assert_uint_gt(x.p->spilled_ct, 1100);
    for (int i = 0; i < 1200; i++) {
        j = find(&x, ids[i]);
        ck_assert_int_eq(j->state, i == 5 ? JOB_RESERVED : i % 9 == 0 ? JOB_DELAYED : JOB_READY);
        ck_assert_uint_eq(j->pri, (uint32_t)(i % 7));
        ck_assert_uint_eq(j->id, ids[i]);
    }
    /* The order of service is the same. */
    ck_assert_int_eq(worker_reserve(&x.e, &x.w, 0, &j), WAIT_TIMED_OUT); /* watches s */
    settle(&x);
    check_counts(&x);
    for (int i = 0; i < 1200; i++) {
        j = find(&x, ids[i]);
        ck_assert_msg(body_ok(j, engine_body(&x.e, j)), "job %d differs", i);
    }
    engine_commit(&x.e);
    ck_assert_uint_le(spill_tube_mem_bytes(x.p), 2000);
    world_restart(&x);
    ck_assert_uint_eq(x.p->spilled_ct, 1200);
    for (int i = 0; i < 1200; i++) {
        j = find(&x, ids[i]);
        ck_assert_msg(body_ok(j, engine_body(&x.e, j)), "after restart, job %d differs", i);
    }
    world_free(&x);
}
END_TEST

/* The first n jobs of ids are in memory and reserved in that order
 * without a read on the loop; the next m of ids (NULL: none) are on disk. */
static void drain_in_memory(World *x, const uint64_t *ids, int n, const uint64_t *disk, int m)
{
    uint64_t waits = x->e.spill.waits;
    Job *j;

    for (int i = 0; i < n; i++)
        ck_assert_msg(find(x, ids[i])->loaded || !find(x, ids[i])->spilled,
                      "job %llu, next in line, is on disk", (unsigned long long)ids[i]);
    for (int i = 0; i < m; i++)
        ck_assert_msg(find(x, disk[i])->spilled && !find(x, disk[i])->loaded,
                      "job %llu, behind the ones read ahead, is in memory",
                      (unsigned long long)disk[i]);
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(worker_reserve(&x->e, &x->w, 0, &j), WAIT_RESERVED);
        ck_assert_uint_eq(j->id, ids[i]);
        ck_assert(body_ok(j, job_body(j)));
        ck_assert_int_eq(engine_delete(&x->e, &x->w, j->id), ENG_OK);
    }
    ck_assert_uint_eq(x->e.spill.waits, waits);
}

/* Puts while a budget's worth of reads is in flight (a restart's first
 * read-ahead) take the spilled form: that room is the read bodies', the
 * jobs next in line. (They took the plain form once, and the bodies read
 * back went again as they came in: each was a wait for the worker.) */
START_TEST(puts_during_read_ahead_keep_budget)
{
    World x;
    uint64_t ids[30], later[10];

    world_config(&x, 0);
    world_open(&x);
    for (int i = 0; i < 30; i++)
        ids[i] = put_in(&x, x.s, BODY, 10, 0)->id;
    world_restart(&x);
    engine_commit(&x.e); /* a budget's worth of reads asked for */
    ck_assert_uint_eq(x.s->spill->inflight, BUDGET);
    for (int i = 0; i < 10; i++) {
        Job *j = put_in(&x, x.s, BODY, 10, 0);
        ck_assert(j->spilled);
        later[i] = j->id;
    }
    settle(&x);
    ck_assert_uint_le(spill_tube_mem_bytes(x.s), BUDGET);
    check_counts(&x);
    drain_in_memory(&x, ids, 10, later, 10);
    check_counts(&x);
    world_free(&x);
}
END_TEST

/* Delayed bodies fill the budget and ready jobs come in past it: the
 * delayed ones make room (spill_yield()) and the read-ahead asks for the
 * ready ones. Puts in between, with the delayed bodies gone and the read
 * ones not in yet, took that room in the plain form, and the bodies read
 * back went again as they came in: a worker draining the tube waited for
 * every job next in line (test_readbehind_hunt.py's
 * test_delayed_bodies_in_memory_make_room_for_ready_ones, 32 waits of 32,
 * now and then under load). */
START_TEST(puts_while_delayed_bodies_make_room)
{
    World x;
    uint64_t ready[20], later[10];

    world_config(&x, 0);
    world_open(&x);
    for (int i = 0; i < BUDGET / BODY; i++)
        ck_assert(!put_in(&x, x.s, BODY, 10, 3600)->spilled);
    for (int i = 0; i < 20; i++)
        ready[i] = put_in(&x, x.s, BODY, 10, 0)->id;
    /* Commits without taking an answer (no ev_poll): the delayed bodies
     * go to disk, then a budget's worth of ready ones is asked for. */
    for (int i = 0; i < 50 && !(x.s->spill && x.s->spill->inflight == BUDGET); i++)
        engine_commit(&x.e);
    ck_assert_uint_eq(x.s->spill->inflight, BUDGET);
    ck_assert_uint_eq(spill_tube_mem_bytes(x.s), 0);
    for (int i = 0; i < 10; i++)
        ck_assert(find(&x, ready[i])->reading);
    for (int i = 0; i < 10; i++)
        later[i] = put_in(&x, x.s, BODY, 10, 0)->id;
    settle(&x);
    ck_assert_uint_le(spill_tube_mem_bytes(x.s), BUDGET);
    check_counts(&x);
    drain_in_memory(&x, ready, 10, later, 10);
    ck_assert_uint_eq(x.s->delay.len, BUDGET / BODY);
    check_counts(&x);
    world_free(&x);
}
END_TEST

/* ---- replay ----------------------------------------------------------- */

START_TEST(replay_comes_back_on_disk)
{
    World x;
    uint64_t ids[30], plain[5];
    Job *j;

    world_config(&x, 0);
    world_open(&x);
    for (int i = 0; i < 30; i++)
        ids[i] = put_in(&x, x.s, BODY + (uint32_t)i, (uint32_t)(100 + i % 3),
                        i == 7 || i == 22 ? 3600 : 0)->id;
    for (int i = 0; i < 5; i++)
        plain[i] = put_in(&x, x.p, BODY, 5, 0)->id;
    engine_commit(&x.e);
    /* A buried one, a reserved one (it comes back ready), a deleted one. */
    ck_assert_int_eq(engine_reserve_job(&x.e, &x.w, ids[3], &j), ENG_OK);
    ck_assert_int_eq(engine_bury(&x.e, &x.w, ids[3], 7), ENG_OK);
    ck_assert_int_eq(engine_reserve_job(&x.e, &x.w, ids[24], &j), ENG_OK);
    ck_assert_int_eq(engine_delete(&x.e, &x.w, ids[12]), ENG_OK);
    engine_commit(&x.e);
    world_restart(&x);

    /* Every job of s on disk only (replay read no body of it), p's in
     * memory; the reader has not run yet. */
    ck_assert_uint_eq(x.e.jobs.len, 34);
    ck_assert_uint_eq(x.s->spilled_ct, 29);
    ck_assert_uint_eq(x.e.spill.jobs, 29);
    ck_assert_uint_eq(spill_tube_mem_bytes(x.s), 0);
    for (int i = 0; i < 30; i++) {
        j = find(&x, ids[i]);
        if (i == 12) {
            ck_assert_ptr_null(j);
            continue;
        }
        ck_assert(j->spilled && !j->loaded);
        ck_assert_ptr_null(job_body(j));
        ck_assert_uint_eq(j->body_size, BODY + (uint32_t)i);
        ck_assert_int_eq(j->state, i == 3 ? JOB_BURIED : i == 7 || i == 22 ? JOB_DELAYED
                                                                          : JOB_READY);
        ck_assert_uint_eq(j->pri, i == 3 ? 7 : 100 + (uint32_t)i % 3);
    }
    for (int i = 0; i < 5; i++)
        ck_assert(!find(&x, plain[i])->spilled);
    check_counts(&x);

    /* The reader brings back a budget's worth, oldest id first, skipping
     * the buried one. */
    settle(&x);
    ck_assert_uint_gt(x.e.spill.reads, 0);
    ck_assert_uint_le(spill_tube_mem_bytes(x.s), BUDGET);
    ck_assert_uint_gt(spill_tube_mem_bytes(x.s), BUDGET - 2 * BODY);
    ck_assert(!find(&x, ids[3])->loaded);
    ck_assert(find(&x, ids[0])->loaded && find(&x, ids[4])->loaded);
    ck_assert(!find(&x, ids[29])->loaded);
    ck_assert_uint_eq(x.e.spill.waits, 0);
    check_counts(&x);

    /* Everything reads back byte for byte. */
    for (int i = 0; i < 30; i++) {
        if (i == 12)
            continue;
        j = find(&x, ids[i]);
        ck_assert_msg(body_ok(j, engine_body(&x.e, j)), "job %d differs", i);
    }
    ck_assert_uint_eq(x.e.spill.errors, 0);
    /* Past the budget again: the commit drops bodies down to it. */
    engine_commit(&x.e);
    ck_assert_uint_le(spill_tube_mem_bytes(x.s), BUDGET);
    check_counts(&x);

    /* A second restart from the files the first one left. */
    world_restart(&x);
    ck_assert_uint_eq(x.e.jobs.len, 34);
    for (int i = 0; i < 30; i++) {
        if (i == 12)
            continue;
        j = find(&x, ids[i]);
        ck_assert(body_ok(j, engine_body(&x.e, j)));
    }
    world_free(&x);
}
END_TEST

/* With -f 0 the commit only writes; the syncer runs on. Bodies go once
 * written, the sync has no say. */
START_TEST(strict_fsync)
{
    World x;
    uint64_t ids[20];

    world_config(&x, 0);
    x.cfg.fsync_never = 0;
    x.cfg.fsync_ms = 0;
    world_open(&x);
    for (int i = 0; i < 20; i++)
        ids[i] = put_in(&x, x.s, BODY, 10, 0)->id;
    engine_commit(&x.e);
    ck_assert_uint_eq(x.s->spilled_ct, 10);
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(engine_delete(&x.e, &x.w, ids[i]), ENG_OK);
    settle(&x);
    ck_assert_uint_eq(x.e.spill.reads, 10);
    for (int i = 10; i < 20; i++)
        ck_assert(body_ok(find(&x, ids[i]), job_body(find(&x, ids[i]))));
    engine_settle(&x.e);
    world_restart(&x);
    for (int i = 10; i < 20; i++)
        ck_assert(body_ok(find(&x, ids[i]), engine_body(&x.e, find(&x, ids[i]))));
    world_free(&x);
}
END_TEST

/* ---- compaction ------------------------------------------------------- */

static void check_all_bodies(World *x, const uint64_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        Job *j = find(x, ids[i]);
        REQUIRE_MSG(j, "job %llu lost", (unsigned long long)ids[i]);
        /* Read as a peek reads: the next commit drops it again. */
        REQUIRE_MSG(body_ok(j, engine_body(&x->e, j)), "job %llu: body differs "
                    "(binlog.%u at %llu)", (unsigned long long)j->id, j->file,
                    (unsigned long long)job_spill_off(j));
    }
}

START_TEST(compaction_keeps_offsets)
{
    World x;
    uint64_t ids[60];
    uint32_t first_index;

    world_config(&x, SMALL_FILE);
    world_open(&x);
    for (int i = 0; i < 60; i++)
        ids[i] = put_in(&x, x.s, 300, 10, 0)->id; /* ~3 files, mostly spilled */
    settle(&x);
    ck_assert_uint_ge(x.s->spilled_ct, 55);
    first_index = x.e.binlog.files[0].index;
    for (int i = 0; i < 1500; i++) {
        Job *j = put_in(&x, x.p, 700, 10, 0);
        iterate(&x);
        ck_assert_int_eq(engine_delete(&x.e, &x.w, j->id), ENG_OK);
        iterate(&x);
        if (i % 100 == 99) {
            settle(&x);
            check_counts(&x);
            REQUIRE(spill_tube_mem_bytes(x.s) <= BUDGET);
            check_all_bodies(&x, ids, 60);
            engine_commit(&x.e); /* the bodies read go again */
            check_counts(&x);
        }
    }
    ck_assert_uint_gt(x.e.binlog.records_migrated, 100);
    ck_assert_uint_gt(x.e.binlog.files[0].index, first_index + 20);
    ck_assert_uint_eq(x.e.spill.errors, 0);
    settle(&x);
    ck_assert_uint_ge(x.s->spilled_ct, 55);
    check_all_bodies(&x, ids, 60);
    world_restart(&x);
    ck_assert_uint_eq(x.s->spilled_ct, 60);
    check_all_bodies(&x, ids, 60);
    ck_assert_uint_eq(x.e.spill.errors, 0);
    world_free(&x);
}
END_TEST

/* Compaction while reads of the records it moves are in flight: the
 * answers from the old places are dropped, the new places read. */
START_TEST(compaction_with_reads_in_flight)
{
    World x;
    uint64_t ids[60];

    world_config(&x, SMALL_FILE);
    world_open(&x);
    for (int i = 0; i < 60; i++)
        ids[i] = put_in(&x, x.s, 300, 10, 0)->id;
    settle(&x);
    for (int i = 0; i < 1200; i++) {
        Job *j = put_in(&x, x.p, 700, 10, 0);
        /* Room for one more body in s now and then: a read starts. */
        if (i % 40 == 0) {
            Job *h;
            ck_assert_int_eq(worker_reserve(&x.e, &x.w, 0, &h), WAIT_RESERVED);
            ck_assert(body_ok(h, job_body(h)));
            ck_assert_int_eq(engine_release(&x.e, &x.w, h->id, 10, 0), ENG_OK);
            ck_assert_int_eq(engine_move_job(&x.e, h->id, x.p), ENG_OK);
        }
        engine_commit(&x.e);
        x.e.now = clock_mono();
        engine_tick(&x.e); /* compaction before the answers come */
        ev_poll(&x.loop, 0);
        ck_assert_int_eq(engine_delete(&x.e, &x.w, j->id), ENG_OK);
        iterate(&x);
    }
    ck_assert_uint_gt(x.e.binlog.records_migrated, 100);
    settle(&x);
    check_counts(&x);
    check_all_bodies(&x, ids, 60);
    ck_assert_uint_eq(x.e.spill.errors, 0);
    world_restart(&x);
    check_all_bodies(&x, ids, 60);
    world_free(&x);
}
END_TEST

/* This process's fds on files under base_dir that were removed. */
static int removed_files_open(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *de;
    int n = 0;

    while (d && (de = readdir(d))) {
        char path[300], target[512];
        ssize_t k;

        snprintf(path, sizeof path, "/proc/self/fd/%s", de->d_name);
        k = readlink(path, target, sizeof target - 1);
        if (k <= 0)
            continue;
        target[k] = 0;
        if (!strncmp(target, base_dir, strlen(base_dir)) && strstr(target, " (deleted)"))
            n++;
    }
    if (d)
        closedir(d);
    return n;
}

/* The reader thread closes the files the binlog removed as soon as it is
 * told, with nothing more to read: it used to close them only at its next
 * read, so an idle reader kept their disk space. */
START_TEST(idle_reader_closes_removed_files)
{
    World x;
    uint32_t last;
    int waited = 0;
    Job *j;

    world_config(&x, SMALL_FILE);
    world_open(&x);
    for (int i = 0; i < 40; i++)
        put_in(&x, x.s, 300, 10, 0); /* ~2 files, mostly spilled */
    engine_commit(&x.e);
    /* Every job taken: the reader reads the spilled bodies ahead. */
    for (int i = 0; i < 40; i++) {
        settle(&x);
        ck_assert_int_eq(worker_reserve(&x.e, &x.w, 0, &j), WAIT_RESERVED);
        ck_assert(body_ok(j, job_body(j)));
        ck_assert_int_eq(engine_delete(&x.e, &x.w, j->id), ENG_OK);
        iterate(&x);
    }
    settle(&x);
    ck_assert_uint_gt(x.e.spill.reads, 10);
    /* Other records until every file the reader read is gone. */
    last = x.e.binlog.files[x.e.binlog.nfiles - 1].index;
    while (x.e.binlog.files[0].index <= last) {
        j = put_in(&x, x.p, 700, 10, 0);
        iterate(&x);
        ck_assert_int_eq(engine_delete(&x.e, &x.w, j->id), ENG_OK);
        iterate(&x);
    }
    /* (a ceiling, not a speed: the thread runs when it is scheduled) */
    while (removed_files_open() && waited++ < 1000) {
        iterate(&x);
        usleep(5000);
    }
    ck_assert_int_eq(removed_files_open(), 0);
    world_free(&x);
}
END_TEST

/* ---- damage ----------------------------------------------------------- */

START_TEST(damaged_record)
{
    World x;
    uint64_t ids[30];
    Job *j;
    uint64_t errors;

    world_config(&x, 0);
    world_open(&x);
    for (int i = 0; i < 30; i++)
        ids[i] = put_in(&x, x.s, BODY, 10, 0)->id;
    engine_commit(&x.e);

    /* A flipped body byte: the checksum says no. */
    j = find(&x, ids[20]);
    flip_byte(j->file, body_end(j));
    ck_assert_int_eq(spill_load(&x.e, j), -2);
    ck_assert_uint_eq(x.e.spill.errors, 1);
    ck_assert(j->spilled && !j->loaded);
    ck_assert_uint_eq(x.e.spill.waits, 0);
    check_counts(&x);
    ck_assert_ptr_null(engine_body(&x.e, j));
    ck_assert_uint_eq(x.e.spill.errors, 2);
    /* Its neighbours are untouched. */
    ck_assert_int_eq(spill_load(&x.e, find(&x, ids[19])), 0);
    ck_assert_int_eq(spill_load(&x.e, find(&x, ids[21])), 0);
    ck_assert(body_ok(find(&x, ids[21]), job_body(find(&x, ids[21]))));

    /* A flipped length byte: torn or corrupt, either way -2. */
    j = find(&x, ids[22]);
    flip_byte(j->file, job_spill_off(j) + 1);
    ck_assert_int_eq(spill_load(&x.e, j), -2);
    ck_assert_uint_eq(x.e.spill.errors, 3);

    /* Another job's record where this one's should be. */
    j = find(&x, ids[23]);
    job_spill_set_off(j, job_spill_off(find(&x, ids[24])));
    ck_assert_int_eq(spill_load(&x.e, j), -2);
    ck_assert_uint_eq(x.e.spill.errors, 4);
    check_counts(&x);

    /* A reserve that meets it buries it and answers out of memory; the
     * next reserve goes on to the next job. */
    ck_assert_int_eq(engine_reserve_job(&x.e, &x.w, ids[20], &j), ENG_NO_MEMORY);
    ck_assert_int_eq(find(&x, ids[20])->state, JOB_BURIED);
    ck_assert_uint_eq(x.e.spill.errors, 5);
    check_counts(&x);

    /* The read-ahead meets one: counted, the job stays on disk, the
     * others come back. */
    errors = x.e.spill.errors;
    j = find(&x, ids[12]);
    flip_byte(j->file, body_end(j));
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(engine_delete(&x.e, &x.w, ids[i]), ENG_OK);
    settle(&x);
    ck_assert_uint_eq(x.e.spill.errors, errors + 1);
    ck_assert(!find(&x, ids[12])->loaded && !find(&x, ids[12])->reading);
    ck_assert(find(&x, ids[11])->loaded && find(&x, ids[13])->loaded);
    ck_assert(body_ok(find(&x, ids[13]), job_body(find(&x, ids[13]))));
    check_counts(&x);

    /* Draining: the damaged ones are buried on the way, every other job
     * comes out whole. */
    for (;;) {
        int r = worker_reserve(&x.e, &x.w, 0, &j);
        if (r == WAIT_TIMED_OUT)
            break;
        if (r == WAIT_NO_MEMORY) {
            ck_assert_int_eq(j->state, JOB_BURIED);
            continue;
        }
        ck_assert_int_eq(r, WAIT_RESERVED);
        ck_assert(body_ok(j, job_body(j)));
        ck_assert_int_eq(engine_delete(&x.e, &x.w, j->id), ENG_OK);
        settle(&x);
    }
    ck_assert_int_eq(find(&x, ids[12])->state, JOB_BURIED);
    ck_assert_int_eq(find(&x, ids[22])->state, JOB_BURIED);
    ck_assert_int_eq(find(&x, ids[23])->state, JOB_BURIED);
    check_counts(&x);
    world_free(&x);
}
END_TEST

/* The file a spilled job's record is in is gone: an I/O error, -2. */
START_TEST(missing_file)
{
    World x;
    char path[256];
    Job *j;

    world_config(&x, 0);
    world_open(&x);
    for (int i = 0; i < 12; i++)
        j = put_in(&x, x.s, BODY, 10, 0);
    engine_commit(&x.e);
    ck_assert(!j->loaded);
    snprintf(path, sizeof path, "%s/binlog.%u", dir, j->file);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(spill_load(&x.e, j), -2);
    ck_assert_uint_eq(x.e.spill.errors, 1);
    check_counts(&x);
    world_free(&x);
}
END_TEST

/* ---- allocation failure ----------------------------------------------- */

/* The jobs the walk made and what should have become of them. */
typedef struct Model {
    uint64_t ids[512];
    size_t n;
} Model;

static void model_add(Model *m, uint64_t id)
{
    if (m->n < sizeof m->ids / sizeof m->ids[0])
        m->ids[m->n++] = id;
}

static void model_del(Model *m, uint64_t id)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->ids[i] == id) {
            m->ids[i] = m->ids[--m->n];
            return;
        }
}

static uint64_t model_pick(Model *m, Rng *r)
{
    return m->n ? m->ids[rng_below(r, m->n)] : 0;
}

typedef struct LiveCount {
    size_t n;
} LiveCount;

static void count_live(HashNode *n, void *arg)
{
    if (!job_dead(container_of(n, Job, hnode)))
        ((LiveCount *)arg)->n++;
}

/* No job lost, none made up, every body in memory right. */
static void check_model(World *x, const Model *m)
{
    LiveCount lc = {0};

    for (size_t i = 0; i < m->n; i++) {
        Job *j = find(x, m->ids[i]);
        REQUIRE_MSG(j && !job_dead(j), "job %llu lost", (unsigned long long)m->ids[i]);
        REQUIRE_MSG(!job_body(j) || body_ok(j, job_body(j)), "job %llu: body differs",
                    (unsigned long long)j->id);
    }
    hash_each(&x->e.jobs, count_live, &lc);
    REQ_UEQ(lc.n, m->n);
    check_counts(x);
}

static void walk(uint64_t seed, int failures)
{
    World x;
    Model m = {.n = 0};
    Rng r;
    unsigned long before = alloc_failures();

    rng_seed(&r, seed);
    world_config(&x, SMALL_FILE);
    world_open(&x);
    for (int step = 0; step < 2500; step++) {
        unsigned op = (unsigned)rng_below(&r, 100);
        uint64_t id = model_pick(&m, &r);
        Job *j = id ? find(&x, id) : NULL;

        if (failures && rng_below(&r, 3) == 0)
            alloc_fail_after(1 + rng_below(&r, 4));
        if (op < 35 && m.n < 400) {
            Tube *t = rng_below(&r, 5) ? x.s : x.p;
            uint32_t n = (uint32_t)rng_below(&r, 300);
            Job *nj = engine_job_new(&x.e, t, n, (uint32_t)rng_below(&r, 4),
                                     rng_below(&r, 10) == 0 ? 1 : 0,
                                     1 + (uint32_t)rng_below(&r, 3));
            if (nj) {
                uint64_t nid = nj->id;
                fill(nid, n, job_body_mut(nj));
                switch (engine_put(&x.e, nj, t)) {
                case ENG_OK:
                case ENG_BURIED:
                    model_add(&m, nid);
                    break;
                default:
                    engine_job_drop(&x.e, nj);
                }
            }
        } else if (op < 50) {
            if (worker_reserve(&x.e, &x.w, 0, &j) == WAIT_RESERVED)
                REQUIRE_MSG(body_ok(j, job_body(j)), "reserved %llu: body differs",
                            (unsigned long long)j->id);
        } else if (op < 60 && j) {
            if (engine_delete(&x.e, &x.w, id) == ENG_OK)
                model_del(&m, id);
        } else if (op < 66 && j && j->state == JOB_RESERVED) {
            if (rng_below(&r, 2))
                engine_release(&x.e, &x.w, id, (uint32_t)rng_below(&r, 4),
                               rng_below(&r, 4) == 0);
            else
                engine_bury(&x.e, &x.w, id, 1);
        } else if (op < 70 && j && j->state != JOB_RESERVED) {
            engine_kick_job(&x.e, id);
        } else if (op < 76 && j) {
            const char *b = engine_body(&x.e, j);
            REQUIRE_MSG(!b || body_ok(j, b), "peek %llu: body differs",
                        (unsigned long long)id);
        } else if (op < 79 && j && j->state != JOB_RESERVED) {
            engine_move_job(&x.e, id, rng_below(&r, 2) ? x.s : x.p);
        } else if (op < 81 && rng_below(&r, 2)) {
            /* A reload gives p a budget or takes it away: p's plain jobs
             * go to the spilled form a batch per commit, or every body
             * of it is read back. A reload that cannot get its memory is
             * refused whole, as server_reload() does. */
            static const char with[] = "[tube s]\nmax_memory_size = 1000\n"
                                       "[tube p]\nmax_memory_size = 1500\n";
            const char *text = x.p->pol.max_memory_size ? conf_text : with;
            ConfFile *next;
            char err[128];
            if (conf_parse("t.conf", text, strlen(text), &next, err, sizeof err) < 0)
                ck_assert_msg(failures, "%s", err); /* out of memory */
            else if (engine_reload_prepare(&x.e, next) < 0)
                conf_free(next);
            else {
                ConfFile *old = x.cfg.conf;
                x.cfg.conf = x.conf = next;
                engine_reload(&x.e);
                conf_free(old);
            }
        } else if (op < 81) {
            /* Flush with no read in flight, and the flushed jobs freed
             * before the next commit (see regressions). */
            alloc_fail_after(0);
            settle(&x);
            if (failures && rng_below(&r, 2))
                alloc_fail_after(1 + rng_below(&r, 3));
            if (engine_flush_tube(&x.e, x.s) >= 0) {
                for (size_t i = 0; i < m.n;) {
                    Job *k = find(&x, m.ids[i]);
                    if (k->tube == x.s && job_dead(k))
                        m.ids[i] = m.ids[--m.n];
                    else
                        i++;
                }
                /* The graveyard freed before any read-ahead can reach a
                 * flushed job (see regressions). */
                alloc_fail_after(0);
                while (x.e.ngraves || !list_empty(&x.e.grave_buried))
                    engine_tick(&x.e);
            }
        } else if (op < 90 && j && j->state != JOB_RESERVED) {
            int rc = spill_load(&x.e, j);
            REQUIRE_MSG(rc == 0 || rc == -1, "spill_load %d", rc);
            REQUIRE(rc < 0 || body_ok(j, job_body(j)));
        } else {
            engine_commit(&x.e);
            ev_poll(&x.loop, rng_below(&r, 3) ? 0 : 5);
            x.e.now += NS_PER_SEC / 4; /* TTRs run out now and then */
            engine_tick(&x.e);
        }
        alloc_fail_after(0);
        check_model(&x, &m);
    }
    if (failures)
        ck_assert_uint_gt(alloc_failures() - before, 100);
    settle(&x);
    ck_assert_uint_eq(x.e.spill.errors, 0);
    check_model(&x, &m);
    for (size_t i = 0; i < m.n; i++) {
        Job *j = find(&x, m.ids[i]);
        ck_assert_msg(body_ok(j, engine_body(&x.e, j)), "job %llu differs",
                      (unsigned long long)j->id);
    }
    /* The binlog may have gone unhealthy (out of memory for its buffer):
     * a tick writes everything again. */
    x.e.now += 2 * NS_PER_SEC;
    engine_tick(&x.e);
    ck_assert(x.e.binlog.healthy);
    world_restart(&x);
    check_model(&x, &m);
    for (size_t i = 0; i < m.n; i++) {
        Job *j = find(&x, m.ids[i]);
        ck_assert_msg(body_ok(j, engine_body(&x.e, j)), "after restart, job %llu differs",
                      (unsigned long long)j->id);
    }
    world_free(&x);
}

START_TEST(random_walk)
{
    walk(1 + (uint64_t)_i, 0);
}
END_TEST

START_TEST(random_walk_with_allocation_failures)
{
    walk(100 + (uint64_t)_i, 1);
}
END_TEST

/* Every single allocation of a fixed session failing in turn. */
START_TEST(each_allocation_fails)
{
    for (unsigned long k = 1; k < 400; k++) {
        World x;
        uint64_t ids[24];
        size_t n = 0;
        Job *j;

        world_config(&x, 0);
        world_open(&x);
        alloc_fail_after(k);
        for (int i = 0; i < 24; i++) {
            Job *nj = engine_job_new(&x.e, x.s, BODY, 10, 0, 60);
            if (!nj)
                continue;
            fill(nj->id, BODY, job_body_mut(nj));
            if (engine_put(&x.e, nj, x.s) <= ENG_BURIED)
                ids[n++] = nj->id;
            else
                engine_job_drop(&x.e, nj);
        }
        engine_commit(&x.e);
        if (n > 2) {
            engine_delete(&x.e, &x.w, ids[0]);
            engine_delete(&x.e, &x.w, ids[1]);
        }
        settle(&x);
        if (worker_reserve(&x.e, &x.w, 0, &j) == WAIT_RESERVED)
            ck_assert(body_ok(j, job_body(j)));
        for (size_t i = 2; i < n; i++)
            if ((j = find(&x, ids[i])) && j->state != JOB_RESERVED)
                spill_load(&x.e, j);
        alloc_fail_after(0);
        settle(&x);
        check_counts(&x);
        for (size_t i = n > 2 ? 2 : 0; i < n; i++) {
            j = find(&x, ids[i]);
            ck_assert_msg(j, "k=%lu: job %llu lost", k, (unsigned long long)ids[i]);
            ck_assert_msg(body_ok(j, engine_body(&x.e, j)), "k=%lu: body", k);
        }
        x.e.now += 2 * NS_PER_SEC;
        engine_tick(&x.e);
        world_restart(&x);
        for (size_t i = n > 2 ? 2 : 0; i < n; i++) {
            j = find(&x, ids[i]);
            ck_assert_msg(j, "k=%lu: job %llu lost at restart", k, (unsigned long long)ids[i]);
            ck_assert_msg(body_ok(j, engine_body(&x.e, j)), "k=%lu: body at restart", k);
        }
        world_free(&x);
        test_teardown();
        test_setup();
    }
}
END_TEST

/* Replay with allocation failure: it fails whole (the server does not
 * start) or succeeds with every job. */
START_TEST(replay_out_of_memory)
{
    World x;
    uint64_t ids[30];

    world_config(&x, 0);
    world_open(&x);
    for (int i = 0; i < 30; i++)
        ids[i] = put_in(&x, x.s, BODY, 10, 0)->id;
    world_close(&x);
    for (unsigned long k = 1; k < 200; k++) {
        char err[512];
        int rc;

        memset(&x.e, 0, sizeof x.e);
        memset(&x.w, 0, sizeof x.w);
        ck_assert_int_eq(ev_init(&x.loop), 0);
        ck_assert_int_eq(engine_init(&x.e, &x.cfg, &x.loop), 0);
        alloc_fail_after(k);
        rc = engine_open_binlog(&x.e, err, sizeof err);
        alloc_fail_after(0);
        if (rc < 0) {
            /* As test_binlog's close_failed(): the unplaced jobs by hand. */
            while (x.e.jobs.len) {
                Job *j = NULL;
                for (size_t b = 0; b < x.e.jobs.nbuckets && !j; b++)
                    if (x.e.jobs.buckets[b])
                        j = container_of(x.e.jobs.buckets[b], Job, hnode);
                job_table_remove(&x.e.jobs, j);
                tube_unref(&x.e.tubes, j->tube);
                job_free(j);
            }
            engine_free(&x.e);
            ev_close(&x.loop);
            continue;
        }
        worker_init(&x.e, &x.w, &ops);
        x.s = engine_tube(&x.e, "s", 1);
        x.p = engine_tube(&x.e, "p", 1);
        engine_tube_ref(x.s);
        engine_tube_ref(x.p);
        check_counts(&x);
        for (int i = 0; i < 30; i++)
            ck_assert_msg(body_ok(find(&x, ids[i]), engine_body(&x.e, find(&x, ids[i]))),
                          "k=%lu: job %d", k, i);
        world_close(&x);
    }
    conf_free(x.conf);
}
END_TEST

/* ---- regressions -------------------------------------------------------- */

/* flush-tube while read-aheads of the tube are in flight: the answers
 * reach jobs that are dead (in the graveyard, still in the job table),
 * and loaded() takes them off the tube's spilled counts, which flush
 * already set to zero. */
START_TEST(flush_with_reads_in_flight)
{
    World x;
    uint64_t ids[30];

    world_config(&x, 0);
    world_open(&x);
    for (int i = 0; i < 30; i++)
        ids[i] = put_in(&x, x.s, BODY, 10, 0)->id;
    engine_commit(&x.e);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(engine_delete(&x.e, &x.w, ids[i]), ENG_OK);
    engine_commit(&x.e); /* five reads asked for */
    ck_assert(find(&x, ids[10])->reading);
    ck_assert_int_eq(engine_flush_tube(&x.e, x.s), 25);
    ck_assert_uint_eq(x.s->spilled_bytes, 0);
    for (int i = 0; i < 200 && pending_reads(&x.e); i++)
        ev_poll(&x.loop, 10); /* the answers, before the graves are freed */
    ck_assert_uint_eq(x.s->spilled_ct, 0);
    ck_assert_uint_eq(x.s->spilled_bytes, 0);
    ck_assert_uint_eq(spill_tube_mem_bytes(x.s), 0);
    for (int i = 0; i < 5; i++)
        iterate(&x);
    /* The tube takes a budget's worth in memory again. */
    for (int i = 0; i < 10; i++)
        ck_assert(!put_in(&x, x.s, BODY, 10, 0)->spilled);
    world_free(&x);
}
END_TEST

/* Not only reads in flight at the flush: a ring span that a live job
 * spilled after the flush starts may cover the ids of flushed jobs (spans
 * cover up to SPILL_GAP ids of others), and pump_tube() does not check
 * job_dead(), so the read-ahead asks for the bodies of dead jobs still in
 * the graveyard and takes them off the tube's counts. */
START_TEST(read_ahead_reaches_flushed_jobs)
{
    World x;
    uint64_t ids[30];
    Job *j;

    world_config(&x, 0);
    world_open(&x);
    for (int i = 0; i < 30; i++)
        ids[i] = put_in(&x, x.s, BODY, 10, 0)->id;
    engine_commit(&x.e);
    /* ids[10] reserved across the flush, the rest of the tube flushed. */
    ck_assert_int_eq(engine_reserve_job(&x.e, &x.w, ids[10], &j), ENG_OK);
    settle(&x);
    ck_assert_int_eq(engine_flush_tube(&x.e, x.s), 29);
    ck_assert_uint_eq(x.s->spilled_ct, 0);
    ck_assert_int_eq(engine_release(&x.e, &x.w, ids[10], 10, 0), ENG_OK);
    for (int i = 0; i < 10; i++)
        put_in(&x, x.s, BODY, 10, 0);
    engine_commit(&x.e); /* ids[10] spills again: a span from it */
    ck_assert(!find(&x, ids[10])->loaded);
    put_in(&x, x.s, BODY, 10, 0);
    engine_commit(&x.e); /* the span now reaches over ids[11..29] */
    ck_assert_uint_eq(x.s->spilled_ct, 2);
    /* Room for some: the read-ahead goes along the span. */
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(worker_reserve(&x.e, &x.w, 0, &j), WAIT_RESERVED);
        ck_assert_int_eq(engine_delete(&x.e, &x.w, j->id), ENG_OK);
    }
    settle(&x);
    ck_assert_msg(x.s->spilled_ct <= 2 && x.e.spill.reads <= 2,
                  "%llu spilled in s (2 are), %llu read ahead", 
                  (unsigned long long)x.s->spilled_ct, (unsigned long long)x.e.spill.reads);
    check_counts(&x);
    world_free(&x);
}
END_TEST

/* The same with a damaged record: the answer buries the dead job, which
 * detaches it from a heap it is not in and puts it on the tube's buried
 * list; the graveyard then frees it while it is on that list. */
START_TEST(flush_with_damaged_read_in_flight)
{
    World x;
    uint64_t ids[30];
    Job *j;

    world_config(&x, 0);
    world_open(&x);
    for (int i = 0; i < 30; i++)
        ids[i] = put_in(&x, x.s, BODY, 10, 0)->id;
    engine_commit(&x.e);
    j = find(&x, ids[10]);
    flip_byte(j->file, body_end(j));
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(engine_delete(&x.e, &x.w, ids[i]), ENG_OK);
    engine_commit(&x.e); /* reads of ids[10..14] asked for */
    ck_assert(find(&x, ids[10])->reading);
    ck_assert_int_eq(engine_flush_tube(&x.e, x.s), 25);
    for (int i = 0; i < 3; i++)
        put_in(&x, x.s, BODY, 10, 0); /* a new ready heap */
    for (int i = 0; i < 200 && pending_reads(&x.e); i++)
        ev_poll(&x.loop, 10);
    for (int i = 0; i < 5; i++)
        iterate(&x); /* the graveyard is freed */
    /* (under ASan: heap-use-after-free walking the buried list) */
    ck_assert_ptr_null(engine_peek(&x.e, x.s, JOB_BURIED));
    ck_assert_uint_eq(x.s->ready.len, 3);
    ck_assert_uint_eq(x.s->buried_ct, 0);
    world_free(&x);
}
END_TEST

/* A worker parked for a job's body (spill_fetch) is only woken by the
 * answer for that job. When the job goes another way first (deleted,
 * reserved by id, moved), the answer is dropped without serving the
 * tube: the worker waits on although the tube has ready jobs, until
 * something else (a put) serves the tube. */
START_TEST(parked_worker_stranded)
{
    World x;
    Worker other;
    uint64_t a, b;
    Job *j;

    world_config(&x, 0);
    world_open(&x);
    worker_init(&x.e, &other, &ops);
    for (int i = 0; i < 10; i++)
        put_in(&x, x.s, BODY, 100, 0); /* the budget, in memory */
    a = put_in(&x, x.s, BODY, 1, 0)->id;
    b = put_in(&x, x.s, BODY, 1, 0)->id;
    engine_commit(&x.e);
    ck_assert(!find(&x, a)->loaded && !find(&x, b)->loaded);
    memset(&woke, 0, sizeof woke);
    ck_assert_int_eq(worker_reserve(&x.e, &x.w, 3600 * NS_PER_SEC, &j), WAIT_PENDING);
    /* Another client takes a by id before the reader answers. */
    ck_assert_int_eq(engine_reserve_job(&x.e, &other, a, &j), ENG_OK);
    settle(&x);
    for (int i = 0; i < 20 && !woke.n; i++)
        iterate(&x);
    ck_assert_msg(woke.n == 1, "the worker still waits with %llu ready jobs in its tube "
                  "(b %llu on disk: %d)", (unsigned long long)x.s->ready.len,
                  (unsigned long long)b, !find(&x, b)->loaded);
    worker_release_all(&x.e, &other);
    worker_fini(&x.e, &other);
    world_free(&x);
}
END_TEST


/* A reload that brings a budget back: shrink_tube() turns the plain jobs
 * into spilled ones but passes over those already in the spilled form
 * with their body in memory (read back while the tube had no budget), so
 * they never go and the tube stays over its budget. */
START_TEST(reload_leaves_loaded_spilled_jobs)
{
    World x;

    world_config(&x, 0);
    world_open(&x);
    for (int i = 0; i < 30; i++)
        put_in(&x, x.s, BODY, 10, 0);
    engine_commit(&x.e);
    ck_assert_uint_eq(x.s->spilled_ct, 20);
    reload(&x, "[tube big]\nmax_memory_size = 1M\n");
    settle(&x); /* every body back */
    ck_assert_uint_eq(x.s->spilled_ct, 0);
    reload(&x, conf_text);
    for (int i = 0; i < 10; i++)
        settle(&x);
    ck_assert_msg(spill_tube_mem_bytes(x.s) <= BUDGET, "%llu bytes in memory, budget %d",
                  (unsigned long long)spill_tube_mem_bytes(x.s), BUDGET);
    world_free(&x);
}
END_TEST

/* A record that cannot be read pins its file for good: compaction reads
 * it, fails, and tries again at every tick, so the oldest file never goes
 * and the disk is no longer bounded (spill-errors grows every tick). */
START_TEST(damaged_record_stops_compaction)
{
    World x;
    Job *j = NULL;
    uint64_t disk_max = 0;

    world_config(&x, SMALL_FILE);
    world_open(&x);
    for (int i = 0; i < 15; i++)
        j = put_in(&x, x.s, 300, 10, 0);
    engine_commit(&x.e);
    ck_assert(!j->loaded);
    flip_byte(j->file, body_end(j));
    for (int i = 0; i < 1500; i++) {
        Job *c = put_in(&x, x.p, 700, 10, 0);
        iterate(&x);
        ck_assert_int_eq(engine_delete(&x.e, &x.w, c->id), ENG_OK);
        iterate(&x);
        if (x.e.binlog.disk_bytes > disk_max)
            disk_max = x.e.binlog.disk_bytes;
    }
    ck_assert_msg(disk_max <= 2 * x.e.binlog.live_bytes + 4 * x.e.binlog.file_size,
                  "%llu bytes on disk at most, %zu files now, for %llu live bytes",
                  (unsigned long long)disk_max, x.e.binlog.nfiles,
                  (unsigned long long)x.e.binlog.live_bytes);
    ck_assert_uint_le(x.e.spill.errors, 10);
    world_free(&x);
}
END_TEST

/* Compaction reads the spilled bodies of the file it empties and the next
 * commit drops them again, pushing each id on its tube's ring once more,
 * in hash-table order (so the spans do not merge), while the ids pushed
 * before are still there: the ring grows with every compaction, not with
 * the jobs on disk. */
START_TEST(compaction_grows_the_ring)
{
    World x;

    world_config(&x, SMALL_FILE);
    world_open(&x);
    for (int i = 0; i < 60; i++)
        put_in(&x, x.s, 300, 10, 0);
    settle(&x);
    for (int i = 0; i < 3000; i++) {
        Job *j = put_in(&x, x.p, 700, 10, 0);
        iterate(&x);
        ck_assert_int_eq(engine_delete(&x.e, &x.w, j->id), ENG_OK);
        iterate(&x);
    }
    settle(&x);
    ck_assert_uint_gt(x.e.binlog.records_migrated, 2000);
    ck_assert_msg(x.s->spill->len <= 2 * x.s->spilled_ct,
                  "%zu spans (room for %zu) for %llu jobs on disk after %llu records moved",
                  x.s->spill->len, x.s->spill->cap, (unsigned long long)x.s->spilled_ct,
                  (unsigned long long)x.e.binlog.records_migrated);
    world_free(&x);
}
END_TEST

/* --recover rewrites every job into a fresh file (rewrite_all): each
 * spilled body is read into memory, and none goes before the first
 * commit, so the whole backlog is in memory at once: what replay takes
 * care never to do. */
START_TEST(recover_reads_every_body)
{
    World x;
    Job *first;
    uint32_t file;

    world_config(&x, 0);
    world_open(&x);
    first = put_in(&x, x.p, 10, 10, 0);
    file = first->file;
    for (int i = 0; i < 200; i++)
        put_in(&x, x.s, 300, 10, 0);
    world_close(&x);
    flip_byte(file, BL_HEADER_SIZE + 20); /* the first record, p's job */
    memset(&x.e, 0, sizeof x.e);
    memset(&x.w, 0, sizeof x.w);
    x.cfg.recover = 1;
    world_open(&x);
    ck_assert_uint_eq(x.e.jobs.len, 200);
    ck_assert_msg(spill_tube_mem_bytes(x.s) <= BUDGET,
                  "%llu body bytes of s in memory after --recover (budget %d)",
                  (unsigned long long)spill_tube_mem_bytes(x.s), BUDGET);
    world_free(&x);
}
END_TEST

static Suite *spill_suite(void)
{
    Suite *s = suite_create("spill");
    TCase *fm = unit_tcase("form");
    TCase *sp = unit_tcase("spill");
    TCase *rp = unit_tcase("replay");
    TCase *cp = unit_tcase("compaction");
    TCase *dm = unit_tcase("damage");
    TCase *oom = unit_tcase("oom");
    TCase *kb = unit_tcase("regressions");
    TCase *all[] = {sp, rp, cp, dm, oom, kb};

    for (size_t i = 0; i < sizeof all / sizeof all[0] && all[i]; i++) {
        tcase_add_unchecked_fixture(all[i], suite_setup, suite_teardown);
        tcase_add_checked_fixture(all[i], test_setup, test_teardown);
    }
    tcase_set_timeout(cp, 300);
    tcase_set_timeout(oom, 300);

    tcase_add_test(fm, spilled_form_with_body);
    tcase_add_test(fm, spilled_form_without_body);
    tcase_add_test(fm, spilled_form_out_of_memory);
    suite_add_tcase(s, fm);

    tcase_add_test(sp, puts_past_the_budget_spill);
    tcase_add_test(sp, odd_sizes_read_back);
    tcase_add_test(sp, read_ahead_after_deletes);
    tcase_add_test(sp, stale_read_ahead_answers);
    tcase_add_test(sp, reserve_loads_a_spilled_job);
    tcase_add_test(sp, waiting_reserve_parks_for_the_reader);
    tcase_add_test(sp, move_and_flush);
    tcase_add_test(sp, flush_after_journal_turned_off);
    tcase_add_test(sp, no_log_room_discards_nothing);
    tcase_add_test(sp, strict_fsync);
    tcase_add_test(sp, fanout_copies_spill);
    tcase_add_test(sp, expiry_moves_spilled_jobs);
    tcase_add_test(sp, reload_changes_the_budget);
    tcase_add_test(sp, puts_during_read_ahead_keep_budget);
    tcase_add_test(sp, reload_spills_plain_jobs);
    suite_add_tcase(s, sp);

    tcase_add_test(rp, replay_comes_back_on_disk);
    suite_add_tcase(s, rp);

    tcase_add_test(cp, compaction_keeps_offsets);
    tcase_add_test(cp, compaction_with_reads_in_flight);
    tcase_add_test(cp, idle_reader_closes_removed_files);
    suite_add_tcase(s, cp);

    tcase_add_test(dm, damaged_record);
    tcase_add_test(dm, missing_file);
    suite_add_tcase(s, dm);

    tcase_add_loop_test(oom, random_walk, 0, 3);
    tcase_add_loop_test(oom, random_walk_with_allocation_failures, 0, 4);
    tcase_add_test(oom, each_allocation_fails);
    tcase_add_test(oom, replay_out_of_memory);
    suite_add_tcase(s, oom);

    /* Bugs found while writing this suite, failing until fixed. */
    if (kb) {
        tcase_set_timeout(kb, 300);
        tcase_add_test(kb, flush_with_reads_in_flight);
        tcase_add_test(kb, flush_with_damaged_read_in_flight);
        tcase_add_test(kb, read_ahead_reaches_flushed_jobs);
        tcase_add_test(kb, parked_worker_stranded);
        tcase_add_test(kb, damaged_record_stops_compaction);
        tcase_add_test(kb, compaction_grows_the_ring);
        tcase_add_test(kb, reload_leaves_loaded_spilled_jobs);
        tcase_add_test(kb, recover_reads_every_body);
        tcase_add_test(kb, puts_while_delayed_bodies_make_room);
        suite_add_tcase(s, kb);
    }
    return s;
}

UNIT_MAIN(spill_suite)
