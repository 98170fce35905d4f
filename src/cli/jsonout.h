/*
 * jsonout.h — JSON for scripts: strings, typed scalars, whole documents.
 *
 * Contract: everything written is valid JSON (RFC 8259). Strings are
 * escaped by json_string() (jsonstr.h, the server's writer too): bytes
 * that are not valid UTF-8 become U+FFFD, so output is always valid
 * UTF-8. A YAML value becomes a number when it is bare and
 * reads as a decimal number (digits, optionally a fraction), a boolean
 * when bare true/false, and a string otherwise, and always a string when
 * it was quoted or its key is in `string_keys` (a NULL-terminated list:
 * "version: 1.12" from beanstalkd is a version, not a number). A body that
 * is not valid UTF-8 goes out as base64 under a "-base64" key instead.
 */
#ifndef TUBED_CLI_JSONOUT_H
#define TUBED_CLI_JSONOUT_H

#include <stddef.h>

#include "buf.h"
#include "jsonstr.h" /* json_string() */
#include "utf8.h" /* utf8_valid(), which cmd_jobs.c uses too */
#include "yamlish.h"

void json_cstr(Buf *b, const char *s);
/* One YAML value with the typing rule above. */
void json_scalar(Buf *b, const Pair *p, const char *const *string_keys);
/* A Dict as one JSON object, keys in document order. */
void json_dict(Buf *b, const Dict *d, const char *const *string_keys);
/* "key": "text", or "key-base64": "..." when the bytes are not UTF-8. */
void json_bytes_member(Buf *b, const char *key, const char *s, size_t n);

#endif
