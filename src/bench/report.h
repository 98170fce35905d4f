/*
 * report.h - describing a run and printing its results.
 *
 * Contract: read-only over Bench.  report_banner() says what is about
 * to run; report_result() prints the measured phase, either as a short
 * human-readable block or (with --csv) as a header line plus exactly one
 * data line, which scripts read by column name.  Latencies are op latencies
 * (see workload.h); the human block adds one line per request kind.
 */
#ifndef TUBED_BENCH_REPORT_H
#define TUBED_BENCH_REPORT_H
#include <stdio.h>

#include "bench.h"

void report_banner(const Bench *b, FILE *f);
void report_result(const Bench *b, FILE *f);

#endif
