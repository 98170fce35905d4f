/* report.c - human and CSV output; see report.h. */
#include "report.h"

#include "workload.h"

static double elapsed_s(const Bench *b)
{
	return (double)(b->t_end - b->t_begin) / 1e9;
}

static double per_sec(const Bench *b, uint64_t n)
{
	double s = elapsed_s(b);
	return s > 0 ? (double)n / s : 0;
}

static const char *fmt_ns(uint64_t ns, char *out, size_t n)
{
	if (ns < 1000)
		snprintf(out, n, "%lluns", (unsigned long long)ns);
	else if (ns < 1000000)
		snprintf(out, n, "%.1fus", (double)ns / 1e3);
	else if (ns < 1000000000)
		snprintf(out, n, "%.2fms", (double)ns / 1e6);
	else
		snprintf(out, n, "%.2fs", (double)ns / 1e9);
	return out;
}

static void print_latency(const Hist *h, FILE *f)
{
	char a[24], c[24], d[24], e[24];
	fprintf(f, "p50 %s  p99 %s  p99.9 %s  max %s\n",
		fmt_ns(hist_percentile(h, 50), a, sizeof a),
		fmt_ns(hist_percentile(h, 99), c, sizeof c),
		fmt_ns(hist_percentile(h, 99.9), d, sizeof d),
		fmt_ns(h->max, e, sizeof e));
}

static void banner_server(const BenchOpts *o, FILE *f)
{
	fprintf(f, "tubed-bench: %s on %s port %s", workload_name(o->workload), o->host, o->port);
	if (o->protocol == PROTO_MEMCACHE)
		fprintf(f, " (memcache%s)", o->memcached ? ", a plain memcached" : "");
	fputs(": ", f);
}

void report_banner(const Bench *b, FILE *f)
{
	const BenchOpts *o = b->o;
	const char *tube = o->protocol == PROTO_MEMCACHE ? "queue" : "tube";
	banner_server(o, f);
	if (o->workload == WL_PRODUCE_CONSUME)
		fprintf(f, "%u producers + %u workers", o->producers, o->workers);
	else
		fprintf(f, "%u connection%s", o->connections, o->connections == 1 ? "" : "s");
	fprintf(f, ", pipeline %u, %zu-byte bodies, %u %s%s", o->pipeline, o->size, o->tubes,
		tube, o->tubes == 1 ? "" : "s");
	if (workload_drains(o->workload))
		fprintf(f, ", prefill %llu", (unsigned long long)o->prefill);
	if (o->idle)
		fprintf(f, ", %u idle", o->idle);
	if (o->duration > 0)
		fprintf(f, ", %g s\n", o->duration);
	else
		fprintf(f, ", %llu ops\n", (unsigned long long)o->requests);
}

static void report_human(const Bench *b, FILE *f)
{
	fprintf(f, "ops          %llu done, %llu failed, in %.3f s%s\n",
		(unsigned long long)b->done, (unsigned long long)b->failed, elapsed_s(b),
		b->interrupted ? " (interrupted)" : "");
	fprintf(f, "throughput   %.0f ops/s, %.0f requests/s\n", per_sec(b, b->done),
		per_sec(b, b->cmds));
	fprintf(f, "op latency   ");
	print_latency(&b->op_lat, f);
	for (int k = 0; k < CMD__COUNT; k++) {
		if (b->cmd_lat[k].count == 0)
			continue;
		fprintf(f, "  %-10s %llu replies, ", k == CMD_RESERVE_NOW ? "reserve-0" : cmd_name(k),
			(unsigned long long)b->cmd_lat[k].count);
		print_latency(&b->cmd_lat[k], f);
	}
	fprintf(f, "unexpected   %llu replies\n", (unsigned long long)b->errors);
}

static void report_csv(const Bench *b, FILE *f)
{
	const BenchOpts *o = b->o;
	const Hist *h = &b->op_lat;
	fputs("label,workload,connections,pipeline,size,tubes,ops,failed,errors,seconds,"
	      "ops_per_sec,requests_per_sec,p50_us,p99_us,p999_us,max_us\n", f);
	fprintf(f, "%s,%s,%u,%u,%zu,%u,%llu,%llu,%llu,%.3f,%.0f,%.0f,%.1f,%.1f,%.1f,%.1f\n",
		o->label, workload_name(o->workload), o->connections, o->pipeline, o->size,
		o->tubes, (unsigned long long)b->done, (unsigned long long)b->failed,
		(unsigned long long)b->errors, elapsed_s(b), per_sec(b, b->done),
		per_sec(b, b->cmds), (double)hist_percentile(h, 50) / 1e3,
		(double)hist_percentile(h, 99) / 1e3, (double)hist_percentile(h, 99.9) / 1e3,
		(double)h->max / 1e3);
}

void report_result(const Bench *b, FILE *f)
{
	if (b->o->csv)
		report_csv(b, f);
	else
		report_human(b, f);
	fflush(f);
}
