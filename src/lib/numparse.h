/*
 * numparse.h — the one strict number parser for protocol arguments and flags.
 *
 * Contract: a number is one or more ASCII decimal digits and nothing else:
 * no sign, no space, no trailing junk, no value above the type's maximum.
 * Each function reads exactly [s, s+len) and returns 0 on success, -1 on
 * any violation, leaving *out untouched then.
 *
 * fmt_u64() is the other direction, for the replies on the hot path
 * (INSERTED, RESERVED), where printf's format parsing showed in profiles.
 */
#ifndef TUBED_NUMPARSE_H
#define TUBED_NUMPARSE_H

#include <stddef.h>
#include <stdint.h>

int parse_u64(const char *s, size_t len, uint64_t *out);
int parse_u32(const char *s, size_t len, uint32_t *out);
/* NUL-terminated convenience for command-line flags. */
int parse_u64_str(const char *s, uint64_t *out);

#define FMT_U64_MAX 20
/* Write v in decimal at dst (no NUL); returns the number of digits. */
size_t fmt_u64(char *dst, uint64_t v);

#endif
