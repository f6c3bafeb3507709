// SPDX-License-Identifier: MIT
/* test_sig_strip_load.c - what libprobekit's constructors make of handlers and masks set before it loaded (past its interposers): every owned signal out of every handler's sa_mask and the thread's real mask, read back as set, others untouched (the one pass for all of them, start10b). */
#include <signal.h>
#include <sys/syscall.h>

#include "harness.h"

struct ksa {
	void *handler;
	unsigned long flags;
	void *restorer;
	unsigned long mask;
};

#define B(s) (1UL << ((s) - 1))
#define SWEEP 62	/* SIGRTMAX - 2, the default sweep signal */
#define OWNED (B(SIGTRAP) | B(SIGSEGV) | B(SIGBUS) | B(SIGILL) | B(SWEEP))

extern void *pk_strip_helper_trap;
extern int pk_strip_helper_ran;

static unsigned long raw_mask_of(int sig)
{
	struct ksa k = { 0 };

	syscall(SYS_rt_sigaction, sig, NULL, &k, 8);
	return k.mask;
}

static unsigned long word(const sigset_t *s)
{
	return ((const unsigned long *)s)[0];
}

/* The child: @blocked is what its real mask blocked before exec. */
static int check(unsigned long blocked)
{
	unsigned long raw = 0;
	struct sigaction sa;
	sigset_t cur;

	if (!pk_strip_helper_ran || pk_strip_helper_trap != SIG_DFL)
		SKIP("the helper library's constructor did not run before "
		     "libprobekit's (SIGTRAP's handler %p)", pk_strip_helper_trap);
	/* The kernel's view: no handler blocks an owned signal. */
	ASSERT_EQ(raw_mask_of(SIGUSR1) & OWNED, 0, "SIGUSR1's real sa_mask & owned");
	ASSERT_EQ(raw_mask_of(SIGUSR1) & B(SIGUSR2), B(SIGUSR2),
		  "SIGUSR1's real sa_mask keeps SIGUSR2");
	ASSERT_EQ(raw_mask_of(SIGUSR2) & OWNED, 0, "SIGUSR2's real sa_mask & owned");
	ASSERT_EQ(raw_mask_of(SIGALRM), B(SIGUSR1), "SIGALRM's real sa_mask");
	/* The program's view: as it was set. */
	ASSERT_OK(sigaction(SIGUSR1, NULL, &sa), "sigaction(SIGUSR1)");
	ASSERT_EQ(word(&sa.sa_mask) & (OWNED | B(SIGUSR2)), OWNED | B(SIGUSR2),
		  "SIGUSR1's sa_mask read back");
	ASSERT_OK(sigaction(SIGUSR2, NULL, &sa), "sigaction(SIGUSR2)");
	ASSERT_EQ(word(&sa.sa_mask) & OWNED, B(SIGSEGV) | B(SIGBUS),
		  "SIGUSR2's sa_mask read back");
	/* The thread's real mask blocks no owned signal; read back as set. */
	syscall(SYS_rt_sigprocmask, SIG_BLOCK, NULL, &raw, 8);
	ASSERT_EQ(raw & OWNED, 0, "real mask & owned");
	ASSERT_EQ(raw & B(SIGUSR1), blocked & B(SIGUSR1),
		  "real mask keeps SIGUSR1 as it was");
	ASSERT_OK(pthread_sigmask(SIG_BLOCK, NULL, &cur), "pthread_sigmask");
	ASSERT_EQ(word(&cur) & (OWNED | B(SIGUSR1)), blocked,
		  "mask read back == blocked before exec");
	return t_exit();
}

static int run(char *self, unsigned long blocked)
{
	char arg[32];
	pid_t pid;
	int st;

	snprintf(arg, sizeof(arg), "%lu", blocked);
	pid = fork();
	if (pid == 0) {
		char *argv[] = { self, arg, NULL };

		/* Really blocked across exec: past probekit's mask calls. */
		syscall(SYS_rt_sigprocmask, SIG_SETMASK, &blocked, NULL, 8);
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
		return 77;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(int argc, char **argv)
{
	/* With and without the sweep signal blocked (not in sig_lock's set). */
	const unsigned long cases[] = {
		B(SIGTRAP) | B(SIGSEGV) | B(SIGILL) | B(SWEEP) | B(SIGUSR1),
		B(SIGTRAP) | B(SIGBUS) | B(SIGUSR1),
		0,
	};
	int skipped = 0;

	if (argc > 1)
		return check(strtoul(argv[1], NULL, 0));
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = run(argv[0], cases[i]);

		if (rc == 77)
			skipped++;
		else
			ASSERT_EQ(rc, 0, "child's exit status");
	}
	if (skipped == 3)
		SKIP("the helper's constructor ran after libprobekit's");
	return t_exit();
}
