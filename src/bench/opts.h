/*
 * opts.h - command-line options of tubed-bench.
 *
 * Contract: opts_parse() turns argv into a fully validated struct
 * bench_opts: defaults are applied and option combinations are checked
 * there, so the rest of the program trusts every field.  A bad option prints
 * a one-line reason and the usage on stderr and exits 2; --help prints the
 * usage on stdout and exits 0.
 */
#ifndef TUBED_BENCH_OPTS_H
#define TUBED_BENCH_OPTS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum Protocol {
	PROTO_BEANSTALK,
	PROTO_MEMCACHE, /* kestrel's memcache text dialect (tubed --memcache-port) */
} Protocol;

typedef enum Workload {
	WL_PUT,
	WL_RESERVE_DELETE,
	WL_PRODUCE_CONSUME,
	WL_MIXED,
	WL_WATCH,
	WL_MC_SET,        /* memcache: set */
	WL_MC_GET,        /* memcache: prefill, then get (a dequeue on kestrel) */
	WL_MC_OPEN_CLOSE, /* memcache: prefill, then get q/open + get q/close */
} Workload;

/* requests value meaning "no count limit" (the run is bounded by -d). */
#define OPTS_UNLIMITED UINT64_MAX

typedef struct BenchOpts BenchOpts;
struct BenchOpts {
	const char *host;
	const char *port;
	const char *label;     /* server name repeated in --csv output */
	Protocol protocol;
	Workload workload;
	unsigned connections;  /* working connections, producers + workers */
	unsigned producers;    /* produce-consume only; connections 0..producers-1 */
	unsigned workers;      /* produce-consume only */
	unsigned pipeline;     /* ops in flight per connection */
	unsigned tubes;        /* tubes (memcache: queues) the jobs spread over */
	unsigned idle;         /* extra connections that only stay open */
	size_t size;           /* job body bytes */
	uint64_t requests;     /* ops to complete, or OPTS_UNLIMITED with -d */
	double duration;       /* seconds, 0 when counting ops */
	uint64_t prefill;      /* drains: jobs put (or set) before measuring; 0
				  (with tube): drain jobs put by an earlier run */
	const char *tube;      /* --tube: the one tube (queue) to use instead of
				  bench.<pid>.0, or NULL */
	bool memcached;        /* the server is a plain memcached: a get reads
				  a key and leaves it, so the prefill sets each
				  key once and a drain never runs dry */
	double timeout;        /* hard limit on the whole run, seconds */
	double stall;          /* fail when nothing is received for this long */
	bool quiet;
	bool csv;
};

void opts_parse(int argc, char **argv, BenchOpts *o);
const char *workload_name(Workload w);
const char *protocol_name(Protocol p);
/* The workload speaks the memcache protocol (the mc-* ones). */
bool workload_is_mc(Workload w);
/* The workload drains a prefilled queue (reserve-delete, mc-get, mc-open-close). */
bool workload_drains(Workload w);

#endif
