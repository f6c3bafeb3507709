// SPDX-License-Identifier: MIT
/* test_sig_early.c - probekit's fault signals are its own from load: a thread that blocked every signal before any fault-layer use survives a write to a watched page and still reads "all blocked"; a SIGSEGV handler the program installs first is chained (issue 9, item 1). */
#include <pthread.h>
#include <setjmp.h>
#include <string.h>

#include "sig_common.h"

static volatile uint64_t page_data[512] __attribute__((aligned(4096)));
static volatile int hits, go, done, still_blocked;
static pthread_barrier_t ready;

static void on_hit(const struct pk_watch_hit *h, void *ctx)
{
	(void)h;
	(void)ctx;
	__atomic_add_fetch(&hits, 1, __ATOMIC_RELAXED);
}

/* Blocks everything before probekit's fault layer is used at all. */
static void *blocker(void *arg)
{
	sigset_t all, cur;
	int n = 0;

	(void)arg;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, NULL);
	pthread_barrier_wait(&ready);
	while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE))
		;
	for (int i = 0; i < 100; i++)
		page_data[0] = (uint64_t)i;
	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP && s != 32 && s != 33 &&
		    sigismember(&cur, s) == 1)
			n++;
	still_blocked = n;
	__atomic_store_n(&done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static int child(void)
{
	struct pk_watch *w = NULL;
	pthread_t t;
	int full = 0;

	pthread_barrier_init(&ready, NULL, 2);
	pthread_create(&t, NULL, blocker, NULL);
	pthread_barrier_wait(&ready);
	if (pk_watch_add((void *)&page_data[0], 8, PK_WATCH_WRITE, on_hit, NULL,
			 &w))
		return 3;
	__atomic_store_n(&go, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	pk_watch_remove(w);
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP && s != 32 && s != 33)
			full++;
	if (hits != 100)
		return 4;
	if (still_blocked != full)
		return 5;
	return 0;
}

/* The program's own handler, installed before any fault-layer use. */
static sigjmp_buf env;
static volatile int recovered;
static volatile int *volatile null_ish = (volatile int *)8;

static void on_segv(int sig)
{
	(void)sig;
	siglongjmp(env, 1);
}

int main(void)
{
	struct sigaction sa, got;
	int st;

	ASSERT_TRUE(sig_kernel_handler(SIGSEGV) != SIG_DFL &&
		    sig_kernel_handler(SIGBUS) != SIG_DFL &&
		    sig_kernel_handler(SIGILL) != SIG_DFL,
		    "probekit's handler is the kernel's for SIGSEGV/SIGBUS/SIGILL from load");
	st = sig_in_child(child);
	sig_expect_ok(st, "a thread that blocked everything first writes a watched page");
	if (WIFEXITED(st) && WEXITSTATUS(st))
		fprintf(stderr, "child exit %d (3 add, 4 hits, 5 mask read-back)\n",
			WEXITSTATUS(st));

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_segv;
	sigemptyset(&sa.sa_mask);
	ASSERT_OK(sigaction(SIGSEGV, &sa, NULL), "the program's SIGSEGV handler first");
	ASSERT_TRUE(sig_kernel_handler(SIGSEGV) != (void *)on_segv,
		    "chained behind probekit's, not the kernel's");
	sigaction(SIGSEGV, NULL, &got);
	ASSERT_TRUE(got.sa_handler == on_segv, "read back");
	for (int i = 0; i < 3; i++)
		if (sigsetjmp(env, 1) == 0)
			*null_ish = i;
		else
			recovered++;
	ASSERT_EQ(recovered, 3, "its own faults reach it");
	return t_exit();
}
