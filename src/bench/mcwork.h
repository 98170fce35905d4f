/*
 * mcwork.h - the memcache workloads: mc-set, mc-get and mc-open-close.
 *
 * Contract: workload.c keeps the phases, the op counts and the pipeline
 * depth for every protocol; for --protocol memcache it hands the request
 * chain of each op it starts to mcwork_start() and every framed reply (see
 * mcproto.h) to mcwork_reply().  There is no setup phase.  The prefill (a
 * set per item) and the drains take the queues in turn over the whole
 * phase, queue (op number mod -t), so that a drain of at most the items
 * the prefill stored never asks a queue for more than it holds: on a
 * kestrel server an empty answer (END) is always unexpected.
 */
#ifndef TUBED_BENCH_MCWORK_H
#define TUBED_BENCH_MCWORK_H
#include <stdint.h>

#include "bench.h"
#include "proto.h"

/* Encode what follows the key of every set into b->put_req. */
void mcwork_init(Bench *b);
/* Send the requests of one op (already counted in b->started). */
void mcwork_start(Bench *b, Conn *c, Role role, uint64_t now);
/* Check the reply to p (already taken off c's ring) and advance its op. */
void mcwork_reply(Bench *b, Conn *c, const Pending *p,
		  const Reply *r, uint64_t now);

#endif
