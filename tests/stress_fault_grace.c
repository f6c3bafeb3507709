// SPDX-License-Identifier: MIT
/* stress_fault_grace.c - no range handler runs after pk_fault_unregister() returns, while threads fault on that range non-stop. */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "probekit.h"
#include "harness.h"

/*
 * Each thread faults on its own page in a loop. The main thread keeps
 * replacing the page's registration: unregister it, mark the old context
 * dead (as a caller that frees it would), register it again with a fresh
 * context. A handler that sees its context dead, on entry or after a
 * short spin inside, ran after unregister returned: the grace period was
 * too short. A die handler serves faults while a page has no range.
 *
 * ctest runs this three times: with per-thread reader slots and
 * membarrier, with PROBEKIT_FAULT_FENCE=1 (full fences, no membarrier) and
 * with PROBEKIT_FAULT_SLOTS=2 (most threads on the shared counts).
 */

#define THREADS 6
#define SPIN 200

struct ctx {
	volatile int dead;
	struct ctx *older;	/* dead ones, freed at the end */
};

static long page;
static char *pages;
static volatile int stop;
static unsigned long by_range, by_die, late;

static int on_fault(const struct pk_fault *f, void *arg)
{
	struct ctx *c = arg;

	if (c->dead)
		__atomic_add_fetch(&late, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < SPIN; i++)
		__asm__ volatile("pause" ::: "memory");
	if (c->dead)
		__atomic_add_fetch(&late, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&by_range, 1, __ATOMIC_RELAXED);
	mprotect(f->start, (size_t)page, PROT_READ | PROT_WRITE);
	return PK_FAULT_HANDLED;
}

static int on_die(struct pk_notifier *nb, unsigned long sig, void *data)
{
	const struct pk_fault *f = data;
	char *a = f->addr;

	(void)nb;
	if (sig != SIGSEGV || a < pages || a >= pages + THREADS * page)
		return PK_DONE;
	__atomic_add_fetch(&by_die, 1, __ATOMIC_RELAXED);
	mprotect((void *)((uintptr_t)a & ~(uintptr_t)(page - 1)), (size_t)page,
		 PROT_READ | PROT_WRITE);
	return PK_STOP;
}

static void *faulter(void *arg)
{
	volatile char *p = pages + (long)(uintptr_t)arg * page;
	unsigned long n = 0;

	while (!stop) {
		mprotect((void *)p, (size_t)page, PROT_NONE);
		p[n % page] = (char)n;
		n++;
	}
	return (void *)n;
}

/* 16 faults, then the thread ends: its reader slot is left to a later one. */
static void *short_faulter(void *arg)
{
	volatile char *p = pages + (long)(uintptr_t)arg * page;
	unsigned long n;

	for (n = 0; n < 16; n++) {
		mprotect((void *)p, (size_t)page, PROT_NONE);
		p[n] = (char)n;
	}
	return (void *)n;
}

/*
 * The last page's faults come from short-lived threads, one after the
 * other: thousands of them, past the 256 reader slots, so slots of dead
 * threads are taken over (rd_slot_claim(), through pk_slot_claim()) while the grace periods run.
 */
static void *spawner(void *arg)
{
	unsigned long total = 0, threads = 0;

	while (!stop) {
		pthread_t t;
		void *n;

		if (pthread_create(&t, NULL, short_faulter, arg))
			break;
		pthread_join(t, &n);
		total += (unsigned long)n;
		threads++;
	}
	printf("stress_fault_grace: %lu short-lived threads\n", threads);
	return (void *)total;
}

int main(void)
{
	static struct pk_notifier die = { .call = on_die };
	struct pk_fault_stats st0 = { .sz = sizeof(st0) }, st1 = st0;
	struct ctx *cur[THREADS];
	pthread_t th[THREADS];
	unsigned long total = 0, swaps = 0;
	double until;

	page = sysconf(_SC_PAGESIZE);
	pages = mmap(NULL, THREADS * (size_t)page, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_OK(pk_die_register(&die), "die handler");
	for (long i = 0; i < THREADS; i++) {
		cur[i] = calloc(1, sizeof(*cur[i]));
		ASSERT_OK(pk_fault_register(pages + i * page, (size_t)page,
					    on_fault, cur[i]), "register");
	}
	ASSERT_OK(pk_fault_stats(&st0), "stats");
	until = t_now() + t_stress_seconds(2.0);
	for (long i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, i < THREADS - 1 ? faulter : spawner,
			       (void *)(uintptr_t)i);
	while (t_now() < until) {
		int i = (int)(swaps % THREADS);
		struct ctx *next = calloc(1, sizeof(*next));

		ASSERT_OK(pk_fault_unregister(pages + i * page), "unregister");
		cur[i]->dead = 1;	/* the caller could free it now */
		ASSERT_OK(pk_fault_register(pages + i * page, (size_t)page,
					    on_fault, next), "register again");
		next->older = cur[i];
		cur[i] = next;
		swaps++;
	}
	stop = 1;
	for (int i = 0; i < THREADS; i++) {
		void *n;

		pthread_join(th[i], &n);
		total += (unsigned long)n;
	}
	ASSERT_OK(pk_fault_stats(&st1), "stats");
	ASSERT_EQ(late, 0, "no handler ran after its unregister returned");
	ASSERT_EQ(by_range + by_die, total, "every fault handled once");
	ASSERT_EQ(st1.faults - st0.faults, by_range,
		  "pk_fault_stats counts the faults ranges handled");
	ASSERT_TRUE(by_range > 0 && swaps > 0, "faults and swaps both happened");
	for (int i = 0; i < THREADS; i++) {
		ASSERT_OK(pk_fault_unregister(pages + i * page), "cleanup");
		while (cur[i]) {
			struct ctx *o = cur[i]->older;

			free(cur[i]);
			cur[i] = o;
		}
	}
	ASSERT_OK(pk_die_unregister(&die), "die cleanup");
	printf("stress_fault_grace: %lu faults (%lu by ranges, %lu by the die "
	       "handler), %lu re-registrations\n", total, by_range, by_die, swaps);
	return t_exit();
}
