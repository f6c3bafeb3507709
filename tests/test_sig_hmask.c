// SPDX-License-Identifier: MIT
/* test_sig_hmask.c - the program's view of probekit's signals in its own handlers: sa_mask and the signal blocked while one runs, restored when it returns or siglongjmp()s out, so a later raise(SIGTRAP) reaches its handler (issue 9, item 1). */
#include <setjmp.h>
#include <string.h>

#include "sig_common.h"

static volatile int traps, order_bad, in_usr1;
static volatile int trap_blocked_inside, trap_seen_inside;
static sigjmp_buf env;
static volatile int jump;

static void on_trap(int sig)
{
	(void)sig;
	if (in_usr1)
		order_bad++;	/* the kernel would hold it until usr1 returns */
	traps++;
}

static int trap_vblocked(void)
{
	sigset_t cur;

	sigprocmask(SIG_BLOCK, NULL, &cur);
	return sigismember(&cur, SIGTRAP) == 1;
}

/* sa_mask = everything: SIGTRAP reads blocked in here, and waits. */
static void on_usr1(int sig)
{
	sigset_t t;

	(void)sig;
	in_usr1 = 1;
	trap_blocked_inside = trap_vblocked();
	raise(SIGTRAP);
	trap_seen_inside = traps;
	/* A handler that blocks SIGTRAP itself: undone by the return. */
	sigemptyset(&t);
	sigaddset(&t, SIGTRAP);
	sigprocmask(SIG_BLOCK, &t, NULL);
	in_usr1 = 0;
	if (jump)
		siglongjmp(env, 1);
}

static void handler(int sig, void (*fn)(int), int all)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = fn;
	if (all)
		sigfillset(&sa.sa_mask);
	else
		sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
}

int main(void)
{
	struct sigaction got;
	sigset_t t;

	handler(SIGTRAP, on_trap, 0);
	handler(SIGUSR1, on_usr1, 1);
	/* Wrapped for the kernel, read back as set. */
	sigaction(SIGUSR1, NULL, &got);
	ASSERT_TRUE(got.sa_handler == on_usr1, "the handler reads back as set");
	ASSERT_FALSE(got.sa_flags & SA_SIGINFO, "without SA_SIGINFO, as set");
	ASSERT_TRUE(sigismember(&got.sa_mask, SIGTRAP) == 1 &&
		    sigismember(&got.sa_mask, SIGINT) == 1, "its sa_mask as set");

	/* Return from the handler. */
	raise(SIGUSR1);
	ASSERT_TRUE(trap_blocked_inside, "SIGTRAP reads blocked inside a handler whose sa_mask has it");
	ASSERT_EQ(trap_seen_inside, 0, "its raise(SIGTRAP) waits for the handler's return");
	ASSERT_EQ(traps, 1, "and is delivered after it");
	ASSERT_FALSE(trap_vblocked(), "after the return SIGTRAP is unblocked again");
	raise(SIGTRAP);
	ASSERT_EQ(traps, 2, "a later raise(SIGTRAP) reaches the program's handler");

	/* siglongjmp out of the handler. */
	jump = 1;
	trap_blocked_inside = 0;
	if (sigsetjmp(env, 1) == 0)
		raise(SIGUSR1);
	ASSERT_TRUE(trap_blocked_inside, "blocked inside (the siglongjmp case)");
	ASSERT_EQ(traps, 3, "the raise inside delivered by siglongjmp's mask restore");
	ASSERT_FALSE(trap_vblocked(), "after siglongjmp SIGTRAP is unblocked again");
	raise(SIGTRAP);
	ASSERT_EQ(traps, 4, "a later raise(SIGTRAP) reaches the program's handler");

	/* sigsetjmp's mask is restored, SIGTRAP's bit included. */
	sigemptyset(&t);
	sigaddset(&t, SIGTRAP);
	sigprocmask(SIG_BLOCK, &t, NULL);
	if (sigsetjmp(env, 1) == 0) {
		sigprocmask(SIG_UNBLOCK, &t, NULL);
		traps = 0;
		raise(SIGUSR1);
	}
	ASSERT_TRUE(trap_vblocked(), "siglongjmp restores sigsetjmp's SIGTRAP blocked");
	sigprocmask(SIG_UNBLOCK, &t, NULL);
	ASSERT_EQ(traps, 1, "the raise inside came at the unblock");
	ASSERT_EQ(order_bad, 0, "never inside the SIGUSR1 handler");
	ASSERT_FALSE(sig_kernel_blocks(SIGTRAP), "never really blocked");
	return t_exit();
}
