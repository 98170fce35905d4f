#include "job.h"

#include <string.h>

#include "alloc.h"
#include "slab.h"

/* A spilled job's slot: a record offset or a JobBody pointer. */
#define SLOT 8

_Static_assert(offsetof(Job, body) == 52, "the job header grew");

static size_t job_size(uint32_t body_size)
{
    return offsetof(Job, body) + (size_t)body_size;
}

size_t job_cost(uint32_t body_size)
{
    return slab_cost(job_size(body_size));
}

size_t job_spilled_cost(void)
{
    return slab_cost(job_size(SLOT));
}

/* The slab size j was allocated with. */
static size_t job_alloc_size(const Job *j)
{
    return job_size(j->spilled ? SLOT : j->body_size);
}

size_t job_mem(const Job *j)
{
    return slab_cost(job_alloc_size(j));
}

static JobBody *slot_body(const Job *j)
{
    JobBody *b;

    memcpy(&b, j->body, sizeof b);
    return b;
}

JobBody *job_body_alloc(uint32_t cap)
{
    JobBody *b = slab_alloc(sizeof *b + (size_t)cap);

    if (b) {
        b->off = 0;
        b->skip = 0;
        b->cap = cap;
    }
    return b;
}

void job_body_free(JobBody *b)
{
    if (b)
        slab_free(b, sizeof *b + (size_t)b->cap);
}

Job *job_alloc_spilled(uint64_t id, uint32_t body_size, int with_body, uint64_t off)
{
    Job *j = slab_alloc(job_size(SLOT));
    JobBody *b = NULL;

    if (!j)
        return NULL;
    if (with_body && !(b = job_body_alloc(body_size))) {
        slab_free(j, job_size(SLOT));
        return NULL;
    }
    memset(j, 0, offsetof(Job, body));
    j->id = id;
    j->body_size = body_size;
    j->spilled = 1;
    if (b) {
        job_load(j, b);
    } else {
        job_spill_set_off(j, off);
    }
    return j;
}

const char *job_body(const Job *j)
{
    if (!j->spilled)
        return j->body;
    if (!j->loaded)
        return NULL;
    return slot_body(j)->data + slot_body(j)->skip;
}

char *job_body_mut(Job *j)
{
    return (char *)job_body(j);
}

uint64_t job_spill_off(const Job *j)
{
    uint64_t off;

    if (j->loaded)
        return slot_body(j)->off;
    memcpy(&off, j->body, sizeof off);
    return off;
}

void job_spill_set_off(Job *j, uint64_t off)
{
    if (j->loaded)
        slot_body(j)->off = off;
    else
        memcpy(j->body, &off, sizeof off);
}

void job_unload(Job *j)
{
    JobBody *b = slot_body(j);
    uint64_t off = b->off;

    job_body_free(b);
    j->loaded = 0;
    memcpy(j->body, &off, sizeof off);
}

void job_load(Job *j, JobBody *b)
{
    memcpy(j->body, &b, sizeof b);
    j->loaded = 1;
}

Job *job_alloc(uint64_t id, uint32_t body_size)
{
    Job *j = slab_alloc(job_size(body_size));

    if (!j)
        return NULL;
    memset(j, 0, offsetof(Job, body));
    j->id = id;
    j->body_size = body_size;
    return j;
}

void job_free(Job *j)
{
    if (!j)
        return;
    slab_free(job_ext(j), sizeof(JobExt));
    if (j->spilled && j->loaded)
        job_body_free(slot_body(j));
    slab_free(j, job_alloc_size(j));
}

JobExt *job_ext_get(Job *j)
{
    JobExt *x = job_ext(j);

    if (x)
        return x;
    if (!(x = slab_alloc(sizeof *x)))
        return NULL;
    memset(x, 0, sizeof *x);
    list_init(&x->link);
    x->job = j;
    x->created = job_created(j);
    j->xc = (uintptr_t)x;
    return x;
}

void job_ext_forget(Job *j)
{
    j->xc = 0; /* no JobExt: its created is not needed any more */
}

const JobExt *job_ext_view(const Job *j)
{
    static const JobExt none;
    const JobExt *x = job_ext(j);

    return x ? x : &none;
}

const char *job_state_name(JobState s)
{
    switch (s) {
    case JOB_READY: return "ready";
    case JOB_RESERVED: return "reserved";
    case JOB_DELAYED: return "delayed";
    case JOB_BURIED: return "buried";
    }
    return "invalid";
}

static uint64_t job_node_hash(const HashNode *n)
{
    return job_id_hash(container_of(n, Job, hnode)->id);
}

static int job_id_eq(const HashNode *n, const void *key)
{
    return container_of(n, Job, hnode)->id == *(const uint64_t *)key;
}

int job_table_init(Hash *table)
{
    /* Load 2: half the bucket array, 4 bytes a job, for a second step
     * in a lookup by id. */
    if (hash_init(table, job_node_hash) < 0)
        return -1;
    hash_set_load(table, 2);
    return 0;
}

void job_table_insert(Hash *table, Job *j)
{
    hash_insert(table, &j->hnode);
}

void job_table_remove(Hash *table, Job *j)
{
    hash_remove(table, &j->hnode);
}

void job_table_insert_all(Hash *table, Job *const *jobs, size_t n)
{
    enum { AHEAD = 8 };

    hash_reserve(table, table->len + n);
    for (size_t i = 0; i < n; i++) {
        if (i + AHEAD < n && jobs[i + AHEAD])
            job_table_prefetch(table, jobs[i + AHEAD]->id);
        if (jobs[i])
            hash_insert(table, &jobs[i]->hnode);
    }
}

Job *job_table_find(const Hash *table, uint64_t id)
{
    HashNode *n = hash_find(table, job_id_hash(id), job_id_eq, &id);

    return n ? container_of(n, Job, hnode) : NULL;
}

int job_ready_less(const void *a, const void *b)
{
    const Job *x = a, *y = b;

    if (x->pri != y->pri)
        return x->pri < y->pri;
    return x->id < y->id;
}

int job_deadline_less(const void *a, const void *b)
{
    const Job *x = a, *y = b;
    int64_t dx = job_ext(x)->deadline, dy = job_ext(y)->deadline;

    if (dx != dy)
        return dx < dy;
    return x->id < y->id;
}

void job_set_heap_pos(void *x, size_t pos)
{
    ((Job *)x)->heap_pos = (uint32_t)pos;
}

int job_expiry_less(const void *a, const void *b)
{
    const Job *x = a, *y = b;
    int64_t ex = job_ext(x)->expires, ey = job_ext(y)->expires;

    if (ex != ey)
        return ex < ey;
    return x->id < y->id;
}

void job_set_exp_pos(void *x, size_t pos)
{
    job_ext(x)->exp_pos = (uint32_t)pos;
}
