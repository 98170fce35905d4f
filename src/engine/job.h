/*
 * job.h — the job record and the server-wide job table.
 *
 * Contract: a job is one slab object holding its header and its body, so a
 * put costs one allocation and the body is never copied again. A job is in
 * exactly one container at a time, chosen by its state: its tube's ready
 * heap (READY), its tube's delay heap (DELAYED), the server's TTR heap and
 * its reserver's list (RESERVED), or its tube's buried list (BURIED).
 * heap_pos serves whichever heap holds it. The job table finds any job by
 * id in O(1).
 *
 * Memory: a waiting backlog is mostly ready jobs, so the header keeps only
 * what a ready job needs (52 bytes, the body follows without padding).
 * What only delayed, reserved or buried jobs need, and the counters that
 * stay zero until a job is first reserved, live in a JobExt that
 * job_ext_get() allocates on first need and the job keeps until it dies.
 * Invariant: a job that is not READY has its JobExt.
 *
 * Read-behind (spill.h): a spilled job's body lives in its binlog record.
 * Such a job is allocated without a body: in place of body[] it has an
 * 8-byte slot holding either the record's offset in binlog.<file> or, when
 * its body is loaded, a JobBody holding the body and that offset. A job is
 * allocated in one form and keeps it: the spilled form is chosen at put
 * (and at replay) for a tube over its max_memory_size, so no pointer to a
 * job ever changes. Use job_body() rather than body[].
 */
#ifndef TUBED_JOB_H
#define TUBED_JOB_H

#include <stdint.h>

#include "hash.h"
#include "list.h"

typedef struct Tube Tube;
typedef struct Worker Worker;

typedef enum JobState {
    JOB_READY,
    JOB_RESERVED,
    JOB_DELAYED,
    JOB_BURIED,
} JobState;

typedef struct Job Job;

typedef struct JobExt {
    List link;           /* tube->buried, or owner->reserved */
    Job *job;
    Worker *owner;       /* the reserving worker, when RESERVED */
    int64_t deadline;    /* monotonic ns: end of delay or of TTR */
    uint32_t delay;      /* seconds, as last given by put or release */
    uint32_t reserves, timeouts, releases, buries, kicks;
    uint32_t exp_pos;    /* in its tube's expiry heap, when expires != 0 */
    uint32_t unaged;     /* not in its tube's age ring (queue.h) */
    int64_t entered;     /* monotonic ns it entered its tube; 0: created */
    int64_t exptime;     /* monotonic ns of an expiry the client set; 0: none */
    int64_t expires;     /* its key in the tube's expiry heap; 0: not there */
    int64_t ready_since; /* monotonic ns it last became ready; 0: created */
    uint64_t bury_seq;   /* its tube's count of buries when it was buried */
    int64_t created;     /* the job's, once it has a JobExt (Job.xc) */
} JobExt;

struct Job {
    HashNode hnode;      /* server job table */
    uint64_t id;
    Tube *tube;
    /* Its JobExt, or its creation time (monotonic ns) while it has none:
     * a pointer (8-aligned, low bit 0; 0 is none and time 0) or
     * created << 1 | 1. A waiting backlog's jobs have no JobExt, and 8
     * bytes less a job is 5 % of a 100-byte one. Use job_ext(),
     * job_created() and job_set_created(). */
    uintptr_t xc;
    uint32_t pri;
    uint32_t body_size;  /* without the trailing "\r\n" */
    uint32_t ttr;        /* seconds, at least 1 */
    uint32_t file : 28;  /* binlog file holding its record; 0 if none
                          * (JOB_FILE_MAX at most: the binlog makes no
                          * file past it, replay refuses one) */
    uint32_t ringed : 1; /* spilled, and its id is in its tube's ring */
    uint32_t spilled : 1; /* its body is in its record; body[] is the slot */
    uint32_t loaded : 1; /* spilled, and a copy of the body is in memory */
    uint32_t reading : 1; /* spilled, and a read-ahead of it is in flight */
    uint32_t heap_pos : 30; /* ready, delay or TTR heap (HEAP_MAX_LEN) */
    uint32_t state : 2;
    char body[];
};

/* The largest binlog file number Job.file holds. */
#define JOB_FILE_MAX ((1u << 28) - 1)

/* A spilled job's body in memory: its bytes start at data + skip (a
 * record read back has its head in front; the job keeps a copy without
 * it). Allocated from the slab, as job bodies are, so the memory of a
 * drained read-behind backlog goes back to the kernel like any other. */
typedef struct JobBody {
    uint64_t off;        /* its record's offset in binlog.<job's file> */
    uint32_t skip;
    uint32_t cap;        /* bytes at data, as allocated */
    char data[];
} JobBody;

/* A JobBody with room for cap bytes (off and skip zero); NULL if out of
 * memory. Loop thread only (the slab's rule); another thread may fill it.
 * job_body_free() takes it back, NULL included. */
JobBody *job_body_alloc(uint32_t cap);
void job_body_free(JobBody *b);

/* What a job with a body of n bytes costs, header included. */
size_t job_cost(uint32_t body_size);
/* What j costs now: a spilled job's header only (its loaded body, bounded
 * by its tube's max_memory_size, is counted there). */
size_t job_mem(const Job *j);
/* What a spilled job's header costs. */
size_t job_spilled_cost(void);

/* A job with every field zero but id and body_size; NULL if out of memory.
 * job_free() also frees its JobExt. */
Job *job_alloc(uint64_t id, uint32_t body_size);
void job_free(Job *j);
/* A job in the spilled form. With a body (put: the body is read into it
 * before its record is written) it is loaded; without, it is on disk only
 * at offset off (replay). NULL if out of memory. */
Job *job_alloc_spilled(uint64_t id, uint32_t body_size, int with_body, uint64_t off);

/* j's body: in the job, or its loaded copy; NULL when on disk only. */
const char *job_body(const Job *j);
char *job_body_mut(Job *j);
/* A spilled job's record offset, and setting it (compaction moves it). */
uint64_t job_spill_off(const Job *j);
void job_spill_set_off(Job *j, uint64_t off);
/* A spilled, loaded job drops its body (its record is on disk). */
void job_unload(Job *j);
/* A spilled job on disk only takes b (b->off is its record's offset). */
void job_load(Job *j, JobBody *b);

_Static_assert(sizeof(uintptr_t) == 8, "Job.xc holds a pointer or 63 bits of time");

/* j's JobExt, or NULL while it has none. */
static inline JobExt *job_ext(const Job *j)
{
    return (j->xc & 1) ? NULL : (JobExt *)j->xc;
}

/* When j was made (monotonic ns; may be negative for a replayed job made
 * before this boot: the shift is arithmetic). */
static inline int64_t job_created(const Job *j)
{
    if (j->xc & 1)
        return (int64_t)j->xc >> 1;
    return j->xc ? ((const JobExt *)j->xc)->created : 0;
}

static inline void job_set_created(Job *j, int64_t t)
{
    if (j->xc && !(j->xc & 1))
        ((JobExt *)j->xc)->created = t;
    else
        j->xc = (uintptr_t)((uint64_t)t << 1) | 1;
}

/* j's JobExt, allocated (zeroed but for created) if it has none; NULL if
 * out of memory. */
JobExt *job_ext_get(Job *j);
/* j (whose JobExt went to another job, queue_relocate()) keeps none. */
void job_ext_forget(Job *j);

/* Read-only: j's JobExt, or one of zeros (delay, deadline, counters) for a
 * job that has none. */
const JobExt *job_ext_view(const Job *j);

/* The job whose JobExt link is n (reserved and buried lists). */
static inline Job *job_of_link(List *n)
{
    return container_of(n, JobExt, link)->job;
}

const char *job_state_name(JobState s);

/* The job table's hash of an id. Ids are handed out in sequence, so eight
 * consecutive ids share the mixed part and differ only in the low three
 * bits, which pick their slot in one 64-byte line of buckets: a run of
 * puts touches a new cache line every eighth job, not every job. The
 * mixed part's low bits are folded in too, so ids spaced by any stride
 * still spread over all buckets. */
static inline uint64_t job_id_hash(uint64_t id)
{
    uint64_t h = hash_u64(id >> 3);

    return (h & ~(uint64_t)7) | ((id ^ h) & 7);
}

int job_table_init(Hash *table);
void job_table_insert(Hash *table, Job *j);
void job_table_remove(Hash *table, Job *j);
Job *job_table_find(const Hash *table, uint64_t id);
/* Hint that the job with this id is about to go in the table. */
static inline void job_table_prefetch(const Hash *table, uint64_t id)
{
    hash_prefetch(table, job_id_hash(id));
}
/* Insert n jobs at once: the table is sized for them first and their
 * bucket misses overlap (replay inserts millions this way). */
void job_table_insert_all(Hash *table, Job *const *jobs, size_t n);

/* Heap callbacks: ready order is (pri, id), delay and TTR order is
 * (deadline, id); all three track the position in heap_pos. */
int job_ready_less(const void *a, const void *b);
int job_deadline_less(const void *a, const void *b);
void job_set_heap_pos(void *x, size_t pos);
/* The expiry heap's: by (expires, id), position in JobExt.exp_pos. */
int job_expiry_less(const void *a, const void *b);
void job_set_exp_pos(void *x, size_t pos);

#endif
