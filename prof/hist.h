/* SPDX-License-Identifier: MIT */
/* hist.h - log-linear (HDR-style) latency histograms: fixed size, no pointers, one writer, mergeable. */
#ifndef PK_PROF_HIST_H
#define PK_PROF_HIST_H

/*
 * Design
 *
 * A value v (a duration in ns, or in any integer unit) falls in octave
 * e = floor(log2 v) and, inside it, in one of 2^PK_HIST_SUB_BITS linear
 * sub-buckets of width 2^(e - PK_HIST_SUB_BITS). Values below
 * 2^(PK_HIST_SUB_BITS + 1) have buckets of width 1 (exact). With
 *
 *	s   = max(0, floor(log2 v) - PK_HIST_SUB_BITS)
 *	idx = (s << PK_HIST_SUB_BITS) + (v >> s)
 *
 * the index needs no branch and no division (pk_hist_index()); the whole
 * uint64_t range maps to PK_HIST_BUCKETS buckets.
 *
 * Error bound. A bucket of width w = 2^s > 1 starts at L >= 2^(s + K)
 * (K = PK_HIST_SUB_BITS), so w / L <= 2^-K. Percentiles report the middle of
 * the bucket holding the rank's sample, clamped to [min, max]; the sample
 * x in [L, L + w - 1] is then within w / 2 <= x * 2^-(K + 1) of it:
 *
 *	|pk_hist_value_at(h, q) - x_q| <= x_q * PK_HIST_REL_ERR  (2^-6 = 1.5625 %)
 *
 * where x_q is the nearest-rank percentile of the recorded samples (the
 * sample at rank ceil(q * count) in sorted order). count, min, max and sum
 * are exact.
 *
 * Memory and concurrency. A struct pk_hist holds counters only (no pointers),
 * so it can live in a per-thread slot of a mapping shared between the
 * probed processes and probekit. All zero bytes is an empty histogram (min is
 * kept complemented for that reason). One thread writes a histogram; there
 * are no locks and no atomics read-modify-writes. A reader in another thread
 * or process copies the slot (pk_hist_merge() into its own) and may see
 * records in flight (count ahead of a bucket by the writer's last record):
 * take final figures after the writer stopped (at exit or at an interval
 * boundary the writer does not cross, e.g. after a per-thread switch of
 * slots). Size: PK_HIST_BUCKETS * 8 + 32 = 15 392 bytes.
 */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define PK_HIST_SUB_BITS 5
#define PK_HIST_SUB (1u << PK_HIST_SUB_BITS)
/* s ranges 0..63-K, v >> s below 2^(K+1): (64 - K) * 2^K + 2^K indices. */
#define PK_HIST_BUCKETS ((65 - PK_HIST_SUB_BITS) << PK_HIST_SUB_BITS)
/* The percentile error bound, relative: 2^-(K + 1). */
#define PK_HIST_REL_ERR (1.0 / (2 << PK_HIST_SUB_BITS))

struct pk_hist {
	uint64_t count;
	uint64_t sum;		/* wraps after 2^64 (584 years of ns) */
	uint64_t min_inv;	/* ~min: zero-filled memory is an empty histogram */
	uint64_t max;
	uint64_t bucket[PK_HIST_BUCKETS];
};

/**
 * pk_hist_index() - the bucket of value @v.
 * @v: the value.
 *
 * Context: any thread, async-signal-safe.
 * Return: an index below PK_HIST_BUCKETS.
 */
static inline unsigned int pk_hist_index(uint64_t v)
{
	unsigned int s = 63 - __builtin_clzll(v | PK_HIST_SUB) - PK_HIST_SUB_BITS;

	return (s << PK_HIST_SUB_BITS) + (unsigned int)(v >> s);
}

/**
 * pk_hist_record() - record value @v in @h.
 * @h: the histogram; written by this thread only.
 * @v: the value (ns, by convention).
 *
 * No division, no atomics: about 25 instructions at -O2 (bsr, two shifts,
 * the bucket increment, count and sum as one vector add, and two compares
 * whose stores of min and max are rarely taken); 2.7 ns a record here
 * (bench_prof hist_record).
 *
 * Context: any thread, async-signal-safe; one writer per histogram.
 */
static inline void pk_hist_record(struct pk_hist *h, uint64_t v)
{
	h->bucket[pk_hist_index(v)]++;
	h->count++;
	h->sum += v;
	if (~v > h->min_inv)
		h->min_inv = ~v;
	if (v > h->max)
		h->max = v;
}

/**
 * pk_hist_bucket_low() - the lowest value of bucket @idx.
 * @idx: a bucket index below PK_HIST_BUCKETS.
 *
 * Context: any thread, async-signal-safe.
 * Return: the bucket's lowest value.
 */
static inline uint64_t pk_hist_bucket_low(unsigned int idx)
{
	unsigned int s = idx < 2 * PK_HIST_SUB ? 0 : (idx >> PK_HIST_SUB_BITS) - 1;

	return (uint64_t)(idx - (s << PK_HIST_SUB_BITS)) << s;
}

/**
 * pk_hist_bucket_high() - the highest value of bucket @idx (inclusive).
 * @idx: a bucket index below PK_HIST_BUCKETS.
 *
 * Context: any thread, async-signal-safe.
 * Return: the bucket's highest value.
 */
static inline uint64_t pk_hist_bucket_high(unsigned int idx)
{
	unsigned int s = idx < 2 * PK_HIST_SUB ? 0 : (idx >> PK_HIST_SUB_BITS) - 1;

	return pk_hist_bucket_low(idx) + ((uint64_t)1 << s) - 1;
}

/**
 * pk_hist_reset() - make @h empty.
 * @h: the histogram.
 *
 * Context: any thread, async-signal-safe; not while its writer records.
 */
void pk_hist_reset(struct pk_hist *h);

/**
 * pk_hist_merge() - add @src's records to @dst.
 * @dst: the sum; may be @src's writer's histogram only if that writer is this thread.
 * @src: the histogram added (another thread's or process's slot).
 *
 * Merging is exact: the result is what recording both sets into one
 * histogram gives (buckets, count, sum, min, max).
 *
 * Context: any thread, async-signal-safe.
 */
void pk_hist_merge(struct pk_hist *dst, const struct pk_hist *src);

/**
 * pk_hist_sub() - the records @now has and @before, an older copy of it, had not.
 * @d: the result (an interval's histogram); may be @now.
 * @now: the histogram at the interval's end (a copy of a slot).
 * @before: a copy of the same slot at the interval's start.
 *
 * Buckets, count and sum are exact (a bucket that went backwards, which
 * only a torn copy can show, counts 0). min and max are exact when @before
 * is empty; otherwise they are the lowest and highest values of the
 * interval's outermost non-empty buckets, clamped to @now's min and max:
 * within one bucket (2^-PK_HIST_SUB_BITS relative) of the true ones.
 *
 * Context: any thread, async-signal-safe.
 */
void pk_hist_sub(struct pk_hist *d, const struct pk_hist *now, const struct pk_hist *before);

/**
 * pk_hist_min() - the smallest value recorded.
 * @h: the histogram.
 *
 * Context: any thread, async-signal-safe.
 * Return: the minimum, or 0 if @h is empty.
 */
uint64_t pk_hist_min(const struct pk_hist *h);

/**
 * pk_hist_mean() - the mean of the values recorded.
 * @h: the histogram.
 *
 * Context: any thread, async-signal-safe.
 * Return: sum / count, or 0 if @h is empty.
 */
double pk_hist_mean(const struct pk_hist *h);

/**
 * pk_hist_value_at() - the percentile @q of @h.
 * @h: the histogram.
 * @q: the fraction, in (0, 1]; 0.5 for p50, 0.999 for p99.9.
 *
 * Nearest rank: the value of the sample at rank ceil(@q * count), within
 * PK_HIST_REL_ERR of it (see the top of this file); exact below
 * 2^(PK_HIST_SUB_BITS + 1) and for q = 1 (the maximum).
 *
 * Context: any thread, async-signal-safe.
 * Return: the value, or 0 if @h is empty.
 */
uint64_t pk_hist_value_at(const struct pk_hist *h, double q);

/* Units for printing, chosen for the data by pk_hist_unit(). */
struct pk_hist_unit {
	const char *name;	/* "ns", "us", "ms", "s" */
	uint64_t ns;		/* nanoseconds per unit */
};

/**
 * pk_hist_unit() - the unit that shows @max_ns best.
 * @max_ns: the largest value to be shown, in ns.
 *
 * ns below 10 us, us below 10 ms, ms below 10 s, else s: the largest
 * unit in which the value still has two digits.
 *
 * Context: any thread, async-signal-safe.
 * Return: the unit.
 */
struct pk_hist_unit pk_hist_unit(uint64_t max_ns);

/**
 * pk_hist_print() - print @h as power-of-two rows with @ bars.
 * @f: the stream.
 * @h: the histogram; values in ns.
 * @title: the first line, followed by the unit: "@lzma_code" prints
 *	"@lzma_code (us):"; NULL for none.
 *
 * The shape bpftrace's hist() and bcc's funclatency print, in the unit
 * pk_hist_unit() chooses for @h's maximum:
 *
 *	@lzma_code (us):
 *	[0]                    3 |@@                                                  |
 *	[1]                   12 |@@@@@@@@                                            |
 *	[2, 4)                75 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|
 *
 * Rows are [2^n, 2^(n+1)) units (then K and M: 1024s of them, as bpftrace).
 * In ns they are exact. In us or ms a log-linear bucket counts in the row
 * of its lowest value, so a row may hold samples up to one bucket
 * (2^-PK_HIST_SUB_BITS relative, 3.1 %) above its upper edge.
 * Nothing is printed for an empty histogram.
 *
 * Context: any thread, may block.
 * Return: 0, or -EIO if writing failed.
 */
int pk_hist_print(FILE *f, const struct pk_hist *h, const char *title);

#endif /* PK_PROF_HIST_H */
