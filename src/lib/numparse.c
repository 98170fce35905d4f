#include "numparse.h"

#include <string.h>

int parse_u64(const char *s, size_t len, uint64_t *out)
{
    uint64_t v = 0;

    if (len == 0)
        return -1;
    for (size_t i = 0; i < len; i++) {
        unsigned d = (unsigned char)s[i] - '0';
        if (d > 9)
            return -1;
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

int parse_u32(const char *s, size_t len, uint32_t *out)
{
    uint64_t v;

    if (parse_u64(s, len, &v) < 0 || v > UINT32_MAX)
        return -1;
    *out = (uint32_t)v;
    return 0;
}

int parse_u64_str(const char *s, uint64_t *out)
{
    return parse_u64(s, strlen(s), out);
}

size_t fmt_u64(char *dst, uint64_t v)
{
    char tmp[FMT_U64_MAX];
    size_t n = 0;

    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        dst[i] = tmp[n - 1 - i];
    return n;
}
