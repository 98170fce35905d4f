/*
 * waiter.h — matching waiting workers with jobs (the engine side of
 * reserve, and of a memcache get with a timeout).
 *
 * Contract: worker_reserve() answers at once when it can (a job from the
 * watched tubes, DEADLINE_SOON, or TIMED_OUT) and otherwise parks the
 * worker in the waiting set of every tube it watches, with a timer for its
 * timeout and for the one-second safety margin before the TTR of a job it
 * holds. When a job becomes ready or a pause ends, queue.c calls
 * e->on_ready_job() or e->on_ready(), which only note the job and the tube
 * and post engine_deliver() on the loop; engine_deliver() (engine.h) then
 * hands the jobs that became ready, in that order, to waiting workers
 * (beanstalkd gives each job out as it becomes ready: a kick of three
 * hands out the first kicked), then what is left in the tubes noted (a
 * pause ended) best job first across them, as 1.12's process_queue()
 * does. Which worker is served is beanstalkd's choice too: a tube's
 * waiters sit in a set whose removal moves the last into the hole, served
 * from a cursor that moves on after each take (its ms_take), or first
 * come first served from the moment a fifo worker (a memcache get) waits
 * there until nobody waits there; a worker
 * watching more than WAIT_WIDE tubes (watch.h) waits engine-wide instead
 * and goes before them if it began to wait before the one at the cursor.
 * waiter_tick() ends waits whose time came; their wakes are delivered the
 * same way (engine_tick() first delivers what delays and pauses ending in
 * the same tick made ready, and interleaves waits ending with TTRs running
 * out in the order of their times, as beanstalkd ticks its connections:
 * a job whose TTR ran out before a wait's end goes to that waiter even
 * when both fall in one late tick). So a worker is never woken inside the
 * operation that served it: that operation has finished and placed its
 * binlog records first.
 */
#ifndef TUBED_WAITER_H
#define TUBED_WAITER_H

#include <stdint.h>

#include "clock.h"
#include "core.h"

/* 1 second: the last second of a TTR belongs to the server. */
#define SAFETY_MARGIN NS_PER_SEC

void waiter_init(Engine *e);
/* Drop what is posted and not delivered (engine_free). */
void waiter_fini(Engine *e);
/* Deliver what is noted best job first across the tubes, the jobs noted
 * included (pauses ended: engine_tick()). */
void waiter_deliver_best(Engine *e);
/* Is a wait due that ends before `before` (ns, monotonic)? */
int waiter_due_before(const Engine *e, int64_t before);
/* End the waits due that end before `before`; INT64_MAX for all due. */
void waiter_tick(Engine *e, int64_t before);
/* Is something noted for engine_deliver() (a job, a tube, an ended wait)? */
int waiter_pending(const Engine *e);
int64_t waiter_next_due(const Engine *e);

/* The front-ends' side (engine.h includes this header). */
/* Outcome of worker_reserve(): a WaitEnd, or WAIT_PENDING when the worker
 * now waits and will be woken through its ops. */
enum { WAIT_PENDING = 100 };
/* timeout: ns to wait, INT64_MAX for ever, 0 to answer at once. */
int worker_reserve(Engine *e, Worker *w, int64_t timeout, Job **out);
/* Stop waiting (no wake call, nor one still to be delivered). */
void worker_cancel(Engine *e, Worker *w);
/* Hand the jobs that became ready to waiting workers and report waits
 * that ended, calling the workers' ops->wake (worker.h). Runs by itself
 * after each event handler (posted on e->loop); a front-end also calls it
 * after each command, so the worker that waited first gets a job before
 * the next pipelined command of the same client runs (beanstalkd's order).
 * Cheap when nothing is pending. */
void engine_deliver(Engine *e);

/* Workers waiting in a reserve that watch t. */
uint32_t engine_tube_waiting(const Engine *e, const Tube *t);

/* The best ready job across w's watched, unpaused tubes, or NULL. */
Job *waiter_find(Engine *e, const Worker *w);

#endif
