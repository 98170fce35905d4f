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
 * 3. Read-behind (flag bits 5, 6): the same files are first replayed into
 *    a reference server without a config file, then into one whose tubes
 *    have a max_memory_size, so they come back with their bodies on disk
 *    only (spill.h). Both replays must succeed or fail alike and give the
 *    same jobs; a job on disk only must be on disk only exactly when its
 *    tube has a budget, and its record, read by the harness at the offset
 *    the job keeps, must be that job's, with the reference's body. The
 *    reader thread's read-ahead then runs to its end (no error, bodies
 *    right, counters right), spill_load() brings back half of the rest
 *    byte for byte, and the restart must bring back the same jobs again.
 *    With bit 7 one record of a job on disk only is damaged on disk first
 *    (a byte flipped where the input's checksum says): spill_load() must
 *    say -2, count the error and leave the job as it was; once the byte is
 *    put back it loads.
 *
 * Input format (README.md): byte 0 is flags, the rest the file bytes.
 *   bit 0   --recover
 *   bit 1   repair checksums first: the header CRC and, walking the
 *           records by their length fields, every record's CRC (so the
 *           fuzzer reaches the payload checks behind the checksum)
 *   bit 2   split the bytes into several files at each "--FILE--"
 *   bit 3   number the files with a gap (binlog.1, binlog.3, ...)
 *   bit 4   small max job size (file size 4096 + 100)
 *   bit 5   read-behind: max_memory_size 64 for every tube but default
 *           and d* (no limit) and b* (1 KiB)
 *   bit 6   read-behind: max_memory_size 1 for every tube (all on disk)
 *   bit 7   with bit 5 or 6: damage one spilled record, then repair it
 * With flags 0 the rest is exactly binlog.1.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "binlog.h"
#include "blcodec.h"
#include "blfile.h"
#include "clock.h"
#include "conf.h"
#include "crc32c.h"
#include "fuzz_util.h"
#include "log.h"
#include "opts.h"
#include "serve.h"
#include "spill.h"

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
    FZ_CHECK(r->type == BL_JOB || r->type == BL_JOBX || r->type == BL_STATE ||
                 r->type == BL_DELETE || r->type == BL_FLUSH || r->type == BL_POS ||
                 r->type == BL_SNAP_END || r->type == BL_CHILD,
             "decoded type %d", r->type);
    if (r->type == BL_CHILD) {
        FZ_CHECK(r->tube >= p && r->tube + r->tube_len <= p + len, "child outside record");
        FZ_CHECK(r->flags <= BL_CHILD_ON && r->id == 0 && r->tube_len > 0 &&
                     memchr(r->tube, '+', r->tube_len) > (const void *)r->tube,
                 "a child record the server could never write decoded");
    }
    if (r->type == BL_JOB || r->type == BL_JOBX) {
        FZ_CHECK(r->tube >= p && r->tube + r->tube_len <= p + len, "tube outside record");
        FZ_CHECK(r->body >= p && r->body + r->body_size <= p + len, "body outside record");
    }
    if (r->type == BL_FLUSH) {
        FZ_CHECK(r->tube >= p && r->tube + r->tube_len <= p + len, "tube outside record");
        FZ_CHECK(r->keep >= p && r->keep + (size_t)r->nkeep * 8 <= p + len,
                 "kept ids outside record");
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
    const char *dir;
    uint64_t children;     /* registered fanout children (BL_CHILD) */
    uint32_t children_crc; /* xor of their names' crc32c */
} Sums;

/* The body of a job on disk only, as the harness reads it: the whole file,
 * and the record at the job's offset, which must be a job record of that
 * job. Returns the crc of its body. */
static uint32_t read_spilled(const char *dir, const Job *j)
{
    char path[512];
    FILE *f;
    long n;
    char *p;
    BlRecord r;
    uint64_t off = job_spill_off(j);
    long len;
    uint32_t crc;

    snprintf(path, sizeof path, "%s/binlog.%u", dir, j->file);
    f = fopen(path, "rb");
    FZ_CHECK(f, "job %llu on disk only in binlog.%u, which cannot be opened",
             (unsigned long long)j->id, j->file);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    p = malloc((size_t)n + 1);
    FZ_CHECK(p && fread(p, 1, (size_t)n, f) == (size_t)n, "read %s", path);
    fclose(f);
    FZ_CHECK(off >= BL_HEADER_SIZE && off < (uint64_t)n, "job %llu: offset %llu outside "
             "binlog.%u (%ld bytes)", (unsigned long long)j->id, (unsigned long long)off,
             j->file, n);
    len = bl_decode(p + off, (size_t)n - off, &r);
    FZ_CHECK(len > 0 && (r.type == BL_JOB || r.type == BL_JOBX) && r.id == j->id &&
                 r.body_size == j->body_size,
             "job %llu: no record of it at binlog.%u offset %llu (decode %ld, type %c, "
             "id %llu)", (unsigned long long)j->id, j->file, (unsigned long long)off, len,
             len > 0 ? r.type : '-', len > 0 ? (unsigned long long)r.id : 0ULL);
    FZ_CHECK((uint64_t)len <= bl_job_record_size(j) + BL_JOBX_EXTRA,
             "job %llu: record of %ld bytes, the read-back asks for %zu",
             (unsigned long long)j->id, len, bl_job_record_size(j) + BL_JOBX_EXTRA);
    crc = crc32c(0, r.body, r.body_size);
    free(p);
    return crc;
}

static void sum_job(HashNode *hn, void *arg)
{
    Sums *s = arg;
    const Job *j = container_of(hn, Job, hnode);
    JobSum *o = &s->v[s->n++];

    o->id = j->id;
    o->pri = j->pri;
    o->ttr = j->ttr;
    o->body_size = j->body_size;
    o->body_crc = job_body(j) ? crc32c(0, job_body(j), j->body_size) : read_spilled(s->dir, j);
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
    Sums r = {calloc(s->eng.jobs.len + 1, sizeof(JobSum)), 0, s->cfg.binlog_dir, 0, 0};

    hash_each(&s->eng.jobs, sum_job, &r);
    qsort(r.v, r.n, sizeof *r.v, cmp_sum);
    for (size_t i = 0; i < s->eng.tubes.len; i++) {
        const Tube *t = s->eng.tubes.list[i];
        /* A registered child's record keeps a file of the list live. */
        FZ_CHECK(!t->registered == !t->child_file, "tube %.*s: registered %d, record in "
                 "binlog.%u", (int)t->name_len, t->name, t->registered, t->child_file);
        FZ_CHECK(!t->child_file || bl_file_of((Binlog *)&s->eng.binlog, t->child_file),
                 "child %.*s: its record's binlog.%u is not in the list", (int)t->name_len,
                 t->name, t->child_file);
        if (t->registered) {
            r.children++;
            r.children_crc ^= crc32c(0, t->name, t->name_len);
        }
    }
    return r;
}

static void compare(const Sums *a, const Sums *b, const char *what)
{
    FZ_CHECK(a->n == b->n, "%s: %zu jobs, against %zu", what, b->n, a->n);
    FZ_CHECK(a->children == b->children && a->children_crc == b->children_crc,
             "%s: %llu fanout children, against %llu (or other names)", what,
             (unsigned long long)b->children, (unsigned long long)a->children);
    for (size_t i = 0; i < a->n; i++) {
        const JobSum *x = &a->v[i], *y = &b->v[i];
        FZ_CHECK(x->id == y->id && x->pri == y->pri && x->ttr == y->ttr &&
                     x->body_size == y->body_size && x->body_crc == y->body_crc &&
                     x->state == y->state && !strcmp(x->tube, y->tube),
                 "%s: job %llu differs", what, (unsigned long long)x->id);
    }
}

static const JobSum *sum_of(const Sums *s, uint64_t id)
{
    JobSum key = {.id = id};

    return bsearch(&key, s->v, s->n, sizeof *s->v, cmp_sum);
}

/* ---- 3: read-behind --------------------------------------------------- */

static const char conf_some[] = "max_memory_size = 64\n"
                                "[tube d*]\nmax_memory_size = 0\n"
                                "[tube b*]\nmax_memory_size = 1K\n";
static const char conf_all[] = "max_memory_size = 1\n";

typedef struct {
    const Tube *t;
    uint64_t ct, bytes, all_ct, all_bytes;
    int after_replay; /* every job of a tube with a budget is on disk only */
    Job *disk[64];    /* some jobs on disk only, for the damage check */
    size_t ndisk;
} SpillCount;

static void spill_count_job(HashNode *hn, void *arg)
{
    SpillCount *c = arg;
    Job *j = container_of(hn, Job, hnode);
    int disk = j->spilled && !j->loaded;

    FZ_CHECK(!j->loaded || j->spilled, "job %llu loaded, not spilled", (unsigned long long)j->id);
    FZ_CHECK(disk == (job_body(j) == NULL), "job %llu: on disk %d, body %p",
             (unsigned long long)j->id, disk, (const void *)job_body(j));
    FZ_CHECK(!j->reading || disk, "job %llu read ahead but in memory", (unsigned long long)j->id);
    FZ_CHECK(j->state != JOB_RESERVED || !disk, "reserved job %llu on disk only",
             (unsigned long long)j->id);
    if (c->after_replay)
        FZ_CHECK(disk == (j->tube->pol.max_memory_size && j->tube->pol.journal),
                 "job %llu of tube %s (budget %llu) after replay: on disk only %d",
                 (unsigned long long)j->id, j->tube->name,
                 (unsigned long long)j->tube->pol.max_memory_size, disk);
    if (!disk)
        return;
    FZ_CHECK(j->file, "job %llu on disk only has no file", (unsigned long long)j->id);
    c->all_ct++;
    c->all_bytes += j->body_size;
    if (c->ndisk < 64)
        c->disk[c->ndisk++] = j;
    if (j->tube == c->t && !job_dead(j)) {
        c->ct++;
        c->bytes += j->body_size;
    }
}

/* Read-behind's counters against a recount; the jobs on disk only (some). */
static SpillCount check_spill(const Server *s, int after_replay)
{
    SpillCount c = {.after_replay = after_replay};

    hash_each(&s->eng.jobs, spill_count_job, &c);
    FZ_CHECK(c.all_ct == s->eng.spill.jobs && c.all_bytes == s->eng.spill.bytes,
             "spilled jobs %llu/%llu bytes, counted %llu/%llu",
             (unsigned long long)s->eng.spill.jobs, (unsigned long long)s->eng.spill.bytes,
             (unsigned long long)c.all_ct, (unsigned long long)c.all_bytes);
    for (size_t i = 0; i < s->eng.tubes.len; i++) {
        SpillCount t = {.t = s->eng.tubes.list[i]};
        hash_each(&s->eng.jobs, spill_count_job, &t);
        FZ_CHECK(t.ct == t.t->spilled_ct && t.bytes == t.t->spilled_bytes,
                 "tube %s: spilled %llu/%llu bytes, counted %llu/%llu", t.t->name,
                 (unsigned long long)t.t->spilled_ct, (unsigned long long)t.t->spilled_bytes,
                 (unsigned long long)t.ct, (unsigned long long)t.bytes);
        FZ_CHECK(t.t->spilled_bytes <= t.t->cur_bytes, "tube %s: %llu bytes spilled of %llu",
                 t.t->name, (unsigned long long)t.t->spilled_bytes,
                 (unsigned long long)t.t->cur_bytes);
    }
    return c;
}

static size_t pending_reads(Spill *sp)
{
    size_t n;

    if (!sp->running)
        return 0;
    pthread_mutex_lock(&sp->mu);
    n = sp->len - sp->head;
    pthread_mutex_unlock(&sp->mu);
    return n;
}

/* The loop's iterations until the read-ahead asked for is all back. */
static void settle_reads(Server *s)
{
    for (int i = 0; i < 2000; i++) {
        engine_commit(&s->eng);
        if (!pending_reads(&s->eng.spill))
            return;
        ev_poll(&s->loop, 5);
    }
    fz_fail("the read-ahead never settled");
}

static void flip(const char *dir, uint32_t index, uint64_t off)
{
    char path[512];
    unsigned char c;
    int fd;

    snprintf(path, sizeof path, "%s/binlog.%u", dir, index);
    fd = open(path, O_RDWR | O_CLOEXEC);
    FZ_CHECK(fd >= 0 && pread(fd, &c, 1, (off_t)off) == 1, "read %s", path);
    c ^= 0x5a;
    FZ_CHECK(pwrite(fd, &c, 1, (off_t)off) == 1, "write %s", path);
    close(fd);
}

/* A job on disk only whose record is damaged cannot be loaded, and stays
 * as it was; with the byte back, it loads. */
static void damage_one(Server *s, uint32_t pick)
{
    SpillCount c = check_spill(s, 0);
    Engine *e = &s->eng;
    Job *j;
    uint64_t off, errors = e->spill.errors, jobs = e->spill.jobs;
    uint32_t crc;
    size_t size;
    int rc;

    if (!c.ndisk)
        return;
    j = c.disk[pick % c.ndisk];
    crc = read_spilled(s->cfg.binlog_dir, j);
    size = bl_job_record_size(j);
    off = job_spill_off(j) + (pick >> 8) % size;
    flip(s->cfg.binlog_dir, j->file, off);
    rc = spill_load(e, j);
    FZ_CHECK(rc == -2, "job %llu: spill_load %d of a record damaged at +%llu",
             (unsigned long long)j->id, rc, (unsigned long long)(off - job_spill_off(j)));
    FZ_CHECK(e->spill.errors == errors + 1, "spill errors %llu, were %llu",
             (unsigned long long)e->spill.errors, (unsigned long long)errors);
    FZ_CHECK(j->spilled && !j->loaded && !job_body(j) && e->spill.jobs == jobs,
             "job %llu changed by a failed load", (unsigned long long)j->id);
    check_spill(s, 0);
    flip(s->cfg.binlog_dir, j->file, off);
    rc = spill_load(e, j);
    FZ_CHECK(rc == 0 && job_body(j) && crc32c(0, job_body(j), j->body_size) == crc,
             "job %llu: spill_load %d once repaired", (unsigned long long)j->id, rc);
    check_spill(s, 0);
}

/* The jobs still on disk only with odd ids loaded on the loop: the body
 * the summary read from the file. */
static void load_half(Server *s, const Sums *sums)
{
    for (;;) {
        SpillCount c = check_spill(s, 0);
        size_t loaded = 0;

        for (size_t i = 0; i < c.ndisk; i++) {
            Job *j = c.disk[i];
            const JobSum *js;
            int rc;
            if (!(j->id & 1))
                continue;
            js = sum_of(sums, j->id);
            FZ_CHECK(js, "job %llu not in the summary", (unsigned long long)j->id);
            rc = spill_load(&s->eng, j);
            FZ_CHECK(rc == 0, "job %llu: spill_load %d", (unsigned long long)j->id, rc);
            FZ_CHECK(crc32c(0, job_body(j), j->body_size) == js->body_crc,
                     "job %llu: the body loaded differs", (unsigned long long)j->id);
            loaded++;
        }
        if (!loaded)
            return;
    }
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

/* Write the input's files into dir. */
static void write_files(const char *dir, uint8_t flags, uint8_t *buf, size_t n)
{
    const uint8_t *p = buf, *end = buf + n;
    unsigned index = 1;

    fz_clear_dir(dir);
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static Server srv;
    Server *s = &srv;
    const char *dir = fz_tmpdir();
    uint8_t flags, *buf;
    size_t n;
    Config cfg;
    ConfFile *conf = NULL;
    char err[512];
    Sums first, ref = {NULL, 0, NULL, 0, 0};
    int rc, rb, ref_rc = 0;

    if (size < 1)
        return 0;
    flags = data[0];
    n = size - 1;
    buf = malloc(n ? n : 1);
    memcpy(buf, data + 1, n);
    rb = (flags & 0x60) != 0;

    fuzz_codec((const char *)buf, n);

    /* The files (repair() changes buf: written once, kept for a rewrite). */
    write_files(dir, flags, buf, n);
    flags &= (uint8_t)~2;

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

    if (rb) {
        /* The reference: the same files without read-behind. */
        const char *text = (flags & 0x40) ? conf_all : conf_some;
        size_t len = (flags & 0x40) ? sizeof conf_all - 1 : sizeof conf_some - 1;
        ref_rc = open_server(s, &cfg, err, sizeof err);
        if (ref_rc < 0) {
            forget_unplaced(s);
        } else {
            fz_check_server(s);
            ref = summarise(s);
        }
        server_free(s);
        write_files(dir, flags, buf, n);
        if (conf_parse("fuzz.conf", text, len, &conf, err, sizeof err) < 0)
            fz_fail("conf: %s", err);
        cfg.conf = conf;
    }

    rc = open_server(s, &cfg, err, sizeof err);
    if (rb)
        FZ_CHECK((rc < 0) == (ref_rc < 0), "replay %s with read-behind, %s without: %s",
                 rc < 0 ? "fails" : "succeeds", ref_rc < 0 ? "fails" : "succeeds", err);
    if (rc < 0) {
        forget_unplaced(s);
        server_free(s);
        conf_free(conf);
        free(buf);
        return 0;
    }
    fz_check_server(s);
    if (rb) {
        uint32_t pick = crc32c(0, data, size);
        uint64_t errors;
        /* --recover rewrote every job (its body read back) and the first
         * commit drops them again: only then is the budget in force. */
        SpillCount c0 = check_spill(s, !s->eng.binlog.damaged);
        if (flags & 0x80)
            damage_one(s, pick);
        errors = s->eng.spill.errors;
        FZ_CHECK(errors <= 1, "spill errors %llu", (unsigned long long)errors);
        settle_reads(s);
        FZ_CHECK(s->eng.spill.errors == errors, "spill errors %llu after the read-ahead",
                 (unsigned long long)s->eng.spill.errors);
        check_spill(s, 0);
        fz_check_server(s);
        if (getenv("FUZZ_ECHO"))
            fprintf(stderr, "read-behind: %zu jobs, %llu on disk after the replay%s, %llu "
                    "read ahead, %llu on the loop, %llu errors\n", s->eng.jobs.len,
                    (unsigned long long)c0.all_ct, s->eng.binlog.damaged ? " (recovered)" : "",
                    (unsigned long long)s->eng.spill.reads,
                    (unsigned long long)s->eng.spill.waits,
                    (unsigned long long)s->eng.spill.errors);
    }
    first = summarise(s);
    if (rb) {
        compare(&ref, &first, "read-behind replay against the reference");
        load_half(s, &first);
        check_spill(s, 0);
        FZ_CHECK(s->eng.spill.errors <= 1, "spill errors %llu",
                 (unsigned long long)s->eng.spill.errors);
    }
    /* One loop iteration's timer work (drops files with nothing live; with
     * read-behind it may move records of jobs on disk only). */
    s->eng.now = clock_mono();
    binlog_tick(&s->eng);
    fz_check_server(s);
    if (rb) {
        Sums again;
        engine_commit(&s->eng);
        check_spill(s, 0);
        again = summarise(s);
        compare(&first, &again, "after a tick");
        free(again.v);
    }
    server_free(s);

    /* It must come back with the same jobs. */
    rc = open_server(s, &cfg, err, sizeof err);
    if (rc < 0)
        fz_fail("replay succeeded, but the restart from its own files fails: %s", err);
    fz_check_server(s);
    {
        Sums second = summarise(s);
        compare(&first, &second, "restart");
        free(second.v);
    }
    if (rb) {
        check_spill(s, !s->eng.binlog.damaged);
        settle_reads(s);
        check_spill(s, 0);
        load_half(s, &first);
        FZ_CHECK(s->eng.spill.errors == 0, "spill errors %llu after the restart",
                 (unsigned long long)s->eng.spill.errors);
    }
    server_free(s);
    conf_free(conf);
    free(first.v);
    free(ref.v);
    free(buf);
    return 0;
}
