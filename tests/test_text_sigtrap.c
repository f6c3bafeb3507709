// SPDX-License-Identifier: MIT
/* test_text_sigtrap.c - SIGTRAPs that are not probekit's reach the program's own handler, or kill. */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probekit.h"
#include "harness.h"
#include "codegen.h"

static volatile int own_calls, own_code;

static void own_handler(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	(void)ctx;
	own_calls++;
	own_code = si->si_code;
}

/* Make probekit take SIGTRAP: any commit installs its handler. */
static void patch_something(void)
{
	struct cg cg;
	uint8_t on[5], off[5];

	if (cg_create(&cg, CG_JMP, 1, 32, 0))
		return;
	cg_site_bytes(&cg, 0, 1, on);
	cg_site_bytes(&cg, 0, 0, off);
	ASSERT_EQ(pk_text_poke(cg_fn(&cg, 0), on, 5, off, 0), 1, "poke");
	ASSERT_EQ(cg_call(&cg, 0), cg_val(0, 1), "patched");
}

int main(void)
{
	struct sigaction sa;
	int status;
	pid_t pid;

	/* A child with the default action dies of SIGTRAP at a stray int3. */
	pid = fork();
	if (pid == 0) {
		patch_something();
		__asm__ volatile("int3");
		_exit(0);
	}
	waitpid(pid, &status, 0);
	ASSERT_TRUE(WIFSIGNALED(status), "child killed by a signal");
	ASSERT_EQ(WIFSIGNALED(status) ? WTERMSIG(status) : 0, SIGTRAP,
		  "child killed by SIGTRAP");

	/* The program's handler, installed first, still gets its traps. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = own_handler;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGTRAP, &sa, NULL);
	patch_something();

	__asm__ volatile("int3");
	ASSERT_EQ(own_calls, 1, "int3 of the program passed on");
	ASSERT_EQ(own_code, SI_KERNEL, "with its siginfo");
	raise(SIGTRAP);
	ASSERT_EQ(own_calls, 2, "raise(SIGTRAP) passed on");
	ASSERT_EQ(own_code, SI_TKILL, "with its siginfo");
	return t_exit();
}
