/*
 * tubesjson.h — GET /tubes.json: {"server": {...}, "tubes": {"<name>":
 * {...}, ...}}, what the status page reads (doc/monitoring.md).
 *
 * Contract: tubes_json() appends one JSON object to b (b->oom on failure).
 * "server" has every key of beanstalk `stats`, in its order, names
 * unchanged; "tubes" has every tube in name order with every key of its
 * `stats-tubes` entry, in that order. The values are taken from the very
 * documents `stats` and `stats-tubes` answer (stats.h), so the two can
 * never disagree: a YAML scalar becomes a JSON number when it is one,
 * true/false become booleans, and the rest (version, id, hostname, os,
 * platform, name, and anything quoted) strings, escaped by json_string().
 * Changes nothing: the caller expires due jobs first.
 */
#ifndef TUBED_TUBESJSON_H
#define TUBED_TUBESJSON_H

#include <stddef.h>

#include "bs.h"
#include "buf.h"

/* l: only the tubes listener l may touch (NULL: every tube). */
void tubes_json(const Beanstalk *f, const Listener *l, Buf *b);

/* s (n bytes, any bytes) as a JSON string with its quotes: '"' and '\'
 * escaped, control bytes as \b \f \n \r \t or \u00XX, DEL as \u007f; bytes
 * >= 0x80 are passed as they are (the caller's text is UTF-8). */
void json_string(Buf *b, const char *s, size_t n);

/* 1 if [s, s+n) is a JSON number (RFC 8259 §6): -?(0|[1-9][0-9]*)
 * (\.[0-9]+)?([eE][+-]?[0-9]+)? */
int json_is_number(const char *s, size_t n);

/* A YAML document "---\nkey: value\n..." (as stats.h writes one, with
 * values plain or double-quoted) as the members of a JSON object, without
 * the braces. indent: the spaces before each key (0 or 2). Stops at the
 * first line not so indented and returns the bytes used. */
size_t yaml_members_json(Buf *b, const char *y, size_t n, size_t indent);

#endif
