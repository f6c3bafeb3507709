// SPDX-License-Identifier: MIT
/* stress_place.c - jump probes on jump tables, tail calls and moved calls, armed and removed while threads run them (issue 12). */

/*
 * Every function of tests/targets/place_cases.c in each PIC variant (gcc,
 * clang, -O2/-O3, -fcf-protection) gets an entry probe; nearly all are
 * jump probes only since issue 12 (jump tables read, tail calls through
 * pointers, calls among the displaced bytes moved as push + jmp). Threads
 * call every case with many arguments and compare each result with the
 * unprobed run's, while the main thread registers and unregisters the
 * whole set, so threads are moved into and out of the displaced bytes,
 * and return from callees of moved calls, throughout. PK_STRESS_SECONDS
 * (default 5) bounds it.
 */
#include <pthread.h>
#include <stdint.h>

#include "harness.h"
#include "place_cases.h"

#ifdef __SANITIZE_ADDRESS__
#define NTHREADS 4
#else
#define NTHREADS 8
#endif
#define XS 64

static int ref[PC_NVARIANTS][PC_N][XS];
static int loaded[PC_NVARIANTS];
static volatile int stop;
static unsigned long hits, wrong, calls;	/* atomic */

static void count(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p, (void)r, (void)ctx;
	__atomic_add_fetch(&hits, 1, __ATOMIC_RELAXED);
}

static void *caller(void *arg)
{
	unsigned long n = 0, seed = (uintptr_t)arg * 2654435761u + 1;

	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		for (size_t v = 0; v < PC_NVARIANTS; v++) {
			if (!loaded[v])
				continue;
			for (size_t k = 0; k < PC_N; k++) {
				int x;

				seed = seed * 6364136223846793005ul + 1;
				x = (int)((seed >> 33) % XS);
				if (pc_variants[v].run((int)k, x) != ref[v][k][x])
					__atomic_add_fetch(&wrong, 1,
							   __ATOMIC_RELAXED);
				n++;
			}
		}
	}
	__atomic_add_fetch(&calls, n, __ATOMIC_RELAXED);
	return NULL;
}

int main(void)
{
	struct pk_probe *p[PC_NVARIANTS * PC_N];
	double secs = t_stress_seconds(5), until;
	size_t np = 0, jumps = 0, rounds = 0, nv = 0;
	pthread_t th[NTHREADS];

	for (size_t v = 0; v < PC_NVARIANTS; v++) {
		struct pc_variant *pv = &pc_variants[v];

		if (pc_load(pv))
			continue;
		loaded[v] = 1;
		nv++;
		for (size_t k = 0; k < PC_N; k++) {
			PK_OPTS(pk_probe_opts, o, .addr = pv->fn[k], .pre = count);
			struct pk_probe_info info = { .sz = sizeof(info) };

			for (int x = 0; x < XS; x++)
				ref[v][k][x] = pv->run((int)k, x);
			if (!ASSERT_OK(pk_probe_create(&o, &p[np]), pc_names[k]))
				continue;
			if (!pk_probe_get_info(p[np], &info) &&
			    info.kind == PK_PROBE_JUMP)
				jumps++;
			np++;
		}
	}
	if (!nv)
		SKIP("no place_cases variant built (PK_TARGET_DIR?)");
	printf("%zu variants, %zu probes, %zu of them jump probes\n", nv, np,
	       jumps);
	/* cgoto, cgoto_stack, cgoto_tls: int3 where gcc builds them. */
	ASSERT_GE(jumps, np - 3 * nv, "all but the computed gotos jump probes");
	for (long i = 0; i < NTHREADS; i++)
		pthread_create(&th[i], NULL, caller, (void *)i);
	until = t_now() + secs;
	while (t_now() < until) {
		if (!ASSERT_OK(pk_probe_register(p, np), "register"))
			break;
		usleep(20000);
		if (!ASSERT_OK(pk_probe_unregister(p, np), "unregister"))
			break;
		rounds++;
		usleep(5000);
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	printf("%zu rounds, %lu calls, %lu probe hits, %lu wrong results\n",
	       rounds, calls, hits, wrong);
	ASSERT_EQ(wrong, 0, "results equal to the unprobed run's");
	ASSERT_GE(rounds, 1, "rounds");
	ASSERT_NE(hits, 0, "probes were hit");
	for (size_t i = 0; i < np; i++)
		pk_probe_destroy(p[i]);
	return t_exit();
}
