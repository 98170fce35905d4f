/*
 * slab.h — size-class allocator for job records.
 *
 * Contract: slab_alloc(n) returns n bytes aligned to 8, or NULL when memory
 * (or an injected failure, see alloc.h) says no; slab_free(p, n) takes the
 * same n back. slab_cost(n) is what n bytes really cost.
 *
 * - Up to SLAB_MAX bytes a request is rounded up to a multiple of 8 and
 *   carved from a 64 KiB page that holds objects of that one size and
 *   nothing else, so an object costs exactly its rounded size: no header,
 *   no 16-byte rounding. That is most of a small job's overhead under
 *   malloc.
 * - Up to SLAB_BIG_MAX bytes it is rounded up to one of 32 sizes per
 *   doubling (at most 1/32 more) and carved the same way from a 1 MiB page.
 *   SLAB_BIG_MAX is past 64 KiB: a job at beanstalkd's default largest
 *   size (65,535 bytes and its header) must not be a mapping of its own,
 *   faulted in at its put and unmapped at its delete (that made 64 KiB
 *   jobs slower to put and drain than beanstalkd).
 * - Larger requests are a mapping each, rounded up to one of 16 sizes per
 *   doubling (whole pages). Up to 16 freed ones (16 MiB at most) are kept
 *   for the next request of their size, so a steady stream of large jobs
 *   does not map, fault in and unmap a body per job; the rest are unmapped
 *   at once, so a drained backlog goes back to the kernel. From the first
 *   such request on, malloc's mmap threshold is pinned at SLAB_BIG_MAX,
 *   so the server's other large buffers are mappings that free() unmaps
 *   too (glibc would otherwise raise the threshold and keep them).
 *
 * Fresh memory is faulted in 64 KiB at a time (MADV_POPULATE_WRITE) as
 * objects first reach it: one call instead of a fault per 4 KiB, as each
 * body in a growing queue is fresh memory.
 *
 * Memory follows the live count, whatever the size: a page whose last
 * object is freed is handed back to the kernel (MADV_DONTNEED), except one
 * empty page kept per size (at most BIG_SPARES of the 1 MiB ones in all)
 * so a queue hovering at a page boundary does not fault pages in and out;
 * an arena (64 pages) whose pages are all free is unmapped. Giving a page
 * back costs one madvise of 64 KiB or 1 MiB, spread over the frees, so a
 * large drain returns its memory as it goes, with no pause.
 *
 * Process-wide, like malloc, and for the loop thread only (not
 * thread-safe). Built with -DTUBED_SLAB_MALLOC every request is its own
 * malloc, so AddressSanitizer and valgrind watch each object; the
 * sanitizer and valgrind builds use that.
 */
#ifndef TUBED_SLAB_H
#define TUBED_SLAB_H

#include <stddef.h>

#define SLAB_MAX     2048
#define SLAB_BIG_MAX 131072

void *slab_alloc(size_t n);
void slab_free(void *p, size_t n);
size_t slab_cost(size_t n);

/* Replay is about to allocate up to `bytes` of objects (a guess from the
 * binlog's size): a second thread faults fresh small pages in ahead of
 * the loop thread (at most 16 MiB ahead, 1 GiB in all), which a third of
 * a replay's time was spent on. It touches no allocator state: the loop
 * thread alone allocates and frees as before. slab_prefault_stop() joins
 * it and gives back what it faulted in and nobody took. A hint: without
 * a second CPU, or if a mapping or the thread cannot be made, nothing
 * happens. */
void slab_prefault_start(size_t bytes);
void slab_prefault_stop(void);

/* Resident bookkeeping for tests: pages in use (holding objects or kept
 * empty; a 1 MiB page counts as one) and arenas mapped. */
typedef struct SlabStats {
    size_t pages, arenas;
    size_t huge_kept;   /* bytes of freed large mappings kept for reuse */
} SlabStats;
SlabStats slab_stats(void);

#endif
