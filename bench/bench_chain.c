// SPDX-License-Identifier: MIT
/* bench_chain.c - pk_notify() cost with 0, 1, 4 and 16 handlers, next to the call removed (the seeds' table). */
#include <pthread.h>

#include "bench.h"
#include "probekit.h"

/*
 * Figures (bench "chain"):
 *   handlers=0            ratio_vs_call_removed  loop of pk_notify() on an empty
 *                                                chain / the same loop without it
 *   handlers=N            ns_per_call            N = 1, 4, 16; registered thread
 *   handlers=16           ns_per_handler         (ns(16) - ns(1)) / 15, from the
 *                                                same run
 *   handlers=4,unregistered ns_per_call          a thread that never called
 *                                                pk_thread_register() (per-chain
 *                                                reader counts)
 * Ratios and differences are computed within each run, then reduced to the
 * median of the runs.
 */

static PK_CHAIN_ATOMIC_DEFINE(c0);
static PK_CHAIN_ATOMIC_DEFINE(c1);
static PK_CHAIN_ATOMIC_DEFINE(c4);
static PK_CHAIN_ATOMIC_DEFINE(c16);

__attribute__((noinline)) static int h_done(struct pk_notifier *nb,
					    unsigned long action, void *data)
{
	(void)nb;
	(void)action;
	(void)data;
	return PK_DONE;
}

static struct pk_notifier nbs[1 + 4 + 16];

static long iters;	/* calls per loop with handlers */
static long iters0;	/* iterations of the empty and handlers=0 loops */

/*
 * Each loop is its own noinline function with the same shape (the count in
 * a register, an empty asm as the body, as in bench_key.c), so the only
 * difference between "removed" and "handlers=0" is the pk_notify() site.
 */
__attribute__((noinline)) static double loop_removed(long n)
{
	double t0 = bench_now_ns();

	for (long i = 0; i < n; i++)
		__asm__ volatile("");
	return (bench_now_ns() - t0) / n;
}

#define LOOP_NOTIFY(name, chain)                                               \
	__attribute__((noinline)) static double name(long n)                   \
	{                                                                      \
		double t0 = bench_now_ns();                                    \
                                                                               \
		for (long i = 0; i < n; i++) {                                 \
			__asm__ volatile("");                                  \
			(void)pk_notify(&chain, (unsigned long)i, NULL);       \
		}                                                              \
		return (bench_now_ns() - t0) / n;                              \
	}
LOOP_NOTIFY(loop_c0, c0)
LOOP_NOTIFY(loop_c1, c1)
LOOP_NOTIFY(loop_c4, c4)
LOOP_NOTIFY(loop_c16, c16)

/*
 * Within a run, each loop is timed ROUNDS times, interleaved with the others,
 * and its fastest round kept: interference from other processes only ever
 * adds time, and interleaving exposes each variant to the same machine state.
 */
#define ROUNDS 5

static double min2(double a, double b)
{
	return a < b ? a : b;
}

static void *unregistered_thread(void *arg)
{
	double *out = arg;

	loop_c4(iters / 4); /* warm up */
	*out = 1e30;
	for (int i = 0; i < ROUNDS; i++)
		*out = min2(*out, loop_c4(iters / ROUNDS));
	return NULL;
}

int main(int argc, char **argv)
{
	struct bench_series ratio0 = { 0 }, ns1 = { 0 }, ns4 = { 0 },
			    ns16 = { 0 }, per_handler = { 0 }, ns4u = { 0 };
	int k = 0, ret = 0, have_handlers = 1;

	bench_init(argc, argv);
	iters = bench_opts.quick ? 2000000 : 20000000;
	iters0 = iters * 20;	/* a NOP-sized loop needs more to time */

	for (int i = 0; i < 21; i++)
		nbs[i].call = h_done;
	for (int i = 0; i < 1 && !ret; i++)
		ret = pk_chain_register(&c1, &nbs[k++]);
	for (int i = 0; i < 4 && !ret; i++)
		ret = pk_chain_register(&c4, &nbs[k++]);
	for (int i = 0; i < 16 && !ret; i++)
		ret = pk_chain_register(&c16, &nbs[k++]);
	if (ret) {
		have_handlers = 0;
		fprintf(stderr, "bench_chain: pk_chain_register: %d\n", ret);
	}
	pk_thread_register();

	/* Warm up caches and branch predictors once. */
	loop_removed(iters0 / 4);
	loop_c0(iters0 / 4);

	for (int r = 0; r < bench_opts.runs; r++) {
		double removed = 1e30, empty = 1e30;
		double t1 = 1e30, t4 = 1e30, t16 = 1e30;

		for (int i = 0; i < ROUNDS; i++) {
			removed = min2(removed, loop_removed(iters0 / ROUNDS));
			empty = min2(empty, loop_c0(iters0 / ROUNDS));
			if (have_handlers) {
				t1 = min2(t1, loop_c1(iters / ROUNDS));
				t4 = min2(t4, loop_c4(iters / ROUNDS));
				t16 = min2(t16, loop_c16(iters / ROUNDS));
			}
		}
		bench_add(&ratio0, empty / removed);
		if (have_handlers) {
			double tu = 0;

			/* ns_per_call: the loop's own cost subtracted. */
			t1 -= removed;
			t4 -= removed;
			t16 -= removed;
			pthread_t th;

			bench_add(&ns1, t1);
			bench_add(&ns4, t4);
			bench_add(&ns16, t16);
			bench_add(&per_handler, (t16 - t1) / 15);
			if (pthread_create(&th, NULL, unregistered_thread, &tu) == 0) {
				pthread_join(th, NULL);
				bench_add(&ns4u, tu - removed);
			}
		}
	}

	printf("chain: pk_notify() on an atomic chain, %ld calls per run, %ld "
	       "for handlers=0 (ns_per_call excludes the empty loop; key sites %s)\n",
	       iters, iters0, pk_key_patching() ? "patched" : "load-and-branch");
	bench_report("chain", "handlers=0", "ratio_vs_call_removed", "x", &ratio0);
	if (have_handlers) {
		bench_report("chain", "handlers=1", "ns_per_call", "ns", &ns1);
		bench_report("chain", "handlers=4", "ns_per_call", "ns", &ns4);
		bench_report("chain", "handlers=16", "ns_per_call", "ns", &ns16);
		bench_report("chain", "handlers=16", "ns_per_handler", "ns",
			     &per_handler);
		if (ns4u.n)
			bench_report("chain", "handlers=4,unregistered",
				     "ns_per_call", "ns", &ns4u);
		else
			bench_skip("chain", "handlers=4,unregistered",
				   "ns_per_call", "cannot create a thread");
	} else {
		static const char *const cases[] = { "handlers=1", "handlers=4",
						     "handlers=16" };
		const char *why = "pk_chain_register failed (static key layer unavailable)";

		for (int i = 0; i < 3; i++)
			bench_skip("chain", cases[i], "ns_per_call", why);
		bench_skip("chain", "handlers=16", "ns_per_handler", why);
		bench_skip("chain", "handlers=4,unregistered", "ns_per_call", why);
	}

	for (int i = 0; i < 21; i++) {
		struct pk_chain *c = i < 1 ? &c1 : i < 5 ? &c4 : &c16;

		if (have_handlers)
			pk_chain_unregister(c, &nbs[i]);
	}
	return 0;
}
