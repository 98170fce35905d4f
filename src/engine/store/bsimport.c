#include "bsimport.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
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
#include "core.h"
#include "job.h"
#include "log.h"
#include "names.h"
#include "queue.h"

/* beanstalkd's record, as its binlog.c writes it: the Jobrec struct copied
 * whole, so its layout is the compiler's. On x86-64 (LP64) it is 80 bytes
 * with padding after pri (4) and body_size (4) and 3 bytes after state.
 * Version 5 (beanstalkd 1.4.x) has the same offsets, times in
 * microseconds, a size_t tube name length, and only the 77 bytes up to
 * the state written. */
enum {
    V7_HEAD = 4, V7_REC = 80,
    V5_HEAD = 8, V5_REC = 77,
    OFF_ID = 0, OFF_PRI = 8, OFF_DELAY = 16, OFF_TTR = 24, OFF_SIZE = 32,
    OFF_CREATED = 40, OFF_DEADLINE = 48, OFF_COUNTS = 56, OFF_STATE = 76,
};
/* beanstalkd's states (dat.h); 5 (Copy) is never written. */
enum { BS_INVALID = 0, BS_RESERVED = 2 };
/* -z's ceiling in beanstalkd 1.12, plus the "\r\n" a body keeps. */
#define BS_MAX_BODY (1073741824 + 2)

typedef struct Rec {
    uint64_t id;
    uint32_t pri, counts[5];
    int64_t delay, ttr, created, deadline;
    int32_t body_size;
    uint8_t state;
} Rec;

static uint64_t get64(const unsigned char *p)
{
    uint64_t v;

    memcpy(&v, p, sizeof v); /* the host's order, as beanstalkd wrote it */
    return v;
}

static uint32_t get32(const unsigned char *p)
{
    uint32_t v;

    memcpy(&v, p, sizeof v);
    return v;
}

/* Microseconds to nanoseconds, saturating: a damaged v5 time must not
 * overflow. */
static int64_t us_to_ns(int64_t us)
{
    if (us > INT64_MAX / 1000)
        return INT64_MAX;
    if (us < INT64_MIN / 1000)
        return INT64_MIN;
    return us * 1000;
}

static void decode(const unsigned char *p, int v5, Rec *rc)
{
    rc->id = get64(p + OFF_ID);
    rc->pri = get32(p + OFF_PRI);
    rc->delay = (int64_t)get64(p + OFF_DELAY);
    rc->ttr = (int64_t)get64(p + OFF_TTR);
    rc->body_size = (int32_t)get32(p + OFF_SIZE);
    rc->created = (int64_t)get64(p + OFF_CREATED);
    rc->deadline = (int64_t)get64(p + OFF_DEADLINE);
    for (int i = 0; i < 5; i++)
        rc->counts[i] = get32(p + OFF_COUNTS + 4 * i);
    rc->state = p[OFF_STATE];
    if (v5) {
        rc->delay = us_to_ns(rc->delay);
        rc->ttr = us_to_ns(rc->ttr);
        rc->created = us_to_ns(rc->created);
        rc->deadline = us_to_ns(rc->deadline);
    }
}

static int all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

/* ---- the reader's tables ------------------------------------------------ */

void bsi_init(BsiReader *r)
{
    memset(r, 0, sizeof *r);
}

void bsi_free(BsiReader *r)
{
    for (size_t i = 0; i < r->njobs; i++)
        tb_free(r->jobs[i].body);
    tb_free(r->jobs);
    tb_free(r->slots);
    tb_free(r->tubes);
    tb_free(r->tube_slots);
    memset(r, 0, sizeof *r);
}

static size_t id_slot(uint64_t id, size_t nslots)
{
    uint64_t h = id * 0x9e3779b97f4a7c15ULL;

    return (size_t)(h ^ h >> 29) & (nslots - 1);
}

static BsiJob *find(const BsiReader *r, uint64_t id)
{
    if (!r->nslots)
        return NULL;
    for (size_t s = id_slot(id, r->nslots);; s = (s + 1) & (r->nslots - 1)) {
        uint32_t k = r->slots[s];
        if (!k)
            return NULL;
        if (r->jobs[k - 1].id == id) /* a dead job's id is 0: never matches */
            return &r->jobs[k - 1];
    }
}

static void slot_put(uint32_t *slots, size_t nslots, uint64_t id, uint32_t k)
{
    size_t s = id_slot(id, nslots);

    while (slots[s])
        s = (s + 1) & (nslots - 1);
    slots[s] = k;
}

/* Room for one more job: the table at most half full. 0, or -1. */
static int jobs_room(BsiReader *r)
{
    if (r->njobs >= UINT32_MAX - 1)
        return -1;
    if (r->njobs == r->jobs_cap) {
        size_t cap = r->jobs_cap ? r->jobs_cap * 2 : 64;
        BsiJob *v = tb_realloc(r->jobs, cap * sizeof *v);
        if (!v)
            return -1;
        r->jobs = v;
        r->jobs_cap = cap;
    }
    if ((r->njobs + 1) * 2 > r->nslots) {
        size_t n = r->nslots ? r->nslots * 2 : 128;
        uint32_t *s = tb_calloc(n, sizeof *s);
        if (!s)
            return -1;
        /* The dead are left out: their ids are never looked up again
         * unless a record makes them anew. */
        for (size_t i = 0; i < r->njobs; i++)
            if (r->jobs[i].id)
                slot_put(s, n, r->jobs[i].id, (uint32_t)i + 1);
        tb_free(r->slots);
        r->slots = s;
        r->nslots = n;
    }
    return 0;
}

static BsiJob *job_new(BsiReader *r, uint64_t id)
{
    BsiJob *j;

    if (jobs_room(r) < 0)
        return NULL;
    j = &r->jobs[r->njobs++];
    memset(j, 0, sizeof *j);
    j->id = id;
    slot_put(r->slots, r->nslots, id, (uint32_t)r->njobs);
    r->nlive++;
    return j;
}

static void job_kill(BsiReader *r, BsiJob *j)
{
    tb_free(j->body);
    j->body = NULL;
    j->id = 0;
    r->nlive--;
}

static uint32_t name_hash(const char *p, size_t n)
{
    uint32_t h = 2166136261u;

    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 16777619u;
    return h;
}

/* The index of tube name [p, p+n), added if new; -1 out of memory. */
static int64_t tube_of(BsiReader *r, const char *p, size_t n)
{
    size_t mask = r->ntube_slots - 1, s;

    if (r->ntube_slots) {
        for (s = name_hash(p, n) & mask; r->tube_slots[s]; s = (s + 1) & mask) {
            const BsiTube *t = &r->tubes[r->tube_slots[s] - 1];
            if (t->len == n && !memcmp(t->name, p, n))
                return r->tube_slots[s] - 1;
        }
    }
    if (r->ntubes == r->tubes_cap) {
        size_t cap = r->tubes_cap ? r->tubes_cap * 2 : 16;
        BsiTube *v = tb_realloc(r->tubes, cap * sizeof *v);
        if (!v)
            return -1;
        r->tubes = v;
        r->tubes_cap = cap;
    }
    if ((r->ntubes + 1) * 2 > r->ntube_slots) {
        size_t ns = r->ntube_slots ? r->ntube_slots * 2 : 32;
        uint32_t *v = tb_calloc(ns, sizeof *v);
        if (!v)
            return -1;
        for (size_t i = 0; i < r->ntubes; i++) {
            for (s = name_hash(r->tubes[i].name, r->tubes[i].len) & (ns - 1); v[s];
                 s = (s + 1) & (ns - 1))
                ;
            v[s] = (uint32_t)i + 1;
        }
        tb_free(r->tube_slots);
        r->tube_slots = v;
        r->ntube_slots = ns;
        mask = ns - 1;
    }
    for (s = name_hash(p, n) & mask; r->tube_slots[s]; s = (s + 1) & mask)
        ;
    r->tubes[r->ntubes].len = (uint8_t)n;
    memcpy(r->tubes[r->ntubes].name, p, n);
    r->tubes[r->ntubes].name[n] = '\0';
    r->tube_slots[s] = (uint32_t)++r->ntubes;
    return (int64_t)r->ntubes - 1;
}

/* ---- one file ----------------------------------------------------------- */

/* Damage at offset at: the file ends here for the import, as it ends for
 * beanstalkd's replay, and the job the record names goes with it, as in
 * beanstalkd: j if it was live, or the job a full record (full) would
 * have made. Always 0: the import goes on. */
static int damage(BsiReader *r, const char *name, size_t at, size_t n, BsiJob *j,
                  int full, uint64_t id, const char *why)
{
    char job[64] = "";

    if (j || full) {
        snprintf(job, sizeof job, "; job %" PRIu64 " dropped", id);
        r->dropped++;
    }
    if (j)
        job_kill(r, j);
    log_warn("import: %s: damaged at offset %zu (%s)%s; the rest of the file (%zu "
             "bytes) ignored, as beanstalkd's own replay would", name, at, why, job,
             n - at);
    r->damaged++;
    return 0;
}

static void set_fields(BsiJob *j, const Rec *rc, uint8_t state)
{
    j->pri = rc->pri;
    j->delay_ns = rc->delay;
    j->ttr_ns = rc->ttr;
    j->created_wall = rc->created;
    j->deadline_wall = rc->deadline;
    j->reserves = rc->counts[0];
    j->timeouts = rc->counts[1];
    j->releases = rc->counts[2];
    j->buries = rc->counts[3];
    j->kicks = rc->counts[4];
    j->state = state;
}

/* A full record (tube name, record, body) for job rc->id, j if it is live.
 * at: the record's offset in the file of n bytes (for messages); tube,
 * tlen: its tube name; body: where its body starts, left bytes from there
 * to the file's end. Returns the bytes of body taken, 0 on damage
 * (reported), -1 out of memory. */
static int64_t full_record(BsiReader *r, const char *name, size_t at, size_t n,
                           const char *tube, size_t tlen, const unsigned char *body,
                           size_t left, BsiJob *j, const Rec *rc, uint8_t state)
{
    int64_t t;
    char *copy;
    size_t size = (size_t)rc->body_size;

    if (rc->body_size < 2 || rc->body_size > BS_MAX_BODY)
        return damage(r, name, at, n, j, 1, rc->id, "body size out of range");
    if (left < size)
        return damage(r, name, at, n, j, 1, rc->id, "body cut short");
    if (!tube_name_valid(tube, tlen))
        return damage(r, name, at, n, j, 1, rc->id, "not a tube name");
    if (body[size - 2] != '\r' || body[size - 1] != '\n')
        return damage(r, name, at, n, j, 1, rc->id, "body without its \\r\\n");
    if ((t = tube_of(r, tube, tlen)) < 0 || !(copy = tb_malloc(size)))
        return -1;
    if (!j && !(j = job_new(r, rc->id))) {
        tb_free(copy);
        return -1;
    }
    memcpy(copy, body, size);
    tb_free(j->body);
    j->body = copy;
    j->body_size = (uint32_t)size;
    j->tube = (uint32_t)t;
    set_fields(j, rc, state);
    return (int64_t)size;
}

static int records(BsiReader *r, const char *name, const unsigned char *p, size_t n, int v5)
{
    size_t head = v5 ? V5_HEAD : V7_HEAD, rlen = v5 ? V5_REC : V7_REC;
    size_t off = V7_HEAD; /* the version: an int in both */

    for (;;) {
        size_t at = off, nl;
        BsiJob *j;
        Rec rc;
        uint8_t state;

        if (n - off < head || n - off < head + rlen) {
            /* A file closed by beanstalkd ends after its last record, one
             * killed in zeros (preallocated): both are a clean end. */
            if (all_zero(p + off, n - off))
                return 0;
            return damage(r, name, at, n, NULL, 0, 0, "record cut short");
        }
        if (v5) {
            uint64_t v = get64(p + off);
            nl = v > MAX_TUBE_NAME ? MAX_TUBE_NAME + 1 : (size_t)v;
        } else {
            int32_t v = (int32_t)get32(p + off);
            nl = v < 0 || v > MAX_TUBE_NAME ? MAX_TUBE_NAME + 1 : (size_t)v;
        }
        if (nl > MAX_TUBE_NAME)
            return damage(r, name, at, n, NULL, 0, 0, "tube name length out of range");
        off += head;
        if (n - off < nl + rlen)
            return damage(r, name, at, n, NULL, 0, 0, "record cut short");
        decode(p + off + nl, v5, &rc);
        if (!rc.id) {
            /* beanstalkd's end of records: zeros follow. */
            if (!all_zero(p + at, n - at))
                return damage(r, name, at, n, NULL, 0, 0, "a record of job 0");
            return 0;
        }
        /* tubed's ids end there (blcodec.h); beanstalkd never gets near. */
        if (rc.id >= BL_ID_LIMIT)
            return damage(r, name, at, n, NULL, 0, 0, "a job id past 2^62");
        j = find(r, rc.id);
        state = rc.state == BS_RESERVED ? BSI_READY : rc.state;
        if (!j && !nl) {
            /* Its job died in a file compacted away: beanstalkd looks no
             * further at it. Its id was given, though. */
            if (rc.id > r->max_id)
                r->max_id = rc.id;
            off += rlen;
            continue;
        }
        if (state != BS_INVALID && state != BSI_READY && state != BSI_BURIED &&
            state != BSI_DELAYED)
            return damage(r, name, at, n, j, nl > 0, rc.id, "unknown job state");
        if (rc.id > r->max_id)
            r->max_id = rc.id;
        off += nl + rlen;
        if (state == BS_INVALID) {
            /* (A delete is never a full record; if one were, beanstalkd
             * would not skip a body either.) */
            if (j)
                job_kill(r, j);
            continue;
        }
        if (nl) {
            int64_t took = full_record(r, name, at, n, (const char *)p + at + head, nl,
                                       p + off, n - off, j, &rc, state);
            if (took <= 0)
                return (int)took;
            off += (size_t)took;
        } else if ((uint32_t)rc.body_size != j->body_size) {
            return damage(r, name, at, n, j, 0, rc.id, "a state record with another body size");
        } else {
            set_fields(j, &rc, state);
        }
    }
}

int bsi_read_file(BsiReader *r, const char *name, const unsigned char *p, size_t n,
                  char *err, size_t errlen)
{
    int32_t ver;

    if (n >= 8 && !memcmp(p, "TUBEDLOG", 8)) {
        snprintf(err, errlen, "%s is tubed's own binlog, not beanstalkd's: give "
                 "--import-beanstalkd beanstalkd's -b directory", name);
        return -2;
    }
    if (all_zero(p, n)) {
        /* beanstalkd made it and stopped before its header was written;
         * its replay skips it too. */
        log_warn("import: %s holds nothing (%s); skipped", name, n ? "only zeros" : "empty");
        return 0;
    }
    if (n < V7_HEAD) {
        log_warn("import: %s: %zu bytes, shorter than a header; skipped", name, n);
        r->damaged++;
        return 0;
    }
    memcpy(&ver, p, sizeof ver);
    if (ver != 7 && ver != 5) {
        snprintf(err, errlen, "%s is not a beanstalkd binlog (it starts with format "
                 "version %" PRId32 "; beanstalkd 1.12 writes 7, 1.4 wrote 5)", name, ver);
        return -2;
    }
    r->files++;
    return records(r, name, p, n, ver == 5);
}

/* ---- the directory -------------------------------------------------------- */

long bsi_lock_holder(const char *dir)
{
    char path[4096];
    struct flock lk;
    int fd, rc, saved;

    if ((size_t)snprintf(path, sizeof path, "%s/lock", dir) >= sizeof path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    /* Read-only: F_GETLK asks, and takes nothing. (Closing the descriptor
     * would drop a POSIX lock this process held on the file: it holds
     * none; tubed's own lock is flock(2) on its own directory.) */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    memset(&lk, 0, sizeof lk);
    lk.l_type = F_WRLCK;
    lk.l_whence = SEEK_SET;
    rc = fcntl(fd, F_GETLK, &lk);
    saved = errno;
    close(fd);
    if (rc < 0) {
        errno = saved;
        return -1;
    }
    if (lk.l_type == F_UNLCK)
        return 0;
    return lk.l_pid > 0 ? (long)lk.l_pid : 1;
}

/* The whole of path, read-only. 0, or -1 with err. */
static int slurp(const char *path, unsigned char **out, size_t *n, char *err, size_t errlen)
{
    struct stat st;
    unsigned char *p = NULL;
    size_t got = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);

    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "cannot read %s: %s", path,
                 fd < 0 || errno ? strerror(errno) : "not a file");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (st.st_size > 0 && !(p = tb_malloc((size_t)st.st_size))) {
        close(fd);
        snprintf(err, errlen, "out of memory reading %s", path);
        return -1;
    }
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, p + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            snprintf(err, errlen, "cannot read %s: %s", path, r ? strerror(errno) : "it shrank");
            close(fd);
            tb_free(p);
            return -1;
        }
        got += (size_t)r;
    }
    close(fd);
    *out = p;
    *n = got;
    return 0;
}

int bsi_read_dir(BsiReader *r, const char *dir, char *err, size_t errlen)
{
    uint32_t *idx = NULL;
    size_t n = 0;
    long holder = bsi_lock_holder(dir);
    int rc = 0;

    if (holder < 0) {
        snprintf(err, errlen, "cannot check beanstalkd's lock %s/lock: %s", dir, strerror(errno));
        return -1;
    }
    if (holder) {
        snprintf(err, errlen, "beanstalkd (pid %ld) still runs on %s (it holds %s/lock): "
                 "stop it before importing its binlog", holder, dir, dir);
        return -1;
    }
    if (bl_list_files(dir, "beanstalkd's binlog directory", INT32_MAX, 0, &idx, &n, err, errlen) < 0)
        return -1;
    if (!n) {
        snprintf(err, errlen, "%s holds no beanstalkd binlog (no binlog.N file)", dir);
        tb_free(idx);
        return -1;
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        char path[4096];
        unsigned char *p = NULL;
        size_t len = 0;

        if (i && idx[i] != idx[i - 1] + 1)
            log_warn("import: %s/binlog.%u..%u missing (beanstalkd's replay goes on "
                     "without them too)", dir, idx[i - 1] + 1, idx[i] - 1);
        snprintf(path, sizeof path, "%s/binlog.%u", dir, idx[i]);
        if (slurp(path, &p, &len, err, errlen) < 0) {
            rc = -1;
            break;
        }
        rc = bsi_read_file(r, path, p, len, err, errlen);
        tb_free(p);
        if (rc == -1)
            snprintf(err, errlen, "out of memory reading %s", path);
    }
    tb_free(idx);
    if (rc == 0 && !r->files) {
        snprintf(err, errlen, "%s holds no beanstalkd binlog (its binlog.N files are empty)",
                 dir);
        rc = -1;
    }
    return rc < 0 ? -1 : 0;
}

/* ---- into the engine ---------------------------------------------------- */

static uint32_t secs(int64_t ns)
{
    if (ns <= 0)
        return 0;
    return ns / 1000000000 > UINT32_MAX ? UINT32_MAX : (uint32_t)(ns / 1000000000);
}

static int need_ext(const BsiJob *bj, int state)
{
    return state != JOB_READY || secs(bj->delay_ns) || bj->reserves || bj->timeouts ||
           bj->releases || bj->buries || bj->kicks;
}

typedef struct Counts {
    uint64_t ready, delayed, buried, top_id;
} Counts;

/* A tubed job for bj, not yet placed; NULL out of memory. */
static Job *make_job(Engine *e, const BsiJob *bj, Tube *t, int state, int64_t wall_now)
{
    Job *j = queue_job_new(e, bj->id, bj->body_size - 2, 0);
    JobExt *x = NULL;

    if (!j)
        return NULL;
    if (need_ext(bj, state) && !(x = job_ext_get(j))) {
        queue_job_free(e, j);
        return NULL;
    }
    memcpy(j->body, bj->body, bj->body_size - 2);
    j->pri = bj->pri;
    j->ttr = secs(bj->ttr_ns) ? secs(bj->ttr_ns) : 1;
    j->state = (unsigned)state;
    if (x) {
        x->delay = secs(bj->delay_ns);
        x->deadline = state == JOB_DELAYED ? bl_mono_of(bj->deadline_wall, wall_now, e->now) : 0;
        x->reserves = bj->reserves;
        x->timeouts = bj->timeouts;
        x->releases = bj->releases;
        x->buries = bj->buries;
        x->kicks = bj->kicks;
    }
    job_set_created(j, bl_mono_of(bj->created_wall, wall_now, e->now));
    j->tube = t;
    return j;
}

static int place(Engine *e, const BsiReader *r, const BsiJob *bj, int64_t wall_now, Counts *c,
                 char *err, size_t errlen)
{
    const BsiTube *bt = &r->tubes[bj->tube];
    int state = bj->state == BSI_BURIED                                     ? JOB_BURIED
                : bj->state == BSI_DELAYED && bj->deadline_wall > wall_now ? JOB_DELAYED
                                                                           : JOB_READY;
    Tube *t = tubes_get(&e->tubes, bt->name, bt->len);
    Job *j = t ? make_job(e, bj, t, state, wall_now) : NULL;
    uint64_t size;

    if (!j) {
        snprintf(err, errlen, "out of memory importing job %" PRIu64, bj->id);
        return -1;
    }
    /* A job beanstalkd took under a larger -z must fit one file of ours
     * (as replay does for our own records). */
    size = bl_job_record_size(j);
    if (size + BL_HEADER_SIZE + BL_DEL_SIZE > e->binlog.file_size)
        e->binlog.file_size = size + BL_HEADER_SIZE + BL_DEL_SIZE;
    if (binlog_reserve_put(e, j) < 0) {
        queue_job_free(e, j);
        snprintf(err, errlen, "tubed's binlog has no room for job %" PRIu64
                 " (%" PRIu64 " bytes): the disk is full", bj->id, size);
        return -1;
    }
    tube_ref(t);
    job_table_insert(&e->jobs, j);
    if (queue_restore(e, j) < 0) {
        snprintf(err, errlen, "out of memory placing job %" PRIu64, bj->id);
        return -1;
    }
    binlog_put(e, j);
    if (bj->id > c->top_id)
        c->top_id = bj->id;
    c->ready += state == JOB_READY;
    c->delayed += state == JOB_DELAYED;
    c->buried += state == JOB_BURIED;
    return 0;
}

static int cmp_job(const void *a, const void *b)
{
    const BsiJob *x = *(const BsiJob *const *)a, *y = *(const BsiJob *const *)b;

    return x->id < y->id ? -1 : x->id > y->id;
}

/* Every live job, oldest id first (buried ones then come back in id
 * order, as after beanstalkd's own restart). */
static int place_all(Engine *e, const BsiReader *r, Counts *c, char *err, size_t errlen)
{
    const BsiJob **v = tb_malloc((r->nlive ? r->nlive : 1) * sizeof *v);
    int64_t wall_now = clock_wall();
    size_t n = 0;
    int rc = 0;

    /* Read with wall_now: a deadline is placed at e->now + (its realtime
     * - wall_now), which an e->now from the engine's start would make
     * early by the time the files took to read. */
    e->now = clock_mono();
    if (!v) {
        snprintf(err, errlen, "out of memory importing beanstalkd's jobs");
        return -1;
    }
    for (size_t i = 0; i < r->njobs; i++)
        if (r->jobs[i].id)
            v[n++] = &r->jobs[i];
    qsort(v, n, sizeof *v, cmp_job);
    for (size_t i = 0; i < n && rc == 0; i++) {
        rc = place(e, r, v[i], wall_now, c, err, errlen);
        /* Written as it goes: the records of a large binlog need not all
         * wait in memory. */
        if (rc == 0 && i % 4096 == 4095 && binlog_write_now(e) < 0) {
            snprintf(err, errlen, "cannot write tubed's binlog in %s", e->binlog.dir);
            rc = -1;
        }
    }
    tb_free(v);
    return rc;
}

/* A one-line file in tubed's binlog directory, synced with the directory.
 * 0, or -1 (errno). */
static int write_note(Engine *e, const char *name, const char *line)
{
    size_t len = strlen(line), off = 0;
    int fd = openat(e->binlog.dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int rc = fd < 0 ? -1 : 0;

    while (rc == 0 && off < len) {
        ssize_t w = write(fd, line + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = EIO;
            rc = -1;
            break;
        }
        off += (size_t)w;
    }
    if (rc == 0 && (fsync(fd) < 0 || fsync(e->binlog.dirfd) < 0))
        rc = -1;
    if (fd >= 0) {
        int saved = errno;
        close(fd);
        errno = saved;
    }
    return rc;
}

/* The import's two notes: BSI_PENDING while it runs (a start that finds it
 * refuses: the binlog may hold part of beanstalkd's jobs), then BSI_MARKER
 * once every record is synced (a restart with the flag imports nothing). */
static int begin_note(Engine *e, const char *dir, char *err, size_t errlen)
{
    char line[4200];

    snprintf(line, sizeof line, "importing beanstalkd's binlog in %s\n", dir);
    if (write_note(e, BSI_PENDING, line) == 0)
        return 0;
    snprintf(err, errlen, "cannot write %s/%s: %s", e->binlog.dir, BSI_PENDING,
             strerror(errno));
    return -1;
}

static int end_note(Engine *e, const char *dir, uint64_t n, char *err, size_t errlen)
{
    char line[4200];

    snprintf(line, sizeof line, "imported %" PRIu64 " jobs from beanstalkd's binlog in %s\n",
             n, dir);
    if (write_note(e, BSI_MARKER, line) == 0 &&
        (unlinkat(e->binlog.dirfd, BSI_PENDING, 0) == 0 || errno == ENOENT) &&
        fsync(e->binlog.dirfd) == 0)
        return 0;
    snprintf(err, errlen, "cannot finish the import in %s (%s): %s", e->binlog.dir,
             BSI_MARKER, strerror(errno));
    return -1;
}

int bsimport_unfinished(Engine *e, char *err, size_t errlen)
{
    struct stat st;

    if (fstatat(e->binlog.dirfd, BSI_PENDING, &st, 0) < 0 ||
        fstatat(e->binlog.dirfd, BSI_MARKER, &st, 0) == 0)
        return 0;
    snprintf(err, errlen, "tubed's binlog in %s holds an import of beanstalkd's binlog "
             "that did not finish (%s/%s is there): it may hold only part of the jobs. "
             "Remove its binlog.N files and that file, then start again with "
             "--import-beanstalkd", e->binlog.dir, e->binlog.dir, BSI_PENDING);
    return -1;
}

static int same_dir(const Engine *e, const char *dir)
{
    struct stat a, b;

    return stat(dir, &a) == 0 && fstat(e->binlog.dirfd, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

int bsimport_run(Engine *e, const char *dir, char *err, size_t errlen)
{
    struct stat st;
    BsiReader r;
    Counts c = {0};
    int rc;

    if (fstatat(e->binlog.dirfd, BSI_MARKER, &st, 0) == 0) {
        log_info("import: beanstalkd's jobs were imported before (%s/%s); "
                 "--import-beanstalkd %s ignored", e->binlog.dir, BSI_MARKER, dir);
        return 0;
    }
    if (e->jobs.len || e->next_id > 1) {
        log_info("import: tubed's binlog in %s already holds jobs (ids up to %" PRIu64
                 "): the import was done before; --import-beanstalkd %s ignored",
                 e->binlog.dir, e->next_id - 1, dir);
        return 0;
    }
    if (same_dir(e, dir)) {
        snprintf(err, errlen, "--import-beanstalkd %s is tubed's own binlog directory: "
                 "give tubed a new -b directory", dir);
        return -1;
    }
    bsi_init(&r);
    rc = bsi_read_dir(&r, dir, err, errlen);
    if (rc == 0)
        rc = begin_note(e, dir, err, errlen);
    if (rc == 0)
        rc = place_all(e, &r, &c, err, errlen);
    if (rc == 0 && r.max_id >= e->next_id) {
        e->next_id = r.max_id + 1;
        /* Ids of jobs deleted before the stop are not given again either:
         * a mark is a delete record of its id, so only past every live
         * job (replay takes the next id from the highest in any record). */
        if (r.max_id > c.top_id && binlog_mark_ids(e, r.max_id) < 0) {
            snprintf(err, errlen, "tubed's binlog has no room: the disk is full");
            rc = -1;
        }
    }
    if (rc == 0 && binlog_write_now(e) < 0) {
        snprintf(err, errlen, "cannot write and sync tubed's binlog in %s", e->binlog.dir);
        rc = -1;
    }
    if (rc == 0)
        rc = end_note(e, dir, c.ready + c.delayed + c.buried, err, errlen);
    if (rc == 0) {
        log_info("imported %" PRIu64 " jobs (%" PRIu64 " ready, %" PRIu64 " delayed, %" PRIu64
                 " buried) from beanstalkd's binlog in %s%s", c.ready + c.delayed + c.buried,
                 c.ready, c.delayed, c.buried, dir,
                 r.damaged ? " (damaged: see the warnings above)" : "");
        if (r.damaged)
            log_warn("import: %u file(s) of %s were damaged; %u job(s) dropped with them",
                     r.damaged, dir, r.dropped);
    }
    bsi_free(&r);
    return rc;
}
