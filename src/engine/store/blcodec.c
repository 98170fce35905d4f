#include "blcodec.h"

#include <string.h>

#include "crc32c.h"
#include "names.h"

/* Largest payload we will believe: a 1 GiB body plus the fixed part. */
#define BL_MAX_PAYLOAD ((uint32_t)1073741824u + 512u)

static void put16(char *p, uint16_t v) { p[0] = (char)v; p[1] = (char)(v >> 8); }
static void put32(char *p, uint32_t v) { put16(p, (uint16_t)v); put16(p + 2, (uint16_t)(v >> 16)); }
static void put64(char *p, uint64_t v) { put32(p, (uint32_t)v); put32(p + 4, (uint32_t)(v >> 32)); }

static uint32_t get32(const char *p)
{
    const unsigned char *u = (const unsigned char *)p;

    return (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 |
           (uint32_t)u[3] << 24;
}

static uint64_t get64(const char *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

size_t bl_record_size(const BlRecord *r)
{
    switch (r->type) {
    case BL_JOB: return BL_JOB_FIXED + r->tube_len + (size_t)r->body_size;
    case BL_JOBX: return BL_JOB_FIXED + BL_JOBX_EXTRA + r->tube_len + (size_t)r->body_size;
    case BL_STATE: return BL_STATE_SIZE;
    case BL_FLUSH: return BL_FLUSH_FIXED + r->tube_len + (size_t)r->nkeep * 8;
    case BL_POS: return BL_POS_SIZE;
    case BL_SNAP_END: return BL_SNAP_END_SIZE;
    case BL_CHILD: return BL_CHILD_FIXED + r->tube_len;
    default: return BL_DELETE_SIZE;
    }
}

static char *put_counters(char *p, const BlRecord *r)
{
    put32(p, r->reserves);
    put32(p + 4, r->timeouts);
    put32(p + 8, r->releases);
    put32(p + 12, r->buries);
    put32(p + 16, r->kicks);
    return p + 20;
}

static const char *get_counters(const char *p, BlRecord *r)
{
    r->reserves = get32(p);
    r->timeouts = get32(p + 4);
    r->releases = get32(p + 8);
    r->buries = get32(p + 12);
    r->kicks = get32(p + 16);
    return p + 20;
}

void bl_encode(const BlRecord *r, char *out)
{
    size_t total = bl_record_size(r);
    char *p = out + BL_REC_HEAD;

    *p++ = (char)r->type;
    put64(p, r->id);
    p += 8;
    if (r->type == BL_JOB || r->type == BL_JOBX) {
        put32(p, r->pri);
        put32(p + 4, r->delay);
        put32(p + 8, r->ttr);
        p[12] = (char)r->state;
        put64(p + 13, (uint64_t)r->deadline_wall);
        put64(p + 21, (uint64_t)r->created_wall);
        p += 29;
        if (r->type == BL_JOBX) {
            put64(p, (uint64_t)r->entered_wall);
            put64(p + 8, (uint64_t)r->exptime_wall);
            p += BL_JOBX_EXTRA;
        }
        p = put_counters(p, r);
        *p++ = (char)r->tube_len;
        memcpy(p, r->tube, r->tube_len);
        p += r->tube_len;
        put32(p, r->body_size);
        memcpy(p + 4, r->body, r->body_size);
    } else if (r->type == BL_FLUSH) {
        *p++ = (char)r->tube_len;
        memcpy(p, r->tube, r->tube_len);
        p += r->tube_len;
        put32(p, r->nkeep);
        memcpy(p + 4, r->keep, (size_t)r->nkeep * 8);
    } else if (r->type == BL_POS) {
        put64(p, r->pos);
        p[8] = (char)r->flags;
        put64(p + 9, r->epoch_start);
    } else if (r->type == BL_SNAP_END) {
        put64(p, r->pos);
    } else if (r->type == BL_CHILD) {
        p[0] = (char)r->flags;
        p[1] = (char)r->tube_len;
        memcpy(p + 2, r->tube, r->tube_len);
    } else if (r->type == BL_STATE) {
        put32(p, r->pri);
        put32(p + 4, r->delay);
        p[8] = (char)r->state;
        put64(p + 9, (uint64_t)r->deadline_wall);
        put_counters(p + 17, r);
    }
    put32(out, (uint32_t)(total - BL_REC_HEAD));
    put32(out + 4, crc32c(0, out + BL_REC_HEAD, total - BL_REC_HEAD));
}

void bl_encode_header(char out[BL_HEADER_SIZE])
{
    memcpy(out, BL_MAGIC, 8);
    put32(out + 8, BL_VERSION);
    put32(out + 12, crc32c(0, out, 12));
}

int bl_check_header(const char *p, size_t n)
{
    size_t m = n < BL_HEADER_SIZE ? n : BL_HEADER_SIZE, i;

    for (i = 0; i < m && p[i] == 0; i++)
        ;
    if (i == m)
        return 1;
    if (n < BL_HEADER_SIZE || memcmp(p, BL_MAGIC, 8) != 0 ||
        get32(p + 8) < BL_VERSION_MIN || get32(p + 8) > BL_VERSION ||
        get32(p + 12) != crc32c(0, p, 12))
        return -1;
    return 0;
}

uint32_t bl_header_newer(const char *p, size_t n)
{
    if (n < BL_HEADER_SIZE || memcmp(p, BL_MAGIC, 8) != 0 || get32(p + 8) <= BL_VERSION ||
        get32(p + 12) != crc32c(0, p, 12))
        return 0;
    return get32(p + 8);
}

/* Logged states: ready (0), delayed (2), buried (3); never reserved. */
static int state_valid(uint8_t st)
{
    return st == 0 || st == 2 || st == 3;
}

/* A fanout child's name: a valid tube name "PARENT+NAME" (the parent
 * not empty), as policy.c registers them. */
static int child_name_valid(const char *name, uint8_t len)
{
    const char *plus = memchr(name, '+', len);

    return tube_name_valid(name, len) && plus && plus > name;
}

static int decode_payload(const char *p, uint32_t len, BlRecord *r)
{
    memset(r, 0, sizeof *r);
    r->type = (uint8_t)p[0];
    if (len < 9)
        return -1;
    r->id = get64(p + 1);
    p += 9;
    if (r->id >= BL_ID_LIMIT && r->type != BL_POS) /* (P's id is its epoch) */
        return -1;
    switch (r->type) {
    case BL_DELETE:
        return len == 9 ? 0 : -1;
    case BL_POS:
        if (len != BL_POS_SIZE - BL_REC_HEAD)
            return -1;
        r->pos = get64(p);
        r->flags = (uint8_t)p[8];
        r->epoch_start = get64(p + 9);
        return r->flags <= (BL_POS_FOLLOWER | BL_POS_UNHEARD) ? 0 : -1;
    case BL_SNAP_END:
        if (len != BL_SNAP_END_SIZE - BL_REC_HEAD)
            return -1;
        r->pos = get64(p);
        return 0;
    case BL_CHILD:
        if (len < (uint32_t)(BL_CHILD_FIXED - BL_REC_HEAD))
            return -1;
        r->flags = (uint8_t)p[0];
        r->tube_len = (uint8_t)p[1];
        r->tube = p + 2;
        if ((size_t)len != (size_t)(BL_CHILD_FIXED - BL_REC_HEAD) + r->tube_len)
            return -1;
        return r->flags <= BL_CHILD_ON && r->id == 0 && child_name_valid(r->tube, r->tube_len)
               ? 0 : -1;
    case BL_STATE:
        if (len != BL_STATE_SIZE - BL_REC_HEAD)
            return -1;
        r->pri = get32(p);
        r->delay = get32(p + 4);
        r->state = (uint8_t)p[8];
        r->deadline_wall = (int64_t)get64(p + 9);
        get_counters(p + 17, r);
        return state_valid(r->state) ? 0 : -1;
    case BL_FLUSH: {
        size_t fixed = BL_FLUSH_FIXED - BL_REC_HEAD;
        if (len < fixed)
            return -1;
        r->tube_len = (uint8_t)*p++;
        r->tube = p;
        if ((size_t)len < fixed + r->tube_len)
            return -1;
        r->nkeep = get32(p + r->tube_len);
        r->keep = p + r->tube_len + 4;
        if ((size_t)len != fixed + r->tube_len + (size_t)r->nkeep * 8)
            return -1;
        return tube_name_valid(r->tube, r->tube_len) ? 0 : -1;
    }
    case BL_JOB:
    case BL_JOBX: {
        size_t fixed = BL_JOB_FIXED - BL_REC_HEAD + (r->type == BL_JOBX ? BL_JOBX_EXTRA : 0);
        if (len < fixed)
            return -1;
        r->pri = get32(p);
        r->delay = get32(p + 4);
        r->ttr = get32(p + 8);
        r->state = (uint8_t)p[12];
        r->deadline_wall = (int64_t)get64(p + 13);
        r->created_wall = (int64_t)get64(p + 21);
        p += 29;
        if (r->type == BL_JOBX) {
            r->entered_wall = (int64_t)get64(p);
            r->exptime_wall = (int64_t)get64(p + 8);
            p += BL_JOBX_EXTRA;
        }
        p = get_counters(p, r);
        r->tube_len = (uint8_t)*p++;
        r->tube = p;
        if ((size_t)len < fixed + r->tube_len)
            return -1; /* the tube name would run past the payload */
        if ((size_t)len != fixed + r->tube_len + (size_t)get32(p + r->tube_len))
            return -1;
        r->body_size = get32(p + r->tube_len);
        r->body = p + r->tube_len + 4;
        /* A record the server could never have written is damage. */
        if (!tube_name_valid(r->tube, r->tube_len) || !state_valid(r->state))
            return -1;
        return 0;
    }
    }
    return -1;
}

long bl_decode(const char *p, size_t n, BlRecord *r)
{
    uint32_t len;

    if (n < 4) {
        for (size_t i = 0; i < n; i++)
            if (p[i])
                return BL_TORN;
        return BL_END;
    }
    len = get32(p);
    if (len == 0)
        return BL_END;
    if (len > BL_MAX_PAYLOAD)
        return BL_CORRUPT;
    if (n < BL_REC_HEAD || n - BL_REC_HEAD < len)
        return BL_TORN;
    if (get32(p + 4) != crc32c(0, p + BL_REC_HEAD, len))
        return BL_CORRUPT;
    if (decode_payload(p + BL_REC_HEAD, len, r) < 0)
        return BL_CORRUPT;
    return (long)(BL_REC_HEAD + len);
}

uint64_t bl_flush_keep(const BlRecord *r, uint32_t i)
{
    return get64(r->keep + (size_t)i * 8);
}
