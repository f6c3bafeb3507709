// SPDX-License-Identifier: MIT
/* test_prof_hist.c - log-linear histograms: percentiles within the stated bound, exact merges, edge values, the printout. */
#include <math.h>
#include <pthread.h>
#include <sys/mman.h>

#include "harness.h"
#include "hist.h"

#define PK_ARRAY_SIZE_T(a) (sizeof(a) / sizeof((a)[0]))

/* A slot's layout is shared by the agent and the command: pinned. */
_Static_assert(PK_HIST_BUCKETS == 1920, "2^5 sub-buckets over 64-bit values");
_Static_assert(sizeof(struct pk_hist) == 15392, "struct pk_hist: 4 counters + 1920 buckets");

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* The nearest-rank percentile of sorted @v. */
static uint64_t exact_at(const uint64_t *v, size_t n, double q)
{
	size_t rank = (size_t)ceil(q * (double)n);

	return v[(rank ? rank : 1) - 1];
}

/* Every value's bucket holds it, and buckets tile the range without gaps. */
static void check_buckets(void)
{
	uint64_t edges[] = { 0, 1, 2, 31, 32, 33, 63, 64, 65, 127, 128, 1000,
			     1ull << 40, (1ull << 40) + 12345, UINT64_MAX - 1,
			     UINT64_MAX };
	int bad = 0;

	for (size_t i = 0; i < PK_ARRAY_SIZE_T(edges); i++) {
		unsigned int b = pk_hist_index(edges[i]);

		bad += b >= PK_HIST_BUCKETS || pk_hist_bucket_low(b) > edges[i] ||
		       pk_hist_bucket_high(b) < edges[i];
	}
	ASSERT_EQ(bad, 0, "edge values fall in their buckets");
	ASSERT_EQ(pk_hist_index(UINT64_MAX), PK_HIST_BUCKETS - 1, "UINT64_MAX: the last bucket");
	ASSERT_EQ(pk_hist_bucket_high(PK_HIST_BUCKETS - 1), UINT64_MAX, "the last bucket ends at UINT64_MAX");
	bad = 0;
	for (unsigned int b = 1; b < PK_HIST_BUCKETS; b++)
		bad += pk_hist_bucket_low(b) != pk_hist_bucket_high(b - 1) + 1 ||
		       pk_hist_index(pk_hist_bucket_low(b)) != b ||
		       pk_hist_index(pk_hist_bucket_high(b)) != b;
	ASSERT_EQ(bad, 0, "buckets tile 0..UINT64_MAX");
	bad = 0;
	/* The width bound the error bound rests on: w <= L * 2^-K. */
	for (unsigned int b = 2 * PK_HIST_SUB; b < PK_HIST_BUCKETS; b++) {
		uint64_t w = pk_hist_bucket_high(b) - pk_hist_bucket_low(b) + 1;

		bad += (double)w > (double)pk_hist_bucket_low(b) / PK_HIST_SUB;
	}
	ASSERT_EQ(bad, 0, "bucket width <= low / 2^K");
}

static void check_edges(void)
{
	static struct pk_hist h;

	pk_hist_reset(&h);
	ASSERT_EQ(pk_hist_value_at(&h, 0.5), 0, "empty: p50 0");
	ASSERT_EQ(pk_hist_min(&h), 0, "empty: min 0");
	pk_hist_record(&h, 0);
	pk_hist_record(&h, 1);
	pk_hist_record(&h, UINT64_MAX);
	pk_hist_record(&h, UINT64_MAX - 1);
	ASSERT_EQ(h.count, 4, "count");
	ASSERT_EQ(pk_hist_min(&h), 0, "min 0");
	ASSERT_TRUE(h.max == UINT64_MAX, "max UINT64_MAX");
	ASSERT_EQ(pk_hist_value_at(&h, 0.25), 0, "p25: 0 exactly");
	ASSERT_EQ(pk_hist_value_at(&h, 0.5), 1, "p50: 1 exactly");
	ASSERT_TRUE(pk_hist_value_at(&h, 0.75) >= UINT64_MAX - (UINT64_MAX >> (PK_HIST_SUB_BITS + 1)),
		    "p75 near UINT64_MAX - 1");
	ASSERT_TRUE(pk_hist_value_at(&h, 1.0) == UINT64_MAX, "p100: UINT64_MAX");
	ASSERT_EQ(pk_hist_value_at(&h, 0.0), 0, "p0: the minimum");
	ASSERT_EQ(pk_hist_value_at(&h, 0.0 / 0.0), 0, "NaN: the minimum, no undefined conversion");

	/* Zero-filled memory is an empty histogram, and min comes out right. */
	memset(&h, 0, sizeof(h));
	pk_hist_record(&h, 777);
	ASSERT_EQ(pk_hist_min(&h), 777, "zeroed slot: min");
	ASSERT_EQ(pk_hist_value_at(&h, 0.5), 777, "one sample: clamped to it");
}

/* Percentiles against exact ones from sorted samples, for several distributions. */
static void check_percentiles(void)
{
	static const double qs[] = { 0.5, 0.9, 0.99, 0.999, 0.0001, 1.0 };
	enum { N = 200000 };
	static uint64_t v[N];
	static struct pk_hist h;
	double worst = 0;

	for (int dist = 0; dist < 4; dist++) {
		pk_hist_reset(&h);
		for (size_t i = 0; i < N; i++) {
			uint64_t x = next();

			switch (dist) {
			case 0: x %= 1000; break;			/* small, some exact */
			case 1: x = 100 + x % 1000000; break;		/* uniform to 1 ms */
			case 2: x >>= 20 + x % 44; break;		/* log-uniform, wide */
			default: x = (x % 16 == 0) ? 5000000 + x % 100000 : 250 + x % 50; break; /* bimodal */
			}
			v[i] = x;
			pk_hist_record(&h, x);
		}
		qsort(v, N, sizeof(v[0]), cmp_u64);
		ASSERT_EQ(pk_hist_min(&h), v[0], "min exact");
		ASSERT_TRUE(h.max == v[N - 1], "max exact");
		for (size_t i = 0; i < PK_ARRAY_SIZE_T(qs); i++) {
			uint64_t e = exact_at(v, N, qs[i]), g = pk_hist_value_at(&h, qs[i]);
			double err = e ? fabs((double)g - (double)e) / (double)e : (double)g;

			if (err > worst)
				worst = err;
			if (!ASSERT_TRUE(err <= PK_HIST_REL_ERR, "percentile within 2^-(K+1)"))
				fprintf(stderr, "  dist %d q %g: exact %" PRIu64 " got %" PRIu64 " (%.4f %%)\n",
					dist, qs[i], e, g, err * 100);
		}
	}
	printf("worst percentile error: %.3f %% (bound %.4f %%)\n", worst * 100, PK_HIST_REL_ERR * 100);
}

/* Merging per-thread histograms equals recording everything into one. */
static void check_merge(void)
{
	static struct pk_hist part[4], all, sum;

	pk_hist_reset(&all);
	pk_hist_reset(&sum);
	for (int i = 0; i < 4; i++)
		pk_hist_reset(&part[i]);
	for (int i = 0; i < 100000; i++) {
		uint64_t x = next() >> (next() % 64);

		pk_hist_record(&part[i % 4], x);
		pk_hist_record(&all, x);
	}
	pk_hist_record(&part[2], 0);
	pk_hist_record(&all, 0);
	for (int i = 0; i < 4; i++)
		pk_hist_merge(&sum, &part[i]);
	ASSERT_MEM_EQ(&sum, &all, sizeof(all), "4 merged parts == all recorded in one");
	ASSERT_EQ(pk_hist_min(&sum), 0, "merged min from the part that had it");

	{
		static struct pk_hist a, b, one, m;
		uint64_t xs[] = { 5, 70000, 3, 1ull << 50, 999, 12 };

		pk_hist_reset(&a), pk_hist_reset(&b), pk_hist_reset(&one), pk_hist_reset(&m);
		for (size_t i = 0; i < PK_ARRAY_SIZE_T(xs); i++) {
			pk_hist_record(i & 1 ? &a : &b, xs[i]);
			pk_hist_record(&one, xs[i]);
		}
		pk_hist_merge(&m, &a);
		pk_hist_merge(&m, &b);
		ASSERT_MEM_EQ(&m, &one, sizeof(one), "merge == recording all (whole struct)");
	}
}

/*
 * The intended layout: one histogram per thread in a zero-filled shared
 * mapping, written by threads of this process and of forked children
 * without locks, merged by the parent: equal to recording everything once.
 */
enum { SLOTS = 4, PER_SLOT = 200000 };

static uint64_t slot_value(int slot, int i)
{
	uint64_t x = (uint64_t)(slot + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)i * 0xbf58476d1ce4e5b9ull;

	x ^= x >> 31;
	return x >> (x % 50);
}

static void fill_slot(struct pk_hist *h, int slot)
{
	for (int i = 0; i < PER_SLOT; i++)
		pk_hist_record(h, slot_value(slot, i));
}

struct slot_arg {
	struct pk_hist *h;
	int slot;
};

static void *slot_thread(void *p)
{
	struct slot_arg *a = p;

	fill_slot(a->h, a->slot);
	return NULL;
}

static void check_shared(void)
{
	struct pk_hist *slots = mmap(NULL, SLOTS * sizeof(*slots), PROT_READ | PROT_WRITE,
				     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	static struct pk_hist sum, all;
	struct slot_arg args[2];
	pthread_t th[2];
	pid_t kids[2];
	int st, ok = 1;

	if (!ASSERT_TRUE(slots != MAP_FAILED, "shared mapping"))
		return;
	for (int k = 0; k < 2; k++) {
		kids[k] = fork();
		if (kids[k] == 0) {
			fill_slot(&slots[2 + k], 2 + k);
			_exit(0);
		}
	}
	for (int t = 0; t < 2; t++) {
		args[t] = (struct slot_arg){ &slots[t], t };
		pthread_create(&th[t], NULL, slot_thread, &args[t]);
	}
	for (int t = 0; t < 2; t++)
		pthread_join(th[t], NULL);
	for (int k = 0; k < 2; k++)
		ok &= waitpid(kids[k], &st, 0) == kids[k] && WIFEXITED(st) && !WEXITSTATUS(st);
	ASSERT_TRUE(ok, "children recorded and exited 0");
	pk_hist_reset(&sum);
	pk_hist_reset(&all);
	for (int s = 0; s < SLOTS; s++) {
		pk_hist_merge(&sum, &slots[s]);
		fill_slot(&all, s);
	}
	ASSERT_EQ(sum.count, SLOTS * PER_SLOT, "merged count: 2 threads + 2 processes");
	ASSERT_MEM_EQ(&sum, &all, sizeof(all), "threads' and processes' slots merged == one recording");
	munmap(slots, SLOTS * sizeof(*slots));
}

/* An interval's histogram from two copies of one slot (probekit -I). */
static void check_sub(void)
{
	static struct pk_hist slot, before, only_b, d;
	enum { NA = 30000, NB = 50000 };
	static uint64_t b[NB];
	uint64_t bmin = UINT64_MAX, bmax = 0;
	int bad = 0;

	pk_hist_reset(&slot), pk_hist_reset(&only_b);
	for (int i = 0; i < NA; i++)
		pk_hist_record(&slot, next() % 10000000);
	before = slot;
	for (int i = 0; i < NB; i++) {
		b[i] = 1000 + next() % 100000;
		bmin = b[i] < bmin ? b[i] : bmin;
		bmax = b[i] > bmax ? b[i] : bmax;
		pk_hist_record(&slot, b[i]);
		pk_hist_record(&only_b, b[i]);
	}
	pk_hist_sub(&d, &slot, &before);
	ASSERT_MEM_EQ(d.bucket, only_b.bucket, sizeof(d.bucket), "interval buckets exact");
	ASSERT_EQ(d.count, NB, "interval count exact");
	ASSERT_TRUE(d.sum == only_b.sum, "interval sum exact");
	ASSERT_TRUE(pk_hist_min(&d) <= bmin && pk_hist_index(pk_hist_min(&d)) == pk_hist_index(bmin),
		    "interval min: in the true minimum's bucket, not above it");
	ASSERT_TRUE(d.max >= bmax && pk_hist_index(d.max) == pk_hist_index(bmax),
		    "interval max: in the true maximum's bucket, not below it");
	qsort(b, NB, sizeof(b[0]), cmp_u64);
	for (double q = 0.1; q < 1.0; q += 0.1) {
		uint64_t e = exact_at(b, NB, q), g = pk_hist_value_at(&d, q);

		bad += fabs((double)g - (double)e) > (double)e * PK_HIST_REL_ERR;
	}
	ASSERT_EQ(bad, 0, "interval percentiles within the bound");
	/* First interval (empty before): min and max exact; no new records: empty. */
	pk_hist_reset(&before);
	pk_hist_sub(&d, &only_b, &before);
	ASSERT_TRUE(pk_hist_min(&d) == bmin && d.max == bmax, "first interval: min, max exact");
	pk_hist_sub(&d, &only_b, &only_b);
	ASSERT_TRUE(d.count == 0 && pk_hist_min(&d) == 0 && d.max == 0, "nothing new: empty");
	/* In place, as the command would do it. */
	d = slot;
	pk_hist_sub(&d, &d, &slot);
	ASSERT_EQ(d.count, 0, "in place");
}

static void check_print(void)
{
	static struct pk_hist h;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	pk_hist_reset(&h);
	for (int i = 0; i < 100; i++)
		pk_hist_record(&h, 3000 + i);	/* 3 us */
	for (int i = 0; i < 25; i++)
		pk_hist_record(&h, 40000);	/* 40 us */
	f = open_memstream(&buf, &len);
	ASSERT_OK(pk_hist_print(f, &h, "@f"), "print");
	fclose(f);
	printf("%s", buf);
	ASSERT_TRUE(strstr(buf, "@f (us):\n") != NULL, "unit us chosen for a 40 us max");
	ASSERT_TRUE(strstr(buf, "[2, 4)                100 |@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@|\n") != NULL,
		    "3 us row: full bar");
	ASSERT_TRUE(strstr(buf, "[32, 64)               25 |@@@@@@@@@@@@@                                       |\n") != NULL,
		    "40 us row: quarter bar");
	ASSERT_TRUE(strstr(buf, "[16, 32)                0 |") != NULL, "empty rows between are shown");
	free(buf);

	pk_hist_reset(&h);
	pk_hist_record(&h, 0);
	pk_hist_record(&h, 1);
	pk_hist_record(&h, 5000);
	buf = NULL;
	f = open_memstream(&buf, &len);
	ASSERT_OK(pk_hist_print(f, &h, NULL), "print ns");
	fclose(f);
	printf("%s", buf);
	ASSERT_TRUE(!strncmp(buf, "[0]                     1 |", 27), "ns: [0] first");
	ASSERT_TRUE(strstr(buf, "[4K, 8K)                1 |") != NULL, "ns: K suffix");
	free(buf);
}

int main(void)
{
	check_buckets();
	check_edges();
	check_percentiles();
	check_merge();
	check_shared();
	check_sub();
	check_print();
	return t_exit();
}
