#include "slab.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "alloc.h"
#include "list.h"

#define PAGE_SIZE   ((size_t)64 * 1024)
#define ARENA_PAGES 64
#define ARENA_SIZE  (PAGE_SIZE * ARENA_PAGES)
#define PAGE_HEAD   64          /* objects start here: one cache line in */
#define NCLASSES    (SLAB_MAX / 8 + 1)

static size_t round8(size_t n)
{
    return n ? (n + 7) & ~(size_t)7 : 8;
}

size_t slab_cost(size_t n)
{
    /* Past SLAB_MAX it is malloc's: a size word, rounded to 16. */
    return round8(n) <= SLAB_MAX ? round8(n) : (n + 8 + 15) & ~(size_t)15;
}

#ifdef TUBED_SLAB_MALLOC

void *slab_alloc(size_t n) { return tb_malloc(n); }
void slab_free(void *p, size_t n) { (void)n; tb_free(p); }
SlabStats slab_stats(void) { return (SlabStats){0, 0}; }

#else

typedef struct Arena Arena;

/* The head of every page; objects follow at PAGE_HEAD. */
typedef struct Page {
    List link;          /* its class's pages with free slots */
    Arena *arena;
    void *free;         /* freed objects, linked through their first word */
    char *bump;         /* start of never-used space */
    uint32_t live;      /* objects handed out */
    uint32_t size;      /* object size of this page */
} Page;

_Static_assert(sizeof(Page) <= PAGE_HEAD, "page head too big");

/* 64 pages in one mapping, aligned to PAGE_SIZE so an object finds its
 * page by masking its address. The mapping is a page longer than the 64
 * to leave room for that alignment; this header lives in what is left
 * after them (at least 4 KiB, as mmap aligns to 4 KiB). */
struct Arena {
    List link;          /* arenas with unused pages */
    char *base;
    void *map;          /* what mmap returned (base is inside it) */
    size_t map_len;
    uint64_t unused;    /* bit i: page i holds nothing and is not resident */
};

_Static_assert(sizeof(Arena) <= 4096, "arena head must fit the slack");

typedef struct Class {
    List partial;       /* pages with free slots; kept empty if never used */
    Page *spare;        /* one empty page kept for this size */
} Class;

static Class classes[NCLASSES];
static List free_arenas = {&free_arenas, &free_arenas};
static size_t npages, narenas;

static Class *class_of(size_t size)
{
    Class *c = &classes[size / 8];

    if (!c->partial.next)
        list_init(&c->partial);
    return c;
}

static Page *page_of(void *p)
{
    return (Page *)((uintptr_t)p & ~(uintptr_t)(PAGE_SIZE - 1));
}

static int page_full(const Page *p)
{
    return !p->free && p->bump + p->size > (const char *)p + PAGE_SIZE;
}

static Arena *arena_new(void)
{
    size_t len = ARENA_SIZE + PAGE_SIZE;
    char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *base;
    Arena *a;

    if (m == MAP_FAILED)
        return NULL;
    base = (char *)(((uintptr_t)m + PAGE_SIZE - 1) & ~(uintptr_t)(PAGE_SIZE - 1));
    a = (Arena *)(base + ARENA_SIZE);
    a->map = m;
    a->map_len = len;
    a->base = base;
    a->unused = ~(uint64_t)0;
    list_insert_tail(&free_arenas, &a->link);
    narenas++;
    return a;
}

static Page *page_new(size_t size)
{
    List *first = list_first(&free_arenas);
    Arena *a = first ? container_of(first, Arena, link) : arena_new();
    Page *p;
    int i;

    if (!a)
        return NULL;
    i = __builtin_ctzll(a->unused);
    a->unused &= ~((uint64_t)1 << i);
    if (!a->unused)
        list_remove(&a->link);
    p = (Page *)(a->base + (size_t)i * PAGE_SIZE);
    list_init(&p->link);
    p->arena = a;
    p->free = NULL;
    p->bump = (char *)p + PAGE_HEAD;
    p->live = 0;
    p->size = (uint32_t)size;
    npages++;
    return p;
}

/* Give an empty page's memory back; unmap its arena when all are back. */
static void page_release(Page *p)
{
    Arena *a = p->arena;
    int i = (int)(((char *)p - a->base) / PAGE_SIZE);

    npages--;
    if (!a->unused)
        list_insert_tail(&free_arenas, &a->link);
    a->unused |= (uint64_t)1 << i;
    if (a->unused == ~(uint64_t)0) {
        list_remove(&a->link);
        narenas--;
        munmap(a->map, a->map_len); /* a itself is in there */
        return;
    }
    /* Only a hint: if it fails the page just stays resident. */
    madvise(p, PAGE_SIZE, MADV_DONTNEED);
}

void *slab_alloc(size_t n)
{
    size_t size = round8(n);
    Class *c;
    List *first;
    Page *p;
    void *obj;

    if (size > SLAB_MAX)
        return tb_malloc(n);
    if (alloc_should_fail())
        return NULL;
    c = class_of(size);
    first = list_first(&c->partial);
    if (first) {
        p = container_of(first, Page, link);
    } else {
        p = c->spare ? c->spare : page_new(size);
        if (!p)
            return NULL;
        c->spare = NULL;
        list_insert_tail(&c->partial, &p->link);
    }
    if (p->free) {
        obj = p->free;
        p->free = *(void **)obj;
    } else {
        obj = p->bump;
        p->bump += size;
    }
    p->live++;
    if (page_full(p))
        list_remove(&p->link);
    return obj;
}

void slab_free(void *obj, size_t n)
{
    size_t size = round8(n);
    Class *c;
    Page *p;

    if (!obj)
        return;
    if (size > SLAB_MAX) {
        tb_free(obj);
        return;
    }
    c = class_of(size);
    p = page_of(obj);
    if (page_full(p))
        list_insert_tail(&c->partial, &p->link);
    *(void **)obj = p->free;
    p->free = obj;
    if (--p->live)
        return;
    list_remove(&p->link);
    if (c->spare) {
        page_release(p);
        return;
    }
    p->free = NULL;
    p->bump = (char *)p + PAGE_HEAD;
    c->spare = p;
}

SlabStats slab_stats(void)
{
    return (SlabStats){npages, narenas};
}

#endif
