// SPDX-License-Identifier: MIT
/* agent_late_dup.c - libdupa.so and libdupb.so (DUP_B) for agent_late_names.sh: both define dupfn(); libdupa.so needs libdupb.so, so one dlopen() loads both. */
#ifdef DUP_B
#define DUP_ADD 2
#else
#define DUP_ADD 1
#endif

long dupfn(long x);

long dupfn(long x)
{
	return x + DUP_ADD;
}
