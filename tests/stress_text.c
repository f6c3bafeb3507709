// SPDX-License-Identifier: MIT
/* stress_text.c - 64 threads run code while it is patched; every call must see old or new. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "probekit.h"
#include "harness.h"
#include "codegen.h"

#define THREADS 64
#define FUNCS 64

static struct cg jmp_cg, mov_cg;
static volatile int stop;
static unsigned long anomalies, calls;

/* Every call returns one of the function's two values, nothing else. */
static void *runner(void *arg)
{
	size_t seed = (size_t)arg, local = 0, bad = 0;

	while (!stop) {
		for (size_t i = 0; i < FUNCS; i++) {
			size_t k = (i + seed) % FUNCS;
			uint32_t a = cg_call(&jmp_cg, k), b = cg_call(&mov_cg, k);

			bad += a != cg_val(k, 0) && a != cg_val(k, 1);
			bad += b != cg_val(k, 0) && b != cg_val(k, 1);
			local += 2;
		}
		/* 64 spinners on few cores would starve the patching thread. */
		sched_yield();
	}
	__atomic_add_fetch(&anomalies, bad, __ATOMIC_RELAXED);
	__atomic_add_fetch(&calls, local, __ATOMIC_RELAXED);
	return NULL;
}

static int flip(struct cg *cg, int state, int one_by_one)
{
	uint8_t old[5], nw[5];
	struct pk_batch *b = NULL;
	int ret = 0;

	if (!one_by_one && pk_batch_create(&b))
		return -1;
	for (size_t i = 0; i < cg->n; i++) {
		cg_site_bytes(cg, i, !state, old);
		cg_site_bytes(cg, i, state, nw);
		if (one_by_one)
			ret |= pk_text_poke(cg_fn(cg, i), nw, 5, old, 0) != 1;
		else
			ret |= pk_batch_add(b, cg_fn(cg, i), nw, 5, old, 0);
	}
	if (!one_by_one) {
		ret |= pk_batch_commit(b) != (int)cg->n;
		pk_batch_free(b);
	}
	return ret;
}

/* Fails if any mapping is ever writable and executable at once. */
static unsigned long wx_seen;
static void *wx_scanner(void *arg)
{
	char line[512];

	(void)arg;
	while (!stop) {
		FILE *f = fopen("/proc/self/maps", "r");

		if (!f)
			continue;
		while (fgets(line, sizeof(line), f)) {
			char perms[5];

			if (sscanf(line, "%*s %4s", perms) == 1 &&
			    perms[1] == 'w' && perms[2] == 'x') {
				wx_seen++;
				fprintf(stderr, "W+X mapping: %s", line);
			}
		}
		fclose(f);
	}
	return NULL;
}

int main(void)
{
	pthread_t th[THREADS], scan;
	struct pk_text_stats st = { .sz = sizeof(st) };
	double until = t_now() + t_stress_seconds(3.0);
	unsigned long commits = 0, failures = 0;
	int state = 0;

	if (!ASSERT_OK(cg_create(&jmp_cg, CG_JMP, FUNCS, 32, 0), "cg jmp") ||
	    !ASSERT_OK(cg_create(&mov_cg, CG_MOV, FUNCS, 32, 0), "cg mov"))
		return t_exit();
	for (size_t i = 0; i < THREADS; i++)
		pthread_create(&th[i], NULL, runner, (void *)i);
	pthread_create(&scan, NULL, wx_scanner, NULL);

	while (t_now() < until) {
		state = !state;
		failures += flip(&jmp_cg, state, commits % 4 == 3) != 0;
		failures += flip(&mov_cg, state, commits % 4 == 3) != 0;
		commits++;
	}
	stop = 1;
	for (size_t i = 0; i < THREADS; i++)
		pthread_join(th[i], NULL);
	pthread_join(scan, NULL);

	pk_text_stats(&st);
	printf("%lu flips, %lu calls, %llu trapped threads sent on, sync %s\n",
	       commits, calls, (unsigned long long)st.traps, st.sync_method);
	ASSERT_EQ(failures, 0, "commits that failed");
	ASSERT_EQ(anomalies, 0, "calls that saw neither the old nor the new code");
	ASSERT_EQ(wx_seen, 0, "writable+executable mappings seen");
	ASSERT_GE(calls, 1, "the threads ran");
	for (size_t i = 0; i < FUNCS; i++) {
		ASSERT_EQ(cg_call(&jmp_cg, i), cg_val(i, state), "final jmp state");
		ASSERT_EQ(cg_call(&mov_cg, i), cg_val(i, state), "final mov state");
	}
	return t_exit();
}
