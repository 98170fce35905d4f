/*
 * shrink.h — read-behind after a reload: a tube over a budget that a
 * reload set or lowered gives back its bodies, a batch per iteration.
 *
 * Contract: spill_check_budget() (spill.h) marks such a tube (t->shrink)
 * and counts it in e->spill.shrinking; shrink_tubes(), from
 * engine_commit() while the binlog is healthy, turns up to SHRINK_BATCH
 * in-memory bodies per marked tube into spilled ones, the last in line
 * first (the ready heap from its end, the delay heap, then the buried
 * list from its tail, whose place is kept by id across batches): each
 * job's record is written again, the job takes the spilled form (swapped
 * in every container, queue_relocate()), and its body goes once that
 * record is written (spill_after_commit()). A tube is unmarked once
 * within budget or looked through.
 */
#ifndef TUBED_SHRINK_H
#define TUBED_SHRINK_H

#include "core.h"

void shrink_tubes(Engine *e);

/* The in-memory jobs workers gave back (spill_note_back()) to a tube
 * over its budget take the spilled form, each at once: a reload's shrink
 * passes over reserved jobs, so without this they would keep the tube
 * over budget for as long as they live. */
void shrink_back(Engine *e);

#endif
