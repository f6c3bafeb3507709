/* SPDX-License-Identifier: MIT */
/* probe.h - what the probe layer's files share: symbol lookups by address. */
#ifndef PK_PROBE_PROBE_H
#define PK_PROBE_PROBE_H

#include <limits.h>
#include <stdint.h>

#include "internal.h"

/* The function that holds an address, and its object's key-site table. */
struct pk_func {
	uintptr_t start;
	size_t size;
	int table;			/* PK_SYM_DYNSYM or PK_SYM_SYMTAB */
	uintptr_t jump_table;		/* __pk_jump_table in memory, or 0 */
	size_t jump_table_size;
	char object[PATH_MAX];
};

/*
 * pk_sym_func_at() - the function symbol (.dynsym or .symtab) covering @addr
 * Return: 0, or -ENOENT (no loaded object or no sized function there).
 */
PK_HIDDEN int pk_sym_func_at(uintptr_t addr, struct pk_func *out);

#endif /* PK_PROBE_PROBE_H */
