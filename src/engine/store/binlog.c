#include "binlog.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "blcodec.h"
#include "blfile.h"
#include "blreplay.h"
#include "core.h"
#include "clock.h"
#include "job.h"
#include "log.h"
#include "numparse.h"
#include "queue.h"
#include "spill.h"

#define DEL BL_DELETE_SIZE

static inline Binlog *bl(Engine *e) { return &e->binlog; }

BlDisk bl_disk = {posix_fallocate, pwrite, fdatasync};

/* The sync thread calls this, so a test's replacement is seen at once.
 * A file no longer in any directory (its directory or the file itself
 * removed while tubed runs) syncs fine, yet no restart will see it: that
 * is a failed sync (ENOENT), or every acknowledgement made durable by it
 * would be lost at the next start. */
static int disk_sync(int fd)
{
    struct stat st;

    if (bl_disk.fdatasync(fd) < 0)
        return -1;
    if (fstat(fd, &st) == 0 && st.st_nlink == 0) {
        errno = ENOENT;
        return -1;
    }
    return 0;
}

/* ---- small helpers ---------------------------------------------------- */


static uint32_t next_index(const Binlog *b)
{
    return b->files[b->nfiles - 1].index + 1 + (uint32_t)b->nspares;
}

static int sync_dir(Binlog *b)
{
    if (fsync(b->dirfd) < 0) {
        log_err("binlog: fsync %s: %s", b->dir, strerror(errno));
        return -1;
    }
    return 0;
}

/* Room for delete records in `free` bytes of a file: whole records only. */
static uint64_t del_room(uint64_t free)
{
    return free - free % DEL;
}

/* A monotonic time as realtime, for the log (one pair of clock reads a
 * loop iteration, clock.h). */
static int64_t wall_of(Engine *e, int64_t mono)
{
    return mono + clock_offset(&e->wall, e->now);
}

/* The durable view of a job: a reserved job is logged as ready. */
static void job_record(Engine *e, const Job *j, BlRecord *r, int type)
{
    const JobExt *x = job_ext_view(j);

    memset(r, 0, sizeof *r);
    r->type = (uint8_t)type;
    r->id = j->id;
    r->pri = j->pri;
    r->delay = x->delay;
    r->ttr = j->ttr;
    r->state = j->state == JOB_RESERVED ? JOB_READY : j->state;
    if (j->state == JOB_DELAYED)
        r->deadline_wall = wall_of(e, x->deadline);
    r->created_wall = wall_of(e, job_created(j));
    r->reserves = x->reserves;
    r->timeouts = x->timeouts;
    r->releases = x->releases;
    r->buries = x->buries;
    r->kicks = x->kicks;
    r->tube = j->tube->name;
    r->tube_len = j->tube->name_len;
    r->body = job_body(j); /* in memory: callers load a spilled one first */
    r->body_size = j->body_size;
    if (type == BL_JOB && (x->entered || x->exptime)) {
        r->type = BL_JOBX;
        r->entered_wall = wall_of(e, x->entered ? x->entered : job_created(j));
        r->exptime_wall = x->exptime ? wall_of(e, x->exptime) : 0;
    }
}


/* ---- files ------------------------------------------------------------ */

/* Create binlog.index with its header, preallocated to the file size, on
 * disk before it is used: a crash never leaves a half-made file that
 * replay would take for damage. -1 (file removed, errno set) on failure,
 * logged unless quiet (a caller that says it once for many attempts). */
static int create_file(Binlog *b, uint32_t index, int quiet)
{
    char path[4096], hdr[BL_HEADER_SIZE];
    int fd, err;

    bl_file_name(b, index, path, sizeof path);
    if (index > JOB_FILE_MAX) {
        /* A job names its file in 28 bits: a larger number would name
         * another file, and compaction would drop live records. */
        if (!quiet)
            log_err("binlog: cannot create %s: file numbers end at %u", path, JOB_FILE_MAX);
        errno = EOVERFLOW;
        return -1;
    }
    fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    if (fd < 0) {
        if (!quiet)
            log_warn("binlog: create %s: %s", path, strerror(errno));
        return -1;
    }
    bl_encode_header(hdr);
    err = bl_disk.fallocate(fd, 0, (off_t)b->file_size);
    if (err == 0 && bl_disk.pwrite(fd, hdr, sizeof hdr, 0) != (ssize_t)sizeof hdr)
        err = errno ? errno : EIO;
    if (err == 0 && fsync(fd) < 0)
        err = errno;
    if (err) {
        if (err != ENOSPC && !quiet)
            log_err("binlog: preallocate %s: %s", path, strerror(err));
        close(fd);
        unlink(path);
        errno = err;
        return -1;
    }
    b->disk_bytes += b->file_size;
    return fd;
}

static int add_spare(Binlog *b)
{
    int fd;

    if (b->nspares == b->spares_cap) {
        size_t cap = b->spares_cap ? b->spares_cap * 2 : 4;
        int *sp = tb_realloc(b->spares, cap * sizeof *sp);
        if (!sp)
            return -1;
        b->spares = sp;
        b->spares_cap = cap;
    }
    fd = create_file(b, next_index(b), 1);
    if (fd < 0)
        return -1;
    b->spares[b->nspares++] = fd;
    sync_dir(b);
    if (b->no_room) {
        b->no_room = 0;
        log_info("binlog: room for new files again: puts are taken");
    }
    return 0;
}

/* No spare file could be made (a full disk, no file descriptor left, file
 * numbers used up): every command that needs new room answers
 * OUT_OF_MEMORY, deletes still work, the binlog stays healthy. Said once
 * in the log and in last-error, not once a refused put. */
static void no_room(Binlog *b, int err)
{
    if (b->no_room)
        return;
    b->no_room = 1;
    snprintf(b->last_error, sizeof b->last_error, "no room for a new file: %s",
             err == EOVERFLOW ? "file numbers used up" : strerror(err));
    log_warn("binlog: %s: puts answer OUT_OF_MEMORY until there is room", b->last_error);
}

/* Write what is placed but not written. */
static int write_pending(Binlog *b)
{
    size_t off = 0;

    while (off < b->wbuf.len) {
        ssize_t n = bl_disk.pwrite(b->cur_fd, b->wbuf.data + off, b->wbuf.len - off,
                           (off_t)(b->cur_written + off));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            log_err("binlog: write binlog.%u: %s", cur_file(b)->index,
                    n < 0 ? strerror(errno) : "short write");
            return -1;
        }
        off += (size_t)n;
    }
    b->cur_written += b->wbuf.len;
    if (b->wbuf.len)
        b->unsynced = 1;
    /* Written: the stream's subscribers (replication) get these very
     * bytes. */
    stream_publish(&b->stream, b->wbuf.data, b->wbuf.len, b->pos, b->placed_lsn);
    b->wbuf.len = 0;
    b->written_lsn = b->lsn;
    return 0;
}

static void report_durable(Engine *e, uint64_t upto);

static int sync_now(Engine *e)
{
    Binlog *b = bl(e);

    if (b->unsynced && !e->cfg->fsync_never && disk_sync(b->cur_fd) < 0) {
        log_err("binlog: fsync binlog.%u: %s", cur_file(b)->index, strerror(errno));
        return -1;
    }
    b->unsynced = 0;
    b->last_sync = e->now;
    return 0;
}

static void set_unhealthy(Engine *e, const char *why)
{
    if (bl(e)->healthy)
        log_err("binlog: unhealthy (%s): durable commands fail until it recovers", why);
    snprintf(bl(e)->last_error, sizeof bl(e)->last_error, "%s", why);
    bl(e)->healthy = 0;
}

static void settle_inflight(Engine *e);
static void drop_dead_files(Engine *e);
static int strict(const Engine *e);
static int append(Engine *e, const BlRecord *r);
static int append_pos(Engine *e);

/* Ids of jobs that are never logged (journal = false) must not come back
 * after a restart either: replay takes the next id from the highest id in
 * any record. So such a put logs, once per ID_BLOCK ids and once per file,
 * a delete record for an id not given out yet (a no-op at replay, but for
 * the id). */
#define ID_BLOCK 1024

static uint64_t id_mark_above(const Engine *e, uint64_t id)
{
    /* Above every id given out, not only above id: a job moved into such
     * a tube keeps its old id, and a journaled job may hold id + ID_BLOCK
     * (its delete record would delete that job). */
    uint64_t top = e->next_id > id ? e->next_id - 1 : id;

    return top + ID_BLOCK;
}

/* Switch to the next file: the first spare, or a new one. */
static int open_next(Engine *e)
{
    Binlog *b = bl(e);
    uint32_t index = cur_file(b)->index + 1;
    int fd;

    if (b->nspares) {
        fd = b->spares[0];
        memmove(b->spares, b->spares + 1, (b->nspares - 1) * sizeof *b->spares);
        b->nspares--;
    } else if ((fd = create_file(b, index, 0)) < 0) {
        return -1;
    } else {
        sync_dir(b);
    }
    if (bl_files_push(b, index) < 0) {
        /* keep the file as the next spare so the numbering stays whole */
        memmove(b->spares + 1, b->spares, b->nspares * sizeof *b->spares);
        b->spares[0] = fd;
        b->nspares++;
        return -1;
    }
    if (b->cur_fd >= 0) {
        settle_inflight(e); /* the syncer may be using the old fd */
        close(b->cur_fd);
    }
    b->cur_fd = fd;
    b->cur_used = b->cur_written = BL_HEADER_SIZE;
    cur_file(b)->bytes = b->file_size;
    if (b->id_mark) {
        /* The older file holding the mark may go: the new one carries it.
         * Ids given out since may have reached the mark, and a journaled
         * job may hold it now: the delete would take that job at replay
         * (and on a replica at once). Such a mark moves past them. */
        BlRecord r = {.type = BL_DELETE, .id = b->id_mark};
        if (r.id < e->next_id)
            r.id = b->id_mark = id_mark_above(e, e->next_id - 1);
        append(e, &r);
    }
    if (b->pos_persist)
        append_pos(e); /* likewise the position and the epoch */
    return 0;
}

/* Leave the current file: write, sync, give back the unused preallocated
 * tail, then go on in the next file. */
static int roll_over(Engine *e)
{
    Binlog *b = bl(e);

    settle_inflight(e);
    b->unsynced = 1; /* records a running sync did not cover may be here */
    if (write_pending(b) < 0 || sync_now(e) < 0)
        return -1;
    if (ftruncate(b->cur_fd, (off_t)b->cur_used) == 0) {
        b->disk_bytes -= b->file_size - b->cur_used;
        cur_file(b)->bytes = b->cur_used;
        if (!e->cfg->fsync_never && fsync(b->cur_fd) < 0)
            return -1;
    }
    return open_next(e);
}

/* Can a record of `size` bytes be placed, leaving room for `dels` delete
 * records? Counts the current file's tail and the spares. */
static int fits(const Binlog *b, uint64_t size, uint64_t dels)
{
    uint64_t per_file = del_room(b->file_size - BL_HEADER_SIZE);
    uint64_t spares = b->nspares, room;

    if (b->cur_used + size <= b->file_size) {
        room = del_room(b->file_size - b->cur_used - size);
    } else {
        if (!spares)
            return 0;
        spares--;
        room = del_room(b->file_size - BL_HEADER_SIZE - size);
    }
    return room + spares * per_file >= dels;
}

static int reserve(Engine *e, uint64_t size, uint64_t dels)
{
    Binlog *b = bl(e);

    if (!b->healthy)
        return -1;
    while (!fits(b, size, dels))
        if (add_spare(b) < 0) {
            no_room(b, errno);
            return -1;
        }
    return 0;
}

int binlog_reserve_put(Engine *e, const Job *j)
{
    if (!bl(e)->enabled)
        return 0;
    return reserve(e, bl_job_record_size(j), bl(e)->reserved + DEL);
}

int binlog_reserve_state(Engine *e)
{
    if (!bl(e)->enabled)
        return 0;
    return reserve(e, BL_STATE_SIZE, bl(e)->reserved);
}

/* The record just placed (b->lsn) waits for an fsync whatever -f says. */
static void must_sync_record(Binlog *b)
{
    if (!b->must_sync_from)
        b->must_sync_from = b->lsn;
    b->must_sync_last = b->lsn;
}

/* The record just placed (b->lsn) belongs to a sync_journal tube: its
 * acknowledgement waits for an fsync whatever -f says. */
static void must_sync(Binlog *b, const Tube *t)
{
    if (!t->pol.sync_journal)
        return;
    must_sync_record(b);
}

static int append_failed(Binlog *b)
{
    if (!b->lost_from)
        b->lost_from = b->lsn;
    return -1;
}

/* Place an encoded record in the current file (rolling over if needed). */
static int append(Engine *e, const BlRecord *r)
{
    Binlog *b = bl(e);
    size_t size = bl_record_size(r);

    /* A record that cannot be placed still takes its number, so that the
     * acknowledgement waiting for it is withdrawn at the commit. */
    b->lsn++;
    b->repl_lsn = b->lsn;
    if (b->cur_used + size > b->file_size && roll_over(e) < 0) {
        set_unhealthy(e, "cannot start a new file");
        return append_failed(b);
    }
    if (buf_reserve(&b->wbuf, size) < 0) {
        set_unhealthy(e, "out of memory");
        return append_failed(b);
    }
    bl_encode(r, b->wbuf.data + b->wbuf.len);
    b->wbuf.len += size;
    b->cur_used += size;
    b->records_written++;
    if (!b->follower && r->type != BL_POS)
        b->pos++;
    b->placed_lsn = b->lsn;
    return 0;
}

/* The position record that starts every file and follows each batch a
 * replica applies (doc/replication.md). */
static int append_pos(Engine *e)
{
    Binlog *b = bl(e);
    BlRecord r = {.type = BL_POS, .id = b->epoch, .pos = b->pos,
                  .epoch_start = b->epoch_start,
                  .flags = (uint8_t)((b->follower ? BL_POS_FOLLOWER : 0) |
                                     (b->unheard ? BL_POS_UNHEARD : 0))};

    return append(e, &r);
}

int binlog_set_position(Engine *e, uint64_t epoch, uint64_t pos, uint64_t epoch_start,
                        int follower)
{
    return binlog_set_position_ex(e, epoch, pos, epoch_start, follower, bl(e)->unheard);
}

int binlog_set_position_ex(Engine *e, uint64_t epoch, uint64_t pos, uint64_t epoch_start,
                           int follower, int unheard)
{
    Binlog *b = bl(e);

    if (!b->enabled)
        return -1;
    if (reserve(e, BL_POS_SIZE, b->reserved) < 0)
        return -1;
    b->epoch = epoch;
    b->pos = pos;
    b->epoch_start = epoch_start;
    b->follower = follower;
    b->unheard = unheard;
    b->pos_persist = 1;
    return append_pos(e);
}

/* j's record is the one just placed. */
static void pin(Binlog *b, Job *j)
{
    BlFile *f = cur_file(b);
    uint64_t size = bl_job_record_size(j);

    j->file = f->index;
    if (j->spilled) {
        job_spill_set_off(j, b->cur_used - size);
        if (j->loaded)
            spill_note(b->eng, j); /* its body may go once this is written */
    }
    f->live_jobs++;
    f->live_bytes += size;
    b->live_bytes += size;
}

static void unpin(Binlog *b, Job *j)
{
    BlFile *f = bl_file_of(b, j->file);
    uint64_t size = bl_job_record_size(j);

    if (f) {
        f->live_jobs--;
        f->live_bytes -= size;
    }
    b->live_bytes -= size;
    j->file = 0;
}

/* A delete record of id, which no job has: ids up to it are never given
 * out again, after a restart too. It becomes the mark every new file
 * carries (open_next), so it outlives the file holding this record even
 * when no higher id is journaled before compaction drops that file. */
static int write_mark(Engine *e, uint64_t id)
{
    Binlog *b = bl(e);
    BlRecord r = {.type = BL_DELETE, .id = id};

    if (reserve(e, DEL, b->reserved) < 0 || append(e, &r) < 0)
        return -1;
    if (id > b->id_mark)
        b->id_mark = id;
    return 0;
}

static void mark_id(Engine *e, uint64_t id)
{
    if (id > bl(e)->id_mark)
        write_mark(e, id_mark_above(e, id));
}

int binlog_mark_ids(Engine *e, uint64_t upto)
{
    return bl(e)->enabled ? write_mark(e, upto) : -1;
}

void binlog_put(Engine *e, Job *j)
{
    BlRecord r;

    int left_sync = bl(e)->left_sync;

    bl(e)->left_sync = 0;
    if (!bl(e)->enabled)
        return;
    if (!j->tube->pol.journal) {
        /* The mark keeps ids unique over a restart of this server; no
         * replica ever sees the job, so its put waits for no replica. */
        uint64_t keep = bl(e)->repl_lsn;
        mark_id(e, j->id);
        bl(e)->repl_lsn = keep;
        return;
    }
    /* A spilled job logged again (moved) needs its body: callers load it;
     * if its record could not be read it stays unlogged (reported). */
    if (!job_body(j))
        return;
    job_record(e, j, &r, BL_JOB);
    if (append(e, &r) < 0)
        return;
    must_sync(bl(e), j->tube);
    if (left_sync)
        must_sync_record(bl(e)); /* a move out of a sync_journal tube */
    pin(bl(e), j);
    bl(e)->reserved += DEL;
}

static void child_record(const Tube *t, int on, BlRecord *r)
{
    memset(r, 0, sizeof *r);
    r->type = BL_CHILD;
    r->flags = on ? BL_CHILD_ON : 0;
    r->tube = t->name;
    r->tube_len = (uint8_t)t->name_len;
}

void binlog_child(Engine *e, Tube *t, int on)
{
    Binlog *b = bl(e);
    BlRecord r;

    if (!b->enabled || (on && t->child_file) || (!on && !t->child_file))
        return;
    child_record(t, on, &r);
    if (!on) {
        /* Its room was promised at the registration: it fits. */
        bl_child_unpin(b, t);
        append(e, &r);
        return;
    }
    if (reserve(e, bl_record_size(&r), b->reserved + bl_child_room(t)) < 0 ||
        append(e, &r) < 0) {
        log_err("fanout: cannot journal the child %.*s (no disk room, or the binlog is "
                "unhealthy): it stays registered until a restart, or until the binlog "
                "rewrites its state after a failure", (int)t->name_len, t->name);
        return;
    }
    bl_child_pin(b, t, cur_file(b)->index);
}

/* A registered child's record again, in the current file (compaction,
 * recovery): 0, or -1 (no room: it keeps its old record). */
static int rewrite_child(Engine *e, Tube *t)
{
    Binlog *b = bl(e);
    BlRecord r;

    child_record(t, 1, &r);
    if (reserve(e, bl_record_size(&r), b->reserved) < 0 || append(e, &r) < 0)
        return -1;
    bl_child_pin(b, t, cur_file(b)->index);
    b->records_migrated++;
    return 0;
}

/* Rewrite the registered children whose record is in file `index`; for
 * index 0 (a rewrite of the whole state) every registered child, also one
 * whose registration found no room then. -1 when one could not be
 * written. */
static int move_children(Engine *e, uint32_t index)
{
    for (size_t i = 0; i < e->tubes.len; i++) {
        Tube *t = e->tubes.list[i];
        if (t->registered && (index ? t->child_file == index : 1) && rewrite_child(e, t) < 0)
            return -1;
    }
    return 0;
}

int binlog_write_now(Engine *e)
{
    Binlog *b = bl(e);

    if (!b->enabled || !b->healthy)
        return -1;
    b->unsynced = 1;
    if (write_pending(b) < 0 || sync_now(e) < 0) {
        set_unhealthy(e, "write or fsync failed");
        return -1;
    }
    report_durable(e, b->written_lsn);
    return 0;
}

/* j's record again, in the current file. A spilled body is read from
 * its record: into j (load: compaction, one file's worth at most; the body
 * stays in memory until the new record is written, so a failed write
 * loses nothing), or only for the copy (recovery, which rewrites every
 * job and must not hold every body). 0, -1 (no room, no memory: stop),
 * -2 (its record cannot be read). */
static int rewrite_record(Engine *e, Job *j, int load)
{
    void *tmp = NULL;
    const char *body = NULL;
    BlRecord r;
    int rc = load ? spill_load(e, j) : spill_borrow(e, j, &tmp, &body);

    if (rc < 0)
        return rc;
    if (load)
        body = job_body(j);
    rc = -1;
    /* Moving must not eat the room kept for delete records. */
    if (reserve(e, bl_job_record_size(j), bl(e)->reserved) == 0) {
        job_record(e, j, &r, BL_JOB);
        r.body = body;
        rc = append(e, &r);
    }
    job_body_free(tmp);
    return rc;
}

int64_t binlog_rewrite(Engine *e, Job *j)
{
    Binlog *b = bl(e);

    if (!b->enabled || !j->file || !job_body(j) || rewrite_record(e, j, 1) < 0)
        return -1;
    must_sync(b, j->tube);
    unpin(b, j);
    pin(b, j);
    return (int64_t)(b->cur_used - bl_job_record_size(j));
}

int binlog_encode_job(Engine *e, Job *j, Buf *out)
{
    void *tmp = NULL;
    const char *body = NULL;
    BlRecord r;
    int rc = spill_borrow(e, j, &tmp, &body);

    if (rc < 0)
        return rc;
    job_record(e, j, &r, BL_JOB);
    r.body = body;
    rc = buf_reserve(out, bl_record_size(&r));
    if (rc == 0) {
        bl_encode(&r, out->data + out->len);
        out->len += bl_record_size(&r);
    }
    job_body_free(tmp);
    return rc;
}

void binlog_state(Engine *e, Job *j)
{
    BlRecord r;

    if (!bl(e)->enabled || !j->file)
        return;
    job_record(e, j, &r, BL_STATE);
    if (append(e, &r) == 0)
        must_sync(bl(e), j->tube);
}

void binlog_leave(Engine *e, Job *j, int to_journaled)
{
    if (!bl(e)->enabled || !j->file)
        return;
    if (!to_journaled) {
        binlog_delete(e, j);
        return;
    }
    /* The record binlog_put() writes next replaces this one at replay;
     * leaving a sync_journal tube, it is synced before the reply too. */
    unpin(bl(e), j);
    bl(e)->reserved -= DEL;
    bl(e)->left_sync = j->tube->pol.sync_journal;
}

int binlog_flush(Engine *e, const Tube *t, uint64_t max_id, const uint64_t *keep,
                 uint32_t nkeep, uint64_t flushed)
{
    /* Only a journaled tube's jobs each kept room for a delete record. */
    uint64_t freed = t->pol.journal ? flushed * DEL : 0;
    BlRecord r = {.type = BL_FLUSH, .id = max_id, .tube = t->name,
                  .tube_len = t->name_len, .nkeep = nkeep};
    char *ids;

    /* Written for an unjournaled tube too: a reload may have turned its
     * journal off while it held jobs whose records are in the files, and
     * without this record they would come back at the next start. */
    if (!bl(e)->enabled)
        return 0;
    /* The room kept for the flushed jobs' delete records is free now. */
    if (reserve(e, bl_record_size(&r), bl(e)->reserved > freed ? bl(e)->reserved - freed : 0) < 0)
        return -1;
    ids = tb_malloc((size_t)nkeep * 8 + 1);
    if (!ids)
        return -1;
    for (uint32_t i = 0; i < nkeep; i++)
        for (int k = 0; k < 8; k++)
            ids[i * 8 + (uint32_t)k] = (char)(keep[i] >> (8 * k));
    r.keep = ids;
    if (append(e, &r) == 0)
        must_sync(bl(e), t);
    tb_free(ids);
    return 0;
}

void binlog_unpin(Engine *e, Job *j)
{
    if (!bl(e)->enabled || !j->file)
        return;
    bl(e)->reserved -= DEL;
    unpin(bl(e), j);
}

void binlog_delete(Engine *e, Job *j)
{
    BlRecord r = {.type = BL_DELETE, .id = j->id};

    if (!bl(e)->enabled || !j->file)
        return;
    bl(e)->reserved -= DEL;
    if (append(e, &r) == 0)
        must_sync(bl(e), j->tube);
    unpin(bl(e), j);
}

/* ---- commit ----------------------------------------------------------- */

/* Every record placed gets the next log sequence number; a front-end's
 * ticket is one of them. The binlog tells the engine's hooks how far the
 * records are durable (written, or with -f 0 synced) and from where they
 * were lost; it never sees who waits. */

static int strict(const Engine *e)
{
    return e->cfg->fsync_ms == 0 && !e->cfg->fsync_never;
}

static void report_durable(Engine *e, uint64_t upto)
{
    Binlog *b = bl(e);

    if (upto > b->durable_lsn)
        b->durable_lsn = upto;
    if (e->hooks.durable)
        e->hooks.durable(e->hooks.arg, b->durable_lsn);
}

/* Records from `from` on never reached the disk (or its cache): whoever
 * holds an acknowledgement of them must take it back. */
static void report_lost(Engine *e, uint64_t from)
{
    if (e->hooks.lost)
        e->hooks.lost(e->hooks.arg, from);
}

uint64_t binlog_ticket(const Engine *e)
{
    const Binlog *b = &e->binlog;

    if (!b->enabled || b->lsn <= b->durable_lsn)
        return 0;
    return b->lsn;
}

uint64_t binlog_repl_ticket(const Engine *e)
{
    const Binlog *b = &e->binlog;

    if (!binlog_ticket(e) || b->repl_lsn <= b->durable_lsn)
        return 0;
    return b->repl_lsn;
}

static void start_sync(Engine *e)
{
    Binlog *b = bl(e);

    if (syncer_start(&b->syncer, b->cur_fd) < 0)
        return; /* busy: the end of the current sync starts the next */
    b->sync_target = b->written_lsn;
    b->unsynced = 0;
    b->last_sync = e->now;
}

/* A sync ended with err (0 or an errno). */
static void sync_ended(Engine *e, int err)
{
    Binlog *b = bl(e);

    if (err) {
        log_err("binlog: fsync binlog.%u: %s", cur_file(b)->index, strerror(err));
        set_unhealthy(e, "fsync failed");
        report_lost(e, b->durable_lsn + 1);
        return;
    }
    if (b->must_sync_from && b->must_sync_from <= b->sync_target)
        b->must_sync_from = b->must_sync_last > b->sync_target ? b->sync_target + 1 : 0;
    report_durable(e, b->sync_target);
}

/* Wait for an in-flight sync (before its fd is closed, or at shutdown). */
static void settle_inflight(Engine *e)
{
    Binlog *b = bl(e);

    if (b->syncer.running && b->syncer.busy)
        sync_ended(e, syncer_wait(&b->syncer));
}

/* With -f 0 a sync runs whenever records are written and not yet synced:
 * one fsync covers everything written meanwhile (group commit). A sync
 * that has ended while the loop was busy (its eventfd not read yet) is
 * taken here, so the records just written start the next one now rather
 * than after another epoll round: on a replica, that round is on the
 * path of every acknowledgement. */
static void sync_if_needed(Engine *e)
{
    Binlog *b = bl(e);
    int err;

    /* Not while unhealthy: the file failed and is given up; the recovery
     * syncs the file it writes (try_recover()). A sync started at each
     * commit would fail at once and wake the loop for the next one: a
     * failing disk spun a core and logged tens of thousands of lines a
     * second. */
    if (!strict(e) || !b->healthy || b->written_lsn <= b->durable_lsn)
        return;
    if (b->syncer.busy && (err = syncer_poll(&b->syncer)) >= 0) {
        sync_ended(e, err);
        if (!b->healthy || b->written_lsn <= b->durable_lsn)
            return;
    }
    start_sync(e);
}

static void on_synced(EvSource *src, uint32_t events)
{
    Binlog *b = container_of(src, Binlog, sync_ev);
    Engine *e = b->eng;
    int err = syncer_finish(&b->syncer);

    if (err < 0)
        return; /* already handled by settle_inflight() */
    sync_ended(e, err);
    if (b->healthy)
        sync_if_needed(e);
    if (b->healthy && !strict(e) && b->must_sync_from && b->written_lsn >= b->must_sync_from)
        start_sync(e);
}

void binlog_poll_sync(Engine *e)
{
    Binlog *b = bl(e);

    if (b->enabled && b->healthy && b->syncer.busy)
        sync_if_needed(e);
}

void binlog_commit(Engine *e)
{
    Binlog *b = bl(e);

    if (!b->enabled)
        return;
    if (b->lost_from) {
        report_lost(e, b->lost_from);
        b->lost_from = 0;
    }
    if (write_pending(b) < 0) {
        set_unhealthy(e, "write failed");
        report_lost(e, b->written_lsn + 1);
        return;
    }
    if (b->healthy)
        drop_dead_files(e); /* (the tick's call skips while records wait) */
    if (strict(e)) {
        sync_if_needed(e);
    } else if (b->must_sync_from) {
        /* A sync_journal tube's records are durable only once synced; the
         * others of this write are too, but not past the first of those. */
        report_durable(e, b->must_sync_from - 1);
        if (b->healthy) /* (unhealthy: the recovery's sync, as above) */
            start_sync(e); /* when one runs already, its end starts this one */
    } else {
        report_durable(e, b->written_lsn);
    }
}

void binlog_settle(Engine *e)
{
    Binlog *b = bl(e);

    if (!b->enabled)
        return;
    settle_inflight(e);
    if (b->lsn > b->durable_lsn || b->unsynced) {
        b->unsynced = 1;
        if (write_pending(b) < 0 || sync_now(e) < 0) {
            set_unhealthy(e, "write or fsync failed");
            report_lost(e, b->durable_lsn + 1);
            return;
        }
    }
    report_durable(e, b->lsn);
}

/* ---- compaction ------------------------------------------------------- */

static void drop_dead_files(Engine *e)
{
    Binlog *b = bl(e);
    int dropped = 0;

    /* A file whose jobs were just written again elsewhere (a move, a
     * reload's spill) goes only once those records are written. */
    if (b->wbuf.len)
        return;
    while (b->nfiles > 1 && b->files[0].live_jobs == 0) {
        char path[4096];
        bl_file_name(b, b->files[0].index, path, sizeof path);
        if (unlink(path) < 0 && errno != ENOENT) {
            log_warn("binlog: remove %s: %s", path, strerror(errno));
            break;
        }
        b->disk_bytes -= b->files[0].bytes;
        memmove(b->files, b->files + 1, (b->nfiles - 1) * sizeof *b->files);
        b->nfiles--;
        dropped = 1;
    }
    if (dropped) {
        sync_dir(b);
        spill_files_dropped(e, b->files[0].index);
    }
}

/* A spilled job written again by a recovery: it points at its new record
 * only once that is on disk (until then its old record is its body's only
 * copy, and a failed recovery must not lose it). */
typedef struct {
    Job *job;
    uint32_t index;
    uint64_t off;
} Repin;

typedef struct {
    Engine *e;
    uint32_t index;
    int failed;
    uint64_t damaged;  /* a spilled job whose record cannot be read */
    Repin *repin;      /* recovery: spilled jobs to point at new records */
    size_t nrepin, repin_cap;
} MoveCtx;

static void move_job(HashNode *n, void *arg)
{
    MoveCtx *m = arg;
    Job *j = container_of(n, Job, hnode);

    int rc;

    if (m->failed || j->file != m->index || job_dead(j))
        return;
    if ((rc = rewrite_record(m->e, j, 1)) < 0) {
        if (rc == -2 && !m->damaged)
            m->damaged = j->id; /* dropped after the walk (compact()) */
        else if (rc != -2)
            m->failed = 1; /* no room, no memory, an I/O error: next tick */
        return;
    }
    unpin(bl(m->e), j);
    pin(bl(m->e), j);
    bl(m->e)->records_migrated++;
}

/* A spilled job whose record cannot be read any more has lost its body:
 * it is deleted (and said so), or its file could never go. Replay would
 * have refused the file, and --recover dropped the record, the same way. */
static void drop_damaged(Engine *e, uint64_t id)
{
    Job *j = job_table_find(&e->jobs, id);

    if (!j || j->state == JOB_RESERVED)
        return;
    log_err("binlog: job %llu is lost: its record in binlog.%u cannot be read back; "
            "deleted so the file can go", (unsigned long long)id, j->file);
    binlog_delete(e, j);
    queue_delete(e, j);
}

/* Move the oldest file's live jobs forward when the files hold much more
 * than the live data. One file per call, so the pause stays short. */
static uint64_t compact(Engine *e)
{
    Binlog *b = bl(e);
    MoveCtx m = {e, 0, 0, 0, NULL, 0, 0};
    uint64_t before = b->records_migrated;

    if (b->nfiles < 2 ||
        b->disk_bytes <= 2 * b->live_bytes + 2 * b->file_size + b->nspares * b->file_size)
        return 0;
    m.index = b->files[0].index;
    hash_each(&e->jobs, move_job, &m);
    if (!m.failed)
        move_children(e, m.index); /* a failure: the file stays, next tick */
    if (m.damaged)
        drop_damaged(e, m.damaged);
    if (b->records_migrated != before)
        b->compactions++;
    return b->records_migrated - before;
}

static void try_recover(Engine *e);

/* Spare files beyond the room the live jobs' delete records need (after
 * a flush-tube, say) go back to the disk, the newest first; a whole file of
 * slack stays, so puts at the edge do not make and remove a file each. */
static void trim_spares(Engine *e)
{
    Binlog *b = bl(e);

    while (b->nspares) {
        char path[4096];
        b->nspares--;
        if (!fits(b, 0, b->reserved + b->file_size)) {
            b->nspares++;
            return;
        }
        bl_file_name(b, cur_file(b)->index + 1 + (uint32_t)b->nspares, path, sizeof path);
        close(b->spares[b->nspares]);
        if (unlink(path) < 0)
            log_warn("binlog: remove %s: %s", path, strerror(errno));
        b->disk_bytes -= b->file_size;
    }
}

void binlog_tick(Engine *e)
{
    Binlog *b = bl(e);

    if (!b->enabled)
        return;
    if (b->healthy && !e->ngraves)
        trim_spares(e);
    if (b->healthy) {
        /* Moved records must be on disk before the file they leave goes:
         * write and sync them now (rare: once per compacted file). */
        if (compact(e) && (write_pending(b) < 0 || sync_now(e) < 0)) {
            set_unhealthy(e, "write or fsync failed");
            return;
        }
        drop_dead_files(e);
    } else {
        try_recover(e);
    }
    if (b->healthy && b->unsynced && !e->cfg->fsync_never && !strict(e) &&
        e->now - b->last_sync >= (int64_t)e->cfg->fsync_ms * NS_PER_MSEC) {
        if (write_pending(b) < 0)
            set_unhealthy(e, "write failed");
        else
            start_sync(e); /* off the loop; the result arrives by eventfd */
    }
}

int64_t binlog_next_due(const Engine *e)
{
    const Binlog *b = &e->binlog;

    if (!b->enabled)
        return INT64_MAX;
    if (!b->healthy) /* the next try to recover, idle or not */
        return b->last_recover_try + NS_PER_SEC;
    if (!b->unsynced || e->cfg->fsync_never || e->cfg->fsync_ms == 0 || b->syncer.busy)
        return INT64_MAX;
    return b->last_sync + (int64_t)e->cfg->fsync_ms * NS_PER_MSEC;
}

/* ---- recovery from a failed write ------------------------------------- */

static void snapshot_job(HashNode *n, void *arg)
{
    MoveCtx *m = arg;
    Job *j = container_of(n, Job, hnode);

    int rc;

    if (m->failed || job_dead(j))
        return;
    /* A spilled job whose record cannot be read keeps pinning it. */
    if ((rc = rewrite_record(m->e, j, 0)) < 0) {
        if (rc != -2)
            m->failed = 1;
        return;
    }
    if (j->spilled && !j->loaded && j->file) {
        Binlog *b = bl(m->e);
        if (m->nrepin == m->repin_cap) {
            size_t c = m->repin_cap ? m->repin_cap * 2 : 64;
            Repin *p = tb_realloc(m->repin, c * sizeof *p);
            if (!p) {
                m->failed = 1;
                return;
            }
            m->repin = p;
            m->repin_cap = c;
        }
        m->repin[m->nrepin++] =
            (Repin){j, cur_file(b)->index, b->cur_used - bl_job_record_size(j)};
        return;
    }
    if (j->file) {
        unpin(bl(m->e), j);
        bl(m->e)->reserved -= DEL;
    }
    pin(bl(m->e), j);
    bl(m->e)->reserved += DEL;
}

/* The recovery's records are on disk: its spilled jobs point at them. */
static void repin_all(MoveCtx *m)
{
    Binlog *b = bl(m->e);

    for (size_t i = 0; i < m->nrepin; i++) {
        Job *j = m->repin[i].job;
        BlFile *f = bl_file_of(b, m->repin[i].index);
        uint64_t size = bl_job_record_size(j);

        unpin(b, j);
        j->file = m->repin[i].index;
        if (f) {
            f->live_jobs++;
            f->live_bytes += size;
        }
        b->live_bytes += size;
        job_spill_set_off(j, m->repin[i].off);
    }
    tb_free(m->repin);
    m->repin = NULL;
    m->nrepin = m->repin_cap = 0;
}

/* After a failed write or fsync the current file cannot be trusted: start
 * a fresh file holding every live job, and be healthy again once it is on
 * disk. Older files then hold nothing live and are dropped. */
static void try_recover(Engine *e)
{
    Binlog *b = bl(e);
    MoveCtx m = {e, 0, 0, 0, NULL, 0, 0};

    if (e->now - b->last_recover_try < NS_PER_SEC)
        return;
    b->last_recover_try = e->now;
    b->wbuf.len = 0; /* these never reached the disk; the snapshot has them */
    b->unsynced = 0;
    /* Replies still held for records made since the failure (deletes, say)
     * wait for no sync of the failed file (sync_if_needed()): this try
     * makes them durable, or they are withdrawn when it fails. */
    if (open_next(e) < 0) {
        report_lost(e, b->durable_lsn + 1);
        return;
    }
    b->healthy = 1; /* let append() run; reset on failure */
    hash_each(&e->jobs, snapshot_job, &m);
    if (!m.failed && move_children(e, 0) < 0)
        m.failed = 1;
    if (m.failed || write_pending(b) < 0 || sync_now(e) < 0) {
        b->healthy = 0;
        tb_free(m.repin); /* they keep their old records */
        report_lost(e, b->durable_lsn + 1);
        return;
    }
    repin_all(&m);
    stream_reset(&b->stream); /* subscribers missed the lost records */
    log_info("binlog: healthy again: %zu jobs written to binlog.%u",
             e->jobs.len, cur_file(b)->index);
}

/* Write every live job into the current file and sync, so no older file
 * holds anything live and all of them go: after --recover the damaged
 * files are gone and the next start needs no flag. */
static int rewrite_all(Engine *e)
{
    MoveCtx m = {e, 0, 0, 0, NULL, 0, 0};

    hash_each(&e->jobs, snapshot_job, &m);
    if (!m.failed && move_children(e, 0) < 0)
        m.failed = 1;
    if (m.failed || write_pending(bl(e)) < 0 || sync_now(e) < 0) {
        tb_free(m.repin);
        return -1;
    }
    repin_all(&m);
    drop_dead_files(e);
    log_info("binlog: --recover: %zu jobs rewritten; damaged files removed", e->jobs.len);
    return 0;
}

static int open_dir(Binlog *b, char *err, size_t errlen)
{
    char path[4096];

    if (mkdir(b->dir, 0750) < 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot create binlog directory %s: %s", b->dir, strerror(errno));
        return -1;
    }
    b->dirfd = open(b->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (b->dirfd < 0) {
        snprintf(err, errlen, "cannot open binlog directory %s: %s", b->dir, strerror(errno));
        return -1;
    }
    snprintf(path, sizeof path, "%s/lock", b->dir);
    b->lockfd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
    if (b->lockfd < 0) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    if (flock(b->lockfd, LOCK_EX | LOCK_NB) < 0) {
        snprintf(err, errlen, errno == EWOULDBLOCK
                 ? "binlog directory %s is in use: another tubed holds the lock %s"
                 : "cannot lock %s: %s", b->dir, errno == EWOULDBLOCK ? path : strerror(errno));
        return -1;
    }
    return 0;
}

/* A start on a full disk: the replayed files are never written again, so
 * the preallocated tails a crash left in them (zeros past their records)
 * go back to the disk, which may then hold the new file. How many bytes
 * were given back. */
static uint64_t give_back_tails(Binlog *b)
{
    uint64_t freed = 0;

    for (size_t i = 0; i < b->nfiles; i++) {
        BlFile *f = &b->files[i];
        char path[4096];
        struct stat st;
        int fd;

        if (!f->tail)
            continue;
        bl_file_name(b, f->index, path, sizeof path);
        fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0)
            continue;
        if (ftruncate(fd, (off_t)f->tail) == 0 && fstat(fd, &st) == 0) {
            uint64_t now = bl_disk_bytes(&st);
            if (now < f->bytes) {
                freed += f->bytes - now;
                b->disk_bytes -= f->bytes - now;
                f->bytes = now;
            }
            f->tail = 0;
        }
        close(fd);
    }
    if (freed)
        log_warn("binlog: the disk is full: gave back %llu bytes of preallocated room "
                 "that a crash left in the old files", (unsigned long long)freed);
    return freed;
}

int binlog_open(Engine *e, char *err, size_t errlen)
{
    Binlog *b = bl(e);
    int64_t t0 = clock_mono();
    uint32_t first;

    b->enabled = 1;
    b->healthy = 1;
    b->cur_fd = -1;
    b->eng = e;
    if (spill_init(e) < 0) {
        snprintf(err, errlen, "cannot start the binlog read-back thread: %s", strerror(errno));
        return -1;
    }
    if (syncer_init(&b->syncer, disk_sync) < 0) {
        snprintf(err, errlen, "cannot start the binlog sync thread: %s", strerror(errno));
        return -1;
    }
    b->sync_ev.handler = on_synced;
    if (ev_add(e->loop, &b->sync_ev, b->syncer.efd, EPOLLIN) < 0) {
        snprintf(err, errlen, "epoll_ctl: %s", strerror(errno));
        return -1;
    }
    b->dir = e->cfg->binlog_dir;
    b->recover = e->cfg->recover;
    b->file_size = e->cfg->binlog_size;
    if (b->file_size < (uint64_t)e->cfg->max_job_size + 4096) {
        b->file_size = (uint64_t)e->cfg->max_job_size + 4096;
        log_warn("binlog: -s raised to %llu bytes to hold the largest job",
                 (unsigned long long)b->file_size);
    }
    if (open_dir(b, err, errlen) < 0 || bl_replay(e, &first, err, errlen) < 0)
        return -1;
    for (size_t i = 0; i < b->nfiles; i++)
        b->disk_bytes += b->files[i].bytes;
    b->replayed_jobs = e->jobs.len;
    if (spill_after_replay(e) < 0)
        log_warn("binlog: out of memory for the read-ahead of spilled jobs: they are read when needed");
    /* The new current file: the numbering goes on after the newest. */
    b->cur_fd = create_file(b, first, 0);
    if (b->cur_fd < 0 && errno == ENOSPC && give_back_tails(b))
        b->cur_fd = create_file(b, first, 0);
    if (b->cur_fd < 0 || bl_files_push(b, first) < 0) {
        snprintf(err, errlen, "cannot create %s/binlog.%u: %s", b->dir, first, strerror(errno));
        return -1;
    }
    sync_dir(b);
    b->cur_used = b->cur_written = BL_HEADER_SIZE;
    cur_file(b)->bytes = b->file_size;
    b->last_sync = e->now;
    if (!b->epoch)
        b->epoch = 1; /* a server never promoted */
    /* The role is the command line's, not the last position record's: a
     * former replica (or a primary that once followed) started without
     * replica_of is a primary, and its own records must count, or its
     * position would stand still while it takes writes (its replicas
     * would see a stream that skips, and acknowledge positions it says it
     * never made). */
    b->follower = e->cfg->replica_of ? 1 : 0;
    if (!b->follower)
        b->unheard = 0; /* a primary follows nobody */
    if (e->cfg->replica_of || e->cfg->sync_replicas)
        b->pos_persist = 1;
    if (b->pos_persist)
        append_pos(e);
    if (b->damaged && rewrite_all(e) < 0) {
        snprintf(err, errlen, "--recover: cannot write the recovered jobs to %s", b->dir);
        return -1;
    }
    log_info("binlog: %s: replayed %llu jobs from %zu files in %lld ms; writing binlog.%u",
             b->dir, (unsigned long long)b->replayed_jobs, b->nfiles - 1,
             (long long)((clock_mono() - t0) / NS_PER_MSEC), first);
    return 0;
}

void binlog_close(Engine *e)
{
    Binlog *b = bl(e);

    if (!b->enabled)
        return;
    settle_inflight(e);
    spill_stop(e);
    if (b->syncer.running) {
        ev_del(e->loop, &b->sync_ev);
        syncer_stop(&b->syncer);
    }
    if (b->cur_fd >= 0) {
        b->unsynced = 1;
        if (b->healthy && (write_pending(b) < 0 || sync_now(e) < 0))
            log_err("binlog: final sync failed");
        if (ftruncate(b->cur_fd, (off_t)b->cur_used) == 0 && !e->cfg->fsync_never)
            fsync(b->cur_fd);
        close(b->cur_fd);
    }
    for (size_t i = 0; i < b->nspares; i++) {
        char path[4096];
        /* Spares hold nothing: remove them rather than leave empty files
         * that later starts would have to carry. */
        bl_file_name(b, cur_file(b)->index + 1 + (uint32_t)i, path, sizeof path);
        close(b->spares[i]);
        unlink(path);
    }
    if (b->dirfd >= 0) {
        fsync(b->dirfd);
        close(b->dirfd);
    }
    if (b->lockfd >= 0)
        close(b->lockfd);
    buf_free(&b->wbuf);
    tb_free(b->files);
    tb_free(b->spares);
    b->enabled = 0;
}
