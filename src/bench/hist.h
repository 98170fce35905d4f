/*
 * hist.h - log-linear latency histogram (nanoseconds).
 *
 * Contract: values 0..31 have exact buckets; above that, each power of two
 * is split into 32 equal sub-buckets, so a reported percentile is within
 * about 3% of the true value, for any value up to 2^64 ns.  The histogram is
 * a fixed array (about 15 KiB): recording is a few instructions and never
 * allocates, so it can sit on the hot path of every request.
 */
#ifndef TUBED_BENCH_HIST_H
#define TUBED_BENCH_HIST_H
#include <stdint.h>

#define HIST_SUB_BITS 5
#define HIST_SUB (1u << HIST_SUB_BITS)
#define HIST_BUCKETS ((65 - HIST_SUB_BITS) * HIST_SUB)

typedef struct Hist Hist;
struct Hist {
	uint64_t count;
	uint64_t max;
	uint64_t bucket[HIST_BUCKETS];
};

void hist_record(Hist *h, uint64_t v);
/* The value below which p percent (0..100) of the samples fall; 0 if empty. */
uint64_t hist_percentile(const Hist *h, double p);

#endif
