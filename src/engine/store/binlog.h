/*
 * binlog.h — the write-ahead log: durability, replay, bounded disk.
 *
 * Contract. With -b DIR every change of a job's durable state is appended
 * to DIR/binlog.N as a checksummed record (format: blcodec.h,
 * doc/binlog.md): a full job record at put (and when compaction moves a
 * job forward), a state record at release, bury, kick and reserve-job of a
 * delayed or buried job, a delete record at delete. Reserving is not
 * logged: a reserved job comes back ready, as in beanstalkd.
 *
 * Space first: a command that will log calls binlog_reserve_*() before it
 * changes anything; that fails (-1) only when the disk cannot hold the
 * record plus a delete record for every live job, and the command answers
 * OUT_OF_MEMORY. Files are preallocated, so an accepted record never meets
 * ENOSPC. Deletes always have room.
 *
 * Records of one loop iteration are written with one write at
 * binlog_commit(), before any reply of that iteration leaves. Each record
 * has a log sequence number; front-ends hold an acknowledgement until the
 * binlog reports its number durable through the engine's hooks (it never
 * sees a connection). Syncs run on a helper thread (syncer.h) so the loop
 * never blocks on the disk: with -f 0 records are durable once synced
 * (group commit: one fsync for everything written meanwhile); with -f MS
 * once written, a sync starts at most every MS ms and a timer guarantees
 * the last write is synced within MS ms; -F never syncs. If a write or
 * fsync fails, the records from the first lost one on are reported lost
 * (their acknowledgements are withdrawn), the binlog is marked unhealthy
 * and refuses further durable commands until a fresh file takes the full
 * state again.
 *
 * A registered fanout child is a BL_CHILD record (binlog_child), live like
 * a job's record while the child is registered.
 *
 * Files without live records are deleted oldest first; when the files hold
 * more than twice the live data plus two files, the live jobs and children
 * of the oldest file are written again into the current one so it can go.
 */
#ifndef TUBED_BINLOG_H
#define TUBED_BINLOG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "blfile.h"
#include "tube.h"

typedef struct Engine Engine;

/* Lock DIR, replay it into e, and start a new file. -1 with a message in
 * err when the server must not start. */
int binlog_open(Engine *e, char *err, size_t errlen);
void binlog_close(Engine *e);

/* Room for a put of j (not yet logged), for a state record. */
int binlog_reserve_put(Engine *e, const Job *j);
int binlog_reserve_state(Engine *e);

void binlog_put(Engine *e, Job *j);
void binlog_state(Engine *e, Job *j);
void binlog_delete(Engine *e, Job *j);
/* flush-tube of t: one record for every job up to max_id but the kept
 * ones (`flushed` of them go, whose delete room it may use); -1 (nothing
 * logged) when the disk has no room. Then each flushed
 * job is let go with binlog_unpin(), which logs nothing. */
int binlog_flush(Engine *e, const Tube *t, uint64_t max_id, const uint64_t *keep,
                 uint32_t nkeep, uint64_t flushed);
void binlog_unpin(Engine *e, Job *j);
/* j is about to change tubes: let its record go (a delete record when the
 * new tube is not journaled); binlog_put() then logs it in the new one. */
void binlog_leave(Engine *e, Job *j, int to_journaled);

/* Write j's record again (its body is in memory) and let the old one go:
 * the new record's offset in the current file, or -1 (nothing changed)
 * when the disk has no room. Read-behind uses it to turn a job whose body
 * is in the job into one whose body is in its record. */
int64_t binlog_rewrite(Engine *e, Job *j);

/* t, a fanout child, was registered (on) or let go: its BL_CHILD record.
 * The registration's record keeps its file like a job's does (compaction
 * writes it again when the file should go), and room for the record that
 * lets it go is promised meanwhile. No room (or no binlog): logged, and
 * the child is registered until a restart only. Registering a child whose
 * record is there already logs nothing. */
void binlog_child(Engine *e, Tube *t, int on);
/* At start, before the loop serves: write and sync what is placed, on this
 * thread. 0, or -1 (logged: the binlog is unhealthy). */
int binlog_write_now(Engine *e);

/* Replication. Append a BL_POS record stating epoch, position, where the
 * epoch began and whether this server follows a primary (its own records
 * then do not advance the position): -1 when the disk has no room. */
int binlog_set_position(Engine *e, uint64_t epoch, uint64_t pos, uint64_t epoch_start,
                        int follower);
/* The same, also setting whether this server was told to follow a primary
 * whose epoch it has not heard yet (BL_POS_UNHEARD; binlog_set_position()
 * keeps it as it is). */
int binlog_set_position_ex(Engine *e, uint64_t epoch, uint64_t pos, uint64_t epoch_start,
                           int follower, int unheard);
/* Ids up to upto are never given again, after a restart too: a delete
 * record of upto, an id no job has (replay takes the next id from the
 * highest id in any record). -1 when the disk has no room. */
int binlog_mark_ids(Engine *e, uint64_t upto);
/* Append j's full record (J or K, as binlog_put() would write it; a
 * spilled body is read from its record) to out, for a replica's snapshot.
 * 0; -1 out of memory; -2 its body cannot be read. */
int binlog_encode_job(Engine *e, Job *j, Buf *out);

/* The sequence number of the last record placed, or 0 when every record
 * is already durable: what an acknowledgement must wait for. */
uint64_t binlog_ticket(const Engine *e);
/* The part of that ticket replicas must confirm (<= binlog_ticket): the
 * last record placed but the id marks of journal = false puts, whose
 * jobs no replica ever holds; 0 when there is none. */
uint64_t binlog_repl_ticket(const Engine *e);

/* Write this iteration's records, then report through the engine's hooks:
 * without -f 0 they are durable once written; with -f 0 the syncer thread
 * syncs them (one fsync for everything written meanwhile) and the report
 * follows when it ends; the loop goes on meanwhile. */
void binlog_commit(Engine *e);
/* With -f 0: a sync that has ended is taken now (its records reported
 * durable through the hooks, the next sync started for what was written
 * since) instead of when the loop sees its eventfd or at the next commit.
 * For a caller that holds the loop long in one iteration (a replica
 * applying a large read): an acknowledgement waiting for that sync leaves
 * at once. Places no record. */
void binlog_poll_sync(Engine *e);
/* Shutdown: wait for every sync and release every held reply. */
void binlog_settle(Engine *e);
/* Timer work: the -f sync deadline, compaction. */
void binlog_tick(Engine *e);
int64_t binlog_next_due(const Engine *e);

#endif
