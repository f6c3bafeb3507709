// SPDX-License-Identifier: MIT
/* test_sig_nested.c - a handler that runs inside probekit's SIGTRAP handler (one installed before probekit) may itself hit an int3 probe. */

/*
 * The program's own SIGTRAP handler, installed before probekit, gets the
 * traps that are not probekit's: it runs inside probekit's handler. If it
 * calls a function with an int3 probe, that SIGTRAP arrives while the first
 * is being handled. With SIGTRAP blocked in its own handler the kernel
 * would kill the process (a synchronous signal that is blocked is fatal);
 * probekit's handlers are installed with SA_NODEFER so it is handled.
 */
#include <signal.h>
#include <string.h>

#include "harness.h"
#include "probekit.h"

__attribute__((noinline)) long nested_target(long a)
{
	volatile long x = a;

	return x + 1;
}

static volatile int program_traps, probe_hits;
static volatile long nested_result;

static void program_trap(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)si;
	(void)uc;
	program_traps++;
	nested_result = nested_target(41);	/* hits the int3 probe */
}

static void on_hit(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p;
	(void)r;
	(void)ctx;
	probe_hits++;
}

int main(void)
{
	struct sigaction sa;
	struct pk_probe *p;
	PK_OPTS(pk_probe_opts, o, .addr = (void *)nested_target, .pre = on_hit,
		.flags = PK_PROBE_F_INT3);

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = program_trap;
	sa.sa_flags = SA_SIGINFO;
	ASSERT_OK(sigaction(SIGTRAP, &sa, NULL), "the program's handler");
	ASSERT_OK(pk_probe_create(&o, &p), "int3 probe");
	ASSERT_OK(pk_probe_register(&p, 1), "register");

	ASSERT_EQ(nested_target(1), 2, "a plain hit");
	ASSERT_EQ(probe_hits, 1, "counted");
	/* Not probekit's int3: to the program's handler, which hits the probe. */
	__asm__ volatile("int3" ::: "memory");
	ASSERT_EQ(program_traps, 1, "the program's handler ran");
	ASSERT_EQ(nested_result, 42, "the probed call inside it returned");
	ASSERT_EQ(probe_hits, 2, "and was counted");

	ASSERT_OK(pk_probe_unregister(&p, 1), "unregister");
	pk_probe_destroy(p);
	return t_exit();
}
