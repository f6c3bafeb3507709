// SPDX-License-Identifier: MIT
/* minidebug_target.c - sym_minidebug.sh's program: md_static_fn(), a static function (in MiniDebugInfo once stripped), called through the exported md_exported() N times. */
#include <stdio.h>
#include <stdlib.h>
#ifndef MD_ADD
#define MD_ADD 3
#endif
__attribute__((noinline)) static long md_static_fn(long x)
{
	__asm__ volatile("" : "+r"(x));
	return x * 7 + MD_ADD;
}
long md_exported(long x);

__attribute__((noinline)) long md_exported(long x)
{
	return md_static_fn(x) + 1;
}
int main(int argc, char **argv);

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1;
	long s = 0;
	for (int i = 0; i < n; i++)
		s += md_exported(i);
	printf("md: %ld\n", s);
	return 0;
}
