/* Unit tests for bsimport.c's reader of beanstalkd's binlog, over crafted
 * bytes laid out as beanstalkd 1.12 (version 7) and 1.4 (version 5) write
 * them on x86-64: full records, state records, deletes, several files and
 * compaction's moved records, reserved jobs, and every kind of damage
 * (each must keep what came before it, drop what beanstalkd's own replay
 * drops, and say so). Also the lock check against a real fcntl lock held
 * by another process, the directory walk (which must leave every file
 * as it was), and allocation failure at every step. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bsimport.h"
#include "unit.h"

/* ---- a beanstalkd binlog, built --------------------------------------- */

typedef struct Bytes {
    unsigned char p[1 << 16];
    size_t n;
} Bytes;

static void add(Bytes *b, const void *p, size_t n)
{
    ck_assert_uint_le(b->n + n, sizeof b->p);
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void add32(Bytes *b, uint32_t v) { add(b, &v, 4); }
static void add64(Bytes *b, uint64_t v) { add(b, &v, 8); }

typedef struct R {
    uint64_t id;
    uint32_t pri;
    int64_t delay, ttr, created, deadline;
    int32_t size;
    uint32_t ct[5];
    uint8_t state;
} R;

static void start_file(Bytes *b, int version)
{
    b->n = 0;
    add32(b, (uint32_t)version);
}

/* beanstalkd's Jobrec as the compiler lays it out on x86-64: 80 bytes (77
 * written in version 5), padding zero here as in a fresh struct. */
static void add_rec(Bytes *b, const R *r, int v5)
{
    unsigned char rec[80] = {0};
    int64_t k = v5 ? 1000 : 1; /* version 5 counts microseconds */
    int64_t t[4] = {r->delay / k, r->ttr / k, r->created / k, r->deadline / k};

    memcpy(rec + 0, &r->id, 8);
    memcpy(rec + 8, &r->pri, 4);
    memcpy(rec + 16, &t[0], 8);
    memcpy(rec + 24, &t[1], 8);
    memcpy(rec + 32, &r->size, 4);
    memcpy(rec + 40, &t[2], 8);
    memcpy(rec + 48, &t[3], 8);
    memcpy(rec + 56, r->ct, 20);
    rec[76] = r->state;
    add(b, rec, v5 ? 77 : 80);
}

static void add_namelen(Bytes *b, size_t n, int v5)
{
    if (v5)
        add64(b, n);
    else
        add32(b, (uint32_t)n);
}

/* A put (or a job compaction moved): name, record, body + "\r\n". */
static void full(Bytes *b, const char *tube, R r, const char *body, int v5)
{
    size_t bl = strlen(body);

    r.size = (int32_t)bl + 2;
    add_namelen(b, strlen(tube), v5);
    add(b, tube, strlen(tube));
    add_rec(b, &r, v5);
    add(b, body, bl);
    add(b, "\r\n", 2);
}

/* A state change or delete: name length 0, the record. */
static void shortrec(Bytes *b, R r, const char *body, int v5)
{
    r.size = (int32_t)strlen(body) + 2;
    add_namelen(b, 0, v5);
    add_rec(b, &r, v5);
}

static R rec(uint64_t id, uint8_t state)
{
    R r = {.id = id, .pri = 100 + (uint32_t)id, .ttr = 60000000000LL,
           .created = 1700000000000000000LL + (int64_t)id * 1000, .state = state};
    return r;
}

static int read_bytes(BsiReader *r, const Bytes *b)
{
    char err[256] = "";

    return bsi_read_file(r, "binlog.test", b->p, b->n, err, sizeof err);
}

static const BsiJob *job(const BsiReader *r, uint64_t id)
{
    for (size_t i = 0; i < r->njobs; i++)
        if (r->jobs[i].id == id)
            return &r->jobs[i];
    return NULL;
}

static const char *tube_of_job(const BsiReader *r, const BsiJob *j)
{
    return r->tubes[j->tube].name;
}

/* ---- records ------------------------------------------------------------ */

START_TEST(full_record_every_field)
{
    BsiReader r;
    Bytes *b = calloc(1, sizeof *b);
    R x = rec(7, BSI_DELAYED);
    const BsiJob *j;

    x.pri = 4294967295u;
    x.delay = 3600000000000LL;
    x.ttr = 120000000000LL;
    x.deadline = 1800000000000000000LL;
    for (int i = 0; i < 5; i++)
        x.ct[i] = 10 + (uint32_t)i;
    start_file(b, 7);
    full(b, "a/b+c;d$e_(f).g-1", x, "he\0llo", 0);
    bsi_init(&r);
    ck_assert_int_eq(read_bytes(&r, b), 0);
    ck_assert_uint_eq(r.nlive, 1);
    ck_assert_uint_eq(r.files, 1);
    ck_assert_uint_eq(r.damaged, 0);
    j = job(&r, 7);
    ck_assert_ptr_nonnull(j);
    ck_assert_str_eq(tube_of_job(&r, j), "a/b+c;d$e_(f).g-1");
    ck_assert_uint_eq(j->pri, 4294967295u);
    ck_assert_int_eq(j->delay_ns, 3600000000000LL);
    ck_assert_int_eq(j->ttr_ns, 120000000000LL);
    ck_assert_int_eq(j->created_wall, x.created);
    ck_assert_int_eq(j->deadline_wall, 1800000000000000000LL);
    ck_assert_uint_eq(j->reserves, 10);
    ck_assert_uint_eq(j->timeouts, 11);
    ck_assert_uint_eq(j->releases, 12);
    ck_assert_uint_eq(j->buries, 13);
    ck_assert_uint_eq(j->kicks, 14);
    ck_assert_uint_eq(j->state, BSI_DELAYED);
    /* strlen stops at the NUL: body "he" + "\r\n" */
    ck_assert_uint_eq(j->body_size, 4);
    ck_assert_mem_eq(j->body, "he\r\n", 4);
    ck_assert_uint_eq(r.max_id, 7);
    bsi_free(&r);
    free(b);
}
END_TEST

START_TEST(binary_body_kept_whole)
{
    BsiReader r;
    Bytes *b = calloc(1, sizeof *b);
    R x = rec(1, BSI_READY);
    unsigned char body[300];

    for (size_t i = 0; i < sizeof body; i++)
        body[i] = (unsigned char)(i * 7);
    body[298] = '\r';
    body[299] = '\n';
    x.size = sizeof body;
    start_file(b, 7);
    add32(b, 1);
    add(b, "q", 1);
    add_rec(b, &x, 0);
    add(b, body, sizeof body);
    bsi_init(&r);
    ck_assert_int_eq(read_bytes(&r, b), 0);
    ck_assert_uint_eq(job(&r, 1)->body_size, sizeof body);
    ck_assert_mem_eq(job(&r, 1)->body, body, sizeof body);
    bsi_free(&r);
    free(b);
}
END_TEST

START_TEST(state_records_update_and_delete)
{
    BsiReader r;
    Bytes *b = calloc(1, sizeof *b);
    R x = rec(1, BSI_READY), y = rec(2, BSI_READY), z = rec(3, BSI_READY);

    start_file(b, 7);
    full(b, "t", x, "one", 0);
    full(b, "t", y, "two", 0);
    full(b, "u", z, "three", 0);
    x.state = BSI_BURIED;
    x.pri = 5;
    x.ct[0] = 1;
    x.ct[3] = 1;
    shortrec(b, x, "one", 0);
    y.state = 0; /* deleted */
    shortrec(b, y, "two", 0);
    z.state = 2; /* reserved: comes back ready, as after beanstalkd's restart */
    z.ct[0] = 4;
    shortrec(b, z, "three", 0);
    bsi_init(&r);
    ck_assert_int_eq(read_bytes(&r, b), 0);
    ck_assert_uint_eq(r.nlive, 2);
    ck_assert_uint_eq(job(&r, 1)->state, BSI_BURIED);
    ck_assert_uint_eq(job(&r, 1)->pri, 5);
    ck_assert_uint_eq(job(&r, 1)->buries, 1);
    ck_assert_ptr_null(job(&r, 2));
    ck_assert_uint_eq(job(&r, 3)->state, BSI_READY);
    ck_assert_uint_eq(job(&r, 3)->reserves, 4);
    ck_assert_str_eq(tube_of_job(&r, job(&r, 3)), "u");
    ck_assert_uint_eq(r.ntubes, 2);
    ck_assert_uint_eq(r.max_id, 3);
    ck_assert_uint_eq(r.damaged, 0);
    bsi_free(&r);
    free(b);
}
END_TEST

/* A state record or delete whose job's full record was in a file
 * compaction removed: ignored (its job is dead), but its id was given. */
START_TEST(orphan_state_record_ignored)
{
    BsiReader r;
    Bytes *b = calloc(1, sizeof *b);
    R x = rec(40, BSI_BURIED), y = rec(41, 0);

    start_file(b, 7);
    shortrec(b, x, "gone", 0);
    shortrec(b, y, "gone", 0);
    x.state = 9; /* not even its state is looked at, as in beanstalkd */
    shortrec(b, x, "gone", 0);
    full(b, "t", rec(3, BSI_READY), "live", 0);
    bsi_init(&r);
    ck_assert_int_eq(read_bytes(&r, b), 0);
    ck_assert_uint_eq(r.nlive, 1);
    ck_assert_ptr_nonnull(job(&r, 3));
    ck_assert_uint_eq(r.max_id, 41);
    ck_assert_uint_eq(r.damaged, 0);
    bsi_free(&r);
    free(b);
}
END_TEST

/* Several files, oldest first: a job put in one, changed in the next,
 * moved forward by compaction (its full record again) in a third. */
START_TEST(several_files_and_compaction)
{
    BsiReader r;
    Bytes *b = calloc(1, sizeof *b);
    R x = rec(1, BSI_READY), y = rec(2, BSI_READY);

    bsi_init(&r);
    start_file(b, 7);
    full(b, "t", x, "first", 0);
    full(b, "t", y, "second", 0);
    ck_assert_int_eq(read_bytes(&r, b), 0);
    start_file(b, 7);
    x.state = BSI_DELAYED;
    x.ct[2] = 1;
    x.deadline = 1900000000000000000LL;
    shortrec(b, x, "first", 0);
    y.state = 0;
    shortrec(b, y, "second", 0);
    ck_assert_int_eq(read_bytes(&r, b), 0);
    start_file(b, 7);
    full(b, "t", x, "first", 0); /* moved */
    /* then zeros: the file was preallocated and beanstalkd was killed */
    memset(b->p + b->n, 0, 1000);
    b->n += 1000;
    ck_assert_int_eq(read_bytes(&r, b), 0);
    ck_assert_uint_eq(r.files, 3);
    ck_assert_uint_eq(r.nlive, 1);
    ck_assert_uint_eq(job(&r, 1)->state, BSI_DELAYED);
    ck_assert_uint_eq(job(&r, 1)->releases, 1);
    ck_assert_int_eq(job(&r, 1)->deadline_wall, 1900000000000000000LL);
    ck_assert_mem_eq(job(&r, 1)->body, "first\r\n", 7);
    ck_assert_uint_eq(r.damaged, 0);
    bsi_free(&r);
    free(b);
}
END_TEST

START_TEST(version5_records)
{
    BsiReader r;
    Bytes *b = calloc(1, sizeof *b);
    R x = rec(9, BSI_DELAYED), y = rec(10, BSI_READY);

    x.delay = 5000000000LL;
    x.ttr = 2000000000LL;
    x.created = 1300000000000000000LL;
    x.deadline = 1300000005000000000LL;
    start_file(b, 5);
    full(b, "old", x, "v5 body", 1);
    full(b, "old", y, "other", 1);
    y.state = BSI_BURIED;
    y.ct[3] = 1;
    shortrec(b, y, "other", 1);
    bsi_init(&r);
    ck_assert_int_eq(read_bytes(&r, b), 0);
    ck_assert_uint_eq(r.nlive, 2);
    ck_assert_int_eq(job(&r, 9)->delay_ns, 5000000000LL);
    ck_assert_int_eq(job(&r, 9)->ttr_ns, 2000000000LL);
    ck_assert_int_eq(job(&r, 9)->created_wall, 1300000000000000000LL);
    ck_assert_int_eq(job(&r, 9)->deadline_wall, 1300000005000000000LL);
    ck_assert_mem_eq(job(&r, 9)->body, "v5 body\r\n", 9);
    ck_assert_uint_eq(job(&r, 10)->state, BSI_BURIED);
    ck_assert_uint_eq(job(&r, 10)->buries, 1);
    ck_assert_uint_eq(r.damaged, 0);
    bsi_free(&r);
    free(b);
}
END_TEST

/* ---- not beanstalkd's, or nothing ------------------------------------- */

START_TEST(not_a_beanstalkd_binlog)
{
    BsiReader r;
    char err[256];
    static const unsigned char tubed[16] = "TUBEDLOG\2\0\0\0\0\0\0\0";
    static const unsigned char text[] = "this is text\n";
    static const unsigned char v6[] = {6, 0, 0, 0};

    bsi_init(&r);
    ck_assert_int_eq(bsi_read_file(&r, "f", tubed, sizeof tubed, err, sizeof err), -2);
    ck_assert_ptr_nonnull(strstr(err, "tubed's own binlog"));
    ck_assert_int_eq(bsi_read_file(&r, "f", text, sizeof text - 1, err, sizeof err), -2);
    ck_assert_ptr_nonnull(strstr(err, "not a beanstalkd binlog"));
    ck_assert_int_eq(bsi_read_file(&r, "f", v6, sizeof v6, err, sizeof err), -2);
    ck_assert_ptr_nonnull(strstr(err, "version 6"));
    ck_assert_uint_eq(r.files, 0);
    bsi_free(&r);
}
END_TEST

START_TEST(empty_and_zero_files_skipped)
{
    BsiReader r;
    char err[64];
    static const unsigned char zeros[4096];

    bsi_init(&r);
    ck_assert_int_eq(bsi_read_file(&r, "f", zeros, 0, err, sizeof err), 0);
    ck_assert_int_eq(bsi_read_file(&r, "f", zeros, 3, err, sizeof err), 0);
    ck_assert_int_eq(bsi_read_file(&r, "f", zeros, sizeof zeros, err, sizeof err), 0);
    ck_assert_uint_eq(r.files, 0);
    ck_assert_uint_eq(r.nlive, 0);
    ck_assert_uint_eq(r.damaged, 0);
    /* Shorter than the version word, not zeros: damage, skipped. */
    ck_assert_int_eq(bsi_read_file(&r, "f", (const unsigned char *)"\7\0\0", 3, err,
                                   sizeof err), 0);
    ck_assert_uint_eq(r.damaged, 1);
    ck_assert_uint_eq(r.files, 0);
    bsi_free(&r);
}
END_TEST

/* ---- damage ------------------------------------------------------------- */

/* Two good jobs, then the damage built by `bad`, then a job that must not
 * come (the file ends at the damage). */
static void damaged_file(Bytes *b, void (*bad)(Bytes *))
{
    start_file(b, 7);
    full(b, "t", rec(1, BSI_READY), "one", 0);
    full(b, "t", rec(2, BSI_READY), "two", 0);
    bad(b);
    full(b, "t", rec(99, BSI_READY), "after", 0);
}

static void bad_namelen_negative(Bytes *b) { add32(b, (uint32_t)-1); }
static void bad_namelen_big(Bytes *b) { add32(b, 201); }
static void bad_state_of_live(Bytes *b)
{
    R x = rec(2, 7);
    shortrec(b, x, "two", 0);
}
static void bad_size_of_live(Bytes *b)
{
    R x = rec(2, BSI_BURIED);
    shortrec(b, x, "two and more", 0);
}
static void bad_tube_name(Bytes *b) { full(b, "-bad", rec(3, BSI_READY), "x", 0); }
static void bad_body_end(Bytes *b)
{
    R x = rec(3, BSI_READY);
    x.size = 3;
    add32(b, 1);
    add(b, "t", 1);
    add_rec(b, &x, 0);
    add(b, "abc", 3);
}
static void bad_body_size(Bytes *b)
{
    R x = rec(3, BSI_READY);
    x.size = -5;
    add32(b, 1);
    add(b, "t", 1);
    add_rec(b, &x, 0);
}
static void bad_id0_then_data(Bytes *b)
{
    R x = rec(0, BSI_READY);
    shortrec(b, x, "", 0);
}

START_TEST(damage_ends_the_file)
{
    static void (*const bads[])(Bytes *) = {
        bad_namelen_negative, bad_namelen_big, bad_state_of_live, bad_size_of_live,
        bad_tube_name, bad_body_end, bad_body_size, bad_id0_then_data,
    };
    /* beanstalkd drops job 2 with a bad record of its own (states, size) */
    static const int two_dropped[] = {0, 0, 1, 1, 0, 0, 0, 0};
    Bytes *b = calloc(1, sizeof *b);

    for (size_t i = 0; i < sizeof bads / sizeof bads[0]; i++) {
        BsiReader r;
        bsi_init(&r);
        damaged_file(b, bads[i]);
        ck_assert_int_eq(read_bytes(&r, b), 0);
        ck_assert_msg(r.damaged == 1, "case %zu: damaged %u", i, r.damaged);
        ck_assert_msg(job(&r, 1) != NULL, "case %zu: job 1 kept", i);
        ck_assert_msg((job(&r, 2) == NULL) == two_dropped[i], "case %zu: job 2", i);
        ck_assert_msg(job(&r, 99) == NULL, "case %zu: nothing after the damage", i);
        ck_assert_msg(job(&r, 3) == NULL, "case %zu: the damaged job", i);
        bsi_free(&r);
    }
    free(b);
}
END_TEST

/* Cut at every byte: the jobs whose records are whole come, nothing else,
 * and a cut anywhere but between records is reported. */
START_TEST(truncated_at_every_byte)
{
    Bytes *b = calloc(1, sizeof *b);
    size_t ends[4];
    R x = rec(1, BSI_READY);

    start_file(b, 7);
    full(b, "tube", x, "first body", 0);
    ends[0] = b->n;
    full(b, "tube", rec(2, BSI_READY), "second", 0);
    ends[1] = b->n;
    x.state = BSI_BURIED;
    shortrec(b, x, "first body", 0);
    ends[2] = b->n;
    full(b, "t2", rec(3, BSI_READY), "third", 0);
    ends[3] = b->n;
    for (size_t cut = 4; cut <= b->n; cut++) {
        BsiReader r;
        size_t whole = 0, last = 4;
        int boundary = 1;
        char err[64];

        for (int k = 0; k < 4; k++)
            if (ends[k] <= cut) {
                whole = (size_t)k + 1;
                last = ends[k];
            }
        /* Only zeros past the last whole record read as beanstalkd's
         * preallocated end (a state record starts with four of them). */
        for (size_t i = last; i < cut; i++)
            if (b->p[i])
                boundary = 0;
        bsi_init(&r);
        ck_assert_int_eq(bsi_read_file(&r, "cut", b->p, cut, err, sizeof err), 0);
        ck_assert_msg(r.damaged == !boundary, "cut %zu: damaged %u", cut, r.damaged);
        ck_assert_msg((job(&r, 1) != NULL) == (whole >= 1), "cut %zu: job 1", cut);
        ck_assert_msg((job(&r, 2) != NULL) == (whole >= 2), "cut %zu: job 2", cut);
        ck_assert_msg((job(&r, 3) != NULL) == (whole >= 4), "cut %zu: job 3", cut);
        if (job(&r, 1))
            ck_assert_uint_eq(job(&r, 1)->state, whole >= 3 ? BSI_BURIED : BSI_READY);
        bsi_free(&r);
    }
    free(b);
}
END_TEST

/* Random bytes after a good header: never a crash, a read past the end, a
 * leak (under ASan), or a live job that is not whole. */
START_TEST(random_bytes)
{
    Rng rng;
    Bytes *b = calloc(1, sizeof *b);

    rng_seed(&rng, 42);
    for (int round = 0; round < 2000; round++) {
        BsiReader r;
        char err[128];
        size_t n = 4 + rng_below(&rng, 600);
        unsigned char *p;

        start_file(b, rng_below(&rng, 2) ? 7 : 5);
        full(b, "t", rec(1, BSI_READY), "x", b->p[0] == 5);
        while (b->n < n)
            b->p[b->n++] = (unsigned char)(rng_below(&rng, 4) ? rng_below(&rng, 8) : rng_next(&rng));
        p = malloc(b->n);
        memcpy(p, b->p, b->n);
        bsi_init(&r);
        ck_assert_int_eq(bsi_read_file(&r, "rnd", p, b->n, err, sizeof err), 0);
        for (size_t i = 0; i < r.njobs; i++) {
            const BsiJob *j = &r.jobs[i];
            if (!j->id)
                continue;
            REQUIRE(j->body_size >= 2 && j->body[j->body_size - 2] == '\r');
            REQUIRE(j->state == BSI_READY || j->state == BSI_BURIED ||
                    j->state == BSI_DELAYED);
        }
        bsi_free(&r);
        free(p);
    }
    free(b);
}
END_TEST

START_TEST(allocation_failure_at_every_step)
{
    Bytes *b = calloc(1, sizeof *b);
    int done = 0;

    start_file(b, 7);
    for (int i = 0; i < 200; i++) {
        char tube[8];
        snprintf(tube, sizeof tube, "t%d", i % 40);
        full(b, tube, rec((uint64_t)i + 1, BSI_READY), "body", 0);
    }
    for (int k = 1; !done; k++) {
        BsiReader r;
        char err[64];
        int rc;

        bsi_init(&r);
        alloc_fail_after(k);
        rc = bsi_read_file(&r, "oom", b->p, b->n, err, sizeof err);
        alloc_fail_after(0);
        ck_assert(rc == 0 || rc == -1);
        if (rc == 0) {
            ck_assert_uint_eq(r.nlive, 200);
            ck_assert_uint_eq(r.ntubes, 40);
            done = 1;
        }
        bsi_free(&r);
        ck_assert_int_lt(k, 10000);
    }
    free(b);
}
END_TEST

/* ---- the directory and the lock ----------------------------------------- */

static void write_file(const char *dir, const char *name, const Bytes *b)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", dir, name);
    f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(b->p, 1, b->n, f), b->n);
    fclose(f);
    ck_assert_int_eq(chmod(path, 0400), 0);
}

START_TEST(lock_held_by_another_process)
{
    char dir[] = "/tmp/bsi-lock-XXXXXX", path[256];
    int ready[2], go[2];
    pid_t pid;
    char c;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_assert_int_eq(bsi_lock_holder(dir), 0); /* no lock file: none */
    snprintf(path, sizeof path, "%s/lock", dir);
    ck_assert_int_eq(pipe(ready), 0);
    ck_assert_int_eq(pipe(go), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        /* As beanstalkd locks: open O_WRONLY|O_CREAT, F_SETLK F_WRLCK. */
        struct flock lk = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
        int fd = open(path, O_WRONLY | O_CREAT, 0600);
        if (fd < 0 || fcntl(fd, F_SETLK, &lk) < 0)
            _exit(1);
        if (write(ready[1], "x", 1) != 1 || read(go[0], &c, 1) != 1)
            _exit(1);
        _exit(0);
    }
    ck_assert_int_eq(read(ready[0], &c, 1), 1);
    ck_assert_int_eq(bsi_lock_holder(dir), pid);
    {
        BsiReader r;
        char err[512];
        bsi_init(&r);
        ck_assert_int_eq(bsi_read_dir(&r, dir, err, sizeof err), -1);
        ck_assert_ptr_nonnull(strstr(err, "still runs"));
        bsi_free(&r);
    }
    ck_assert_int_eq(write(go[1], "x", 1), 1);
    ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
    ck_assert_int_eq(bsi_lock_holder(dir), 0); /* released with its process */
    unlink(path);
    rmdir(dir);
    close(ready[0]);
    close(ready[1]);
    close(go[0]);
    close(go[1]);
}
END_TEST

START_TEST(directory_read_only)
{
    char dir[] = "/tmp/bsi-dir-XXXXXX", path[256];
    Bytes *b = calloc(1, sizeof *b);
    R x = rec(5, BSI_READY);
    struct stat before[2], after[2];
    BsiReader r;
    char err[512];

    ck_assert_ptr_nonnull(mkdtemp(dir));
    bsi_init(&r);
    ck_assert_int_eq(bsi_read_dir(&r, dir, err, sizeof err), -1);
    ck_assert_ptr_nonnull(strstr(err, "no binlog.N"));
    start_file(b, 7);
    full(b, "t", x, "five", 0);
    write_file(dir, "binlog.3", b);
    start_file(b, 7);
    x.state = BSI_BURIED;
    shortrec(b, x, "five", 0);
    write_file(dir, "binlog.5", b); /* binlog.4 missing: said, and gone on */
    write_file(dir, "binlog.x", b); /* not beanstalkd's name: not read */
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/binlog.%d", dir, 3 + 2 * i);
        ck_assert_int_eq(stat(path, &before[i]), 0);
    }
    ck_assert_int_eq(bsi_read_dir(&r, dir, err, sizeof err), 0);
    ck_assert_uint_eq(r.files, 2);
    ck_assert_uint_eq(job(&r, 5)->state, BSI_BURIED);
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/binlog.%d", dir, 3 + 2 * i);
        ck_assert_int_eq(stat(path, &after[i]), 0);
        ck_assert_int_eq(after[i].st_size, before[i].st_size);
        ck_assert_int_eq(after[i].st_mtim.tv_nsec, before[i].st_mtim.tv_nsec);
        ck_assert_int_eq(after[i].st_mode, before[i].st_mode);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/binlog.x", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/lock", dir);
    ck_assert_int_ne(access(path, F_OK), 0); /* no lock file made */
    rmdir(dir);
    bsi_free(&r);
    free(b);
}
END_TEST

static Suite *bsimport_suite(void)
{
    Suite *s = suite_create("bsimport");
    TCase *rc = unit_tcase("records");
    TCase *dm = unit_tcase("damage");
    TCase *fs = unit_tcase("files");

    tcase_add_test(rc, full_record_every_field);
    tcase_add_test(rc, binary_body_kept_whole);
    tcase_add_test(rc, state_records_update_and_delete);
    tcase_add_test(rc, orphan_state_record_ignored);
    tcase_add_test(rc, several_files_and_compaction);
    tcase_add_test(rc, version5_records);
    suite_add_tcase(s, rc);

    tcase_add_test(dm, not_a_beanstalkd_binlog);
    tcase_add_test(dm, empty_and_zero_files_skipped);
    tcase_add_test(dm, damage_ends_the_file);
    tcase_add_test(dm, truncated_at_every_byte);
    tcase_add_test(dm, random_bytes);
    tcase_add_test(dm, allocation_failure_at_every_step);
    suite_add_tcase(s, dm);

    tcase_add_test(fs, lock_held_by_another_process);
    tcase_add_test(fs, directory_read_only);
    suite_add_tcase(s, fs);
    return s;
}

UNIT_MAIN(bsimport_suite)
