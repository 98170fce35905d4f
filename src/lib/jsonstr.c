/* jsonstr.c — the JSON string writer; see jsonstr.h. */
#include "jsonstr.h"

#include <string.h>

#include "utf8.h"

/* The escape of an ASCII byte JSON does not take as it is. */
static void put_escape(Buf *b, unsigned char c)
{
    static const char hex[] = "0123456789abcdef";
    char esc[6] = {'\\'};
    size_t elen = 2;

    switch (c) {
    case '"': esc[1] = '"'; break;
    case '\\': esc[1] = '\\'; break;
    case '\b': esc[1] = 'b'; break;
    case '\f': esc[1] = 'f'; break;
    case '\n': esc[1] = 'n'; break;
    case '\r': esc[1] = 'r'; break;
    case '\t': esc[1] = 't'; break;
    default:
        memcpy(esc + 1, "u00", 3);
        esc[4] = hex[c >> 4];
        esc[5] = hex[c & 15];
        elen = 6;
    }
    buf_append(b, esc, elen);
}

void json_string(Buf *b, const char *s, size_t n)
{
    size_t run = 0, k;

    buf_append(b, "\"", 1);
    for (size_t i = 0; i < n; i += k) {
        unsigned char c = (unsigned char)s[i];

        k = c < 0x80 ? 1 : utf8_seq(s + i, n - i);
        if (k > 1 || (k == 1 && c >= 0x20 && c != '"' && c != '\\' && c != 0x7f))
            continue; /* UTF-8, or ASCII that needs nothing: runs are copied whole */
        buf_append(b, s + run, i - run);
        if (k == 0) {
            /* not UTF-8 (a Latin-1 path in a replica's primary, say): one
             * U+FFFD per byte, as a browser's decoder would show it */
            buf_append(b, "\\ufffd", 6);
            k = 1;
        } else {
            put_escape(b, c);
        }
        run = i + 1;
    }
    buf_append(b, s + run, n - run);
    buf_append(b, "\"", 1);
}
