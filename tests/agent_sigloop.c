// SPDX-License-Identifier: MIT
/*
 * agent_sigloop.c - agent_review.sh's program: 1000 sigaction() and
 * pthread_sigmask() calls in a second thread, then 1000 more in main; no
 * sigfillset() of its own. Not linked with libprobekit.
 */
#include <pthread.h>
#include <signal.h>
#include <stddef.h>

static void on_usr1(int sig)
{
	(void)sig;
}

static void *loop(void *arg)
{
	for (int i = 0; i < 1000; i++) {
		struct sigaction sa = { .sa_handler = on_usr1 };
		sigset_t none;

		sigemptyset(&sa.sa_mask);
		sigaction(SIGUSR1, &sa, NULL);
		sigemptyset(&none);
		pthread_sigmask(SIG_BLOCK, &none, NULL);
	}
	return arg;
}

int main(void)
{
	pthread_t t;

	if (pthread_create(&t, NULL, loop, NULL) || pthread_join(t, NULL))
		return 1;
	loop(NULL);
	return 0;
}
