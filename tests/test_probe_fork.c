// SPDX-License-Identifier: MIT
/* test_probe_fork.c - fork while probes are armed, hit, and registered in other threads: the child's probes count and come off. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "probe_target.h"
#include "probekit.h"

#define NCALLERS 3
#define NFORKS 20

__attribute__((noinline)) long exe_mix(long a, long b)
{
	volatile long x = a;

	return x * 7 - b;
}

static unsigned long hits[3];	/* atomic: jump, int3 (forced), int3 (short) */
static volatile int stop;
static unsigned long wrong;	/* atomic */

static void count(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p, (void)r;
	__atomic_add_fetch(&hits[(long)ctx], 1, __ATOMIC_RELAXED);
}

static void *caller(void *arg)
{
	(void)arg;
	while (!stop) {
		if (pt_sum6(1, 1, 1, 1, 1, 1) != 21 || pt_asm_rip(1) != 101)
			__atomic_add_fetch(&wrong, 1, __ATOMIC_RELAXED);
		pt_asm_short();
	}
	return NULL;
}

/* Keeps probe_lock, the fault layer's lock and the text lock busy. */
static __attribute__((unused)) void *churn(void *arg)
{
	struct pk_probe **q = arg;

	while (!stop) {
		if (pk_probe_register(q, 2) || pk_probe_unregister(q, 2))
			__atomic_add_fetch(&wrong, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

/* The child: the only thread; its probes work and can be removed. */
static int child(struct pk_probe **p)
{
	int bad = 0;

	alarm(30);	/* a lock inherited held would hang here */
	for (int i = 0; i < 3; i++)
		hits[i] = 0;
	for (int i = 0; i < 10; i++) {
		bad |= pt_sum6(1, 2, 3, 4, 5, 6) != pt_sum6_ref(1, 2, 3, 4, 5, 6);
		bad |= pt_asm_rip(2) != 102;
		pt_asm_short();
	}
	bad |= hits[0] != 10 || hits[1] != 10 || hits[2] != 10;
	bad |= pk_probe_unregister(p, 3) != 0;
	pt_sum6(1, 2, 3, 4, 5, 6);
	pt_asm_rip(2);
	pt_asm_short();
	bad |= hits[0] != 10 || hits[1] != 10 || hits[2] != 10;
	bad |= exe_mix(2, 1) != 13;
	return bad;
}

int main(void)
{
	struct pk_probe *p[3] = { 0 }, *q[2] = { 0 };
	pthread_t th[NCALLERS + 1];
	int ok = 0;

	{
		PK_OPTS(pk_probe_opts, a, .symbol = "pt_sum6", .pre = count, .ctx = (void *)0);
		PK_OPTS(pk_probe_opts, b, .symbol = "pt_asm_rip", .pre = count,
			.ctx = (void *)1, .flags = PK_PROBE_F_INT3);
		PK_OPTS(pk_probe_opts, c, .symbol = "pt_asm_short", .pre = count,
			.ctx = (void *)2);
		PK_OPTS(pk_probe_opts, d, .addr = (void *)exe_mix, .pre = count,
			.ctx = (void *)0, .flags = PK_PROBE_F_INT3);
		PK_OPTS(pk_probe_opts, e, .symbol = "pt_asm_jcc", .pre = count,
			.ctx = (void *)0);

		if (!ASSERT_OK(pk_probe_create(&a, &p[0]), "jump") ||
		    !ASSERT_OK(pk_probe_create(&b, &p[1]), "int3 forced") ||
		    !ASSERT_OK(pk_probe_create(&c, &p[2]), "int3 fallback") ||
		    !ASSERT_OK(pk_probe_create(&d, &q[0]), "churn int3") ||
		    !ASSERT_OK(pk_probe_create(&e, &q[1]), "churn jump") ||
		    !ASSERT_OK(pk_probe_register(p, 3), "register"))
			return t_exit();
	}
	for (long i = 0; i < NCALLERS; i++)
		pthread_create(&th[i], NULL, caller, NULL);
#ifdef __SANITIZE_ADDRESS__
	/*
	 * GCC 12's AddressSanitizer allocator is not fork-safe while another
	 * thread allocates (test_text_fork): no registering thread there.
	 */
	pthread_create(&th[NCALLERS], NULL, caller, NULL);
#else
	pthread_create(&th[NCALLERS], NULL, churn, q);
#endif
	for (int i = 0; i < NFORKS; i++) {
		pid_t pid;
		int st;

		usleep(5000);
		pid = fork();
		if (pid == 0)
			_exit(child(p));
		if (!ASSERT_GE(pid, 1, "fork"))
			break;
		waitpid(pid, &st, 0);
		if (WIFSIGNALED(st))
			printf("child killed by signal %d\n", WTERMSIG(st));
		ok += WIFEXITED(st) && WEXITSTATUS(st) == 0;
	}
	stop = 1;
	for (int i = 0; i <= NCALLERS; i++)
		pthread_join(th[i], NULL);
	ASSERT_EQ(ok, NFORKS, "children whose probes counted and came off");
	ASSERT_EQ(wrong, 0, "wrong results or failed (un)registers in the parent");
	ASSERT_GE(hits[1], 1, "parent's int3 probe hit");
	ASSERT_OK(pk_probe_unregister(p, 3), "parent unregisters");
	for (int i = 0; i < 3; i++)
		pk_probe_destroy(p[i]);
	pk_probe_destroy(q[0]);
	pk_probe_destroy(q[1]);
	return t_exit();
}
