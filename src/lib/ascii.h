/*
 * ascii.h — text from outside (a config value, a user name, what a peer
 * said) made fit for a one-line message: a log line, an error, a
 * last-error stat.
 *
 * Contract: pure. Each byte outside printable ASCII (0x20-0x7e) becomes
 * '?': a control, DEL, and every byte >= 0x80, so no escape sequence
 * reaches an operator's terminal and the result is UTF-8 without a
 * control, whatever the bytes. The result is NUL-terminated in out,
 * which holds cap bytes; both functions return out.
 *
 *   ascii_text()      the first min(n, cap - 1) bytes of s, cut silently;
 *                     cap >= 1.
 *   ascii_text_cut()  s whole when n <= cap - 4, else its first cap - 4
 *                     bytes followed by "..." (a cut is seen); cap >= 4.
 *
 * For text meant to stay readable in any script (YAML scalars, JSON,
 * tubed-cli's screen) see utf8.h and jsonstr.h instead.
 */
#ifndef TUBED_ASCII_H
#define TUBED_ASCII_H

#include <stddef.h>

const char *ascii_text(char *out, size_t cap, const char *s, size_t n);
const char *ascii_text_cut(char *out, size_t cap, const char *s, size_t n);

#endif
