/*
 * grave.h — flush-tube's graveyard, and holding the job table's shrink.
 *
 * Contract: grave_flush_tube() takes every ready, delayed and buried job
 * out of a tube at once, in O(1) whatever their number (the ready and
 * delay heaps and the buried list are handed over whole) and logs one
 * record; the jobs are then "dead" (job_dead()) and grave_free() frees
 * them a bounded batch per loop iteration, so no client waits for a big
 * flush. While jobs wait there, or a big expiry sweep runs, the job table
 * does not shrink (a rehash mid-way would be one long pause):
 * grave_hold_shrink() takes and gives back such a hold.
 */
#ifndef TUBED_GRAVE_H
#define TUBED_GRAVE_H

#include <stdint.h>

#include "core.h"

/* Who holds the job table from shrinking (Engine.shrink_holds). */
enum { HOLD_GRAVE = 1, HOLD_SWEEP = 2 };
void grave_hold_shrink(Engine *e, unsigned who, int on);

/* Flushed jobs freed per loop iteration (a few milliseconds' work at most:
 * each free is a few cache misses). */
#define GRAVE_BATCH 2000

/* engine_flush_tube() (engine.h). */
int64_t grave_flush_tube(Engine *e, Tube *t);
/* Free up to budget flushed jobs; how many it freed. */
uint64_t grave_free(Engine *e, uint64_t budget);
/* Flushed jobs wait to be freed. */
int grave_pending(const Engine *e);
/* Free every flushed job and the graveyard itself (engine_free). */
void grave_fini(Engine *e);

#endif
