// SPDX-License-Identifier: MIT
/* place_eh.cc - a C++ landing pad right after a ret (g++ -O2): the unwinder jumps there from .gcc_except_table, which no branch names (test_place_reach.c). */
#include <stdexcept>

extern "C" __attribute__((noinline)) void peh_throw(int x)
{
	if (x)
		throw std::runtime_error("x");
}

/* try { throw or not; 1 } catch { 2 }: the catch's pad follows the ret. */
extern "C" __attribute__((noinline)) long peh_catch(int x)
{
	long r;

	try {
		peh_throw(x);
		r = 1;
	} catch (...) {
		r = 2;
	}
	return r;
}

extern "C" long peh_run(int k, int x)
{
	(void)k;
	return peh_catch(x & 1) + x;
}
