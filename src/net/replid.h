/*
 * replid.h — the id of a replication history (doc/replication.md,
 * "Partial resync"), kept in DIR/replication-id, and the I record that
 * carries it on the stream.
 *
 * Contract. An id is a random nonzero 64-bit number: a primary picks one
 * when it starts and when it is promoted; a replica keeps its primary's.
 * replid_save() writes it to a temporary file, syncs it (unless nosync),
 * renames it over DIR/replication-id and syncs the directory, so a crash
 * leaves the old id or the new one; id 0 removes the file, and a failed
 * write removes it too (an unknown history is safe, a stale one is not).
 * replid_load() gives 0 for no file or a malformed one. The I record is
 * framed as every stream record (u32 length, u32 CRC32C, payload) with a
 * payload of 'I', the history's id and the stream's id (u64 each,
 * little-endian). Nothing here knows a Server; the caller logs nothing
 * more (these log their own failures).
 */
#ifndef TUBED_REPLID_H
#define TUBED_REPLID_H

#include <stddef.h>
#include <stdint.h>

#define REPLID_TYPE 'I'
#define REPLID_PAYLOAD 17
#define REPLID_RECORD_SIZE (8 + REPLID_PAYLOAD)

uint64_t replid_new(void);
int replid_save(const char *dir, int nosync, uint64_t id);
uint64_t replid_load(const char *dir);

/* fdatasync every binlog.N file of dir (a replica under -f 0, after a
 * restart, before it claims what they hold): 0, or -1 if any failed. */
int replid_sync_binlogs(const char *dir);

void replid_record(uint64_t history, uint64_t stream, char out[REPLID_RECORD_SIZE]);
/* Is the record at p an I record whose checksum holds? 1, with the ids;
 * 0 not one (a record of another type, or an I of another length: the
 * binlog decoder judges it); -1 not all of it here yet. */
int replid_decode(const char *p, size_t n, uint64_t *history, uint64_t *stream);

#endif
