// SPDX-License-Identifier: MIT
/* test_sig_fork.c - fork while another thread changes signal handlers through probekit: the child can still change them. */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probekit.h"
#include "harness.h"

static volatile int stop, started;

static void on_segv(int sig)
{
	(void)sig;
}

static int die_handler(struct pk_notifier *nb, unsigned long action,
		       void *data)
{
	(void)nb;
	(void)action;
	(void)data;
	return PK_DONE;
}

/* pk_signal_action() holds the signal core's lock: held at some forks. */
static void *changer(void *arg)
{
	struct sigaction sa, old;

	(void)arg;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_segv;
	while (!stop) {
		pk_signal_action(SIGSEGV, &sa, &old);
		started = 1;
		pk_signal_action(SIGBUS, NULL, &old);
	}
	return NULL;
}

/* A lock inherited held would hang here; alarm() turns that into a failure. */
static int child(void)
{
	struct sigaction sa, old;

	alarm(10);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	if (pk_signal_action(SIGSEGV, &sa, &old))
		return 2;
	if (old.sa_handler != on_segv)
		return 3;
	return 0;
}

int main(void)
{
	struct pk_notifier die = { .call = die_handler };
	int forks = 0, good = 0;
	double until = t_now() + t_stress_seconds(1.0);
	pthread_t th;

#ifdef __SANITIZE_ADDRESS__
	SKIP("GCC 12's AddressSanitizer allocator is not fork-safe while "
	     "another thread allocates");
#endif
	/* probekit owns SIGSEGV while a die handler is registered. */
	ASSERT_OK(pk_die_register(&die), "die register");
	pthread_create(&th, NULL, changer, NULL);
	while (!started)
		sched_yield();
	good = t_fork_loop(child, until, 200, &forks);
	stop = 1;
	pthread_join(th, NULL);
	ASSERT_EQ(good, forks, "children that could change a handler");
	ASSERT_OK(pk_die_unregister(&die), "die unregister");
	return t_exit();
}
