#include "alloc.h"

#include <stdlib.h>

/* Failure injection state. A process-wide counter is acceptable here: it is a
 * test hook, read on every allocation, written only by tests. */
static unsigned long fail_countdown;
static unsigned long failed;

int alloc_should_fail(void)
{
    if (fail_countdown == 0)
        return 0;
    if (--fail_countdown == 0) {
        failed++;
        return 1;
    }
    return 0;
}

void *tb_malloc(size_t n)
{
    return alloc_should_fail() ? NULL : malloc(n);
}

void *tb_calloc(size_t n, size_t size)
{
    return alloc_should_fail() ? NULL : calloc(n, size);
}

void *tb_realloc(void *p, size_t n)
{
    return alloc_should_fail() ? NULL : realloc(p, n);
}

void tb_free(void *p)
{
    free(p);
}

void alloc_fail_after(unsigned long n)
{
    fail_countdown = n;
}

unsigned long alloc_failures(void)
{
    return failed;
}
