// SPDX-License-Identifier: MIT
/* test_probe_gpr_join.c - an unflagged probe that joins a PK_PROBE_F_GPR_ONLY probe's address while a hit is in flight gets neither handler for that hit: never a post-handler without its pre-handler. */
#include <pthread.h>
#include <stdio.h>

#include "harness.h"
#include "probekit.h"

#define GPR __attribute__((target("general-regs-only")))

T_NOINLINE long gj_target(long x)
{
	volatile long y = x;

	return y * 3 + 1;
}

static int in_a, go, first = 1;
static unsigned long a_pre, a_post, b_pre, b_post;

/* The first hit waits inside A's pre-handler until B has joined. */
GPR static void pre_a(struct pk_probe *p, struct pk_regs *r, void *c)
{
	(void)p, (void)r, (void)c;
	a_pre++;
	if (__atomic_load_n(&first, __ATOMIC_ACQUIRE)) {
		__atomic_store_n(&first, 0, __ATOMIC_RELAXED);
		__atomic_store_n(&in_a, 1, __ATOMIC_RELEASE);
		while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE))
			;
	}
}

GPR static void post_a(struct pk_probe *p, struct pk_regs *r, void *c)
{
	(void)p, (void)r, (void)c;
	a_post++;
}

static void pre_b(struct pk_probe *p, struct pk_regs *r, void *c)
{
	(void)p, (void)r, (void)c;
	b_pre++;
}

static void post_b(struct pk_probe *p, struct pk_regs *r, void *c)
{
	(void)p, (void)r, (void)c;
	b_post++;
}

static void *caller(void *arg)
{
	(void)arg;
	return (void *)gj_target(5);
}

int main(void)
{
	PK_OPTS(pk_probe_opts, oa, .addr = (void *)gj_target, .pre = pre_a,
		.post = post_a, .flags = PK_PROBE_F_GPR_ONLY);
	PK_OPTS(pk_probe_opts, ob, .addr = (void *)gj_target, .pre = pre_b,
		.post = post_b);
	struct pk_probe_info ib = { .sz = sizeof(ib) };
	struct pk_probe *a, *b;
	pthread_t t;
	void *rv;

	if (!ASSERT_OK(pk_probe_create(&oa, &a), "create A") ||
	    !ASSERT_OK(pk_probe_create(&ob, &b), "create B") ||
	    !ASSERT_OK(pk_probe_register(&a, 1), "register A"))
		return t_exit();
	pthread_create(&t, NULL, caller, NULL);
	while (!__atomic_load_n(&in_a, __ATOMIC_ACQUIRE))
		;
	ASSERT_OK(pk_probe_register(&b, 1), "register B during A's hit");
	__atomic_store_n(&go, 1, __ATOMIC_RELEASE);
	pthread_join(t, &rv);
	ASSERT_EQ((long)rv, 16, "the probed function's result");
	ASSERT_EQ(a_pre, 1, "A's pre-handler");
	ASSERT_EQ(a_post, 1, "A's post-handler");
	ASSERT_EQ(b_post, b_pre, "B's post-handler only after its pre-handler");
	pk_probe_get_info(b, &ib);
	ASSERT_EQ(ib.missed + b_pre, 1, "B's hit: run or counted missed, once");
	/* The next hit runs both, through the vector save. */
	ASSERT_EQ(gj_target(1), 4, "second call");
	ASSERT_EQ(b_pre, b_post, "B's pair on the next hit");
	ASSERT_GE(b_pre, 1, "B's pre-handler on the next hit");
	pk_probe_unregister(&b, 1);
	pk_probe_unregister(&a, 1);
	pk_probe_destroy(b);
	pk_probe_destroy(a);
	return t_exit();
}
