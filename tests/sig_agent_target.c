// SPDX-License-Identifier: MIT
/* sig_agent_target.c - no probekit of its own: run under the command's agent, it checks what the agent's forwarders give it (issue 9, item 1): handler masks, siglongjmp, sigblock, thrd_create, pthread_attr_setsigmask_np. Exit 0, or the number of the first failed check. */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <threads.h>
#include <unistd.h>

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

static volatile int traps, inside_blocked, jump;
static sigjmp_buf env;

static int kernel_blocks_trap(void)
{
	unsigned long cur = 0;

	syscall(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &cur, 8);
	return (cur >> (SIGTRAP - 1)) & 1;
}

static int view_blocks_trap(void)
{
	sigset_t c;

	pthread_sigmask(SIG_BLOCK, NULL, &c);
	return sigismember(&c, SIGTRAP) == 1;
}

static void on_trap(int s)
{
	(void)s;
	traps++;
}

static void on_usr1(int s)
{
	(void)s;
	inside_blocked = view_blocks_trap();
	raise(SIGTRAP);
	if (jump)
		siglongjmp(env, 1);
}

static void *attr_thread(void *p)
{
	*(int *)p = kernel_blocks_trap() * 2 + view_blocks_trap();
	return NULL;
}

static int c11_thread(void *p)
{
	attr_thread(p);
	return 0;
}

int main(void)
{
	struct sigaction sa;
	pthread_attr_t a;
	sigset_t all;
	pthread_t t;
	thrd_t th;
	int seen = -1;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_trap;
	sigaction(SIGTRAP, &sa, NULL);
	sa.sa_handler = on_usr1;
	sigfillset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);

	raise(SIGUSR1);
	if (!inside_blocked || traps != 1 || view_blocks_trap())
		return 1;	/* sa_mask: blocked inside, delivered after */
	jump = 1;
	if (sigsetjmp(env, 1) == 0)
		raise(SIGUSR1);
	if (traps != 2 || view_blocks_trap())
		return 2;	/* siglongjmp restores sigsetjmp's view */
	sigblock(1 << (SIGTRAP - 1));
	if (kernel_blocks_trap() || !view_blocks_trap())
		return 3;	/* sigblock: virtual */
	if (thrd_create(&th, c11_thread, &seen) != thrd_success)
		return 4;
	thrd_join(th, NULL);
	if (seen != 1)
		return 5;	/* the creator's view, not really blocked */
	sigsetmask(0);
	pthread_attr_init(&a);
	sigfillset(&all);
	pthread_attr_setsigmask_np(&a, &all);
	pthread_create(&t, &a, attr_thread, &seen);
	pthread_join(t, NULL);
	if (seen != 1)
		return 6;	/* the attribute's view, not really blocked */
	puts("sig_agent_target: ok");
	return 0;
}
