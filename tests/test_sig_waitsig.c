// SPDX-License-Identifier: MIT
/* test_sig_waitsig.c - the commit's wait for a thread that blocks SIGTRAP for a short while lasts its full ~2 s even when signals keep interrupting the committing thread's sleeps (they cut it to a few ms: test_probe_signal_api was refused so under load). */
#include <stdint.h>
#include <sys/time.h>
#include <time.h>

#include "sig_common.h"

static volatile int started;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Blocks every signal behind libc's back for 300 ms, running all along. */
static void *blocker(void *arg)
{
	unsigned long all = ~0UL, old = 0;
	double end;

	(void)arg;
	syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, &old, 8);
	started = 1;
	end = now_s() + 0.3;
	while (now_s() < end)
		;
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, 8);
	return NULL;
}

static void on_alarm(int sig)
{
	(void)sig;
}

static int scenario(void)
{
	struct itimerval every = { { 0, 200 }, { 0, 200 } }, off = { 0 };
	struct pk_probe *p = sig_probe((void *)sig_victim_jmp, 0);
	struct sigaction sa = { .sa_handler = on_alarm };
	pthread_t t;
	int r;

	if (!p)
		return 2;
	sigaction(SIGALRM, &sa, NULL);
	if (pthread_create(&t, NULL, blocker, NULL))
		return 3;
	while (!started)
		;
	/* A signal every 200 us: every sleep of the wait ends early. */
	setitimer(ITIMER_REAL, &every, NULL);
	pk_set_log(t_quiet_log, NULL);
	r = pk_probe_register(&p, 1);
	pk_set_log(NULL, NULL);
	setitimer(ITIMER_REAL, &off, NULL);
	pthread_join(t, NULL);
	if (r) {
		fprintf(stderr, "commit while a thread blocked SIGTRAP for 300 ms "
			"and signals interrupted the wait: %d\n", r);
		return 4;
	}
	if (sig_victim_jmp(2) != 7 || sig_hits != 1)
		return 5;
	if (pk_probe_unregister(&p, 1))
		return 6;
	pk_probe_destroy(p);
	return 0;
}

int main(void)
{
	int st = sig_in_child(scenario);

	sig_expect_ok(st, "a short SIGTRAP blocker waited for through signals");
	if (WIFEXITED(st) && WEXITSTATUS(st))
		fprintf(stderr, "scenario exit %d\n", WEXITSTATUS(st));
	return t_exit();
}
