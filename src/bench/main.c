/*
 * main.c - tubed-bench: a load generator for beanstalk-protocol servers
 * and for kestrel's memcache protocol.
 *
 * Parses the options, lets the workload set up its connections, runs the
 * event loop and reports.  Exit status: 0 every reply as expected, 1 any
 * unexpected reply, failed op or fatal error, 2 bad usage (from opts.c),
 * 130 interrupted.
 */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "opts.h"
#include "report.h"
#include "run.h"
#include "workload.h"

int main(int argc, char **argv)
{
	BenchOpts o;
	opts_parse(argc, argv, &o);
	/* Heap, not stack: the histograms make Bench about 120 KiB. */
	Bench *b = calloc(1, sizeof *b);
	if (!b) {
		fprintf(stderr, "tubed-bench: out of memory\n");
		return 1;
	}
	b->o = &o;
	workload_init(b);
	if (!o.quiet && !o.csv) {
		report_banner(b, stdout);
		fflush(stdout);
	}
	int status = 0;
	if (bench_run(b) < 0) {
		fprintf(stderr, "tubed-bench: %s\n", b->failure);
		status = 1;
	} else if (b->interrupted && b->phase != PHASE_MEASURE) {
		fprintf(stderr, "tubed-bench: interrupted in the %s phase\n", phase_name(b->phase));
		status = 130;
	} else {
		report_result(b, stdout);
		if (b->interrupted) {
			status = 130;
		} else if (b->errors || b->failed) {
			fprintf(stderr, "tubed-bench: %llu unexpected replies, %llu failed ops\n",
				(unsigned long long)b->errors, (unsigned long long)b->failed);
			status = 1;
		}
	}
	workload_free(b);
	free(b);
	return status;
}
