#ifndef TUBED_BENCH_WORKLOAD_H
#define TUBED_BENCH_WORKLOAD_H
/*
 * workload.h - what each connection sends, and how replies advance it.
 *
 * Contract: an op is a short chain of requests (put; reserve then delete;
 * put then reserve then delete), started by workload_fill() while the
 * connection has fewer than the pipeline depth in flight and the phase has
 * ops left, and advanced by workload_reply() once per framed reply, in
 * order.  The workload appends requests to conn->out (the run loop flushes
 * them), keeps the op counters and latency histograms in struct bench, and
 * counts every reply that is not exactly what the request calls for in
 * b->errors (the first few are printed on stderr).  It never touches
 * sockets.  With --protocol memcache the chains and the checks are
 * mcwork.c's (set; get; get q/open with get q/close); phases, counts and
 * pipeline depth stay here.
 */
#include <stdbool.h>
#include <stdint.h>

#include "bench.h"
#include "proto.h"

/* Allocate the connections with their roles and the request templates. */
void workload_init(struct bench *b);
void workload_free(struct bench *b);

bool workload_has_phase(const struct bench *b, enum phase ph);
void workload_begin(struct bench *b, enum phase ph, uint64_t now);
void workload_fill(struct bench *b, struct conn *c, uint64_t now);
void workload_reply(struct bench *b, struct conn *c, const struct reply *r, uint64_t now);
/* The phase has nothing left in flight that it waits for. */
bool workload_done(const struct bench *b);

const char *cmd_name(enum cmd k);
const char *phase_name(enum phase ph);

#endif
