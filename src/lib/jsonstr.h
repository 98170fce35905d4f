/*
 * jsonstr.h — one JSON string writer, for every JSON tubed writes: the
 * server's /tubes.json and tubed-cli's --json.
 *
 * Contract: pure. json_string() appends s (n bytes, any bytes) to b as a
 * JSON string with its quotes: '"' and '\' escaped, control bytes as \b
 * \f \n \r \t or \u00XX, DEL as \u007f; UTF-8 passes as it is, and each
 * byte that is not part of a well-formed UTF-8 sequence (utf8.h) becomes
 * \ufffd, so the text is valid UTF-8 whatever the bytes (names, paths
 * and addresses come from the command line and from other servers).
 * b->oom on allocation failure, as every Buf append.
 */
#ifndef TUBED_JSONSTR_H
#define TUBED_JSONSTR_H

#include <stddef.h>

#include "buf.h"

void json_string(Buf *b, const char *s, size_t n);

#endif
