// SPDX-License-Identifier: MIT
/* test_sig_blocked.c - a thread that blocks every signal with pthread_sigmask keeps calling functions while they get jump probes, int3 probes and key flips (issue 9, item 1). */
#include <sched.h>

#include "sig_common.h"

static volatile int stop;
static volatile unsigned long rounds;

static void *worker(void *arg)
{
	sigset_t all;
	long acc = 0;

	(void)arg;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, NULL);	/* as liblzma's workers do */
	while (!stop) {
		acc += sig_victim_jmp(rounds) + sig_victim_int3(rounds) +
		       sig_keyed(rounds);
		__atomic_add_fetch(&rounds, 1, __ATOMIC_RELAXED);
	}
	return (void *)acc;
}

/* In a child, so that a death is reported rather than taking the test down. */
static int scenario(void)
{
	struct pk_probe *jp = sig_probe((void *)sig_victim_jmp, 0);
	struct pk_probe *ip = sig_probe((void *)sig_victim_int3, PK_PROBE_F_INT3);
	pthread_t t;
	int fails = 0;

	if (!jp || !ip)
		return 2;
	pthread_create(&t, NULL, worker, NULL);
	while (__atomic_load_n(&rounds, __ATOMIC_RELAXED) < 1000)
		sched_yield();
	for (int i = 0; i < 20; i++) {
		unsigned long r = rounds;

		fails += pk_probe_register(&jp, 1) != 0;
		fails += pk_probe_register(&ip, 1) != 0;
		fails += pk_key_enable(&sig_key) != 0;
		while (rounds < r + 50)
			sched_yield();
		fails += pk_probe_unregister(&jp, 1) != 0;
		fails += pk_probe_unregister(&ip, 1) != 0;
		fails += pk_key_disable(&sig_key) != 0;
	}
	stop = 1;
	pthread_join(t, NULL);
	if (fails) {
		fprintf(stderr, "%d registrations failed\n", fails);
		return 3;
	}
	if (!sig_hits) {
		fprintf(stderr, "no probe hit counted\n");
		return 4;
	}
	return 0;
}

int main(void)
{
	for (int i = 0; i < 5; i++)
		sig_expect_ok(sig_in_child(scenario),
			      "all signals blocked: probes and keys on what the thread runs");
	return t_exit();
}
