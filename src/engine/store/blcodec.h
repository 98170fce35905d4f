/*
 * blcodec.h — the binlog's on-disk format: encoding and decoding of the
 * file header and of records. Pure: no I/O, no server state.
 *
 * Contract (all integers little-endian; doc/binlog.md has the tables):
 *   file   = header record*  zero-fill
 *   header = "TUBEDLOG" u32:version u32:crc32c(first 12 bytes)
 *   record = u32:payload-length u32:crc32c(payload) payload
 * A payload length of 0 marks the end of the records in a file (files are
 * preallocated with zeros). bl_decode() never trusts a length it has not
 * checked against the bytes available and the payload's type, and it
 * verifies the checksum before reading any field.
 */
#ifndef TUBED_BLCODEC_H
#define TUBED_BLCODEC_H

#include <stddef.h>
#include <stdint.h>

#define BL_MAGIC "TUBEDLOG"
/* Version 2 adds BL_JOBX; files of version 1 (no BL_JOBX) still replay. */
#define BL_VERSION 2
#define BL_VERSION_MIN 1
#define BL_HEADER_SIZE 16
#define BL_REC_HEAD 8

/* BL_JOBX is BL_JOB with two more times after created: when the job
 * entered its tube (a move restarts that clock) and the expiry a client
 * set, for jobs that have either. */
/* BL_FLUSH (version 2): flush-tube. Every job of the tube with an id up to
 * `id` is deleted, but for the `nkeep` ids listed (the reserved ones,
 * which stay with their workers). */
/* BL_POS (replication, doc/replication.md): the epoch (in `id`), the
 * position after the records before it, flags (BL_POS_FOLLOWER: written by
 * a replica, so its own records after it do not count; BL_POS_UNHEARD:
 * told to follow a primary whose epoch it has not heard yet, so a
 * promotion must not start the epoch that primary may have) and the
 * position where the epoch began. BL_SNAP_END is the replication stream's end of a
 * snapshot: the next job id (in `id`) and the position; never in a file. */
/* BL_CHILD: a fanout child registered (flags BL_CHILD_ON) or let go
 * (flags 0); `tube` is the child's name, "PARENT+NAME". `id` is 0. Files
 * of version 2 written before it simply have none (a binary older than it
 * refuses a file that has one, as damage). */
enum { BL_JOB = 'J', BL_JOBX = 'K', BL_STATE = 'S', BL_DELETE = 'D', BL_FLUSH = 'F',
       BL_POS = 'P', BL_SNAP_END = 'E', BL_CHILD = 'C' };
enum { BL_POS_FOLLOWER = 1, BL_POS_UNHEARD = 2 };
enum { BL_CHILD_ON = 1 };

/* Sizes of the fixed parts, so space can be reserved ahead. */
/* Job ids a record may carry are below this: no server gives out that
 * many, and the next id (one past the highest seen) must not wrap to 0,
 * or a replica or a replay would take a known id for a new one. A record
 * with a higher job id is damage. */
#define BL_ID_LIMIT ((uint64_t)1 << 62)
#define BL_JOB_FIXED (BL_REC_HEAD + 63)
#define BL_JOBX_EXTRA 16
#define BL_STATE_SIZE (BL_REC_HEAD + 46)
#define BL_DELETE_SIZE (BL_REC_HEAD + 9)
#define BL_FLUSH_FIXED (BL_REC_HEAD + 14)
#define BL_POS_SIZE (BL_REC_HEAD + 26)
#define BL_SNAP_END_SIZE (BL_REC_HEAD + 17)
#define BL_CHILD_FIXED (BL_REC_HEAD + 11)

typedef struct BlRecord {
    uint8_t type;
    uint64_t id;
    uint32_t pri, delay, ttr;     /* ttr: BL_JOB only */
    uint8_t state;                /* JobState: ready, delayed or buried */
    int64_t deadline_wall;        /* delayed: realtime ns it becomes ready */
    int64_t created_wall;         /* BL_JOB only */
    int64_t entered_wall;         /* BL_JOBX: realtime ns it entered its tube */
    int64_t exptime_wall;         /* BL_JOBX: a client's expiry; 0: none */
    uint32_t reserves, timeouts, releases, buries, kicks;
    const char *tube;             /* BL_JOB, BL_FLUSH, BL_CHILD; not
                                     NUL-terminated */
    uint8_t tube_len;
    const char *body;             /* BL_JOB only */
    uint32_t body_size;
    uint32_t nkeep;               /* BL_FLUSH: ids kept, 8 bytes each at keep */
    const char *keep;
    uint64_t pos;                 /* BL_POS, BL_SNAP_END */
    uint64_t epoch_start;         /* BL_POS */
    uint8_t flags;                /* BL_POS, BL_CHILD */
} BlRecord;

/* The i-th kept id of a BL_FLUSH record. */
uint64_t bl_flush_keep(const BlRecord *r, uint32_t i);

/* Result of bl_decode() besides a positive record length. */
enum { BL_END = 0, BL_TORN = -1, BL_CORRUPT = -2 };

size_t bl_record_size(const BlRecord *r);
/* Writes exactly bl_record_size(r) bytes. */
void bl_encode(const BlRecord *r, char *out);

void bl_encode_header(char out[BL_HEADER_SIZE]);
/* 0: valid header; 1: all zeros (never written); -1: anything else. */
int bl_check_header(const char *p, size_t n);
/* The format version of a header that is tubed's, intact, and newer than
 * this binary reads (a file written by a later tubed); else 0. */
uint32_t bl_header_newer(const char *p, size_t n);

/* Decode the record at p, with n bytes available: its total length (> 0),
 * BL_END at a zero length field (or fewer than 4 bytes, all zero),
 * BL_TORN if the record runs past n bytes, BL_CORRUPT if the checksum or
 * the payload's structure is wrong. r's pointers point into p. */
long bl_decode(const char *p, size_t n, BlRecord *r);

#endif
