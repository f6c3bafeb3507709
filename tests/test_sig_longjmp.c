// SPDX-License-Identifier: MIT
/* test_sig_longjmp.c - a program using probekit's fault chain recovers its own faults with sigsetjmp/siglongjmp from a SIGSEGV handler it installs after probekit (issue 9, item 1). */
#include <setjmp.h>
#include <string.h>
#include <sys/mman.h>

#include "sig_common.h"

static sigjmp_buf env;
static volatile int recovered, chain_calls;
static char *mine;
static long page;
/* Address 8: a NULL dereference, but not NULL itself (UBSan would stop first). */
static volatile int *volatile null_ish = (volatile int *)8;

static void on_segv(int sig)
{
	(void)sig;
	siglongjmp(env, 1);
}

static int on_fault(const struct pk_fault *f, void *ctx)
{
	(void)ctx;
	chain_calls++;
	mprotect(f->start, (size_t)page, PROT_READ | PROT_WRITE);
	return PK_FAULT_HANDLED;
}

/* A fault the program has blocked (virtually): the default action. */
static int blocked_fault(void)
{
	sigset_t s;

	sigemptyset(&s);
	sigaddset(&s, SIGSEGV);
	sigprocmask(SIG_BLOCK, &s, NULL);
	*null_ish = 1;
	return 0;
}

int main(void)
{
	struct sigaction sa, got;
	int st;

	page = sysconf(_SC_PAGESIZE);
	mine = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!ASSERT_OK(pk_fault_register(mine, (size_t)page, on_fault, NULL),
		       "fault range"))
		return t_exit();
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_segv;
	sigemptyset(&sa.sa_mask);
	ASSERT_OK(sigaction(SIGSEGV, &sa, NULL), "the program's SIGSEGV handler, after probekit's");
	sigaction(SIGSEGV, NULL, &got);
	ASSERT_TRUE(got.sa_handler == on_segv, "read back");
	for (int i = 0; i < 100; i++) {
		if (sigsetjmp(env, 1) == 0)
			*null_ish = i;
		else
			recovered++;
		mprotect(mine, (size_t)page, PROT_NONE);
		mine[i] = 1;		/* probekit's range: its chain, not on_segv */
	}
	ASSERT_EQ(recovered, 100, "every fault of its own recovered by siglongjmp");
	ASSERT_EQ(chain_calls, 100, "every fault in probekit's range went to the fault chain");
	st = sig_in_child(blocked_fault);
	ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV,
		    "a fault with SIGSEGV blocked: killed by SIGSEGV, as without probekit");
	pk_fault_unregister(mine);
	return t_exit();
}
