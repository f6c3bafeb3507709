// SPDX-License-Identifier: MIT
/* test_sig_exiting.c - a thread in glibc's thread-exit window (every signal blocked but SIGSETXID, asleep in a system call: madvise of its stack, the stack cache's lock) is ending, not parked for good: a commit waits it out instead of refusing at once (stress_probe_ret was refused so in CI). */
#include <stdint.h>
#include <time.h>

#include "sig_common.h"

/*
 * What glibc (2.35 on) blocks in start_thread before a thread's last
 * steps: everything but SIGSETXID (33), which setuid() in another thread
 * still needs this one to take. The window is entered with the raw system
 * call, as glibc does (pthread_sigmask would be probekit's interposer).
 */
#define EXIT_MASK (~(1UL << (SIGKILL - 1) | 1UL << (SIGSTOP - 1) | 1UL << 32))

static void *exiting(void *arg)
{
	unsigned long mask = EXIT_MASK, old = 0;
	struct timespec nap = { 0, 300000000 };

	(void)arg;
	syscall(SYS_rt_sigprocmask, SIG_BLOCK, &mask, &old, 8);
	/* Asleep in one call for 300 ms: what a stack madvise under a busy
	 * mmap lock, or a contended stack-cache lock, looks like outside. */
	syscall(SYS_nanosleep, &nap, NULL);
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, 8);
	return NULL;
}

static int scenario(void)
{
	struct pk_probe *p = sig_probe((void *)sig_victim_jmp, 0);
	pthread_t t;
	int r;

	if (!p)
		return 2;
	if (pthread_create(&t, NULL, exiting, NULL))
		return 3;
	usleep(50000);		/* inside its window, asleep */
	pk_set_log(t_quiet_log, NULL);
	r = pk_probe_register(&p, 1);
	pk_set_log(NULL, NULL);
	pthread_join(t, NULL);
	if (r) {
		fprintf(stderr, "commit with a thread in its exit window: %d\n", r);
		return 4;
	}
	if (sig_victim_jmp(2) != 7 || sig_hits != 1)
		return 5;
	if (pk_probe_unregister(&p, 1))
		return 6;
	pk_probe_destroy(p);
	return 0;
}

int main(void)
{
	int st = sig_in_child(scenario);

	sig_expect_ok(st, "a thread in glibc's exit window: the commit waits for it and succeeds");
	if (WIFEXITED(st) && WEXITSTATUS(st))
		fprintf(stderr, "scenario exit %d\n", WEXITSTATUS(st));
	return t_exit();
}
