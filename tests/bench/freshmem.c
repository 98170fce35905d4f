/*
 * freshmem.c - how fast this machine lets a process write memory it has
 * never touched, next to memory it already wrote. `make bench` prints it
 * beside the memcache table (tests/bench/memcache.sh).
 *
 * Why: a queue keeps every item, so each 1 KiB set is ~1.1 KB of fresh
 * memory, while memcached overwriting a few keys reuses its slab. On some
 * virtual machines (Firecracker, seen 2026-11-27) the host backs a guest
 * page only at its first write and takes ~7 us a 4 KiB page to do it, even
 * after the guest populated the page (MADV_POPULATE_WRITE), and a second
 * thread touching pages ahead does not make it faster (the host's faults
 * serialize). Then fresh memory, not the server, caps the set rate, and the
 * ratio to memcached measures the machine. This prints the caps so a
 * reader of the table can tell.
 *
 * Output, one line each, MB/s of 1 KiB copies into 256 MiB:
 *   first-write   fresh anonymous memory, faulted page by page
 *   populated     fresh memory populated first (MADV_POPULATE_WRITE per
 *                 64 KiB, as src/lib/slab.c does), the populate included
 *   rewrite       the same memory written a second time
 * Exits 1 with a message when memory cannot be mapped.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define LEN   ((size_t)256 << 20)
#define CHUNK 1024
#define STEP  65536

static double now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* 1 KiB copies over all of m, populating each 64 KiB first if asked;
 * MB/s. The sum keeps the compiler from dropping the copies. */
static double fill(char *m, int populate, unsigned *sum)
{
    static char src[CHUNK];
    double t0 = now();

    memset(src, 'x', sizeof src);
    for (size_t off = 0; off < LEN; off += CHUNK) {
        if (populate && off % STEP == 0)
            (void)madvise(m + off, STEP, MADV_POPULATE_WRITE);
        memcpy(m + off, src, CHUNK);
        *sum += (unsigned char)m[off + CHUNK / 2];
    }
    return (double)LEN / 1e6 / (now() - t0);
}

static char *map(void)
{
    char *m = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (m == MAP_FAILED) {
        perror("freshmem: mmap");
        return NULL;
    }
    return m;
}

int main(void)
{
    unsigned sum = 0;
    char *a = map(), *b = map();
    double first, populated, rewrite;

    if (!a || !b)
        return 1;
    first = fill(a, 0, &sum);
    rewrite = fill(a, 0, &sum);
    populated = fill(b, 1, &sum);
    printf("first-write %.0f\npopulated %.0f\nrewrite %.0f\n", first, populated, rewrite);
    munmap(a, LEN);
    munmap(b, LEN);
    return sum == 0; /* never: every copied byte is 'x' */
}
