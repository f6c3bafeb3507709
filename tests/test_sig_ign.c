// SPDX-License-Identifier: MIT
/* test_sig_ign.c - SA_SIGINFO with SIG_IGN or SIG_DFL is ignore or default, not a handler (the union's value decides, as in the kernel): children auto-reaped, waits not interrupted, an exec'd child inherits SIG_IGN. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static void set(int sig, sighandler_t h, int flags)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = h;
	sa.sa_flags = flags;
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
}

int main(int argc, char **argv)
{
	struct timespec ts = { 0, 300000000 };
	struct sigaction o;
	int r, st;
	pid_t p;

	if (argc == 2 && !strcmp(argv[1], "child")) {
		/* Exec'd with SIGUSR2 ignored: its own kill must not end it. */
		kill(getpid(), SIGUSR2);
		return sigaction(SIGUSR2, NULL, &o) ? 3 :
		       o.sa_handler == SIG_IGN ? 0 : 4;
	}

	/* SIGCHLD ignored with SA_SIGINFO: children are reaped by the kernel. */
	set(SIGCHLD, SIG_IGN, SA_SIGINFO);
	sigaction(SIGCHLD, NULL, &o);
	ASSERT_TRUE(o.sa_handler == SIG_IGN, "SIGCHLD reads back SIG_IGN");
	p = fork();
	if (p == 0)
		_exit(0);
	usleep(200000);
	errno = 0;
	r = waitpid(-1, NULL, WNOHANG);
	ASSERT_EQ(r, -1, "no zombie left (waitpid -1)");
	ASSERT_EQ(errno, ECHILD, "waitpid ECHILD");
	set(SIGCHLD, SIG_DFL, 0);

	/* SIGUSR1 ignored with SA_SIGINFO: a sleep is not interrupted. */
	set(SIGUSR1, SIG_IGN, SA_SIGINFO);
	p = fork();
	if (p == 0) {
		usleep(50000);
		kill(getppid(), SIGUSR1);
		_exit(0);
	}
	r = nanosleep(&ts, NULL);
	ASSERT_EQ(r, 0, "nanosleep not interrupted by an ignored signal");
	waitpid(p, NULL, 0);

	/* SIGUSR1 default with SA_SIGINFO: the default action (termination). */
	set(SIGUSR1, SIG_DFL, SA_SIGINFO);
	p = fork();
	if (p == 0) {
		raise(SIGUSR1);
		_exit(0);
	}
	waitpid(p, &st, 0);
	ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGUSR1,
		    "SA_SIGINFO + SIG_DFL takes the default action");

	/* An owned signal (probekit's SIGTRAP) ignored with SA_SIGINFO. */
	p = fork();
	if (p == 0) {
		set(SIGTRAP, SIG_IGN, SA_SIGINFO);
		raise(SIGTRAP);
		_exit(0);
	}
	waitpid(p, &st, 0);
	ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		    "SIGTRAP ignored with SA_SIGINFO: raise() survives");

	/* An exec'd child inherits SIG_IGN (a handler would become SIG_DFL). */
	set(SIGUSR2, SIG_IGN, SA_SIGINFO);
	p = fork();
	if (p == 0) {
		execl("/proc/self/exe", argv[0], "child", (char *)NULL);
		_exit(5);
	}
	waitpid(p, &st, 0);
	ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0,
		    "exec'd child keeps SIG_IGN");
	return t_exit();
}
