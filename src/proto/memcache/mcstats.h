/*
 * mcstats.h — the memcache front-end's documents (stats, dump_stats,
 * dump_config) and the per-tube counters only this front-end keeps.
 *
 * Contract: each document function appends its whole reply, every line
 * ending "\r\n" and the last one "END\r\n", to a Buf (errors show as
 * buf->oom), in the key order of spec kestrel.md §5-§6. The engine's own
 * figures (jobs, bytes, expiries, discards, waiters) are read from the
 * engine; what the engine does not count (a tube's /open gets, the opened
 * jobs given back, flushes, the age of the last job fetched) is kept here
 * by tube name. Those counters describe one tube's life: they start at
 * zero when the counters of a tube that is not the one they were kept for
 * are asked for (the name was freed and made again), and entries of tubes
 * that are gone are dropped whenever a document is made.
 */
#ifndef TUBED_MCSTATS_H
#define TUBED_MCSTATS_H

#include <stdint.h>

#include "buf.h"
#include "mc.h"

typedef struct McTubeStat {
    HashNode node;
    const Tube *tube;       /* the tube these count for */
    uint64_t transactions;  /* /open gets that opened a job */
    uint64_t canceled;      /* opened jobs given back (abort, disconnect) */
    uint64_t flushes;       /* flush and flush_all of the tube */
    uint64_t age_ms;        /* how long the last job fetched had waited */
    uint8_t len;
    char name[MAX_TUBE_NAME + 1];
} McTubeStat;

int mcstats_init(Memcache *f);
void mcstats_free(Memcache *f);
/* The counters of t, made (zero) if need be; NULL when out of memory (the
 * count is then lost, nothing else). */
McTubeStat *mcstats_tube(Memcache *f, const Tube *t);
/* delete: the tube starts over, as a deleted kestrel queue does. */
void mcstats_forget(Memcache *f, const Tube *t);

void mcstats_server(Memcache *f, const Listener *l, Buf *b);
/* names empty: every tube. */
void mcstats_dump(Memcache *f, const Listener *l, McNames names, Buf *b);
void mcstats_config(Memcache *f, Buf *b);

#endif
