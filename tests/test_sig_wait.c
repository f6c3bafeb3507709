// SPDX-License-Identifier: MIT
/* test_sig_wait.c - a daemon's signal thread sigwaits on a full set while probes are registered on what another thread runs: it never takes probekit's sweep signal or SIGTRAP, and registration succeeds (issue 9, item 1). */
#include <sched.h>

#include "sig_common.h"

static volatile int stop;
static volatile unsigned long rounds;
static volatile int bad_sig;

static void *runner(void *arg)
{
	long acc = 0;

	(void)arg;
	while (!stop) {
		acc += sig_victim_jmp(rounds) + sig_victim_int3(rounds);
		__atomic_add_fetch(&rounds, 1, __ATOMIC_RELAXED);
	}
	return (void *)acc;
}

static void *waiter(void *arg)
{
	sigset_t all;
	int sig;

	(void)arg;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, NULL);
	for (;;) {
		if (sigwait(&all, &sig))
			continue;
		if (sig == SIGUSR1)
			return NULL;
		bad_sig = sig;	/* anything else was never sent by us */
	}
}

static int scenario(void)
{
	struct pk_probe *jp = sig_probe((void *)sig_victim_jmp, 0);
	struct pk_probe *ip = sig_probe((void *)sig_victim_int3, PK_PROBE_F_INT3);
	pthread_t r, w;
	int fails = 0;

	alarm(60);
	if (!jp || !ip)
		return 2;
	pthread_create(&w, NULL, waiter, NULL);
	pthread_create(&r, NULL, runner, NULL);
	while (__atomic_load_n(&rounds, __ATOMIC_RELAXED) < 1000)
		sched_yield();
	for (int i = 0; i < 10 && !bad_sig; i++) {
		unsigned long n = rounds;

		fails += pk_probe_register(&jp, 1) != 0;
		fails += pk_probe_register(&ip, 1) != 0;
		while (rounds < n + 50)
			sched_yield();
		fails += pk_probe_unregister(&jp, 1) != 0;
		fails += pk_probe_unregister(&ip, 1) != 0;
	}
	stop = 1;
	pthread_join(r, NULL);
	pthread_kill(w, SIGUSR1);
	pthread_join(w, NULL);
	if (bad_sig) {
		fprintf(stderr, "sigwait returned signal %d (SIGRTMAX-2 = %d)\n",
			bad_sig, SIGRTMAX - 2);
		return 3;
	}
	if (fails) {
		fprintf(stderr, "%d registrations failed\n", fails);
		return 4;
	}
	return sig_hits ? 0 : 5;
}

int main(void)
{
	sig_expect_ok(sig_in_child(scenario),
		      "sigwait on a full set beside probe registrations");
	return t_exit();
}
