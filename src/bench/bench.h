/*
 * bench.h - the state of one benchmark run, shared by the run loop (run.c),
 * the workloads (workload.c) and the report (report.c).
 *
 * Contract: one Bench per process, passed explicitly (no globals).
 * A run goes through phases: SETUP (use/watch/ignore), PREFILL (puts before a
 * drain, not measured) and MEASURE.  Op counters are per phase; errors and
 * the failure message span the whole run.  Times are CLOCK_MONOTONIC
 * nanoseconds, so a wall-clock step never distorts a measurement.
 */
#ifndef TUBED_BENCH_BENCH_H
#define TUBED_BENCH_BENCH_H
#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "conn.h"
#include "hist.h"
#include "opts.h"

typedef enum Cmd {
	CMD_USE,
	CMD_WATCH,
	CMD_IGNORE,
	CMD_PUT,
	CMD_RESERVE,
	CMD_RESERVE_NOW, /* reserve-with-timeout 0 */
	CMD_DELETE,
	CMD_MC_SET,   /* memcache: set <queue> 0 0 <size> */
	CMD_MC_GET,   /* memcache: get <queue> */
	CMD_MC_OPEN,  /* memcache: get <queue>/open */
	CMD_MC_CLOSE, /* memcache: get <queue>/close */
	CMD__COUNT,
} Cmd;

typedef enum Phase { PHASE_SETUP, PHASE_PREFILL, PHASE_MEASURE } Phase;

typedef struct Bench Bench;
struct Bench {
	const BenchOpts *o;
	Conn *conns;
	unsigned nconns; /* working connections first, then idle ones */
	unsigned nwork;
	unsigned nprod;  /* connections that put in the measured phase */
	unsigned run_id; /* in tube names, so runs never share jobs (the pid) */
	int epfd;

	Buf put_req; /* the whole put request, encoded once; memcache:
			       what follows the key in a set */
	char *body;         /* the body every reserved job must come back with */

	Phase phase;
	uint64_t target;     /* ops this phase may start; UINT64_MAX = no limit */
	bool stop;           /* start no more ops: deadline or interrupt */
	uint64_t setup_left; /* setup replies still to come */
	uint64_t started, done, failed; /* ops of this phase */
	uint64_t puts_started, puts_failed; /* produce-consume producers */
	uint64_t prefilled;  /* jobs the prefill got INSERTED (STORED) for */

	uint64_t cmds;   /* replies read during the measured phase */
	uint64_t errors; /* unexpected replies, whole run */
	Hist op_lat;
	Hist cmd_lat[CMD__COUNT];
	uint64_t t_begin, t_end; /* the measured phase */
	uint64_t t_last_rx;      /* last time any byte arrived */
	bool interrupted;
	char failure[512];       /* why the run failed; first failure wins */
};

uint64_t now_ns(void);
/* Record a fatal failure (the first one is kept); always returns -1. */
int bench_fail(Bench *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Printable, quoted, shortened copy of protocol bytes for messages. */
const char *bench_quote(const char *p, size_t n, char *out, size_t outlen);

#endif
