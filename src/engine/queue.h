/*
 * queue.h — job state transitions, each O(log n), and the timers that move
 * jobs on their own (delays ending, TTRs running out, pauses ending).
 *
 * Contract: every function keeps the server's and the tube's counters in
 * step with the job's state, and every place a job becomes ready ends in
 * e->on_ready_job (waiter.c; e->on_ready where a pause ends), so a waiting
 * worker gets it at once, jobs in the order they became ready. Functions that may
 * need a heap to grow return -1 and leave the job where it was; the caller
 * decides (put and release bury the job and answer BURIED, as beanstalkd).
 */
#ifndef TUBED_QUEUE_H
#define TUBED_QUEUE_H

#include <stdint.h>

#include "job.h"
#include "core.h"

/* Allocate and free jobs with their memory counted in e->job_bytes, which
 * --job-memory bounds. queue_job_new() returns NULL when out of memory or
 * past the budget (only puts check the budget: replay must load all). */
Job *queue_job_new(Engine *e, uint64_t id, uint32_t body_size, int check_budget);
void queue_job_free(Engine *e, Job *j);
/* The same in the spilled form (job.h, spill.h): with its body in memory
 * (a put), or on disk only at offset off (replay). */
/* A new job for tube t: in the spilled form, with its body in memory, when
 * t is at its read-behind budget (spill_wanted()), else the plain one. */
Job *queue_job_new_for(Engine *e, const Tube *t, uint64_t id, uint32_t body_size,
                       int check_budget);
/* n, a job in the spilled form holding old's body, takes old's place in
 * every container (table, heaps, JobExt) and old is freed. old is neither
 * reserved nor dead. */
void queue_relocate(Engine *e, Job *old, Job *n);
Job *queue_job_new_spilled(Engine *e, uint64_t id, uint32_t body_size, int check_budget,
                           int with_body, uint64_t off);

/* Register a fresh job (from put) in the table and its tube, then make it
 * ready or delayed. Returns 0, or -1 if it had to be buried instead. */
int queue_add(Engine *e, Job *j, Tube *t);

/* When j expires (monotonic ns), 0 for never: the earlier of the expiry a
 * client set and its tube's max_age after it entered the tube. */
int64_t queue_expiry_of(const Job *j);

/* Expiry keeps its jobs in two places. A job put into a tube with max_age
 * and without a client's expiry expires at created + max_age, in put
 * order: it is in its tube's age ring (agering.h), needs no JobExt, and is
 * an "age member" until it leaves the tube, expires or is found reserved
 * at its time (then JobExt.unaged is set and it joins the heap's side).
 * Every other job with an expiry is in its tube's expiry heap. A job
 * without a JobExt in a tube with max_age is always a member. */
static inline int queue_age_member(const Job *j)
{
    return j->tube->pol.max_age_ms && (!job_ext(j) || !job_ext(j)->unaged);
}
/* Is ring entry a of ctx's tube still a member? (an AgeValid) */
typedef struct AgeCtx {
    Engine *e;
    const Tube *t;
} AgeCtx;
int queue_age_valid(void *ctx, const AgeEntry *a);

/* Put j in its tube's expiry heap at queue_expiry_of(j), move it there,
 * or take it out; -1 (nothing changed) when out of memory. An age member
 * is left alone: the ring has it. */
int queue_expiry_update(Engine *e, Job *j);
/* j leaves its tube's expiry (heap or ring). */
void queue_expiry_remove(Engine *e, Job *j);
/* Empty t's expiry heap and age ring but for its reserved jobs (flush-tube). */
void queue_expiry_reset(Engine *e, Tube *t);

/* Take a job out of whatever holds it now (its state stays as it was). */
void queue_detach(Engine *e, Job *j);

/* A detached job goes to ready (delay 0) or delayed; -1 if a heap cannot
 * grow (the job stays detached). */
int queue_enqueue(Engine *e, Job *j, uint32_t delay);

/* A detached job goes to its tube's buried list; cannot fail. */
void queue_bury(Engine *e, Job *j);

/* Detach and free a job of any state. */
void queue_delete(Engine *e, Job *j);

/* A ready, delayed or buried job becomes reserved by c; -1 (nothing
 * changed) if the TTR heap cannot grow. */
int queue_reserve(Engine *e, Worker *w, Job *j);

/* Restart a reserved job's TTR. */
void queue_touch(Engine *e, Job *j);

/* Buried or delayed job to ready; -1 if not kickable or out of memory. */
int queue_kick_job(Engine *e, Job *j);
/* Pause t for secs seconds (0 ends a pause now); -1 if out of memory. */
int queue_pause(Engine *e, Tube *t, uint32_t secs);

/* Place a replayed job by its state and deadline; -1 out of memory. */
int queue_restore(Engine *e, Job *j);
/* Place a detached job by its state and deadline; -1 out of memory. */
int queue_place(Engine *e, Job *j);


/* Keep t in the engine's list of tubes with something to hand out iff it
 * has ready jobs and is not paused. */
void queue_ready_update(Engine *e, Tube *t);
/* Monotonic ns of the next job or tube timer, INT64_MAX if none. */
int64_t queue_next_due(const Engine *e);

#endif
