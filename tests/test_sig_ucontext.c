// SPDX-License-Identifier: MIT
/* test_sig_ucontext.c - setcontext, swapcontext and getcontext keep probekit's owned signals virtual: a handler's setcontext(uc) never blocks SIGSEGV really, and a saved context brings the program's view back. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#include "harness.h"

static int really_blocked(int sig)
{
	char l[256];
	unsigned long v = 0;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(l, sizeof(l), f))
		if (!strncmp(l, "SigBlk:", 7))
			v = strtoul(l + 7, NULL, 16);
	if (f)
		fclose(f);
	return (v >> (sig - 1)) & 1;
}

static int vblocked(int sig)
{
	sigset_t m;

	sigprocmask(SIG_SETMASK, NULL, &m);
	return sigismember(&m, sig);
}

static void on_usr1(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	(void)si;
	setcontext((ucontext_t *)ctx);
}

static ucontext_t main_uc, co_uc;
static volatile int co_seen;

static void coroutine(void)
{
	co_seen = vblocked(SIGSEGV) ? 1 : 2;
	swapcontext(&co_uc, &main_uc);
}

int main(void)
{
	static char stack[64 * 1024];
	struct sigaction sa;
	sigset_t seg, none;
	volatile int back = 0;

	sigemptyset(&seg);
	sigaddset(&seg, SIGSEGV);
	sigemptyset(&none);

	/* A handler's setcontext(uc). */
	sigprocmask(SIG_BLOCK, &seg, NULL);
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_usr1;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGUSR1, &sa, NULL);
	raise(SIGUSR1);
	ASSERT_FALSE(really_blocked(SIGSEGV), "handler's setcontext: SIGSEGV not really blocked");
	ASSERT_TRUE(vblocked(SIGSEGV), "handler's setcontext: SIGSEGV blocked for the program");
	sigprocmask(SIG_SETMASK, &none, NULL);

	/* getcontext with SIGSEGV blocked, setcontext back after unblocking. */
	sigprocmask(SIG_BLOCK, &seg, NULL);
	getcontext(&main_uc);
	if (!back) {
		back = 1;
		sigprocmask(SIG_SETMASK, &none, NULL);
		setcontext(&main_uc);
	}
	ASSERT_TRUE(vblocked(SIGSEGV), "getcontext/setcontext: SIGSEGV blocked again");
	ASSERT_FALSE(really_blocked(SIGSEGV), "getcontext/setcontext: not really");

	/* swapcontext into a context made with nothing blocked, and back. */
	getcontext(&co_uc);
	co_uc.uc_stack.ss_sp = stack;
	co_uc.uc_stack.ss_size = sizeof(stack);
	co_uc.uc_link = NULL;
	sigemptyset(&co_uc.uc_sigmask);
	makecontext(&co_uc, coroutine, 0);
	swapcontext(&main_uc, &co_uc);
	ASSERT_EQ(co_seen, 2, "the coroutine runs with its own (empty) mask");
	ASSERT_TRUE(vblocked(SIGSEGV), "back from swapcontext: SIGSEGV blocked");
	ASSERT_FALSE(really_blocked(SIGSEGV), "back from swapcontext: not really");
	sigprocmask(SIG_SETMASK, &none, NULL);
	return t_exit();
}
