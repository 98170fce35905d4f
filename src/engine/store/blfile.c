#include "blfile.h"

#include <stdio.h>

#include "alloc.h"
#include "clock.h"
#include "tube.h"

void bl_file_name(const Binlog *b, uint32_t index, char *out, size_t n)
{
    snprintf(out, n, "%s/binlog.%u", b->dir, index);
}

/* A logged realtime on the monotonic clock. Values come from disk, so the
 * arithmetic must not overflow whatever they are: the offset is clamped to
 * about a century either way (a delay is at most 2^32 s, ~136 years). */
int64_t bl_mono_of(int64_t wall, int64_t now, int64_t mono_now)
{
    const int64_t lim = (int64_t)5000000000 * NS_PER_SEC;
    int64_t d;

    if (wall > now + lim)
        d = lim;
    else if (wall < now - lim)
        d = -lim;
    else
        d = wall - now;
    return mono_now + d;
}

size_t bl_job_record_size(const Job *j)
{
    const JobExt *x = job_ext_view(j);
    size_t extra = x->entered || x->exptime ? BL_JOBX_EXTRA : 0;

    return BL_JOB_FIXED + extra + j->tube->name_len + (size_t)j->body_size;
}

size_t bl_child_record_size(const Tube *t)
{
    return BL_CHILD_FIXED + t->name_len;
}

uint64_t bl_child_room(const Tube *t)
{
    size_t n = bl_child_record_size(t);

    return (n + BL_DEL_SIZE - 1) / BL_DEL_SIZE * BL_DEL_SIZE;
}

void bl_child_pin(Binlog *b, Tube *t, uint32_t index)
{
    BlFile *f = bl_file_of(b, index);
    uint64_t size = bl_child_record_size(t);

    if (t->child_file)
        bl_child_unpin(b, t);
    t->child_file = index;
    if (f) {
        f->live_jobs++;
        f->live_bytes += size;
    }
    b->live_bytes += size;
    b->reserved += bl_child_room(t);
}

void bl_child_unpin(Binlog *b, Tube *t)
{
    BlFile *f = bl_file_of(b, t->child_file);
    uint64_t size = bl_child_record_size(t);

    if (!t->child_file)
        return;
    if (f) {
        f->live_jobs--;
        f->live_bytes -= size;
    }
    b->live_bytes -= size;
    b->reserved -= bl_child_room(t);
    t->child_file = 0;
}

BlFile *bl_file_of(Binlog *b, uint32_t index)
{
    if (!b->nfiles || index < b->files[0].index)
        return NULL;
    index -= b->files[0].index;
    return index < b->nfiles ? &b->files[index] : NULL;
}

int bl_files_push(Binlog *b, uint32_t index)
{
    if (b->nfiles == b->files_cap) {
        size_t cap = b->files_cap ? b->files_cap * 2 : 16;
        BlFile *f = tb_realloc(b->files, cap * sizeof *f);
        if (!f)
            return -1;
        b->files = f;
        b->files_cap = cap;
    }
    b->files[b->nfiles++] = (BlFile){.index = index};
    return 0;
}
