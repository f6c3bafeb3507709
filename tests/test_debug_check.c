// SPDX-License-Identifier: MIT
/* test_debug_check.c - pk_debug_check() is a NOP until pk_debug_key is on; then a failing check aborts. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "key_sites.h"
#include "probekit.h"

static int evaluated;

static bool counted(bool v)
{
	evaluated++;
	return v;
}

static __attribute__((noinline)) void check_false(void)
{
	pk_debug_check(counted(false));
}

static __attribute__((noinline)) void check_true(void)
{
	pk_debug_check(counted(true));
}

/* Run check_false() in a child; return its wait status. */
static int child_status(void)
{
	int status = 0;
	pid_t pid = fork();

	if (pid == 0) {
		check_false();
		_exit(0);
	}
	if (!ASSERT_TRUE(pid > 0, "fork"))
		return 0;
	waitpid(pid, &status, 0);
	return status;
}

int main(int argc, char **argv)
{
	const char *dbg = getenv("PROBEKIT_DEBUG");
	int status, n = 0;

	/* Re-executed with PROBEKIT_DEBUG=1: the check must fire at once. */
	if (argc > 1 && !strcmp(argv[1], "--child-debug")) {
		check_false();
		return 0;
	}
	if (dbg && !strcmp(dbg, "1"))
		SKIP("run without PROBEKIT_DEBUG (the test sets it itself)");

	printf("mode: %s\n", pk_key_patching() ? "patched" : "fallback");
	ASSERT_FALSE(pk_key_enabled(&pk_debug_key), "debug checks off by default");
	check_false();
	check_true();
	ASSERT_EQ(evaluated, 0, "disabled checks evaluate nothing");
	ASSERT_EQ(t_key_sites_bad(&__start___pk_jump_table,
				  &__stop___pk_jump_table, &pk_debug_key,
				  pk_key_patching(), &n),
		  0, "debug sites while off");
	ASSERT_EQ(n, 2, "two debug sites");
	status = child_status();
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		    "a failing check is a NOP while off");

	ASSERT_OK(pk_key_enable(&pk_debug_key), "enable debug checks");
	ASSERT_EQ(t_key_sites_bad(&__start___pk_jump_table,
				  &__stop___pk_jump_table, &pk_debug_key,
				  pk_key_patching(), &n),
		  0, "debug sites while on");
	check_true();
	ASSERT_EQ(evaluated, 1, "enabled checks evaluate");
	status = child_status();
	ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
		    "a failing check aborts once enabled");
	ASSERT_OK(pk_key_disable(&pk_debug_key), "disable debug checks");
	status = child_status();
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		    "off again");

	/* PROBEKIT_DEBUG=1 turns them on at load time. */
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		setenv("PROBEKIT_DEBUG", "1", 1);
		execl("/proc/self/exe", argv[0], "--child-debug", (char *)NULL);
		_exit(127);
	}
	ASSERT_TRUE(pid > 0, "fork");
	waitpid(pid, &status, 0);
	ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
		    "PROBEKIT_DEBUG=1 enables checks at start");

	return t_exit();
}
