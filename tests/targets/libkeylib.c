// SPDX-License-Identifier: MIT
/* libkeylib.c - a dlopen'ed library with branch sites on a key of the executable and on its own key. */
#include "probekit.h"

/* Defined (and exported, -rdynamic) by test_key_dlopen. */
extern struct pk_key keylib_host_key;

PK_KEY_FALSE(keylib_own_key);

__attribute__((visibility("default"))) int keylib_host_unlikely(void)
{
	return pk_branch_unlikely(&keylib_host_key) ? 1 : 0;
}

__attribute__((visibility("default"))) int keylib_host_likely(void)
{
	return pk_branch_likely(&keylib_host_key) ? 1 : 0;
}

__attribute__((visibility("default"))) int keylib_own_unlikely(void)
{
	return pk_branch_unlikely(&keylib_own_key) ? 1 : 0;
}

/* The library's own table, for checking site bytes. */
__attribute__((visibility("default"))) void
keylib_table(struct pk_jump_entry **start, struct pk_jump_entry **stop)
{
	*start = &__start___pk_jump_table;
	*stop = &__stop___pk_jump_table;
}
