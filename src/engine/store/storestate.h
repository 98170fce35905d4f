/*
 * storestate.h — the store's state, as the engine's state embeds it.
 *
 * Contract: types only. core.h includes this header (not the store's
 * individual ones) to embed the binlog's state (Binlog, blfile.h) and
 * read-behind's (Spill, spillstate.h) in struct Engine. Every other engine
 * module reaches the store through store.h.
 */
#ifndef TUBED_STORESTATE_H
#define TUBED_STORESTATE_H

#include "blfile.h"
#include "spillstate.h"

#endif
