// SPDX-License-Identifier: MIT
/* trace_target.c - a program for tests/cli-trace.sh: known calls (arguments, return values, nesting), threads, a fork()ed child, calls that spin, and ends by _exit, SIGKILL or exec. */

/*
 * trace_target ACTION...   (done in order)
 *
 *   calls N       trace_f(i) for i = 0 .. N-1 (returns 2 i), in this thread
 *   nest N        trace_g(i) for i = 0 .. N-1: each calls trace_f(i) and
 *                 trace_f(i + 1), returns their sum
 *   threads T N   T threads, each "calls N" (trace_f(i), i < N)
 *   fork N        a fork()ed child does "calls N" and _exit()s; waited for
 *   spin K NS     K calls of trace_spin(NS) (spins NS ns) and K calls of
 *                 trace_quick() (returns at once), interleaved
 *   jmp N         N times trace_jmp(i), which leaves by longjmp() (no return)
 *   args N        trace_args6(i, i+1, .. i+5) for i = 0 .. N-1 (returns i)
 *   rec N         trace_rec(N): recursion N deep (N + 1 calls)
 *   _fork N       trace_f(0), then a child made by _Fork() (no atfork
 *                 handler) does "calls N" and _exit()s while this
 *                 thread does too; waited for
 *   _forkt N      as _fork N, but the child first runs "calls N" in a new
 *                 thread (whose first hit comes before its own thread's)
 *   nofd N        RLIMIT_NOFILE lowered to the descriptors open (no open()
 *                 can succeed), then "calls N"
 *   vm            print VmSize (KiB) once trace_f(0) was called
 *   hog MIB       trace_f(0), then malloc() and touch MIB MiB (exit 4 if
 *                 malloc fails)
 *   _exit         end here with _exit(3) (no destructor, no atexit)
 *   kill          end here by SIGKILL
 *   exec ARGS..   exec this program again with the remaining ACTIONs
 *   all remaining words are the new program's actions
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t sink;
static jmp_buf env;

/* noipa: no clone (trace_f.isra.0) the spec would not name. */
__attribute__((noinline, noipa)) uint64_t trace_f(uint64_t i)
{
	sink += i;
	return 2 * i;
}

__attribute__((noinline, noipa)) uint64_t trace_g(uint64_t i)
{
	return trace_f(i) + trace_f(i + 1);
}

__attribute__((noinline, noipa)) uint64_t trace_args6(uint64_t a, uint64_t b,
						       uint64_t c, uint64_t d,
						       uint64_t e, uint64_t f)
{
	sink += a + b + c + d + e + f;
	return a;
}

__attribute__((noinline, noipa)) uint64_t trace_jmp(uint64_t i)
{
	sink += i;
	longjmp(env, 1);
}

__attribute__((noinline, noipa)) uint64_t trace_rec(uint64_t n)
{
	uint64_t r;

	if (!n)
		return 0;
	r = trace_rec(n - 1) + 1;
	sink += r;	/* after the call: no tail call, no loop */
	return r;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

__attribute__((noinline, noipa)) uint64_t trace_spin(uint64_t ns)
{
	uint64_t t0 = now_ns(), t;

	do
		t = now_ns();
	while (t - t0 < ns);
	return t - t0;
}

__attribute__((noinline, noipa)) uint64_t trace_quick(uint64_t x)
{
	return x + 1;
}

static void calls(uint64_t n)
{
	for (uint64_t i = 0; i < n; i++)
		sink += trace_f(i);
}

static __attribute__((noinline)) void jmps(uint64_t n)
{
	for (volatile uint64_t k = 0; k < n; k++)
		if (!setjmp(env))
			trace_jmp(k);
}

static void *thread_main(void *arg)
{
	calls((uint64_t)(uintptr_t)arg);
	return NULL;
}

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "calls") && i + 1 < argc) {
			calls(strtoull(argv[++i], NULL, 0));
		} else if (!strcmp(a, "nest") && i + 1 < argc) {
			uint64_t n = strtoull(argv[++i], NULL, 0);

			for (uint64_t k = 0; k < n; k++)
				sink += trace_g(k);
		} else if (!strcmp(a, "threads") && i + 2 < argc) {
			int t = atoi(argv[++i]);
			uint64_t n = strtoull(argv[++i], NULL, 0);
			pthread_t th[64];

			for (int k = 0; k < t && k < 64; k++)
				pthread_create(&th[k], NULL, thread_main,
					       (void *)(uintptr_t)n);
			for (int k = 0; k < t && k < 64; k++)
				pthread_join(th[k], NULL);
		} else if (!strcmp(a, "fork") && i + 1 < argc) {
			uint64_t n = strtoull(argv[++i], NULL, 0);
			pid_t p = fork();

			if (p == 0) {
				calls(n);
				_exit(0);
			}
			waitpid(p, NULL, 0);
		} else if (!strcmp(a, "spin") && i + 2 < argc) {
			int k = atoi(argv[++i]);
			uint64_t ns = strtoull(argv[++i], NULL, 0);

			for (int j = 0; j < k; j++) {
				sink += trace_spin(ns);
				sink += trace_quick((uint64_t)j);
			}
		} else if (!strcmp(a, "jmp") && i + 1 < argc) {
			jmps(strtoull(argv[++i], NULL, 0));
		} else if (!strcmp(a, "args") && i + 1 < argc) {
			uint64_t n = strtoull(argv[++i], NULL, 0);

			for (uint64_t k = 0; k < n; k++)
				sink += trace_args6(k, k + 1, k + 2, k + 3,
						    k + 4, k + 5);
		} else if (!strcmp(a, "rec") && i + 1 < argc) {
			sink += trace_rec(strtoull(argv[++i], NULL, 0));
		} else if ((!strcmp(a, "_fork") || !strcmp(a, "_forkt")) &&
			   i + 1 < argc) {
			uint64_t n = strtoull(argv[++i], NULL, 0);
			pthread_t th;
			pid_t p;

			sink += trace_f(0);
			p = _Fork();
			if (p == 0 && a[5] == 't') {
				pthread_create(&th, NULL, thread_main,
					       (void *)(uintptr_t)n);
				pthread_join(th, NULL);
			}

			calls(n);
			if (p == 0)
				_exit(0);
			waitpid(p, NULL, 0);
		} else if (!strcmp(a, "nofd") && i + 1 < argc) {
			struct rlimit rl;
			int fd = dup(0);

			if (fd < 0 || close(fd) || getrlimit(RLIMIT_NOFILE, &rl))
				return 2;
			rl.rlim_cur = (rlim_t)fd;
			if (setrlimit(RLIMIT_NOFILE, &rl))
				return 2;
			calls(strtoull(argv[++i], NULL, 0));
		} else if (!strcmp(a, "vm")) {
			unsigned long vm = 0;
			FILE *f = fopen("/proc/self/statm", "r");

			sink += trace_f(0);
			if (!f || fscanf(f, "%lu", &vm) != 1)
				return 2;
			fclose(f);
			printf("%lu\n", vm * 4);
		} else if (!strcmp(a, "hog") && i + 1 < argc) {
			size_t n = strtoull(argv[++i], NULL, 0) << 20;
			char *m;

			sink += trace_f(0);
			m = malloc(n);
			if (!m) {
				fprintf(stderr, "trace_target: hog: malloc failed\n");
				return 4;
			}
			memset(m, 1, n);
			free(m);
		} else if (!strcmp(a, "_exit")) {
			_exit(3);
		} else if (!strcmp(a, "kill")) {
			raise(SIGKILL);
		} else if (!strcmp(a, "exec")) {
			argv[i] = argv[0];
			execv("/proc/self/exe", &argv[i]);
			perror("exec");
			return 1;
		} else {
			fprintf(stderr, "trace_target: bad action '%s'\n", a);
			return 2;
		}
	}
	return 0;
}
