/*
 * listjobs.h — list-jobs paging: a page of a tube's job ids, ascending.
 *
 * Contract: listjobs_page() answers engine_list_jobs() (engine.h): up to
 * count ids >= from of t's jobs in state (a JobState, or -1 for all),
 * ascending, into out, without allocating and without changing anything
 * (a job past its expiry is not listed, nor expired). A page costs about
 * `count` lookups when the tube's ids are dense, or one pass over the
 * jobs of the state asked for, whichever is cheaper, never a pass over
 * every job of the server.
 */
#ifndef TUBED_LISTJOBS_H
#define TUBED_LISTJOBS_H

#include <stdint.h>

#include "core.h"

uint32_t listjobs_page(Engine *e, Tube *t, int state, uint64_t from, uint32_t count,
                       uint64_t *out);

#endif
