/*
 * blfile.h — the binlog's state and its list of files.
 *
 * Contract: the Binlog struct (what binlog.c and blreplay.c share), the
 * injectable disk calls, and the small helpers both need: file names,
 * the list of files oldest first with their live counts, the size of a
 * job's record, and converting a logged realtime to the monotonic clock.
 * Nothing here writes a record; binlog.h is the binlog's interface.
 */
#ifndef TUBED_BLFILE_H
#define TUBED_BLFILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "blcodec.h"
#include "buf.h"
#include "event.h"
#include "job.h"
#include "stream.h"
#include "syncer.h"

#define BL_DEL_SIZE BL_DELETE_SIZE

typedef struct BlFile {
    uint32_t index;
    uint64_t live_jobs;
    uint64_t live_bytes;
    uint64_t bytes;        /* on disk */
    uint64_t tail;         /* replayed with zeros from here to its end (a
                              preallocated tail a crash left); 0: none */
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
    int no_room;           /* a spare file could not be made: puts answer
                            * OUT_OF_MEMORY (said once, until one is made) */
    char last_error[128];  /* why it last turned unhealthy; "" if never */
    uint64_t compactions;  /* files whose live jobs were moved forward */
    struct Engine *eng;
    Syncer syncer;         /* fsync off the loop */
    EvSource sync_ev;      /* its eventfd */
    uint64_t lsn;          /* sequence number of the last record placed */
    uint64_t repl_lsn;     /* ... of the last one a replica must hold for an
                              acknowledgement (all but the id marks of
                              journal = false puts) */
    uint64_t written_lsn;  /* every record up to it is written */
    uint64_t durable_lsn;  /* ... and durable under the -f mode in force */
    uint64_t sync_target;  /* what the running sync makes durable */
    uint64_t lost_from;    /* a record that could not be placed; 0: none */
    uint64_t id_mark;      /* ids up to it are safe from reuse (journal=false) */
    uint64_t must_sync_from, must_sync_last; /* sync_journal records not yet
                                              * synced: first, last; 0: none */
    int left_sync;         /* binlog_leave() took a job out of a sync_journal
                              tube into another: its next put record, the
                              move's, changes that tube too */
    /* Replication (doc/replication.md). pos: the records made since the
     * binlog began (a follower: the primary's records it has written),
     * kept over restarts by BL_POS records; epoch and where it began. */
    uint64_t pos, epoch, epoch_start;
    uint64_t placed_lsn;   /* the last record in wbuf (lsn may be one more:
                              a record mid-placement that rolled the file) */
    int follower;          /* a replica: its own records do not count */
    int unheard;           /* told to follow, the primary's epoch not yet
                              heard (BL_POS_UNHEARD) */
    int pos_persist;       /* replication is in use: files carry BL_POS
                              records (else the log is as it always was) */
    /* Every write of records, with the position after them, and a reset
     * when the log was rewritten whole after a failure: its subscribers
     * (stream.h; the replication layer is one). */
    StoreStream stream;
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

static inline BlFile *cur_file(Binlog *b) { return &b->files[b->nfiles - 1]; }

void bl_file_name(const Binlog *b, uint32_t index, char *out, size_t n);
/* The numbers N (1 up, decimal digits only) of the binlog.N files in dir,
 * sorted, in a tb_malloc'd array (*out NULL when there is none). A number
 * above max is an error when refuse_above (tubed's own files: a job names
 * its file in 28 bits), else that file is passed over. -1 with err set
 * ("cannot read WHAT DIR: ...", out of memory). */
int bl_list_files(const char *dir, const char *what, uint32_t max, int refuse_above,
                  uint32_t **out, size_t *n, char *err, size_t errlen);
/* Append file `index` to the list; -1 when out of memory. */
int bl_files_push(Binlog *b, uint32_t index);
/* What a file whose fstat() gave st takes on disk: its allocated blocks,
 * but no more than its size (a sparse or short tail counts what it holds;
 * BlFile.bytes). */
struct stat;
uint64_t bl_disk_bytes(const struct stat *st);
/* The list entry of file `index`, NULL if it is not in the list. */
BlFile *bl_file_of(Binlog *b, uint32_t index);
size_t bl_job_record_size(const Job *j);
/* A fanout child's registration record (BL_CHILD), like a job's, keeps its
 * file: pin it to file `index` (counted live there), or let it go. Its
 * unregistration's room (bl_child_room(), whole delete records) is
 * promised while it is pinned. */
size_t bl_child_record_size(const Tube *t);
uint64_t bl_child_room(const Tube *t);
void bl_child_pin(Binlog *b, Tube *t, uint32_t index);
void bl_child_unpin(Binlog *b, Tube *t);
/* A logged realtime on the monotonic clock, given the realtime now and
 * the monotonic now (read once for a whole replay: one clock for every
 * job). */
int64_t bl_mono_of(int64_t wall, int64_t wall_now, int64_t mono_now);

#endif
