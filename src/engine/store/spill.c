#include "spill.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "alloc.h"
#include "blcodec.h"
#include "blfile.h"
#include "clock.h"
#include "core.h"
#include "job.h"
#include "log.h"

/* A record read back may be a BL_JOBX one although the job has no times
 * any more: ask for that much more than the job's own record size. */
#define SLACK BL_JOBX_EXTRA

static uint64_t budget_of(const Tube *t)
{
    return t->pol.max_memory_size;
}

uint64_t spill_tube_mem_bytes(const Tube *t)
{
    return t->cur_bytes - t->spilled_bytes;
}

/* What t holds against its budget: its bodies in memory and those the
 * read-ahead asked for (pump_tube() made room for them: the jobs next in
 * line). A newcomer that took their room, or kept it at the commit
 * (evict()), would stay in memory while the bodies ahead of it in line
 * were let go as they came in (answered()), and a worker draining the
 * tube would wait for each of those. */
static uint64_t held_of(const Tube *t)
{
    return spill_tube_mem_bytes(t) + (t->spill ? t->spill->inflight : 0);
}

int spill_wanted(const Engine *e, const Tube *t, uint32_t n)
{
    const Binlog *b = &e->binlog;

    return t && budget_of(t) && b->enabled && b->healthy && t->pol.journal &&
           held_of(t) + n > budget_of(t);
}

/* ---- files ------------------------------------------------------------ */

static void fds_reset(SpillFd *fds)
{
    for (int i = 0; i < SPILL_FDS; i++)
        fds[i].fd = -1;
}

static void fds_close_below(SpillFd *fds, uint32_t index)
{
    for (int i = 0; i < SPILL_FDS; i++)
        if (fds[i].fd >= 0 && (index == UINT32_MAX || fds[i].index < index)) {
            close(fds[i].fd);
            fds[i].fd = -1;
        }
}

/* An fd of binlog.index, from the cache or opened (a free slot, or the
 * lowest index's: files are read oldest first). -1 with errno. */
static int fd_of(SpillFd *fds, const char *dir, uint32_t index)
{
    char path[4096];
    int victim = 0;

    for (int i = 0; i < SPILL_FDS; i++) {
        if (fds[i].fd >= 0 && fds[i].index == index)
            return fds[i].fd;
        if (fds[victim].fd >= 0 && (fds[i].fd < 0 || fds[i].index < fds[victim].index))
            victim = i;
    }
    snprintf(path, sizeof path, "%s/binlog.%u", dir, index);
    if (fds[victim].fd >= 0)
        close(fds[victim].fd);
    fds[victim].fd = open(path, O_RDONLY | O_CLOEXEC);
    fds[victim].index = index;
    return fds[victim].fd;
}

/* Read r->len bytes at r->off (fewer at the end of the file). */
static void read_record(SpillFd *fds, const char *dir, SpillRead *r)
{
    int fd = fd_of(fds, dir, r->file);

    r->n = 0;
    r->err = 0;
    if (fd < 0) {
        r->err = errno;
        return;
    }
    while (r->n < r->len) {
        ssize_t k = pread(fd, r->buf->data + r->n, r->len - r->n, (off_t)(r->off + r->n));
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            r->err = errno;
            return;
        }
        if (k == 0)
            return; /* the file ends: the decode says whether it was enough */
        r->n += (uint32_t)k;
    }
}

/* ---- the reader thread ------------------------------------------------ */

static int push(SpillRead **v, size_t *n, size_t *cap, const SpillRead *r)
{
    /* (the reader thread copies out what it reads under mu, so the queue
     * may move while it reads) */
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 64;
        SpillRead *p = tb_realloc(*v, c * sizeof *p);
        if (!p)
            return -1;
        *v = p;
        *cap = c;
    }
    (*v)[(*n)++] = *r;
    return 0;
}

static void *reader(void *arg)
{
    Spill *s = arg;

    pthread_mutex_lock(&s->mu);
    for (;;) {
        SpillRead r;
        uint64_t seq, one = 1;
        size_t at;

        /* Files the binlog removed are closed as soon as it says so
         * (spill_files_dropped() wakes us), not at the next read: an idle
         * reader would otherwise hold their disk space for good. */
        fds_close_below(s->thread_fds, s->min_file);
        while (s->next == s->len && !s->quit) {
            pthread_cond_wait(&s->cv, &s->mu);
            fds_close_below(s->thread_fds, s->min_file);
        }
        if (s->quit)
            break;
        seq = s->base + s->next;
        r = s->q[s->next];
        pthread_mutex_unlock(&s->mu);
        read_record(s->thread_fds, s->dir, &r);
        pthread_mutex_lock(&s->mu);
        /* The queue may have grown (moved) or dropped answered requests
         * from its front meanwhile, never reordered. */
        at = (size_t)(seq - s->base);
        s->q[at] = r;
        s->next = at + 1;
        if (write(s->efd, &one, sizeof one) < 0)
            (void)0; /* the counter is full: the loop is awake anyway */
    }
    fds_close_below(s->thread_fds, UINT32_MAX);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- reading back ----------------------------------------------------- */

static SpillRing *ring_of(Tube *t)
{
    return t->spill;
}

static void ring_inflight(Tube *t, Job *j, int add)
{
    SpillRing *r = ring_of(t);

    if (add) {
        j->reading = 1;
        if (r)
            r->inflight += j->body_size;
        return;
    }
    if (j->reading && r)
        r->inflight -= r->inflight < j->body_size ? r->inflight : j->body_size;
    j->reading = 0;
}

/* The body of a record read back (b, checked), without the record's head
 * and the slack read after it: what the job keeps, possibly for long (the
 * budget counts body bytes, and a 100-byte body's record is twice that).
 * Out of memory: b itself, which holds the same body. */
static JobBody *body_only(JobBody *b, uint32_t n)
{
    JobBody *c;

    if (b->skip == 0 && b->cap == n)
        return b;
    if (!(c = job_body_alloc(n)))
        return b;
    c->off = b->off;
    memcpy(c->data, b->data + b->skip, n);
    job_body_free(b);
    return c;
}

/* j's body is in memory now: the counts move. */
static void loaded(Engine *e, Job *j, JobBody *b)
{
    Tube *t = j->tube;

    b = body_only(b, j->body_size);
    if (j->reading)
        e->spill.serve_all = 1; /* a worker parked for it may sit elsewhere */
    ring_inflight(t, j, 0);
    job_load(j, b);
    t->spilled_ct--;
    t->spilled_bytes -= j->body_size;
    e->spill.jobs--;
    e->spill.bytes -= j->body_size;
}

/* Is the record read for j whole, and j's? Points b->skip at the body. */
static int check_record(const Job *j, const SpillRead *r)
{
    BlRecord rec;
    long n = bl_decode(r->buf->data, r->n, &rec);

    if (n <= 0 || (rec.type != BL_JOB && rec.type != BL_JOBX) || rec.id != j->id ||
        rec.body_size != j->body_size)
        return -1;
    r->buf->skip = (uint32_t)(rec.body - r->buf->data);
    r->buf->off = r->off;
    return 0;
}

static void report(Engine *e, const Job *j, const SpillRead *r)
{
    e->spill.errors++;
    log_err("binlog: job %llu: its body cannot be read back from binlog.%u at offset "
            "%llu (%s)", (unsigned long long)j->id, r->file, (unsigned long long)r->off,
            r->err ? strerror(r->err) : "damaged record: checksum or structure");
}

/* Could the read succeed later? A missing file is damage (it was
 * removed under us); running out of descriptors or an EIO may pass. */
static int transient(const SpillRead *r)
{
    return r->err && r->err != ENOENT;
}

/* The server ran short (descriptors, memory): nothing is wrong with the
 * record or the disk, and it passes by itself. Any other error (EIO) is
 * the medium's: it may pass too, but it may well not. */
static int starved(int err)
{
    return err == EMFILE || err == ENFILE || err == ENOMEM || err == ENOBUFS ||
           err == EAGAIN || err == EINTR;
}

static int submit(Spill *s, SpillRead *batch, size_t n);
static uint64_t room_of(const Tube *t);
static int ring_push(Tube *t, uint64_t id);
static void ring_link(Engine *e, Tube *t);

static int prepare(Engine *e, Job *j, SpillRead *r)
{
    (void)e;
    r->id = j->id;
    r->file = j->file;
    r->off = job_spill_off(j);
    r->len = (uint32_t)(bl_job_record_size(j) + SLACK);
    r->buf = job_body_alloc(r->len);
    return r->buf ? 0 : -1;
}

int spill_fetch(Engine *e, Job *j)
{
    SpillRead r;

    if (!j->spilled || j->loaded)
        return 0;
    if (j->reading)
        return 1;
    if (!e->spill.running || e->now < e->spill.backoff_until || prepare(e, j, &r) < 0)
        return 0;
    if (submit(&e->spill, &r, 1) < 0) {
        job_body_free(r.buf);
        return 0;
    }
    ring_inflight(j->tube, j, 1);
    return 1;
}

/* Read j's record on the loop: *out holds it, checked. 0, -1 out of
 * memory, -2 unreadable (logged, counted). */
static int read_now(Engine *e, Job *j, JobBody **out)
{
    SpillRead r;

    if (prepare(e, j, &r) < 0)
        return -1;
    read_record(e->spill.loop_fds, e->spill.dir, &r);
    if (r.err || check_record(j, &r) < 0) {
        /* an I/O error may pass */
        int rc = !transient(&r) ? -2 : starved(r.err) ? -3 : -4;
        report(e, j, &r);
        job_body_free(r.buf);
        return rc;
    }
    *out = r.buf;
    return 0;
}

int spill_borrow(Engine *e, Job *j, void **buf, const char **body)
{
    JobBody *b;
    int rc;

    *buf = NULL;
    if (!j->spilled || j->loaded) {
        *body = job_body(j);
        return 0;
    }
    if ((rc = read_now(e, j, &b)) < 0)
        return rc;
    *buf = b;
    *body = b->data + b->skip;
    return 0;
}

int spill_load(Engine *e, Job *j)
{
    JobBody *b;
    int rc;

    if (!j->spilled || j->loaded)
        return 0;
    if ((rc = read_now(e, j, &b)) < 0)
        return rc;
    loaded(e, j, b);
    e->spill.waits++;
    return 0;
}

/* A ready job's body is in memory: a worker parked for it (spill_fetch)
 * is served now. */
static void ready_now(Engine *e, Job *j)
{
    if (j->state == JOB_READY)
        e->on_ready(e, j->tube);
}

/* A read-back answer for j: the body goes to j if it is still wanted. */
static void answered(Engine *e, SpillRead *r)
{
    Job *j = job_table_find(&e->jobs, r->id);

    if (!j || !j->spilled || job_dead(j)) {
        /* Deleted or flushed meanwhile: a worker parked for it waits for
         * a job that is gone; the tubes with waiters are served after the
         * batch (on_read). */
        job_body_free(r->buf);
        e->spill.serve_all = 1;
        return;
    }
    if (j->loaded || j->file != r->file || job_spill_off(j) != r->off) {
        /* Read on the loop meanwhile (a peek, a move), perhaps dropped and
         * moved since: a worker may still wait for it. */
        job_body_free(r->buf);
        ring_inflight(j->tube, j, 0);
        if (j->loaded || j->state != JOB_READY)
            e->on_ready(e, j->tube); /* taken by another path, perhaps */
        else
            spill_fetch(e, j);
        return;
    }
    if (transient(r)) {
        /* An I/O error (no descriptor left, EIO): the record may be fine.
         * The job stays on disk and in the ring; reading ahead pauses a
         * second, and a worker parked for it reads it on the loop, where
         * a failure is a temporary error (OUT_OF_MEMORY), not a burial. */
        Tube *t = j->tube;
        report(e, j, r);
        ring_inflight(t, j, 0);
        job_body_free(r->buf);
        e->spill.backoff_until = e->now + NS_PER_SEC;
        if (ring_push(t, j->id) == 0) {
            j->ringed = 1;
            ring_link(e, t);
        }
        e->on_ready(e, t);
        return;
    }
    if (check_record(j, r) < 0) {
        Tube *t = j->tube;
        report(e, j, r);
        ring_inflight(t, j, 0);
        job_body_free(r->buf);
        /* Damage: workers parked for it go on with the next job. */
        if (j->state == JOB_READY) {
            spill_bury_damaged(e, j);
            e->on_ready(e, t);
        }
        return;
    }
    loaded(e, j, r->buf);
    e->spill.reads++;
    ready_now(e, j);
    /* Not taken at once and past the budget (read for a worker that went
     * elsewhere, or asked for again after a read on the loop): it goes
     * again once the tube is over budget at the next commit. */
    if (j->state != JOB_RESERVED && spill_tube_mem_bytes(j->tube) > room_of(j->tube))
        spill_note(e, j);
}

static void on_read(EvSource *src, uint32_t events)
{
    enum { CHUNK = 64 };
    Spill *s = container_of(src, Spill, ev);
    Engine *e = container_of(s, Engine, spill);
    SpillRead got[CHUNK];
    uint64_t cnt;

    (void)events;
    if (read(s->efd, &cnt, sizeof cnt) < 0 && errno != EAGAIN)
        log_warn("spill: eventfd: %s", strerror(errno));
    for (;;) {
        size_t n;

        pthread_mutex_lock(&s->mu);
        n = s->next - s->head < CHUNK ? s->next - s->head : CHUNK;
        memcpy(got, s->q + s->head, n * sizeof *got);
        s->head += n;
        if (s->head == s->len) {
            s->base += s->len;
            s->head = s->next = s->len = 0;
        } else if (s->head >= 1024 && s->head * 2 >= s->len) {
            /* Never empty under a steady drain: drop the answered front
             * so the queue does not grow for ever. */
            memmove(s->q, s->q + s->head, (s->len - s->head) * sizeof *s->q);
            s->base += s->head;
            s->next -= s->head;
            s->len -= s->head;
            s->head = 0;
        }
        pthread_mutex_unlock(&s->mu);
        if (!n)
            break;
        for (size_t i = 0; i < n; i++)
            answered(e, &got[i]);
    }
    if (s->serve_all) {
        s->serve_all = 0;
        for (size_t i = 0; i < e->tubes.len; i++)
            e->on_ready(e, e->tubes.list[i]);
    }
    /* Room for more, perhaps; and bodies no worker took go again. Posted
     * behind the delivery the answers posted, so a worker parked for a
     * body takes it before anything is let go. */
    ev_post(e->loop, &s->after_read);
}

static void after_read(EvPost *p)
{
    spill_after_commit(container_of(p, Engine, spill.after_read));
}

/* What t may hold in memory; a tube whose budget a reload removed reads
 * every ready body back (delayed and buried ones as they become ready). */
static uint64_t room_of(const Tube *t)
{
    return budget_of(t) ? budget_of(t) : UINT64_MAX;
}

/* Ask for the next bodies of t's ring while they fit its budget. */
static int pump_tube(Engine *e, Tube *t, SpillRead **batch, size_t *n, size_t *cap)
{
    SpillRing *rg = ring_of(t);

    while (rg->len) {
        SpillSpan *sp = &rg->spans[rg->head];
        Job *j = job_table_find(&e->jobs, sp->lo);
        SpillRead r;

        if (j && j->tube == t && !job_dead(j))
            j->ringed = 0; /* passed: a later drop puts it back */
        /* Only ready jobs are read ahead: a delayed or buried one is
         * passed (spill_ready() rings it again once it is ready), or its
         * body would hold the budget that the jobs in line need. */
        if (j && j->tube == t && j->spilled && !j->loaded && !j->reading &&
            j->state == JOB_READY && !job_dead(j)) {
            if (spill_tube_mem_bytes(t) + rg->inflight + j->body_size > room_of(t)) {
                spill_yield(e, t);
                return 0;
            }
            if (prepare(e, j, &r) < 0)
                return -1;
            if (push(batch, n, cap, &r) < 0) {
                job_body_free(r.buf);
                return -1;
            }
            ring_inflight(t, j, 1);
        }
        if (sp->lo++ == sp->hi) {
            rg->head = (rg->head + 1) % rg->cap;
            rg->len--;
        }
    }
    return 0;
}

/* Hand a batch to the thread. */
static int submit(Spill *s, SpillRead *batch, size_t n)
{
    int rc = 0;
    size_t i;

    pthread_mutex_lock(&s->mu);
    for (i = 0; i < n; i++)
        if (push(&s->q, &s->len, &s->cap, &batch[i]) < 0)
            break;
    if (i < n) {
        s->len -= i; /* all or nothing: the caller gives them all back */
        rc = -1;
    } else {
        pthread_cond_signal(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static void pump(Engine *e)
{
    SpillRead *batch = NULL;
    size_t n = 0, cap = 0;
    List *l = e->spill.rings.next;

    if (!e->spill.running || e->now < e->spill.backoff_until)
        return;
    while (l != &e->spill.rings) {
        SpillRing *rg = container_of(l, SpillRing, link);
        l = l->next;
        if (pump_tube(e, rg->tube, &batch, &n, &cap) < 0)
            break;
        if (!rg->len)
            list_remove(&rg->link);
    }
    if (n && submit(&e->spill, batch, n) < 0) {
        /* Out of memory: those jobs stay on disk, read when needed. */
        for (size_t i = 0; i < n; i++) {
            Job *j = job_table_find(&e->jobs, batch[i].id);
            if (j)
                ring_inflight(j->tube, j, 0);
            job_body_free(batch[i].buf);
        }
    }
    tb_free(batch);
}

/* ---- spilling --------------------------------------------------------- */

static int ring_push(Tube *t, uint64_t id)
{
    SpillRing *rg = t->spill;
    SpillSpan *back;

    if (!rg) {
        if (!(rg = tb_malloc(sizeof *rg)))
            return -1;
        memset(rg, 0, sizeof *rg);
        list_init(&rg->link);
        rg->tube = t;
        t->spill = rg;
    }
    back = rg->len ? &rg->spans[(rg->head + rg->len - 1) % rg->cap] : NULL;
    if (back && id > back->hi && id - back->hi <= SPILL_GAP) {
        back->hi = id;
        return 0;
    }
    if (rg->len == rg->cap) {
        size_t c = rg->cap ? rg->cap * 2 : 8;
        SpillSpan *sp = tb_malloc(c * sizeof *sp);
        if (!sp)
            return -1;
        for (size_t i = 0; i < rg->len; i++)
            sp[i] = rg->spans[(rg->head + i) % rg->cap];
        tb_free(rg->spans);
        rg->spans = sp;
        rg->head = 0;
        rg->cap = c;
    }
    rg->spans[(rg->head + rg->len) % rg->cap] = (SpillSpan){id, id};
    rg->len++;
    return 0;
}

static void ring_link(Engine *e, Tube *t)
{
    if (t->spill && t->spill->len && !list_linked(&t->spill->link))
        list_insert_tail(&e->spill.rings, &t->spill->link);
}

/* Append id to an id list; out of memory the id is dropped (its body
 * just stays in memory). */
static void ids_push(uint64_t **v, size_t *n, size_t *cap, uint64_t id)
{
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 256;
        uint64_t *p = tb_realloc(*v, c * sizeof *p);
        if (!p)
            return;
        *v = p;
        *cap = c;
    }
    (*v)[(*n)++] = id;
}

void spill_note(Engine *e, Job *j)
{
    ids_push(&e->spill.evict, &e->spill.nevict, &e->spill.evict_cap, j->id);
}

void spill_note_back(Engine *e, Job *j)
{
    ids_push(&e->spill.back, &e->spill.nback, &e->spill.back_cap, j->id);
}

void spill_ready(Engine *e, Job *j)
{
    /* (Replay rings every job on disk in id order afterwards.) */
    if (!e->spill.replayed || !j->spilled || j->loaded || j->ringed || j->reading)
        return;
    if (ring_push(j->tube, j->id) == 0) {
        j->ringed = 1;
        ring_link(e, j->tube);
    }
}

void spill_count(Engine *e, Job *j)
{
    j->tube->spilled_ct++;
    j->tube->spilled_bytes += j->body_size;
    e->spill.jobs++;
    e->spill.bytes += j->body_size;
}

/* Drop j's body (its record is written) if its tube is over budget. */
static void evict(Engine *e, Job *j)
{
    Tube *t = j->tube;

    int parked = (j->state == JOB_DELAYED || j->state == JOB_BURIED) && t->spilled_ct;

    if (!j->spilled || !j->loaded || j->state == JOB_RESERVED || !budget_of(t) ||
        (held_of(t) <= budget_of(t) && !parked) || !j->file)
        return;
    /* Already in the ring (read for a compaction, a peek): not again, or
     * the ring would grow with every read on the loop. */
    if (!j->ringed && ring_push(t, j->id) < 0)
        return; /* it stays in memory: nothing would read it back ahead */
    j->ringed = 1;
    job_unload(j);
    spill_count(e, j);
    ring_link(e, t);
}

void spill_after_commit(Engine *e)
{
    Spill *s = &e->spill;
    const Binlog *b = &e->binlog;

    if (s->nevict && b->healthy && !b->wbuf.len) {
        for (size_t i = 0; i < s->nevict; i++) {
            Job *j = job_table_find(&e->jobs, s->evict[i]);
            if (j && !job_dead(j))
                evict(e, j);
        }
        s->nevict = 0;
        if (s->evict_cap > 4096) {
            tb_free(s->evict);
            s->evict = NULL;
            s->evict_cap = 0;
        }
    }
    if (!list_empty(&s->rings))
        pump(e);
}

void spill_yield(Engine *e, Tube *t)
{
    /* Once per batch of newcomers: a pass that found nothing is not
     * repeated until a delayed or buried body comes into memory again. */
    if (t->shrink || !t->parked_mem || !t->pol.max_memory_size || !t->pol.journal ||
        !(t->delay.len + t->buried_ct))
        return;
    t->parked_mem = 0;
    t->shrink = 1;
    t->shrink_yield = 1;
    t->shrink_phase = 1;
    t->shrink_moved = 0;
    t->shrink_pos = t->delay.len;
    e->spill.shrinking++;
}

void spill_check_budget(Engine *e, Tube *t)
{
    /* (A yield pass under way becomes a whole one.) */
    if ((!t->shrink || t->shrink_yield) && t->pol.max_memory_size && t->pol.journal &&
        spill_tube_mem_bytes(t) > t->pol.max_memory_size) {
        if (!t->shrink)
            e->spill.shrinking++;
        t->shrink = 1;
        t->shrink_yield = 0;
        t->shrink_phase = 0;
        t->shrink_moved = 0;
        t->shrink_pos = t->ready.len;
    }
}

void spill_bury_damaged(Engine *e, Job *j)
{
    if ((j->state != JOB_READY && j->state != JOB_DELAYED) || !e->spill.bury)
        return;
    if (e->spill.bury(e, j) == 0)
        log_err("binlog: job %llu buried: its body cannot be read back",
                (unsigned long long)j->id);
}

/* ---- bookkeeping ------------------------------------------------------ */

void spill_forget(Engine *e, Job *j)
{
    (void)e;
    ring_inflight(j->tube, j, 0);
    if (j->spilled && !j->loaded) {
        j->tube->spilled_ct--;
        j->tube->spilled_bytes -= j->body_size;
    }
}

void spill_freed(Engine *e, const Job *j)
{
    if (j->spilled && !j->loaded) {
        e->spill.jobs--;
        e->spill.bytes -= j->body_size;
    }
}

void spill_tube_flushed(Engine *e, Tube *t)
{
    (void)e;
    /* Its reserved jobs are in memory: nothing of it is on disk only. */
    t->spilled_ct = t->spilled_bytes = 0;
    if (t->spill) {
        t->spill->inflight = 0;
        t->spill->len = 0;
    }
}

void spill_tube_gone(Engine *e, Tube *t)
{
    (void)e;
    if (!t->spill)
        return;
    list_remove(&t->spill->link);
    tb_free(t->spill->spans);
    tb_free(t->spill);
    t->spill = NULL;
}

static int job_id_cmp(const void *a, const void *b)
{
    uint64_t x = (*(Job *const *)a)->id, y = (*(Job *const *)b)->id;

    return (x > y) - (x < y);
}

typedef struct {
    Job **v;
    size_t n;
} Collect;

static void collect(HashNode *node, void *arg)
{
    Collect *c = arg;
    Job *j = container_of(node, Job, hnode);

    if (j->spilled && !j->loaded)
        c->v[c->n++] = j;
}

int spill_after_replay(Engine *e)
{
    Collect c = {NULL, 0};

    e->spill.replayed = 1;
    if (!e->spill.jobs)
        return 0;
    /* Read back in id order: the order a plain backlog drains in. */
    if (!(c.v = tb_malloc(e->spill.jobs * sizeof *c.v)))
        return -1;
    hash_each(&e->jobs, collect, &c);
    qsort(c.v, c.n, sizeof *c.v, job_id_cmp);
    for (size_t i = 0; i < c.n; i++)
        if (ring_push(c.v[i]->tube, c.v[i]->id) == 0) {
            c.v[i]->ringed = 1;
            ring_link(e, c.v[i]->tube);
        }
    tb_free(c.v);
    return 0;
}

void spill_files_dropped(Engine *e, uint32_t index)
{
    Spill *s = &e->spill;

    fds_close_below(s->loop_fds, index);
    if (!s->running)
        return;
    pthread_mutex_lock(&s->mu);
    s->min_file = index;
    pthread_cond_signal(&s->cv); /* an idle reader closes them now */
    pthread_mutex_unlock(&s->mu);
}

/* ---- life cycle ------------------------------------------------------- */

int spill_init(Engine *e)
{
    Spill *s = &e->spill;
    sigset_t all, old;
    int rc;

    list_init(&s->rings);
    fds_reset(s->thread_fds);
    fds_reset(s->loop_fds);
    s->dir = e->cfg->binlog_dir;
    s->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s->efd < 0)
        return -1;
    s->ev.handler = on_read;
    s->after_read = (EvPost){.fn = after_read};
    if (ev_add(e->loop, &s->ev, s->efd, EPOLLIN) < 0) {
        close(s->efd);
        s->efd = -1;
        return -1;
    }
    /* Signals always reach the loop's thread, never this one. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_mutex_init(&s->mu, NULL) || pthread_cond_init(&s->cv, NULL) ||
         pthread_create(&s->thread, NULL, reader, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        ev_del(e->loop, &s->ev);
        close(s->efd);
        s->efd = -1;
        errno = EAGAIN;
        return -1;
    }
    s->running = 1;
    return 0;
}

void spill_stop(Engine *e)
{
    Spill *s = &e->spill;

    if (!s->dir)
        return; /* never started */
    fds_close_below(s->loop_fds, UINT32_MAX);
    if (s->running) {
        pthread_mutex_lock(&s->mu);
        s->quit = 1;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->thread, NULL);
        for (size_t i = s->head; i < s->len; i++)
            job_body_free(s->q[i].buf);
        pthread_cond_destroy(&s->cv);
        pthread_mutex_destroy(&s->mu);
        ev_del(e->loop, &s->ev);
        ev_unpost(e->loop, &s->after_read);
        s->running = 0;
    }
    if (s->efd >= 0)
        close(s->efd);
    s->efd = -1;
    tb_free(s->q);
    tb_free(s->evict);
    tb_free(s->back);
    s->q = NULL;
    s->evict = NULL;
    s->back = NULL;
    s->head = s->next = s->len = s->cap = s->nevict = s->evict_cap = 0;
    s->nback = s->back_cap = 0;
}
