// SPDX-License-Identifier: MIT
/* stress_probe_int3.c - arm and remove int3 probes (and post-handlers) in a loop while many threads hit them. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "harness.h"
#include "probe_target.h"
#include "probekit.h"

#define NTHREADS 16
#define NPROBES 8

__attribute__((noinline)) long exe_mix(long a, long b)
{
	volatile long x = a;

	return x * 7 - b;
}

static volatile int stop;
static unsigned long hits, posts;	/* atomic */
static unsigned long wrong;		/* atomic */
static unsigned long calls[NTHREADS];
static int icalls;

static void icallee(void)
{
	__atomic_add_fetch(&icalls, 1, __ATOMIC_RELAXED);
}

/* A post-handler runs only after its own pre-handler, also mid-(dis)arming. */
static __thread struct pk_probe *last_pre;
static unsigned long unpaired;	/* atomic */

static void count(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)r, (void)ctx;
	last_pre = p;
	__atomic_add_fetch(&hits, 1, __ATOMIC_RELAXED);
}

static void count_post(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)r, (void)ctx;
	if (last_pre != p)
		__atomic_add_fetch(&unpaired, 1, __ATOMIC_RELAXED);
	last_pre = NULL;
	__atomic_add_fetch(&posts, 1, __ATOMIC_RELAXED);
}

static void *caller(void *arg)
{
	long id = (long)arg, i = 0;
	uint64_t *out = pt_live_out();

	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		long a = id + i, b = i & 0xff;

		if (pt_sum6(a, b, 1, 2, 3, 4) != pt_sum6_ref(a, b, 1, 2, 3, 4) ||
		    exe_mix(a, b) != a * 7 - b ||
		    pt_asm_jcc(b) != (b ? b + 1 : -1) || pt_asm_rip(b) != 100 + b ||
		    pt_asm_loop(3) != 6 || pt_asm_call(a) != a ||
		    pt_asm_icall(a, icallee) != a || pt_asm_post(a, b) != a + b + 5)
			__atomic_add_fetch(&wrong, 1, __ATOMIC_RELAXED);
		pt_asm_short();
		if (id == 0) {
			/* One thread: registers and flags at the offset probe. */
			pt_asm_live();
			if (out[1] != 0xa0a0a0a0a0a0a001ull || out[15] != 0xa0a0a0a0a0a0a00full ||
			    out[17] != 0x1111 || (out[0] & 0xc91) != 0xc91)
				__atomic_add_fetch(&wrong, 1, __ATOMIC_RELAXED);
		}
		i++;
	}
	calls[id] = (unsigned long)i;
	return NULL;
}

int main(void)
{
	struct { const char *sym; size_t off; unsigned int flags; int post; } d[NPROBES] = {
		{ "pt_sum6", 0, PK_PROBE_F_INT3, 0 },
		{ "exe_mix", 0, PK_PROBE_F_INT3, 1 },
		{ "pt_asm_jcc", 0, PK_PROBE_F_INT3, 1 },
		{ "pt_asm_rip", 0, PK_PROBE_F_INT3, 0 },
		{ "pt_asm_loop", 0, 0, 1 },		/* int3: branch into the bytes */
		{ "pt_asm_call", 0, 0, 0 },		/* int3: call */
		{ "pt_asm_icall", 0, 0, 0 },		/* int3: indirect call */
		{ "pt_asm_post", 0, 0, 1 },		/* jump, with post */
	};
	struct pk_probe *p[NPROBES + 2] = { 0 };
	pthread_t th[NTHREADS];
	double end = t_now() + t_stress_seconds(2);
	unsigned long rounds = 0, total = 0;
	double worst = 0;

	for (int i = 0; i < NPROBES; i++) {
		PK_OPTS(pk_probe_opts, o, .symbol = d[i].sym, .pre = count,
			.post = d[i].post ? count_post : NULL, .offset = d[i].off,
			.flags = d[i].flags);

		if (!ASSERT_OK(pk_probe_create(&o, &p[i]), d[i].sym))
			return t_exit();
	}
	{
		PK_OPTS(pk_probe_opts, o, .symbol = "pt_asm_live", .pre = count,
			.offset = pt_live_off(), .flags = PK_PROBE_F_INT3);
		PK_OPTS(pk_probe_opts, s, .symbol = "pt_asm_short", .pre = count);

		if (!ASSERT_OK(pk_probe_create(&o, &p[NPROBES]), "offset int3") ||
		    !ASSERT_OK(pk_probe_create(&s, &p[NPROBES + 1]), "short"))
			return t_exit();
	}
	for (long i = 0; i < NTHREADS; i++)
		pthread_create(&th[i], NULL, caller, (void *)i);
	while (t_now() < end) {
		double r0 = t_now();

		if (!ASSERT_OK(pk_probe_register(p, NPROBES + 2), "register all") ||
		    !ASSERT_OK(pk_probe_unregister(p, NPROBES + 2), "unregister all") ||
		    !ASSERT_OK(pk_probe_register(p + 3, 4), "register 4") ||
		    !ASSERT_OK(pk_probe_register(p, 2), "register 2") ||
		    !ASSERT_OK(pk_probe_register(p + 8, 2), "register offset+short") ||
		    !ASSERT_OK(pk_probe_unregister(p + 3, 4), "unregister 4") ||
		    !ASSERT_OK(pk_probe_unregister(p, 2), "unregister 2") ||
		    !ASSERT_OK(pk_probe_unregister(p + 8, 2), "unregister offset+short"))
			break;
		rounds++;
		if (t_now() - r0 > worst)
			worst = t_now() - r0;
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(th[i], NULL);
		total += calls[i];
	}
	printf("%lu arm/disarm rounds (slowest %.0f ms), %lu calls, %lu pre and %lu post handler "
	       "hits\n", rounds, worst * 1e3, total, hits, posts);
	ASSERT_EQ(wrong, 0, "wrong results while int3 probes came and went");
	ASSERT_EQ(unpaired, 0, "post-handlers run without their pre-handler");
	ASSERT_GE(rounds, 1, "rounds");
	ASSERT_GE(hits, 1, "hits");
	ASSERT_GE(posts, 1, "post hits");
	for (int i = 0; i < NPROBES + 2; i++)
		pk_probe_destroy(p[i]);
	return t_exit();
}
