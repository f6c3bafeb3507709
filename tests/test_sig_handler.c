// SPDX-License-Identifier: MIT
/* test_sig_handler.c - a program's own SIGTRAP handler (signal()) and signal(SIGTRAP, SIG_DFL) live with int3 probes: each gets what is its own (issue 9, item 1). */
#include "sig_common.h"

static volatile int h1_calls, h2_calls;

static void h1(int sig)
{
	(void)sig;
	h1_calls++;
}

static void h2(int sig)
{
	(void)sig;
	h2_calls++;
}

static int own_handler(void)
{
	struct pk_probe *ip = sig_probe((void *)sig_victim_int3, PK_PROBE_F_INT3);
	struct sigaction cur;
	int bad = 0;

	if (!ip || signal(SIGTRAP, h1) == SIG_ERR)
		return 2;
	if (pk_probe_register(&ip, 1))
		return 3;
	raise(SIGTRAP);
	bad |= (h1_calls != 1) << 0;		/* its own raise reaches it */
	for (int i = 0; i < 10; i++)
		sig_victim_int3(i);
	bad |= (sig_hits != 10) << 1;		/* the probe's hits are ours */
	bad |= (h1_calls != 1) << 2;
	/* Installed after probekit: recorded, chained, read back. */
	bad |= (signal(SIGTRAP, h2) != h1) << 3;
	sigaction(SIGTRAP, NULL, &cur);
	bad |= (cur.sa_handler != h2) << 4;
	raise(SIGTRAP);
	for (int i = 0; i < 10; i++)
		sig_victim_int3(i);
	bad |= (h2_calls != 1 || h1_calls != 1 || sig_hits != 20) << 5;
	bad |= (sig_kernel_handler(SIGTRAP) == (void *)h2) << 6;
	if (bad)
		fprintf(stderr, "own_handler: failed checks %#x (h1 %d h2 %d hits %lu)\n",
			bad, h1_calls, h2_calls, sig_hits);
	return bad ? 1 : 0;
}

static int reset_to_default(void)
{
	struct pk_probe *ip = sig_probe((void *)sig_victim_int3, PK_PROBE_F_INT3);
	struct sigaction cur;

	if (!ip || pk_probe_register(&ip, 1))
		return 2;
	if (signal(SIGTRAP, SIG_DFL) == SIG_ERR)
		return 3;
	for (int i = 0; i < 10; i++)
		sig_victim_int3(i);
	sigaction(SIGTRAP, NULL, &cur);
	if (sig_hits != 10 || cur.sa_handler != SIG_DFL) {
		fprintf(stderr, "reset_to_default: hits %lu\n", sig_hits);
		return 1;
	}
	return 0;
}

/* signal(SIGTRAP, SIG_DFL), then its own raise(SIGTRAP): killed, as without probekit. */
static int default_raise(void)
{
	struct pk_probe *ip = sig_probe((void *)sig_victim_int3, PK_PROBE_F_INT3);

	if (!ip || pk_probe_register(&ip, 1))
		return 2;
	signal(SIGTRAP, SIG_DFL);
	sig_victim_int3(1);
	raise(SIGTRAP);
	return 0;
}

int main(void)
{
	int st;

	sig_expect_ok(sig_in_child(own_handler),
		      "signal(SIGTRAP, h), raise and int3 probe hits");
	sig_expect_ok(sig_in_child(reset_to_default),
		      "signal(SIGTRAP, SIG_DFL), then int3 probe hits");
	st = sig_in_child(default_raise);
	ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGTRAP,
		    "SIG_DFL and the program's own raise(SIGTRAP): killed by SIGTRAP");
	return t_exit();
}
