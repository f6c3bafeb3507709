// SPDX-License-Identifier: MIT
/* hist.c - log-linear histograms: merge, percentiles, the bpftrace-shaped printout (see hist.h). */
#include <errno.h>
#include <string.h>

#include "hist.h"

void pk_hist_reset(struct pk_hist *h)
{
	memset(h, 0, sizeof(*h));
}

void pk_hist_merge(struct pk_hist *dst, const struct pk_hist *src)
{
	for (unsigned int i = 0; i < PK_HIST_BUCKETS; i++)
		dst->bucket[i] += src->bucket[i];
	dst->count += src->count;
	dst->sum += src->sum;
	if (src->min_inv > dst->min_inv)
		dst->min_inv = src->min_inv;
	if (src->max > dst->max)
		dst->max = src->max;
}

void pk_hist_sub(struct pk_hist *d, const struct pk_hist *now, const struct pk_hist *before)
{
	uint64_t count = 0, lo = 0, hi = 0, now_min = pk_hist_min(now), now_max = now->max;
	int first = -1, last = -1;

	for (unsigned int i = 0; i < PK_HIST_BUCKETS; i++) {
		uint64_t c = now->bucket[i] > before->bucket[i] ? now->bucket[i] - before->bucket[i] : 0;

		d->bucket[i] = c;
		count += c;
		if (c) {
			first = first < 0 ? (int)i : first;
			last = (int)i;
		}
	}
	d->sum = now->sum - before->sum;
	d->count = count;
	if (!count) {
		d->min_inv = 0;
		d->max = 0;
		return;
	}
	if (!before->count) {
		lo = now_min;
		hi = now_max;
	} else {
		lo = pk_hist_bucket_low((unsigned int)first);
		hi = pk_hist_bucket_high((unsigned int)last);
		lo = lo < now_min ? now_min : lo;
		hi = hi > now_max ? now_max : hi;
	}
	d->min_inv = ~lo;
	d->max = hi;
}

uint64_t pk_hist_min(const struct pk_hist *h)
{
	return h->count ? ~h->min_inv : 0;
}

double pk_hist_mean(const struct pk_hist *h)
{
	return h->count ? (double)h->sum / (double)h->count : 0.0;
}

uint64_t pk_hist_value_at(const struct pk_hist *h, double q)
{
	uint64_t rank, seen = 0, v;
	unsigned int i;

	if (!h->count)
		return 0;
	if (q >= 1.0)
		return h->max;
	if (!(q > 0.0))		/* 0, negative, NaN: the minimum's bucket */
		q = 0.0;
	/* ceil(q * count), at least 1; a double holds counts below 2^53 exactly. */
	rank = (uint64_t)(q * (double)h->count);
	if ((double)rank < q * (double)h->count)
		rank++;
	if (rank < 1)
		rank = 1;
	for (i = 0; i < PK_HIST_BUCKETS; i++) {
		seen += h->bucket[i];
		if (seen >= rank)
			break;
	}
	if (i == PK_HIST_BUCKETS)	/* a torn copy: count ahead of the buckets */
		return h->max;
	v = pk_hist_bucket_low(i) + (pk_hist_bucket_high(i) - pk_hist_bucket_low(i) + 1) / 2;
	if (v < pk_hist_min(h))
		v = pk_hist_min(h);
	if (v > h->max)
		v = h->max;
	return v;
}

struct pk_hist_unit pk_hist_unit(uint64_t max_ns)
{
	if (max_ns < 10000)
		return (struct pk_hist_unit){ "ns", 1 };
	if (max_ns < 10000000)
		return (struct pk_hist_unit){ "us", 1000 };
	if (max_ns < 10000000000ull)
		return (struct pk_hist_unit){ "ms", 1000000 };
	return (struct pk_hist_unit){ "s", 1000000000 };
}

/* bpftrace's row of value v: [0], [1], [2, 4) ... */
static unsigned int row_of(uint64_t v)
{
	return v ? 64 - __builtin_clzll(v) : 0;
}

/* A power of two as bpftrace labels it: 512, 1K, 2M. */
static void label(char *buf, size_t len, unsigned __int128 x)
{
	static const char sfx[] = " KMGTPE";
	unsigned int k = 0;

	while (x >= 1024 && !(x % 1024) && k < 6) {
		x /= 1024;
		k++;
	}
	if (k)
		snprintf(buf, len, "%llu%c", (unsigned long long)x, sfx[k]);
	else
		snprintf(buf, len, "%llu", (unsigned long long)x);
}

#define PK_HIST_BAR 52

int pk_hist_print(FILE *f, const struct pk_hist *h, const char *title)
{
	struct pk_hist_unit u;
	uint64_t rows[66] = { 0 }, top = 0;
	unsigned int lo = 65, hi = 0, r, i;
	int err = 0;

	if (!h->count)
		return 0;
	u = pk_hist_unit(h->max);
	for (i = 0; i < PK_HIST_BUCKETS; i++) {
		if (!h->bucket[i])
			continue;
		r = row_of(pk_hist_bucket_low(i) / u.ns);
		rows[r] += h->bucket[i];
		lo = r < lo ? r : lo;
		hi = r > hi ? r : hi;
	}
	for (r = lo; r <= hi; r++)
		top = rows[r] > top ? rows[r] : top;
	if (title && fprintf(f, "%s (%s):\n", title, u.name) < 0)
		err = -EIO;
	for (r = lo; r <= hi && !err; r++) {
		char a[24], b[24], head[64];
		unsigned int n = top ? (unsigned int)((unsigned __int128)rows[r] * PK_HIST_BAR / top) : 0;
		char bar[PK_HIST_BAR + 1];

		if (r < 2) {
			snprintf(head, sizeof(head), "[%u]", r);
		} else {
			label(a, sizeof(a), (unsigned __int128)1 << (r - 1));
			label(b, sizeof(b), (unsigned __int128)1 << r);
			snprintf(head, sizeof(head), "[%s, %s)", a, b);
		}
		memset(bar, '@', n);
		memset(bar + n, ' ', PK_HIST_BAR - n);
		bar[PK_HIST_BAR] = 0;
		if (fprintf(f, "%-16s %8llu |%s|\n", head, (unsigned long long)rows[r], bar) < 0)
			err = -EIO;
	}
	return err;
}
