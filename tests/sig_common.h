/* SPDX-License-Identifier: MIT */
/* sig_common.h - what the test_sig_* programs share: victim functions, a key site, probes on them, the kernel's own view of masks and handlers. */
#ifndef PK_TEST_SIG_COMMON_H
#define PK_TEST_SIG_COMMON_H

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "probekit.h"

/* Probed functions (exported: the tests link with ENABLE_EXPORTS). */
T_NOINLINE long sig_victim_jmp(long x)
{
	volatile long y = x;

	return y * 3 + 1;
}

T_NOINLINE long sig_victim_int3(long x)
{
	volatile long y = x;

	return y * 5 + 2;
}

PK_KEY_FALSE(sig_key);

T_NOINLINE long sig_keyed(long x)
{
	if (pk_branch_unlikely(&sig_key))
		return x + 1;
	return x;
}

static volatile unsigned long sig_hits;

static void sig_count(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p;
	(void)r;
	(void)ctx;
	__atomic_add_fetch(&sig_hits, 1, __ATOMIC_RELAXED);
}

/* A probe on @fn (PK_PROBE_F_INT3 in @flags for an int3 probe), or NULL. */
static inline struct pk_probe *sig_probe(void *fn, unsigned int flags)
{
	PK_OPTS(pk_probe_opts, o, .addr = fn, .pre = sig_count,
		.flags = flags);
	struct pk_probe *p = NULL;

	if (pk_probe_create(&o, &p))
		return NULL;
	return p;
}

/* Whether the kernel's mask of this thread blocks @sig (not libc's view). */
static inline int sig_kernel_blocks(int sig)
{
	unsigned long cur = 0;

	syscall(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &cur, 8);
	return (cur >> (sig - 1)) & 1;
}

/* The handler the kernel has for @sig. */
static inline void *sig_kernel_handler(int sig)
{
	struct { void *handler; unsigned long flags; void *restorer;
		 unsigned long mask; } cur = { 0 };

	syscall(SYS_rt_sigaction, sig, NULL, &cur, 8);
	return cur.handler;
}

/* Run @fn in a child (no core files); its wait status. */
static inline int sig_in_child(int (*fn)(void))
{
	int status = 0;
	pid_t pid = fork();

	if (pid == 0) {
		struct rlimit rl = { 0, 0 };

		setrlimit(RLIMIT_CORE, &rl);
		_exit(fn());
	}
	waitpid(pid, &status, 0);
	return status;
}

/* Assert a child exited 0, saying how it died otherwise. */
static inline void sig_expect_ok(int status, const char *what)
{
	if (WIFSIGNALED(status))
		fprintf(stderr, "%s: killed by signal %d (exit %d in a shell)\n",
			what, WTERMSIG(status), 128 + WTERMSIG(status));
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0, what);
}

#endif /* PK_TEST_SIG_COMMON_H */
