/*
 * store.h — the store: the engine's records, their sequence numbers, and
 * where they go (the binlog files, replicas, read-behind).
 *
 * Contract. The engine speaks to the store through this header only
 * (src/engine/store/ is a sub-layer under the rest of the engine; the
 * include lint holds every other engine module to it). In records and
 * sequence numbers:
 *
 * - Room first, then append. A command that will log asks for room before
 *   it changes anything (binlog_reserve_put/_state: -1 is OUT_OF_MEMORY),
 *   then appends its record: binlog_put (a job's full record),
 *   binlog_state, binlog_delete, binlog_flush, binlog_leave, binlog_child
 *   (a fanout child registered or let go). Each record placed takes the
 *   next sequence number.
 * - Durability tickets. binlog_ticket() is the sequence number a reply
 *   must wait for (binlog_repl_ticket() the part replicas must confirm:
 *   not a journal = false put's id mark); binlog_commit() (once per loop iteration) writes the
 *   iteration's records and reports through the engine's hooks: durable up
 *   to N, lost from N. The loop never blocks on the disk (syncer.h).
 * - Replay. binlog_open() locks the directory, replays every file into
 *   the engine (jobs, tubes, fanout children) and starts a new file.
 * - Long-lived state survives file deletion: a file goes only when no live
 *   record (a job's, a registered child's) is in it; compaction writes the
 *   oldest file's live records again into the current one.
 * - Read-behind (spill.h): bodies that live only in their record, read
 *   back ahead of the workers (spill_fetch) or on the loop (spill_load).
 * - The record stream (stream.h): every write of records, as the bytes
 *   placed in the file with the last one's sequence number, goes to each
 *   subscriber in order, after the file writer; replication subscribes
 *   with store_subscribe().
 *
 * - Taking over beanstalkd's binlog at start (bsimport.h).
 *
 * Formats: blcodec.h and doc/binlog.md.
 */
#ifndef TUBED_STORE_H
#define TUBED_STORE_H

#include <stdint.h>

#include "binlog.h"
#include "blcodec.h"
#include "bsimport.h"
#include "spill.h"
#include "stream.h"

typedef struct Engine Engine;

/* Add a subscriber to e's record stream (stream.h): 0, or -1 when the
 * stream has STORE_SUBS already. */
int store_subscribe(Engine *e, const StoreSub *sub);
void store_unsubscribe(Engine *e, const StoreSub *sub);

#endif
