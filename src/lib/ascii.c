#include "ascii.h"

#include <string.h>

static size_t copy(char *out, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        out[i] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    return n;
}

const char *ascii_text(char *out, size_t cap, const char *s, size_t n)
{
    out[copy(out, s, n < cap - 1 ? n : cap - 1)] = '\0';
    return out;
}

const char *ascii_text_cut(char *out, size_t cap, const char *s, size_t n)
{
    size_t max = cap - 4, i = copy(out, s, n <= max ? n : max);

    if (i < n) {
        memcpy(out + i, "...", 3);
        i += 3;
    }
    out[i] = '\0';
    return out;
}
