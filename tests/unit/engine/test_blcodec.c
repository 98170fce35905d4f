/* Unit tests for blcodec.c: the binlog's record and header format.
 *
 * Round trips of J/S/D/C records with every field at its edge values, the
 * exact record size, the header check, and a decoder that never returns a
 * record for damaged or truncated input and never reads past the bytes it
 * was given. Every decode of damaged input reads from a buffer that ends
 * right before an inaccessible page, so an overread is a SIGSEGV in every
 * build, not only under ASan. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "blcodec.h"
#include "crc32c.h"
#include "unit.h"

/* ---- helpers ---------------------------------------------------------- */

/* A buffer whose usable bytes end right at a PROT_NONE page. */
typedef struct Guard {
    char *base;
    size_t data_len;  /* accessible bytes before the guard page */
    size_t map_len;
} Guard;

static void guard_init(Guard *g, size_t cap)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    size_t pages = (cap + pg - 1) / pg;

    if (!pages)
        pages = 1;
    g->data_len = pages * pg;
    g->map_len = g->data_len + pg;
    g->base = mmap(NULL, g->map_len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(g->base, MAP_FAILED);
    ck_assert_int_eq(mprotect(g->base + g->data_len, pg, PROT_NONE), 0);
}

/* Copy n bytes so that they end exactly at the guard page. */
static char *guard_put(Guard *g, const void *src, size_t n)
{
    char *p;

    ck_assert_uint_le(n, g->data_len);
    p = g->base + g->data_len - n;
    if (n)
        memcpy(p, src, n);
    return p;
}

static void guard_free(Guard *g)
{
    munmap(g->base, g->map_len);
}

static void le32(char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (char)(v >> (8 * i));
}

static void le64(char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (char)(v >> (8 * i));
}

static uint32_t rd32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;

    return (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 |
           (uint32_t)u[3] << 24;
}

/* A record around a payload built by hand: length, CRC32C, payload. */
static size_t frame(char *out, const char *payload, uint32_t len)
{
    le32(out, len);
    le32(out + 4, crc32c(0, payload, len));
    memcpy(out + BL_REC_HEAD, payload, len);
    return BL_REC_HEAD + (size_t)len;
}

static void assert_same(const BlRecord *a, const BlRecord *b)
{
    ck_assert_uint_eq(a->type, b->type);
    ck_assert_uint_eq(a->id, b->id);
    if (a->type == BL_DELETE)
        return;
    ck_assert_uint_eq(a->pri, b->pri);
    ck_assert_uint_eq(a->delay, b->delay);
    ck_assert_uint_eq(a->state, b->state);
    ck_assert_int_eq(a->deadline_wall, b->deadline_wall);
    ck_assert_uint_eq(a->reserves, b->reserves);
    ck_assert_uint_eq(a->timeouts, b->timeouts);
    ck_assert_uint_eq(a->releases, b->releases);
    ck_assert_uint_eq(a->buries, b->buries);
    ck_assert_uint_eq(a->kicks, b->kicks);
    if (a->type == BL_STATE)
        return;
    ck_assert_uint_eq(a->ttr, b->ttr);
    ck_assert_int_eq(a->created_wall, b->created_wall);
    ck_assert_uint_eq(a->tube_len, b->tube_len);
    ck_assert(a->tube_len == 0 || memcmp(a->tube, b->tube, a->tube_len) == 0);
    ck_assert_uint_eq(a->body_size, b->body_size);
    ck_assert(a->body_size == 0 || memcmp(a->body, b->body, a->body_size) == 0);
}

/* Encode r into a buffer with a canary after it; check the size, the
 * framing and the canary, then decode it back (exact length, and with
 * trailing bytes) from a guarded copy and compare every field. */
static void round_trip(const BlRecord *r)
{
    size_t size = bl_record_size(r);
    char *buf = malloc(size + 64);
    Guard g;
    BlRecord d;
    char *p;
    long n;

    ck_assert_ptr_nonnull(buf);
    memset(buf, 0xa5, size + 64);
    bl_encode(r, buf);
    for (size_t i = 0; i < 64; i++)
        ck_assert_msg((unsigned char)buf[size + i] == 0xa5,
                      "bl_encode wrote past bl_record_size() (%zu) at +%zu", size, i);
    ck_assert_uint_eq(rd32(buf), size - BL_REC_HEAD);
    ck_assert_uint_eq(rd32(buf + 4), crc32c(0, buf + BL_REC_HEAD, size - BL_REC_HEAD));
    ck_assert_uint_eq((unsigned char)buf[BL_REC_HEAD], r->type);

    guard_init(&g, size + 64);
    p = guard_put(&g, buf, size);
    memset(&d, 0x5a, sizeof d);
    n = bl_decode(p, size, &d);
    ck_assert_int_eq(n, (long)size);
    assert_same(r, &d);
    if (r->type == BL_JOB) {
        /* The pointers point into the decoded buffer. */
        ck_assert_ptr_eq(d.tube, p + BL_JOB_FIXED - 4);
        ck_assert_ptr_eq(d.body, d.tube + d.tube_len + 4);
        ck_assert(d.body + d.body_size == p + size);
    }
    /* Trailing bytes (the next record, or zero fill) change nothing. */
    p = guard_put(&g, buf, size + 64);
    n = bl_decode(p, size + 64, &d);
    ck_assert_int_eq(n, (long)size);
    assert_same(r, &d);
    guard_free(&g);
    free(buf);
}

static BlRecord job_rec(uint64_t id, uint32_t pri, const char *tube, uint8_t tube_len,
                        const char *body, uint32_t body_size)
{
    BlRecord r;

    memset(&r, 0, sizeof r);
    r.type = BL_JOB;
    r.id = id;
    r.pri = pri;
    r.delay = 17;
    r.ttr = 120;
    r.state = 2;
    r.deadline_wall = 1700000000123456789LL;
    r.created_wall = 1690000000987654321LL;
    r.reserves = 1;
    r.timeouts = 2;
    r.releases = 3;
    r.buries = 4;
    r.kicks = 5;
    r.tube = tube;
    r.tube_len = tube_len;
    r.body = body;
    r.body_size = body_size;
    return r;
}

/* A small valid J record, encoded into out (at least 128 bytes). */
static size_t sample_job(char *out)
{
    static const char body[] = "hello\r\nworld\0!";
    BlRecord r = job_rec(12345, 1024, "emails", 6, body, sizeof body);

    bl_encode(&r, out);
    return bl_record_size(&r);
}

/* ---- round trips ------------------------------------------------------ */

START_TEST(job_round_trip_edges)
{
    static const uint64_t ids[] = {1, 2, 0xffffffffULL, 0x100000000ULL, BL_ID_LIMIT - 1};
    static const uint32_t pris[] = {0, 1, 1024, UINT32_MAX};
    static const int64_t walls[] = {0, 1, -1, INT64_MIN, INT64_MAX, 1700000000000000000LL};
    static const uint8_t states[] = {0, 2, 3}; /* ready, delayed, buried */
    char tube200[200];
    const char bin[] = "a\r\nb\0c\r\n\0\0\xff\x80\r\n";
    const char *bodies[] = {"", bin, "x"};
    uint32_t body_sizes[] = {0, sizeof bin, 1};
    const char *tubes[] = {"a", "default", tube200};
    uint8_t tube_lens[] = {1, 7, 200};

    memset(tube200, 'T', sizeof tube200);

    for (size_t a = 0; a < sizeof ids / sizeof *ids; a++)
        for (size_t b = 0; b < sizeof pris / sizeof *pris; b++)
            for (size_t t = 0; t < 3; t++)
                for (size_t k = 0; k < 3; k++) {
                    BlRecord r = job_rec(ids[a], pris[b], tubes[t], tube_lens[t],
                                         bodies[k], body_sizes[k]);
                    round_trip(&r);
                }
    /* Every other field at its extremes. */
    for (size_t w = 0; w < sizeof walls / sizeof *walls; w++) {
        BlRecord r = job_rec(BL_ID_LIMIT - 1, UINT32_MAX, "t", 1, bin, sizeof bin);
        r.delay = w & 1 ? UINT32_MAX : 0;
        r.ttr = w & 1 ? 0 : UINT32_MAX;
        r.state = states[w % 3];
        r.deadline_wall = walls[w];
        r.created_wall = walls[sizeof walls / sizeof *walls - 1 - w];
        r.reserves = r.timeouts = r.releases = r.buries = r.kicks =
            w & 1 ? UINT32_MAX : 0;
        round_trip(&r);
    }
}
END_TEST

START_TEST(job_round_trip_large_body)
{
    uint32_t n = 1u << 20;
    char *body = malloc(n);
    Rng rng;
    BlRecord r;

    ck_assert_ptr_nonnull(body);
    rng_seed(&rng, 11);
    for (uint32_t i = 0; i < n; i++)
        body[i] = (char)rng_next(&rng);
    memcpy(body + 1000, "\r\n\0\r\n", 5);
    r = job_rec(BL_ID_LIMIT - 1, 0, "big", 3, body, n);
    ck_assert_uint_eq(bl_record_size(&r), BL_JOB_FIXED + 3 + (size_t)n);
    round_trip(&r);
    free(body);
}
END_TEST

START_TEST(state_round_trip_edges)
{
    static const uint64_t ids[] = {1, BL_ID_LIMIT - 1};
    static const uint32_t vals[] = {0, UINT32_MAX};
    static const int64_t walls[] = {0, -1, INT64_MIN, INT64_MAX};

    for (size_t a = 0; a < 2; a++)
        for (size_t b = 0; b < 2; b++)
            for (size_t w = 0; w < 4; w++)
                for (uint8_t st = 0; st < 4; st++) {
                    BlRecord r;
                    if (st == 1)
                        continue; /* reserved is never logged: see below */
                    memset(&r, 0, sizeof r);
                    r.type = BL_STATE;
                    r.id = ids[a];
                    r.pri = vals[b];
                    r.delay = vals[1 - b];
                    r.state = st;
                    r.deadline_wall = walls[w];
                    r.reserves = vals[b];
                    r.timeouts = vals[1 - b];
                    r.releases = 7;
                    r.buries = vals[b];
                    r.kicks = vals[1 - b];
                    ck_assert_uint_eq(bl_record_size(&r), BL_STATE_SIZE);
                    round_trip(&r);
                }
}
END_TEST

START_TEST(delete_round_trip_edges)
{
    static const uint64_t ids[] = {1, 255, 256, 0x0102030405060708ULL, BL_ID_LIMIT - 1};

    for (size_t a = 0; a < sizeof ids / sizeof *ids; a++) {
        BlRecord r;
        char buf[BL_DELETE_SIZE];
        memset(&r, 0, sizeof r);
        r.type = BL_DELETE;
        r.id = ids[a];
        ck_assert_uint_eq(bl_record_size(&r), BL_DELETE_SIZE);
        round_trip(&r);
        /* Exact bytes: length 9, CRC, 'D', id little-endian. */
        bl_encode(&r, buf);
        ck_assert_uint_eq(rd32(buf), 9);
        ck_assert_int_eq(buf[8], 'D');
        for (int i = 0; i < 8; i++)
            ck_assert_uint_eq((unsigned char)buf[9 + i], (unsigned char)(ids[a] >> (8 * i)));
    }
}
END_TEST

/* The layout of a J payload matches doc/binlog.md byte for byte. */
START_TEST(job_layout_matches_doc)
{
    char buf[256], want[256];
    BlRecord r = job_rec(0x0102030405060708ULL, 0x11223344u, "tb", 2, "BODY", 4);
    size_t size = bl_record_size(&r), o = 0;

    ck_assert_uint_eq(size, BL_REC_HEAD + 63 + 2 + 4);
    bl_encode(&r, buf);
    want[o++] = 'J';
    le64(want + o, r.id), o += 8;
    le32(want + o, r.pri), o += 4;
    le32(want + o, r.delay), o += 4;
    le32(want + o, r.ttr), o += 4;
    want[o++] = (char)r.state;
    le64(want + o, (uint64_t)r.deadline_wall), o += 8;
    le64(want + o, (uint64_t)r.created_wall), o += 8;
    le32(want + o, r.reserves), o += 4;
    le32(want + o, r.timeouts), o += 4;
    le32(want + o, r.releases), o += 4;
    le32(want + o, r.buries), o += 4;
    le32(want + o, r.kicks), o += 4;
    want[o++] = 2;
    memcpy(want + o, "tb", 2), o += 2;
    le32(want + o, 4), o += 4;
    memcpy(want + o, "BODY", 4), o += 4;
    ck_assert_uint_eq(o, size - BL_REC_HEAD);
    ck_assert_uint_eq(rd32(buf), o);
    ck_assert_uint_eq(rd32(buf + 4), crc32c(0, want, o));
    ck_assert(memcmp(buf + BL_REC_HEAD, want, o) == 0);
}
END_TEST

/* Records back to back, then zero fill: the reader walks them and stops. */
START_TEST(stream_of_records)
{
    char buf[1024];
    size_t off = 0, sizes[3];
    BlRecord j = job_rec(5, 6, "q", 1, "xyz", 3), st, del, d;
    Guard g;
    char *p;
    long n;

    memset(&st, 0, sizeof st);
    st.type = BL_STATE;
    st.id = 5;
    st.state = 3;
    memset(&del, 0, sizeof del);
    del.type = BL_DELETE;
    del.id = 5;
    memset(buf, 0, sizeof buf);
    bl_encode(&j, buf + off), off += (sizes[0] = bl_record_size(&j));
    bl_encode(&st, buf + off), off += (sizes[1] = bl_record_size(&st));
    bl_encode(&del, buf + off), off += (sizes[2] = bl_record_size(&del));

    guard_init(&g, sizeof buf);
    p = guard_put(&g, buf, sizeof buf);
    off = 0;
    for (int i = 0; i < 3; i++) {
        n = bl_decode(p + off, sizeof buf - off, &d);
        ck_assert_int_eq(n, (long)sizes[i]);
        ck_assert_uint_eq(d.id, 5);
        off += (size_t)n;
    }
    ck_assert_uint_eq(d.type, BL_DELETE);
    ck_assert_int_eq(bl_decode(p + off, sizeof buf - off, &d), BL_END);
    /* The zero fill read right up to the end: 0..3 bytes left. */
    for (size_t left = 0; left < 8; left++)
        ck_assert_int_eq(bl_decode(p + sizeof buf - left, left, &d), BL_END);
    guard_free(&g);
}
END_TEST

/* ---- header ----------------------------------------------------------- */

START_TEST(header_valid)
{
    char h[BL_HEADER_SIZE + 8];
    Guard g;

    memset(h, 0x77, sizeof h);
    bl_encode_header(h);
    ck_assert(memcmp(h, "TUBEDLOG", 8) == 0);
    ck_assert_uint_eq(rd32(h + 8), BL_VERSION);
    ck_assert_uint_eq(rd32(h + 12), crc32c(0, h, 12));
    for (size_t i = BL_HEADER_SIZE; i < sizeof h; i++)
        ck_assert_uint_eq((unsigned char)h[i], 0x77); /* wrote 16 bytes only */
    guard_init(&g, sizeof h);
    ck_assert_int_eq(bl_check_header(guard_put(&g, h, BL_HEADER_SIZE), BL_HEADER_SIZE), 0);
    /* More bytes after it (the records) are fine. */
    ck_assert_int_eq(bl_check_header(guard_put(&g, h, sizeof h), sizeof h), 0);
    guard_free(&g);
}
END_TEST

START_TEST(header_all_zero)
{
    char z[64];
    Guard g;

    memset(z, 0, sizeof z);
    guard_init(&g, sizeof z);
    for (size_t n = 0; n <= sizeof z; n++)
        ck_assert_int_eq(bl_check_header(guard_put(&g, z, n), n), 1);
    /* An empty file (no mapping at all). */
    ck_assert_int_eq(bl_check_header(NULL, 0), 1);
    guard_free(&g);
}
END_TEST

START_TEST(header_any_change)
{
    char h[BL_HEADER_SIZE], m[BL_HEADER_SIZE];
    Guard g;

    bl_encode_header(h);
    guard_init(&g, sizeof h);
    for (size_t i = 0; i < BL_HEADER_SIZE; i++)
        for (int v = 0; v < 256; v++) {
            if (v == (unsigned char)h[i])
                continue;
            memcpy(m, h, sizeof m);
            m[i] = (char)v;
            ck_assert_msg(bl_check_header(guard_put(&g, m, sizeof m), sizeof m) == -1,
                          "header byte %zu = 0x%02x accepted", i, v);
        }
    /* A short header, even a correct prefix. */
    for (size_t n = 1; n < BL_HEADER_SIZE; n++)
        ck_assert_int_eq(bl_check_header(guard_put(&g, h, n), n), -1);
    guard_free(&g);
}
END_TEST

START_TEST(header_other_version)
{
    char h[BL_HEADER_SIZE];
    Guard g;

    /* Well formed, checksum right, but a version we do not know. */
    memcpy(h, BL_MAGIC, 8);
    le32(h + 8, BL_VERSION + 1);
    le32(h + 12, crc32c(0, h, 12));
    guard_init(&g, sizeof h);
    ck_assert_int_eq(bl_check_header(guard_put(&g, h, sizeof h), sizeof h), -1);
    le32(h + 8, 0);
    le32(h + 12, crc32c(0, h, 12));
    ck_assert_int_eq(bl_check_header(guard_put(&g, h, sizeof h), sizeof h), -1);
    guard_free(&g);
}
END_TEST

/* ---- damage ----------------------------------------------------------- */

static void flip_every_bit(const char *rec, size_t size)
{
    char *m = malloc(size);
    Guard g;
    BlRecord d;

    ck_assert_ptr_nonnull(m);
    guard_init(&g, size + 256);
    for (size_t i = 0; i < size; i++)
        for (int bit = 0; bit < 8; bit++) {
            long n;
            memcpy(m, rec, size);
            m[i] ^= (char)(1u << bit);
            /* Exactly the record's bytes available. */
            n = bl_decode(guard_put(&g, m, size), size, &d);
            ck_assert_msg(n == BL_CORRUPT || n == BL_TORN,
                          "byte %zu bit %d flipped: bl_decode returned %ld", i, bit, n);
            /* And followed by zero fill, as in a preallocated file. */
            {
                char *p = g.base + g.data_len - size - 256;
                memcpy(p, m, size);
                memset(p + size, 0, 256);
                n = bl_decode(p, size + 256, &d);
                ck_assert_msg(n == BL_CORRUPT || n == BL_TORN,
                              "byte %zu bit %d flipped (zero fill after): bl_decode "
                              "returned %ld", i, bit, n);
            }
        }
    guard_free(&g);
    free(m);
}

START_TEST(job_bit_flips)
{
    char rec[256];
    size_t size = sample_job(rec);

    flip_every_bit(rec, size);
}
END_TEST

START_TEST(state_and_delete_bit_flips)
{
    char rec[128];
    BlRecord r;

    memset(&r, 0, sizeof r);
    r.type = BL_STATE;
    r.id = 77;
    r.pri = 3;
    r.state = 3;
    r.buries = 1;
    bl_encode(&r, rec);
    flip_every_bit(rec, BL_STATE_SIZE);
    r.type = BL_DELETE;
    bl_encode(&r, rec);
    flip_every_bit(rec, BL_DELETE_SIZE);
}
END_TEST

static void truncate_everywhere(const char *rec, size_t size, size_t step)
{
    Guard g;
    BlRecord d;

    guard_init(&g, size);
    for (size_t n = 0; n < size; n += (n < 64 || size - n < 64) ? 1 : step) {
        long got = bl_decode(guard_put(&g, rec, n), n, &d);
        int zero = 1;
        for (size_t i = 0; i < n; i++)
            if (rec[i])
                zero = 0;
        ck_assert_msg(got == (zero ? BL_END : BL_TORN),
                      "record of %zu bytes cut to %zu: bl_decode returned %ld", size, n, got);
    }
    ck_assert_int_eq(bl_decode(guard_put(&g, rec, size), size, &d), (long)size);
    guard_free(&g);
}

START_TEST(truncation_is_torn)
{
    char rec[256];
    size_t size = sample_job(rec);
    BlRecord r;

    truncate_everywhere(rec, size, 1);
    memset(&r, 0, sizeof r);
    r.type = BL_STATE;
    r.id = 1;
    bl_encode(&r, rec);
    truncate_everywhere(rec, BL_STATE_SIZE, 1);
    r.type = BL_DELETE;
    bl_encode(&r, rec);
    truncate_everywhere(rec, BL_DELETE_SIZE, 1);
}
END_TEST

START_TEST(truncation_large_record)
{
    uint32_t n = 1u << 20;
    char *body = calloc(1, n), *rec;
    BlRecord r;
    size_t size;

    ck_assert_ptr_nonnull(body);
    for (uint32_t i = 0; i < n; i += 97)
        body[i] = (char)i;
    r = job_rec(9, 9, "big", 3, body, n);
    size = bl_record_size(&r);
    rec = malloc(size);
    ck_assert_ptr_nonnull(rec);
    bl_encode(&r, rec);
    truncate_everywhere(rec, size, 4093);
    free(rec);
    free(body);
}
END_TEST

/* A length-prefix with a small value whose first bytes are zero. */
START_TEST(zero_prefix_is_end)
{
    char buf[64];
    Guard g;
    BlRecord d;

    guard_init(&g, sizeof buf);
    /* Length 0 means no more records, whatever follows. */
    memset(buf, 0, sizeof buf);
    ck_assert_int_eq(bl_decode(guard_put(&g, buf, sizeof buf), sizeof buf, &d), BL_END);
    le32(buf + 4, 0xdeadbeef);
    memset(buf + 8, 'J', 20);
    ck_assert_int_eq(bl_decode(guard_put(&g, buf, sizeof buf), sizeof buf, &d), BL_END);
    ck_assert_int_eq(bl_decode(guard_put(&g, buf, 4), 4, &d), BL_END);
    ck_assert_int_eq(bl_decode(guard_put(&g, buf, 8), 8, &d), BL_END);
    /* Fewer than four bytes: end if all zero, else a torn length. */
    for (size_t n = 0; n < 4; n++) {
        memset(buf, 0, sizeof buf);
        ck_assert_int_eq(bl_decode(guard_put(&g, buf, n), n, &d), BL_END);
        for (size_t k = 0; k < n; k++) {
            memset(buf, 0, sizeof buf);
            buf[k] = 1;
            ck_assert_int_eq(bl_decode(guard_put(&g, buf, n), n, &d), BL_TORN);
        }
    }
    guard_free(&g);
}
END_TEST

START_TEST(length_beyond_buffer)
{
    char rec[256];
    size_t size = sample_job(rec);
    Guard g;
    BlRecord d;
    long n;

    guard_init(&g, sizeof rec);
    /* One byte more than there is, and much more. */
    le32(rec, (uint32_t)(size - BL_REC_HEAD + 1));
    ck_assert_int_eq(bl_decode(guard_put(&g, rec, size), size, &d), BL_TORN);
    le32(rec, 1u << 20);
    ck_assert_int_eq(bl_decode(guard_put(&g, rec, size), size, &d), BL_TORN);
    le32(rec, 1u << 30);
    ck_assert_int_eq(bl_decode(guard_put(&g, rec, size), size, &d), BL_TORN);
    /* Only the 8-byte head is there. */
    ck_assert_int_eq(bl_decode(guard_put(&g, rec, BL_REC_HEAD), BL_REC_HEAD, &d), BL_TORN);
    /* A length no record can have: never a record, never a read past. */
    le32(rec, UINT32_MAX);
    n = bl_decode(guard_put(&g, rec, size), size, &d);
    ck_assert(n == BL_TORN || n == BL_CORRUPT);
    le32(rec, 0x80000000u);
    n = bl_decode(guard_put(&g, rec, size), size, &d);
    ck_assert(n == BL_TORN || n == BL_CORRUPT);
    guard_free(&g);
}
END_TEST

/* Decode a hand-built payload framed with a correct CRC; expect status. */
static long decode_payload_bytes(const char *payload, uint32_t len)
{
    char *buf = malloc(BL_REC_HEAD + (size_t)len);
    Guard g;
    BlRecord d;
    long n;

    ck_assert_ptr_nonnull(buf);
    frame(buf, payload, len);
    guard_init(&g, BL_REC_HEAD + (size_t)len);
    n = bl_decode(guard_put(&g, buf, BL_REC_HEAD + (size_t)len), BL_REC_HEAD + (size_t)len, &d);
    guard_free(&g);
    free(buf);
    return n;
}

/* The J payload of job_rec() with the given tube and body lengths, built
 * by hand; returns its length. */
static uint32_t build_job_payload(char *p, uint8_t tube_len_field, size_t tube_bytes,
                                  uint32_t body_len_field, size_t body_bytes)
{
    size_t o = 0;

    p[o++] = 'J';
    le64(p + o, 42), o += 8;
    le32(p + o, 1), o += 4;   /* pri */
    le32(p + o, 0), o += 4;   /* delay */
    le32(p + o, 60), o += 4;  /* ttr */
    p[o++] = 0;               /* state */
    le64(p + o, 0), o += 8;
    le64(p + o, 1), o += 8;
    memset(p + o, 0, 20), o += 20;
    p[o++] = (char)tube_len_field;
    memset(p + o, 't', tube_bytes), o += tube_bytes;
    le32(p + o, body_len_field), o += 4;
    memset(p + o, 'b', body_bytes), o += body_bytes;
    return (uint32_t)o;
}

START_TEST(structure_good_payloads_accepted)
{
    char p[1024];
    uint32_t len;

    /* The hand-built payloads below are right when their fields agree. */
    len = build_job_payload(p, 5, 5, 10, 10);
    ck_assert_uint_eq(len, 63 + 5 + 10);
    ck_assert_int_eq(decode_payload_bytes(p, len), (long)(BL_REC_HEAD + len));
    len = build_job_payload(p, 1, 1, 0, 0);
    ck_assert_uint_eq(len, 64);
    ck_assert_int_eq(decode_payload_bytes(p, len), (long)(BL_REC_HEAD + len));
}
END_TEST

/* Records the server could never have written, with a correct checksum:
 * an illegal tube name or a state that is never logged. */
static long encode_decode(const BlRecord *r)
{
    static char buf[BL_JOB_FIXED + 300];
    BlRecord d;

    ck_assert_uint_le(bl_record_size(r), sizeof buf);
    bl_encode(r, buf);
    return bl_decode(buf, bl_record_size(r), &d);
}

START_TEST(structure_illegal_values_rejected)
{
    char tube255[255], tube201[201];
    BlRecord r = job_rec(1, 0, "ok", 2, "x", 1);

    memset(tube255, 'a', sizeof tube255);
    memset(tube201, 'a', sizeof tube201);
    ck_assert_int_gt(encode_decode(&r), 0);
    r.tube = "";
    r.tube_len = 0;
    ck_assert_int_eq(encode_decode(&r), BL_CORRUPT);
    r.tube = tube201;
    r.tube_len = sizeof tube201;
    ck_assert_int_eq(encode_decode(&r), BL_CORRUPT);
    r.tube = tube255;
    r.tube_len = sizeof tube255;
    ck_assert_int_eq(encode_decode(&r), BL_CORRUPT);
    r.tube = "-x";
    r.tube_len = 2;
    ck_assert_int_eq(encode_decode(&r), BL_CORRUPT);
    r.tube = "a b";
    r.tube_len = 3;
    ck_assert_int_eq(encode_decode(&r), BL_CORRUPT);
    r = job_rec(1, 0, "ok", 2, "x", 1);
    for (int st = 0; st < 256; st++) {
        r.state = (uint8_t)st;
        ck_assert_int_eq(encode_decode(&r) > 0, st == 0 || st == 2 || st == 3);
        r.type = BL_STATE;
        ck_assert_int_eq(encode_decode(&r) > 0, st == 0 || st == 2 || st == 3);
        r.type = BL_JOB;
    }
}
END_TEST

/* Job ids from BL_ID_LIMIT on are damage in every record that carries
 * one (the next id past them would wrap: a replica of a primary that
 * sent one took a known id for a new one, fuzz_repl); P's id is its
 * epoch and may be anything. */
START_TEST(structure_id_limit)
{
    static const uint64_t ids[] = {BL_ID_LIMIT - 1, BL_ID_LIMIT, UINT64_MAX};
    static const uint8_t types[] = {BL_JOB, BL_JOBX, BL_STATE, BL_DELETE};

    for (size_t a = 0; a < sizeof ids / sizeof *ids; a++) {
        int ok = ids[a] < BL_ID_LIMIT;
        for (size_t t = 0; t < sizeof types / sizeof *types; t++) {
            BlRecord r = job_rec(ids[a], 0, "ok", 2, "x", 1);
            r.type = types[t];
            ck_assert_msg((encode_decode(&r) > 0) == ok, "type %c id %llu", types[t],
                          (unsigned long long)ids[a]);
        }
        {
            BlRecord r;
            memset(&r, 0, sizeof r);
            r.type = BL_SNAP_END;
            r.id = ids[a];
            ck_assert_int_eq(encode_decode(&r) > 0, ok);
            r.type = BL_POS;
            ck_assert_int_gt(encode_decode(&r), 0);
        }
    }
}
END_TEST

START_TEST(structure_wrong_size_for_type)
{
    char p[256];

    memset(p, 0, sizeof p);
    /* D: exactly 9 bytes. */
    p[0] = 'D';
    le64(p + 1, 7);
    ck_assert_int_eq(decode_payload_bytes(p, 9), BL_REC_HEAD + 9);
    for (uint32_t len = 1; len <= 64; len++)
        if (len != 9)
            ck_assert_msg(decode_payload_bytes(p, len) == BL_CORRUPT,
                          "D payload of %u bytes accepted", len);
    /* S: exactly 46 bytes. */
    memset(p, 0, sizeof p);
    p[0] = 'S';
    le64(p + 1, 7);
    ck_assert_int_eq(decode_payload_bytes(p, 46), BL_REC_HEAD + 46);
    for (uint32_t len = 1; len <= 128; len++)
        if (len != 46)
            ck_assert_msg(decode_payload_bytes(p, len) == BL_CORRUPT,
                          "S payload of %u bytes accepted", len);
    /* J: shorter than its fixed part. */
    build_job_payload(p, 0, 0, 0, 0);
    for (uint32_t len = 1; len < 63; len++)
        ck_assert_msg(decode_payload_bytes(p, len) == BL_CORRUPT,
                      "J payload of %u bytes accepted", len);
}
END_TEST

START_TEST(structure_unknown_type)
{
    char p[128];

    for (int type = 0; type < 256; type++) {
        if (type == 'J' || type == 'S' || type == 'D')
            continue;
        memset(p, 0, sizeof p);
        p[0] = (char)type;
        le64(p + 1, 1);
        /* Sizes that would be right for D, S and a minimal J. */
        ck_assert_msg(decode_payload_bytes(p, 9) == BL_CORRUPT, "type 0x%02x (9)", type);
        ck_assert_msg(decode_payload_bytes(p, 46) == BL_CORRUPT, "type 0x%02x (46)", type);
        ck_assert_msg(decode_payload_bytes(p, 63) == BL_CORRUPT, "type 0x%02x (63)", type);
        ck_assert_msg(decode_payload_bytes(p, 1) == BL_CORRUPT, "type 0x%02x (1)", type);
    }
}
END_TEST

/* Tube and body lengths that do not add up to the payload length. The
 * body-length field sits after the tube name, so a tube length larger than
 * the payload must be caught before that field is read. */
START_TEST(structure_tube_length_inconsistent)
{
    char p[1024];
    uint32_t len;

    /* Tube length field says 10, 5 tube bytes present, body length right
     * for what is there. */
    len = build_job_payload(p, 10, 5, 3, 3);
    ck_assert_int_eq(decode_payload_bytes(p, len), BL_CORRUPT);
    /* Tube length field says 2, 5 present. */
    len = build_job_payload(p, 2, 5, 3, 3);
    ck_assert_int_eq(decode_payload_bytes(p, len), BL_CORRUPT);
    /* Body length field too large, too small. */
    len = build_job_payload(p, 5, 5, 4, 3);
    ck_assert_int_eq(decode_payload_bytes(p, len), BL_CORRUPT);
    len = build_job_payload(p, 5, 5, 2, 3);
    ck_assert_int_eq(decode_payload_bytes(p, len), BL_CORRUPT);
    len = build_job_payload(p, 5, 5, UINT32_MAX, 3);
    ck_assert_int_eq(decode_payload_bytes(p, len), BL_CORRUPT);
    len = build_job_payload(p, 5, 5, UINT32_MAX - 63 - 5 + 3 + 1, 3);
    ck_assert_int_eq(decode_payload_bytes(p, len), BL_CORRUPT);
}
END_TEST

/* The smallest J payload (63 bytes, no tube, no body) with a tube length
 * byte of 1..255: the body-length field would lie past the payload's end.
 * Must be BL_CORRUPT without reading beyond the 71 bytes given. */
/* ---- C: a fanout child registered or let go --------------------------- */

static BlRecord child_rec(const char *name, size_t len, int on)
{
    BlRecord r;

    memset(&r, 0, sizeof r);
    r.type = BL_CHILD;
    r.flags = on ? BL_CHILD_ON : 0;
    r.tube = name;
    r.tube_len = (uint8_t)len;
    return r;
}

/* Both flags, short and longest names: the same record back, and the
 * bytes doc/binlog.md gives (length, CRC, 'C', id 0, flags, name length,
 * name). Every shorter prefix is torn. */
START_TEST(child_round_trip_and_layout)
{
    char longest[200], buf[BL_CHILD_FIXED + 200];
    const char *names[] = {"P+a", longest};
    size_t lens[] = {3, sizeof longest};

    memset(longest, 'x', sizeof longest);
    longest[1] = '+';
    for (int on = 0; on <= 1; on++)
        for (size_t k = 0; k < 2; k++) {
            BlRecord r = child_rec(names[k], lens[k], on), d;
            size_t n = bl_record_size(&r);
            Guard g;
            ck_assert_uint_eq(n, BL_CHILD_FIXED + lens[k]);
            bl_encode(&r, buf);
            ck_assert_uint_eq(rd32(buf), 11 + lens[k]);
            ck_assert_uint_eq(rd32(buf + 4), crc32c(0, buf + 8, 11 + lens[k]));
            ck_assert_int_eq(buf[8], 'C');
            for (int i = 0; i < 8; i++)
                ck_assert_int_eq(buf[9 + i], 0);
            ck_assert_int_eq(buf[17], on);
            ck_assert_uint_eq((unsigned char)buf[18], lens[k]);
            ck_assert(memcmp(buf + 19, names[k], lens[k]) == 0);
            guard_init(&g, n);
            ck_assert_int_eq(bl_decode(guard_put(&g, buf, n), n, &d), (long)n);
            ck_assert_uint_eq(d.type, BL_CHILD);
            ck_assert_uint_eq(d.flags, (unsigned)on);
            ck_assert_uint_eq(d.tube_len, lens[k]);
            ck_assert(memcmp(d.tube, names[k], lens[k]) == 0);
            for (size_t cut = 1; cut < n; cut++)
                ck_assert_int_eq(bl_decode(guard_put(&g, buf, cut), cut, &d), BL_TORN);
            guard_free(&g);
        }
}
END_TEST

/* C records the server could never have written: other flags, an id, a
 * name that is no child's, lengths that do not add up. */
START_TEST(child_structure_rejected)
{
    char p[64];
    BlRecord r = child_rec("P+a", 3, 1);

    ck_assert_int_gt(encode_decode(&r), 0);
    for (int f = 2; f < 256; f++) {
        r.flags = (uint8_t)f;
        ck_assert_int_eq(encode_decode(&r), BL_CORRUPT);
    }
    r = child_rec("P+a", 3, 1);
    r.id = 1;
    ck_assert_int_eq(encode_decode(&r), BL_CORRUPT);
    r = child_rec("Pa", 2, 1); /* no '+' */
    ck_assert_int_eq(encode_decode(&r), BL_CORRUPT);
    r = child_rec("+a", 2, 1); /* no parent */
    ck_assert_int_eq(encode_decode(&r), BL_CORRUPT);
    r = child_rec("P+a b", 5, 0); /* not a tube name */
    ck_assert_int_eq(encode_decode(&r), BL_CORRUPT);
    r = child_rec("", 0, 0);
    ck_assert_int_eq(encode_decode(&r), BL_CORRUPT);
    /* By hand: the name length against the payload length. */
    memset(p, 0, sizeof p);
    p[0] = 'C';
    p[9] = 1;
    p[10] = 3;
    memcpy(p + 11, "P+a", 3);
    ck_assert_int_eq(decode_payload_bytes(p, 14), BL_REC_HEAD + 14);
    for (uint32_t len = 1; len < 40; len++)
        if (len != 14)
            ck_assert_msg(decode_payload_bytes(p, len) == BL_CORRUPT,
                          "C payload of %u bytes accepted", len);
}
END_TEST

START_TEST(structure_tube_length_past_payload)
{
    char p[128];

    for (int tl = 1; tl < 256; tl++) {
        uint32_t len = build_job_payload(p, (uint8_t)tl, 0, 0, 0);
        ck_assert_uint_eq(len, 63);
        ck_assert_msg(decode_payload_bytes(p, len) == BL_CORRUPT,
                      "tube length %d in a 63-byte payload accepted", tl);
    }
    /* Same with a few bytes of tube present, still too few. */
    for (int tl = 5; tl < 256; tl++) {
        uint32_t len = build_job_payload(p, (uint8_t)tl, 3, 0, 0);
        ck_assert_msg(decode_payload_bytes(p, len) == BL_CORRUPT,
                      "tube length %d with 3 tube bytes accepted", tl);
    }
}
END_TEST

/* Random garbage with a correct CRC: never a crash, never an overread,
 * and a record only when the structure checks out. */
START_TEST(random_payloads_with_valid_crc)
{
    char p[600];
    Rng rng;

    rng_seed(&rng, 2024);
    for (int i = 0; i < 20000; i++) {
        uint32_t len = (uint32_t)rng_below(&rng, sizeof p) + 1;
        long n;
        for (uint32_t k = 0; k < len; k++)
            p[k] = (char)rng_next(&rng);
        p[0] = "JSDX"[rng_below(&rng, 4)];
        if (p[0] == 'J' && len >= 63) {
            /* Often make the lengths nearly agree. */
            uint8_t tl = (uint8_t)rng_below(&rng, 256);
            p[58] = (char)tl;
            if (63u + tl <= len && rng_below(&rng, 2))
                le32(p + 59 + tl, len - 63 - tl);
        }
        n = decode_payload_bytes(p, len);
        ck_assert(n == BL_CORRUPT || n == (long)(BL_REC_HEAD + len));
        if (n > 0) {
            ck_assert(p[0] == 'J' || (p[0] == 'S' && len == 46) || (p[0] == 'D' && len == 9));
        }
    }
}
END_TEST

static Suite *blcodec_suite(void)
{
    Suite *s = suite_create("blcodec");
    TCase *rt = unit_tcase("round_trip");
    TCase *hd = unit_tcase("header");
    TCase *dm = unit_tcase("damage");

    tcase_add_test(rt, job_round_trip_edges);
    tcase_add_test(rt, job_round_trip_large_body);
    tcase_add_test(rt, state_round_trip_edges);
    tcase_add_test(rt, delete_round_trip_edges);
    tcase_add_test(rt, job_layout_matches_doc);
    tcase_add_test(rt, stream_of_records);
    tcase_add_test(rt, child_round_trip_and_layout);
    suite_add_tcase(s, rt);

    tcase_add_test(hd, header_valid);
    tcase_add_test(hd, header_all_zero);
    tcase_add_test(hd, header_any_change);
    tcase_add_test(hd, header_other_version);
    suite_add_tcase(s, hd);

    tcase_add_test(dm, job_bit_flips);
    tcase_add_test(dm, state_and_delete_bit_flips);
    tcase_add_test(dm, truncation_is_torn);
    tcase_add_test(dm, truncation_large_record);
    tcase_add_test(dm, zero_prefix_is_end);
    tcase_add_test(dm, length_beyond_buffer);
    tcase_add_test(dm, structure_good_payloads_accepted);
    tcase_add_test(dm, structure_id_limit);
    tcase_add_test(dm, structure_wrong_size_for_type);
    tcase_add_test(dm, structure_unknown_type);
    tcase_add_test(dm, structure_tube_length_inconsistent);
    tcase_add_test(dm, structure_illegal_values_rejected);
    tcase_add_test(dm, structure_tube_length_past_payload);
    tcase_add_test(dm, random_payloads_with_valid_crc);
    tcase_add_test(dm, child_structure_rejected);
    suite_add_tcase(s, dm);
    return s;
}

UNIT_MAIN(blcodec_suite)
