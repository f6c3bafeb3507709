// SPDX-License-Identifier: MIT
/* test_text_rollback.c - a write failing mid-commit rolls the whole batch back. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "probekit.h"
#include "harness.h"
#include "codegen.h"

int main(int argc, char **argv)
{
	struct cg a, b;
	struct pk_batch *bt;
	uint8_t on[5], off[5];
	int ret;

	/*
	 * The library reads the hook when it first patches, which may be in a
	 * constructor: set it before the process starts.
	 */
	if (!getenv("PROBEKIT_TEST_FAIL_WRITE")) {
		struct pk_text_stats st = { .sz = sizeof(st) };
		char hook[64];

		/* Commits made before main (module registration) come first. */
		pk_text_stats(&st);
		snprintf(hook, sizeof(hook), "%llu:1",
			 (unsigned long long)st.commits);
		setenv("PROBEKIT_TEST_FAIL_WRITE", hook, 1);
		execv("/proc/self/exe", argv);
		SKIP("cannot re-execute with the fault hook set");
	}
	(void)argc;
	/* Two regions far apart: phase 1 is two writes; fail the second. */
	if (!ASSERT_OK(cg_create(&a, CG_JMP, 8, 32, 0), "cg a") ||
	    !ASSERT_OK(cg_create(&b, CG_JMP, 8, 32, 0), "cg b"))
		return t_exit();
	ASSERT_OK(pk_batch_create(&bt), "create");
	for (size_t i = 0; i < 8; i++) {
		cg_site_bytes(&a, i, 1, on);
		cg_site_bytes(&a, i, 0, off);
		pk_batch_add(bt, cg_fn(&a, i), on, 5, off, 0);
		pk_batch_add(bt, cg_fn(&b, i), on, 5, off, 0);
	}
	ret = pk_batch_commit(bt);
	pk_batch_free(bt);
	ASSERT_TRUE(ret < 0, "commit fails when a write fails");
	for (size_t i = 0; i < 8; i++) {
		cg_site_bytes(&a, i, 0, off);
		ASSERT_MEM_EQ(cg_fn(&a, i), off, 5, "region a rolled back");
		ASSERT_MEM_EQ(cg_fn(&b, i), off, 5, "region b untouched");
		ASSERT_EQ(cg_call(&a, i), cg_val(i, 0), "a runs the old code");
	}
	/* The injection fires once: the next commit works. */
	cg_site_bytes(&a, 0, 1, on);
	cg_site_bytes(&a, 0, 0, off);
	ASSERT_EQ(pk_text_poke(cg_fn(&a, 0), on, 5, off, 0), 1, "later commit");
	ASSERT_EQ(cg_call(&a, 0), cg_val(0, 1), "later commit took effect");
	return t_exit();
}
