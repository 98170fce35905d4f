/*
 * spill.h — read-behind: tubes whose bodies outgrow max_memory_size.
 *
 * Contract. With -b, a tube whose policy sets max_memory_size keeps at
 * most that many body bytes in memory; the other bodies live only in their
 * binlog record (extensions.md §5, doc/binlog.md "Read-behind").
 *
 * - Spilling. A put into a tube already at its budget gets a job in the
 *   spilled form (job.h), its body still in memory. Once the binlog has
 *   written the record (the commit after the put), spill_after_commit()
 *   drops the body, so what the tube holds in memory stays within budget.
 *   Replay restores such a tube's jobs on disk only.
 * - Reading back. Each spilling tube has a FIFO of the ids of its jobs on
 *   disk, in the order they were spilled (id order for a plain backlog);
 *   only ready ones are read ahead, a delayed or buried one joins the
 *   FIFO again when it becomes ready.
 *   Whenever the tube has room under its budget for the next one, a reader
 *   thread reads that body back (pread of its record) and the loop checks
 *   the record and hands the body to the job: a worker draining the tube
 *   finds the next bodies already in memory. A command that needs a body
 *   still on disk (a priority jump, a restart's first reserves) parks a
 *   worker that may wait until the reader brings it (spill_fetch());
 *   reserve-with-timeout 0, peek, a move or compaction read it on the
 *   loop itself (spill_load()). Both count as waits.
 * - Invariant: a reserved job's body is in memory (queue_reserve() loads
 *   it), so flush-tube and the budget never meet a reserved job on disk.
 * - A record that cannot be read back (I/O error, checksum, not the job's
 *   record) is logged, counted (tubed_binlog_spill_errors_total), and the job is buried
 *   when a reserve meets it; nothing crashes and no other job is touched.
 *   Only a server short of descriptors or memory leaves the job ready (the
 *   reserve gets a temporary error): burying a whole backlog for that would
 *   be wrong, while keeping a job whose disk answers EIO at the head of its
 *   queue would stop every job behind it.
 *
 * The reader thread touches no server state: it gets (file, offset,
 * length, buffer) requests and hands back filled buffers by eventfd.
 */
#ifndef TUBED_SPILL_H
#define TUBED_SPILL_H

#include <stddef.h>
#include <stdint.h>

#include "spillstate.h"

/* Start the reader (binlog_open() calls it). -1 with errno on failure. */
int spill_init(Engine *e);
void spill_stop(Engine *e);

/* Should a new job of n body bytes for t take the spilled form? (Past
 * t's budget, counting the bodies being read ahead as in memory.) */
int spill_wanted(const Engine *e, const Tube *t, uint32_t n);

/* j (spilled) has a new record: its body may go once that is written. */
void spill_note(Engine *e, Job *j);

/* j, a job in the in-memory form, is leaving a worker (released, buried,
 * timed out, deleted) for a tube with a budget: shrink_back() turns it
 * into a spilled one if the tube is over budget once it is back. */
void spill_note_back(Engine *e, Job *j);

/* After the binlog's commit: drop the bodies that are written and over
 * budget, then ask for the next bodies of every spilling tube. */
void spill_after_commit(Engine *e);

/* A worker that may wait wants j: 1 when j's body is on its way (a read
 * is in flight; the loop calls the engine's on_ready for j's tube once it
 * is in, or once j was buried because it cannot be read), 0 when it is in
 * memory or cannot be asked for (read it with spill_load()). */
int spill_fetch(Engine *e, Job *j);

/* Bring j's body into memory now, on the loop. 0 (also when it was there
 * or j is not spilled), -1 out of memory, -2 the record is damaged (not
 * j's, checksum, its file gone), -3 it could not be read for want of
 * descriptors or memory (passes by itself), -4 the disk failed the read
 * (EIO and the like: may pass or not). */
int spill_load(Engine *e, Job *j);

/* j's body to write j's record again (compaction, recovery) without
 * taking it into j: *body points into *buf (free it with job_body_free();
 * NULL when the body was in memory already). 0, -1 out of memory, -2 the
 * record is damaged, -3 or -4 it could not be read (as spill_load();
 * logged, counted). */
int spill_borrow(Engine *e, Job *j, void **buf, const char **body);

/* t holds more bodies than its budget (a reload set it, jobs moved in):
 * mark it so the engine spills what it holds, a batch per iteration. */
void spill_check_budget(Engine *e, Tube *t);

/* The read-ahead cannot fit t's next ready body: if delayed or buried
 * bodies may be what holds t's budget, mark t so the engine spills them
 * (shrink.h), as the bodies kept are those of the jobs next in line. */
void spill_yield(Engine *e, Tube *t);

/* A reserve met j, whose record cannot be read: bury it. */
void spill_bury_damaged(Engine *e, Job *j);

/* j leaves its tube for good (deleted, forgotten at replay). */
void spill_forget(Engine *e, Job *j);
/* j is freed: the engine-wide counts. */
void spill_freed(Engine *e, const Job *j);
/* j became ready (a delay ended, a kick): if its body is on disk only,
 * the read-ahead takes it in line again (only ready jobs are read ahead). */
void spill_ready(Engine *e, Job *j);
/* A spilled job on disk only now belongs to its tube (replay). */
void spill_count(Engine *e, Job *j);
/* flush-tube took every job of t that is not reserved. */
void spill_tube_flushed(Engine *e, Tube *t);
/* t is being freed. */
void spill_tube_gone(Engine *e, Tube *t);
/* After replay: the rings of the tubes that came back spilled. */
int spill_after_replay(Engine *e);
/* Binlog files below index are gone: close what points at them, the
 * loop's fds at once and the reader thread's as soon as it wakes (it is
 * woken for it: an idle reader must not hold their disk space). */
void spill_files_dropped(Engine *e, uint32_t index);

/* In-memory figures of t (memcache mem_items / mem_bytes, metrics). */
uint64_t spill_tube_mem_bytes(const Tube *t);

#endif
