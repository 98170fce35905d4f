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
 * [s, s+n) is such sequences (the empty text is).
 */
#ifndef TUBED_UTF8_H
#define TUBED_UTF8_H

#include <stddef.h>

size_t utf8_seq(const char *s, size_t n);
int utf8_valid(const char *s, size_t n);

#endif
