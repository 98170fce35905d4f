/*
 * bsimport.h — taking over beanstalkd's binlog (--import-beanstalkd DIR).
 *
 * Contract. bsimport_run() runs once at start, after tubed's own replay
 * (binlog_open), when the flag is given:
 *
 * - Only into an empty binlog. When tubed's binlog directory has the
 *   marker BSI_MARKER (an import finished there) or holds any job or id
 *   already, the flag is logged as ignored and nothing is read: a unit
 *   file may keep the flag, and nothing is imported twice.
 * - DIR is only read: every file is opened O_RDONLY, nothing is locked,
 *   written or removed there. beanstalkd holds a POSIX record lock
 *   (fcntl F_SETLK, F_WRLCK) on DIR/lock while it runs; F_GETLK shows it,
 *   and the import refuses while it is held.
 * - The files DIR/binlog.N are read oldest first as beanstalkd 1.12's own
 *   replay reads them (bsi_read_file): format version 7, or 5 (1.4.x),
 *   x86-64 layout in host byte order. Full records create or replace a
 *   job, short ones update it (or are ignored when its full record was
 *   compacted away), a record in state 0 deletes it, a reserved job comes
 *   back ready. Damage (a bad length, a truncated record, an unknown
 *   state) ends that file as it ends beanstalkd's replay: the records
 *   before it are kept, the job it names is dropped, and every drop is
 *   logged with the file and offset. A file that is not a beanstalkd
 *   binlog (another version, tubed's own magic) or a DIR without one is
 *   an error: nothing is imported and the server does not start.
 * - Every live job goes into the engine with its id, tube, priority, TTR,
 *   state (a delayed job whose time passed is ready), delay deadline,
 *   body, creation time and counters, is logged as a put would be, the
 *   ids above the highest one seen are the next ones given, the binlog
 *   is written and synced, then the marker is written and synced. While
 *   it runs BSI_PENDING is there: an import cut short (a crash, a full
 *   disk) leaves it, and every later start refuses (bsimport_unfinished)
 *   until the operator empties tubed's binlog directory.
 */
#ifndef TUBED_BSIMPORT_H
#define TUBED_BSIMPORT_H

#include <stddef.h>
#include <stdint.h>

typedef struct Engine Engine;

/* In tubed's binlog directory: the import is done (one line of text), and
 * an import is under way or was cut short (a crash, a full disk). */
#define BSI_MARKER "beanstalkd-imported"
#define BSI_PENDING "beanstalkd-import-unfinished"

enum { BSI_READY = 1, BSI_BURIED = 3, BSI_DELAYED = 4 }; /* beanstalkd's */

typedef struct BsiJob {
    uint64_t id;           /* 0: dead (deleted or dropped) */
    int64_t delay_ns, ttr_ns;
    int64_t created_wall;  /* ns since the epoch */
    int64_t deadline_wall; /* delayed: when it becomes ready, ns */
    uint32_t pri, tube;    /* tube: index in BsiReader.tubes */
    uint32_t reserves, timeouts, releases, buries, kicks;
    uint32_t body_size;    /* with beanstalkd's trailing "\r\n" */
    uint8_t state;         /* BSI_READY, BSI_BURIED or BSI_DELAYED */
    char *body;
} BsiJob;

typedef struct BsiTube {
    uint8_t len;
    char name[201];
} BsiTube;

typedef struct BsiReader {
    BsiJob *jobs;          /* in the order their first full record came */
    size_t njobs, jobs_cap, nlive;
    uint32_t *slots;       /* id -> index + 1 in jobs, open addressing */
    size_t nslots;
    BsiTube *tubes;
    uint32_t *tube_slots;  /* name -> index + 1 in tubes */
    size_t ntubes, tubes_cap, ntube_slots;
    uint64_t max_id;       /* the highest id in any record */
    uint32_t damaged;      /* files cut short by damage */
    uint32_t dropped;      /* jobs dropped by damage */
    uint32_t files;        /* files read */
} BsiReader;

void bsi_init(BsiReader *r);
void bsi_free(BsiReader *r);

/* Apply one whole file's bytes (name: for messages). 0 (damage is
 * logged, counted and survived); -1 out of memory; -2 not a beanstalkd
 * binlog (err says why). */
int bsi_read_file(BsiReader *r, const char *name, const unsigned char *p, size_t n,
                  char *err, size_t errlen);

/* The pid holding beanstalkd's lock on DIR/lock, 0 when none (or no
 * such file), -1 when it cannot be told (errno). Takes no lock. */
long bsi_lock_holder(const char *dir);

/* Check the lock, then read DIR's binlog.N files into r. 0, or -1 with
 * err. */
int bsi_read_dir(BsiReader *r, const char *dir, char *err, size_t errlen);

/* At every start with a binlog, flag or not: -1 with err (the server must
 * not start) when an import began in e's binlog and never finished, so
 * the binlog may hold part of beanstalkd's jobs; else 0. */
int bsimport_unfinished(Engine *e, char *err, size_t errlen);

/* The import, at start (see above). 0, or -1 with err: the server must not
 * start. */
int bsimport_run(Engine *e, const char *dir, char *err, size_t errlen);

#endif
