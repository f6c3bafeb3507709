/* SPDX-License-Identifier: MIT */
/* key_sites.h - for key tests: check the bytes of a key's branch sites in a __pk_jump_table. */
#ifndef PK_TEST_KEY_SITES_H
#define PK_TEST_KEY_SITES_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "probekit.h"

static inline struct pk_key *t_entry_key(const struct pk_jump_entry *e)
{
	return *(struct pk_key *const *)(e->key & ~(uintptr_t)1);
}

static inline void t_encode_jmp(uint8_t out[5], uintptr_t from, uintptr_t to)
{
	int32_t rel = (int32_t)(int64_t)(to - (from + 5));

	out[0] = 0xe9;
	memcpy(out + 1, &rel, 4);
}

/*
 * Check every site of @k in [@start, @stop): in patched mode each must be a
 * NOP or a jmp to its target as the key's state says; in fallback mode each
 * must still be the compiled jmp to its check block. *@nsites receives the
 * number of sites of @k seen. Return: the number of sites that are wrong
 * (each printed).
 */
static inline int t_key_sites_bad(const struct pk_jump_entry *start,
				  const struct pk_jump_entry *stop,
				  const struct pk_key *k, bool patched,
				  int *nsites)
{
	static const uint8_t nop5[5] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };
	int bad = 0, n = 0;

	for (const struct pk_jump_entry *e = start; e < stop; e++) {
		uint8_t want[5];
		bool likely = e->key & 1;

		if (t_entry_key(e) != k)
			continue;
		n++;
		if (!patched)
			t_encode_jmp(want, e->code, e->check);
		else if (pk_key_enabled(k) != likely)
			t_encode_jmp(want, e->code, e->target);
		else
			memcpy(want, nop5, 5);
		if (memcmp((const void *)e->code, want, 5)) {
			const uint8_t *c = (const uint8_t *)e->code;

			fprintf(stderr,
				"site %#lx (%s, key %s, %s mode): %02x %02x %02x %02x %02x, want %02x %02x %02x %02x %02x\n",
				(unsigned long)e->code,
				likely ? "likely" : "unlikely",
				pk_key_enabled(k) ? "on" : "off",
				patched ? "patched" : "fallback", c[0], c[1],
				c[2], c[3], c[4], want[0], want[1], want[2],
				want[3], want[4]);
			bad++;
		}
	}
	*nsites = n;
	return bad;
}

#endif /* PK_TEST_KEY_SITES_H */
