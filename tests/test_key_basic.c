// SPDX-License-Identifier: MIT
/* test_key_basic.c - static keys: truth of sites, refcounts, set_many, errors, site bytes in both modes. */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>

#include "harness.h"
#include "key_sites.h"
#include "probekit.h"

static PK_KEY_FALSE(kf);
static PK_KEY_TRUE(kt);

#define NOINLINE __attribute__((noinline))

static NOINLINE int u_kf(void) { return pk_branch_unlikely(&kf) ? 1 : 0; }
static NOINLINE int l_kf(void) { return pk_branch_likely(&kf) ? 1 : 0; }
static NOINLINE int u_kt(void) { return pk_branch_unlikely(&kt) ? 1 : 0; }
static NOINLINE int l_kt(void) { return pk_branch_likely(&kt) ? 1 : 0; }

/* Several sites of one key in one function, each with its own body. */
static NOINLINE int many_kf(int x)
{
	int r = 0;

	if (pk_branch_unlikely(&kf))
		r += 1;
	x *= 3;
	if (pk_branch_likely(&kf))
		r += 2;
	if (pk_branch_unlikely(&kf))
		r += x == 3 ? 4 : 8;
	return r;
}

static bool patched_mode;

static int sites_bad(const struct pk_key *k, const char *what)
{
	int n = 0, bad;

	bad = t_key_sites_bad(&__start___pk_jump_table, &__stop___pk_jump_table,
			      k, patched_mode, &n);
	ASSERT_GE(n, 2, what);
	ASSERT_EQ(bad, 0, what);
	return bad;
}

static void check(bool f, bool t, const char *what)
{
	ASSERT_EQ(pk_key_enabled(&kf), f, what);
	ASSERT_EQ(pk_key_enabled(&kt), t, what);
	ASSERT_EQ(u_kf(), f, what);
	ASSERT_EQ(l_kf(), f, what);
	ASSERT_EQ(u_kt(), t, what);
	ASSERT_EQ(l_kt(), t, what);
	ASSERT_EQ(many_kf(1), f ? 7 : 0, what);
	sites_bad(&kf, what);
	sites_bad(&kt, what);
}

static uint64_t commits(void)
{
	struct pk_text_stats st = { .sz = sizeof(st) };

	return pk_text_stats(&st) == 0 ? st.commits : 0;
}

int main(void)
{
	const char *nopatch = getenv("PROBEKIT_NOPATCH");
	struct pk_key *keys[3];
	bool vals[3];
	uint64_t c0;
	struct pk_jump_entry *start, *stop;
	int n;

	patched_mode = pk_key_patching();
	printf("mode: %s\n", patched_mode ? "patched" : "fallback");
	if (nopatch && !strcmp(nopatch, "1"))
		ASSERT_FALSE(patched_mode, "PROBEKIT_NOPATCH=1 means fallback");

	check(false, true, "initial state");

	/* enable / disable */
	ASSERT_OK(pk_key_enable(&kf), "enable kf");
	check(true, true, "kf enabled");
	ASSERT_OK(pk_key_enable(&kf), "enable kf again");
	ASSERT_EQ(kf.enabled, 1, "enable twice keeps count 1");
	ASSERT_OK(pk_key_disable(&kf), "disable kf");
	check(false, true, "kf disabled");
	ASSERT_OK(pk_key_disable(&kf), "disable kf again");
	ASSERT_EQ(kf.enabled, 0, "disabled count");
	ASSERT_OK(pk_key_disable(&kt), "disable kt");
	check(false, false, "kt disabled");
	ASSERT_OK(pk_key_enable(&kt), "enable kt");
	check(false, true, "kt enabled");

	/* inc / dec refcounts */
	ASSERT_OK(pk_key_inc(&kf), "inc kf 0->1");
	check(true, true, "kf inc 1");
	c0 = commits();
	ASSERT_OK(pk_key_inc(&kf), "inc kf 1->2");
	ASSERT_EQ(kf.enabled, 2, "count 2");
	ASSERT_OK(pk_key_dec(&kf), "dec kf 2->1");
	ASSERT_EQ(commits(), c0, "count changes that keep the state commit nothing");
	check(true, true, "kf still on at count 1");
	ASSERT_OK(pk_key_dec(&kf), "dec kf 1->0");
	check(false, true, "kf off at count 0");
	ASSERT_EQ(pk_key_dec(&kf), -EINVAL, "dec at 0");
	check(false, true, "dec at 0 changes nothing");
	ASSERT_OK(pk_key_dec(&kt), "dec kt 1->0");
	check(false, false, "kt dec to 0");
	ASSERT_OK(pk_key_inc(&kt), "inc kt 0->1");
	check(false, true, "kt inc to 1");
	ASSERT_OK(pk_key_inc(&kf), "inc kf");
	ASSERT_OK(pk_key_inc(&kf), "inc kf");
	ASSERT_OK(pk_key_disable(&kf), "disable kf at count 2");
	ASSERT_EQ(kf.enabled, 0, "disable drops the count to 0");
	check(false, true, "disabled whatever the count");
	ASSERT_OK(pk_key_inc(&kf), "inc kf");
	ASSERT_OK(pk_key_enable(&kf), "enable at count 1");
	ASSERT_EQ(kf.enabled, 1, "enable keeps a count > 0");
	__atomic_store_n(&kf.enabled, INT_MAX, __ATOMIC_RELAXED);
	ASSERT_EQ(pk_key_inc(&kf), -EOVERFLOW, "inc at INT_MAX");
	ASSERT_EQ(kf.enabled, INT_MAX, "count unchanged");
	__atomic_store_n(&kf.enabled, 1, __ATOMIC_RELAXED);
	ASSERT_OK(pk_key_disable(&kf), "disable kf");
	check(false, true, "after refcounts");

	/* set_many: one batch for all sites of all keys */
	keys[0] = &kf, vals[0] = true;
	keys[1] = &kt, vals[1] = false;
	c0 = commits();
	ASSERT_OK(pk_key_set_many(keys, vals, 2), "set_many on,off");
	if (patched_mode)
		ASSERT_EQ(commits(), c0 + 1, "set_many is one commit");
	check(true, false, "set_many on,off");
	vals[0] = false, vals[1] = true;
	ASSERT_OK(pk_key_set_many(keys, vals, 2), "set_many off,on");
	check(false, true, "set_many off,on");
	keys[2] = &kf, vals[2] = true; /* kf twice: the last value wins */
	vals[0] = false, vals[1] = true;
	ASSERT_OK(pk_key_set_many(keys, vals, 3), "set_many with a duplicate");
	check(true, true, "set_many duplicate: last wins");
	c0 = commits();
	ASSERT_OK(pk_key_set_many(keys, vals, 3), "set_many, nothing to change");
	ASSERT_EQ(commits(), c0, "set_many without change commits nothing");
	ASSERT_OK(pk_key_set_many(NULL, NULL, 0), "set_many n=0");
	ASSERT_EQ(pk_key_set_many(NULL, vals, 1), -EINVAL, "set_many NULL keys");
	ASSERT_EQ(pk_key_set_many(keys, NULL, 1), -EINVAL, "set_many NULL values");
	keys[1] = NULL, vals[0] = false;
	ASSERT_EQ(pk_key_set_many(keys, vals, 2), -EINVAL, "set_many NULL key");
	check(true, true, "failed set_many changes nothing");
	ASSERT_OK(pk_key_disable(&kf), "disable kf");

	/* argument errors */
	ASSERT_EQ(pk_key_enable(NULL), -EINVAL, "enable NULL");
	ASSERT_EQ(pk_key_disable(NULL), -EINVAL, "disable NULL");
	ASSERT_EQ(pk_key_inc(NULL), -EINVAL, "inc NULL");
	ASSERT_EQ(pk_key_dec(NULL), -EINVAL, "dec NULL");
	ASSERT_FALSE(pk_key_enabled(NULL), "enabled(NULL)");

	/* module registration (the table's bounds laundered: -Warray-bounds) */
	start = &__start___pk_jump_table;
	stop = &__stop___pk_jump_table;
	__asm__("" : "+r"(start), "+r"(stop));
	n = (int)(stop - start);
	ASSERT_GE(n, 7, "sites in this executable");
	ASSERT_EQ(pk_jump_module_register(NULL, NULL), -EINVAL, "register NULL");
	ASSERT_EQ(pk_jump_module_register(start + 1,
					  start),
		  -EINVAL, "register stop < start");
	ASSERT_EQ(pk_jump_module_register(start,
					  (struct pk_jump_entry *)((char *)stop - 8)),
		  -EINVAL, "register a size that is no multiple of an entry");
	ASSERT_EQ(pk_jump_module_register(start,
					  stop - 1),
		  -EINVAL, "register a known table with another end");
	ASSERT_EQ(pk_jump_module_register(start,
					  stop),
		  n, "register again counts a reference");
	pk_jump_module_unregister(start);
	pk_jump_module_unregister(NULL);
	ASSERT_OK(pk_key_enable(&kf), "enable kf after a reference came and went");
	check(true, true, "table still registered");
	ASSERT_OK(pk_key_disable(&kf), "disable kf");
	check(false, true, "final state");
	ASSERT_EQ(pk_key_patching(), patched_mode, "mode does not change");

	return t_exit();
}
