// SPDX-License-Identifier: MIT
/* test_sig_fork.c - an owned signal the program raised while it had it blocked is pending in the parent only after fork(), as the kernel's pending signals are (issue 9, item 1). */
#include "sig_common.h"

static volatile int traps;

static void on_trap(int sig)
{
	(void)sig;
	traps++;
}

int main(void)
{
	sigset_t one;
	int status = 0;
	pid_t pid;

	if (signal(SIGTRAP, on_trap) == SIG_ERR)
		SKIP("signal(SIGTRAP) failed");
	sigemptyset(&one);
	sigaddset(&one, SIGTRAP);
	sigprocmask(SIG_BLOCK, &one, NULL);
	raise(SIGTRAP);			/* deferred: the program blocks it */
	ASSERT_EQ(traps, 0, "SIGTRAP not delivered while blocked");
	pid = fork();
	if (pid == 0) {
		alarm(10);
		sigprocmask(SIG_UNBLOCK, &one, NULL);
		_exit(traps == 0 ? 0 : 10 + traps);
	}
	waitpid(pid, &status, 0);
	if (WIFEXITED(status) && WEXITSTATUS(status) > 10)
		fprintf(stderr, "child got the parent's pending SIGTRAP %d time(s)\n",
			WEXITSTATUS(status) - 10);
	sig_expect_ok(status, "child: no SIGTRAP pending after fork");
	sigprocmask(SIG_UNBLOCK, &one, NULL);
	ASSERT_EQ(traps, 1, "parent: its pending SIGTRAP delivered once");
	return t_exit();
}
