// SPDX-License-Identifier: MIT
/* glob_main.c - cli_glob.sh's program: glob_one once, glob_two twice, glob_three 3 times, glob_four 4 times, glob_never never, other_fn 7 times (times ARGV[1]). */
#include <stdint.h>
#include <stdlib.h>

uint64_t glob_one(uint64_t x);
uint64_t glob_two(uint64_t x);
uint64_t glob_three(uint64_t x);
uint64_t glob_four(uint64_t x);
uint64_t glob_never(uint64_t x);
uint64_t other_fn(uint64_t x);

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 1;
	uint64_t v = 0;

	for (int r = 0; r < rounds; r++) {
		v += glob_one(v);
		for (int i = 0; i < 2; i++)
			v += glob_two(v);
		for (int i = 0; i < 3; i++)
			v += glob_three(v);
		for (int i = 0; i < 4; i++)
			v += glob_four(v);
		for (int i = 0; i < 7; i++)
			v += other_fn(v);
	}
	if (argc > 2)
		v += glob_never(v);
	return (int)(v & 0) + (argc > 3 ? 3 : 0);
}
