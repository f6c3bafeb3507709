// SPDX-License-Identifier: MIT
/* list_ctor_lib.c - liblistctor.so for cli_list_kinds.sh: a constructor that creates the file $LIST_CTOR_FILE (so a run that reached it is seen), and functions to list. */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

long lc_add(long a, long b);
long lc_loop(long n);

__attribute__((constructor)) static void lc_ctor(void)
{
	const char *f = getenv("LIST_CTOR_FILE");

	if (f)
		close(open(f, O_WRONLY | O_CREAT, 0600));
}

long lc_add(long a, long b)
{
	return a + b;
}

long lc_loop(long n)
{
	long s = 0;

	for (long i = 0; i < n; i++)
		s += lc_add(i, s & 7);
	return s;
}
