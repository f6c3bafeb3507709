// SPDX-License-Identifier: MIT
/* libunloadtargetb.c - another library, laid out as libunloadtarget.so but with other code at ut_fn: test_probe_unload loads it where that one was unloaded. */

__attribute__((visibility("default"), noinline)) long ut_fn(long a)
{
	volatile int y = (int)a;

	return y * 7 + 3;
}

__attribute__((visibility("default"), noinline)) long ut_ret(long a)
{
	volatile long x = a;

	return x + 200;
}
