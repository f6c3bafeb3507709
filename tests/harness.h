/* SPDX-License-Identifier: MIT */
/* harness.h - assertions for one-program-per-test tests: exit 0 pass, 1 fail, 77 skip. */
#ifndef PK_TEST_HARNESS_H
#define PK_TEST_HARNESS_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probekit.h"

/*
 * A probed function the compiler must call as written: not inlined, and
 * (GCC) not analysed across calls: handlers change globals behind the
 * compiler's back, which IPA mod/ref analysis would assume it leaves alone.
 */
#if defined(__GNUC__) && !defined(__clang__)
#define T_NOINLINE __attribute__((noinline, noipa))
#else
#define T_NOINLINE __attribute__((noinline))
#endif

static int t_passed, t_failed;

static inline int t_check(int ok, const char *file, int line, const char *what,
			  long long actual, long long expected, const char *op)
{
	if (ok) {
		t_passed++;
		return 1;
	}
	t_failed++;
	fprintf(stderr, "%s:%d %s: actual %lld %s expected %lld\n", file, line,
		what, actual, op, expected);
	return 0;
}

/* Each argument is evaluated once. */
#define T_CMP(a, e, what, cmp, op)                                             \
	__extension__({                                                        \
		long long t_a_ = (long long)(a), t_e_ = (long long)(e);        \
		t_check(t_a_ cmp t_e_, __FILE__, __LINE__, (what), t_a_, t_e_, \
			op);                                                   \
	})
#define ASSERT_EQ(a, e, what) T_CMP(a, e, what, ==, "!=")
#define ASSERT_NE(a, e, what) T_CMP(a, e, what, !=, "==")
#define ASSERT_GE(a, e, what) T_CMP(a, e, what, >=, "<")
#define ASSERT_LE(a, e, what) T_CMP(a, e, what, <=, ">")
#define ASSERT_OK(r, what) ASSERT_EQ((r), 0, (what))
#define ASSERT_TRUE(c, what) ASSERT_NE(!!(c), 0, (what))
#define ASSERT_FALSE(c, what) ASSERT_EQ(!!(c), 0, (what))
#define ASSERT_MEM_EQ(a, e, n, what)                                           \
	t_check(memcmp((a), (e), (n)) == 0, __FILE__, __LINE__, (what), 1, 0,   \
		"(bytes differ)")

/* Exit 77 with the reason; ctest counts it as skipped. */
#define SKIP(...)                                                              \
	do {                                                                   \
		printf("SKIP: " __VA_ARGS__);                                  \
		printf("\n");                                                  \
		exit(77);                                                      \
	} while (0)

static inline int t_exit_named(const char *name)
{
	const char *base = strrchr(name, '/');

	printf("%s: %d passed, %d failed\n", base ? base + 1 : name, t_passed,
	       t_failed);
	return t_failed ? 1 : 0;
}
#define t_exit() t_exit_named(__FILE__)

/* Seconds a stress test runs: PK_STRESS_SECONDS, or @dflt. */
static inline double t_stress_seconds(double dflt)
{
	const char *v = getenv("PK_STRESS_SECONDS");

	return v ? atof(v) : dflt;
}

static inline double t_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The protection /proc/self/maps shows for @p ("rw-p"), or "" if unmapped. */
static inline const char *t_prot_of(const void *p)
{
	static char perm[8];
	unsigned long lo, hi, a = (unsigned long)p;
	FILE *f = fopen("/proc/self/maps", "re");

	perm[0] = 0;
	while (f && fscanf(f, "%lx-%lx %7s %*[^\n]", &lo, &hi, perm) == 3) {
		if (a >= lo && a < hi)
			break;
		perm[0] = 0;
	}
	if (f)
		fclose(f);
	return perm;
}

/* A pk_set_log() sink that drops everything: for refusals a test expects. */
static inline void t_quiet_log(enum pk_log_level l, const char *m, void *c)
{
	(void)l, (void)m, (void)c;
}

/* pk_fault_stats().watch_open_steps: page-watch steps that opened the page. */
static inline uint64_t t_watch_open_steps(void)
{
	struct pk_fault_stats st;

	memset(&st, 0, sizeof(st));
	st.sz = sizeof(st);
	pk_fault_stats(&st);
	return st.watch_open_steps;
}

/*
 * Fork children running @child (its return value is the exit status, 0 for
 * success) until @until (t_now() time) and at least @min times; each is
 * waited for before the next. Returns how many succeeded, *@forks how many
 * ran; the first few failures' statuses go to stderr.
 */
static inline int t_fork_loop(int (*child)(void), double until, int min,
			      int *forks)
{
	int good = 0;

	*forks = 0;
	while (t_now() < until || *forks < min) {
		int status = 0;
		pid_t pid = fork();

		if (pid == 0)
			_exit(child());
		(*forks)++;
		waitpid(pid, &status, 0);
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
			good++;
		else if (*forks - good <= 5)
			fprintf(stderr, "child status %#x\n", status);
	}
	return good;
}

#endif /* PK_TEST_HARNESS_H */
