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
 * binlog_commit(), before any reply of that iteration leaves. Syncs run on
 * a helper thread (syncer.h) so the loop never blocks on the disk: with
 * -f 0 the replies that depend on the records are held in their
 * connections until the sync that covers them ends (group commit: one
 * fsync for everything written meanwhile); with -f MS a sync starts at
 * most every MS ms and a timer guarantees the last write is synced within
 * MS ms; -F never syncs. If a write or fsync fails, the replies that
 * depended on it are withdrawn and their connections closed, the binlog is
 * marked unhealthy and refuses further durable commands until a fresh file
 * takes the full state again.
 *
 * Files without live records are deleted oldest first; when the files hold
 * more than twice the live data plus two files, the live jobs of the oldest
 * file are written again into the current one so it can go.
 */
#ifndef TUBED_BINLOG_H
#define TUBED_BINLOG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "buf.h"
#include "event.h"
#include "syncer.h"

typedef struct Server Server;
typedef struct Job Job;
typedef struct Conn Conn;

typedef struct BlFile {
    uint32_t index;
    uint64_t live_jobs;
    uint64_t live_bytes;
    uint64_t bytes;        /* on disk */
} BlFile;

typedef struct Binlog {
    int enabled;
    int healthy;
    int recover;           /* --recover: keep valid records past damage */
    int dirfd, lockfd;
    const char *dir;
    uint64_t file_size;
    BlFile *files;         /* oldest .. current; current is the last */
    size_t nfiles, files_cap;
    int cur_fd;
    uint64_t cur_used;     /* bytes placed in the current file */
    uint64_t cur_written;  /* bytes of it already written */
    Buf wbuf;              /* placed but not yet written */
    int64_t wall_mono;     /* the s->now that wall_cache was read for */
    int64_t wall_cache;    /* the realtime then: one clock read a loop */
    int *spares;           /* preallocated next files, in index order */
    size_t nspares, spares_cap;
    uint64_t reserved;     /* room promised to future delete records */
    uint64_t live_bytes, disk_bytes;
    uint64_t records_written, records_migrated;
    int64_t last_sync;     /* monotonic ns */
    int unsynced;          /* written since the last fsync */
    int64_t last_recover_try;
    uint64_t replayed_jobs;
    int damaged;           /* --recover dropped something at replay */
    Server *srv;
    Syncer syncer;         /* fsync off the loop */
    EvSource sync_ev;      /* its eventfd */
    uint64_t cur_gen;      /* records written since the last sync started */
    uint64_t inflight_gen; /* generation being synced now; 0: none */
    int gen_dirty;         /* cur_gen has records */
    int gen_held;          /* cur_gen has replies waiting */
} Binlog;

/* The binlog's disk calls, replaceable by tests to inject a full disk or an
 * I/O error. fallocate returns 0 or an errno (posix_fallocate's way); the
 * others return -1 with errno set. */
typedef struct BlDisk {
    int (*fallocate)(int fd, off_t off, off_t len);
    ssize_t (*pwrite)(int fd, const void *p, size_t n, off_t off);
    int (*fdatasync)(int fd);
} BlDisk;
extern BlDisk bl_disk;

/* Lock DIR, replay it into s, and start a new file. -1 with a message in
 * err when the server must not start. */
int binlog_open(Server *s, char *err, size_t errlen);
void binlog_close(Server *s);

/* Room for a put of j (not yet logged), for a state record. */
int binlog_reserve_put(Server *s, const Job *j);
int binlog_reserve_state(Server *s);

void binlog_put(Server *s, Job *j);
void binlog_state(Server *s, Job *j);
void binlog_delete(Server *s, Job *j);

/* The reply about to be queued on c depends on this iteration's records. */
void binlog_hold_reply(Server *s, Conn *c);

/* Write this iteration's records. With -f 0 the replies that depend on
 * them are held (conn.c writes up to the first hold) until the syncer
 * thread has them on disk; the loop goes on meanwhile. */
void binlog_commit(Server *s);
/* Shutdown: wait for every sync and release every held reply. */
void binlog_settle(Server *s);
/* Timer work: the -f sync deadline, compaction. */
void binlog_tick(Server *s);
int64_t binlog_next_due(const Server *s);

#endif
