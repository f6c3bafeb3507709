// SPDX-License-Identifier: MIT
/* cli_stat_target.c - a program for tests/cli-stat.sh: known page faults, syscalls, sleeps and CPU time in threads and processes, then its own getrusage() and /proc figures. */

/*
 * cli_stat_target [pages N] [syscalls N] [sleeps N] [spin MS] [threads T]
 *                 [procs P]
 *
 * P processes (the first forks P - 1 children), each of T threads (the
 * main thread waits for them), each of which
 *   pages N     writes one byte to each of N fresh anonymous pages (no
 *               huge pages): N minor faults;
 *   syscalls N  calls syscall(SYS_getppid) N times;
 *   sleeps N    sleeps 200 us N times: N voluntary context switches;
 *   spin MS     spins MS milliseconds of its own CPU time.
 * Then the first process waits for its children and prints one JSON line
 * on stdout: getrusage(RUSAGE_SELF) + getrusage(RUSAGE_CHILDREN) (its
 * threads and its waited-for children) as minflt, majflt, nvcsw, nivcsw,
 * cpu_us (utime + stime), and /proc/self/stat's minflt + cminflt as
 * proc_minflt.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long pages, syscalls, sleeps, spin_ms;

static double thread_cpu_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void *work(void *arg)
{
	long psz = sysconf(_SC_PAGESIZE);
	struct timespec nap = { 0, 200 * 1000 };
	volatile unsigned long sink = 0;
	double t0;

	(void)arg;
	if (pages) {
		char *p = mmap(NULL, (size_t)(pages * psz), PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED) {
			perror("mmap");
			exit(1);
		}
		madvise(p, (size_t)(pages * psz), MADV_NOHUGEPAGE);
		for (long i = 0; i < pages; i++)
			p[i * psz] = 1;
		munmap(p, (size_t)(pages * psz));
	}
	for (long i = 0; i < syscalls; i++)
		syscall(SYS_getppid);
	for (long i = 0; i < sleeps; i++)
		nanosleep(&nap, NULL);
	t0 = thread_cpu_ms();
	while (spin_ms && thread_cpu_ms() - t0 < (double)spin_ms)
		for (int i = 0; i < 1000; i++)
			sink += (unsigned long)i;
	return NULL;
}

static void run_threads(long threads)
{
	pthread_t *t;

	if (threads <= 1) {
		work(NULL);
		return;
	}
	t = calloc((size_t)threads, sizeof(*t));
	if (!t)
		exit(1);
	for (long i = 0; i < threads; i++)
		if (pthread_create(&t[i], NULL, work, NULL)) {
			fprintf(stderr, "pthread_create failed\n");
			exit(1);
		}
	for (long i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	free(t);
}

/* /proc/self/stat's minflt + cminflt (fields 10 and 11), or -1. */
static long proc_minflt(void)
{
	char buf[1024], *p;
	unsigned long min, cmin;
	FILE *f = fopen("/proc/self/stat", "r");
	size_t n;

	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %lu %lu", &min,
			 &cmin) != 2)
		return -1;
	return (long)(min + cmin);
}

int main(int argc, char **argv)
{
	long threads = 1, procs = 1;
	struct rusage s, c;
	pid_t pid;

	for (int i = 1; i + 1 < argc; i += 2) {
		long v = atol(argv[i + 1]);

		if (!strcmp(argv[i], "pages"))
			pages = v;
		else if (!strcmp(argv[i], "syscalls"))
			syscalls = v;
		else if (!strcmp(argv[i], "sleeps"))
			sleeps = v;
		else if (!strcmp(argv[i], "spin"))
			spin_ms = v;
		else if (!strcmp(argv[i], "threads"))
			threads = v;
		else if (!strcmp(argv[i], "procs"))
			procs = v;
		else {
			fprintf(stderr, "cli_stat_target: unknown '%s'\n", argv[i]);
			return 2;
		}
	}
	for (long i = 1; i < procs; i++) {
		pid = fork();
		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			run_threads(threads);
			_exit(0);
		}
	}
	run_threads(threads);
	while (wait(NULL) > 0)
		;
	getrusage(RUSAGE_SELF, &s);
	getrusage(RUSAGE_CHILDREN, &c);
	printf("{\"minflt\":%ld,\"majflt\":%ld,\"nvcsw\":%ld,\"nivcsw\":%ld,"
	       "\"cpu_us\":%lld,\"proc_minflt\":%ld}\n",
	       s.ru_minflt + c.ru_minflt, s.ru_majflt + c.ru_majflt,
	       s.ru_nvcsw + c.ru_nvcsw, s.ru_nivcsw + c.ru_nivcsw,
	       (long long)(s.ru_utime.tv_sec + s.ru_stime.tv_sec +
			   c.ru_utime.tv_sec + c.ru_stime.tv_sec) * 1000000ll +
	       (s.ru_utime.tv_usec + s.ru_stime.tv_usec + c.ru_utime.tv_usec +
		c.ru_stime.tv_usec),
	       proc_minflt());
	return 0;
}
