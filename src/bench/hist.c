/* hist.c - log-linear latency histogram; see hist.h. */
#include "hist.h"

#include <math.h>

/* Bucket index: below HIST_SUB the value itself; above, the group is the
 * power of two and the offset the next HIST_SUB_BITS bits below the top one. */
static unsigned bucket_of(uint64_t v)
{
	if (v < HIST_SUB)
		return (unsigned)v;
	unsigned e = 63u - (unsigned)__builtin_clzll(v); /* e >= HIST_SUB_BITS */
	unsigned top = (unsigned)(v >> (e - HIST_SUB_BITS)); /* in [SUB, 2*SUB) */
	return (e - HIST_SUB_BITS + 1) * HIST_SUB + (top - HIST_SUB);
}

/* Midpoint of a bucket: the best single estimate of the values it holds. */
static uint64_t bucket_mid(unsigned i)
{
	if (i < HIST_SUB)
		return i;
	unsigned group = i / HIST_SUB; /* >= 1 */
	uint64_t top = HIST_SUB + i % HIST_SUB;
	uint64_t low = top << (group - 1);
	uint64_t width = (uint64_t)1 << (group - 1);
	return low + width / 2;
}

void hist_record(Hist *h, uint64_t v)
{
	h->bucket[bucket_of(v)]++;
	h->count++;
	if (v > h->max)
		h->max = v;
}

uint64_t hist_percentile(const Hist *h, double p)
{
	if (h->count == 0)
		return 0;
	uint64_t rank = (uint64_t)ceil(p / 100.0 * (double)h->count);
	if (rank < 1)
		rank = 1;
	uint64_t seen = 0;
	for (unsigned i = 0; i < HIST_BUCKETS; i++) {
		seen += h->bucket[i];
		if (seen >= rank) {
			uint64_t v = bucket_mid(i);
			return v < h->max ? v : h->max;
		}
	}
	return h->max;
}
