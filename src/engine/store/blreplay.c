#include "blreplay.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "blcodec.h"
#include "clock.h"
#include "job.h"
#include "log.h"
#include "numparse.h"
#include "blfile.h"
#include "core.h"
#include "queue.h"
#include "slab.h"
#include "spill.h"

static inline Binlog *bl(Engine *e) { return &e->binlog; }

typedef struct Replay {
    Engine *e;
    uint64_t max_id;
    uint32_t unwritten;    /* the newest file, never written and removed: the
                              next file takes its number, so none is missing */
    Tube *last_tube;       /* records of one tube come in runs */
    /* The live jobs in the order their records came, NULL where one died
     * (a job's index is in its heap_pos, which is free until it is placed).
     * That is id order unless compaction moved records, so placing the
     * jobs needs no sort of a million cold pointers. */
    Job **order;
    size_t norder, order_cap, nlive;
    uint64_t last_id;      /* of the job pushed last */
    int unsorted;          /* a job was pushed after one with a larger id */
    /* order[hashed..norder) are not in the job table yet: they go in as
     * one batch when a record needs a lookup, or at the end. A log that is
     * mostly puts then fills the table once, at its final size, with the
     * bucket misses overlapped, instead of one miss per job and a rehash
     * of every job at every doubling. */
    size_t hashed;
    /* The realtime and the monotonic time when the replay began, read
     * together: a logged realtime becomes mono_now + (wall - wall_now).
     * (e->now is older, from before the files were listed; pairing it
     * with a later realtime would put every deadline late by the gap.) */
    int64_t wall_now, mono_now;
    char *err;
    size_t errlen;
} Replay;

static void hash_pending(Replay *rp)
{
    if (rp->hashed == rp->norder)
        return;
    job_table_insert_all(&rp->e->jobs, rp->order + rp->hashed, rp->norder - rp->hashed);
    rp->hashed = rp->norder;
}

/* The job with this id, NULL if none. */
static Job *replay_find(Replay *rp, uint64_t id)
{
    /* Ids only grow as jobs are made, so a record past every id seen so
     * far names no job: most put records, which then need no lookup. */
    if (id > rp->max_id)
        return NULL;
    hash_pending(rp);
    return job_table_find(&rp->e->jobs, id);
}

/* Room for one more in the order: squeeze out the dead if they are half
 * of it, else grow it. -1 if out of memory. */
static int order_make_room(Replay *rp)
{
    size_t cap = rp->order_cap ? rp->order_cap * 2 : 4096;
    Job **v;

    if (rp->norder && rp->nlive <= rp->norder / 2) {
        hash_pending(rp); /* squeezing moves them */
        size_t k = 0;
        for (size_t i = 0; i < rp->norder; i++)
            if (rp->order[i]) {
                rp->order[i]->heap_pos = (uint32_t)k;
                rp->order[k++] = rp->order[i];
            }
        rp->norder = rp->hashed = k;
        return 0;
    }
    if (cap > HEAP_MAX_LEN)
        return -1;
    v = tb_realloc(rp->order, cap * sizeof *v);
    if (!v)
        return -1;
    rp->order = v;
    rp->order_cap = cap;
    return 0;
}

static int order_push(Replay *rp, Job *j)
{
    if (rp->norder == rp->order_cap && order_make_room(rp) < 0)
        return -1;
    j->heap_pos = (uint32_t)rp->norder;
    rp->order[rp->norder++] = j;
    /* Noted here, where j is in cache: checking the order at the end
     * would touch a million cold jobs. Removals keep it sorted. */
    if (j->id < rp->last_id)
        rp->unsorted = 1;
    rp->last_id = j->id;
    rp->nlive++;
    return 0;
}

static Tube *replay_tube(Replay *rp, const BlRecord *r)
{
    Tube *t = rp->last_tube;

    if (t && t->name_len == r->tube_len && !memcmp(t->name, r->tube, r->tube_len))
        return t;
    t = tubes_get(&rp->e->tubes, r->tube, r->tube_len);
    if (t)
        rp->last_tube = t;
    return t;
}

static void forget_job(Replay *rp, Job *j)
{
    Engine *e = rp->e;
    Tube *t = j->tube;

    if (t == rp->last_tube && t->refs == 1)
        rp->last_tube = NULL; /* about to be freed with its last job */
    rp->order[j->heap_pos] = NULL;
    rp->nlive--;
    spill_forget(e, j);
    job_table_remove(&e->jobs, j);
    queue_job_free(e, j);
    tube_unref(&e->tubes, t);
}

/* Does a job in this state with these counters need its JobExt? */
static int needs_ext(const BlRecord *r, int state)
{
    return state != JOB_READY || r->delay || r->reserves || r->timeouts ||
           r->releases || r->buries || r->kicks;
}

/* 0, or -1 if out of memory (j unchanged). */
static int apply_state(Replay *rp, Job *j, const BlRecord *r)
{
    int state = r->state == JOB_DELAYED || r->state == JOB_BURIED ? r->state : JOB_READY;
    JobExt *x = job_ext(j);

    if (!x && needs_ext(r, state) && !(x = job_ext_get(j)))
        return -1;
    j->pri = r->pri;
    j->state = (unsigned)state;
    if (!x)
        return 0;
    x->delay = r->delay;
    x->deadline = state == JOB_DELAYED ? bl_mono_of(r->deadline_wall, rp->wall_now, rp->mono_now) : 0;
    x->reserves = r->reserves;
    x->timeouts = r->timeouts;
    x->releases = r->releases;
    x->buries = r->buries;
    x->kicks = r->kicks;
    return 0;
}

/* A BL_JOBX record's clocks: when the job entered its tube, and the expiry
 * a client set. 0, or -1 if out of memory. */
static int apply_times(Replay *rp, Job *j, const BlRecord *r)
{
    JobExt *x;

    if (r->type != BL_JOBX)
        return 0;
    if (!(x = job_ext_get(j)))
        return -1;
    x->entered = bl_mono_of(r->entered_wall, rp->wall_now, rp->mono_now);
    x->exptime = r->exptime_wall ? bl_mono_of(r->exptime_wall, rp->wall_now, rp->mono_now) : 0;
    if (x->exptime)
        rp->e->exptimes_seen = 1; /* (follow.c: a promotion walks for it) */
    return 0;
}

static int out_of_memory(Replay *rp)
{
    snprintf(rp->err, rp->errlen, "out of memory replaying the binlog");
    return -1;
}

static int kept(const BlRecord *r, uint64_t id)
{
    for (uint32_t i = 0; i < r->nkeep; i++)
        if (bl_flush_keep(r, i) == id)
            return 1;
    return 0;
}

/* flush-tube: every job of the tube made before it, but the reserved ones
 * it lists, is gone. Linear in the live jobs: flushes are rare. */
static void replay_flush(Replay *rp, const BlRecord *r)
{
    Tube *t = tubes_find(&rp->e->tubes, r->tube, r->tube_len);

    if (!t)
        return;
    hash_pending(rp); /* forget_job() takes jobs out of the table */
    tube_ref(t); /* forgetting its last job must not free it here */
    for (size_t i = 0; i < rp->norder; i++) {
        Job *j = rp->order[i];
        if (j && j->tube == t && j->id <= r->id && !kept(r, j->id))
            forget_job(rp, j);
    }
    if (rp->last_tube == t && t->refs == 1)
        rp->last_tube = NULL;
    tube_unref(&rp->e->tubes, t);
}

/* 0, or -1 when the server cannot go on (out of memory). */
/* The job of record r, at offset off of binlog.index. A tube with a
 * max_memory_size gets its jobs on disk only: the reader thread reads the
 * first budget's worth back once the server runs (spill.h), so replay
 * never holds a spilled backlog's bodies. */
static Job *replay_job(Replay *rp, const BlRecord *r, Tube *t, uint64_t off)
{
    Engine *e = rp->e;
    Job *j;

    if (t->pol.max_memory_size && t->pol.journal)
        return queue_job_new_spilled(e, r->id, r->body_size, 0, 0, off);
    j = queue_job_new(e, r->id, r->body_size, 0);
    if (j)
        memcpy(j->body, r->body, r->body_size);
    return j;
}

/* A fanout child registered or let go: the tube keeps the flag and the
 * file of its latest registration; place_children() counts it against
 * that file once every file is read, and policy.c links it to its parent
 * after the replay. */
static int replay_child(Replay *rp, const BlRecord *r, uint32_t index)
{
    Engine *e = rp->e;
    int on = r->flags & BL_CHILD_ON;
    Tube *t = on ? tubes_get(&e->tubes, r->tube, r->tube_len)
                 : tubes_find(&e->tubes, r->tube, r->tube_len);

    if (!t)
        return on ? out_of_memory(rp) : 0;
    t->child_file = on ? index : 0;
    if (on && !t->registered) {
        t->registered = 1;
        tube_ref(t);
    } else if (!on && t->registered) {
        t->registered = 0;
        if (t == rp->last_tube && t->refs == 1)
            rp->last_tube = NULL; /* about to be freed */
        tube_unref(&e->tubes, t);
    }
    return 0;
}

static void place_children(Replay *rp)
{
    Engine *e = rp->e;

    for (size_t i = 0; i < e->tubes.len; i++) {
        Tube *t = e->tubes.list[i];
        uint32_t index = t->child_file;
        if (index) {
            t->child_file = 0;
            bl_child_pin(bl(e), t, index);
        }
    }
}

static int apply(Replay *rp, const BlRecord *r, uint32_t index, uint64_t off)
{
    Engine *e = rp->e;
    Job *j;
    Tube *t;

    if (r->type == BL_POS || r->type == BL_SNAP_END) {
        /* The position and epoch as of this record (doc/replication.md);
         * a snapshot's end is never in a file. */
        if (r->type == BL_POS) {
            bl(e)->epoch = r->id;
            bl(e)->pos = r->pos;
            bl(e)->epoch_start = r->epoch_start;
            bl(e)->follower = r->flags & BL_POS_FOLLOWER;
            bl(e)->unheard = (r->flags & BL_POS_UNHEARD) != 0;
            bl(e)->pos_persist = 1;
        }
        return 0;
    }
    if (!bl(e)->follower)
        bl(e)->pos++;
    if (r->type == BL_CHILD)
        return replay_child(rp, r, index);
    j = replay_find(rp, r->id);
    if (r->id > rp->max_id)
        rp->max_id = r->id;
    if (r->type == BL_FLUSH) {
        replay_flush(rp, r);
        return 0;
    }
    if (r->type == BL_DELETE) {
        if (j)
            forget_job(rp, j);
        return 0;
    }
    if (r->type == BL_STATE) {
        /* No job: its job record was compacted away; it is dead. */
        return j && apply_state(rp, j, r) < 0 ? out_of_memory(rp) : 0;
    }
    if (j)
        forget_job(rp, j);
    t = replay_tube(rp, r);
    j = t ? replay_job(rp, r, t, off) : NULL;
    if (!j || apply_state(rp, j, r) < 0 || apply_times(rp, j, r) < 0 ||
        order_push(rp, j) < 0) {
        queue_job_free(e, j);
        return out_of_memory(rp);
    }
    j->ttr = r->ttr ? r->ttr : 1;
    job_set_created(j, bl_mono_of(r->created_wall, rp->wall_now, rp->mono_now));
    j->file = index;
    j->tube = t;
    tube_ref(t);
    if (j->spilled)
        spill_count(e, j);
    return 0;
}

/* A block at a time with memcmp (vectorised in libc): a spare file made
 * ahead of use is megabytes of zeros, and replay checks every byte of it
 * (a byte loop was a tenth of a replay's time). */
static int all_zero(const char *p, size_t n)
{
    static const char zeros[4096];

    for (; n >= sizeof zeros; p += sizeof zeros, n -= sizeof zeros)
        if (memcmp(p, zeros, sizeof zeros))
            return 0;
    return !n || !memcmp(p, zeros, n);
}

/* Where the damaged record at off would end, capped at the file's end. */
static size_t damaged_end(const char *p, size_t size, size_t off)
{
    uint64_t len;

    if (size - off < 4)
        return size;
    len = (uint64_t)(unsigned char)p[off] | (uint64_t)(unsigned char)p[off + 1] << 8 |
          (uint64_t)(unsigned char)p[off + 2] << 16 | (uint64_t)(unsigned char)p[off + 3] << 24;
    return len + BL_REC_HEAD >= size - off ? size : off + BL_REC_HEAD + (size_t)len;
}

/* With --recover: the next offset after off where a valid record starts. */
static size_t resync(const char *p, size_t size, size_t off)
{
    BlRecord r;

    for (size_t q = off + 1; q + BL_REC_HEAD <= size; q++)
        if (p[q] && bl_decode(p + q, size - q, &r) > 0)
            return q;
    return size;
}

enum { FILE_OK, FILE_TORN, FILE_BAD };

/* Replay the records of one mapped file. Sets *cut to the offset where a
 * torn tail starts (FILE_TORN), or where the records end before zeros
 * (FILE_OK: a preallocated tail a crash left). */
static int replay_records(Replay *rp, const char *p, size_t size, uint32_t index,
                          int newest, size_t *cut)
{
    size_t off = BL_HEADER_SIZE;
    Binlog *b = bl(rp->e);

    while (off < size) {
        BlRecord r;
        long n = bl_decode(p + off, size - off, &r);
        size_t end;

        if (n > 0) {
            if (apply(rp, &r, index, off) < 0)
                return -1;
            off += (size_t)n;
            continue;
        }
        if (n == BL_END && all_zero(p + off, size - off)) {
            *cut = off;
            return FILE_OK;
        }
        end = damaged_end(p, size, off);
        /* A torn tail is the last thing written: a valid record after it
         * (inside what a damaged length field claims; past that end there
         * are only zeros) means damage in the middle, and cutting there
         * would drop the records that follow, acknowledged ones too. */
        if (newest && all_zero(p + end, size - end) && resync(p, end, off) == end) {
            *cut = off;
            return FILE_TORN;
        }
        if (!b->recover) {
            snprintf(rp->err, rp->errlen,
                     "binlog.%u is damaged at offset %zu (checksum or structure); "
                     "refusing to start. Start with --recover to keep every valid "
                     "record and drop the damaged ones", index, off);
            return FILE_BAD;
        }
        {
            size_t next = resync(p, size, off);
            log_warn("binlog: --recover: binlog.%u: dropped bytes %zu..%zu (damaged)",
                     index, off, next);
            b->damaged = 1;
            off = next;
        }
    }
    return FILE_OK;
}

static int replay_file(Replay *rp, uint32_t index, int newest)
{
    Binlog *b = bl(rp->e);
    char path[4096];
    struct stat st;
    char *p = NULL;
    size_t cut = 0, tail = 0;
    int fd, hdr, rc = 0, unwritten = 0;
    uint32_t newer;

    bl_file_name(b, index, path, sizeof path);
    fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0) {
        snprintf(rp->err, rp->errlen, "cannot open %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    if (st.st_size > 0) {
        p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            snprintf(rp->err, rp->errlen, "cannot map %s: %s", path, strerror(errno));
            close(fd);
            return -1;
        }
    }
    hdr = bl_check_header(p, (size_t)st.st_size);
    if (hdr < 0 && st.st_size >= 4 && !memcmp(p, "\x07\0\0\0", 4)) {
        /* beanstalkd's own format (version 7): never "recover" it away */
        snprintf(rp->err, rp->errlen, "%s is a beanstalkd binlog, not tubed's; tubed "
                 "cannot replay it. Give -b a new directory and take the jobs over "
                 "with --import-beanstalkd %s (doc/operations.md); refusing to start",
                 path, b->dir);
        rc = -1;
    } else if (hdr < 0 && (newer = bl_header_newer(p, (size_t)st.st_size))) {
        /* Intact, of a later format: not damage, and never "recovered"
         * away (--recover would drop every job in it). */
        snprintf(rp->err, rp->errlen, "%s was written by a newer tubed (binlog format "
                 "version %u; this one reads versions %d to %d); refusing to start, "
                 "even with --recover (it would drop the file's jobs). Start the newer "
                 "tubed on %s", path, newer,
                 BL_VERSION_MIN, BL_VERSION, b->dir);
        rc = -1;
    } else if (hdr == 1 && newest && all_zero(p, (size_t)st.st_size)) {
        /* Made, then a crash before its header: it holds nothing. It goes,
         * or once a newer file follows it would read as damage. */
        log_warn("binlog: %s holds no records (never written); removed", path);
        unwritten = 1;
    } else if (hdr != 0) {
        if (b->recover) {
            log_warn("binlog: --recover: %s has no valid header; all of it dropped", path);
            b->damaged = 1;
        } else {
            snprintf(rp->err, rp->errlen, "%s is damaged: %s at offset 0; refusing to "
                     "start. Start with --recover to drop it", path,
                     hdr == 1 ? "zero-filled" : "bad header");
            rc = -1;
        }
    } else {
        int r = replay_records(rp, p, (size_t)st.st_size, index, newest, &cut);
        if (r == FILE_OK && cut < (size_t)st.st_size)
            tail = cut;
        if (r == FILE_TORN) {
            log_warn("binlog: %s: torn record at offset %zu (a crash mid-write); "
                     "cut off there", path, cut);
            if (ftruncate(fd, (off_t)cut) < 0)
                log_warn("binlog: truncate %s: %s", path, strerror(errno));
        } else if (r != FILE_OK) {
            rc = -1;
        }
    }
    if (p)
        munmap(p, (size_t)st.st_size);
    if (unwritten) {
        if (unlink(path) == 0) {
            if (fsync(b->dirfd) < 0)
                log_warn("binlog: sync %s: %s", b->dir, strerror(errno));
            close(fd);
            rp->unwritten = index;
            return 0;
        }
        log_warn("binlog: remove %s: %s", path, strerror(errno)); /* kept, as before */
    }
    if (rc == 0 && fstat(fd, &st) == 0) {
        if (bl_files_push(b, index) < 0) {
            rc = -1;
        } else {
            cur_file(b)->bytes = bl_disk_bytes(&st);
            cur_file(b)->tail = tail;
        }
    }
    close(fd);
    return rc;
}

static int cmp_job_id(const void *a, const void *b)
{
    const Job *x = *(Job *const *)a, *y = *(Job *const *)b;

    return x->id < y->id ? -1 : x->id > y->id;
}

/* The live jobs of the order, oldest id first: squeezed, and sorted only
 * if compaction left them out of order. Returns how many. */
static size_t order_by_id(Replay *rp)
{
    size_t n = 0;

    for (size_t i = 0; i < rp->norder; i++)
        if (rp->order[i])
            rp->order[n++] = rp->order[i];
    if (rp->unsorted)
        qsort(rp->order, n, sizeof *rp->order, cmp_job_id);
    return n;
}

/* Put every replayed job in its tube, oldest id first, and count it
 * against its file. Buried jobs come back in id order, which is their
 * bury order only when they were buried in the order they were made. */
static int place_jobs(Replay *rp)
{
    Engine *e = rp->e;
    Binlog *b = bl(e);
    size_t n = order_by_id(rp);

    for (size_t i = 0; i < n; i++) {
        Job *j = rp->order[i];
        BlFile *f = bl_file_of(b, j->file);
        uint64_t size = bl_job_record_size(j);
        if (queue_restore(e, j) < 0) {
            snprintf(rp->err, rp->errlen, "out of memory placing replayed jobs");
            return -1;
        }
        if (f) {
            f->live_jobs++;
            f->live_bytes += size;
        }
        /* A job logged under a larger -z must still fit in one file when
         * compaction moves it. */
        if (size + BL_HEADER_SIZE + BL_DEL_SIZE > b->file_size)
            b->file_size = size + BL_HEADER_SIZE + BL_DEL_SIZE;
        b->live_bytes += size;
        b->reserved += BL_DEL_SIZE;
    }
    return 0;
}

/* A file with nothing but a header (or nothing) and zeros: a spare made
 * ahead of use that a crash left behind. */
static int file_blank(const Binlog *b, uint32_t index)
{
    char path[4096];
    struct stat st;
    int fd, blank = 0;

    bl_file_name(b, index, path, sizeof path);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    if (fstat(fd, &st) == 0) {
        if (st.st_size == 0) {
            blank = 1;
        } else {
            char *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
            if (p != MAP_FAILED) {
                size_t n = (size_t)st.st_size;
                blank = bl_check_header(p, n) >= 0 &&
                        (n <= BL_HEADER_SIZE || all_zero(p + BL_HEADER_SIZE, n - BL_HEADER_SIZE));
                munmap(p, n);
            }
        }
    }
    close(fd);
    return blank;
}

static int replay_all(Replay *rp, uint32_t *idx, size_t n)
{
    Engine *e = rp->e;
    char *err = rp->err;
    size_t errlen = rp->errlen;
    size_t newest = n ? n - 1 : 0;

    /* The newest file is the last one holding records: blank spares after
     * it do not make its torn tail "old" damage. */
    while (newest > 0 && file_blank(bl(e), idx[newest]))
        newest--;

    for (size_t i = 0; i < n; i++) {
        if (i && idx[i] != idx[i - 1] + 1) {
            if (!bl(e)->recover) {
                snprintf(err, errlen, "binlog file %s/binlog.%u is missing (found "
                         "binlog.%u and binlog.%u); refusing to start. Start with "
                         "--recover to go on without it", bl(e)->dir, idx[i - 1] + 1,
                         idx[i - 1], idx[i]);
                return -1;
            }
            log_warn("binlog: --recover: binlog.%u..%u missing; going on without them",
                     idx[i - 1] + 1, idx[i] - 1);
            bl(e)->damaged = 1;
            /* Empty places for the missing numbers: the file list is indexed
             * by number, so a gap would count jobs against the wrong file. */
            for (uint32_t k = idx[i - 1] + 1; k < idx[i]; k++)
                if (bl_files_push(bl(e), k) < 0) {
                    snprintf(err, errlen, "out of memory replaying the binlog");
                    return -1;
                }
        }
        if (replay_file(rp, idx[i], i >= newest) < 0)
            return -1;
    }
    if (rp->max_id >= e->next_id)
        e->next_id = rp->max_id + 1;
    return 0;
}

/* What the files hold, in bytes: about what their jobs will take. */
static size_t files_bytes(const Binlog *b, const uint32_t *idx, size_t n)
{
    size_t sum = 0;

    for (size_t i = 0; i < n; i++) {
        char path[4096];
        struct stat st;
        bl_file_name(b, idx[i], path, sizeof path);
        if (stat(path, &st) == 0 && st.st_size > 0)
            sum += (size_t)st.st_size;
    }
    return sum;
}

int bl_replay(Engine *e, uint32_t *next_index, char *err, size_t errlen)
{
    Replay rp = {.e = e, .err = err, .errlen = errlen, .wall_now = clock_wall(),
                 .mono_now = clock_mono()};
    uint32_t *idx = NULL;
    size_t n = 0;
    int rc;

    if (bl_list_files(bl(e)->dir, "binlog directory", JOB_FILE_MAX, 1, &idx, &n, err, errlen) < 0)
        return -1;
    /* The jobs' fresh memory is faulted in by another thread meanwhile. */
    slab_prefault_start(files_bytes(bl(e), idx, n));
    rc = replay_all(&rp, idx, n);
    hash_pending(&rp); /* on failure too: the caller frees what is there */
    if (rc == 0)
        rc = place_jobs(&rp);
    if (rc == 0)
        place_children(&rp);
    slab_prefault_stop();
    *next_index = rp.unwritten ? rp.unwritten : n ? idx[n - 1] + 1 : 1;
    tb_free(idx);
    tb_free(rp.order);
    return rc;
}
