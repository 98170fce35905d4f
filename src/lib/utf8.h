/*
 * utf8.h — is this text UTF-8? For the JSON writers (the server's
 * /tubes.json and tubed-cli's --json), which must never emit bytes that
 * are not: RFC 8259 text is UTF-8, and a strict reader (Python's
 * json.loads on bytes, jq) refuses the whole document for one stray byte.
 *
 * Contract: pure. utf8_seq() is the length (1-4) of the one well-formed
 * UTF-8 sequence that starts at s, read from at most n >= 1 bytes, or 0 when
 * none does there: no overlong forms, no surrogates, nothing past
 * U+10FFFF, no sequence cut by n. utf8_valid() is 1 when all of
 * [s, s+n) is such sequences (the empty text is). utf8_c1() tells the
 * writers of text for a terminal (tubed-cli) which of those sequences are
 * still controls.
 */
#ifndef TUBED_UTF8_H
#define TUBED_UTF8_H

#include <stddef.h>

size_t utf8_seq(const char *s, size_t n);
int utf8_valid(const char *s, size_t n);
/* Is the k-byte sequence at s (as utf8_seq() measured it) one of the C1
 * controls written in UTF-8, U+0080-U+009F? Well-formed, yet some
 * terminals obey them (U+009B is CSI): never text for a screen. */
static inline int utf8_c1(const char *s, size_t k)
{
    return k == 2 && (unsigned char)s[0] == 0xc2 && (unsigned char)s[1] < 0xa0;
}

#endif
