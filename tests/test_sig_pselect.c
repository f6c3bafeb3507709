// SPDX-License-Identifier: MIT
/* test_sig_pselect.c - pselect's restart copies are (n + 7) / 8 bytes of each set: a set the program sized for n (here ending at a guard page) is never read or written past its end, and a set past FD_SETSIZE is waited on whole. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* An 8-byte set (n <= 64) right before a PROT_NONE page. */
static int small_set(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	unsigned char *m = mmap(NULL, 2 * pg, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct timespec ts = { 1, 0 };
	unsigned long *set;
	sigset_t none;
	int p[2], r;

	if (m == MAP_FAILED || mprotect(m + pg, pg, PROT_NONE) || pipe(p))
		return 2;
	set = (unsigned long *)(m + pg - 8);
	*set = 1UL << p[0];
	if (write(p[1], "x", 1) != 1)
		return 3;
	sigemptyset(&none);
	r = pselect(p[0] + 1, (fd_set *)set, NULL, NULL, &ts, &none);
	return r == 1 && *set == 1UL << p[0] ? 0 : 4;
}

/* A set for n = 1501: fds 1400 and 1500, both the pipe's ready end. */
static int big_set(void)
{
	struct rlimit rl = { 2048, 2048 };
	struct timespec ts = { 1, 0 };
	unsigned long *set;
	sigset_t none;
	int p[2], r, n = 1501;
	size_t len = (n + 7) / 8;

	if (setrlimit(RLIMIT_NOFILE, &rl) || pipe(p) || dup2(p[0], 1500) < 0 ||
	    dup2(p[0], 1400) < 0)
		return 77;
	set = calloc(1, len);
	if (write(p[1], "x", 1) != 1)
		return 3;
	((unsigned char *)set)[1500 / 8] |= 1 << (1500 % 8);
	((unsigned char *)set)[1400 / 8] |= 1 << (1400 % 8);
	sigemptyset(&none);
	r = pselect(n, (fd_set *)set, NULL, NULL, &ts, &none);
	return r == 2 ? 0 : 10 + r;	/* 1400 and 1500: the same pipe */
}

int main(void)
{
	int st;
	pid_t p = fork();

	if (p == 0)
		_exit(small_set());
	waitpid(p, &st, 0);
	ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		    "an 8-byte set at a guard page: no access past it");
	if (WIFSIGNALED(st))
		printf("small set: killed by signal %d\n", WTERMSIG(st));
	p = fork();
	if (p == 0)
		_exit(big_set());
	waitpid(p, &st, 0);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
		SKIP("cannot raise RLIMIT_NOFILE to 2048");
	ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a set past FD_SETSIZE");
	return t_exit();
}
