// SPDX-License-Identifier: MIT
/* stress_fault_watch2.c - two threads write one watched variable (and unwatched bytes of its page): what each mechanism guarantees about hits. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "probekit.h"
#include "harness.h"

/*
 * Every write stores a value no other write stores: (thread + 1) << 32 | n,
 * n counting from 1, so a hit's new value names the write it reports.
 *
 * Hardware breakpoints: every write is reported exactly once, on the thread
 * that made it (counted per thread). The value a hit reports is what memory
 * holds when the handler reads it, so with two writers it may be the other
 * thread's newer value: values are checked with one writer only.
 *
 * Page protection, accesses moved to the page's alias (the page is never
 * opened; pk_fault_stats().watch_open_steps stays put): every write is
 * reported exactly once, on its thread, with its own value, in order.
 *
 * Page protection with PROBEKIT_WATCH_NOALIAS=1 (steps open the page), what
 * probekit.h promises for concurrent threads: no hit is reported twice
 * (at most one hit per write, never two for one value), every hit reports
 * a value some write stored, the last hit reports the value memory holds in
 * the end, and with one thread on the page every write is reported exactly
 * once, in order.
 */

#define THREADS 2

static volatile uint64_t page[512] __attribute__((aligned(4096)));
#define watched page[0]
static volatile int go, stop;
static unsigned long writes[THREADS];
static pid_t tids[THREADS];

#define MAXW 200000
/* For each value written, how many hits reported it (a byte per write). */
static unsigned char seen[THREADS][MAXW + 1];
static unsigned long hits, hits_on[THREADS], foreign, bad_value, unordered;
static uint64_t last_new;
static uint64_t prev_n[THREADS];

static void on_hit(const struct pk_watch_hit *h, void *ctx)
{
	uint64_t v = h->new_value, t = (v >> 32) - 1, n = v & 0xffffffffu;

	pid_t me = (pid_t)syscall(SYS_gettid);
	int on = -1;

	(void)ctx;
	__atomic_add_fetch(&hits, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < THREADS; i++)
		if (tids[i] == me)
			on = i;
	if (on < 0)
		__atomic_add_fetch(&foreign, 1, __ATOMIC_RELAXED);
	else
		__atomic_add_fetch(&hits_on[on], 1, __ATOMIC_RELAXED);
	if (t >= THREADS || n == 0 || n > MAXW) {
		bad_value++;
		return;
	}
	if (seen[t][n] < 255)
		seen[t][n]++;
	if (n <= prev_n[t])
		unordered++;
	prev_n[t] = n;
	last_new = v;
}

static void *writer(void *arg)
{
	long i = (long)(uintptr_t)arg;
	uint64_t n = 0;

	tids[i] = (pid_t)syscall(SYS_gettid);
	while (!go)
		;
	while (!stop && n < MAXW) {
		n++;
		watched = ((uint64_t)(i + 1) << 32) | n;
		page[64 + 8 * i] = n;		/* unwatched bytes, same page */
	}
	writes[i] = n;
	return NULL;
}

static void reset(void)
{
	memset(seen, 0, sizeof(seen));
	memset(prev_n, 0, sizeof(prev_n));
	hits = foreign = bad_value = unordered = 0;
	memset(hits_on, 0, sizeof(hits_on));
	memset(tids, 0, sizeof(tids));
	last_new = 0;
	go = stop = 0;
}

/* @nthreads writers for @seconds; returns 0 if the watch could not be set. */
static int run(int nthreads, double seconds, int hardware)
{
	uint64_t opened = t_watch_open_steps();
	int exact;
	pthread_t th[THREADS];
	struct pk_watch *w;
	unsigned long total = 0, once = 0, twice = 0;
	int err;

	reset();
	watched = 0;
	err = pk_watch_add((void *)&watched, 8, PK_WATCH_WRITE, on_hit, NULL,
			   &w);
	if (err)
		return err;
	/* The page mechanism write-protects the page; hardware leaves it. */
	if (hardware && t_prot_of((void *)&watched)[1] == '-')
		hardware = 0;
	for (long i = 0; i < nthreads; i++)
		pthread_create(&th[i], NULL, writer, (void *)(uintptr_t)i);
	go = 1;
	for (double until = t_now() + seconds; t_now() < until;)
		usleep(1000);
	stop = 1;
	for (int i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	ASSERT_OK(pk_watch_remove(w), "remove");
	opened = t_watch_open_steps() - opened;
	exact = hardware || opened == 0;

	for (int t = 0; t < nthreads; t++) {
		total += writes[t];
		for (uint64_t n = 1; n <= writes[t]; n++) {
			once += seen[t][n] == 1;
			twice += seen[t][n] > 1;
		}
	}
	printf("%s, %d thread(s): %lu writes, %lu hits, %lu written values "
	       "reported once, %lu steps opened the page\n",
	       hardware ? "hardware" : "page", nthreads, total, hits, once,
	       (unsigned long)opened);
	if (!hardware && !getenv("PROBEKIT_WATCH_NOALIAS"))
		ASSERT_EQ(opened, 0, "every access moved to the alias");
	ASSERT_GE(total, 1, "writers ran");
	ASSERT_EQ(bad_value, 0, "every hit reports a value a write stored");
	ASSERT_EQ(foreign, 0, "hits only on the writing threads");
	if (exact) {
		for (int t = 0; t < nthreads; t++)
			ASSERT_EQ(hits_on[t], writes[t],
				  "each write seen once, on its thread");
	} else {
		ASSERT_EQ(twice, 0, "no write reported twice");
		ASSERT_LE(hits, total, "no more hits than writes");
	}
	if (!hardware || nthreads == 1) {
		ASSERT_EQ(last_new, watched,
			  "the last hit reports the final value");
		ASSERT_EQ(unordered, 0,
			  "a thread's writes reported in its order");
	}
	if (nthreads == 1 || (exact && !hardware)) {
		ASSERT_EQ(hits, total, "one thread: every write reported");
		ASSERT_EQ(once, total, "one thread: each exactly once");
	}
	return 0;
}

int main(void)
{
	double secs = t_stress_seconds(2.0) / 6;
	int hw = !getenv("PROBEKIT_WATCH");

	ASSERT_OK(run(THREADS, secs, hw), "watch (hardware where available)");
	ASSERT_OK(run(1, secs, hw), "watch, one thread");
	setenv("PROBEKIT_WATCH", "page", 1);
	ASSERT_OK(run(THREADS, secs, 0), "watch, page protection");
	ASSERT_OK(run(1, secs, 0), "watch, page protection, one thread");
	setenv("PROBEKIT_WATCH_NOALIAS", "1", 1);
	ASSERT_OK(run(THREADS, secs, 0), "watch, page opened for steps");
	ASSERT_OK(run(1, secs, 0), "watch, page opened, one thread");
	return t_exit();
}
