// SPDX-License-Identifier: MIT
/* test_sig_mask.c - the program's masks of probekit's signals are virtual: read back as set, never blocking an int3, its own signals held and delivered on unblock (issue 9, item 1). */
#include <string.h>

#include "sig_common.h"

static volatile int h_calls, h_code;
static volatile int in_usr1_int3;

static void h(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	(void)ctx;
	h_calls++;
	h_code = si->si_code;
}

static void usr1(int sig)
{
	(void)sig;
	/* SIGTRAP in this handler's sa_mask: an int3 probe hit here. */
	sig_victim_int3(3);
	in_usr1_int3 = !sig_kernel_blocks(SIGTRAP);
}

static void *thread_mask(void *arg)
{
	sigset_t cur;

	(void)arg;
	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	return (void *)(long)(sigismember(&cur, SIGTRAP) == 1 &&
			      !sig_kernel_blocks(SIGTRAP));
}

int main(void)
{
	struct pk_probe *ip = sig_probe((void *)sig_victim_int3, PK_PROBE_F_INT3);
	struct sigaction sa, got;
	sigset_t trap, cur, empty;
	pthread_t t;
	void *ret;
	int sig;

	if (!ASSERT_TRUE(ip != NULL, "probe") ||
	    !ASSERT_OK(pk_probe_register(&ip, 1), "register int3 probe"))
		return t_exit();
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = h;
	sa.sa_flags = SA_SIGINFO;
	ASSERT_OK(sigaction(SIGTRAP, &sa, NULL), "the program's SIGTRAP handler");
	sigemptyset(&trap);
	sigaddset(&trap, SIGTRAP);
	sigemptyset(&empty);

	/* sigprocmask: read back as set; the kernel's mask never has it. */
	ASSERT_OK(sigprocmask(SIG_BLOCK, &trap, NULL), "sigprocmask block");
	sigprocmask(SIG_BLOCK, NULL, &cur);
	ASSERT_EQ(sigismember(&cur, SIGTRAP), 1, "sigprocmask reads back SIGTRAP blocked");
	ASSERT_FALSE(sig_kernel_blocks(SIGTRAP), "the kernel's mask lets SIGTRAP through");
	ASSERT_EQ(sig_victim_int3(2), 12, "an int3 probe hit while blocked");
	ASSERT_EQ(sig_hits, 1, "counted");

	/* Its own raise while blocked waits for the unblock, as the kernel's would. */
	raise(SIGTRAP);
	ASSERT_EQ(h_calls, 0, "raise(SIGTRAP) while blocked: held");
	ASSERT_OK(sigprocmask(SIG_UNBLOCK, &trap, NULL), "unblock");
	ASSERT_EQ(h_calls, 1, "delivered on unblock");
	ASSERT_EQ(h_code, SI_TKILL, "with raise()'s si_code");

	/* pthread_sigmask, the same. */
	ASSERT_OK(pthread_sigmask(SIG_SETMASK, &trap, NULL), "pthread_sigmask");
	pthread_sigmask(SIG_SETMASK, NULL, &cur);
	ASSERT_EQ(sigismember(&cur, SIGTRAP), 1, "pthread_sigmask reads back");
	ASSERT_EQ(sigismember(&cur, SIGUSR2), 0, "and nothing more");

	/* A new thread's mask is its creator's, virtually too. */
	pthread_create(&t, NULL, thread_mask, NULL);
	pthread_join(t, &ret);
	ASSERT_TRUE(ret != NULL, "new thread reads SIGTRAP blocked, kernel has it open");

	/* sigsuspend lets a held one through: its handler runs, EINTR. */
	raise(SIGTRAP);
	ASSERT_EQ(h_calls, 1, "held again");
	ASSERT_EQ(sigsuspend(&empty), -1, "sigsuspend");
	ASSERT_EQ(h_calls, 2, "held signal delivered by sigsuspend's mask");

	/* sigwait takes a held one; the handler does not see it. */
	raise(SIGTRAP);
	ASSERT_OK(sigwait(&trap, &sig), "sigwait");
	ASSERT_EQ(sig, SIGTRAP, "sigwait got SIGTRAP");
	ASSERT_EQ(h_calls, 2, "not the handler");
	ASSERT_OK(pthread_sigmask(SIG_SETMASK, &empty, NULL), "unblock all");
	ASSERT_EQ(h_calls, 2, "nothing left held");

	/* A handler's sa_mask with SIGTRAP: read back; not blocked for real. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = usr1;
	sigfillset(&sa.sa_mask);
	ASSERT_OK(sigaction(SIGUSR1, &sa, NULL), "SIGUSR1 with a full sa_mask");
	sigaction(SIGUSR1, NULL, &got);
	ASSERT_EQ(sigismember(&got.sa_mask, SIGTRAP), 1, "sa_mask reads back SIGTRAP");
	raise(SIGUSR1);
	ASSERT_TRUE(in_usr1_int3, "int3 probe hit in the handler, SIGTRAP open there");

	pk_probe_unregister(&ip, 1);
	pk_probe_destroy(ip);
	return t_exit();
}
