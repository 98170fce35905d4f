/*
 * slab.h — size-class allocator for job records.
 *
 * Contract: slab_alloc(n) returns n bytes aligned to 8, or NULL when memory
 * (or an injected failure, see alloc.h) says no; slab_free(p, n) takes the
 * same n back. A request is rounded up to a multiple of 8; up to SLAB_MAX
 * bytes it is carved from a 64 KiB page that holds objects of that one size
 * and nothing else, so an object costs exactly its rounded size: no header,
 * no 16-byte rounding. That is most of a small job's overhead under malloc.
 * Larger requests go to malloc. slab_cost(n) is what n bytes really cost.
 *
 * Memory follows the live count: a page whose last object is freed is
 * handed back to the kernel (MADV_DONTNEED), except one empty page kept per
 * size so a queue hovering at a page boundary does not fault pages in and
 * out; a 4 MiB arena whose pages are all free is unmapped.
 *
 * Process-wide, like malloc, and for the loop thread only (not
 * thread-safe). Built with -DTUBED_SLAB_MALLOC every request is its own
 * malloc, so AddressSanitizer and valgrind watch each object; the
 * sanitizer and valgrind builds use that.
 */
#ifndef TUBED_SLAB_H
#define TUBED_SLAB_H

#include <stddef.h>

#define SLAB_MAX 2048

void *slab_alloc(size_t n);
void slab_free(void *p, size_t n);
size_t slab_cost(size_t n);

/* Resident bookkeeping for tests: pages in use (holding objects or kept
 * empty) and arenas mapped. */
typedef struct SlabStats {
    size_t pages, arenas;
} SlabStats;
SlabStats slab_stats(void);

#endif
