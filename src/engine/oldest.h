/*
 * oldest.h — the job a full tube discards first, without a scan.
 *
 * Contract: discard_old_when_full deletes a full tube's oldest job (the
 * lowest id) among its ready jobs, else its delayed ones, else its buried
 * ones. Those containers are ordered for serving, not by id, and a scan of
 * them on every put into a full tube of 100,000 jobs took 127 s for
 * 200,000 puts. So a tube that discards keeps an index: per state, a
 * min-heap of the ids of the jobs that entered that state in the tube.
 *
 * Entries are not taken out when a job leaves a state: oldest_pick()
 * checks each candidate against the job table and drops the stale ones,
 * and a heap that grows past twice its state's jobs is rebuilt from the
 * state's container, so a transition costs O(log n) amortised. The index
 * is built (from the containers) at a tube's first discard and then kept
 * by oldest_note(), which queue.c calls on every entry into READY, DELAYED
 * or BURIED. Out of memory, the index is dropped, built again at the next
 * pick, and a pick that cannot build it scans as before: never wrong, at
 * worst slow. A tube whose policy no longer discards drops its index at
 * its next transition; oldest_free() gives it back when the tube goes.
 */
#ifndef TUBED_OLDEST_H
#define TUBED_OLDEST_H

#include "core.h"
#include "job.h"
#include "tube.h"

/* j has just entered its state (READY, DELAYED or BURIED) in j->tube,
 * which has an index (tube.h: t->oldest). */
void oldest_note(Engine *e, Job *j);

/* The job t gives up first, or NULL if it has no ready, delayed or buried
 * job. */
Job *oldest_pick(Engine *e, Tube *t);

void oldest_free(Tube *t);

#endif
