// SPDX-License-Identifier: MIT
/* bench_patch.c - commit latency: N sites as one batch vs one by one, while T threads run them. */

/*
 * For N sites and T threads that keep calling the N patched functions:
 *
 *   batch_us        flipping all N sites as one pk_batch_commit
 *   one_by_one_us   flipping all N sites with N pk_text_poke calls
 *   ratio_one_by_one_vs_batch   the two measured in the same run
 *   syncs_per_batch cross-core syncs one batch issued (pk_text_stats)
 *   max_stall_us    the longest call of a patched function that a running
 *                   thread saw during a window of back-to-back batch
 *                   commits, not counting calls during which it lost its
 *                   core (see runner()); max_stall_idle_us the same over a
 *                   window as long with nothing committed
 *   max_commit_us   the longest commit of that window of back-to-back
 *                   commits during which the committing thread kept its
 *                   core (the runners' rule), and ratio_max_stall_vs_commit
 *                   the two maxima
 *                   divided, per window: "no running thread stalls longer
 *                   than one commit" compares like with like (both are the
 *                   worst of many samples under the same interference from
 *                   the machine), which a worst stall against a median
 *                   commit does not
 *
 * What a stall is made of, measured on a 2-core VM (2026-11-30): a trapped
 * call costs a few microseconds (most trapped calls do not cross 4 us), a
 * sync IPI landing on the running thread costs it 9-13 us (median; the
 * hypervisor's cost for an IPI to a running vCPU), and the worst calls,
 * trapped or not, are the machine's: 90-120 us appear with nothing
 * committed at all.
 *
 * The running threads are niced to 19: they keep both cores busy and are on
 * a core when a sync happens, but the committing thread is not queued behind
 * 64 spinners, which would measure the scheduler rather than the patching.
 */
#include <pthread.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "bench.h"
#include "codegen.h"
#include "probekit.h"

static struct cg cg;
static volatile int stop_runners;
static volatile int measuring;
static volatile unsigned window;	/* bumped by the main thread per window */
static double max_gap_ns;	/* max over threads; reset by the main thread */
static int state;

/* Context switches of the calling thread so far. */
static long switches(void)
{
	struct rusage ru;

	getrusage(RUSAGE_THREAD, &ru);
	return ru.ru_nvcsw + ru.ru_nivcsw;
}

/*
 * A stall is one call of a patched function that took long although the
 * thread kept its core (no context switch during the call): the cost that
 * patching adds, e.g. a trap through the SIGTRAP handler. Time spent waiting
 * for a core is the scheduler's, and is left out.
 */
static void *runner(void *arg)
{
	double my_max = 0;
	size_t i = (size_t)arg;
	unsigned my_window = 0;

	setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
	while (!stop_runners) {
		long sw0, sw1;
		double t0, t1;

		i = (i + 1) % cg.n;
		if (!measuring) {
			bench_keep(cg_call(&cg, i));
			continue;
		}
		if (my_window != window) {
			my_window = window;
			my_max = 0;
		}
		sw0 = switches();
		t0 = bench_now_ns();
		bench_keep(cg_call(&cg, i));
		t1 = bench_now_ns();
		sw1 = switches();
		if (sw0 == sw1 && t1 - t0 > my_max) {
			my_max = t1 - t0;
			if (my_max > max_gap_ns) /* racy max: a report, not a sum */
				max_gap_ns = my_max;
		}
	}
	return NULL;
}

static double flip_batch(void)
{
	struct pk_batch *b;
	uint8_t old[5], nw[5];
	double t0, t1;

	state = !state;
	t0 = bench_now_ns();
	if (pk_batch_create(&b))
		abort();
	for (size_t i = 0; i < cg.n; i++) {
		cg_site_bytes(&cg, i, !state, old);
		cg_site_bytes(&cg, i, state, nw);
		pk_batch_add(b, cg_fn(&cg, i), nw, 5, old, 0);
	}
	if (pk_batch_commit(b) != (int)cg.n) {
		fprintf(stderr, "bench_patch: batch commit failed\n");
		exit(1);
	}
	pk_batch_free(b);
	t1 = bench_now_ns();
	return (t1 - t0) / 1e3;
}

static double flip_one_by_one(void)
{
	uint8_t old[5], nw[5];
	double t0, t1;

	state = !state;
	t0 = bench_now_ns();
	for (size_t i = 0; i < cg.n; i++) {
		cg_site_bytes(&cg, i, !state, old);
		cg_site_bytes(&cg, i, state, nw);
		if (pk_text_poke(cg_fn(&cg, i), nw, 5, old, 0) != 1) {
			fprintf(stderr, "bench_patch: poke failed\n");
			exit(1);
		}
	}
	t1 = bench_now_ns();
	return (t1 - t0) / 1e3;
}

static uint64_t syncs_now(void)
{
	struct pk_text_stats st = { .sz = sizeof(st) };

	pk_text_stats(&st);
	return st.syncs;
}

static void one_case(size_t n, int threads)
{
	struct bench_series batch = { 0 }, single = { 0 }, ratio = { 0 },
			    syncs = { 0 }, stall = { 0 }, idle = { 0 },
			    maxc = { 0 }, sratio = { 0 };
	pthread_t th[64];
	char cas[64];

	if (cg_create(&cg, CG_JMP, n, 32, 0)) {
		perror("mmap");
		exit(1);
	}
	state = 0;
	stop_runners = 0;
	for (int t = 0; t < threads; t++)
		pthread_create(&th[t], NULL, runner, (void *)(size_t)(t * 7));
	usleep(20000);

	for (int r = 0; r < bench_opts.runs; r++) {
		double b, s, worst = 0, idle_ms = bench_opts.quick ? 5 : 20;
		uint64_t s0;

		if (threads) {
			max_gap_ns = 0;
			window++;
			measuring = 1;
			usleep((useconds_t)(idle_ms * 1000));
			measuring = 0;
			bench_add(&idle, max_gap_ns / 1e3);
			/* Stalls: a window of back-to-back batches, as long. */
			max_gap_ns = 0;
			window++;
			measuring = 1;
			for (double end = bench_now_ns() + idle_ms * 1e6;
			     bench_now_ns() < end;) {
				long sw0 = switches();
				double c = flip_batch();

				if (switches() == sw0 && c > worst)
					worst = c;
			}
			measuring = 0;
			bench_add(&stall, max_gap_ns / 1e3);
			if (worst > 0) {	/* some commit kept its core */
				bench_add(&maxc, worst);
				bench_add(&sratio, max_gap_ns / 1e3 / worst);
			}
		}
		s0 = syncs_now();
		b = flip_batch();
		bench_add(&syncs, (double)(syncs_now() - s0));
		b = (b + flip_batch()) / 2;	/* there and back */
		s = flip_one_by_one();
		bench_add(&batch, b);
		bench_add(&single, s);
		bench_add(&ratio, s / b);
	}
	stop_runners = 1;
	for (int t = 0; t < threads; t++)
		pthread_join(th[t], NULL);
	cg_destroy(&cg);

	snprintf(cas, sizeof(cas), "sites=%zu,threads=%d", n, threads);
	bench_report("patch", cas, "batch_us", "us", &batch);
	bench_report("patch", cas, "one_by_one_us", "us", &single);
	bench_report("patch", cas, "ratio_one_by_one_vs_batch", "x", &ratio);
	bench_report("patch", cas, "syncs_per_batch", "count", &syncs);
	if (threads) {
		bench_report("patch", cas, "max_stall_us", "us", &stall);
		bench_report("patch", cas, "max_stall_idle_us", "us", &idle);
		if (maxc.n) {
			bench_report("patch", cas, "max_commit_us", "us", &maxc);
			bench_report("patch", cas, "ratio_max_stall_vs_commit",
				     "x", &sratio);
		} else {
			bench_skip("patch", cas, "max_commit_us",
				   "every commit lost its core to a runner");
			bench_skip("patch", cas, "ratio_max_stall_vs_commit",
				   "every commit lost its core to a runner");
		}
	} else {
		bench_skip("patch", cas, "max_stall_us", "no thread runs the code");
	}
}

int main(int argc, char **argv)
{
	static const size_t sites[] = { 1, 16, 256, 4096 };
	static const int threads[] = { 0, 2, 64 };
	struct pk_text_stats st = { .sz = sizeof(st) };

	bench_init(argc, argv);
	printf("patch: commit latency, N sites as one batch vs one by one "
	       "(median of %d runs)\n", bench_opts.runs);
	for (size_t t = 0; t < sizeof(threads) / sizeof(threads[0]); t++)
		for (size_t s = 0; s < sizeof(sites) / sizeof(sites[0]); s++)
			one_case(sites[s], threads[t]);
	pk_text_stats(&st);
	printf("  sync method: %s; %llu commits, %llu write calls, %llu "
	       "trapped threads sent on\n", st.sync_method,
	       (unsigned long long)st.commits, (unsigned long long)st.writes,
	       (unsigned long long)st.traps);
	return 0;
}
