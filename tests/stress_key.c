// SPDX-License-Identifier: MIT
/* stress_key.c - 64 threads run through key sites while keys flip (enable/disable/inc/dec/set_many) and a library comes and goes. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "harness.h"
#include "key_sites.h"
#include "probekit.h"

#define NKEYS 4
#define NTHREADS 64
#define NOINLINE __attribute__((noinline))

static struct pk_key keys[NKEYS] = { PK_KEY_INIT_FALSE, PK_KEY_INIT_TRUE,
				     PK_KEY_INIT_FALSE, PK_KEY_INIT_FALSE };
/* libkeylib.so's sites use it (exported: -rdynamic). */
__attribute__((visibility("default"))) PK_KEY_FALSE(keylib_host_key);

/* Each site returns one of two values, distinct across all sites. */
#define ON(i, s) (0x1000 + 16 * (i) + 2 * (s) + 1)
#define OFF(i, s) (0x1000 + 16 * (i) + 2 * (s))
#define SITE_FNS(i)                                                            \
	static NOINLINE int u##i(void)                                         \
	{                                                                      \
		return pk_branch_unlikely(&keys[i]) ? ON(i, 0) : OFF(i, 0);    \
	}                                                                      \
	static NOINLINE int l##i(void)                                         \
	{                                                                      \
		return pk_branch_likely(&keys[i]) ? ON(i, 1) : OFF(i, 1);      \
	}                                                                      \
	/* Two sites back to back: a thread may stop between them. */         \
	static NOINLINE int d##i(void)                                         \
	{                                                                      \
		int r = 0;                                                     \
		if (pk_branch_unlikely(&keys[i]))                              \
			r += 1;                                                \
		if (pk_branch_unlikely(&keys[i]))                              \
			r += 1;                                                \
		return r == 2 ? ON(i, 2) : r == 0 ? OFF(i, 2) : r;            \
	}
SITE_FNS(0)
SITE_FNS(1)
SITE_FNS(2)
SITE_FNS(3)

static int (*const fns[])(void) = { u0, l0, d0, u1, l1, d1,
				    u2, l2, d2, u3, l3, d3 };
#define NFNS ((int)(sizeof(fns) / sizeof(fns[0])))

static volatile int stop;
static unsigned long anomalies, calls;

static int fn_ok(int f, int v)
{
	int i = f / 3, s = f % 3;

	/* d##i may legitimately see its two sites disagree (r == 1) only if
	 * the key flipped between them; count that as old-or-new as well. */
	return v == ON(i, s) || v == OFF(i, s) || (s == 2 && v == 1);
}

static void *worker(void *arg)
{
	unsigned long bad = 0, n = 0;

	(void)arg;
	/* 64 spinners starve the toggler of CPU otherwise: fewer changes. */
	setpriority(PRIO_PROCESS, (id_t)gettid(), 10);
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		for (int f = 0; f < NFNS; f++) {
			int v = fns[f]();

			if (!fn_ok(f, v))
				bad++;
		}
		n += NFNS;
	}
	__atomic_fetch_add(&anomalies, bad, __ATOMIC_RELAXED);
	__atomic_fetch_add(&calls, n, __ATOMIC_RELAXED);
	return NULL;
}

static unsigned long toggles, toggle_errors;

static void *toggler(void *arg)
{
	unsigned int seed = 12345;
	int count[NKEYS];
	double end = *(double *)arg;

	for (int i = 0; i < NKEYS; i++)
		count[i] = keys[i].enabled;
	while (t_now() < end) {
		int i = rand_r(&seed) % NKEYS, ret = 0;

		switch (rand_r(&seed) % 5) {
		case 0:
			ret = pk_key_enable(&keys[i]);
			if (!count[i])
				count[i] = 1;
			break;
		case 1:
			ret = pk_key_disable(&keys[i]);
			count[i] = 0;
			break;
		case 2:
			if (count[i] < 3) {
				ret = pk_key_inc(&keys[i]);
				count[i]++;
			}
			break;
		case 3:
			if (count[i] > 0) {
				ret = pk_key_dec(&keys[i]);
				count[i]--;
			} else {
				ret = pk_key_dec(&keys[i]) == -EINVAL ? 0 : -1;
			}
			break;
		default: {
			struct pk_key *k[NKEYS + 1];
			bool v[NKEYS + 1];

			for (int j = 0; j < NKEYS; j++) {
				k[j] = &keys[j];
				v[j] = rand_r(&seed) & 1;
				count[j] = v[j] ? (count[j] ? count[j] : 1) : 0;
			}
			k[NKEYS] = &keylib_host_key;
			v[NKEYS] = rand_r(&seed) & 1;
			ret = pk_key_set_many(k, v, NKEYS + 1);
			break;
		}
		}
		if (ret)
			toggle_errors++;
		for (int j = 0; j < NKEYS; j++)
			if (keys[j].enabled != count[j])
				toggle_errors++;
		toggles++;
	}
	return NULL;
}

static unsigned long loads, load_errors;

/* dlopen/dlclose libkeylib.so: registration races key changes. */
static void *loader(void *arg)
{
	const char *path = arg;

	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		int (*u)(void), (*l)(void);

		if (!h) {
			load_errors++;
			break;
		}
		*(void **)&u = dlsym(h, "keylib_host_unlikely");
		*(void **)&l = dlsym(h, "keylib_host_likely");
		for (int i = 0; u && l && i < 100; i++) {
			int a = u(), b = l();

			if ((a != 0 && a != 1) || (b != 0 && b != 1))
				load_errors++;
		}
		if (!u || !l || dlclose(h))
			load_errors++;
		loads++;
	}
	return NULL;
}

int main(void)
{
	const char *dir = getenv("PK_TARGET_DIR");
	double secs = t_stress_seconds(3.0), end;
	pthread_t th[NTHREADS], tog, ld;
	static char path[4096];
	bool patched = pk_key_patching();
	int have_loader = 0;

	printf("mode: %s, %d threads, %.1f s\n", patched ? "patched" : "fallback",
	       NTHREADS, secs);
	for (int i = 0; i < NTHREADS; i++)
		if (!ASSERT_OK(pthread_create(&th[i], NULL, worker, NULL),
			       "pthread_create"))
			return t_exit();
	if (dir) {
		snprintf(path, sizeof(path), "%s/libkeylib.so", dir);
		have_loader = !pthread_create(&ld, NULL, loader, path);
	}
	end = t_now() + secs;
	ASSERT_OK(pthread_create(&tog, NULL, toggler, &end), "pthread_create");
	pthread_join(tog, NULL);
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	if (have_loader)
		pthread_join(ld, NULL);

	struct pk_text_stats st = { .sz = sizeof(st) };

	if (pk_text_stats(&st))
		st.traps = st.commits = 0;
	printf("%lu calls, %lu key changes (%llu commits), %lu dlopen/dlclose, %llu threads sent on by the trap handler\n",
	       calls, toggles, (unsigned long long)st.commits, loads,
	       (unsigned long long)st.traps);
	ASSERT_EQ(anomalies, 0, "calls that returned neither the old nor the new value");
	ASSERT_EQ(toggle_errors, 0, "key changes that failed or miscounted");
	ASSERT_EQ(load_errors, 0, "library load/call errors");
	ASSERT_GE(toggles, 10, "key changes made");
	ASSERT_GE(calls, 1000, "calls made");

	/* After the storm every site agrees with its key, bytes included. */
	for (int f = 0; f < NFNS; f++) {
		int i = f / 3, s = f % 3;
		int want = pk_key_enabled(&keys[i]) ? ON(i, s) : OFF(i, s);

		ASSERT_EQ(fns[f](), want, "final state");
	}
	for (int i = 0; i < NKEYS; i++) {
		int n = 0;

		ASSERT_EQ(t_key_sites_bad(&__start___pk_jump_table,
					  &__stop___pk_jump_table, &keys[i],
					  patched, &n),
			  0, "final site bytes");
		ASSERT_GE(n, 4, "sites per key (the compiler may duplicate some)");
	}
	return t_exit();
}
