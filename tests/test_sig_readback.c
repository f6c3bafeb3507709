// SPDX-License-Identifier: MIT
/* test_sig_readback.c - after SA_RESETHAND has fired, sigaction reads back what the kernel would: SIG_DFL with the program's flags kept (SA_RESETHAND and its own SA_SIGINFO, never probekit's), for a wrapped signal and for one probekit owns. */
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"

static volatile int got;

static void h(int sig)
{
	got = sig;
}

static void hi(int sig, siginfo_t *si, void *ctx)
{
	(void)si;
	(void)ctx;
	got = sig;
}

static void check(int sig, int siginfo)
{
	struct sigaction sa, o;
	char what[96];

	memset(&sa, 0, sizeof(sa));
	if (siginfo)
		sa.sa_sigaction = hi;
	else
		sa.sa_handler = h;
	sa.sa_flags = SA_RESETHAND | (siginfo ? SA_SIGINFO : 0);
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
	got = 0;
	raise(sig);
	sigaction(sig, NULL, &o);
	snprintf(what, sizeof(what), "sig %d siginfo %d: handler ran", sig, siginfo);
	ASSERT_EQ(got, sig, what);
	snprintf(what, sizeof(what), "sig %d siginfo %d: SIG_DFL after", sig, siginfo);
	ASSERT_TRUE(o.sa_handler == SIG_DFL, what);
	snprintf(what, sizeof(what), "sig %d siginfo %d: SA_RESETHAND kept", sig, siginfo);
	ASSERT_TRUE(o.sa_flags & SA_RESETHAND, what);
	snprintf(what, sizeof(what), "sig %d siginfo %d: SA_SIGINFO as set", sig, siginfo);
	ASSERT_EQ(!!(o.sa_flags & SA_SIGINFO), siginfo, what);
}

int main(void)
{
	check(SIGUSR2, 0);	/* wrapped */
	check(SIGUSR2, 1);
	check(SIGSEGV, 0);	/* owned by probekit */
	check(SIGSEGV, 1);
	check(SIGTRAP, 0);
	return t_exit();
}
