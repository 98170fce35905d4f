/*
 * alloc.h — the one door to the heap allocator.
 *
 * Contract: tb_malloc/tb_calloc/tb_realloc behave like their libc names and
 * return NULL on failure; callers must handle NULL (the server turns it into
 * OUT_OF_MEMORY, BURIED or a closed connection, never a crash). Tests can
 * make the Nth allocation from now fail with alloc_fail_after(n) to sweep
 * failure injection over every allocation site.
 */
#ifndef TUBED_ALLOC_H
#define TUBED_ALLOC_H

#include <stddef.h>

void *tb_malloc(size_t n);
void *tb_calloc(size_t n, size_t size);
void *tb_realloc(void *p, size_t n);
void tb_free(void *p);

/* Make the n-th allocation from now fail (1 = the next one); 0 disables. */
void alloc_fail_after(unsigned long n);
/* The injection point itself, for allocators built on top (slab.c):
 * true when this allocation must fail. */
int alloc_should_fail(void);
/* How many allocations were failed on purpose so far. */
unsigned long alloc_failures(void);

#endif
