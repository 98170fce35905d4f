/*
 * job.h — the job record and the server-wide job table.
 *
 * Contract: a job is one allocation holding its header and its body, so a
 * put costs one malloc and the body is never copied again. A job is in
 * exactly one container at a time, chosen by its state: its tube's ready
 * heap (READY), its tube's delay heap (DELAYED), the server's TTR heap and
 * its reserver's list (RESERVED), or its tube's buried list (BURIED).
 * heap_pos and link serve whichever container holds it. The job table finds
 * any job by id in O(1).
 */
#ifndef TUBED_JOB_H
#define TUBED_JOB_H

#include <stdint.h>

#include "hash.h"
#include "list.h"

typedef struct Tube Tube;
typedef struct Conn Conn;

typedef enum JobState {
    JOB_READY,
    JOB_RESERVED,
    JOB_DELAYED,
    JOB_BURIED,
} JobState;

typedef struct Job Job;
struct Job {
    HashNode hnode;      /* server job table */
    Tube *tube;
    List link;           /* tube->buried, or owner->reserved */
    Conn *owner;         /* the reserving connection, when RESERVED */
    uint64_t id;
    int64_t deadline;    /* monotonic ns: end of delay or of TTR */
    int64_t created;     /* monotonic ns */
    uint32_t heap_pos;   /* ready, delay or TTR heap */
    uint32_t pri;
    uint32_t delay;      /* seconds, as last given by put or release */
    uint32_t ttr;        /* seconds, at least 1 */
    uint32_t body_size;  /* without the trailing "\r\n" */
    uint32_t reserves, timeouts, releases, buries, kicks;
    uint32_t file;       /* binlog file holding its record; 0 if none */
    uint8_t state;
    char body[];
};

/* A job with every field zero but id and body_size; NULL if out of memory. */
Job *job_alloc(uint64_t id, uint32_t body_size);
void job_free(Job *j);

const char *job_state_name(JobState s);

int job_table_init(Hash *table);
void job_table_insert(Hash *table, Job *j);
void job_table_remove(Hash *table, Job *j);
Job *job_table_find(const Hash *table, uint64_t id);

/* Heap callbacks: ready order is (pri, id), delay and TTR order is
 * (deadline, id); all three track the position in heap_pos. */
int job_ready_less(const void *a, const void *b);
int job_deadline_less(const void *a, const void *b);
void job_set_heap_pos(void *x, size_t pos);

#endif
