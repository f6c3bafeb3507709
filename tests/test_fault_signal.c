// SPDX-License-Identifier: MIT
/* test_fault_signal.c - signal ownership: installed only while needed, chaining to handlers set before and after, the default action. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probekit.h"
#include "harness.h"

static long page;
static char *mine;	/* a page registered with probekit */
static char *theirs;	/* a page the program's own handler fixes */

static int on_fault(const struct pk_fault *f, void *ctx)
{
	(void)ctx;
	mprotect(f->start, (size_t)page, PROT_READ | PROT_WRITE);
	return PK_FAULT_HANDLED;
}

static volatile int own_calls, own_plain_calls, later_calls;
static volatile sig_atomic_t blocked_in_handler;

static void own_handler(int sig, siginfo_t *si, void *ctx)
{
	sigset_t cur;

	(void)sig;
	(void)ctx;
	own_calls++;
	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	blocked_in_handler = sigismember(&cur, SIGUSR1);
	mprotect((void *)((uintptr_t)si->si_addr & ~(uintptr_t)(page - 1)),
		 (size_t)page, PROT_READ | PROT_WRITE);
}

static void own_plain_handler(int sig)
{
	(void)sig;
	own_plain_calls++;
	mprotect(theirs, (size_t)page, PROT_READ | PROT_WRITE);
}

static struct sigaction chained_old;

/* A handler installed after probekit with plain sigaction, chaining. */
static void later_handler(int sig, siginfo_t *si, void *ctx)
{
	later_calls++;
	if (si->si_addr >= (void *)theirs &&
	    si->si_addr < (void *)(theirs + page)) {
		mprotect(theirs, (size_t)page, PROT_READ | PROT_WRITE);
		return;
	}
	if (chained_old.sa_flags & SA_SIGINFO)
		chained_old.sa_sigaction(sig, si, ctx);
}

/*
 * The handler the kernel has for @sig: sigaction() reads back what the
 * program set (src/sig/interpose.c), so ask the kernel itself.
 */
static int current_is(int sig, void *fn)
{
	struct { void *handler; unsigned long flags; void *restorer;
		 unsigned long mask; } cur;

	syscall(SYS_rt_sigaction, sig, NULL, &cur, 8);
	return cur.handler == fn;
}

/* The handler the program reads back with sigaction(). */
static int program_is(int sig, void *fn)
{
	struct sigaction cur;

	sigaction(sig, NULL, &cur);
	return (void *)cur.sa_handler == fn;
}

static void touch(char *p)
{
	*(volatile char *)p = 1;
	__asm__ volatile("" ::: "memory");	/* handlers changed memory */
}

/* Run @fn in a child; return its wait status. */
static int in_child(void (*fn)(void))
{
	int status = 0;
	pid_t pid = fork();

	if (pid == 0) {
		struct rlimit rl = { 0, 0 };

		setrlimit(RLIMIT_CORE, &rl);	/* no core files from tests */
		fn();
		_exit(0);
	}
	waitpid(pid, &status, 0);
	return status;
}

static void child_null(void)
{
	pk_fault_register(mine, (size_t)page, on_fault, NULL);
	char *volatile bad = (char *)16;

	touch(bad);
}

static int die_seen;
static int on_die(struct pk_notifier *nb, unsigned long sig, void *data)
{
	(void)nb;
	(void)sig;
	(void)data;
	die_seen++;
	return PK_DONE;
}
static struct pk_notifier die_nb = { .call = on_die };

static void child_ud2(void)
{
	pk_die_register(&die_nb);
	__asm__ volatile("ud2");
}

static void child_sigbus(void)
{
	int fd = memfd_create("pk", 0);
	char *m = mmap(NULL, (size_t)page, PROT_READ, MAP_SHARED, fd, 0);

	pk_die_register(&die_nb);
	(void)*(volatile char *)m;	/* beyond the end of an empty file */
}

static void child_raise(void)
{
	pk_die_register(&die_nb);
	raise(SIGSEGV);
	_exit(3);
}

static void child_int3(void)
{
	pk_die_register(&die_nb);
	__asm__ volatile("int3");
}

static volatile int reset_calls;
static void reset_handler(int sig)
{
	(void)sig;
	reset_calls++;
	mprotect(theirs, (size_t)page, PROT_READ | PROT_WRITE);
}

static void child_resethand(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = reset_handler;
	sa.sa_flags = SA_RESETHAND;
	sigaction(SIGSEGV, &sa, NULL);
	pk_fault_register(mine, (size_t)page, on_fault, NULL);
	mprotect(theirs, (size_t)page, PROT_NONE);
	touch(theirs);		/* the program's handler, once */
	if (reset_calls != 1)
		_exit(4);
	mprotect(theirs, (size_t)page, PROT_NONE);
	touch(theirs);		/* then the default action */
	_exit(5);
}

static void check_death(const char *what, int status, int sig)
{
	if (!ASSERT_TRUE(WIFSIGNALED(status), what))
		fprintf(stderr, "%s: status %#x\n", what, status);
	else
		ASSERT_EQ(WTERMSIG(status), sig, what);
}

int main(void)
{
	struct sigaction sa, got;
	void *dfl = (void *)SIG_DFL;

	page = sysconf(_SC_PAGESIZE);
	mine = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	theirs = mine + page;

	/* Default actions: the child dies of the original signal. */
	check_death("NULL dereference with a range registered",
		    in_child(child_null), SIGSEGV);
	check_death("ud2 with a die handler", in_child(child_ud2), SIGILL);
	check_death("SIGBUS with a die handler", in_child(child_sigbus),
		    SIGBUS);
	check_death("raise(SIGSEGV) with a die handler",
		    in_child(child_raise), SIGSEGV);
	check_death("int3 with a die handler", in_child(child_int3), SIGTRAP);
	check_death("SA_RESETHAND handler runs once, then the default",
		    in_child(child_resethand), SIGSEGV);

	/*
	 * Nothing registered: probekit's handler is the kernel's all the
	 * same (owned from load, fault.c), the program reads back SIG_DFL.
	 */
	ASSERT_FALSE(current_is(SIGSEGV, dfl), "SIGSEGV probekit's from load");
	ASSERT_FALSE(current_is(SIGBUS, dfl), "SIGBUS probekit's from load");
	ASSERT_FALSE(current_is(SIGILL, dfl), "SIGILL probekit's from load");
	ASSERT_TRUE(program_is(SIGSEGV, dfl), "SIGSEGV default before");
	ASSERT_TRUE(program_is(SIGBUS, dfl), "SIGBUS default before");
	ASSERT_TRUE(program_is(SIGILL, dfl), "SIGILL default before");

	/* A handler installed before probekit, SA_SIGINFO, with a mask. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = own_handler;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SIGUSR1);
	sigaction(SIGSEGV, &sa, NULL);
	ASSERT_OK(pk_fault_register(mine, (size_t)page, on_fault, NULL),
		  "register");
	ASSERT_FALSE(current_is(SIGSEGV, (void *)own_handler),
		     "probekit's handler installed");
	ASSERT_TRUE(program_is(SIGILL, dfl), "SIGILL reads back the default");
	mprotect(mine, 2 * (size_t)page, PROT_NONE);
	touch(mine);
	ASSERT_EQ(own_calls, 0, "probekit's range claimed its fault");
	touch(theirs);
	ASSERT_EQ(own_calls, 1, "the earlier handler got the other fault");
	ASSERT_EQ(blocked_in_handler, 1, "with its sa_mask blocked");

	/* pk_signal_action: a handler set after probekit, behind it. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = own_plain_handler;
	ASSERT_OK(pk_signal_action(SIGSEGV, &sa, &got), "pk_signal_action");
	ASSERT_TRUE(got.sa_sigaction == own_handler,
		    "it returns the earlier handler");
	ASSERT_FALSE(current_is(SIGSEGV, (void *)own_plain_handler),
		     "probekit's handler stays installed");
	mprotect(mine, 2 * (size_t)page, PROT_NONE);
	touch(mine);
	touch(theirs);
	ASSERT_EQ(own_plain_calls, 1, "plain handler set later got its fault");
	ASSERT_EQ(own_calls, 1, "the replaced one no more");

	/* Plain sigaction after probekit, chaining to the old action. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = later_handler;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGSEGV, &sa, &chained_old);
	mprotect(mine, 2 * (size_t)page, PROT_NONE);
	touch(theirs);
	touch(mine);
	/* Recorded behind probekit's handler (interpose.c): it sees its own. */
	ASSERT_EQ(later_calls, 1, "the later handler sees its own fault only");
	ASSERT_EQ(own_plain_calls, 1, "and handles its own");

	/* Unregistering leaves the program's replacement alone. */
	ASSERT_OK(pk_fault_unregister(mine), "unregister");
	ASSERT_TRUE(program_is(SIGSEGV, (void *)later_handler),
		    "a handler the program installed stays");

	/* Register again on top of it; unregister restores it exactly. */
	ASSERT_OK(pk_fault_register(mine, (size_t)page, on_fault, NULL),
		  "register again");
	ASSERT_OK(pk_fault_unregister(mine), "unregister again");
	ASSERT_TRUE(program_is(SIGSEGV, (void *)later_handler),
		    "previous handler restored");
	ASSERT_TRUE(program_is(SIGBUS, dfl), "SIGBUS default restored");

	/* pk_signal_action without probekit's handler is sigaction. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	ASSERT_OK(pk_signal_action(SIGSEGV, &sa, &got), "plain sigaction");
	ASSERT_TRUE(got.sa_sigaction == later_handler, "old action");
	ASSERT_TRUE(program_is(SIGSEGV, dfl), "set");
	ASSERT_EQ(pk_signal_action(0, NULL, NULL), -EINVAL, "bad signal");
	ASSERT_EQ(pk_signal_action(SIGKILL, &sa, NULL), -EINVAL,
		  "SIGKILL refused by sigaction");

	/* The alternate stack helper. */
	stack_t ss;
	ASSERT_EQ(pk_thread_altstack(16), -EINVAL, "too small a stack");
	ASSERT_OK(pk_thread_altstack(0), "altstack");
	sigaltstack(NULL, &ss);
	ASSERT_FALSE(ss.ss_flags & SS_DISABLE, "thread has an altstack");
	ASSERT_OK(pk_thread_altstack(0), "altstack again keeps it");
	return t_exit();
}
