/*
 * fuzz_util.h — small helpers shared by the harnesses (header-only, each
 * harness is one translation unit).
 */
#ifndef TUBED_FUZZ_UTIL_H
#define TUBED_FUZZ_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "bs.h"
#include "clock.h"
#include "conflisten.h"
#include "conn.h"
#include "engine.h"
#include "heap.h"
#include "job.h"
#include "list.h"
#include "mc.h"
#include "queue.h"
#include "serve.h"
#include "tube.h"
#include "watch.h"

/* A failed check: say what and abort, so libFuzzer records the input. */
static void __attribute__((noreturn, format(printf, 1, 2)))
fz_fail(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "\nFUZZ CHECK FAILED: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    abort();
}

#define FZ_CHECK(cond, ...) \
    do { if (!(cond)) fz_fail(__VA_ARGS__); } while (0)

static char fz_dir[256];

static void fz_clear_dir(const char *dir);

static void fz_remove_tmpdir(void)
{
    fz_clear_dir(fz_dir);
    rmdir(fz_dir);
}

/* A private scratch directory, on tmpfs when there is one (the binlog
 * preallocates and fsyncs its files). Made once per process, removed at
 * exit. */
static inline const char *fz_tmpdir(void)
{
    char *dir = fz_dir;

    if (!dir[0]) {
        const char *base = getenv("FUZZ_TMP");
        struct stat st;
        if (!base)
            base = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : "/tmp";
        snprintf(dir, sizeof fz_dir, "%s/tubed-fuzz-XXXXXX", base);
        if (!mkdtemp(dir))
            fz_fail("mkdtemp %s", dir);
        atexit(fz_remove_tmpdir);
    }
    return dir;
}

/* Empty a directory (files only; no subdirectories are made). */
static void fz_clear_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[512];

    if (!d)
        return;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    closedir(d);
}

/* server_init() takes over SIGUSR1, SIGUSR2, SIGTERM and SIGINT (handlers
 * writing to its self-pipe, or a blocked mask for a signalfd). The harness
 * process must keep libFuzzer's handling (Ctrl-C, -max_total_time), and no
 * handler may outlive the server it writes to: fz_save_signals() before
 * server_init(), fz_restore_signals() right after it. Drain mode is
 * toggled directly, not by signal. */
static const int fz_sigs[] = {SIGUSR1, SIGUSR2, SIGTERM, SIGINT};
static struct sigaction fz_old_sa[4];
static sigset_t fz_old_mask;

static inline void fz_save_signals(void)
{
    sigprocmask(SIG_SETMASK, NULL, &fz_old_mask);
    for (int i = 0; i < 4; i++)
        sigaction(fz_sigs[i], NULL, &fz_old_sa[i]);
}

static inline void fz_restore_signals(void)
{
    for (int i = 0; i < 4; i++)
        sigaction(fz_sigs[i], &fz_old_sa[i], NULL);
    sigprocmask(SIG_SETMASK, &fz_old_mask, NULL);
}

/* Free connections closed during the last batch (server.c's free_dead()
 * is static; this is the same loop). */
static inline void fz_free_dead(Server *s)
{
    List *n;

    while ((n = list_first(&s->dead)))
        conn_free(container_of(n, Conn, link));
}

/* ---- the loop, driven by the harness ------------------------------------ */

/* The connection harnesses (fuzz_conn, fuzz_mc_conn) run the server's loop
 * one iteration at a time, on a virtual clock: fz_vnow is the time the
 * harness says it is, and the loop's wake-up hook (loop.on_wake =
 * fz_fake_wake, arg the Server) sets the engine's clock to it instead of
 * reading the monotonic one. */
static int64_t fz_vnow;
/* Set at the end of an input: an iteration then waits a little while
 * replies are held for the binlog's sync thread. */
static int fz_winding_down;

static inline void fz_fake_wake(void *arg)
{
    Server *s = arg;

    /* The loop's own clock too, as serve.c's on_wake makes them one: the
     * loop's timers (the HTTP front-end's idle deadlines) are set from
     * the engine's clock and fire against the loop's. */
    s->loop.now = fz_vnow;
    s->eng.now = fz_vnow;
}

/* A listener with no socket, as server_listen_section() would set it up. */
static inline Listener *fz_fake_listener(Server *s, const Proto *p, const ConfListen *lc)
{
    Listener *l = &s->listeners[s->nlisteners];

    memset(l, 0, sizeof *l);
    l->ev.fd = -1;
    l->srv = s;
    l->proto = p;
    l->index = (uint8_t)s->nlisteners++;
    l->roles = lc->roles;
    l->restricted = conf_listen_restricted(lc);
    l->conf = lc;
    snprintf(l->name, sizeof l->name, "%s", lc->name);
    s->access_gen++;
    return l;
}

/* One iteration of server_run() (serve.c), in its order: posted
 * callbacks, write this iteration's records, send the replies, free
 * closed connections, poll without blocking (unless winding down), run the
 * engine's timers, close the connections stalled past --stall-timeout. */
static inline void fz_loop_once(Server *s)
{
    int ms;

    ev_run_posted(&s->loop);
    engine_commit(&s->eng);
    conn_flush_all(s);
    fz_free_dead(s);
    ms = fz_winding_down && (!list_empty(&s->held) || s->eng.binlog.syncer.busy) ? 5 : 0;
    if (ev_poll(&s->loop, ms) < 0)
        fz_fail("epoll_wait: %s", strerror(errno));
    engine_tick(&s->eng);
    conn_check_stalled(s);
}

/* FUZZ_ECHO set in the environment: harnesses copy what their clients
 * read to stderr (to see what a sweep session does). */
static int fz_echo;

__attribute__((constructor)) static void fz_read_env(void)
{
    fz_echo = getenv("FUZZ_ECHO") != NULL;
}

/* ---- allocation failure ------------------------------------------------ */

/* Arm the injection: the n-th allocation from now fails (n >= 1), as
 * alloc_fail_after(). With FUZZ_COUNT_ALLOCS set in the environment the
 * countdown is armed far beyond any session instead, and fz_alloc_disarm()
 * prints "allocations: N", the number the session made in between: the
 * sweep (mk_sweep.py) checks that its failure indexes cover them all. */
#define FZ_COUNT_FAR (1ul << 22)
static int fz_counting;

static inline void fz_alloc_arm(unsigned long n)
{
    fz_counting = getenv("FUZZ_COUNT_ALLOCS") != NULL;
    alloc_fail_after(fz_counting ? FZ_COUNT_FAR : n);
}

/* End the injection (before the wind-down). */
static inline void fz_alloc_disarm(void)
{
    if (fz_counting) {
        /* The countdown stands at FAR - N: N more calls to the injection
         * point make the last one fire. */
        unsigned long left = 1;
        while (!alloc_should_fail())
            left++;
        fprintf(stderr, "allocations: %lu\n", FZ_COUNT_FAR - left);
        fz_counting = 0;
    }
    alloc_fail_after(0);
}

/* ---- server invariants ------------------------------------------------ */

typedef struct {
    const Server *s;
    const Proto *bsp, *mcp;  /* see fz_check_server_with() */
    uint64_t ready, urgent, reserved, delayed, buried, dead, expiring;
    uint64_t *tube_jobs;     /* by list_pos */
    uint64_t *tube_ready, *tube_delayed, *tube_reserved, *tube_buried, *tube_urgent;
    uint64_t *tube_expiring;
} FzCount;

/* The Worker of a connection, NULL for a protocol without one (HTTP). */
static const Worker *fz_worker_of(const Conn *c, const Proto *bsp, const Proto *mcp)
{
    if (!bsp || c->proto == bsp)
        return &((const BsConn *)c)->worker;
    if (mcp && c->proto == mcp)
        return &((const McConn *)c)->worker;
    return NULL;
}

/* Is w the Worker of a live connection? */
static int fz_live_worker(const FzCount *c, const Worker *w)
{
    for (const List *n = c->s->conns.next; n != &c->s->conns; n = n->next) {
        const Conn *k = container_of(n, Conn, link);
        if (fz_worker_of(k, c->bsp, c->mcp) == w)
            return !(k->flags & CONN_DEAD);
    }
    return 0;
}

static size_t fz_tube_pos(const Server *s, const Tube *t)
{
    FZ_CHECK(t, "job or connection without a tube");
    FZ_CHECK(t->list_pos < s->eng.tubes.len && s->eng.tubes.list[t->list_pos] == t,
             "tube %.*s not at its list_pos", (int)t->name_len, t->name);
    return t->list_pos;
}

/* Is id among t's age ring's entries? (A scan: fuzzed states are small.) */
static int fz_in_age_ring(const Tube *t, uint64_t id)
{
    const AgeRing *r = &t->age;

    for (size_t i = r->head; i < r->cw; i++)
        if (r->v[i].id == id)
            return 1;
    for (size_t i = r->cr; i < r->tail; i++)
        if (r->v[i].id == id)
            return 1;
    return 0;
}

static void fz_count_job(HashNode *n, void *arg)
{
    FzCount *c = arg;
    const Job *j = container_of(n, Job, hnode);
    const Tube *t = j->tube;
    size_t p = fz_tube_pos(c->s, t);

    FZ_CHECK(job_table_find(&c->s->eng.jobs, j->id) == j, "job %llu not found by id",
             (unsigned long long)j->id);
    if (job_dead(j)) { /* flushed, in the graveyard: holds only its tube */
        c->dead++;
        c->tube_jobs[p]++;
        return;
    }
    c->tube_jobs[p]++;
    /* Expiry (max_age, a memcache exptime): a job that has a time is in
     * its tube's expiry heap; one that is not reserved has one whenever
     * its tube's policy and its own exptime give it one. (A reserved job
     * past its time leaves the heap until it comes back.) */
    if (job_ext(j) && job_ext(j)->expires) {
        FZ_CHECK(job_ext(j)->exp_pos < t->expiry.len && t->expiry.items[job_ext(j)->exp_pos] == j,
                 "job %llu has an expiry but is not in its tube's expiry heap",
                 (unsigned long long)j->id);
        /* Its time is the one its policy gives, or later when a move to
         * the dead-letter tube failed and waits for its retry. */
        FZ_CHECK(job_ext(j)->expires == queue_expiry_of(j) ||
                     (t->pol.move_expired_to[0] && job_ext(j)->expires > queue_expiry_of(j)),
                 "job %llu (tube %s) expires at %lld, its policy says %lld",
                 (unsigned long long)j->id, t->name, (long long)job_ext(j)->expires,
                 (long long)queue_expiry_of(j));
        c->expiring++;
        c->tube_expiring[p]++;
    } else if (queue_age_member(j)) {
        /* Expires at created + max_age, from its tube's age ring. */
        FZ_CHECK(fz_in_age_ring(t, j->id), "job %llu (tube %s) ages but is not in its ring",
                 (unsigned long long)j->id, t->name);
        FZ_CHECK(queue_expiry_of(j) == job_created(j) + (int64_t)t->pol.max_age_ms * NS_PER_MSEC,
                 "job %llu in the age ring has another expiry", (unsigned long long)j->id);
    } else {
        /* (A replica, passive, keeps every job out of the expiry heaps:
         * its primary's records expire them.) */
        FZ_CHECK(j->state == JOB_RESERVED || c->s->eng.passive || !queue_expiry_of(j),
                 "job %llu (tube %s, state %d) should expire but has no expiry",
                 (unsigned long long)j->id, t->name, j->state);
    }
    FZ_CHECK(j->state == JOB_READY || (job_ext(j) && job_ext(j)->job == j),
             "job %llu in state %d without its JobExt", (unsigned long long)j->id, j->state);
    FZ_CHECK(!job_ext(j) || job_ext(j)->job == j, "job %llu: JobExt of another job",
             (unsigned long long)j->id);
    switch (j->state) {
    case JOB_READY:
        FZ_CHECK(j->heap_pos < t->ready.len && t->ready.items[j->heap_pos] == j,
                 "ready job %llu not in its tube's ready heap", (unsigned long long)j->id);
        c->ready++;
        c->tube_ready[p]++;
        if (j->pri < 1024) {
            c->urgent++;
            c->tube_urgent[p]++;
        }
        break;
    case JOB_DELAYED:
        FZ_CHECK(j->heap_pos < t->delay.len && t->delay.items[j->heap_pos] == j,
                 "delayed job %llu not in its tube's delay heap", (unsigned long long)j->id);
        c->delayed++;
        c->tube_delayed[p]++;
        break;
    case JOB_RESERVED:
        FZ_CHECK(j->heap_pos < c->s->eng.ttr.len && c->s->eng.ttr.items[j->heap_pos] == j,
                 "reserved job %llu not in the TTR heap", (unsigned long long)j->id);
        FZ_CHECK(job_ext(j)->owner && fz_live_worker(c, job_ext(j)->owner) &&
                     list_linked(&job_ext(j)->link),
                 "reserved job %llu without a live owner", (unsigned long long)j->id);
        c->reserved++;
        c->tube_reserved[p]++;
        break;
    case JOB_BURIED:
        FZ_CHECK(list_linked(&job_ext(j)->link), "buried job %llu not in a list",
                 (unsigned long long)j->id);
        c->buried++;
        c->tube_buried[p]++;
        break;
    default:
        fz_fail("job %llu in state %d", (unsigned long long)j->id, j->state);
    }
}

static uint64_t fz_list_len(const List *l)
{
    uint64_t n = 0;

    for (const List *p = l->next; p != l; p = p->next)
        n++;
    return n;
}

/* Every counter the server keeps agrees with a recount from scratch.
 * Connections: with bsp NULL every one is a beanstalk connection (fuzz_conn);
 * else those of bsp are, those of mcp are memcache ones (an McConn: its
 * Worker watches, a set in BODY holds its tube) and the others (HTTP) hold
 * nothing of the engine. */
static inline void fz_check_server_with(const Server *s, const Proto *bsp, const Proto *mcp)
{
    size_t nt = s->eng.tubes.len;
    uint64_t *mem = calloc(10 * (nt + 1), sizeof *mem);
    uint64_t *using = mem + 6 * (nt + 1), *watching = mem + 7 * (nt + 1);
    uint64_t *holding = mem + 8 * (nt + 1);
    FzCount c = {.s = s, .bsp = bsp, .mcp = mcp};
    uint64_t conns = 0, waiting = 0, producers = 0, workers = 0, unread = 0;
    const Beanstalk *front = NULL;

    FZ_CHECK(mem, "calloc");
    c.tube_jobs = mem;
    c.tube_ready = mem + (nt + 1);
    c.tube_delayed = mem + 2 * (nt + 1);
    c.tube_reserved = mem + 3 * (nt + 1);
    c.tube_buried = mem + 4 * (nt + 1);
    c.tube_urgent = mem + 5 * (nt + 1);
    c.tube_expiring = mem + 9 * (nt + 1);
    hash_each(&s->eng.jobs, fz_count_job, &c);
    FZ_CHECK(c.ready == s->eng.jobs_ct.ready, "ready %llu, counted %llu",
             (unsigned long long)s->eng.jobs_ct.ready, (unsigned long long)c.ready);
    FZ_CHECK(c.urgent == s->eng.jobs_ct.urgent, "urgent %llu, counted %llu",
             (unsigned long long)s->eng.jobs_ct.urgent, (unsigned long long)c.urgent);
    FZ_CHECK(c.reserved == s->eng.jobs_ct.reserved && c.reserved == s->eng.ttr.len,
             "reserved %llu, counted %llu, ttr heap %zu",
             (unsigned long long)s->eng.jobs_ct.reserved, (unsigned long long)c.reserved,
             s->eng.ttr.len);
    FZ_CHECK(c.delayed == s->eng.jobs_ct.delayed, "delayed %llu, counted %llu",
             (unsigned long long)s->eng.jobs_ct.delayed, (unsigned long long)c.delayed);
    FZ_CHECK(c.buried == s->eng.jobs_ct.buried, "buried %llu, counted %llu",
             (unsigned long long)s->eng.jobs_ct.buried, (unsigned long long)c.buried);

    for (const List *n = s->conns.next; n != &s->conns; n = n->next) {
        const Conn *c0 = container_of(n, Conn, link);
        const Worker *cn = fz_worker_of(c0, bsp, mcp);
        int is_bs = !bsp || c0->proto == bsp;
        int paused = c0->state == CONN_PAUSED;

        FZ_CHECK(!(c0->flags & CONN_DEAD), "dead connection in the live list");
        conns++;
        /* The budget of unsent replies (conn.h): a connection counts its
         * output buffer while any of it is unsent, else nothing. */
        FZ_CHECK(c0->out_counted ==
                     ((c0->flags & CONN_UNCOUNTED) || c0->out.len == c0->out_off ? 0
                                                                                : c0->out.cap),
                 "fd %d counts %zu bytes of unsent replies; its buffer: %zu of %zu unsent, "
                 "capacity %zu", c0->ev.fd, c0->out_counted, c0->out.len - c0->out_off,
                 c0->out.len, c0->out.cap);
        unread += c0->out_counted;
        if (!cn)
            continue;
        if (is_bs) {
            const BsConn *bc = (const BsConn *)c0;
            front = bs_front(c0);
            if (!bc->use_none) /* a restricted listener's: uses nothing */
                using[fz_tube_pos(s, bc->use)]++;
        } else if (((const McConn *)c0)->in_tube) {
            holding[fz_tube_pos(s, ((const McConn *)c0)->in_tube)]++;
        }
        for (uint32_t i = 0; i < cn->nwatch; i++) {
            watching[fz_tube_pos(s, cn->watch[i].tube)]++;
            for (uint32_t k = 0; k < i; k++)
                FZ_CHECK(cn->watch[k].tube != cn->watch[i].tube, "tube watched twice");
            FZ_CHECK(watch_find(cn, cn->watch[i].tube) == (int)i,
                     "watch_find of entry %u gives %d", i, watch_find(cn, cn->watch[i].tube));
            /* A watcher of more than WAIT_WIDE tubes waits once,
             * server-wide; any other in every tube it watches (its tube's
             * waitq holds the entry at its wait_pos). */
            {
                const Watch *wt = &cn->watch[i];
                const Tube *wtt = wt->tube;
                int in = wt->wait_pos < wtt->waitq_len && wtt->waitq[wt->wait_pos] == wt;

                FZ_CHECK(in == (cn->waiting && !watch_waits_wide(cn)),
                         "waitq entry of a %s connection in state %d",
                         watch_waits_wide(cn) ? "wide" : "narrow", c0->state);
            }
        }
        FZ_CHECK(list_linked(&cn->wide_link) == (cn->waiting && watch_waits_wide(cn)),
                 "wide link of a %s connection in state %d",
                 watch_waits_wide(cn) ? "wide" : "narrow", c0->state);
        if (watch_is_wide(cn)) {
            uint32_t used = 0;
            for (uint32_t k = 0; k < cn->wset_cap; k++)
                if (cn->wset[k].tube) {
                    used++;
                    FZ_CHECK(cn->wset[k].idx < cn->nwatch &&
                             cn->watch[cn->wset[k].idx].tube == cn->wset[k].tube,
                             "watch index slot %u points to the wrong entry", k);
                }
            FZ_CHECK(used == cn->nwatch, "watch index holds %u of %u tubes", used, cn->nwatch);
        }
        if (cn->waiting)
            waiting++;
        for (const List *r = cn->reserved.next; r != &cn->reserved; r = r->next) {
            const Job *j = container_of(r, JobExt, link)->job;
            FZ_CHECK(j->state == JOB_RESERVED && job_ext(j)->owner == cn,
                     "job %llu in a reserved list but state %d",
                     (unsigned long long)j->id, j->state);
        }
        if (!is_bs)
            continue; /* fuzz_mc_conn checks the rest of a memcache one */
        /* Only a restricted listener's connection may watch nothing. */
        FZ_CHECK(cn->nwatch >= 1 || (c0->lis && c0->lis->restricted),
                 "connection watching nothing");
        /* A wait the tick ended stays paused until engine_deliver(). */
        FZ_CHECK(paused == (cn->waiting || list_linked(&cn->end_link)),
                 "paused %d but waiting %d, ended %d", paused, cn->waiting,
                 list_linked(&cn->end_link));
        FZ_CHECK(!(cn->waiting && list_linked(&cn->end_link)), "waiting and ended");
        if (c0->flags & BS_PRODUCER)
            producers++;
        if (c0->flags & BS_WORKER)
            workers++;
    }
    FZ_CHECK(conns == s->conn_ct, "conn_ct %llu, counted %llu",
             (unsigned long long)s->conn_ct, (unsigned long long)conns);
    for (const List *n = s->dead.next; n != &s->dead; n = n->next)
        unread += container_of(n, Conn, link)->out_counted;
    FZ_CHECK(unread == s->out_unread, "out_unread %llu, counted %llu",
             (unsigned long long)s->out_unread, (unsigned long long)unread);
    FZ_CHECK(waiting == s->eng.waiting_ct, "waiting_ct %llu, counted %llu",
             (unsigned long long)s->eng.waiting_ct, (unsigned long long)waiting);
    FZ_CHECK(!front || (producers == front->producer_ct && workers == front->worker_ct),
             "producers %llu/%llu workers %llu/%llu",
             (unsigned long long)(front ? front->producer_ct : 0), (unsigned long long)producers,
             (unsigned long long)(front ? front->worker_ct : 0), (unsigned long long)workers);

    for (size_t i = 0; i < nt; i++) {
        const Tube *t = s->eng.tubes.list[i];
        /* A registered fanout child is held by its registration, a tube
         * whose waiters are still to be served by its posting. */
        uint64_t refs = c.tube_jobs[i] + using[i] + watching[i] + holding[i] +
                        (t == s->eng.default_tube) + t->registered + t->posted;
        int64_t due = INT64_MAX;
        const Job *top = heap_top(&t->delay);

        FZ_CHECK(tubes_find(&s->eng.tubes, t->name, t->name_len) == t,
                 "tube %.*s not found by name", (int)t->name_len, t->name);
        FZ_CHECK(tube_name_valid(t->name, t->name_len), "tube with an invalid name %.*s",
                 (int)t->name_len, t->name);
        FZ_CHECK(t->posted == list_linked(&t->post_link), "tube %s: posted %d", t->name,
                 t->posted);
        FZ_CHECK(t->refs == refs, "tube %s: refs %llu, counted %llu", t->name,
                 (unsigned long long)t->refs, (unsigned long long)refs);
        FZ_CHECK(t->using_ct == using[i] && t->watching_ct == watching[i],
                 "tube %s: using %u/%llu watching %u/%llu", t->name, t->using_ct,
                 (unsigned long long)using[i], t->watching_ct,
                 (unsigned long long)watching[i]);
        FZ_CHECK(t->ready.len == c.tube_ready[i] && t->delay.len == c.tube_delayed[i],
                 "tube %s: heaps %zu/%zu, counted %llu/%llu", t->name, t->ready.len,
                 t->delay.len, (unsigned long long)c.tube_ready[i],
                 (unsigned long long)c.tube_delayed[i]);
        FZ_CHECK(t->expiry.len == c.tube_expiring[i], "tube %s: expiry heap %zu, counted %llu",
                 t->name, t->expiry.len, (unsigned long long)c.tube_expiring[i]);
        FZ_CHECK(t->reserved_ct == c.tube_reserved[i] && t->buried_ct == c.tube_buried[i] &&
                 fz_list_len(&t->buried) == t->buried_ct && t->urgent_ct == c.tube_urgent[i],
                 "tube %s: reserved %llu/%llu buried %llu/%llu urgent %llu/%llu", t->name,
                 (unsigned long long)t->reserved_ct, (unsigned long long)c.tube_reserved[i],
                 (unsigned long long)t->buried_ct, (unsigned long long)c.tube_buried[i],
                 (unsigned long long)t->urgent_ct, (unsigned long long)c.tube_urgent[i]);
        FZ_CHECK(t->waitq_len == t->waiting_ct && t->waitq_len <= t->waitq_cap,
                 "tube %s: waiting_ct", t->name);
        {
            uint32_t fifo = 0;

            for (uint32_t k = 0; k < t->waitq_len; k++) {
                FZ_CHECK(t->waitq[k]->tube == t && t->waitq[k]->wait_pos == k &&
                         t->waitq[k]->worker->waiting,
                         "tube %s: waitq entry %u", t->name, k);
                fifo += t->waitq[k]->worker->fifo;
            }
            /* first come first served while a get waits, and until
             * nobody waits (waiter.c) */
            FZ_CHECK((!fifo || t->waitq_fcfs) && (t->waitq_len || !t->waitq_fcfs),
                     "tube %s: waitq_fcfs", t->name);
        }
        if (top)
            due = job_ext(top)->deadline;
        if (t->pause && t->unpause_at < due)
            due = t->unpause_at;
        if ((top = heap_top(&t->expiry)) && job_ext(top)->expires < due)
            due = job_ext(top)->expires;
        if (t->pol.max_age_ms && age_ring_front(&t->age)) {
            int64_t at = age_ring_front(&t->age)->created +
                         (int64_t)t->pol.max_age_ms * NS_PER_MSEC;
            if (at < t->age_retry_at)
                at = t->age_retry_at;
            if (at < due)
                due = at;
        }
        FZ_CHECK(t->timer_at == due, "tube %s: timer_at %lld, due %lld", t->name,
                 (long long)t->timer_at, (long long)due);
        if (due != INT64_MAX)
            FZ_CHECK(t->timer_pos < s->eng.tubes.timers.len &&
                     s->eng.tubes.timers.items[t->timer_pos] == t,
                     "tube %s not at its timer_pos", t->name);
    }
    {
        size_t nready = 0;
        for (const List *n = s->eng.ready_tubes.next; n != &s->eng.ready_tubes; n = n->next)
            nready++;
        FZ_CHECK(nready == s->eng.nready_tubes, "nready_tubes %zu, listed %zu",
                 s->eng.nready_tubes, nready);
        for (size_t i = 0; i < nt; i++) {
            const Tube *t = s->eng.tubes.list[i];
            FZ_CHECK(list_linked(&t->ready_link) == (t->ready.len > 0 && !tube_paused(t)),
                     "tube %s: in the ready-tubes list %d with %zu ready, paused %d",
                     t->name, list_linked(&t->ready_link), t->ready.len, tube_paused(t));
        }
    }
    FZ_CHECK(c.dead == s->eng.grave_jobs, "graveyard holds %llu, counted %llu dead",
             (unsigned long long)s->eng.grave_jobs, (unsigned long long)c.dead);
    FZ_CHECK(s->eng.jobs.len == c.ready + c.reserved + c.delayed + c.buried + c.dead,
             "job table size");
    free(mem);
}


static inline void fz_check_server(const Server *s)
{
    fz_check_server_with(s, NULL, NULL);
}

#endif
