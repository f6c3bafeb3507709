// SPDX-License-Identifier: MIT
/* test_sig_entries.c - libc's other ways to set a mask or start a thread keep probekit's signals deliverable and the program's view as set: pthread_attr_setsigmask_np, sigblock/sigsetmask/sigpause, thrd_create, __ppoll_chk; posix_spawnp's PATH search refuses int3 (issue 9, item 1). */
#include <poll.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

#include "sig_common.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

extern char **environ;
int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *t,
		const sigset_t *mask, size_t fdslen);

static volatile int traps;

static void on_trap(int sig)
{
	(void)sig;
	traps++;
}

static int vblocks(int sig)
{
	sigset_t cur;

	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	return sigismember(&cur, sig) == 1;
}

static void block_trap(int how)
{
	sigset_t t;

	sigemptyset(&t);
	sigaddset(&t, SIGTRAP);
	sigprocmask(how, &t, NULL);
}

/* What a new thread sees and runs. */
struct seen {
	int kernel_trap, view_trap;
	long r;
};

static void *attr_thread(void *p)
{
	struct seen *s = p;

	s->kernel_trap = sig_kernel_blocks(SIGTRAP);
	s->view_trap = vblocks(SIGTRAP);
	s->r = sig_victim_int3(3);	/* an int3 probe: fatal if blocked */
	return NULL;
}

static int c11_thread(void *p)
{
	attr_thread(p);
	return 7;
}

/* pthread_attr_setsigmask_np(all): the thread runs an int3 probe. */
static int attr_case(void)
{
	struct pk_probe *p = sig_probe((void *)sig_victim_int3, PK_PROBE_F_INT3);
	struct seen s = { -1, -1, 0 };
	pthread_attr_t a;
	sigset_t all, got;
	pthread_t t;

	if (!p || pk_probe_register(&p, 1))
		return 2;
	pthread_attr_init(&a);
	sigfillset(&all);
	if (pthread_attr_setsigmask_np(&a, &all))
		return 3;
	if (pthread_attr_getsigmask_np(&a, &got) ||
	    sigismember(&got, SIGTRAP) != 1 || sigismember(&got, SIGSEGV) != 1)
		return 4;
	pthread_create(&t, &a, attr_thread, &s);
	pthread_join(t, NULL);
	pthread_attr_destroy(&a);
	if (s.kernel_trap || !s.view_trap || s.r != 17)
		return 5;
	return 0;
}

static void install_trap(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_trap;
	sigaction(SIGTRAP, &sa, NULL);
}

/* Each case in a child of its own: one failing (or killed) leaves the rest. */
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "%s: %s\n", __func__, #c); return 1; } } while (0)

static int bsd_case(void)
{
	int old;

	install_trap();
	old = sigblock(1 << (SIGTRAP - 1));
	CHECK((old & (1 << (SIGTRAP - 1))) == 0);
	CHECK(!sig_kernel_blocks(SIGTRAP));	/* not really blocked */
	CHECK(vblocks(SIGTRAP));		/* reads blocked */
	raise(SIGTRAP);
	CHECK(traps == 0);			/* the program's raise waits */
	old = sigsetmask(0);
	CHECK(old & (1 << (SIGTRAP - 1)));
	CHECK(traps == 1);			/* delivered at the unblock */
	CHECK(!vblocks(SIGTRAP));
	return 0;
}

static int sigpause_case(void)
{
	install_trap();
	block_trap(SIG_BLOCK);
	raise(SIGTRAP);
	alarm(5);			/* a lost deferred signal: SIGALRM */
	errno = 0;
	CHECK(sigpause(SIGTRAP) == -1 && errno == EINTR);
	alarm(0);
	CHECK(traps == 1);
	CHECK(vblocks(SIGTRAP));	/* the mask is back */
	CHECK(!sig_kernel_blocks(SIGTRAP));
	return 0;
}

static int ppoll_chk_case(void)
{
	struct timespec ts = { 0, 200 * 1000 * 1000 };
	struct pollfd pfd[1] = { { .fd = -1 } };
	sigset_t none;

	install_trap();
	block_trap(SIG_BLOCK);
	raise(SIGTRAP);
	sigemptyset(&none);
	/* A deferred SIGTRAP let through by the wait's mask interrupts it. */
	CHECK(__ppoll_chk(pfd, 1, &ts, &none, sizeof(pfd)) == -1);
	CHECK(traps == 1);
	return 0;
}

static int thrd_case(void)
{
	struct seen s = { -1, -1, 0 };
	thrd_t th;
	int res = 0;

	block_trap(SIG_BLOCK);
	CHECK(thrd_create(&th, c11_thread, &s) == thrd_success);
	thrd_join(th, &res);
	CHECK(res == 7);
	CHECK(s.view_trap == 1);	/* its creator's mask */
	CHECK(s.kernel_trap == 0);
	return 0;
}

/* posix_spawnp: its child's PATH search runs getenv. */
static int spawnp_case(void)
{
	PK_OPTS(pk_probe_opts, o, .symbol = "libc.so.6:getenv",
		.pre = sig_count, .flags = PK_PROBE_F_INT3);
	struct pk_probe *p = NULL;
	char *argv[] = { "true", NULL };
	pid_t pid;
	int r, w = -1;

	CHECK(pk_probe_create(&o, &p) == 0);
	pk_set_log(t_quiet_log, NULL);
	r = pk_probe_register(&p, 1);
	pk_set_log(NULL, NULL);
	if (posix_spawnp(&pid, "true", NULL, NULL, argv, environ) == 0)
		waitpid(pid, &w, 0);
	if (WIFSIGNALED(w))
		fprintf(stderr, "posix_spawnp's child killed by signal %d\n",
			WTERMSIG(w));
	CHECK(WIFEXITED(w) && WEXITSTATUS(w) == 0);
	CHECK(r == -EPERM);		/* refused, as posix_spawn's */
	return 0;
}

int main(void)
{
	sig_expect_ok(sig_in_child(attr_case), "pthread_attr_setsigmask_np(all): the thread's real mask lets SIGTRAP through, it reads blocked, an int3 probe runs");
	sig_expect_ok(sig_in_child(bsd_case), "sigblock/sigsetmask: virtual for SIGTRAP");
	sig_expect_ok(sig_in_child(sigpause_case), "sigpause delivers a deferred SIGTRAP it lets through");
	sig_expect_ok(sig_in_child(ppoll_chk_case), "__ppoll_chk as ppoll");
	sig_expect_ok(sig_in_child(thrd_case), "thrd_create: the creator's virtual mask");
	sig_expect_ok(sig_in_child(spawnp_case), "posix_spawnp with an int3 on getenv refused: its child lives");
	return t_exit();
}
