// SPDX-License-Identifier: MIT
/* libsymrepl.c - test_sym_replaced's library, built twice: SYMREPL_B puts other code before sr_f, so its address differs between the two builds. */
#define API __attribute__((visibility("default"), noinline))

#ifdef SYMREPL_B
API int sr_pad(int x)
{
	volatile int a[64];

	for (int i = 0; i < 64; i++)
		a[i] = x * i;
	return a[3];
}
#endif

API int sr_f(int x)
{
	volatile int v = x;

	return v + 1;
}
