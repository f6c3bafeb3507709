// SPDX-License-Identifier: MIT
/* agent_late_v.c - liblate_v1.so and liblate_v2.so, for agent_late_glob.sh: the same f() at another offset (v2 has g() before it), so a cache answer of one is wrong for the other. */

volatile int late_v_calls;

#ifdef LATE_V2
/* v2 only: code before f(), which moves it. */
__attribute__((noinline, visibility("default"))) int g(int n)
{
	int s = 0;

	for (int i = 0; i < n; i++)
		s += late_v_calls * i + (i ^ n) - (s >> 3);
	for (int i = 0; i < n; i++)
		s ^= (s << 5) + i * 31 + late_v_calls;
	return s;
}
#endif

/* The probed function: each call counted; big enough for a jump probe. */
__attribute__((noinline, visibility("default"))) void f(void)
{
	for (int i = 0; i < 3; i++)
		late_v_calls += i;
}

/* Three calls before dlopen() returns. */
__attribute__((constructor)) static void late_v_init(void)
{
	f();
	f();
	f();
}
