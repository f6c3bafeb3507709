// SPDX-License-Identifier: MIT
/* sig_strip_helper.c - test_sig_strip_load's helper library: initialised before libprobekit, it installs handlers whose masks block probekit's signals, past every interposer. */
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The kernel's struct sigaction on x86-64. */
struct ksa {
	void *handler;
	unsigned long flags;
	void *restorer;
	unsigned long mask;
};

#define B(s) (1UL << ((s) - 1))

/* What SIGTRAP's handler was when this ran: probekit's not installed yet. */
__attribute__((visibility("default"))) void *pk_strip_helper_trap;
__attribute__((visibility("default"))) int pk_strip_helper_ran;

static void h(int sig)
{
	(void)sig;
}

__attribute__((constructor)) static void early(void)
{
	struct ksa old = { 0 };
	/* SIGRTMAX - 2: the probe layer's sweep signal by default. */
	struct ksa usr1 = { .handler = (void *)h, .mask = B(SIGTRAP) |
		B(SIGSEGV) | B(SIGBUS) | B(SIGILL) | B(62) | B(SIGUSR2) };
	struct ksa usr2 = { .handler = (void *)h, .mask = B(SIGSEGV) | B(SIGBUS) };
	struct ksa alrm = { .handler = (void *)h, .mask = B(SIGUSR1) };

	syscall(SYS_rt_sigaction, SIGTRAP, NULL, &old, 8);
	pk_strip_helper_trap = old.handler;
	syscall(SYS_rt_sigaction, SIGUSR1, &usr1, NULL, 8);
	syscall(SYS_rt_sigaction, SIGUSR2, &usr2, NULL, 8);
	syscall(SYS_rt_sigaction, SIGALRM, &alrm, NULL, 8);
	pk_strip_helper_ran = 1;
}
