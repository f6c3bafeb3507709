// SPDX-License-Identifier: MIT
/* test_key_dlopen.c - sites of a library loaded after its key was enabled come up enabled; dlclose unregisters. */
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "harness.h"
#include "key_sites.h"
#include "probekit.h"

/* Used by libkeylib's sites: exported through -rdynamic (tests/extra.cmake). */
__attribute__((visibility("default"))) PK_KEY_FALSE(keylib_host_key);

/* A site on the same key in the executable too. */
static __attribute__((noinline)) int host_unlikely(void)
{
	return pk_branch_unlikely(&keylib_host_key) ? 1 : 0;
}

struct keylib {
	void *h;
	int (*host_unlikely)(void);
	int (*host_likely)(void);
	int (*own_unlikely)(void);
	void (*table)(struct pk_jump_entry **, struct pk_jump_entry **);
	struct pk_key *own_key;
};

static char lib_path[4096];
static bool patched;

static int keylib_open(struct keylib *l)
{
	l->h = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
	if (!ASSERT_TRUE(l->h != NULL, "dlopen libkeylib.so")) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return -1;
	}
	*(void **)&l->host_unlikely = dlsym(l->h, "keylib_host_unlikely");
	*(void **)&l->host_likely = dlsym(l->h, "keylib_host_likely");
	*(void **)&l->own_unlikely = dlsym(l->h, "keylib_own_unlikely");
	*(void **)&l->table = dlsym(l->h, "keylib_table");
	l->own_key = dlsym(l->h, "keylib_own_key");
	if (!ASSERT_TRUE(l->host_unlikely && l->host_likely && l->own_unlikely &&
				 l->table && l->own_key,
			 "dlsym"))
		return -1;
	return 0;
}

static void keylib_check(struct keylib *l, bool host, bool own, const char *what)
{
	struct pk_jump_entry *start, *stop;
	int n = 0, bad;

	ASSERT_EQ(l->host_unlikely(), host, what);
	ASSERT_EQ(l->host_likely(), host, what);
	ASSERT_EQ(host_unlikely(), host, what);
	ASSERT_EQ(l->own_unlikely(), own, what);
	l->table(&start, &stop);
	bad = t_key_sites_bad(start, stop, &keylib_host_key, patched, &n);
	ASSERT_EQ(n, 2, "library sites on the host key");
	ASSERT_EQ(bad, 0, what);
	bad = t_key_sites_bad(start, stop, l->own_key, patched, &n);
	ASSERT_EQ(n, 1, "library sites on its own key");
	ASSERT_EQ(bad, 0, what);
}

static uint64_t commits(void)
{
	struct pk_text_stats st = { .sz = sizeof(st) };

	return pk_text_stats(&st) == 0 ? st.commits : 0;
}

int main(void)
{
	const char *dir = getenv("PK_TARGET_DIR");
	struct keylib l;
	uint64_t c0;

	if (!dir)
		SKIP("PK_TARGET_DIR not set (run through ctest)");
	snprintf(lib_path, sizeof(lib_path), "%s/libkeylib.so", dir);
	patched = pk_key_patching();
	printf("mode: %s\n", patched ? "patched" : "fallback");

	/* Enabled before the library exists: its sites must come up on. */
	ASSERT_OK(pk_key_enable(&keylib_host_key), "enable host key");
	c0 = commits();
	if (keylib_open(&l))
		return t_exit();
	if (patched)
		ASSERT_EQ(commits(), c0 + 1, "a module's sites are patched in one commit");
	ASSERT_EQ(pk_key_patching(), patched, "mode unchanged by dlopen");
	keylib_check(&l, true, false, "loaded after enable");

	ASSERT_OK(pk_key_disable(&keylib_host_key), "disable host key");
	keylib_check(&l, false, false, "host key disabled");
	ASSERT_OK(pk_key_inc(l.own_key), "inc the library's key");
	keylib_check(&l, false, true, "library key on");
	ASSERT_OK(pk_key_enable(&keylib_host_key), "enable host key");
	keylib_check(&l, true, true, "both on");

	/* Unloaded: toggling must not touch its (unmapped) sites. */
	ASSERT_OK(dlclose(l.h), "dlclose");
	ASSERT_OK(pk_key_disable(&keylib_host_key), "disable after dlclose");
	ASSERT_EQ(host_unlikely(), 0, "host site off");
	ASSERT_OK(pk_key_enable(&keylib_host_key), "enable after dlclose");
	ASSERT_EQ(host_unlikely(), 1, "host site on");

	/* Loaded again (a fresh copy: its own key starts false). */
	if (keylib_open(&l))
		return t_exit();
	keylib_check(&l, true, false, "reloaded while host key on");
	ASSERT_OK(pk_key_disable(&keylib_host_key), "disable host key");
	keylib_check(&l, false, false, "reloaded, host key off");
	ASSERT_OK(pk_key_set_many((struct pk_key *[]){ &keylib_host_key, l.own_key },
				  (bool[]){ true, true }, 2),
		  "set_many across modules");
	keylib_check(&l, true, true, "set_many across modules");
	ASSERT_OK(dlclose(l.h), "dlclose again");
	ASSERT_OK(pk_key_disable(&keylib_host_key), "disable after second dlclose");
	ASSERT_EQ(host_unlikely(), 0, "host site off at the end");

	return t_exit();
}
