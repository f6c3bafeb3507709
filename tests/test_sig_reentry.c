// SPDX-License-Identifier: MIT
/* test_sig_reentry.c - sigaction and signal are async-signal-safe under probekit too: a handler that sets an owned signal's handler while its thread is doing the same never deadlocks (issue 9, item 1). */
#include <sys/time.h>

#include "sig_common.h"

static volatile unsigned long in_handler;

static void on_trap(int sig)
{
	(void)sig;
}

static void on_alarm(int sig)
{
	struct sigaction sa = { .sa_handler = SIG_DFL };

	(void)sig;
	sigaction(SIGSEGV, &sa, NULL);
	signal(SIGTRAP, SIG_DFL);
	in_handler++;
}

static int scenario(void)
{
	struct itimerval it = { .it_interval = { .tv_usec = 200 },
				.it_value = { .tv_usec = 200 } };
	struct sigaction sa = { .sa_handler = on_trap };
	time_t end = time(NULL) + 2;

	signal(SIGALRM, on_alarm);
	setitimer(ITIMER_REAL, &it, NULL);
	while (time(NULL) < end || in_handler < 100) {
		sigaction(SIGTRAP, &sa, NULL);
		sigaction(SIGSEGV, &sa, NULL);
	}
	return 0;
}

int main(void)
{
	int status = 0;
	pid_t pid = fork();

	if (pid == 0)
		_exit(scenario());
	for (int i = 0; i < 300; i++) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			break;
		if (i == 299) {
			fprintf(stderr, "hung (deadlocked in sigaction?) for 30 s\n");
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
		}
		usleep(100000);
	}
	sig_expect_ok(status, "sigaction from a handler interrupting sigaction");
	return t_exit();
}
