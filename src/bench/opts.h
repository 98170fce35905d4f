#ifndef TUBED_BENCH_OPTS_H
#define TUBED_BENCH_OPTS_H
/*
 * opts.h - command-line options of tubed-bench.
 *
 * Contract: opts_parse() turns argv into a fully validated struct
 * bench_opts: defaults are applied and option combinations are checked
 * there, so the rest of the program trusts every field.  A bad option prints
 * a one-line reason and the usage on stderr and exits 2; --help prints the
 * usage on stdout and exits 0.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum workload {
	WL_PUT,
	WL_RESERVE_DELETE,
	WL_PRODUCE_CONSUME,
	WL_MIXED,
	WL_WATCH,
};

/* requests value meaning "no count limit" (the run is bounded by -d). */
#define OPTS_UNLIMITED UINT64_MAX

struct bench_opts {
	const char *host;
	const char *port;
	const char *label;     /* server name repeated in --csv output */
	enum workload workload;
	unsigned connections;  /* working connections, producers + workers */
	unsigned producers;    /* produce-consume only; connections 0..producers-1 */
	unsigned workers;      /* produce-consume only */
	unsigned pipeline;     /* ops in flight per connection */
	unsigned tubes;        /* the watch workload: tubes each worker watches */
	unsigned idle;         /* extra connections that only stay open */
	size_t size;           /* job body bytes */
	uint64_t requests;     /* ops to complete, or OPTS_UNLIMITED with -d */
	double duration;       /* seconds, 0 when counting ops */
	uint64_t prefill;      /* reserve-delete: jobs put before measuring */
	double timeout;        /* hard limit on the whole run, seconds */
	double stall;          /* fail when nothing is received for this long */
	bool quiet;
	bool csv;
};

void opts_parse(int argc, char **argv, struct bench_opts *o);
const char *workload_name(enum workload w);

#endif
