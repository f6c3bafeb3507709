// SPDX-License-Identifier: MIT
/* symtarget_b.c - the second source file of libsymtarget.so: another static st_dup. */

static __attribute__((noinline)) int st_dup(int x)
{
	volatile int v = x;

	return v * 7;
}

__attribute__((visibility("default"), noinline)) int st_b_call(int x)
{
	return st_dup(x);
}

__attribute__((visibility("default"))) void *st_b_dup_addr(void)
{
	return (void *)st_dup;
}
