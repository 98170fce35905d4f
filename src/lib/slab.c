#include "slab.h"

#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "list.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define SMALL_SHIFT 16          /* 64 KiB pages, objects up to SLAB_MAX */
#define BIG_SHIFT   20          /* 1 MiB pages, objects up to SLAB_BIG_MAX */
#define PAGE_SIZE   ((size_t)1 << SMALL_SHIFT)
#define ARENA_PAGES 64
#define PAGE_HEAD   64          /* objects start here: one cache line in */
#define NSMALL      (SLAB_MAX / 8 + 1)
#define BIG_STEPS   32          /* big sizes per doubling */
#define BIG_DOUBLINGS 6         /* SLAB_MAX .. SLAB_BIG_MAX */
#define NCLASSES    (NSMALL + BIG_STEPS * BIG_DOUBLINGS)
#define BIG_SPARES  4           /* empty 1 MiB pages kept in all */

_Static_assert(SLAB_MAX << BIG_DOUBLINGS == SLAB_BIG_MAX, "big classes span the big range");

static inline size_t round8(size_t n)
{
    return n ? (n + 7) & ~(size_t)7 : 8;
}

/* The class of n <= SLAB_BIG_MAX: index size/8 up to SLAB_MAX; above, n is
 * in (2^k, 2^(k+1)] and rounds up to a multiple of 2^k / BIG_STEPS. */
static inline size_t class_index(size_t n)
{
    int k;
    size_t j;

    if (n <= SLAB_MAX)
        return round8(n) / 8;
    k = 63 - __builtin_clzll((unsigned long long)(n - 1));
    j = (n - ((size_t)1 << k) + ((size_t)1 << (k - 5)) - 1) >> (k - 5);
    return NSMALL + (size_t)(k - 11) * BIG_STEPS + j - 1;
}

static inline size_t class_size(size_t idx)
{
    size_t k, j;

    if (idx < NSMALL)
        return idx * 8;
    k = 11 + (idx - NSMALL) / BIG_STEPS;
    j = (idx - NSMALL) % BIG_STEPS + 1;
    return ((size_t)1 << k) + (j << (k - 5));
}

/* Past SLAB_BIG_MAX: 16 sizes per doubling, whole pages (at most 1/16
 * more), so a freed mapping fits the next request of its size class. */
static inline size_t huge_size(size_t n)
{
    int k = 63 - __builtin_clzll((unsigned long long)(n - 1));
    size_t step = (size_t)1 << (k - 4); /* k >= 17: at least 8 KiB */

    return (n + step - 1) & ~(step - 1);
}

size_t slab_cost(size_t n)
{
    if (n <= SLAB_MAX)
        return round8(n);
    if (n <= SLAB_BIG_MAX)
        return class_size(class_index(n));
    return huge_size(n);
}

#ifdef TUBED_SLAB_MALLOC

void *slab_alloc(size_t n) { return tb_malloc(n); }
void slab_free(void *p, size_t n) { (void)n; tb_free(p); }
SlabStats slab_stats(void) { return (SlabStats){0, 0, 0}; }
void slab_prefault_start(size_t bytes) { (void)bytes; }
void slab_prefault_stop(void) {}

#else

typedef struct Arena Arena;

/* The head of every page; objects follow at PAGE_HEAD. */
typedef struct Page {
    List link;          /* its class's pages with free slots */
    Arena *arena;
    void *free;         /* freed objects, linked through their first word */
    char *bump;         /* start of never-used space */
    char *end;          /* end of the page */
    uint32_t live;      /* objects handed out */
    uint32_t size;      /* object size of this page */
} Page;

_Static_assert(sizeof(Page) <= PAGE_HEAD, "page head too big");

/* 64 pages of one page size in one mapping, aligned to the page size so
 * an object finds its page by masking its address. The mapping is a page
 * longer than the 64 to leave room for that alignment; this header lives
 * in what is left after them (at least 4 KiB, as mmap aligns to 4 KiB). */
struct Arena {
    List link;          /* arenas with unused pages */
    char *base;
    void *map;          /* what mmap returned (base is inside it) */
    size_t map_len;
    uint64_t unused;    /* bit i: page i holds nothing and is not resident */
    unsigned shift;     /* log2 of its page size */
    int prefault;       /* made for the prefault thread, which runs */
    uint32_t pf_index;  /* then: its place in pf.arenas */
};

_Static_assert(sizeof(Arena) <= 4096, "arena head must fit the slack");

typedef struct Class {
    List partial;       /* pages with free slots; kept empty if never used */
    Page *spare;        /* one empty page kept for this size */
} Class;

static Class classes[NCLASSES];

/* The prefault thread's arenas and progress (slab_prefault_start()). It
 * reads only bases[] and the two atomics, never an Arena or a Page. */
#define PF_MAX_ARENAS 256      /* 1 GiB of 64 KiB pages at most */
#define PF_AHEAD      256      /* pages: at most 16 MiB ahead of the loop */
#define PF_STEP       4        /* pages faulted in per call */
static struct {
    Arena *arenas[PF_MAX_ARENAS];
    char *bases[PF_MAX_ARENAS];
    size_t n;
    pthread_t thread;
    int running;               /* its arenas are made */
    int threaded;              /* and the thread runs */
    atomic_size_t taken;       /* pages page_new() took from them */
    atomic_size_t done;        /* the thread is past this many pages */
    atomic_int stop;
} pf;
/* Arenas with unused pages: [0] of 64 KiB pages, [1] of 1 MiB pages. */
static List free_arenas[2] = {{&free_arenas[0], &free_arenas[0]},
                              {&free_arenas[1], &free_arenas[1]}};
static size_t npages, narenas, nbig_spares;

static unsigned shift_of(size_t idx)
{
    return idx < NSMALL ? SMALL_SHIFT : BIG_SHIFT;
}

static Class *class_at(size_t idx)
{
    Class *c = &classes[idx];

    if (!c->partial.next)
        list_init(&c->partial);
    return c;
}

static Page *page_of(void *p, unsigned shift)
{
    return (Page *)((uintptr_t)p & ~(((uintptr_t)1 << shift) - 1));
}

static int page_full(const Page *p)
{
    return !p->free && p->bump + p->size > p->end;
}

static Arena *arena_new(unsigned shift)
{
    size_t page = (size_t)1 << shift, len = page * (ARENA_PAGES + 1);
    char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *base;
    Arena *a;

    if (m == MAP_FAILED)
        return NULL;
    base = (char *)(((uintptr_t)m + page - 1) & ~(uintptr_t)(page - 1));
    a = (Arena *)(base + page * ARENA_PAGES);
    a->map = m;
    a->map_len = len;
    a->base = base;
    a->unused = ~(uint64_t)0;
    a->shift = shift;
    list_insert_tail(&free_arenas[shift == BIG_SHIFT], &a->link);
    narenas++;
    return a;
}

/* Fault 64 KiB in with one call rather than a fault per 4 KiB as objects
 * are first written there: a growing queue's puts take about a fifth less
 * CPU time. A 1 MiB page is faulted in 64 KiB at a time as its objects
 * reach there, so a size with a few objects does not hold a megabyte.
 * Only a hint (Linux 5.14 and later). */
static void populate(void *at)
{
    madvise(at, PAGE_SIZE, MADV_POPULATE_WRITE);
}

static Page *page_new(size_t size, unsigned shift)
{
    List *first = list_first(&free_arenas[shift == BIG_SHIFT]);
    Arena *a = first ? container_of(first, Arena, link) : arena_new(shift);
    Page *p;
    int i;

    if (!a)
        return NULL;
    i = __builtin_ctzll(a->unused);
    a->unused &= ~((uint64_t)1 << i);
    if (!a->unused)
        list_remove(&a->link);
    p = (Page *)(a->base + ((size_t)i << shift));
    if (!a->prefault) {
        populate(p);
    } else {
        /* Faulted in by the thread already, unless it is behind (a page
         * given back and taken again is faulted in by its writes). */
        size_t seq = (size_t)a->pf_index * ARENA_PAGES + (size_t)i;
        atomic_fetch_add_explicit(&pf.taken, 1, memory_order_relaxed);
        if (seq >= atomic_load_explicit(&pf.done, memory_order_acquire))
            populate(p);
    }
    list_init(&p->link);
    p->arena = a;
    p->free = NULL;
    p->bump = (char *)p + PAGE_HEAD;
    p->end = (char *)p + ((size_t)1 << shift);
    p->live = 0;
    p->size = (uint32_t)size;
    npages++;
    return p;
}

/* Give an empty page's memory back; unmap its arena when all are back. */
static void page_release(Page *p)
{
    Arena *a = p->arena;
    int i = (int)(((char *)p - a->base) >> a->shift);

    npages--;
    if (!a->unused)
        list_insert_tail(&free_arenas[a->shift == BIG_SHIFT], &a->link);
    a->unused |= (uint64_t)1 << i;
    /* The prefault thread may still reach an arena of its own: it stays
     * mapped until slab_prefault_stop(). */
    if (a->unused == ~(uint64_t)0 && !a->prefault) {
        list_remove(&a->link);
        narenas--;
        munmap(a->map, a->map_len); /* a itself is in there */
        return;
    }
    /* Only a hint: if it fails the page just stays resident. */
    madvise(p, (size_t)1 << a->shift, MADV_DONTNEED);
}

/* ---- past SLAB_BIG_MAX: a mapping each, a few kept -------------------- */

/* Freed mappings kept for the next request of their size: at most
 * HUGE_KEEP_N of them and HUGE_KEEP bytes. Jobs of a megabyte put and
 * deleted in a steady stream otherwise mapped, faulted in (256 page faults)
 * and unmapped a megabyte each (0.6x beanstalkd, whose malloc keeps freed
 * chunks for good). What is kept is bounded: a drained backlog still goes
 * back to the kernel, all but 16 MiB at once. */
#define HUGE_KEEP   ((size_t)16 << 20)
#define HUGE_KEEP_N 16

static struct {
    void *p;
    size_t size;
} huge_kept[HUGE_KEEP_N];
static unsigned huge_nkept;
static size_t huge_kept_bytes;

static void *huge_alloc(size_t n)
{
    static int pinned;
    size_t size = huge_size(n);
    void *p;

    if (!pinned) {
        /* The server's other large buffers (replies, listings) are
         * malloc's: each a mapping of its own too, from the first large
         * job on, or glibc would raise its threshold and keep them in its
         * heap for good. Only a preference: if it fails, the defaults. */
        mallopt(M_MMAP_THRESHOLD, SLAB_BIG_MAX);
        pinned = 1;
    }
    if (alloc_should_fail())
        return NULL;
    for (unsigned i = huge_nkept; i-- > 0;) {
        if (huge_kept[i].size != size)
            continue;
        p = huge_kept[i].p;
        huge_kept[i] = huge_kept[--huge_nkept];
        huge_kept_bytes -= size;
        return p;
    }
    /* Not populated: a put may declare a body of -z bytes and send it
     * slowly, or never; memory is taken as its bytes arrive. */
    p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static void huge_free(void *p, size_t n)
{
    size_t size = huge_size(n);

    if (huge_nkept < HUGE_KEEP_N && huge_kept_bytes + size <= HUGE_KEEP) {
        huge_kept[huge_nkept].p = p;
        huge_kept[huge_nkept++].size = size;
        huge_kept_bytes += size;
        return;
    }
    munmap(p, size);
}

void *slab_alloc(size_t n)
{
    size_t idx, size;
    Class *c;
    List *first;
    Page *p;
    void *obj;

    if (n > SLAB_BIG_MAX)
        return huge_alloc(n);
    if (alloc_should_fail())
        return NULL;
    idx = class_index(n);
    size = class_size(idx);
    c = class_at(idx);
    first = list_first(&c->partial);
    if (first) {
        p = container_of(first, Page, link);
    } else {
        if (c->spare) {
            p = c->spare;
            nbig_spares -= idx >= NSMALL;
        } else if (!(p = page_new(size, shift_of(idx)))) {
            return NULL;
        }
        c->spare = NULL;
        list_insert_tail(&c->partial, &p->link);
    }
    if (p->free) {
        obj = p->free;
        p->free = *(void **)obj;
    } else {
        obj = p->bump;
        p->bump += size;
        /* Into the next 64 KiB of a 1 MiB page: fault it in. */
        if (((uintptr_t)obj ^ (uintptr_t)p->bump) >> SMALL_SHIFT && p->bump < p->end)
            populate((void *)((uintptr_t)p->bump & ~(uintptr_t)(PAGE_SIZE - 1)));
    }
    p->live++;
    if (page_full(p))
        list_remove(&p->link);
    return obj;
}

void slab_free(void *obj, size_t n)
{
    size_t idx;
    Class *c;
    Page *p;

    if (!obj)
        return;
    if (n > SLAB_BIG_MAX) {
        huge_free(obj, n);
        return;
    }
    idx = class_index(n);
    c = class_at(idx);
    p = page_of(obj, shift_of(idx));
    if (page_full(p))
        list_insert_tail(&c->partial, &p->link);
    *(void **)obj = p->free;
    p->free = obj;
    if (--p->live)
        return;
    list_remove(&p->link);
    if (c->spare || (idx >= NSMALL && nbig_spares >= BIG_SPARES)) {
        page_release(p);
        return;
    }
    p->free = NULL;
    p->bump = (char *)p + PAGE_HEAD;
    c->spare = p;
    nbig_spares += idx >= NSMALL;
}

SlabStats slab_stats(void)
{
    return (SlabStats){npages, narenas, huge_kept_bytes};
}

/* Fault the arenas' pages in, in the order page_new() takes them, never
 * more than PF_AHEAD pages ahead of it (so a guess too large costs at
 * most that much), skipping what it already took. */
static void *prefault_main(void *arg)
{
    size_t total = pf.n * ARENA_PAGES;
    struct timespec nap = {0, 100000};

    (void)arg;
    /* At the lowest priority: on a busy machine the loop thread faults
     * its pages in itself rather than wait for this one to get a CPU. */
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
    for (size_t i = 0; i < total;) {
        size_t taken = atomic_load_explicit(&pf.taken, memory_order_relaxed);
        size_t k;
        if (atomic_load_explicit(&pf.stop, memory_order_relaxed))
            break;
        if (i < taken) {
            i = taken;
            continue;
        }
        if (i >= taken + PF_AHEAD) {
            nanosleep(&nap, NULL);
            continue;
        }
        /* A run of pages of one arena, at most PF_STEP. */
        k = PF_STEP;
        if (k > ARENA_PAGES - i % ARENA_PAGES)
            k = ARENA_PAGES - i % ARENA_PAGES;
        madvise(pf.bases[i / ARENA_PAGES] + (i % ARENA_PAGES) * PAGE_SIZE, k * PAGE_SIZE,
                MADV_POPULATE_WRITE);
        i += k;
        atomic_store_explicit(&pf.done, i, memory_order_release);
    }
    return NULL;
}

void slab_prefault_start(size_t bytes)
{
    size_t want = (bytes + ((size_t)ARENA_PAGES << SMALL_SHIFT) - 1) / ((size_t)ARENA_PAGES << SMALL_SHIFT);
    sigset_t all, old;

    if (pf.running || want == 0 || sysconf(_SC_NPROCESSORS_ONLN) < 2)
        return;
    if (want > PF_MAX_ARENAS)
        want = PF_MAX_ARENAS;
    pf.n = 0;
    while (pf.n < want) {
        Arena *a = arena_new(SMALL_SHIFT);
        if (!a)
            break;
        a->prefault = 1;
        a->pf_index = (uint32_t)pf.n;
        pf.arenas[pf.n] = a;
        pf.bases[pf.n++] = a->base;
    }
    atomic_store(&pf.taken, 0);
    atomic_store(&pf.done, 0);
    atomic_store(&pf.stop, 0);
    pf.running = 1;
    /* Every signal blocked in it, so they reach the loop's thread. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pf.threaded = pf.n && pthread_create(&pf.thread, NULL, prefault_main, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!pf.threaded)
        slab_prefault_stop(); /* tidies its arenas up */
}

/* Unused pages of a prefault arena go back (the thread may have faulted
 * them in); an arena left with none in use is unmapped. */
static void prefault_tidy(Arena *a)
{
    a->prefault = 0;
    if (a->unused == ~(uint64_t)0) {
        list_remove(&a->link);
        narenas--;
        munmap(a->map, a->map_len);
        return;
    }
    for (int i = 0; i < ARENA_PAGES; i++)
        if (a->unused >> i & 1)
            madvise(a->base + ((size_t)i << SMALL_SHIFT), PAGE_SIZE, MADV_DONTNEED);
}

void slab_prefault_stop(void)
{
    if (!pf.running)
        return;
    atomic_store(&pf.stop, 1);
    if (pf.threaded)
        pthread_join(pf.thread, NULL);
    pf.threaded = 0;
    for (size_t k = 0; k < pf.n; k++)
        prefault_tidy(pf.arenas[k]);
    pf.n = 0;
    pf.running = 0;
}

#endif
