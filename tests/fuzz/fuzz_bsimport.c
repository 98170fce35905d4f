/*
 * fuzz_bsimport.c — --import-beanstalkd (bsimport.h) on arbitrary files.
 *
 * 1. The reader alone: bsi_read_file() over the input as one file, then as
 *    the files below one after another. It must return 0 or -2 (never
 *    crash, read past the bytes, leak), and what it keeps must be whole:
 *    each live job's id unique and at most max_id, its state one of the
 *    three, its tube a legal name, its body ending in "\r\n".
 * 2. The import: the input becomes files BS/binlog.N, and a fresh Server
 *    with -b TB (empty) opens its binlog with import_dir = BS, as main()
 *    does. When that succeeds the server's counters must be consistent
 *    (fuzz_util.h), its jobs those the reader kept (same ids, tubes,
 *    states, bodies), the next id above max_id. Then the server is freed
 *    and started again twice on TB: without the flag (its own replay) and
 *    with it (the import is not done again): the same jobs both times.
 *    BS must be byte for byte what was written.
 *
 * Input: byte 0 is flags, the rest the file bytes.
 *   bit 0   split the bytes into several files at each "--FILE--"
 *   bit 1   number the files with a gap (binlog.1, binlog.3, ...)
 *   bit 2   the first file starts with beanstalkd's version 7 word (the
 *           fuzzer need not find it); bit 3: version 5
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bsimport.h"
#include "crc32c.h"
#include "fuzz_util.h"
#include "log.h"
#include "names.h"
#include "opts.h"
#include "serve.h"

static char bs_dir[300], tb_dir[300];

static void remove_dirs(void)
{
    fz_clear_dir(bs_dir);
    rmdir(bs_dir);
    fz_clear_dir(tb_dir);
    rmdir(tb_dir);
}

static void make_dirs(void)
{
    if (bs_dir[0])
        return;
    snprintf(bs_dir, sizeof bs_dir, "%s/bs", fz_tmpdir());
    snprintf(tb_dir, sizeof tb_dir, "%s/tb", fz_tmpdir());
    if (mkdir(bs_dir, 0700) < 0 || mkdir(tb_dir, 0700) < 0)
        fz_fail("mkdir: %s", strerror(errno));
    atexit(remove_dirs); /* before fz_tmpdir()'s own: atexit runs LIFO */
}

/* ---- 1: the reader -------------------------------------------------------- */

static void check_reader(const BsiReader *r)
{
    size_t live = 0;

    for (size_t i = 0; i < r->njobs; i++) {
        const BsiJob *j = &r->jobs[i];
        if (!j->id)
            continue;
        live++;
        FZ_CHECK(j->id <= r->max_id, "job %llu above max_id %llu",
                 (unsigned long long)j->id, (unsigned long long)r->max_id);
        FZ_CHECK(j->state == BSI_READY || j->state == BSI_BURIED || j->state == BSI_DELAYED,
                 "job %llu state %u", (unsigned long long)j->id, j->state);
        FZ_CHECK(j->tube < r->ntubes, "tube index");
        FZ_CHECK(tube_name_valid(r->tubes[j->tube].name, r->tubes[j->tube].len),
                 "an illegal tube name kept");
        FZ_CHECK(j->body_size >= 2 && j->body[j->body_size - 2] == '\r' &&
                     j->body[j->body_size - 1] == '\n', "a body without its \\r\\n kept");
        for (size_t k = i + 1; k < r->njobs; k++)
            FZ_CHECK(r->jobs[k].id != j->id, "job %llu twice", (unsigned long long)j->id);
    }
    FZ_CHECK(live == r->nlive, "nlive %zu, %zu live", r->nlive, live);
}

typedef struct Files {
    const uint8_t *p[20];
    size_t n[20];
    unsigned index[20];
    int count;
} Files;

static void split(const uint8_t *buf, size_t n, uint8_t flags, Files *f)
{
    const uint8_t *p = buf, *end = buf + n;
    unsigned index = 1;

    f->count = 0;
    for (;;) {
        const uint8_t *q = (flags & 1) ? memmem(p, (size_t)(end - p), "--FILE--", 8) : NULL;
        f->p[f->count] = p;
        f->n[f->count] = q ? (size_t)(q - p) : (size_t)(end - p);
        f->index[f->count++] = index;
        index += (flags & 2) ? 2 : 1;
        if (!q || f->count == 20)
            break;
        p = q + 8;
    }
}

/* The reader over the files in order; rc as bsi_read_file's, the first
 * failure. */
static int read_all(const Files *f, BsiReader *r)
{
    char err[256];

    for (int i = 0; i < f->count; i++) {
        int rc = bsi_read_file(r, "fuzz", f->p[i], f->n[i], err, sizeof err);
        FZ_CHECK(rc == 0 || rc == -2, "bsi_read_file %d", rc);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- 2: the import ---------------------------------------------------------- */

static uint32_t files_crc(const Files *f)
{
    uint32_t c = 0;

    for (int i = 0; i < f->count; i++) {
        char path[512];
        uint8_t *got = malloc(f->n[i] + 1);
        int fd;
        ssize_t n;

        snprintf(path, sizeof path, "%s/binlog.%u", bs_dir, f->index[i]);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        FZ_CHECK(fd >= 0, "%s gone", path);
        n = read(fd, got, f->n[i] + 1);
        close(fd);
        FZ_CHECK(n == (ssize_t)f->n[i] && !memcmp(got, f->p[i], f->n[i]),
                 "%s changed by the import", path);
        c = crc32c(c, got, f->n[i]);
        free(got);
    }
    return c;
}

static void write_files(const Files *f)
{
    fz_clear_dir(bs_dir);
    fz_clear_dir(tb_dir);
    for (int i = 0; i < f->count; i++) {
        char path[512];
        int fd;

        snprintf(path, sizeof path, "%s/binlog.%u", bs_dir, f->index[i]);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0400);
        if (fd < 0)
            fz_fail("open %s: %s", path, strerror(errno));
        if (f->n[i] && write(fd, f->p[i], f->n[i]) != (ssize_t)f->n[i])
            fz_fail("write %s", path);
        close(fd);
    }
}

static int open_server(Server *s, const Config *cfg, char *err, size_t errlen)
{
    fz_save_signals();
    if (server_init(s, cfg) < 0)
        fz_fail("server_init failed");
    fz_restore_signals();
    return engine_open_binlog(&s->eng, err, errlen);
}

/* Every job of s against the reader's. all_ids: the next id must be above
 * every id the reader saw, not only the live ones'. That holds after the
 * import and the first restart; from the second on, tubed keeps ids only
 * as far as the records still on disk show them (its own rule: an id mark
 * is not carried past a restart, so a file holding only the mark goes). */
static void compare(const Server *s, const BsiReader *r, const char *when, int all_ids)
{
    uint64_t top = 0;

    for (size_t i = 0; i < r->njobs; i++)
        if (r->jobs[i].id > top)
            top = r->jobs[i].id;
    FZ_CHECK(s->eng.jobs.len == r->nlive, "%s: %zu jobs, the reader kept %zu", when,
             s->eng.jobs.len, r->nlive);
    FZ_CHECK(s->eng.next_id > (all_ids ? r->max_id : top), "%s: next id %llu, max id %llu",
             when, (unsigned long long)s->eng.next_id,
             (unsigned long long)(all_ids ? r->max_id : top));
    for (size_t i = 0; i < r->njobs; i++) {
        const BsiJob *b = &r->jobs[i];
        const Job *j;
        if (!b->id)
            continue;
        j = job_table_find((Hash *)&s->eng.jobs, b->id);
        FZ_CHECK(j, "%s: job %llu missing", when, (unsigned long long)b->id);
        FZ_CHECK(j->tube->name_len == r->tubes[b->tube].len &&
                     !memcmp(j->tube->name, r->tubes[b->tube].name, j->tube->name_len),
                 "%s: job %llu in another tube", when, (unsigned long long)b->id);
        FZ_CHECK(j->body_size == b->body_size - 2 && !memcmp(job_body(j), b->body, j->body_size),
                 "%s: job %llu body", when, (unsigned long long)b->id);
        FZ_CHECK(j->pri == b->pri, "%s: job %llu pri", when, (unsigned long long)b->id);
        FZ_CHECK(b->state != BSI_BURIED || j->state == JOB_BURIED, "%s: job %llu not buried",
                 when, (unsigned long long)b->id);
        FZ_CHECK(b->state == BSI_BURIED || j->state != JOB_BURIED, "%s: job %llu buried",
                 when, (unsigned long long)b->id);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static Server srv;
    Server *s = &srv;
    uint8_t flags, *buf;
    size_t n;
    Files f;
    BsiReader r;
    Config cfg;
    char err[1024];
    uint32_t crc;
    int rc, rrc;

    if (size < 1)
        return 0;
    make_dirs();
    flags = data[0];
    n = size - 1 + ((flags & 12) ? 4 : 0);
    buf = malloc(n ? n : 1);
    if (flags & 12) {
        uint32_t v = (flags & 4) ? 7 : 5;
        memcpy(buf, &v, 4);
        memcpy(buf + 4, data + 1, size - 1);
    } else {
        memcpy(buf, data + 1, n);
    }
    log_verbosity = -1; /* (warnings still print: stderr is closed when fuzzing) */

    /* 1: the whole input as one file, then as the files. */
    bsi_init(&r);
    {
        char e[256];
        int one = bsi_read_file(&r, "fuzz", buf, n, e, sizeof e);
        FZ_CHECK(one == 0 || one == -2, "bsi_read_file %d", one);
        check_reader(&r);
        bsi_free(&r);
    }
    split(buf, n, flags, &f);
    bsi_init(&r);
    rrc = read_all(&f, &r);
    check_reader(&r);

    /* 2: the import into a fresh server. */
    write_files(&f);
    opts_defaults(&cfg);
    cfg.listen_addr = "127.0.0.1";
    cfg.port = 0;
    cfg.binlog_dir = tb_dir;
    cfg.binlog_size = 0;
    cfg.fsync_never = 1;
    cfg.import_dir = bs_dir;
    log_verbosity = 0;
    rc = open_server(s, &cfg, err, sizeof err);
    if (rrc < 0 || !r.files)
        FZ_CHECK(rc < 0, "the import succeeded where the reader refused");
    if (rc == 0) {
        char path[400];
        fz_check_server(s);
        compare(s, &r, "import", 1);
        snprintf(path, sizeof path, "%s/%s", tb_dir, BSI_PENDING);
        FZ_CHECK(access(path, F_OK) < 0, "%s left after a finished import", BSI_PENDING);
        snprintf(path, sizeof path, "%s/%s", tb_dir, BSI_MARKER);
        FZ_CHECK(access(path, F_OK) == 0, "no %s after an import", BSI_MARKER);
    }
    server_free(s);
    crc = files_crc(&f);
    if (rc == 0) {
        /* Its own replay, then the flag again: the same jobs. */
        cfg.import_dir = NULL;
        if (open_server(s, &cfg, err, sizeof err) < 0)
            fz_fail("the restart after an import fails: %s", err);
        fz_check_server(s);
        compare(s, &r, "restart", 1);
        server_free(s);
        cfg.import_dir = bs_dir;
        if (open_server(s, &cfg, err, sizeof err) < 0)
            fz_fail("the restart with the flag again fails: %s", err);
        fz_check_server(s);
        compare(s, &r, "restart with the flag", 0);
        server_free(s);
        FZ_CHECK(files_crc(&f) == crc, "beanstalkd's files changed");
    }
    bsi_free(&r);
    free(buf);
    return 0;
}
