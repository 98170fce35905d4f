/*
 * mcstats.h — the memcache front-end's documents (stats, dump_stats,
 * dump_config) and the per-tube counters only this front-end keeps.
 *
 * Contract: each document function appends its whole reply, every line
 * ending "\r\n" and the last one "END\r\n", to a Buf (errors show as
 * buf->oom), in the key order of spec kestrel.md §5-§6. The engine's own
 * figures (jobs, bytes, expiries, discards, waiters) are read from the
 * engine; what the engine does not count (a tube's /open gets, the opened
 * jobs given back, flushes, the age of the last job fetched) this
 * front-end counts in the tube itself (Tube.mc, tube.h), so the counters
 * describe one tube's life: a tube freed and made again starts at zero.
 */
#ifndef TUBED_MCSTATS_H
#define TUBED_MCSTATS_H

#include <stdint.h>

#include "buf.h"
#include "mc.h"

typedef TubeMcStats McTubeStat;

/* The counters of t. */
static inline McTubeStat *mcstats_tube(Tube *t)
{
    return &t->mc;
}
/* delete: the tube starts over, as a deleted kestrel queue does. */
void mcstats_forget(Tube *t);

void mcstats_server(Memcache *f, const Listener *l, Buf *b);
/* names empty: every tube. */
void mcstats_dump(Memcache *f, const Listener *l, McNames names, Buf *b);
/* dump_config: the live tubes and the [tube NAME] sections, only those
 * listener l may touch (NULL: all). */
void mcstats_config(Memcache *f, const Listener *l, Buf *b);

#endif
