// SPDX-License-Identifier: MIT
/* test_probe_ret_fork.c - fork while another thread registers and unregisters return probes: the child's return probes work. */
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include "harness.h"
#include "probekit.h"


T_NOINLINE long churned(long x)
{
	return x * 3 + 1;
}

T_NOINLINE long in_child(long x)
{
	return x * 5 + 1;
}

static struct pk_retprobe *busy;
static volatile int stop, started;
static long child_rets;

static void on_ret(struct pk_retprobe *rp, struct pk_regs *r, void *data,
		   void *ctx)
{
	(void)rp;
	(void)data;
	(void)ctx;
	if ((long)pk_regs_ret(r) == 11)
		child_rets++;
}

/* Return probes' lock held at some forks (unregister waits under it). */
static void *churn(void *arg)
{
	(void)arg;
	while (!stop) {
		pk_retprobe_register(&busy, 1);
		started = 1;
		pk_retprobe_unregister(&busy, 1);
	}
	return NULL;
}

/* A lock inherited held would hang here; alarm() makes that a failure. */
static int child(void)
{
	PK_OPTS(pk_retprobe_opts, o, .addr = (void *)in_child, .ret = on_ret);
	struct pk_retprobe *rp;

	alarm(10);
	if (pk_retprobe_create(&o, &rp) || pk_retprobe_register(&rp, 1))
		return 2;
	if (in_child(2) != 11 || child_rets != 1)
		return 3;
	if (pk_retprobe_unregister(&rp, 1))
		return 4;
	pk_retprobe_destroy(rp);
	return 0;
}

int main(void)
{
	PK_OPTS(pk_retprobe_opts, o, .addr = (void *)churned, .ret = on_ret);
	double until = t_now() + t_stress_seconds(1.0);
	int forks, good;
	pthread_t th;

#ifdef __SANITIZE_ADDRESS__
	SKIP("GCC 12's AddressSanitizer allocator is not fork-safe while "
	     "another thread allocates");
#endif
	ASSERT_OK(pk_retprobe_create(&o, &busy), "create");
	pthread_create(&th, NULL, churn, NULL);
	while (!started)
		sched_yield();
	good = t_fork_loop(child, until, 50, &forks);
	stop = 1;
	pthread_join(th, NULL);
	ASSERT_EQ(good, forks, "children whose return probes worked");
	pk_retprobe_destroy(busy);
	return t_exit();
}
