// SPDX-License-Identifier: MIT
/* libunloadtarget.c - a dlopen'ed library whose functions test_probe_unload probes, unloads and loads again. */

__attribute__((visibility("default"), noinline)) long ut_fn(long a)
{
	volatile long x = a;

	return x * 5 + 1;
}

__attribute__((visibility("default"), noinline)) long ut_ret(long a)
{
	volatile long x = a;

	return x + 100;
}

__attribute__((visibility("default"), noinline)) long ut_third(long a)
{
	volatile long x = a;

	return x - 1;
}
