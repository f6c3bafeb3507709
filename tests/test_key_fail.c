// SPDX-License-Identifier: MIT
/* test_key_fail.c - a failed commit changes no key and no site; a module whose registration failed stays load-and-branch. */
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "key_sites.h"
#include "probekit.h"

/*
 * Failures come from the text layer's test hook PROBEKIT_TEST_FAIL_WRITE=C:N
 * (write N of the commit after C successful ones fails with -EIO, once),
 * which is read at the first commit, during start-up: so the test re-runs
 * itself with the variable set.
 */

static PK_KEY_FALSE(ka);
static PK_KEY_TRUE(kb);
/* libkeylib.so's sites use it (exported: -rdynamic). */
__attribute__((visibility("default"))) PK_KEY_FALSE(keylib_host_key);

#define NOINLINE __attribute__((noinline))
static NOINLINE int u_ka(void) { return pk_branch_unlikely(&ka) ? 1 : 0; }
static NOINLINE int l_ka(void) { return pk_branch_likely(&ka) ? 1 : 0; }
static NOINLINE int u_kb(void) { return pk_branch_unlikely(&kb) ? 1 : 0; }
static NOINLINE int l_kb(void) { return pk_branch_likely(&kb) ? 1 : 0; }
static NOINLINE int u_host(void) { return pk_branch_unlikely(&keylib_host_key) ? 1 : 0; }

/* Sites of @k in this executable, all in @patched form. */
static void sites_ok(const struct pk_key *k, bool patched, const char *what)
{
	int n = 0;

	ASSERT_EQ(t_key_sites_bad(&__start___pk_jump_table,
				  &__stop___pk_jump_table, k, patched, &n),
		  0, what);
	ASSERT_GE(n, 1, what);
}

static void state_ok(bool a, bool b, bool patched, const char *what)
{
	ASSERT_EQ(pk_key_enabled(&ka), a, what);
	ASSERT_EQ(pk_key_enabled(&kb), b, what);
	ASSERT_EQ(u_ka(), a, what);
	ASSERT_EQ(l_ka(), a, what);
	ASSERT_EQ(u_kb(), b, what);
	ASSERT_EQ(l_kb(), b, what);
	sites_ok(&ka, patched, what);
	sites_ok(&kb, patched, what);
}

/* The first key change after start-up fails. */
static int child_toggle(const char *op)
{
	struct pk_key *keys[2] = { &ka, &kb };
	bool vals[2] = { true, false };
	int ret;

	ASSERT_TRUE(pk_key_patching(), "patched mode");
	state_ok(false, true, true, "before");
	if (!strcmp(op, "enable"))
		ret = pk_key_enable(&ka);
	else if (!strcmp(op, "dec"))
		ret = pk_key_dec(&kb);
	else
		ret = pk_key_set_many(keys, vals, 2);
	ASSERT_EQ(ret, -EIO, "the injected failure is returned");
	ASSERT_EQ(ka.enabled, 0, "count of ka unchanged");
	ASSERT_EQ(kb.enabled, 1, "count of kb unchanged");
	state_ok(false, true, true, "a failed change changes nothing");
	ASSERT_TRUE(pk_key_patching(), "still patched mode");

	ASSERT_OK(pk_key_set_many(keys, vals, 2), "the same change again");
	state_ok(true, false, true, "after a successful change");
	return t_exit();
}

/* The executable's registration (the first commit) fails. */
static int child_register(void)
{
	const char *dir = getenv("PK_TARGET_DIR");
	char path[4096];
	void *h;
	int (*lib_u)(void);

	/* -EIO is no refusal of patching: no fallback, but these sites stay compiled. */
	ASSERT_TRUE(pk_key_patching(), "not fallback mode");
	state_ok(false, true, false, "unpatched module: compiled sites");
	ASSERT_OK(pk_key_enable(&ka), "enable ka");
	ASSERT_OK(pk_key_disable(&kb), "disable kb");
	state_ok(true, false, false, "unpatched module follows its keys");

	if (!dir)
		return t_exit();
	/* A module loaded now is patched; keys drive both kinds. */
	snprintf(path, sizeof(path), "%s/libkeylib.so", dir);
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!ASSERT_TRUE(h != NULL, "dlopen libkeylib.so"))
		return t_exit();
	*(void **)&lib_u = dlsym(h, "keylib_host_unlikely");
	ASSERT_TRUE(lib_u != NULL, "dlsym");
	ASSERT_EQ(lib_u(), 0, "library site off");
	ASSERT_OK(pk_key_enable(&keylib_host_key), "enable host key");
	ASSERT_EQ(lib_u(), 1, "patched library site on");
	ASSERT_EQ(u_host(), 1, "unpatched executable site on");
	sites_ok(&keylib_host_key, false, "executable sites still compiled");
	ASSERT_OK(pk_key_disable(&keylib_host_key), "disable host key");
	ASSERT_EQ(lib_u(), 0, "patched library site off");
	ASSERT_EQ(u_host(), 0, "unpatched executable site off");
	dlclose(h);
	return t_exit();
}

static void run_child(const char *self, const char *fail, const char *mode)
{
	int status = 0;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		setenv("PROBEKIT_TEST_FAIL_WRITE", fail, 1);
		execl(self, self, mode, (char *)NULL);
		_exit(127);
	}
	if (!ASSERT_TRUE(pid > 0, "fork"))
		return;
	waitpid(pid, &status, 0);
	if (!ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0, mode))
		fprintf(stderr, "child %s (PROBEKIT_TEST_FAIL_WRITE=%s): status %#x\n",
			mode, fail, status);
}

int main(int argc, char **argv)
{
	struct pk_text_stats st = { .sz = sizeof(st) };
	char fail[64];

	if (argc > 1 && !strcmp(argv[1], "--register"))
		return child_register();
	if (argc > 1)
		return child_toggle(argv[1]);

	if (!pk_key_patching())
		SKIP("fallback mode: no commit to fail");
	if (getenv("PROBEKIT_TEST_FAIL_WRITE"))
		SKIP("PROBEKIT_TEST_FAIL_WRITE is set already");
	ASSERT_OK(pk_text_stats(&st), "pk_text_stats");
	/* A child makes the same commits at start-up as this process. */
	snprintf(fail, sizeof(fail), "%llu:0", (unsigned long long)st.commits);
	run_child("/proc/self/exe", fail, "enable");
	run_child("/proc/self/exe", fail, "dec");
	run_child("/proc/self/exe", fail, "set_many");
	run_child("/proc/self/exe", "0:0", "--register");
	return t_exit();
}
