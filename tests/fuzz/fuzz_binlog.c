/*
 * fuzz_binlog.c — the binlog decoder and the whole replay on arbitrary
 * files.
 *
 * 1. bl_check_header() and bl_decode() walk the input as a file would be
 *    walked (after the header, record by record), then bl_decode() runs at
 *    every offset. A decoded record must lie inside the bytes given, its
 *    pointers inside the record, its sizes consistent (bl_record_size() of
 *    what was decoded is the length returned, and encoding it again gives
 *    the same bytes).
 * 2. Replay: the input becomes one or more files DIR/binlog.N in a tmpfs
 *    directory, and binlog_open() runs on a fresh Server with --recover off
 *    or on. When it succeeds, the server's counters must be consistent
 *    (fuzz_util.h), one loop tick runs, the server is freed, and the
 *    directory is opened again with the same --recover: a server must
 *    always restart from what it left, with the same jobs.
 *
 * Input format (README.md): byte 0 is flags, the rest the file bytes.
 *   bit 0   --recover
 *   bit 1   repair checksums first: the header CRC and, walking the
 *           records by their length fields, every record's CRC (so the
 *           fuzzer reaches the payload checks behind the checksum)
 *   bit 2   split the bytes into several files at each "--FILE--"
 *   bit 3   number the files with a gap (binlog.1, binlog.3, ...)
 *   bit 4   small max job size (file size 4096 + 100)
 * With flags 0 the rest is exactly binlog.1.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "binlog.h"
#include "blcodec.h"
#include "clock.h"
#include "crc32c.h"
#include "fuzz_util.h"
#include "log.h"
#include "opts.h"
#include "serve.h"

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void wr32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

/* ---- 1: the codec ----------------------------------------------------- */

static void check_record(const char *p, size_t n, long len, const BlRecord *r)
{
    size_t rs;
    char *again;

    FZ_CHECK(len >= BL_REC_HEAD + 9 && (size_t)len <= n, "decoded length %ld of %zu", len, n);
    FZ_CHECK(r->type == BL_JOB || r->type == BL_STATE || r->type == BL_DELETE,
             "decoded type %d", r->type);
    if (r->type == BL_JOB) {
        FZ_CHECK(r->tube >= p && r->tube + r->tube_len <= p + len, "tube outside record");
        FZ_CHECK(r->body >= p && r->body + r->body_size <= p + len, "body outside record");
    }
    rs = bl_record_size(r);
    FZ_CHECK(rs == (size_t)len, "bl_record_size %zu, decoded %ld", rs, len);
    again = malloc(rs);
    bl_encode(r, again);
    FZ_CHECK(!memcmp(again, p, rs), "re-encoding differs");
    free(again);
}

static void fuzz_codec(const char *p, size_t n)
{
    BlRecord r;
    size_t off;
    int h = bl_check_header(p, n);

    FZ_CHECK(h >= -1 && h <= 1, "bl_check_header %d", h);
    if (h == 0) {
        char hdr[BL_HEADER_SIZE];
        bl_encode_header(hdr);
        /* Ours, or the same of an older version that still replays. */
        FZ_CHECK(!memcmp(hdr, p, 8) && p[9] == 0 && p[10] == 0 && p[11] == 0 &&
                     p[8] >= BL_VERSION_MIN && p[8] <= BL_VERSION,
                 "valid header differs from ours");
    }
    off = h == 0 ? BL_HEADER_SIZE : 0;
    while (off < n) {
        long len = bl_decode(p + off, n - off, &r);
        if (len <= 0) {
            FZ_CHECK(len == BL_END || len == BL_TORN || len == BL_CORRUPT, "bl_decode %ld", len);
            break;
        }
        check_record(p + off, n - off, len, &r);
        off += (size_t)len;
    }
    /* Every offset, as --recover's resync does. */
    for (off = 0; off < n && off < 4096; off++) {
        long len = bl_decode(p + off, n - off, &r);
        if (len > 0)
            check_record(p + off, n - off, len, &r);
    }
}

/* ---- 2: replay -------------------------------------------------------- */

static void repair(uint8_t *p, size_t n)
{
    size_t off = BL_HEADER_SIZE;

    if (n >= BL_HEADER_SIZE && !memcmp(p, BL_MAGIC, 8))
        wr32(p + 12, crc32c(0, p, 12));
    while (off + BL_REC_HEAD <= n) {
        uint32_t len = rd32(p + off);
        if (len == 0 || len > n - off - BL_REC_HEAD)
            break;
        wr32(p + off + 4, crc32c(0, p + off + BL_REC_HEAD, len));
        off += BL_REC_HEAD + len;
    }
}

static void write_file(const char *dir, unsigned index, const uint8_t *p, size_t n)
{
    char path[512];
    int fd;

    snprintf(path, sizeof path, "%s/binlog.%u", dir, index);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
    if (fd < 0)
        fz_fail("open %s: %s", path, strerror(errno));
    if (n && write(fd, p, n) != (ssize_t)n)
        fz_fail("write %s", path);
    close(fd);
}

/* What a replay produced, to compare two of them. */
typedef struct {
    uint64_t id;
    uint32_t pri, ttr, body_size, body_crc;
    uint8_t state;
    char tube[256];
} JobSum;

typedef struct {
    JobSum *v;
    size_t n;
} Sums;

static void sum_job(HashNode *hn, void *arg)
{
    Sums *s = arg;
    const Job *j = container_of(hn, Job, hnode);
    JobSum *o = &s->v[s->n++];

    o->id = j->id;
    o->pri = j->pri;
    o->ttr = j->ttr;
    o->body_size = j->body_size;
    o->body_crc = crc32c(0, j->body, j->body_size);
    o->state = j->state;
    snprintf(o->tube, sizeof o->tube, "%.*s", (int)j->tube->name_len, j->tube->name);
}

static int cmp_sum(const void *a, const void *b)
{
    const JobSum *x = a, *y = b;

    return x->id < y->id ? -1 : x->id > y->id;
}

static Sums summarise(const Server *s)
{
    Sums r = {calloc(s->eng.jobs.len + 1, sizeof(JobSum)), 0};

    hash_each(&s->eng.jobs, sum_job, &r);
    qsort(r.v, r.n, sizeof *r.v, cmp_sum);
    return r;
}

/* binlog_open() failed: its replayed jobs were never placed in their
 * tubes, so server_free() (which deletes jobs through their containers)
 * must not see them. main() exits without freeing in this case. */
static void forget_unplaced(Server *s)
{
    while (s->eng.jobs.len) {
        Job *j = NULL;
        Tube *t;
        for (size_t b = 0; b < s->eng.jobs.nbuckets && !j; b++)
            if (s->eng.jobs.buckets[b])
                j = container_of(s->eng.jobs.buckets[b], Job, hnode);
        t = j->tube;
        job_table_remove(&s->eng.jobs, j);
        job_free(j);
        tube_unref(&s->eng.tubes, t);
    }
}

static int open_server(Server *s, const Config *cfg, char *err, size_t errlen)
{
    fz_save_signals();
    if (server_init(s, cfg) < 0)
        fz_fail("server_init failed");
    fz_restore_signals();
    return binlog_open(&s->eng, err, errlen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static Server srv;
    Server *s = &srv;
    const char *dir = fz_tmpdir();
    uint8_t flags, *buf;
    size_t n;
    Config cfg;
    char err[512];
    unsigned index = 1;
    Sums first;
    int rc;

    if (size < 1)
        return 0;
    flags = data[0];
    n = size - 1;
    buf = malloc(n ? n : 1);
    memcpy(buf, data + 1, n);

    fuzz_codec((const char *)buf, n);

    /* The files. */
    fz_clear_dir(dir);
    {
        const uint8_t *p = buf, *end = buf + n;
        for (;;) {
            const uint8_t *q = (flags & 4) ? memmem(p, (size_t)(end - p), "--FILE--", 8) : NULL;
            size_t len = q ? (size_t)(q - p) : (size_t)(end - p);
            if (flags & 2)
                repair((uint8_t *)p, len);
            write_file(dir, index, p, len);
            index += (flags & 8) ? 2 : 1;
            if (!q || index > 20)
                break;
            p = q + 8;
        }
    }

    opts_defaults(&cfg);
    cfg.listen_addr = "127.0.0.1";
    cfg.port = 0;
    cfg.binlog_dir = dir;
    cfg.binlog_size = 0;
    cfg.fsync_never = 1;
    cfg.recover = flags & 1;
    if (flags & 0x10)
        cfg.max_job_size = 100;
    log_verbosity = 0;

    rc = open_server(s, &cfg, err, sizeof err);
    if (rc < 0) {
        forget_unplaced(s);
        server_free(s);
        free(buf);
        return 0;
    }
    fz_check_server(s);
    first = summarise(s);
    /* One loop iteration's timer work (drops files with nothing live). */
    s->eng.now = clock_mono();
    binlog_tick(&s->eng);
    fz_check_server(s);
    server_free(s);

    /* It must come back with the same jobs. */
    rc = open_server(s, &cfg, err, sizeof err);
    if (rc < 0)
        fz_fail("replay succeeded, but the restart from its own files fails: %s", err);
    fz_check_server(s);
    {
        Sums second = summarise(s);
        FZ_CHECK(second.n == first.n, "restart: %zu jobs, first replay %zu", second.n, first.n);
        for (size_t i = 0; i < first.n; i++) {
            const JobSum *a = &first.v[i], *b = &second.v[i];
            FZ_CHECK(a->id == b->id && a->pri == b->pri && a->ttr == b->ttr &&
                     a->body_size == b->body_size && a->body_crc == b->body_crc &&
                     a->state == b->state && !strcmp(a->tube, b->tube),
                     "restart: job %llu differs", (unsigned long long)a->id);
        }
        free(second.v);
    }
    server_free(s);
    free(first.v);
    free(buf);
    return 0;
}
