/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rocemu inspect: a log-linear histogram for latencies. Values below
 * INSP_HIST_SUB land in exact buckets; above, each power of two is split in
 * INSP_HIST_SUB equal buckets, so a quantile is within 1/INSP_HIST_SUB
 * (about 6%) of the true value whatever the number of samples: memory stays
 * fixed however long the capture.
 */
#include <string.h>

#include "inspect.h"

static unsigned bucket_of(uint64_t v)
{
	unsigned msb, shift, exp;

	if (v < INSP_HIST_SUB)
		return (unsigned)v;
	msb = 63u - (unsigned)__builtin_clzll(v); /* >= 4 */
	shift = msb - 4;			  /* keep the top 5 bits: 1xxxx */
	exp = shift + 1;
	if (exp >= INSP_HIST_EXP)
		return INSP_HIST_EXP * INSP_HIST_SUB - 1;
	return exp * INSP_HIST_SUB + (unsigned)((v >> shift) & (INSP_HIST_SUB - 1));
}

/* Lowest value of a bucket and its width. */
static void bucket_range(unsigned b, uint64_t *lo, uint64_t *width)
{
	unsigned exp = b / INSP_HIST_SUB, sub = b % INSP_HIST_SUB;

	if (exp == 0) {
		*lo = sub;
		*width = 1;
		return;
	}
	*lo = (uint64_t)(INSP_HIST_SUB + sub) << (exp - 1);
	*width = (uint64_t)1 << (exp - 1);
}

void insp_hist_add(struct insp_hist *h, uint64_t v)
{
	if (h->n == 0 || v < h->min)
		h->min = v;
	if (h->n == 0 || v > h->max)
		h->max = v;
	h->n++;
	h->sum += (double)v;
	h->bucket[bucket_of(v)]++;
}

uint64_t insp_hist_quantile(const struct insp_hist *h, double q)
{
	uint64_t rank, seen = 0, lo, width, v;

	if (h->n == 0)
		return 0;
	if (q <= 0)
		return h->min;
	if (q >= 1)
		return h->max;
	/* nearest-rank: the smallest value with at least q*n samples at or below it */
	rank = (uint64_t)(q * (double)h->n);
	if ((double)rank < q * (double)h->n)
		rank++;
	if (rank == 0)
		rank = 1;
	for (unsigned b = 0; b < INSP_HIST_EXP * INSP_HIST_SUB; b++) {
		seen += h->bucket[b];
		if (seen < rank)
			continue;
		if (b == INSP_HIST_EXP * INSP_HIST_SUB - 1)
			return h->max; /* the overflow bucket (over 2^43 ns): no better bound */
		bucket_range(b, &lo, &width);
		v = lo + width / 2;
		if (v < h->min)
			v = h->min;
		if (v > h->max)
			v = h->max;
		return v;
	}
	return h->max;
}

void insp_hist_merge(struct insp_hist *into, const struct insp_hist *from)
{
	if (from->n == 0)
		return;
	if (into->n == 0 || from->min < into->min)
		into->min = from->min;
	if (into->n == 0 || from->max > into->max)
		into->max = from->max;
	into->n += from->n;
	into->sum += from->sum;
	for (unsigned b = 0; b < INSP_HIST_EXP * INSP_HIST_SUB; b++)
		into->bucket[b] += from->bucket[b];
}
