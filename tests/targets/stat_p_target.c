// SPDX-License-Identifier: MIT
/* stat_p_target.c - a program for tests/cli-stat-p.sh: functions that incur a known number of page faults or context switches, measured by the program itself with getrusage(RUSAGE_THREAD) around each call; threads, fork, recursion, longjmp. */

/*
 * stat_p_target [threads T] [fork] OP...
 *
 * With fork, the process fork()s first (the child does what follows as
 * well, then _exit()s); with threads T, each process runs the OPs in T
 * threads (one otherwise: the main thread). The OPs, in their order:
 *   pages C N    C calls of stat_pages(N): N fresh anonymous pages
 *                written (no huge pages): N minor faults a call
 *   block C      C calls of stat_block(): nanosleep(200 us), at least
 *                one voluntary context switch a call
 *   nest C N     C calls of stat_outer(N): N pages written of its own,
 *                then stat_pages(N) (inclusive: 2N for stat_outer)
 *   rec C D      C calls of stat_rec(D): one page a level, D + 1 levels
 *   jmp C N      C calls of stat_jmp_outer(N), whose stat_jmp_inner()
 *                writes N pages and leaves by longjmp()
 *   forkin C N   C calls of stat_forkin(N): it fork()s; the child writes
 *                N pages, returns from it and _exit()s; the parent waits
 *   _exit        end with _exit(0) here; kill: end by SIGKILL here
 *
 * Each thread that called stat_pages, stat_block or stat_outer writes
 * one line on stdout (one write(2)): "own FN CALLS MINFLT MAJFLT NVCSW
 * NIVCSW", the sums of its own getrusage(RUSAGE_THREAD) differences
 * taken right before and right after each call: the independent count
 * the test holds probekit's against (probekit's readings are inside
 * that window).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;
static __thread jmp_buf env;
static char **ops;
static int nops;
static long psz;

static void touch(long n)
{
	char *p = mmap(NULL, (size_t)(n * psz), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	madvise(p, (size_t)(n * psz), MADV_NOHUGEPAGE);
	for (long i = 0; i < n; i++)
		p[i * psz] = 1;
	munmap(p, (size_t)(n * psz));
}

/* noipa: no clone (stat_pages.isra.0) the spec would not name. */
__attribute__((noinline, noipa)) void stat_pages(long n)
{
	touch(n);
}

__attribute__((noinline, noipa)) void stat_block(void)
{
	struct timespec nap = { 0, 200 * 1000 };

	nanosleep(&nap, NULL);
}

__attribute__((noinline, noipa)) void stat_outer(long n)
{
	touch(n);
	stat_pages(n);
}

__attribute__((noinline, noipa)) void stat_rec(long d)
{
	touch(1);
	if (d > 0)
		stat_rec(d - 1);
	sink++;
}

__attribute__((noinline, noipa)) void stat_jmp_inner(long n)
{
	touch(n);
	longjmp(env, 1);
}

__attribute__((noinline, noipa)) void stat_jmp_outer(long n)
{
	if (!setjmp(env))
		stat_jmp_inner(n);
	sink++;
}

/* Returns in both processes; the child's caller _exit()s. */
/* Called by the loop of "sigcalls" and by its SIGALRM handler. */
static long tick_calls;
__attribute__((noinline, noipa)) long stat_tick(long k)
{
	/* One instruction: the handler's add cannot fall between a load and a store. */
	__atomic_add_fetch(&tick_calls, 1, __ATOMIC_RELAXED);
	return k + 1;
}

static void on_alarm(int sig)
{
	(void)sig;
	stat_tick(-1);
}

__attribute__((noinline, noipa)) pid_t stat_forkin(long n)
{
	pid_t pid = fork();

	if (pid == 0)
		touch(n);
	return pid;
}

struct own {
	long calls;
	long minflt, majflt, nvcsw, nivcsw;
};

static void ru_now(struct rusage *ru)
{
	getrusage(RUSAGE_THREAD, ru);
}

static void own_add(struct own *o, const struct rusage *a,
		    const struct rusage *b)
{
	o->calls++;
	o->minflt += b->ru_minflt - a->ru_minflt;
	o->majflt += b->ru_majflt - a->ru_majflt;
	o->nvcsw += b->ru_nvcsw - a->ru_nvcsw;
	o->nivcsw += b->ru_nivcsw - a->ru_nivcsw;
}

static void own_print(const char *fn, const struct own *o)
{
	char line[256];
	int n;

	if (!o->calls)
		return;
	n = snprintf(line, sizeof(line), "own %s %ld %ld %ld %ld %ld\n", fn,
		     o->calls, o->minflt, o->majflt, o->nvcsw, o->nivcsw);
	if (write(1, line, (size_t)n) != n)
		exit(1);
}

static void *work(void *arg)
{
	struct own pg = { 0 }, bl = { 0 }, ne = { 0 };
	struct rusage a, b;

	(void)arg;
	for (int i = 0; i < nops; i++) {
		const char *op = ops[i];
		long c = i + 1 < nops ? atol(ops[i + 1]) : 0;
		long n = i + 2 < nops ? atol(ops[i + 2]) : 0;

		if (!strcmp(op, "pages")) {
			for (long k = 0; k < c; k++) {
				ru_now(&a);
				stat_pages(n);
				ru_now(&b);
				own_add(&pg, &a, &b);
			}
			i += 2;
		} else if (!strcmp(op, "block")) {
			for (long k = 0; k < c; k++) {
				ru_now(&a);
				stat_block();
				ru_now(&b);
				own_add(&bl, &a, &b);
			}
			i += 1;
		} else if (!strcmp(op, "nest")) {
			for (long k = 0; k < c; k++) {
				ru_now(&a);
				stat_outer(n);
				ru_now(&b);
				own_add(&ne, &a, &b);
			}
			i += 2;
		} else if (!strcmp(op, "rec")) {
			for (long k = 0; k < c; k++)
				stat_rec(n);
			i += 2;
		} else if (!strcmp(op, "jmp")) {
			for (long k = 0; k < c; k++)
				stat_jmp_outer(n);
			i += 2;
		} else if (!strcmp(op, "sigcalls")) {
			/*
			 * c calls of stat_tick() while a 50 us timer's handler
			 * calls it too, some from inside the probe's own entry
			 * handler: every call counted or said not counted.
			 */
			struct itimerval it = { { 0, 50 }, { 0, 50 } };
			volatile long sink = 0;

			signal(SIGALRM, on_alarm);
			setitimer(ITIMER_REAL, &it, NULL);
			for (long k = 0; k < c; k++)
				sink += stat_tick(k);
			memset(&it, 0, sizeof(it));
			setitimer(ITIMER_REAL, &it, NULL);
			printf("own stat_tick %ld\n",
			       __atomic_load_n(&tick_calls, __ATOMIC_RELAXED));
			fflush(stdout);
			i += 1;
		} else if (!strcmp(op, "forkin")) {
			for (long k = 0; k < c; k++) {
				pid_t pid = stat_forkin(n);

				if (pid == 0)
					_exit(0);
				if (pid < 0 || waitpid(pid, NULL, 0) != pid)
					exit(1);
			}
			i += 2;
		} else if (strcmp(op, "_exit") && strcmp(op, "kill")) {
			fprintf(stderr, "stat_p_target: unknown '%s'\n", op);
			exit(2);
		}
	}
	own_print("stat_pages", &pg);
	own_print("stat_block", &bl);
	own_print("stat_outer", &ne);
	return NULL;
}

/* The process's first probed call, in a vfork() child. 0, or -1. */
__attribute__((noinline)) static int first_in_vfork(void)
{
	pid_t v = vfork();

	if (v == 0) {
		stat_pages(1);
		_exit(0);
	}
	return v < 0 || waitpid(v, NULL, 0) != v ? -1 : 0;
}

int main(int argc, char **argv)
{
	long threads = 1;
	int i = 1, forked = 0;
	pid_t child = -1;

	psz = sysconf(_SC_PAGESIZE);
	for (; i < argc; i++) {
		if (!strcmp(argv[i], "threads") && i + 1 < argc)
			threads = atol(argv[++i]);
		else if (!strcmp(argv[i], "fork"))
			forked = 1;
		else if (!strcmp(argv[i], "vfork")) {
			if (first_in_vfork())
				return 1;
		} else
			break;
	}
	ops = &argv[i];
	nops = argc - i;
	if (forked) {
		child = fork();
		if (child < 0) {
			perror("fork");
			return 1;
		}
	}
	if (threads <= 1) {
		work(NULL);
	} else {
		pthread_t *t = calloc((size_t)threads, sizeof(*t));

		if (!t)
			return 1;
		for (long k = 0; k < threads; k++)
			if (pthread_create(&t[k], NULL, work, NULL))
				return 1;
		for (long k = 0; k < threads; k++)
			pthread_join(t[k], NULL);
		free(t);
	}
	if (child == 0)
		_exit(0);
	if (child > 0 && waitpid(child, NULL, 0) != child)
		return 1;
	for (int k = 0; k < nops; k++) {
		if (!strcmp(ops[k], "_exit"))
			_exit(0);
		if (!strcmp(ops[k], "kill"))
			kill(getpid(), SIGKILL);
	}
	return 0;
}
