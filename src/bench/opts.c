/* opts.c - command-line parsing for tubed-bench; see opts.h. */
#include "opts.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_REQUESTS 100000
#define DEFAULT_PORT "11300"
#define DEFAULT_MC_PORT "22133" /* kestrel's */
#define MAX_PIPELINE 10000
#define MAX_CONNECTIONS 100000
#define MAX_TUBES 100000
#define MAX_BODY (1024u * 1024u * 1024u) /* beanstalkd's own -z ceiling */

static const char *const workload_names[] = {
	[WL_PUT] = "put",
	[WL_RESERVE_DELETE] = "reserve-delete",
	[WL_PRODUCE_CONSUME] = "produce-consume",
	[WL_MIXED] = "mixed",
	[WL_WATCH] = "watch",
	[WL_MC_SET] = "mc-set",
	[WL_MC_GET] = "mc-get",
	[WL_MC_OPEN_CLOSE] = "mc-open-close",
};

static const char *const protocol_names[] = {
	[PROTO_BEANSTALK] = "beanstalk",
	[PROTO_MEMCACHE] = "memcache",
};

const char *workload_name(Workload w)
{
	return workload_names[w];
}

const char *protocol_name(Protocol p)
{
	return protocol_names[p];
}

bool workload_is_mc(Workload w)
{
	return w == WL_MC_SET || w == WL_MC_GET || w == WL_MC_OPEN_CLOSE;
}

bool workload_drains(Workload w)
{
	return w == WL_RESERVE_DELETE || w == WL_MC_GET || w == WL_MC_OPEN_CLOSE;
}

static void usage(FILE *f)
{
	fputs(
"Usage: tubed-bench [OPTION]...\n"
"Load generator for beanstalk-protocol servers (tubed, beanstalkd), and for\n"
"kestrel's memcache protocol (tubed --memcache-port, memcached).\n"
"Every reply is checked; any unexpected reply makes the exit status 1.\n"
"\n"
"Connection:\n"
"  -h, --host ADDR         server address (default 127.0.0.1); -h is not help\n"
"  -p, --port PORT         server port (default 11300; 22133 with memcache)\n"
"      --protocol NAME     beanstalk | memcache (default beanstalk; the mc-*\n"
"                          workloads imply memcache)\n"
"      --memcached         the memcache server is a plain memcached: a get\n"
"                          reads a key and leaves it (see mc-get below)\n"
"  -c, --connections N     working connections (default 1)\n"
"  -P, --pipeline DEPTH    ops in flight per connection (default 1 = none)\n"
"      --idle N            also hold N idle connections open during the run\n"
"\n"
"Work:\n"
"  -w, --workload NAME     put | reserve-delete | produce-consume | mixed |\n"
"                          watch (default put); with memcache: mc-set |\n"
"                          mc-get | mc-open-close (default mc-set); see below\n"
"  -n, --requests N        ops to complete (default 100000)\n"
"  -d, --duration SECONDS  run for this long instead of -n; requests still\n"
"                          in flight then are not waited for or counted\n"
"  -s, --size BYTES        job body size (default 100)\n"
"  -t, --tubes N           spread jobs over N tubes (default 1); workers\n"
"                          watch all N and ignore \"default\"; with memcache,\n"
"                          N queues (keys)\n"
"      --producers N       produce-consume: putting connections (default 1)\n"
"      --workers N         produce-consume: reserving connections (default 1)\n"
"      --prefill N         reserve-delete, mc-get, mc-open-close: put (set) N\n"
"                          jobs first (not measured), then drain them\n"
"                          (default: the -n count); 0 with --tube: drain\n"
"                          -n jobs already in that tube (put earlier)\n"
"      --tube NAME         use the tube (queue) NAME instead of\n"
"                          bench.<pid>.0 (implies -t 1): a put run and a\n"
"                          later drain run can share it\n"
"      --watch N           watch workload with N tubes: each connection\n"
"                          watches all N and does put+reserve+delete\n"
"                          round trips (same as -w watch -t N)\n"
"\n"
"Output and limits:\n"
"  -q, --quiet             no banner and no progress line\n"
"      --csv               print a CSV header and one result line instead\n"
"      --label NAME        server name for the CSV label column (default\n"
"                          server)\n"
"      --timeout SECONDS   hard limit for the whole run (default 600, or\n"
"                          duration + 60 with -d)\n"
"      --stall SECONDS     fail when the server sends nothing for this long\n"
"                          while requests are outstanding (default 10)\n"
"      --help              show this help\n"
"\n"
"Workloads; an op is what ops/s counts and the op latency measures:\n"
"  put              every connection puts; op = one put\n"
"  reserve-delete   put --prefill jobs, then drain them with reserve + delete\n"
"                   over all connections; op = one job reserved and deleted\n"
"  produce-consume  --producers put while --workers reserve + delete\n"
"                   (workers wait in reserve when the queue is empty);\n"
"                   op = one job consumed\n"
"  mixed            every connection alternates put and\n"
"                   reserve-with-timeout 0 (+ delete of the job it gets);\n"
"                   op = one put, or one reserve (+ delete)\n"
"  watch            every connection watches -t tubes and does put, reserve,\n"
"                   delete round trips; op = one round trip\n"
"  mc-set           every connection sends set <queue> 0 0 <size> + body,\n"
"                   expecting STORED; op = one set\n"
"  mc-get           set --prefill items, then drain them with get <queue>\n"
"                   over all connections; op = one item received.  An empty\n"
"                   reply (END) is unexpected: the drain never asks a queue\n"
"                   for more than it holds.  With --memcached the prefill\n"
"                   sets each key once and every get reads it again (-d\n"
"                   needs no --prefill)\n"
"  mc-open-close    set --prefill items, then take each with get <queue>/open\n"
"                   and confirm it with get <queue>/close, the two sent\n"
"                   together (kestrel's reliable read); op = one item\n"
"                   confirmed.  Not with --memcached (memcached has no /open)\n"
"\n"
"Tubes and queues are named bench.<pid>.<k> (unless --tube), so a run never\n"
"touches other clients' jobs.  Jobs are put with priority 1024, delay 0,\n"
"ttr 60; items are set with flags 0, exptime 0.  The prefill and the drain\n"
"of the memcache workloads take the queues in turn, k = 0, 1, ..., N-1,\n"
"0, ...  -c for produce-consume is split evenly between producers and\n"
"workers.  Latency is measured from sending a request to reading its reply\n"
"(with pipelining, that includes waiting behind the requests before it).\n"
"\n"
"Exit status: 0 all replies as expected; 1 unexpected replies, failed ops,\n"
"connection failure, server stall or time limit; 2 bad usage.\n",
		f);
}

static _Noreturn void bad_usage(const char *fmt, ...)
{
	va_list ap;
	fputs("tubed-bench: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\n\n", stderr);
	usage(stderr);
	exit(2);
}

/* Strict: digits only, no sign, no trailing junk, within [min, max]. */
static uint64_t parse_uint(const char *opt, const char *s, uint64_t min, uint64_t max)
{
	if (*s < '0' || *s > '9')
		bad_usage("%s: '%s' is not a number", opt, s);
	errno = 0;
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	if (*end != '\0')
		bad_usage("%s: '%s' is not a number", opt, s);
	if (errno == ERANGE || v < min || v > max)
		bad_usage("%s: %s is out of range (%llu to %llu)", opt, s,
			  (unsigned long long)min, (unsigned long long)max);
	return v;
}

static double parse_seconds(const char *opt, const char *s)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (end == s || *end != '\0' || errno || !isfinite(v) || v <= 0 || v > 1e7)
		bad_usage("%s: '%s' is not a positive number of seconds", opt, s);
	return v;
}

static Workload parse_workload(const char *s)
{
	for (size_t i = 0; i < sizeof workload_names / sizeof workload_names[0]; i++)
		if (strcmp(s, workload_names[i]) == 0)
			return (Workload)i;
	bad_usage("-w: unknown workload '%s'", s);
}

/* A name the beanstalk protocol accepts (letters, digits and - + / ; . $ _
 * ( ), not starting with a hyphen), of 1 to 63 bytes: the workloads keep
 * tube names in 64-byte buffers. */
static const char *parse_tube(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > 63 || s[0] == '-' ||
	    strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		      "0123456789-+/;.$_()") != n)
		bad_usage("--tube: '%s' is not a tube name of 1 to 63 bytes", s);
	return s;
}

static Protocol parse_protocol(const char *s)
{
	for (size_t i = 0; i < sizeof protocol_names / sizeof protocol_names[0]; i++)
		if (strcmp(s, protocol_names[i]) == 0)
			return (Protocol)i;
	bad_usage("--protocol: unknown protocol '%s' (beanstalk or memcache)", s);
}

enum {
	OPT_PRODUCERS = 256,
	OPT_WORKERS,
	OPT_PREFILL,
	OPT_WATCH,
	OPT_CSV,
	OPT_LABEL,
	OPT_TIMEOUT,
	OPT_STALL,
	OPT_IDLE,
	OPT_PROTOCOL,
	OPT_MEMCACHED,
	OPT_TUBE,
	OPT_HELP,
};

static const struct option long_opts[] = {
	{"host", required_argument, NULL, 'h'},
	{"port", required_argument, NULL, 'p'},
	{"connections", required_argument, NULL, 'c'},
	{"pipeline", required_argument, NULL, 'P'},
	{"size", required_argument, NULL, 's'},
	{"requests", required_argument, NULL, 'n'},
	{"duration", required_argument, NULL, 'd'},
	{"tubes", required_argument, NULL, 't'},
	{"workload", required_argument, NULL, 'w'},
	{"quiet", no_argument, NULL, 'q'},
	{"producers", required_argument, NULL, OPT_PRODUCERS},
	{"workers", required_argument, NULL, OPT_WORKERS},
	{"prefill", required_argument, NULL, OPT_PREFILL},
	{"watch", required_argument, NULL, OPT_WATCH},
	{"csv", no_argument, NULL, OPT_CSV},
	{"label", required_argument, NULL, OPT_LABEL},
	{"timeout", required_argument, NULL, OPT_TIMEOUT},
	{"stall", required_argument, NULL, OPT_STALL},
	{"idle", required_argument, NULL, OPT_IDLE},
	{"protocol", required_argument, NULL, OPT_PROTOCOL},
	{"memcached", no_argument, NULL, OPT_MEMCACHED},
	{"tube", required_argument, NULL, OPT_TUBE},
	{"help", no_argument, NULL, OPT_HELP},
	{NULL, 0, NULL, 0},
};

/* What the user typed, before defaults: 0 / false means "not given". */
typedef struct Given Given;
struct Given {
	bool workload, connections, tubes, producers, workers, prefill, watch;
	bool requests, timeout, port, protocol;
	unsigned watch_tubes;
};

static void parse_one(int ch, BenchOpts *o, Given *g)
{
	switch (ch) {
	case 'h': o->host = optarg; break;
	case 'p': o->port = optarg; parse_uint("-p", optarg, 1, 65535); g->port = true; break;
	case 'c': o->connections = (unsigned)parse_uint("-c", optarg, 1, MAX_CONNECTIONS); g->connections = true; break;
	case 'P': o->pipeline = (unsigned)parse_uint("-P", optarg, 1, MAX_PIPELINE); break;
	case 's': o->size = (size_t)parse_uint("-s", optarg, 0, MAX_BODY); break;
	case 'n': o->requests = parse_uint("-n", optarg, 1, UINT64_MAX - 1); g->requests = true; break;
	case 'd': o->duration = parse_seconds("-d", optarg); break;
	case 't': o->tubes = (unsigned)parse_uint("-t", optarg, 1, MAX_TUBES); g->tubes = true; break;
	case 'w': o->workload = parse_workload(optarg); g->workload = true; break;
	case 'q': o->quiet = true; break;
	case OPT_PRODUCERS: o->producers = (unsigned)parse_uint("--producers", optarg, 1, MAX_CONNECTIONS); g->producers = true; break;
	case OPT_WORKERS: o->workers = (unsigned)parse_uint("--workers", optarg, 1, MAX_CONNECTIONS); g->workers = true; break;
	case OPT_PREFILL: o->prefill = parse_uint("--prefill", optarg, 0, UINT64_MAX - 1); g->prefill = true; break;
	case OPT_WATCH: g->watch_tubes = (unsigned)parse_uint("--watch", optarg, 1, MAX_TUBES); g->watch = true; break;
	case OPT_CSV: o->csv = true; break;
	case OPT_LABEL: o->label = optarg; break;
	case OPT_TIMEOUT: o->timeout = parse_seconds("--timeout", optarg); g->timeout = true; break;
	case OPT_STALL: o->stall = parse_seconds("--stall", optarg); break;
	case OPT_IDLE: o->idle = (unsigned)parse_uint("--idle", optarg, 0, MAX_CONNECTIONS); break;
	case OPT_PROTOCOL: o->protocol = parse_protocol(optarg); g->protocol = true; break;
	case OPT_MEMCACHED: o->memcached = true; break;
	case OPT_TUBE: o->tube = parse_tube(optarg); break;
	case OPT_HELP: usage(stdout); exit(0);
	default: bad_usage("unknown or incomplete option (see above)");
	}
}

/* The mc-* workloads imply --protocol memcache, whose default workload is
 * mc-set and default port kestrel's; the two families never mix. */
static void check_protocol(BenchOpts *o, const Given *g)
{
	if (g->workload && workload_is_mc(o->workload) && !g->protocol)
		o->protocol = PROTO_MEMCACHE;
	if (o->protocol == PROTO_MEMCACHE && !g->workload)
		o->workload = WL_MC_SET;
	if (workload_is_mc(o->workload) != (o->protocol == PROTO_MEMCACHE))
		bad_usage("-w %s is not a %s workload", workload_name(o->workload),
			  protocol_name(o->protocol));
	if (o->protocol == PROTO_MEMCACHE && !g->port)
		o->port = DEFAULT_MC_PORT;
	if (o->memcached && o->protocol != PROTO_MEMCACHE)
		bad_usage("--memcached is only for --protocol memcache");
	if (o->memcached && o->workload == WL_MC_OPEN_CLOSE)
		bad_usage("mc-open-close needs a kestrel server (tubed): memcached has no /open");
	if (o->memcached && g->prefill)
		bad_usage("--prefill with --memcached: the prefill sets each of the -t keys once");
}

static void check_watch(BenchOpts *o, const Given *g)
{
	if (!g->watch)
		return;
	if (o->protocol == PROTO_MEMCACHE)
		bad_usage("--watch is a beanstalk workload");
	if (g->workload && o->workload != WL_WATCH)
		bad_usage("--watch runs the watch workload; it cannot be combined with -w %s",
			  workload_name(o->workload));
	if (g->tubes && o->tubes != g->watch_tubes)
		bad_usage("--watch %u and -t %u disagree", g->watch_tubes, o->tubes);
	o->workload = WL_WATCH;
	o->tubes = g->watch_tubes;
}

static void check_produce_consume(BenchOpts *o, const Given *g)
{
	if (o->workload != WL_PRODUCE_CONSUME) {
		if (g->producers || g->workers)
			bad_usage("--producers and --workers are only for -w produce-consume");
		return;
	}
	if (g->connections) {
		if (g->producers || g->workers)
			bad_usage("give either -c or --producers/--workers, not both");
		if (o->connections < 2)
			bad_usage("produce-consume needs -c 2 or more (producers + workers)");
		o->workers = o->connections / 2;
		o->producers = o->connections - o->workers;
	}
	if ((uint64_t)o->producers + o->workers > MAX_CONNECTIONS)
		bad_usage("too many connections");
	o->connections = o->producers + o->workers;
}

static void check_drain(BenchOpts *o, const Given *g)
{
	if (!workload_drains(o->workload)) {
		if (g->prefill)
			bad_usage("--prefill is only for -w reserve-delete, mc-get and mc-open-close");
		return;
	}
	if (o->memcached) {
		o->prefill = o->tubes; /* a get leaves the key: nothing runs dry */
		return;
	}
	if (g->prefill && o->prefill == 0) {
		/* The jobs are in --tube already: the drain takes -n of them. */
		if (!o->tube)
			bad_usage("--prefill 0 needs --tube NAME (the tube holding the jobs to drain)");
		if (!g->requests && o->duration == 0)
			bad_usage("--prefill 0 needs -n N (the jobs to drain) or -d");
	} else if (!g->prefill) {
		if (o->duration > 0)
			bad_usage("%s with -d needs --prefill N (jobs to drain)",
				  workload_name(o->workload));
		o->prefill = o->requests;
	} else if (g->requests && o->requests > o->prefill) {
		bad_usage("-n %llu is more than --prefill %llu: the drain would run out of jobs",
			  (unsigned long long)o->requests, (unsigned long long)o->prefill);
	} else if (!g->requests && o->duration == 0) {
		o->requests = o->prefill;
	}
}

void opts_parse(int argc, char **argv, BenchOpts *o)
{
	*o = (BenchOpts){
		.host = "127.0.0.1", .port = DEFAULT_PORT, .label = "server",
		.workload = WL_PUT, .connections = 1, .producers = 1, .workers = 1,
		.pipeline = 1, .tubes = 1, .size = 100, .requests = DEFAULT_REQUESTS,
		.stall = 10,
	};
	Given g = {0};
	int ch;
	opterr = 0; /* our own message is clearer and goes with the usage */
	while ((ch = getopt_long(argc, argv, ":h:p:c:P:s:n:d:t:w:q", long_opts, NULL)) != -1) {
		if (ch == ':')
			bad_usage("option %s needs a value", argv[optind - 1]);
		if (ch == '?' && optopt > 0 && optopt < 256)
			bad_usage("unknown option -%c", optopt);
		if (ch == '?')
			bad_usage("unknown option %s", argv[optind - 1]);
		parse_one(ch, o, &g);
	}
	if (optind < argc)
		bad_usage("unexpected argument '%s'", argv[optind]);
	if (g.requests && o->duration > 0)
		bad_usage("give either -n or -d, not both");
	if (o->duration > 0 && !g.requests)
		o->requests = OPTS_UNLIMITED;
	check_protocol(o, &g);
	check_watch(o, &g);
	check_produce_consume(o, &g);
	if (o->tube && g.tubes && o->tubes != 1)
		bad_usage("--tube names one tube: -t %u does not go with it", o->tubes);
	if (o->tube && o->workload == WL_WATCH)
		bad_usage("--tube does not go with the watch workload");
	check_drain(o, &g);
	if (!g.timeout)
		o->timeout = o->duration > 0 ? o->duration + 60 : 600;
}
