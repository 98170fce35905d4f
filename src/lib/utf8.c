#include "utf8.h"

size_t utf8_seq(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t len;
    unsigned cp;

    if (u[0] < 0x80)
        return 1;
    if (u[0] >= 0xc2 && u[0] <= 0xdf)
        len = 2, cp = u[0] & 0x1f;
    else if (u[0] >= 0xe0 && u[0] <= 0xef)
        len = 3, cp = u[0] & 0x0f;
    else if (u[0] >= 0xf0 && u[0] <= 0xf4)
        len = 4, cp = u[0] & 0x07;
    else
        return 0; /* a continuation byte, C0/C1 (overlong) or F5-FF */
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((u[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (u[i] & 0x3f);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return len;
}

int utf8_valid(const char *s, size_t n)
{
    for (size_t i = 0, k; i < n; i += k)
        if (!(k = utf8_seq(s + i, n - i)))
            return 0;
    return 1;
}
