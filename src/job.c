#include "job.h"

#include <string.h>

#include "alloc.h"

Job *job_alloc(uint64_t id, uint32_t body_size)
{
    Job *j = tb_malloc(sizeof *j + body_size);

    if (!j)
        return NULL;
    memset(j, 0, sizeof *j);
    list_init(&j->link);
    j->id = id;
    j->body_size = body_size;
    return j;
}

void job_free(Job *j)
{
    tb_free(j);
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
    return hash_u64(container_of(n, Job, hnode)->id);
}

static int job_id_eq(const HashNode *n, const void *key)
{
    return container_of(n, Job, hnode)->id == *(const uint64_t *)key;
}

int job_table_init(Hash *table)
{
    return hash_init(table, job_node_hash);
}

void job_table_insert(Hash *table, Job *j)
{
    hash_insert(table, &j->hnode);
}

void job_table_remove(Hash *table, Job *j)
{
    hash_remove(table, &j->hnode);
}

Job *job_table_find(const Hash *table, uint64_t id)
{
    HashNode *n = hash_find(table, hash_u64(id), job_id_eq, &id);

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

    if (x->deadline != y->deadline)
        return x->deadline < y->deadline;
    return x->id < y->id;
}

void job_set_heap_pos(void *x, size_t pos)
{
    ((Job *)x)->heap_pos = (uint32_t)pos;
}
