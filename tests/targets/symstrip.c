// SPDX-License-Identifier: MIT
/* symstrip.c - a program stripped after linking (symstrip.stripped): its functions have no symbol, only FDEs; cli-list.sh names them by offset. */
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) int ss_work(int x)
{
	volatile int v = x;

	for (int i = 0; i < 10; i++)
		v = v * 3 + i;
	return v;
}

__attribute__((noinline)) static int ss_helper(int x)
{
	volatile int v = x;

	return v - 1;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1;

	printf("%d\n", ss_helper(ss_work(n)));
	return 0;
}
