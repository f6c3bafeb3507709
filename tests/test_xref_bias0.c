// SPDX-License-Identifier: MIT
/* test_xref_bias0.c - two loaded objects with one load bias (this non-PIE program and libxreffix.so, linked at a fixed address: both 0) keep their own branch indexes: after 40 probes on the program's e_two, a probe on the library's c_two, where c_one's rel8 jmp lands at c_two + 2, must be int3 (XREF), and c_one must still return right (review of arm12: the index cache, keyed on bias and dlpi_adds, gave the program's index: a jump probe, and c_one died of SIGSEGV). */
#include <link.h>
#include <stdint.h>

#include "harness.h"
#include "probekit.h"

__asm__(".text\n.p2align 4\n.globl e_two\n.type e_two,@function\ne_two:\n"
	"	mov %edi,%eax\n	add $1,%eax\n	add $2,%eax\n	ret\n.size e_two, .-e_two\n");
extern int e_two(int);
extern int c_two(int), c_one(int);

static int hits;

static void pre(struct pk_probe *p, struct pk_regs *r, void *c)
{
	(void)p, (void)r, (void)c;
	hits++;
}

static int bias0(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	*(int *)arg += info->dlpi_addr == 0;
	return 0;
}

int main(void)
{
	struct pk_probe_info in = { .sz = sizeof(in) };
	struct pk_probe *p = NULL;
	int n0 = 0, err;

	dl_iterate_phdr(bias0, &n0);
	if (n0 < 2)
		SKIP("the program and libxreffix.so do not share load bias 0 here");
	/* Enough checks in the program's own object for its index's shortcuts. */
	for (int i = 0; i < 40; i++) {
		PK_OPTS(pk_probe_opts, o, .addr = (void *)e_two, .pre = pre);

		p = NULL;
		if (!pk_probe_create(&o, &p))
			pk_probe_destroy(p);
	}
	{
		PK_OPTS(pk_probe_opts, o, .addr = (void *)c_two, .pre = pre);

		err = pk_probe_create(&o, &p);
		ASSERT_OK(err, "probe on the library's c_two");
	}
	ASSERT_OK(pk_probe_get_info(p, &in), "its info");
	ASSERT_EQ(in.kind, PK_PROBE_INT3, "c_two: int3, a rel8 jmp lands in its first bytes");
	ASSERT_EQ(in.reason, PK_PROBE_WHY_XREF, "... because of that jmp (XREF)");
	ASSERT_OK(pk_probe_register(&p, 1), "registered");
	ASSERT_EQ(c_one(1), 4, "c_one(1), whose jmp lands at c_two + 2, returns right");
	ASSERT_EQ(c_two(1), 4, "c_two(1) too");
	ASSERT_EQ(hits, 1, "the probe ran once (c_one jumped past its first byte)");
	ASSERT_OK(pk_probe_unregister(&p, 1), "unregistered");
	pk_probe_destroy(p);
	return t_exit();
}
