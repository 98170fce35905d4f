#include "crc32c.h"

#include <string.h>

#define POLY 0x82f63b78u /* reflected Castagnoli polynomial */

static uint32_t table[8][256];

/* Filled before main() (and before any thread can call in): no flag to
 * test on every call, no race between two first callers. */
__attribute__((constructor)) static void make_table(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
        table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
}

/* Slicing-by-8: eight table look-ups per 8 bytes. */
static uint32_t crc_soft(uint32_t c, const unsigned char *p, size_t n)
{
    while (n >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
        lo ^= c;
        c = table[7][lo & 0xff] ^ table[6][(lo >> 8) & 0xff] ^
            table[5][(lo >> 16) & 0xff] ^ table[4][lo >> 24] ^
            table[3][hi & 0xff] ^ table[2][(hi >> 8) & 0xff] ^
            table[1][(hi >> 16) & 0xff] ^ table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = (c >> 8) ^ table[0][(c ^ *p++) & 0xff];
    return c;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
__attribute__((target("sse4.2")))
static uint32_t crc_hw(uint32_t c, const unsigned char *p, size_t n)
{
    uint64_t c64 = c;

    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c64 = __builtin_ia32_crc32di(c64, v);
        p += 8;
        n -= 8;
    }
    c = (uint32_t)c64;
    while (n--)
        c = __builtin_ia32_crc32qi(c, *p++);
    return c;
}

static int hw;

__attribute__((constructor)) static void detect_hw(void)
{
    __builtin_cpu_init();
    hw = __builtin_cpu_supports("sse4.2");
}

static int have_hw(void)
{
    return hw;
}
#else
static uint32_t crc_hw(uint32_t c, const unsigned char *p, size_t n)
{
    return crc_soft(c, p, n);
}

static int have_hw(void)
{
    return 0;
}
#endif

uint32_t crc32c(uint32_t crc, const void *p, size_t n)
{
    uint32_t c = ~crc;

    c = have_hw() ? crc_hw(c, p, n) : crc_soft(c, p, n);
    return ~c;
}

uint32_t crc32c_portable(uint32_t crc, const void *p, size_t n)
{
    return ~crc_soft(~crc, p, n);
}
