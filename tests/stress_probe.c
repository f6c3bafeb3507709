// SPDX-License-Identifier: MIT
/* stress_probe.c - arm and remove probes in a loop while many threads call the probed functions. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "harness.h"
#include "probe_target.h"
#include "probekit.h"

/*
 * 64 callers, as the issue asks. Each register/unregister waits until every
 * thread has been seen outside the changed trampolines (sweep() in
 * probe.c), which takes a scheduler rotation of all callers per round: on 2
 * cores about 0.2-0.4 s for 64 busy threads, several rounds when most of
 * their time is spent in handlers, as here. Under ASan handlers are slower
 * still and a sweep could run into its 10 s limit (-EBUSY): 16 there.
 */
#ifdef __SANITIZE_ADDRESS__
#define NTHREADS 16
#else
#define NTHREADS 64
#endif

__attribute__((noinline)) long exe_mix(long a, long b)
{
	volatile long x = a;

	return x * 7 - b;
}

static volatile int stop;
static unsigned long hits;		/* atomic */
static unsigned long wrong;		/* atomic */
static unsigned long calls[NTHREADS];

static void count(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p, (void)r, (void)ctx;
	__atomic_add_fetch(&hits, 1, __ATOMIC_RELAXED);
}

static void *caller(void *arg)
{
	long id = (long)arg, i = 0;

	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		long a = id + i, b = i & 0xff;

		if (pt_sum6(a, b, 1, 2, 3, 4) != pt_sum6_ref(a, b, 1, 2, 3, 4) ||
		    exe_mix(a, b) != a * 7 - b ||
		    pt_asm_endbr(a, b) != a + b ||
		    pt_fmix(2.0, 0.5, b) != 1.0 + (double)b ||
		    pt_asm_jcc(b) != (b ? b + 1 : -1) || pt_asm_rip(b) != 100 + b)
			__atomic_add_fetch(&wrong, 1, __ATOMIC_RELAXED);
		i++;
	}
	calls[id] = (unsigned long)i;
	return NULL;
}

int main(void)
{
	static const char *const syms[] = { "pt_sum6", "exe_mix", "pt_asm_endbr",
					    "pt_fmix", "pt_sum6", "pt_asm_jcc",
					    "pt_asm_rip" };
	struct pk_probe *p[7] = { 0 };
	pthread_t th[NTHREADS];
	double end = t_now() + t_stress_seconds(2);
	unsigned long rounds = 0, total = 0;

	for (int i = 0; i < 7; i++) {
		PK_OPTS(pk_probe_opts, o, .symbol = syms[i], .pre = count);

		if (!ASSERT_OK(pk_probe_create(&o, &p[i]), syms[i]))
			return t_exit();
	}
	for (long i = 0; i < NTHREADS; i++)
		pthread_create(&th[i], NULL, caller, (void *)i);
	double worst = 0, t0 = t_now();

	while (t_now() < end) {
		double r0 = t_now();

		/* All five in one batch, then in two halves out of order. */
		if (!ASSERT_OK(pk_probe_register(p, 7), "register all"))
			break;
		if (!ASSERT_OK(pk_probe_unregister(p, 7), "unregister all"))
			break;
		if (!ASSERT_OK(pk_probe_register(p + 2, 3), "register 3") ||
		    !ASSERT_OK(pk_probe_register(p, 2), "register 2") ||
		    !ASSERT_OK(pk_probe_unregister(p + 1, 3), "unregister 3") ||
		    !ASSERT_OK(pk_probe_unregister(p, 1), "unregister 1") ||
		    !ASSERT_OK(pk_probe_unregister(p + 4, 1), "unregister 1") ||
		    !ASSERT_OK(pk_probe_register(p + 5, 2), "register rip+jcc") ||
		    !ASSERT_OK(pk_probe_unregister(p + 5, 2), "unregister rip+jcc"))
			break;
		rounds++;
		if (t_now() - r0 > worst)
			worst = t_now() - r0;
	}
	(void)t0;
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(th[i], NULL);
		total += calls[i];
	}
	printf("%lu arm/disarm rounds (9 register/unregister calls each, slowest "
	       "round %.0f ms), %lu calls, %lu handler hits\n", rounds,
	       worst * 1e3, total, hits);
	ASSERT_EQ(wrong, 0, "wrong results while probes came and went");
	ASSERT_GE(rounds, 1, "rounds");
	ASSERT_GE(total, 1, "calls");
	for (int i = 0; i < 7; i++)
		pk_probe_destroy(p[i]);
	return t_exit();
}
