// SPDX-License-Identifier: MIT
/* glob_target.c - libglobtarget.so, cli_glob.sh's library: glob_* functions a known number of calls each (glob_main.c), and one the glob must not match. */
#include <stdint.h>

/* Distinct bodies, so that no two are folded into one address. */
static volatile uint64_t sink;

#define PK_GLOB_FN(name, k)                                                   \
	__attribute__((noinline, visibility("default"))) uint64_t name(uint64_t x) \
	{                                                                     \
		sink += x * (k) + (k);                                        \
		return sink ^ (k);                                            \
	}

PK_GLOB_FN(glob_one, 11)
PK_GLOB_FN(glob_two, 13)
PK_GLOB_FN(glob_three, 17)
PK_GLOB_FN(glob_four, 19)
PK_GLOB_FN(glob_never, 23)
PK_GLOB_FN(other_fn, 29)
