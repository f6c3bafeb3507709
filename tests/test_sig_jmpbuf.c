// SPDX-License-Identifier: MIT
/* test_sig_jmpbuf.c - the virtual mask a sigsetjmp saw travels with its jmp_buf: copied buffers, freed and reused ones, and any number of them (no 16-entry table keyed by address). */
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* Address 8: a fault, not a null store (UBSan would report that). */
static volatile int *volatile bad_ptr = (volatile int *)8;

#define NBUF 100

static sigjmp_buf *cur;

static void on_segv(int sig)
{
	(void)sig;
	siglongjmp(*cur, 2);
}

static int blocked(int sig)
{
	sigset_t m;

	sigprocmask(SIG_SETMASK, NULL, &m);
	return sigismember(&m, sig);
}

/* A stale note must not make a later buffer's jump block SIGSEGV. */
static int stale_and_copied(void)
{
	struct sigaction sa;
	sigset_t seg;
	sigjmp_buf local, *a, *b;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_segv;
	sa.sa_flags = SA_NODEFER;
	sigaction(SIGSEGV, &sa, NULL);
	sigemptyset(&seg);
	sigaddset(&seg, SIGSEGV);
	a = malloc(sizeof(*a));
	sigprocmask(SIG_BLOCK, &seg, NULL);
	if (sigsetjmp(*a, 1) == 0) {
	}
	sigprocmask(SIG_UNBLOCK, &seg, NULL);
	free(a);
	b = malloc(sizeof(*b));
	if (sigsetjmp(local, 1) == 0) {
		memcpy(b, &local, sizeof(local));
		siglongjmp(*b, 1);
	}
	if (blocked(SIGSEGV))
		return 10;
	cur = &local;
	if (sigsetjmp(local, 1) == 0) {
		*bad_ptr = 1;
		return 11;
	}
	free(b);
	return 0;
}

int main(void)
{
	static sigjmp_buf bufs[NBUF];
	static sigjmp_buf copy;
	sigset_t all, seg, none;
	volatile int i, jumped = 0;
	int st;
	pid_t p;

	p = fork();
	if (p == 0)
		_exit(stale_and_copied());
	waitpid(p, &st, 0);
	ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		    "stale note of a freed buffer: fault still recovered");

	/* 100 buffers saved with every signal blocked: each keeps its mask. */
	sigfillset(&all);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &all, NULL);
	for (i = 0; i < NBUF; i++)
		if (sigsetjmp(bufs[i], 1))
			break;
	if (!jumped) {
		jumped = 1;
		sigprocmask(SIG_SETMASK, &none, NULL);
		siglongjmp(bufs[0], 1);
	}
	ASSERT_TRUE(blocked(SIGSEGV), "bufs[0]: SIGSEGV blocked again");
	ASSERT_TRUE(blocked(SIGTRAP), "bufs[0]: SIGTRAP blocked again");
	ASSERT_TRUE(blocked(SIGUSR1), "bufs[0]: SIGUSR1 blocked again");

	/* A copy carries its note. */
	sigemptyset(&seg);
	sigaddset(&seg, SIGSEGV);
	sigprocmask(SIG_SETMASK, &seg, NULL);
	if (sigsetjmp(bufs[0], 1) == 0) {
		memcpy(&copy, &bufs[0], sizeof(copy));
		memset(&bufs[0], 0, sizeof(bufs[0]));
		sigprocmask(SIG_SETMASK, &none, NULL);
		siglongjmp(copy, 1);
	}
	ASSERT_TRUE(blocked(SIGSEGV), "copied jmp_buf: SIGSEGV blocked again");
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (sigsetjmp(bufs[1], 1) == 0)
		siglongjmp(bufs[1], 1);
	ASSERT_FALSE(blocked(SIGSEGV), "a buffer saved unblocked: unblocked");
	return t_exit();
}
