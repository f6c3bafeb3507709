// SPDX-License-Identifier: MIT
/* test_sig_vfork.c - a vfork child's mask calls (it shares its parent's memory and TLS) leave the parent's virtual mask alone: the parent's next fault is still its handler's. */
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

static sigjmp_buf env;

static void on_segv(int sig)
{
	(void)sig;
	siglongjmp(env, 1);
}

static int fault_recovered(void)
{
	if (sigsetjmp(env, 1) == 0) {
		*bad_ptr = 1;
		return 0;
	}
	return 1;
}

/* In a process of its own: a crash is a failed check, not a lost test. */
static int scenario(void)
{
	struct sigaction sa;
	sigset_t all, cur;
	pid_t p;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_segv;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, NULL);
	if (!fault_recovered())
		return 10;
	p = vfork();
	if (p == 0) {
		sigfillset(&all);
		sigprocmask(SIG_SETMASK, &all, NULL);
		_exit(0);
	}
	waitpid(p, NULL, 0);
	p = vfork();
	if (p == 0) {
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, NULL);
		execl("/bin/true", "true", (char *)NULL);
		_exit(0);
	}
	waitpid(p, NULL, 0);
	pthread_sigmask(SIG_SETMASK, NULL, &cur);
	if (sigismember(&cur, SIGSEGV) || sigismember(&cur, SIGTRAP))
		return 11;	/* the child's mask read back in the parent */
	if (!fault_recovered())
		return 12;
	return 0;
}

int main(void)
{
	int st;
	pid_t p = fork();

	if (p == 0)
		_exit(scenario());
	ASSERT_EQ(waitpid(p, &st, 0), p, "waitpid");
	ASSERT_FALSE(WIFSIGNALED(st), "the parent survives its fault after vfork");
	ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		    "mask read back and fault recovered (exit 0)");
	if (WIFSIGNALED(st))
		printf("killed by signal %d\n", WTERMSIG(st));
	else
		printf("exit %d\n", WEXITSTATUS(st));
	return t_exit();
}
