#include "blfile.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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
    size_t lo = 0, hi = b->nfiles, at;

    if (!b->nfiles || index < b->files[0].index)
        return NULL;
    /* The numbers run on without a gap, so the entry is at its offset
     * from the first; but --recover goes on past missing files, and their
     * gaps stay in the list until those files go: then search (the list
     * is in index order). */
    at = index - b->files[0].index;
    if (at < b->nfiles && b->files[at].index == index)
        return &b->files[at];
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (b->files[mid].index < index)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < b->nfiles && b->files[lo].index == index ? &b->files[lo] : NULL;
}

uint64_t bl_disk_bytes(const struct stat *st)
{
    uint64_t blocks = (uint64_t)st->st_blocks * 512;

    return blocks > (uint64_t)st->st_size ? (uint64_t)st->st_size : blocks;
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

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return x < y ? -1 : x > y;
}

/* N of "binlog.N", or 0 when name is not one (or N is 0 or past 2^32).
 * N is written as tubed writes it, without leading zeros: "binlog.01" (a
 * copy an operator made, say) is not file 1, which would be opened by its
 * own name (replayed twice, or not found). */
static uint64_t file_number(const char *name)
{
    uint64_t v = 0;
    const char *d = name + 7;

    if (strncmp(name, "binlog.", 7) || !*d || *d == '0')
        return 0;
    for (; *d; d++) {
        if (*d < '0' || *d > '9' || (v = v * 10 + (uint64_t)(*d - '0')) > UINT32_MAX)
            return 0;
    }
    return v;
}

int bl_list_files(const char *dir, const char *what, uint32_t max, int refuse_above,
                  uint32_t **out, size_t *n, char *err, size_t errlen)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    uint32_t *v = NULL;
    size_t len = 0, cap = 0;

    if (!d) {
        snprintf(err, errlen, "cannot read %s %s: %s", what, dir, strerror(errno));
        return -1;
    }
    while ((de = readdir(d))) {
        uint64_t k = file_number(de->d_name);
        if (!k)
            continue;
        if (k > max && !refuse_above)
            continue;
        if (k > max) {
            /* (the message before closedir: de lives in d's buffer) */
            snprintf(err, errlen, "%s/%s: file numbers end at %u (a job names its "
                     "file in 28 bits); refusing to start", dir, de->d_name, max);
            closedir(d);
            tb_free(v);
            return -1;
        }
        if (len == cap) {
            uint32_t *nv = tb_realloc(v, (cap = cap ? cap * 2 : 16) * sizeof *v);
            if (!nv) {
                closedir(d);
                tb_free(v);
                snprintf(err, errlen, "out of memory listing %s", dir);
                return -1;
            }
            v = nv;
        }
        v[len++] = (uint32_t)k;
    }
    closedir(d);
    if (len)
        qsort(v, len, sizeof *v, cmp_u32);
    *out = v;
    *n = len;
    return 0;
}
