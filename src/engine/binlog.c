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
#include "blreplay.h"
#include "clock.h"
#include "conn.h"
#include "job.h"
#include "log.h"
#include "numparse.h"
#include "queue.h"
#include "server.h"

#define DEL BL_DELETE_SIZE

BlDisk bl_disk = {posix_fallocate, pwrite, fdatasync};

/* The sync thread calls this, so a test's replacement is seen at once. */
static int disk_sync(int fd)
{
    return bl_disk.fdatasync(fd);
}

/* ---- small helpers ---------------------------------------------------- */


static uint32_t next_index(const Binlog *b)
{
    return b->files[b->nfiles - 1].index + 1 + (uint32_t)b->nspares;
}

void bl_file_name(const Binlog *b, uint32_t index, char *out, size_t n)
{
    snprintf(out, n, "%s/binlog.%u", b->dir, index);
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

/* A monotonic time as realtime, for the log. s->now is fixed for a loop
 * iteration, so the realtime is read once per iteration, not per record. */
static int64_t wall_of(Server *s, int64_t mono)
{
    Binlog *b = &s->binlog;

    if (b->wall_mono != s->now || !b->wall_cache) {
        b->wall_cache = clock_wall();
        b->wall_mono = s->now;
    }
    return b->wall_cache + (mono - s->now);
}

/* A logged realtime on the monotonic clock. Values come from disk, so the
 * arithmetic must not overflow whatever they are: the offset is clamped to
 * about a century either way (a delay is at most 2^32 s, ~136 years). */
int64_t bl_mono_of(const Server *s, int64_t wall, int64_t now)
{
    const int64_t lim = (int64_t)5000000000 * NS_PER_SEC;
    int64_t d;

    if (wall > now + lim)
        d = lim;
    else if (wall < now - lim)
        d = -lim;
    else
        d = wall - now;
    return s->now + d;
}

/* The durable view of a job: a reserved job is logged as ready. */
static void job_record(Server *s, const Job *j, BlRecord *r, int type)
{
    const JobExt *e = job_ext_view(j);

    memset(r, 0, sizeof *r);
    r->type = (uint8_t)type;
    r->id = j->id;
    r->pri = j->pri;
    r->delay = e->delay;
    r->ttr = j->ttr;
    r->state = j->state == JOB_RESERVED ? JOB_READY : j->state;
    if (j->state == JOB_DELAYED)
        r->deadline_wall = wall_of(s, e->deadline);
    r->created_wall = wall_of(s, j->created);
    r->reserves = e->reserves;
    r->timeouts = e->timeouts;
    r->releases = e->releases;
    r->buries = e->buries;
    r->kicks = e->kicks;
    r->tube = j->tube->name;
    r->tube_len = j->tube->name_len;
    r->body = j->body;
    r->body_size = j->body_size;
}

size_t bl_job_record_size(const Job *j)
{
    return BL_JOB_FIXED + j->tube->name_len + (size_t)j->body_size;
}

BlFile *bl_file_of(Binlog *b, uint32_t index)
{
    if (!b->nfiles || index < b->files[0].index)
        return NULL;
    index -= b->files[0].index;
    return index < b->nfiles ? &b->files[index] : NULL;
}

int bl_files_push(Binlog *b, uint32_t index)
{
    if (b->nfiles == b->files_cap) {
        size_t cap = b->files_cap ? b->files_cap * 2 : 16;
        BlFile *f = tb_realloc(b->files, cap * sizeof *f);
        if (!f)
            return -1;
        b->files = f;
        b->files_cap = cap;
    }
    b->files[b->nfiles++] = (BlFile){.index = index};
    return 0;
}

/* ---- files ------------------------------------------------------------ */

/* Create binlog.index with its header, preallocated to the file size, on
 * disk before it is used: a crash never leaves a half-made file that
 * replay would take for damage. -1 (file removed) on failure. */
static int create_file(Binlog *b, uint32_t index)
{
    char path[4096], hdr[BL_HEADER_SIZE];
    int fd, err;

    bl_file_name(b, index, path, sizeof path);
    fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    if (fd < 0) {
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
        if (err != ENOSPC)
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
    fd = create_file(b, next_index(b));
    if (fd < 0)
        return -1;
    b->spares[b->nspares++] = fd;
    sync_dir(b);
    return 0;
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
    b->wbuf.len = 0;
    return 0;
}

static int sync_now(Server *s)
{
    Binlog *b = bl(s);

    if (b->unsynced && !s->cfg.fsync_never && bl_disk.fdatasync(b->cur_fd) < 0) {
        log_err("binlog: fsync binlog.%u: %s", cur_file(b)->index, strerror(errno));
        return -1;
    }
    b->unsynced = 0;
    b->last_sync = s->now;
    return 0;
}

static void set_unhealthy(Server *s, const char *why)
{
    if (bl(s)->healthy)
        log_err("binlog: unhealthy (%s): durable commands fail until it recovers", why);
    bl(s)->healthy = 0;
}

static void settle_inflight(Server *s);

/* Switch to the next file: the first spare, or a new one. */
static int open_next(Server *s)
{
    Binlog *b = bl(s);
    uint32_t index = cur_file(b)->index + 1;
    int fd;

    if (b->nspares) {
        fd = b->spares[0];
        memmove(b->spares, b->spares + 1, (b->nspares - 1) * sizeof *b->spares);
        b->nspares--;
    } else if ((fd = create_file(b, index)) < 0) {
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
        settle_inflight(s); /* the syncer may be using the old fd */
        close(b->cur_fd);
    }
    b->cur_fd = fd;
    b->cur_used = b->cur_written = BL_HEADER_SIZE;
    cur_file(b)->bytes = b->file_size;
    return 0;
}

/* Leave the current file: write, sync, give back the unused preallocated
 * tail, then go on in the next file. */
static int roll_over(Server *s)
{
    Binlog *b = bl(s);

    settle_inflight(s);
    b->unsynced = 1; /* records of the held generation may be here too */
    if (write_pending(b) < 0 || sync_now(s) < 0)
        return -1;
    if (ftruncate(b->cur_fd, (off_t)b->cur_used) == 0) {
        b->disk_bytes -= b->file_size - b->cur_used;
        cur_file(b)->bytes = b->cur_used;
        if (!s->cfg.fsync_never && fsync(b->cur_fd) < 0)
            return -1;
    }
    return open_next(s);
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

static int reserve(Server *s, uint64_t size, uint64_t dels)
{
    Binlog *b = bl(s);

    if (!b->healthy)
        return -1;
    while (!fits(b, size, dels))
        if (add_spare(b) < 0)
            return -1;
    return 0;
}

int binlog_reserve_put(Server *s, const Job *j)
{
    if (!bl(s)->enabled)
        return 0;
    return reserve(s, bl_job_record_size(j), bl(s)->reserved + DEL);
}

int binlog_reserve_state(Server *s)
{
    if (!bl(s)->enabled)
        return 0;
    return reserve(s, BL_STATE_SIZE, bl(s)->reserved);
}

/* Place an encoded record in the current file (rolling over if needed). */
static int append(Server *s, const BlRecord *r)
{
    Binlog *b = bl(s);
    size_t size = bl_record_size(r);

    if (b->cur_used + size > b->file_size && roll_over(s) < 0) {
        set_unhealthy(s, "cannot start a new file");
        return -1;
    }
    if (buf_reserve(&b->wbuf, size) < 0) {
        set_unhealthy(s, "out of memory");
        return -1;
    }
    bl_encode(r, b->wbuf.data + b->wbuf.len);
    b->wbuf.len += size;
    b->cur_used += size;
    b->records_written++;
    return 0;
}

static void pin(Binlog *b, Job *j)
{
    BlFile *f = cur_file(b);
    uint64_t size = bl_job_record_size(j);

    j->file = f->index;
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

void binlog_put(Server *s, Job *j)
{
    BlRecord r;

    if (!bl(s)->enabled)
        return;
    job_record(s, j, &r, BL_JOB);
    if (append(s, &r) < 0)
        return;
    pin(bl(s), j);
    bl(s)->reserved += DEL;
}

void binlog_state(Server *s, Job *j)
{
    BlRecord r;

    if (!bl(s)->enabled || !j->file)
        return;
    job_record(s, j, &r, BL_STATE);
    append(s, &r);
}

void binlog_delete(Server *s, Job *j)
{
    BlRecord r = {.type = BL_DELETE, .id = j->id};

    if (!bl(s)->enabled || !j->file)
        return;
    bl(s)->reserved -= DEL;
    append(s, &r);
    unpin(bl(s), j);
}

/* ---- commit ----------------------------------------------------------- */

void binlog_hold_reply(Server *s, Conn *c)
{
    if (!bl(s)->enabled || list_linked(&c->durable_link))
        return;
    c->durable_off = c->out.len;
    list_insert_tail(&s->durable, &c->durable_link);
}

static int strict(const Server *s)
{
    return s->cfg.fsync_ms == 0 && !s->cfg.fsync_never;
}

/* Take back every reply from offset off on and close the connection (the
 * protocol's last resort): no client may hold an acknowledgement whose
 * record did not reach the disk. */
static void withdraw(Conn *c, size_t off)
{
    list_remove(&c->held_link);
    c->nholds = 0;
    if (c->flags & CONN_DEAD)
        return;
    if (off < c->out.len)
        c->out.len = off > c->out_off ? off : c->out_off;
    conn_finish(c);
}

static void withdraw_this_iteration(Server *s)
{
    List *n;

    while ((n = list_first(&s->durable))) {
        Conn *c = container_of(n, Conn, durable_link);
        list_remove(n);
        withdraw(c, c->nholds ? c->hold_off[0] : c->durable_off);
    }
}

static void withdraw_held(Server *s)
{
    List *n;

    while ((n = list_first(&s->held))) {
        Conn *c = container_of(n, Conn, held_link);
        withdraw(c, c->hold_off[0]);
    }
}

/* This iteration's durable replies wait for generation gen. A connection
 * has at most two holds: the generation being synced and the next one. */
static void hold_replies(Server *s, uint64_t gen)
{
    List *n;

    while ((n = list_first(&s->durable))) {
        Conn *c = container_of(n, Conn, durable_link);
        list_remove(n);
        if (c->flags & CONN_DEAD)
            continue;
        if (c->nholds && c->hold_gen[c->nholds - 1] == gen)
            continue; /* an earlier reply already waits for it */
        c->hold_off[c->nholds] = c->durable_off;
        c->hold_gen[c->nholds] = gen;
        c->nholds++;
        if (!list_linked(&c->held_link))
            list_insert_tail(&s->held, &c->held_link);
        bl(s)->gen_held = 1;
    }
}

/* Generation gen is on disk: its replies may go. */
static void release_held(Server *s, uint64_t gen)
{
    List *n = s->held.next;

    while (n != &s->held) {
        Conn *c = container_of(n, Conn, held_link);
        n = n->next;
        while (c->nholds && c->hold_gen[0] <= gen) {
            c->hold_off[0] = c->hold_off[1];
            c->hold_gen[0] = c->hold_gen[1];
            c->nholds--;
        }
        if (!c->nholds)
            list_remove(&c->held_link);
        conn_mark_pending(c);
    }
}

static void release_now(Server *s)
{
    List *n;

    while ((n = list_first(&s->durable)))
        list_remove(n);
}

static void start_sync(Server *s)
{
    Binlog *b = bl(s);

    if (syncer_start(&b->syncer, b->cur_fd) < 0)
        return; /* busy: the end of the current sync starts the next */
    b->inflight_gen = b->cur_gen++;
    b->gen_dirty = b->gen_held = 0;
    b->unsynced = 0;
    b->last_sync = s->now;
}

/* A sync ended with err (0 or an errno). */
static void sync_ended(Server *s, int err)
{
    Binlog *b = bl(s);
    uint64_t gen = b->inflight_gen;

    b->inflight_gen = 0;
    if (err) {
        log_err("binlog: fsync binlog.%u: %s", cur_file(b)->index, strerror(err));
        set_unhealthy(s, "fsync failed");
        withdraw_held(s);
        return;
    }
    release_held(s, gen);
}

/* Wait for an in-flight sync (before its fd is closed, or at shutdown). */
static void settle_inflight(Server *s)
{
    Binlog *b = bl(s);

    if (b->syncer.running && b->syncer.busy)
        sync_ended(s, syncer_wait(&b->syncer));
}

static void on_synced(EvSource *src, uint32_t events)
{
    Binlog *b = container_of(src, Binlog, sync_ev);
    Server *s = b->srv;
    int err = syncer_finish(&b->syncer);

    if (err < 0)
        return; /* already handled by settle_inflight() */
    sync_ended(s, err);
    if (b->healthy && strict(s) && (b->gen_dirty || b->gen_held))
        start_sync(s);
}

void binlog_commit(Server *s)
{
    Binlog *b = bl(s);
    int wrote;

    if (!b->enabled)
        return;
    wrote = b->wbuf.len > 0;
    if (write_pending(b) < 0) {
        set_unhealthy(s, "write failed");
        withdraw_this_iteration(s);
        return;
    }
    if (!strict(s)) {
        release_now(s);
        return;
    }
    if (wrote)
        b->gen_dirty = 1;
    hold_replies(s, b->cur_gen);
    if (b->gen_dirty || b->gen_held)
        start_sync(s);
}

void binlog_settle(Server *s)
{
    Binlog *b = bl(s);

    if (!b->enabled)
        return;
    settle_inflight(s);
    if (b->gen_dirty || b->gen_held || b->unsynced) {
        b->unsynced = 1;
        if (write_pending(b) < 0 || sync_now(s) < 0) {
            set_unhealthy(s, "write or fsync failed");
            withdraw_held(s);
            return;
        }
        b->gen_dirty = b->gen_held = 0;
    }
    release_held(s, UINT64_MAX);
}

/* ---- compaction ------------------------------------------------------- */

static void drop_dead_files(Server *s)
{
    Binlog *b = bl(s);
    int dropped = 0;

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
    if (dropped)
        sync_dir(b);
}

typedef struct {
    Server *s;
    uint32_t index;
    int failed;
} MoveCtx;

static void move_job(HashNode *n, void *arg)
{
    MoveCtx *m = arg;
    Job *j = container_of(n, Job, hnode);
    BlRecord r;

    if (m->failed || j->file != m->index)
        return;
    /* Moving must not eat the room kept for delete records. */
    if (reserve(m->s, bl_job_record_size(j), bl(m->s)->reserved) < 0) {
        m->failed = 1;
        return;
    }
    job_record(m->s, j, &r, BL_JOB);
    if (append(m->s, &r) < 0) {
        m->failed = 1;
        return;
    }
    unpin(bl(m->s), j);
    pin(bl(m->s), j);
    bl(m->s)->records_migrated++;
}

/* Move the oldest file's live jobs forward when the files hold much more
 * than the live data. One file per call, so the pause stays short. */
static uint64_t compact(Server *s)
{
    Binlog *b = bl(s);
    MoveCtx m = {s, 0, 0};
    uint64_t before = b->records_migrated;

    if (b->nfiles < 2 ||
        b->disk_bytes <= 2 * b->live_bytes + 2 * b->file_size + b->nspares * b->file_size)
        return 0;
    m.index = b->files[0].index;
    hash_each(&s->jobs, move_job, &m);
    return b->records_migrated - before;
}

static void try_recover(Server *s);

void binlog_tick(Server *s)
{
    Binlog *b = bl(s);

    if (!b->enabled)
        return;
    if (b->healthy) {
        /* Moved records must be on disk before the file they leave goes:
         * write and sync them now (rare: once per compacted file). */
        if (compact(s) && (write_pending(b) < 0 || sync_now(s) < 0)) {
            set_unhealthy(s, "write or fsync failed");
            return;
        }
        drop_dead_files(s);
    } else {
        try_recover(s);
    }
    if (b->unsynced && !s->cfg.fsync_never && !strict(s) &&
        s->now - b->last_sync >= (int64_t)s->cfg.fsync_ms * NS_PER_MSEC) {
        if (write_pending(b) < 0)
            set_unhealthy(s, "write failed");
        else
            start_sync(s); /* off the loop; the result arrives by eventfd */
    }
}

int64_t binlog_next_due(const Server *s)
{
    const Binlog *b = &s->binlog;

    if (!b->enabled || !b->unsynced || s->cfg.fsync_never || s->cfg.fsync_ms == 0 ||
        b->syncer.busy)
        return INT64_MAX;
    return b->last_sync + (int64_t)s->cfg.fsync_ms * NS_PER_MSEC;
}

/* ---- recovery from a failed write ------------------------------------- */

static void snapshot_job(HashNode *n, void *arg)
{
    MoveCtx *m = arg;
    Job *j = container_of(n, Job, hnode);
    BlRecord r;

    if (m->failed)
        return;
    job_record(m->s, j, &r, BL_JOB);
    if (append(m->s, &r) < 0) {
        m->failed = 1;
        return;
    }
    if (j->file) {
        unpin(bl(m->s), j);
        bl(m->s)->reserved -= DEL;
    }
    pin(bl(m->s), j);
    bl(m->s)->reserved += DEL;
}

/* After a failed write or fsync the current file cannot be trusted: start
 * a fresh file holding every live job, and be healthy again once it is on
 * disk. Older files then hold nothing live and are dropped. */
static void try_recover(Server *s)
{
    Binlog *b = bl(s);
    MoveCtx m = {s, 0, 0};

    if (s->now - b->last_recover_try < NS_PER_SEC)
        return;
    b->last_recover_try = s->now;
    b->wbuf.len = 0; /* these never reached the disk; the snapshot has them */
    b->unsynced = 0;
    if (open_next(s) < 0)
        return;
    b->healthy = 1; /* let append() run; reset on failure */
    hash_each(&s->jobs, snapshot_job, &m);
    if (m.failed || write_pending(b) < 0 || sync_now(s) < 0) {
        b->healthy = 0;
        return;
    }
    log_info("binlog: healthy again: %zu jobs written to binlog.%u",
             s->jobs.len, cur_file(b)->index);
}

/* Write every live job into the current file and sync, so no older file
 * holds anything live and all of them go: after --recover the damaged
 * files are gone and the next start needs no flag. */
static int rewrite_all(Server *s)
{
    MoveCtx m = {s, 0, 0};

    hash_each(&s->jobs, snapshot_job, &m);
    if (m.failed || write_pending(bl(s)) < 0 || sync_now(s) < 0)
        return -1;
    drop_dead_files(s);
    log_info("binlog: --recover: %zu jobs rewritten; damaged files removed", s->jobs.len);
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

int binlog_open(Server *s, char *err, size_t errlen)
{
    Binlog *b = bl(s);
    int64_t t0 = clock_mono();
    uint32_t first;

    b->enabled = 1;
    b->healthy = 1;
    b->cur_fd = -1;
    b->srv = s;
    b->cur_gen = 1;
    if (syncer_init(&b->syncer, disk_sync) < 0) {
        snprintf(err, errlen, "cannot start the binlog sync thread: %s", strerror(errno));
        return -1;
    }
    b->sync_ev.handler = on_synced;
    if (ev_add(&s->loop, &b->sync_ev, b->syncer.efd, EPOLLIN) < 0) {
        snprintf(err, errlen, "epoll_ctl: %s", strerror(errno));
        return -1;
    }
    b->dir = s->cfg.binlog_dir;
    b->recover = s->cfg.recover;
    b->file_size = s->cfg.binlog_size;
    if (b->file_size < (uint64_t)s->cfg.max_job_size + 4096) {
        b->file_size = (uint64_t)s->cfg.max_job_size + 4096;
        log_warn("binlog: -s raised to %llu bytes to hold the largest job",
                 (unsigned long long)b->file_size);
    }
    if (open_dir(b, err, errlen) < 0 || bl_replay(s, &first, err, errlen) < 0)
        return -1;
    for (size_t i = 0; i < b->nfiles; i++)
        b->disk_bytes += b->files[i].bytes;
    b->replayed_jobs = s->jobs.len;
    /* The new current file: the numbering goes on after the newest. */
    b->cur_fd = create_file(b, first);
    if (b->cur_fd < 0 || bl_files_push(b, first) < 0) {
        snprintf(err, errlen, "cannot create %s/binlog.%u: %s", b->dir, first, strerror(errno));
        return -1;
    }
    sync_dir(b);
    b->cur_used = b->cur_written = BL_HEADER_SIZE;
    cur_file(b)->bytes = b->file_size;
    b->last_sync = s->now;
    if (b->damaged && rewrite_all(s) < 0) {
        snprintf(err, errlen, "--recover: cannot write the recovered jobs to %s", b->dir);
        return -1;
    }
    log_info("binlog: %s: replayed %llu jobs from %zu files in %lld ms; writing binlog.%u",
             b->dir, (unsigned long long)b->replayed_jobs, b->nfiles - 1,
             (long long)((clock_mono() - t0) / NS_PER_MSEC), first);
    return 0;
}

void binlog_close(Server *s)
{
    Binlog *b = bl(s);

    if (!b->enabled)
        return;
    settle_inflight(s);
    if (b->syncer.running) {
        ev_del(&s->loop, &b->sync_ev);
        syncer_stop(&b->syncer);
    }
    if (b->cur_fd >= 0) {
        b->unsynced = 1;
        if (b->healthy && (write_pending(b) < 0 || sync_now(s) < 0))
            log_err("binlog: final sync failed");
        if (ftruncate(b->cur_fd, (off_t)b->cur_used) == 0 && !s->cfg.fsync_never)
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
