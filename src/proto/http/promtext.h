/*
 * promtext.h — writers for the Prometheus text exposition format, version
 * 0.0.4 (what GET /metrics answers; doc/monitoring.md lists the metrics).
 *
 * Contract: every function appends whole lines ending in '\n' to a Buf and
 * reports failure only through b->oom (buf.h), so a whole scrape is checked
 * once at the end. Nothing is validated at run time: metric and label
 * names are the caller's constants and must match prom_name_valid() /
 * prom_label_name_valid() (the unit tests check tubed's names). What varies
 * is escaped as the format requires:
 *  - HELP text: '\' -> "\\" and newline -> "\n" (nothing else);
 *  - label values: '\' -> "\\", '"' -> "\"", newline -> "\n"; any other
 *    byte, UTF-8 included, is written as is.
 * Values are written so that Prometheus (Go's strconv.ParseFloat) reads
 * back exactly the number given: integers in decimal, doubles in the
 * shortest "%.{15,16,17}g" form that round-trips ("0.1", "1e+21", "-0"),
 * and "NaN", "+Inf", "-Inf" for the special values.
 *
 * The format wants all samples of one family in one group right after its
 * HELP and TYPE lines: write the family, then every one of its samples,
 * then the next family.
 */
#ifndef TUBED_PROMTEXT_H
#define TUBED_PROMTEXT_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

/* The Content-Type of a /metrics reply. */
#define PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

typedef enum PromType {
    PROM_COUNTER,
    PROM_GAUGE,
    PROM_UNTYPED,
    PROM_HISTOGRAM,
    PROM_SUMMARY,
} PromType;

/* One label: value is value_len bytes (it need not be NUL-terminated). */
typedef struct PromLabel {
    const char *name;
    const char *value;
    size_t value_len;
} PromLabel;

/* A label with a NUL-terminated value. */
PromLabel prom_label(const char *name, const char *value);

/* "# HELP name help\n# TYPE name type\n". */
void prom_family(Buf *b, const char *name, PromType type, const char *help);

/* "name{l1="v1",l2="v2"} value\n"; with nlabels 0, "name value\n". */
void prom_sample_u64(Buf *b, const char *name, const PromLabel *labels, size_t nlabels,
                     uint64_t v);
void prom_sample_i64(Buf *b, const char *name, const PromLabel *labels, size_t nlabels,
                     int64_t v);
void prom_sample_f64(Buf *b, const char *name, const PromLabel *labels, size_t nlabels,
                     double v);

/* The value alone, as the samples write it (for tests and other writers);
 * dst holds PROM_F64_MAX bytes, no NUL is added; returns the length. */
#define PROM_F64_MAX 32
size_t prom_fmt_f64(char *dst, double v);

/* [a-zA-Z_:][a-zA-Z0-9_:]* and [a-zA-Z_][a-zA-Z0-9_]* not starting "__". */
int prom_name_valid(const char *name);
int prom_label_name_valid(const char *name);

#endif
