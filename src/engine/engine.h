/*
 * engine.h — jobs, tubes, queues, timers and the binlog, with no sockets
 * and no protocol in sight.
 *
 * Contract. An Engine owns every job (a table by id), every tube, the
 * heaps and timers that move jobs on their own (delays, TTRs, pauses),
 * the waiting workers, and the binlog. Front-ends (beanstalk, memcache,
 * HTTP) call the operations below, which speak in jobs, tubes and result
 * codes, never in reply strings, and format their own replies.
 *
 * Time: engine_now(e) is the monotonic clock of the current loop iteration;
 * the loop refreshes it after each wake-up, then calls engine_tick().
 *
 * Durability: an operation that changed what the binlog holds leaves its
 * records queued; engine_ticket() names them (a log sequence number, 0 if
 * there is nothing to wait for). engine_commit(), once per loop iteration,
 * writes them; the binlog then reports through e->hooks that records are
 * durable up to N (under the -f mode in force) or lost from N on. A
 * front-end holds each acknowledgement until its ticket is durable and
 * withdraws it if its ticket is lost. The engine never sees a reply.
 *
 * Waiting: worker_reserve() either answers at once or parks the worker;
 * a parked worker is woken through its WorkerOps when a job arrives, its
 * timeout passes or a job it holds nears its TTR. Waiters of a tube are
 * served in beanstalkd's order, or first come first served from the
 * moment a memcache get waits there until nobody waits there (waiter.h),
 * whatever front-end they came from.
 */
#ifndef TUBED_ENGINE_H
#define TUBED_ENGINE_H

#include <stdint.h>

#include "core.h"
#include "waiter.h"
#include "watch.h"

/* Results of the operations below. */
typedef enum EngineResult {
    ENG_OK,
    ENG_BURIED,         /* put/release: a heap could not grow, job buried */
    ENG_NOT_FOUND,
    ENG_NO_MEMORY,      /* nothing changed */
    ENG_FULL,           /* the tube is at its limit and cannot discard */
} EngineResult;

int engine_init(Engine *e, const Config *cfg, EvLoop *loop);
/* Open, lock and replay the binlog (cfg->binlog_dir). */
int engine_open_binlog(Engine *e, char *err, size_t errlen);
void engine_free(Engine *e);

/* Timers due at e->now: delays ending, pauses ending, waits ending, TTRs
 * running out, the binlog's sync deadline and compaction. The jobs whose
 * delay or pause ended are handed to waiting workers (engine_deliver())
 * before any wait due in the same tick ends, as beanstalkd does. */
void engine_tick(Engine *e);
/* Monotonic ns of the next timer, INT64_MAX if none. */
int64_t engine_next_due(const Engine *e);
/* Write this iteration's records (once per loop iteration). */
void engine_commit(Engine *e);
/* Shutdown: every record written and synced, every hook called. */
void engine_settle(Engine *e);
/* The ticket of the records queued so far; 0 when nothing needs waiting. */
uint64_t engine_ticket(Engine *e);
/* The part of it that replicas must have too (<= engine_ticket; 0: none):
 * a put into a journal = false tube waits for its own disk, not for them. */
uint64_t engine_repl_ticket(Engine *e);
/* Nonzero when every record placed so far is written (or there is no
 * binlog): a reply sent now, before this iteration's commit, reports
 * nothing the disk has not been given yet. */
int engine_all_written(const Engine *e);

/* ---- jobs ---------------------------------------------------------------- */

/* The job with this id; a job past its expiry is expired first (so it is
 * not found, or found where move_expired_to put it). */
Job *engine_find(Engine *e, uint64_t id);
/* j's body for a reply. A body on disk only (read-behind) is read now;
 * NULL when its record cannot be read (logged, counted in the metric tubed_binlog_spill_errors_total):
 * the front-end answers with an internal error. */
const char *engine_body(Engine *e, Job *j);
/* The job a peek-ready / -delayed / -buried of t shows, never an expired one. */
Job *engine_peek(Engine *e, Tube *t, JobState state);
/* Expire every job whose time has come (before counting jobs). */
void engine_expire_all(Engine *e);
/* The largest body tube t takes (its max_item_size, at most -z). */
uint32_t engine_max_body(const Engine *e, const Tube *t);
/* A reload is coming with the config file next: take what applying it
 * needs. 0, or -1 (out of memory: refuse the reload; nothing changed). */
int engine_reload_prepare(Engine *e, const ConfFile *next);
/* The config file in force changed: every tube takes its new policy
 * (cannot fail after engine_reload_prepare() for that file). */
void engine_reload(Engine *e);

/* A new job with the next id (taken even if the put then fails, as
 * beanstalkd does) and room for a body of body_size bytes that the caller
 * fills at job_body_mut(). t is the tube it is for (its max_memory_size
 * picks the job's form). NULL when out of memory or past --job-memory. */
Job *engine_job_new(Engine *e, const Tube *t, uint32_t body_size, uint32_t pri,
                    uint32_t delay, uint32_t ttr);
/* Free a job that engine_put() never took. */
void engine_job_drop(Engine *e, Job *j);
/* Add a filled job to tube t (making room by its limits, copying it to its
 * fanout children): ENG_OK (ready or delayed), ENG_BURIED (a heap could
 * not grow), ENG_FULL or ENG_NO_MEMORY (not taken: the caller drops it).
 * After ENG_OK or ENG_BURIED the job belongs to the engine and may already
 * be gone (handed to a worker and deleted, or expired on arrival): take
 * its id before the call. */
EngineResult engine_put(Engine *e, Job *j, Tube *t);

/* Worker operations. `by` is the worker acting; a job reserved by another
 * worker is NOT_FOUND to it. */
EngineResult engine_delete(Engine *e, Worker *by, uint64_t id);
EngineResult engine_release(Engine *e, Worker *by, uint64_t id, uint32_t pri,
                            uint32_t delay);
EngineResult engine_bury(Engine *e, Worker *by, uint64_t id, uint32_t pri);
EngineResult engine_touch(Engine *e, Worker *by, uint64_t id);
/* Reserve a specific ready, delayed or buried job. */
EngineResult engine_reserve_job(Engine *e, Worker *by, uint64_t id, Job **out);
EngineResult engine_kick_job(Engine *e, uint64_t id);
/* Kick up to n jobs of t: buried ones if any, else delayed ones. */
uint32_t engine_kick(Engine *e, Tube *t, uint32_t n);
EngineResult engine_pause(Engine *e, Tube *t, uint32_t secs);

/* ---- the operator's commands --------------------------------------------- */

/* Delete every ready, delayed and buried job of t (reserved ones stay with
 * their workers), journaled as one record: how many, or -1 (nothing done)
 * when the binlog has no room or memory is short. */
int64_t engine_flush_tube(Engine *e, Tube *t);
/* Move a ready, delayed or buried job to dst (policy_move): ENG_OK,
 * ENG_NOT_FOUND (no such job, or reserved), ENG_FULL. */
EngineResult engine_move_job(Engine *e, uint64_t id, Tube *dst);
/* Up to count (out has room for them) ids >= from of t's jobs in state
 * (JobState, or -1 for all), ascending. Changes nothing. */
uint32_t engine_list_jobs(Engine *e, Tube *t, int state, uint64_t from,
                          uint32_t count, uint64_t *out);
/* Whole seconds since t's next ready job last became ready; 0 if none. */
uint64_t engine_oldest_ready_age(const Engine *e, const Tube *t);
/* The id of a job whose record keeps the oldest binlog file, 0 if none. */
uint64_t engine_pinning_job(const Engine *e);

/* ---- tubes --------------------------------------------------------------- */

/* Find or create (no reference taken); NULL when out of memory. */
Tube *engine_tube(Engine *e, const char *name, size_t len);
Tube *engine_tube_find(const Engine *e, const char *name, size_t len);
/* Take and drop a reference (a user or watcher). */
void engine_tube_ref(Tube *t);
void engine_tube_unref(Engine *e, Tube *t);
/* A deleted memcache queue: a fanout child's subscription to its parent
 * ends (policy_unregister); the tube itself goes with its last reference. */
void engine_tube_unsubscribe(Engine *e, Tube *t);

/* ---- reading the state ----------------------------------------------------
 * Front-ends never read struct Engine's fields (tests/lint/include_graph.py
 * checks src/proto/): these are what they may see. Inline, because
 * engine_now() and engine_default_tube() run on every command. */

/* Monotonic ns of the current loop iteration (see Time above). */
static inline int64_t engine_now(const Engine *e) { return e->now; }
/* The tube a new connection uses and watches. */
static inline Tube *engine_default_tube(const Engine *e) { return e->default_tube; }
/* Every tube, in creation order (list-tubes' order), engine_tube_count() of
 * them; valid until a tube is made or freed. Name order, and every figure
 * the statistics show: snapshot.h. */
static inline size_t engine_tube_count(const Engine *e) { return e->tubes.len; }
static inline Tube *const *engine_tube_list(const Engine *e) { return e->tubes.list; }

/* ---- replication (follow.c; doc/replication.md) -------------------------- */

/* A replica: its timers (delays, TTRs, expiry, pauses) stay idle and no
 * lookup expires a job; its primary's records say what changed. */
void engine_set_passive(Engine *e, int on);
/* Apply one record of the primary's stream (J, K, S, D, F; E sets the
 * next id) to the live state, logged in this server's binlog. No policy
 * runs. 0, or -1 (out of memory, no disk room: nothing changed by this
 * record; the replica gives up the stream and resyncs later). */
int engine_apply(Engine *e, const BlRecord *r);
/* A snapshot begins: remember every job here now (-1 out of memory). A
 * job the stream then sends is kept; engine_sweep_end() deletes (and
 * logs) the others and says how many, counting too those the stream
 * replaced by another job of the same id (another body: a history that
 * gave the id out again, as two primaries promoted in one partition do);
 * abort forgets the list. */
int engine_sweep_begin(Engine *e);
/* A primary that becomes a replica: delete the jobs that have no record
 * (a journal = false tube's, never replicated), which its new primary
 * cannot have; how many. None is reserved by then. */
uint64_t engine_drop_unjournaled(Engine *e);
uint64_t engine_sweep_end(Engine *e);
void engine_sweep_abort(Engine *e);
/* A snapshot's record of job id (as its binlog record, reserved as
 * ready; a spilled body is read now) appended to out: 1, 0 when there is
 * no such journaled job (or its body cannot be read: logged), -1 out of
 * memory. */
int engine_snapshot_job(Engine *e, uint64_t id, Buf *out);
/* This server's epoch, position, and where its epoch began. */
void engine_repl_state(const Engine *e, uint64_t *epoch, uint64_t *pos, uint64_t *start);
/* Journal a new position/epoch (binlog_set_position); -1 no disk room. */
int engine_set_position(Engine *e, uint64_t epoch, uint64_t pos, uint64_t start,
                        int follower);
/* The same, also journaling whether this server was told to follow a
 * primary whose epoch it has not heard yet (engine_set_position() keeps
 * that as it is): a promotion then skips the epoch that primary may have
 * (doc/replication.md, "A network partition"). */
int engine_set_position_unheard(Engine *e, uint64_t epoch, uint64_t pos, uint64_t start,
                                int follower, int unheard);
/* Told to follow, and the new primary's epoch not heard since (kept over
 * restarts). */
int engine_epoch_unheard(const Engine *e);
/* Ids jump n ahead (a promotion), journaled so that a restart keeps the
 * jump: -1 when it could not be journaled (it holds until a restart). */
int engine_skip_ids(Engine *e, uint64_t n);
/* The binlog's sequence numbers: last placed, durable. */
uint64_t engine_lsn(const Engine *e);
uint64_t engine_durable_lsn(const Engine *e);
/* A sync that has ended is reported now (binlog_poll_sync). */
void engine_poll_durable(Engine *e);

/* ---- workers ------------------------------------------------------------- */

/* A worker watching only the default tube. */
void worker_init(Engine *e, Worker *w, const WorkerOps *ops);
/* Give back every job w has reserved. */
void worker_release_all(Engine *e, Worker *w);
/* Cancel its wait, give back its reserved jobs, drop its watches. */
void worker_fini(Engine *e, Worker *w);

#endif
