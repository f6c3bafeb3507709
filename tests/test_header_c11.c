// SPDX-License-Identifier: MIT
/* test_header_c11.c - probekit.h compiles first and alone as ISO C11, and its embeddable structs keep their sizes. */
#include <probekit.h> /* first: the header must bring everything it needs */

#include <stddef.h>

#include "harness.h"

/*
 * Built with -std=c11 -pedantic-errors (tests/extra.cmake): the header's GNU
 * constructs are all behind __extension__ / double-underscore keywords.
 *
 * Transparent structs are ABI: users define and embed them. Their sizes and
 * the offsets users may touch are pinned here; changing one needs a new
 * version node in src/probekit.map.
 */
_Static_assert(sizeof(struct pk_key) == 24, "struct pk_key size is ABI");
_Static_assert(offsetof(struct pk_key, enabled) == 0, "pk_key.enabled offset");
_Static_assert(sizeof(struct pk_jump_entry) == 32, "jump entry layout is shared with asm");
_Static_assert(sizeof(struct pk_notifier) == 40, "struct pk_notifier size is ABI");
_Static_assert(offsetof(struct pk_notifier, call) == 0, "pk_notifier.call offset");
_Static_assert(offsetof(struct pk_notifier, priority) == 8, "pk_notifier.priority offset");
_Static_assert(offsetof(struct pk_chain, key) == 0, "pk_chain.key offset");
_Static_assert(sizeof(struct pk_chain) == 24 + 8 + 8 + sizeof(pthread_mutex_t) + 16 + 8 + 32,
	       "struct pk_chain size is ABI");
_Static_assert(PK_STOP == (PK_OK | PK_STOP_MASK), "PK_STOP");
_Static_assert(PK_VERSION_MAJOR == 0 && PK_VERSION_MINOR == 1, "version macros");

static PK_KEY_FALSE(key_off);
static PK_KEY_TRUE(key_on);
static PK_CHAIN_ATOMIC_DEFINE(chain);

static int unlikely_off(void)
{
	return pk_branch_unlikely(&key_off);
}

static int likely_on(void)
{
	return pk_branch_likely(&key_on);
}

int main(void)
{
	char want[16];

	snprintf(want, sizeof(want), "%d.%d.%d", PK_VERSION_MAJOR,
		 PK_VERSION_MINOR, PK_VERSION_PATCH);
	ASSERT_TRUE(!strcmp(pk_version(), want), "pk_version() matches the header");
	ASSERT_FALSE(unlikely_off(), "pk_branch_unlikely on a false key");
	ASSERT_TRUE(likely_on(), "pk_branch_likely on a true key");
	ASSERT_EQ(pk_notify(&chain, 1, NULL), PK_DONE, "pk_notify on an empty chain");
	pk_debug_check(1 + 1 == 2);
	ASSERT_EQ(pk_notifier_to_errno(pk_notifier_from_errno(-22)), -22,
		  "errno round trip through a notifier result");
	return t_exit();
}
