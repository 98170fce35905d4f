/*
 * workload.h - what each connection sends, and how replies advance it.
 *
 * Contract: an op is a short chain of requests (put; reserve then delete;
 * put then reserve then delete), started by workload_fill() while the
 * connection has fewer than the pipeline depth in flight and the phase has
 * ops left, and advanced by workload_reply() once per framed reply, in
 * order.  The workload appends requests to conn->out (the run loop flushes
 * them), keeps the op counters and latency histograms in Bench, and
 * counts every reply that is not exactly what the request calls for in
 * b->errors (the first few are printed on stderr).  It never touches
 * sockets.  With --protocol memcache the chains and the checks are
 * mcwork.c's (set; get; get q/open with get q/close); phases, counts and
 * pipeline depth stay here.
 */
#ifndef TUBED_BENCH_WORKLOAD_H
#define TUBED_BENCH_WORKLOAD_H
#include <stdbool.h>
#include <stdint.h>

#include "bench.h"
#include "proto.h"

/* Allocate the connections with their roles and the request templates. */
void workload_init(Bench *b);
void workload_free(Bench *b);

bool workload_has_phase(const Bench *b, Phase ph);
void workload_begin(Bench *b, Phase ph, uint64_t now);
void workload_fill(Bench *b, Conn *c, uint64_t now);
void workload_reply(Bench *b, Conn *c, const Reply *r, uint64_t now);
/* The phase has nothing left in flight that it waits for. */
bool workload_done(const Bench *b);

const char *cmd_name(Cmd k);
const char *phase_name(Phase ph);

#endif
