// SPDX-License-Identifier: MIT
/* list_ctor.c - cli_list_kinds.sh's program: linked with liblistctor.so (whose constructor leaves a file), it writes $LIST_MAIN_FILE from main() and calls lc_loop(N). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

long lc_loop(long n);

int main(int argc, char **argv)
{
	const char *f = getenv("LIST_MAIN_FILE");

	if (f)
		close(open(f, O_WRONLY | O_CREAT, 0600));
	printf("list_ctor: %ld\n", lc_loop(argc > 1 ? atol(argv[1]) : 3));
	return 0;
}
