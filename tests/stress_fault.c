// SPDX-License-Identifier: MIT
/* stress_fault.c - threads fault on their own ranges while other ranges and die handlers come and go. */
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include "probekit.h"
#include "harness.h"

#define THREADS 4
#define CHURN 64	/* pages registered and unregistered meanwhile */

static long page;
static char *own;	/* THREADS pages, one range each */
static char *churn;	/* CHURN pages */
static volatile int stop;
static unsigned long handled[THREADS], wrong;

static int on_fault(const struct pk_fault *f, void *ctx)
{
	long i = (long)(uintptr_t)ctx;

	if (f->start != own + i * page)
		__atomic_add_fetch(&wrong, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&handled[i], 1, __ATOMIC_RELAXED);
	mprotect(f->start, (size_t)page, PROT_READ | PROT_WRITE);
	return PK_FAULT_HANDLED;
}

static int on_churn(const struct pk_fault *f, void *ctx)
{
	(void)f;
	(void)ctx;
	__atomic_add_fetch(&wrong, 1, __ATOMIC_RELAXED);
	return PK_FAULT_UNHANDLED;
}

static int on_die(struct pk_notifier *nb, unsigned long sig, void *data)
{
	(void)nb;
	(void)sig;
	(void)data;
	__atomic_add_fetch(&wrong, 1, __ATOMIC_RELAXED);
	return PK_DONE;
}

static void *faulter(void *arg)
{
	long i = (long)(uintptr_t)arg;
	volatile char *p = own + i * page;
	unsigned long n = 0;

	while (!stop) {
		mprotect((void *)p, (size_t)page, PROT_NONE);
		p[n % page] = (char)n;	/* faults, handled, retried */
		__asm__ volatile("" ::: "memory");
		if (p[n % page] != (char)n)
			__atomic_add_fetch(&wrong, 1, __ATOMIC_RELAXED);
		n++;
	}
	return (void *)n;
}

int main(void)
{
	static struct pk_notifier dies[4];
	pthread_t th[THREADS];
	unsigned long total = 0, changes = 0;
	double until;

	page = sysconf(_SC_PAGESIZE);
	own = mmap(NULL, THREADS * (size_t)page, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	churn = mmap(NULL, CHURN * (size_t)page, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	for (long i = 0; i < THREADS; i++)
		ASSERT_OK(pk_fault_register(own + i * page, (size_t)page,
					    on_fault, (void *)(uintptr_t)i),
			  "register own page");
	for (int i = 0; i < 4; i++)
		dies[i].call = on_die;

	until = t_now() + t_stress_seconds(2.0);
	for (long i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, faulter, (void *)(uintptr_t)i);
	while (t_now() < until) {
		int k = (int)(changes % CHURN);

		ASSERT_OK(pk_fault_register(churn + k * page, (size_t)page,
					    on_churn, NULL), "churn register");
		if (changes % 8 == 0)
			ASSERT_OK(pk_die_register(&dies[changes / 8 % 4]),
				  "die register");
		if (changes >= CHURN / 2) {
			int u = (int)((changes - CHURN / 2) % CHURN);

			ASSERT_OK(pk_fault_unregister(churn + u * page),
				  "churn unregister");
		}
		if (changes % 8 == 4)
			ASSERT_OK(pk_die_unregister(&dies[changes / 8 % 4]),
				  "die unregister");
		changes++;
	}
	stop = 1;
	for (int i = 0; i < THREADS; i++) {
		void *n;

		pthread_join(th[i], &n);
		total += (unsigned long)n;
		ASSERT_EQ(handled[i], (unsigned long)n, "every fault handled once");
	}
	ASSERT_EQ(wrong, 0, "no wrong handler, no lost write");
	printf("stress_fault: %lu faults handled, %lu table changes\n", total,
	       changes);
	return t_exit();
}
