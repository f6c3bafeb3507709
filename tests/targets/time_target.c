// SPDX-License-Identifier: MIT
/* time_target.c - a program for tests/cli-time.sh: functions that spin a known time (and print what they measured), recursion, longjmp, threads, fork. */

/*
 * time_target SHORT_NS NSHORT LONG_NS NLONG [rec R] [jmp J] [threads T K]
 *             [fork K]
 *
 *   time_short() spins SHORT_NS ns NSHORT times, time_long() LONG_NS ns
 *   NLONG times, each measuring itself with clock_gettime(); the nearest-
 *   rank p50 of what they measured goes to stdout as "short_p50 NS" and
 *   "long_p50 NS" (the figures the test compares probekit's with).
 *   rec R      R times time_rec(5): 6 R calls, nested 6 deep
 *   jmp J      J times time_jmp_outer(), whose time_jmp_inner() leaves by
 *              longjmp() (J entries, no return)
 *   threads T K  T threads, each K calls of time_thr()
 *   fork K     a fork()ed child makes K calls of time_thr(), then _exit()s
 *   forkc K    the same, while this process makes K calls of its own
 *              (two processes writing one record at once)
 *   vec N      N calls of time_vec(a, b, c, d), doubles in and out, the
 *              caller's running sums kept in vector registers across the
 *              calls; prints "vec SUM" (%a: every bit), which a timing
 *              that clobbered a vector register would change
 *   _exit      end with _exit(0) here (no destructor, no atexit)
 *   kill       end by SIGKILL here
 */
#include <pthread.h>
#include <signal.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;
static jmp_buf env;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t spin(uint64_t ns)
{
	uint64_t t0 = now_ns(), t;

	do
		t = now_ns();
	while (t - t0 < ns);
	return t - t0;
}

/* noipa: no clone (time_short.isra.0) the spec would not name. */
__attribute__((noinline, noipa)) uint64_t time_short(uint64_t ns)
{
	return spin(ns);
}

__attribute__((noinline, noipa)) uint64_t time_long(uint64_t ns)
{
	return spin(ns);
}

__attribute__((noinline, noipa)) void time_rec(int d)
{
	if (d > 0)
		time_rec(d - 1);
	sink++;
}

__attribute__((noinline, noipa)) void time_jmp_inner(void)
{
	sink++;
	longjmp(env, 1);
}

__attribute__((noinline, noipa)) void time_jmp_outer(void)
{
	if (!setjmp(env))
		time_jmp_inner();
	sink++;
}

__attribute__((noinline, noipa)) void time_thr(void)
{
	sink++;
	__asm__ volatile("" ::: "memory");
}

static void *thr_main(void *arg)
{
	for (long i = 0; i < (long)(intptr_t)arg; i++)
		time_thr();
	return NULL;
}

__attribute__((noinline)) double time_vec(double a, double b, double c,
					  double d)
{
	return a * 1.5 + b / 3.0 - c * d;
}

static double vec_sum(long n)
{
	double s = 0.25, t = 1.0 / 7.0;

	for (long i = 0; i < n; i++) {
		s += time_vec((double)(i % 1000), s * 1e-7, t, 1e-3) * 1e-3;
		t = t * 0.999 + s * 1e-9;
	}
	return s + t;
}

static int cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Nearest rank, as prof/hist.h's pk_hist_value_at(): rank ceil(n / 2). */
static uint64_t p50(uint64_t *v, long n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	return v[(n + 1) / 2 - 1];
}

int main(int argc, char **argv)
{
	uint64_t sns, lns, *s, *l;
	long ns_, nl;

	if (argc < 5)
		return 2;
	sns = strtoull(argv[1], NULL, 10);
	ns_ = atol(argv[2]);
	lns = strtoull(argv[3], NULL, 10);
	nl = atol(argv[4]);
	s = calloc((size_t)ns_ + 1, sizeof(*s));
	l = calloc((size_t)nl + 1, sizeof(*l));
	if (!s || !l)
		return 2;
	/* Interleaved: both see the same machine. */
	for (long i = 0; i < ns_ || i < nl; i++) {
		if (i < ns_)
			s[i] = time_short(sns);
		if (i < nl)
			l[i] = time_long(lns);
	}
	if (ns_)
		printf("short_p50 %llu\n", (unsigned long long)p50(s, ns_));
	if (nl)
		printf("long_p50 %llu\n", (unsigned long long)p50(l, nl));
	fflush(stdout);
	for (int i = 5; i < argc; i++) {
		if (!strcmp(argv[i], "rec") && i + 1 < argc) {
			long r = atol(argv[++i]);

			for (long k = 0; k < r; k++)
				time_rec(5);
		} else if (!strcmp(argv[i], "jmp") && i + 1 < argc) {
			long j = atol(argv[++i]);

			for (long k = 0; k < j; k++)
				time_jmp_outer();
		} else if (!strcmp(argv[i], "threads") && i + 2 < argc) {
			int t = atoi(argv[++i]);
			long k = atol(argv[++i]);
			pthread_t th[64];

			for (int n = 0; n < t && n < 64; n++)
				pthread_create(&th[n], NULL, thr_main, (void *)(intptr_t)k);
			for (int n = 0; n < t && n < 64; n++)
				pthread_join(th[n], NULL);
		} else if (!strcmp(argv[i], "fork") && i + 1 < argc) {
			long k = atol(argv[++i]);
			pid_t pid = fork();

			if (pid == 0) {
				thr_main((void *)(intptr_t)k);
				_exit(0);
			}
			waitpid(pid, NULL, 0);
		} else if (!strcmp(argv[i], "vec") && i + 1 < argc) {
			printf("vec %a\n", vec_sum(atol(argv[++i])));
			fflush(stdout);
		} else if (!strcmp(argv[i], "_exit")) {
			_exit(0);
		} else if (!strcmp(argv[i], "kill")) {
			kill(getpid(), SIGKILL);
		} else if (!strcmp(argv[i], "forkc") && i + 1 < argc) {
			long k = atol(argv[++i]);
			pid_t pid = fork();

			thr_main((void *)(intptr_t)k);
			if (pid == 0)
				_exit(0);
			waitpid(pid, NULL, 0);
		}
	}
	free(s);
	free(l);
	return 0;
}
