/*
 * run.h - the event loop that drives a benchmark run.
 *
 * Contract: bench_run() connects every connection, then runs the phases
 * (setup, prefill, measure) one after another on a single epoll loop, in
 * one thread.  It returns 0 when the run ended normally or was interrupted
 * by SIGINT (b->interrupted), and -1 with b->failure set when it cannot go
 * on: connection refused or lost, malformed reply, the server sending
 * nothing for --stall seconds while requests are outstanding, or --timeout
 * reached.  It never waits more than 100 ms without checking those limits,
 * so it cannot hang.
 */
#ifndef TUBED_BENCH_RUN_H
#define TUBED_BENCH_RUN_H
#include "bench.h"

int bench_run(Bench *b);

#endif
