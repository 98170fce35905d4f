/*
 * Unit tests: the slab allocator (src/slab.c).
 *
 * The sanitizer build turns slab_alloc() into plain malloc so ASan watches
 * every job; this test wants the real allocator checked under ASan and
 * UBSan too, so it compiles its own copy of it whatever the build says.
 */
#undef TUBED_SLAB_MALLOC
#include "slab.c"

#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "unit.h"

/* Live objects with the byte each was filled with, to catch overlap. */
typedef struct Obj {
    unsigned char *p;
    size_t n;
    unsigned char fill;
} Obj;

static void fill(Obj *o, unsigned char b)
{
    o->fill = b;
    memset(o->p, b, o->n);
}

static void check(const Obj *o)
{
    for (size_t i = 0; i < o->n; i++)
        REQUIRE_MSG(o->p[i] == o->fill, "object %p byte %zu is %u, not %u",
                    (void *)o->p, i, o->p[i], o->fill);
}

START_TEST(rounding_and_cost)
{
    ck_assert_uint_eq(slab_cost(0), 8);
    ck_assert_uint_eq(slab_cost(1), 8);
    ck_assert_uint_eq(slab_cost(8), 8);
    ck_assert_uint_eq(slab_cost(9), 16);
    ck_assert_uint_eq(slab_cost(160), 160);
    ck_assert_uint_eq(slab_cost(SLAB_MAX), SLAB_MAX);
    /* Past SLAB_MAX: 32 sizes per doubling. */
    ck_assert_uint_eq(slab_cost(SLAB_MAX + 1), SLAB_MAX + 64);
    ck_assert_uint_eq(slab_cost(2108), 2112);
    ck_assert_uint_eq(slab_cost(4060), 4096);
    ck_assert_uint_eq(slab_cost(4096), 4096);
    ck_assert_uint_eq(slab_cost(4097), 4096 + 128);
    ck_assert_uint_eq(slab_cost(SLAB_BIG_MAX), SLAB_BIG_MAX);
    /* Past SLAB_BIG_MAX a mapping of its own: 16 sizes per doubling, in
     * whole 4 KiB pages. */
    ck_assert_uint_eq(slab_cost(SLAB_BIG_MAX + 1), SLAB_BIG_MAX + SLAB_BIG_MAX / 16);
    ck_assert_uint_eq(slab_cost(1000000), 31 * 32768);
    ck_assert_uint_eq(slab_cost(1048577), 1048576 + 65536);
    for (size_t n = SLAB_BIG_MAX + 1; n < ((size_t)64 << 20); n = n * 9 / 8 + 4093) {
        ck_assert_uint_eq(slab_cost(n) % 4096, 0);
        ck_assert_uint_ge(slab_cost(n), n);
        ck_assert_uint_le(slab_cost(n), n + n / 16 + 4096);
    }
}
END_TEST

/* Every size up to SLAB_BIG_MAX costs at least itself and at most 1/32
 * more (8 bytes more up to SLAB_MAX), and the classes never shrink as the
 * size grows. */
START_TEST(big_classes_bounded)
{
    size_t prev = 0;

    for (size_t n = 1; n <= SLAB_BIG_MAX; n++) {
        size_t c = slab_cost(n);

        REQUIRE_MSG(c >= n, "cost(%zu) = %zu", n, c);
        REQUIRE_MSG(n <= SLAB_MAX ? c - n < 8 : c - n < n / 32 + 1,
                    "cost(%zu) = %zu", n, c);
        REQUIRE_MSG(c >= prev && c % 8 == 0, "cost(%zu) = %zu", n, c);
        REQUIRE_MSG(class_size(class_index(n)) == c, "class of %zu", n);
        prev = c;
    }
    ck_assert_uint_lt(class_index(SLAB_BIG_MAX), NCLASSES);
}
END_TEST

/* Objects are 8-aligned, writable in full, and packed: a class's objects
 * sit exactly size bytes apart with no header between them. */
START_TEST(aligned_and_packed)
{
    size_t sizes[] = {1, 8, 60, 157, 160, 1000, SLAB_MAX, SLAB_MAX + 1, 4060, 4096,
                      20000, SLAB_BIG_MAX};

    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        unsigned char *a = slab_alloc(sizes[k]), *b = slab_alloc(sizes[k]);

        ck_assert_ptr_nonnull(a);
        ck_assert_ptr_nonnull(b);
        ck_assert_uint_eq((uintptr_t)a % 8, 0);
        ck_assert_uint_eq((size_t)(b - a), slab_cost(sizes[k]));
        memset(a, 0xaa, sizes[k]);
        memset(b, 0xbb, sizes[k]);
        ck_assert_uint_eq(a[sizes[k] - 1], 0xaa);
        slab_free(a, sizes[k]);
        slab_free(b, sizes[k]);
    }
}
END_TEST

/* A freed object is the next one handed out of its size (no page grows
 * while there are holes). */
START_TEST(reuse)
{
    void *a = slab_alloc(100), *b = slab_alloc(100);

    slab_free(a, 100);
    ck_assert_ptr_eq(slab_alloc(100), a);
    slab_free(a, 100);
    slab_free(b, 100);
}
END_TEST

START_TEST(large_goes_to_malloc)
{
    size_t n = SLAB_BIG_MAX + 1;
    unsigned char *p = slab_alloc(n);
    SlabStats before = slab_stats();

    ck_assert_ptr_nonnull(p);
    memset(p, 1, n);
    ck_assert_uint_eq(slab_stats().pages, before.pages);
    slab_free(p, n);
    slab_free(NULL, 10);
}
END_TEST

/* Freed large objects: the next request of the same size class reuses the
 * mapping (a steady stream of large jobs maps and faults nothing in), and
 * at most 16 MiB of them are kept (a drained backlog goes back). */
START_TEST(large_kept_for_reuse_bounded)
{
    enum { N = 40, M = 10 };
    size_t n = 1000000, m = 3000000, k = 200000;
    void *v[N], *w[M], *p;

    p = slab_alloc(n);
    ck_assert_ptr_nonnull(p);
    memset(p, 7, n);
    slab_free(p, n);
    ck_assert_uint_eq(slab_stats().huge_kept, slab_cost(n));
    ck_assert_ptr_eq(slab_alloc(n - 10000), p); /* same class: reused */
    ck_assert_uint_eq(slab_stats().huge_kept, 0);
    slab_free(p, n - 10000);
    /* fewer than 16, but large: the bytes bound what stays */
    for (int i = 0; i < M; i++)
        ck_assert_ptr_nonnull(w[i] = slab_alloc(m));
    for (int i = 0; i < M; i++)
        slab_free(w[i], m);
    ck_assert_uint_le(slab_stats().huge_kept, (size_t)16 << 20);
    ck_assert_uint_ge(slab_stats().huge_kept, (size_t)12 << 20);
    for (int i = 0; i < M; i++)
        ck_assert_ptr_nonnull(w[i] = slab_alloc(m));
    /* many smaller ones: at most 16 stay */
    ck_assert_ptr_eq(slab_alloc(n), p);
    ck_assert_uint_eq(slab_stats().huge_kept, 0);
    for (int i = 0; i < N; i++) {
        v[i] = slab_alloc(k);
        ck_assert_ptr_nonnull(v[i]);
        memset(v[i], i, k);
    }
    for (int i = 0; i < N; i++)
        slab_free(v[i], k);
    ck_assert_uint_eq(slab_stats().huge_kept, 16 * slab_cost(k));
    slab_free(p, n);
    for (int i = 0; i < M; i++)
        slab_free(w[i], m);
    ck_assert_uint_le(slab_stats().huge_kept, (size_t)16 << 20);
}
END_TEST

START_TEST(injected_failure)
{
    alloc_fail_after(1);
    ck_assert_ptr_null(slab_alloc(24));
    ck_assert_uint_eq(alloc_failures() > 0, 1);
    void *p = slab_alloc(24);
    ck_assert_ptr_nonnull(p);
    slab_free(p, 24);
}
END_TEST

/* Memory follows the live count: 40 pages' worth of one size, freed, leave
 * at most the one spare page of that size, and its arena goes back. */
START_TEST(pages_go_back)
{
    enum { N = 40 * (int)(PAGE_SIZE / 160) };
    void **v = calloc(N, sizeof *v);
    SlabStats base = slab_stats(), full;

    ck_assert_ptr_nonnull(v);
    for (int i = 0; i < N; i++)
        ck_assert_ptr_nonnull(v[i] = slab_alloc(160));
    full = slab_stats();
    /* + 1: an earlier test may have left this size's spare page (when the
     * tests share a process, CK_FORK=no). */
    ck_assert_uint_ge(full.pages + 1, base.pages + 40);
    ck_assert_uint_le(full.pages, base.pages + 42);
    for (int i = 0; i < N; i++)
        slab_free(v[i], 160);
    ck_assert_uint_le(slab_stats().pages, base.pages + 1);
    ck_assert_uint_le(slab_stats().arenas, base.arenas + 1);
    free(v);
}
END_TEST

/* More than one arena's worth (64 pages), freed in FIFO order as a queue
 * drains: every arena but the one holding the spare is unmapped. */
START_TEST(arenas_unmapped)
{
    enum { N = 150 * (int)(PAGE_SIZE / 2048) };
    void **v = calloc(N, sizeof *v);
    SlabStats base = slab_stats();

    ck_assert_ptr_nonnull(v);
    for (int i = 0; i < N; i++)
        ck_assert_ptr_nonnull(v[i] = slab_alloc(2048));
    /* 150 pages: at least two arenas more (an earlier test's arena, when
     * the tests share a process, may take up to 64 of them). */
    ck_assert_uint_ge(slab_stats().arenas, base.arenas + 2);
    for (int i = 0; i < N; i++)
        slab_free(v[i], 2048);
    ck_assert_uint_le(slab_stats().arenas, base.arenas + 1);
    free(v);
}
END_TEST

/* Bodies of a few KiB come from 1 MiB pages and go back as a drain frees
 * them, whatever the order: 70 MiB of 4,000-byte objects (two arenas of
 * 1 MiB pages), freed in FIFO order, leave at most one spare page and the
 * arena that holds it. */
START_TEST(big_pages_go_back)
{
    enum { N = 70 * (1 << 20) / 4096 };
    void **v = calloc(N, sizeof *v);
    SlabStats base = slab_stats();

    ck_assert_ptr_nonnull(v);
    for (int i = 0; i < N; i++) {
        ck_assert_ptr_nonnull(v[i] = slab_alloc(4000));
        memset(v[i], i & 0xff, 4000);
    }
    /* Earlier tests' spare pages (CK_FORK=no) may be among them. */
    ck_assert_uint_ge(slab_stats().arenas, 2);
    ck_assert_uint_ge(slab_stats().pages + BIG_SPARES, base.pages + 70);
    for (int i = 0; i < N; i++) {
        ck_assert_uint_eq(((unsigned char *)v[i])[3999], (unsigned)(i & 0xff));
        slab_free(v[i], 4000);
    }
    ck_assert_uint_le(slab_stats().pages, base.pages + 1);
    ck_assert_uint_le(slab_stats().arenas, base.arenas + 1);
    free(v);
}
END_TEST

/* Empty 1 MiB pages kept as spares are capped in all (BIG_SPARES), so a
 * drain of many sizes does not leave a megabyte behind per size. */
START_TEST(big_spares_capped)
{
    enum { SIZES = 12 };
    void *v[SIZES][2];
    SlabStats base = slab_stats();

    for (int k = 0; k < SIZES; k++) {
        size_t n = 3000 + (size_t)k * 2000;
        v[k][0] = slab_alloc(n);
        v[k][1] = slab_alloc(n);
        ck_assert_ptr_nonnull(v[k][0]);
        ck_assert_ptr_nonnull(v[k][1]);
    }
    ck_assert_uint_ge(slab_stats().pages, base.pages + SIZES);
    for (int k = 0; k < SIZES; k++) {
        slab_free(v[k][0], 3000 + (size_t)k * 2000);
        slab_free(v[k][1], 3000 + (size_t)k * 2000);
    }
    ck_assert_uint_le(slab_stats().pages, base.pages + BIG_SPARES);
}
END_TEST

/* An injected failure fails a big request too, and nothing leaks. */
START_TEST(big_injected_failure)
{
    void *p;

    alloc_fail_after(1);
    ck_assert_ptr_null(slab_alloc(5000));
    ck_assert_ptr_nonnull(p = slab_alloc(5000));
    slab_free(p, 5000);
    alloc_fail_after(1);
    ck_assert_ptr_null(slab_alloc(SLAB_BIG_MAX + 100));
    ck_assert_ptr_nonnull(p = slab_alloc(SLAB_BIG_MAX + 100));
    slab_free(p, SLAB_BIG_MAX + 100);
}
END_TEST

/* A queue hovering at a page boundary keeps its spare page: allocating
 * and freeing one object there does not map and unmap pages. */
START_TEST(spare_page_hysteresis)
{
    enum { PER = (int)((PAGE_SIZE - PAGE_HEAD) / 64) };
    void **v = calloc(PER + 1, sizeof *v);
    size_t pages;

    ck_assert_ptr_nonnull(v);
    for (int i = 0; i < PER; i++)
        v[i] = slab_alloc(64);
    pages = slab_stats().pages;
    for (int k = 0; k < 100; k++) {
        v[PER] = slab_alloc(64);
        ck_assert_uint_le(slab_stats().pages, pages + 1);
        slab_free(v[PER], 64);
        ck_assert_uint_le(slab_stats().pages, pages + 1);
        ck_assert_uint_ge(slab_stats().pages, pages);
    }
    for (int i = 0; i < PER; i++)
        slab_free(v[i], 64);
    free(v);
}
END_TEST

/* Random allocations and frees of random sizes: no two live objects
 * overlap (each keeps its fill), and all is given back at the end. */
START_TEST(random_churn)
{
    enum { LIVE = 4000, STEPS = 200000 };
    Obj *objs = calloc(LIVE, sizeof *objs);
    SlabStats base = slab_stats();
    Rng r;

    ck_assert_ptr_nonnull(objs);
    rng_seed(&r, 7 + (uint64_t)_i);
    for (int step = 0; step < STEPS; step++) {
        Obj *o = &objs[rng_below(&r, LIVE)];

        if (o->p) {
            check(o);
            slab_free(o->p, o->n);
            o->p = NULL;
            continue;
        }
        /* Mostly small, some near and past SLAB_MAX, a few big. */
        o->n = rng_below(&r, 8)    ? rng_below(&r, 300)
             : rng_below(&r, 8)    ? rng_below(&r, SLAB_MAX + 200)
             : rng_below(&r, 16)   ? rng_below(&r, SLAB_BIG_MAX + 1)
                                   : SLAB_BIG_MAX + rng_below(&r, 10000);
        o->p = slab_alloc(o->n);
        REQUIRE(o->p != NULL);
        fill(o, (unsigned char)(step & 0xff));
    }
    for (int i = 0; i < LIVE; i++) {
        if (objs[i].p) {
            check(&objs[i]);
            slab_free(objs[i].p, objs[i].n);
        }
    }
    /* Only spare pages remain: at most one per size class. */
    ck_assert_uint_le(slab_stats().pages, base.pages + NCLASSES);
    free(objs);
}
END_TEST

/* Is the 64 KiB page at p resident (every 4 KiB of it)? */
static int resident(const void *p)
{
    unsigned char v[PAGE_SIZE / 4096];

    REQUIRE(mincore((void *)p, PAGE_SIZE, v) == 0);
    for (size_t i = 0; i < sizeof v; i++)
        if (!(v[i] & 1))
            return 0;
    return 1;
}

/* Page k of the prefault thread's arenas, in the order it goes. */
static char *pf_page(size_t k)
{
    return pf.bases[k / ARENA_PAGES] + (k % ARENA_PAGES) * PAGE_SIZE;
}

/* Replay's prefault thread: it faults pages in ahead of the allocations
 * (never more than PF_AHEAD ahead), the objects handed out meanwhile are
 * sound, and stopping it unmaps its arenas that hold nothing and gives
 * back the pages it faulted in that nobody took. */
START_TEST(prefault_ahead_then_tidy)
{
    enum { ARENAS = PF_AHEAD / ARENA_PAGES + 2, N = 3 * (int)(PAGE_SIZE / 304) };
    SlabStats base = slab_stats();
    Obj v[N];
    int ahead = 0, ours;

    if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
        return; /* it does nothing on one CPU, by design */
    slab_prefault_start((size_t)ARENAS * ARENA_PAGES * PAGE_SIZE);
    ck_assert_int_eq(pf.running, 1);
    ck_assert_uint_eq(pf.n, ARENAS);
    /* Nothing taken yet: it runs PF_AHEAD pages ahead, no more. A
     * generous wait: the machine may be busy. */
    for (int t = 0; t < 10000 && !ahead; t++) {
        ahead = resident(pf_page(PF_AHEAD - 1));
        if (!ahead)
            usleep(1000);
    }
    ck_assert_int_eq(ahead, 1);
    ck_assert_int_eq(resident(pf_page(0)), 1);
    ck_assert_int_eq(resident(pf_page(PF_AHEAD)), 0);
    for (int i = 0; i < N; i++) {
        v[i].n = 304;
        ck_assert_ptr_nonnull(v[i].p = slab_alloc(304));
        fill(&v[i], (unsigned char)i);
    }
    for (int i = 0; i < N; i++)
        check(&v[i]);
    ours = pf.arenas[0]->unused != ~(uint64_t)0; /* it stays mapped */
    slab_prefault_stop();
    ck_assert_int_eq(pf.running, 0);
    /* At most three pages were taken, all from one arena (ours, or an
     * earlier test's with room when the tests share a process): the
     * others of ours are unmapped, and the untaken pages of the one that
     * stays are not resident any more. */
    ck_assert_uint_le(slab_stats().arenas, base.arenas + 1);
    if (ours)
        ck_assert_int_eq(resident(pf_page(ARENA_PAGES - 1)), 0);
    for (int i = 0; i < N; i++) {
        check(&v[i]);
        slab_free(v[i].p, 304);
    }
    ck_assert_uint_le(slab_stats().arenas, base.arenas + 1);
}
END_TEST

static Suite *slab_suite(void)
{
    Suite *s = suite_create("slab");
    TCase *tc = unit_tcase("slab");

    tcase_add_test(tc, rounding_and_cost);
    tcase_add_test(tc, aligned_and_packed);
    tcase_add_test(tc, reuse);
    tcase_add_test(tc, large_goes_to_malloc);
    tcase_add_test(tc, injected_failure);
    tcase_add_test(tc, pages_go_back);
    tcase_add_test(tc, arenas_unmapped);
    tcase_add_test(tc, spare_page_hysteresis);
    tcase_add_test(tc, big_classes_bounded);
    tcase_add_test(tc, big_pages_go_back);
    tcase_add_test(tc, big_spares_capped);
    tcase_add_test(tc, big_injected_failure);
    tcase_add_test(tc, large_kept_for_reuse_bounded);
    tcase_add_test(tc, prefault_ahead_then_tidy);
    tcase_add_loop_test(tc, random_churn, 0, 3);
    suite_add_tcase(s, tc);
    return s;
}

UNIT_MAIN(slab_suite)
