// SPDX-License-Identifier: MIT
/* bench_key.c - a disabled static-key site vs an empty loop vs a volatile-flag check, hot and cold. */

/*
 * Hot: a tight loop (an empty asm per iteration keeps it a loop) with
 *   empty_loop     nothing else,
 *   disabled_site  if (pk_branch_unlikely(&key)) counter++;  (key false)
 *   flag_check     if (flag) counter++;                        (volatile int 0)
 * Everything stays cached, so both costs hide in the loop's own cycles.
 *
 * Cold: every iteration of all three variants first flushes the cache line
 * that holds both the flag and the key (clflush + mfence), the case of a
 * hook in a large program that rarely runs. The flag check then pays a cache
 * miss; a NOP site reads nothing. Overhead = variant - cold empty loop.
 * The key sits on the flag's line so that a fallback-mode site (which loads
 * key->enabled) pays the same miss as the flag: the table says which mode ran.
 *
 * Ratios and overheads are computed within each run, then reduced to their
 * median (bench.h).
 */
#include <immintrin.h>
#include <stdio.h>

#include "bench.h"
#include "probekit.h"

#define NOINLINE __attribute__((noinline))

static struct {
	struct pk_key key;
	volatile int flag;
} __attribute__((aligned(64))) hook = { PK_KEY_INIT_FALSE, 0 };

static NOINLINE unsigned long hot_empty(unsigned long n)
{
	unsigned long c = 0;

	for (unsigned long i = 0; i < n; i++)
		__asm__ volatile("");
	return c;
}

static NOINLINE unsigned long hot_site(unsigned long n)
{
	unsigned long c = 0;

	for (unsigned long i = 0; i < n; i++) {
		__asm__ volatile("");
		if (pk_branch_unlikely(&hook.key))
			c++;
	}
	return c;
}

static NOINLINE unsigned long hot_flag(unsigned long n)
{
	unsigned long c = 0;

	for (unsigned long i = 0; i < n; i++) {
		__asm__ volatile("");
		if (hook.flag)
			c++;
	}
	return c;
}

static inline void flush_line(void)
{
	_mm_clflush((const void *)&hook);
	_mm_mfence();
}

static NOINLINE unsigned long cold_empty(unsigned long n)
{
	unsigned long c = 0;

	for (unsigned long i = 0; i < n; i++) {
		flush_line();
		__asm__ volatile("");
	}
	return c;
}

static NOINLINE unsigned long cold_site(unsigned long n)
{
	unsigned long c = 0;

	for (unsigned long i = 0; i < n; i++) {
		flush_line();
		__asm__ volatile("");
		if (pk_branch_unlikely(&hook.key))
			c++;
	}
	return c;
}

static NOINLINE unsigned long cold_flag(unsigned long n)
{
	unsigned long c = 0;

	for (unsigned long i = 0; i < n; i++) {
		flush_line();
		__asm__ volatile("");
		if (hook.flag)
			c++;
	}
	return c;
}

static double ns_per_iter(unsigned long (*fn)(unsigned long), unsigned long n)
{
	double t0 = bench_now_ns();
	unsigned long c = fn(n);

	bench_keep(c);
	return (bench_now_ns() - t0) / (double)n;
}

/*
 * One run: the three variants interleaved in ROUNDS slices, so that a drift
 * of the machine's speed (frequency, a neighbour) hits all three alike.
 */
#define ROUNDS 16
static void run3(unsigned long (*const fn[3])(unsigned long), unsigned long n,
		 double out[3])
{
	double sum[3] = { 0, 0, 0 };

	for (int r = 0; r < ROUNDS; r++)
		for (int v = 0; v < 3; v++)
			sum[v] += ns_per_iter(fn[v], n / ROUNDS);
	for (int v = 0; v < 3; v++)
		out[v] = sum[v] / ROUNDS;
}

int main(int argc, char **argv)
{
	struct bench_series h_empty = { 0 }, h_site = { 0 }, h_flag = { 0 };
	struct bench_series c_empty = { 0 }, c_site = { 0 }, c_flag = { 0 };
	struct bench_series r_site = { 0 }, r_flag = { 0 };
	struct bench_series o_site = { 0 }, o_flag = { 0 };
	struct bench_series oc_site = { 0 }, oc_flag = { 0 };
	struct bench_series patched = { 0 };
	unsigned long hot_n, cold_n;
	bool is_patched = pk_key_patching();

	bench_init(argc, argv);
	hot_n = bench_opts.quick ? 50000000UL : 200000000UL;
	cold_n = bench_opts.quick ? 100000UL : 500000UL;

	printf("key: disabled static-key site vs empty loop vs volatile flag (%d runs, %lu hot / %lu cold iterations)\n",
	       bench_opts.runs, hot_n, cold_n);
	printf("  sites: %s\n",
	       is_patched ? "patched (a disabled site is a 5-byte NOP)"
			  : "FALLBACK mode (PROBEKIT_NOPATCH=1 or patching refused): a disabled site is a load-and-branch, like the flag");

	/* warm up: page in the code, settle the clock */
	ns_per_iter(hot_empty, hot_n / 10);
	ns_per_iter(hot_site, hot_n / 10);
	ns_per_iter(hot_flag, hot_n / 10);

	for (int r = 0; r < bench_opts.runs; r++) {
		static unsigned long (*const hot[3])(unsigned long) = {
			hot_empty, hot_site, hot_flag
		};
		static unsigned long (*const cold[3])(unsigned long) = {
			cold_empty, cold_site, cold_flag
		};
		double h[3], c[3];

		run3(hot, hot_n, h);
		run3(cold, cold_n, c);
		double he = h[0], hs = h[1], hf = h[2];
		double ce = c[0], cs = c[1], cf = c[2];

		bench_add(&h_empty, he);
		bench_add(&h_site, hs);
		bench_add(&h_flag, hf);
		bench_add(&r_site, hs / he);
		bench_add(&r_flag, hf / he);
		bench_add(&o_site, hs - he);
		bench_add(&o_flag, hf - he);
		bench_add(&c_empty, ce);
		bench_add(&c_site, cs);
		bench_add(&c_flag, cf);
		bench_add(&oc_site, cs - ce);
		bench_add(&oc_flag, cf - ce);
		bench_add(&patched, is_patched ? 1 : 0);
	}

	bench_report("key", "sites", "patched", "bool", &patched);
	bench_report("key", "empty_loop", "ns_per_iter", "ns", &h_empty);
	bench_report("key", "disabled_site", "ns_per_iter", "ns", &h_site);
	bench_report("key", "flag_check", "ns_per_iter", "ns", &h_flag);
	bench_report("key", "disabled_site", "ns_overhead", "ns", &o_site);
	bench_report("key", "flag_check", "ns_overhead", "ns", &o_flag);
	bench_report("key", "disabled_site", "ratio_vs_empty_loop", "x", &r_site);
	bench_report("key", "flag_check", "ratio_vs_empty_loop", "x", &r_flag);
	bench_report("key", "empty_loop_cold", "ns_per_iter", "ns", &c_empty);
	bench_report("key", "disabled_site_cold", "ns_per_iter", "ns", &c_site);
	bench_report("key", "flag_check_cold", "ns_per_iter", "ns", &c_flag);
	bench_report("key", "disabled_site_cold", "ns_overhead", "ns", &oc_site);
	bench_report("key", "flag_check_cold", "ns_overhead", "ns", &oc_flag);
	if (!is_patched)
		printf("  (fallback mode: disabled_site figures measure a load-and-branch, not a NOP)\n");
	return 0;
}
