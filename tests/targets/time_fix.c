// SPDX-License-Identifier: MIT
/* time_fix.c - a program for tests/cli-time-fix.sh: a hot loop for -I, recursion past the return-probe depth, many threads, _Fork(), a long sleep. */

/*
 * time_fix hot MS              time_fix_f() in a loop for MS ms
 * time_fix deep D              time_fix_rec() D + 1 calls nested
 * time_fix threads T K         T threads at once, K calls of time_fix_f()
 *                              each (all alive from the first call to the last)
 * time_fix seq T K             T threads one after another, K calls each
 * time_fix fork K              one call, _Fork(), K calls in the child and
 *                              K in the parent at the same time
 * time_fix sleep MS            one call of time_fix_f(), then MS ms asleep
 * Each prints "expected N" (calls of its function) on stdout.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern pid_t _Fork(void);

static volatile unsigned long sink;

__attribute__((noinline, noipa)) void time_fix_f(void)
{
	sink++;
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline, noipa)) void time_fix_rec(int d)
{
	if (d > 0)
		time_fix_rec(d - 1);
	sink++;
}

static pthread_barrier_t bar;
static long per;

static void *run(void *a)
{
	(void)a;
	pthread_barrier_wait(&bar);
	for (long i = 0; i < per; i++)
		time_fix_f();
	pthread_barrier_wait(&bar);	/* all alive till all are done */
	return NULL;
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	const char *m = argc > 1 ? argv[1] : "";
	long n = argc > 2 ? atol(argv[2]) : 0;

	if (!strcmp(m, "hot")) {
		double end = now() + (double)n / 1000;
		unsigned long k = 0;

		while (now() < end)
			for (int i = 0; i < 1000; i++, k++)
				time_fix_f();
		printf("expected %lu\n", k);
	} else if (!strcmp(m, "deep")) {
		time_fix_rec((int)n);
		printf("expected %ld\n", n + 1);
	} else if (!strcmp(m, "threads")) {
		pthread_t th[1024];

		per = argc > 3 ? atol(argv[3]) : 0;
		if (n < 1 || n > 1024)
			return 2;
		pthread_barrier_init(&bar, NULL, (unsigned int)n);
		for (long i = 0; i < n; i++)
			if (pthread_create(&th[i], NULL, run, NULL))
				return 2;
		for (long i = 0; i < n; i++)
			pthread_join(th[i], NULL);
		printf("expected %ld\n", n * per);
	} else if (!strcmp(m, "seq")) {
		/* One thread after another: each ends before the next starts. */
		per = argc > 3 ? atol(argv[3]) : 0;
		pthread_barrier_init(&bar, NULL, 1);
		for (long i = 0; i < n; i++) {
			pthread_t t;

			if (pthread_create(&t, NULL, run, NULL))
				return 2;
			pthread_join(t, NULL);
		}
		printf("expected %ld\n", n * per);
	} else if (!strcmp(m, "fork")) {
		pid_t p;

		time_fix_f();	/* this thread's block and cell, before */
		p = _Fork();
		if (p < 0)
			return 2;
		for (long i = 0; i < n; i++)
			time_fix_f();
		if (!p)
			_exit(0);
		waitpid(p, NULL, 0);
		printf("expected %ld\n", 2 * n + 1);
	} else if (!strcmp(m, "sleep")) {
		time_fix_f();
		printf("expected 1\n");
		fflush(stdout);
		usleep((useconds_t)(n * 1000));
	} else {
		return 2;
	}
	return 0;
}
