// SPDX-License-Identifier: MIT
/* stress_probe_gpr.c - flagged (PK_PROBE_F_GPR_ONLY) and unflagged probes armed and removed on one address, entry and return probes, while threads call it with vector arguments and check every result. */

/*
 * The unflagged handlers clobber every vector register (as glibc's AVX2
 * code would); the flagged ones touch general registers only. Whatever
 * mix is armed at any moment, and while it changes, every call of
 * vt_sum8 (two __m256d arguments), vt_ret4 (an __m256d result) and
 * vt_ipa_caller (values kept in xmm/ymm/general registers across a call
 * of a probed vt_leaf) must compute what it computes unprobed.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "probekit.h"
#include "vector_targets.h"

#define GPR_ONLY __attribute__((target("general-regs-only")))
#ifdef __SANITIZE_ADDRESS__
#define NTHREADS 4
#else
#define NTHREADS 4
#endif

static volatile int stop;
static unsigned long wrong, calls, gpr_hits, plain_hits;	/* atomic */

GPR_ONLY static void pre_gpr(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p, (void)r, (void)ctx;
	__atomic_add_fetch(&gpr_hits, 1, __ATOMIC_RELAXED);
}

static void pre_plain(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p, (void)r, (void)ctx;
	__atomic_add_fetch(&plain_hits, 1, __ATOMIC_RELAXED);
	vt_clobber_vector();
}

GPR_ONLY static void ret_gpr(struct pk_retprobe *rp, struct pk_regs *r,
			     void *data, void *ctx)
{
	(void)rp, (void)r, (void)data, (void)ctx;
	__atomic_add_fetch(&gpr_hits, 1, __ATOMIC_RELAXED);
}

static void ret_plain(struct pk_retprobe *rp, struct pk_regs *r, void *data,
		      void *ctx)
{
	(void)rp, (void)r, (void)data, (void)ctx;
	__atomic_add_fetch(&plain_hits, 1, __ATOMIC_RELAXED);
	vt_clobber_vector();
}

static int one_round(long x)
{
	static const double a[4] = { 1, 2, 3, 4 }, b[4] = { 10, 20, 30, 40 };
	double out4[4] = { 0, 0, 0, 0 };
	long out[16];
	int bad = 0;

	bad += (long long)vt_call_sum8(a, b) != 110;
	vt_call_ret4(100, out4);
	for (int i = 0; i < 4; i++)
		bad += out4[i] != 100 + i;
	memset(out, 0, sizeof(out));
	bad += vt_ipa_caller(x, out) != x + 1;
	for (int i = 0; i < 6; i++)
		bad += out[i] != x + 1 + i;
	for (int i = 0; i < 3; i++)
		bad += out[6 + i] != x + 7 + i;
	bad += out[9] != x + 10;
	return bad;
}

static void *caller(void *arg)
{
	long x = (long)arg * 0x10000;

	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		if (one_round(x++))
			__atomic_add_fetch(&wrong, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

enum { P_GPR, P_PLAIN, P_GPR_INT3, P_LEAF_GPR, P_LEAF_PLAIN, NP };
enum { R_GPR, R_PLAIN, R_LEAF_GPR, NR };

int main(void)
{
	struct pk_probe *ps[NP];
	struct pk_retprobe *rs[NR];
	pthread_t th[NTHREADS];
	double secs = t_stress_seconds(3), t0;
	unsigned long rounds = 0;
	struct timespec ts;
	unsigned int seed = 12345;
	int armed_p[NP] = { 0 }, armed_r[NR] = { 0 }, err = 0;

	if (!__builtin_cpu_supports("avx2"))
		SKIP("the CPU has no AVX2 (the targets take __m256d)");
	{
		struct { void *fn; unsigned int flags; pk_probe_handler_fn pre; } pd[NP] = {
			[P_GPR] = { vt_addr_sum8(), PK_PROBE_F_GPR_ONLY, pre_gpr },
			[P_PLAIN] = { vt_addr_sum8(), 0, pre_plain },
			[P_GPR_INT3] = { vt_addr_ret4(), PK_PROBE_F_GPR_ONLY | PK_PROBE_F_INT3,
					 pre_gpr },
			[P_LEAF_GPR] = { (void *)vt_leaf, PK_PROBE_F_GPR_ONLY, pre_gpr },
			[P_LEAF_PLAIN] = { (void *)vt_leaf, 0, pre_plain },
		};
		struct { void *fn; unsigned int flags; pk_retprobe_ret_fn ret; } rd[NR] = {
			[R_GPR] = { vt_addr_ret4(), PK_PROBE_F_GPR_ONLY, ret_gpr },
			[R_PLAIN] = { vt_addr_ret4(), 0, ret_plain },
			[R_LEAF_GPR] = { (void *)vt_leaf, PK_PROBE_F_GPR_ONLY, ret_gpr },
		};

		for (int i = 0; i < NP; i++) {
			PK_OPTS(pk_probe_opts, o, .addr = pd[i].fn, .pre = pd[i].pre,
				.flags = pd[i].flags);

			if (!ASSERT_OK(pk_probe_create(&o, &ps[i]), "pk_probe_create"))
				return t_exit();
		}
		for (int i = 0; i < NR; i++) {
			PK_OPTS(pk_retprobe_opts, o, .addr = rd[i].fn, .ret = rd[i].ret,
				.flags = rd[i].flags);

			if (!ASSERT_OK(pk_retprobe_create(&o, &rs[i]), "pk_retprobe_create"))
				return t_exit();
		}
	}
	ASSERT_EQ(one_round(7), 0, "unprobed");
	for (long i = 0; i < NTHREADS; i++)
		if (pthread_create(&th[i], NULL, caller, (void *)i))
			SKIP("pthread_create failed");
	clock_gettime(CLOCK_MONOTONIC, &ts);
	t0 = ts.tv_sec + ts.tv_nsec / 1e9;
	/*
	 * Toggle one probe at a time, at random: every mix of flagged and
	 * unflagged probes on each address, in every order of arrival. The
	 * int3 one shares vt_ret4's address with the return probes (an int3
	 * there first makes them int3 too; a jump probe there first makes
	 * it refused: -EBUSY, fine).
	 */
	do {
		int k = (int)(rand_r(&seed) % (NP + NR));

		if (k < NP) {
			err = armed_p[k] ? pk_probe_unregister(&ps[k], 1) :
					   pk_probe_register(&ps[k], 1);
			if (!err)
				armed_p[k] = !armed_p[k];
		} else {
			k -= NP;
			err = armed_r[k] ? pk_retprobe_unregister(&rs[k], 1) :
					   pk_retprobe_register(&rs[k], 1);
			if (!err)
				armed_r[k] = !armed_r[k];
		}
		if (err && err != -EBUSY) {
			ASSERT_OK(err, "register/unregister");
			break;
		}
		rounds++;
		clock_gettime(CLOCK_MONOTONIC, &ts);
	} while (ts.tv_sec + ts.tv_nsec / 1e9 - t0 < secs);
	stop = 1;
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < NP; i++)
		pk_probe_destroy(ps[i]);
	for (int i = 0; i < NR; i++)
		pk_retprobe_destroy(rs[i]);
	printf("%lu changes, %lu rounds of calls, %lu flagged and %lu unflagged "
	       "handler runs, %lu wrong\n", rounds, calls, gpr_hits, plain_hits,
	       wrong);
	ASSERT_EQ(wrong, 0, "calls that lost a vector or general register value");
	ASSERT_TRUE(gpr_hits > 0 && plain_hits > 0, "both kinds of handler ran");
	ASSERT_EQ(one_round(9), 0, "unprobed again");
	return t_exit();
}
