// SPDX-License-Identifier: MIT
/* test_probe_ret_int3.c - a return probe on a function too short for a jump probe: its entry goes through an int3 probe. */

/*
 * short_fn is 4 bytes (lea; ret), and another function follows it at
 * once (no padding a jump could reach into, issue 12), so its entry
 * probe is an int3 probe whose trampoline slot the return probe diverts
 * from, like a jump probe's. An entry probe on it alongside says which
 * kind it got.
 */
#include <errno.h>

#include "harness.h"
#include "probekit.h"

__asm__(".text\n"
	".globl short_fn\n"
	".type short_fn, @function\n"
	"short_fn:\n"
	"\tlea (%rdi,%rsi), %eax\n"
	"\tret\n"
	".size short_fn, .-short_fn\n"
	".type short_fn_next, @function\n"
	"short_fn_next:\n"
	"\tret\n"
	".size short_fn_next, .-short_fn_next\n");
int short_fn(int a, int b);

static long entries, rets, wrong;

static int on_entry(struct pk_retprobe *rp, struct pk_regs *r, void *data,
		    void *ctx)
{
	(void)rp;
	(void)ctx;
	*(long *)data = (long)pk_regs_arg(r, 0) + (long)pk_regs_arg(r, 1);
	entries++;
	return 0;
}

static void on_ret(struct pk_retprobe *rp, struct pk_regs *r, void *data,
		   void *ctx)
{
	(void)rp;
	(void)ctx;
	rets++;
	if ((long)(int)pk_regs_ret(r) != *(long *)data)
		wrong++;
}

static void on_pre(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p;
	(void)r;
	(*(long *)ctx)++;
}

int main(void)
{
	struct pk_probe_info pi = { .sz = sizeof(pi) };
	struct pk_retprobe *rp;
	struct pk_probe *ep;
	long pre_hits = 0, bad = 0;
	PK_OPTS(pk_retprobe_opts, o, .addr = (void *)short_fn,
		.entry = on_entry, .ret = on_ret, .data_size = 16);
	PK_OPTS(pk_probe_opts, po, .addr = (void *)short_fn, .pre = on_pre,
		.ctx = &pre_hits);

	ASSERT_OK(pk_probe_create(&po, &ep), "entry probe");
	ASSERT_OK(pk_probe_get_info(ep, &pi), "info");
	ASSERT_EQ(pi.kind, PK_PROBE_INT3, "a 4-byte function gets an int3 probe");
	ASSERT_OK(pk_retprobe_create(&o, &rp), "return probe");
	ASSERT_OK(pk_retprobe_register(&rp, 1), "register the return probe");
	ASSERT_OK(pk_probe_register(&ep, 1), "and the entry probe");

	for (int i = 0; i < 10000; i++)
		if (short_fn(i, 5) != i + 5)
			bad++;
	ASSERT_EQ(bad, 0, "results");
	ASSERT_EQ(entries, 10000, "entry handler per call");
	ASSERT_EQ(rets, 10000, "return handler per call");
	ASSERT_EQ(wrong, 0, "return value and per-call data");
	ASSERT_EQ(pre_hits, 10000, "the entry probe alongside");

	ASSERT_OK(pk_retprobe_unregister(&rp, 1), "unregister");
	ASSERT_EQ(short_fn(1, 2), 3, "after");
	ASSERT_EQ(rets, 10000, "no return handler after unregister");
	ASSERT_EQ(pre_hits, 10001, "the entry probe still armed");
	ASSERT_OK(pk_probe_unregister(&ep, 1), "unregister the entry probe");
	pk_retprobe_destroy(rp);
	pk_probe_destroy(ep);
	return t_exit();
}
