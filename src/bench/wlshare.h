/*
 * wlshare.h - what the beanstalk workloads (workload.c) share with the
 * memcache ones (mcwork.c): request bookkeeping, tube names and the reply
 * checks that count unexpected replies and ended ops.
 *
 * Contract: internal to those two files; run.c and report.c see only
 * workload.h.  Every function here works as in workload.c's comments.
 */
#ifndef TUBED_BENCH_WLSHARE_H
#define TUBED_BENCH_WLSHARE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench.h"
#include "proto.h"

/* Pending-request flags. */
#define PF_COUNTED 1u   /* the chain is one op of the phase */
#define PF_ROUNDTRIP 2u /* after INSERTED, the chain goes on to reserve + delete */
#define PF_FAILED 4u    /* an earlier request of this chain failed (memcache
			   open + close: the close still gets its reply) */

/* Queue a request record on c (the caller appends the request's bytes). */
void wl_push(Conn *c, Cmd kind, uint32_t aux, unsigned flags,
	     uint64_t t_chain, uint64_t now);
/* The name of tube (memcache: queue) k of this run: bench.<pid>.<k>. */
void wl_tube_name(const Bench *b, unsigned k, char *out, size_t n);
/* The tube the connection's next put (set) goes to; rotates over its share. */
unsigned wl_put_tube(const Bench *b, Conn *c);
/* ok, or count (and show the first few of) an unexpected reply; returns ok. */
bool wl_expect(Bench *b, const Conn *c, const Pending *p,
	       const Reply *r, bool ok);
/* The op p belongs to is over: done or failed, with its latency. */
void wl_chain_end(Bench *b, Conn *c, const Pending *p,
		  bool ok, uint64_t now);
/* The reply's body is the one every job is put with. */
bool wl_body_ok(const Bench *b, const Reply *r);

#endif
