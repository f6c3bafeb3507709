// SPDX-License-Identifier: MIT
/* late_target.c - liblatetarget.so, for agent.sh: a library loaded after start-up whose constructor calls f() three times. */

volatile int late_calls;

/* The probed function: each call counted; big enough for a jump probe. */
__attribute__((noinline, visibility("default"))) void f(void)
{
	for (int i = 0; i < 3; i++)
		late_calls += i;
}

/* f()'s callers before dlopen() returns: counted only if armed in time. */
__attribute__((constructor)) static void late_init(void)
{
	f();
	f();
	f();
}
