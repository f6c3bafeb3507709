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

/*
 * Return probes (ret.c) hook the entry probes' trampolines, so that a
 * return-probed function can be called from ret.c's code (its ret is then
 * predicted) instead of having its return address replaced:
 *   pk_ret_divert_env()  the divert request's thread-local words, which
 *			  the chunks' code reads (src/arch/x86_64/tramp.h).
 *   pk_ret_busy_at()	  @ip is on the way from the divert code into a
 *			  slot (the sweep must wait). Async-signal-safe.
 * The slot layout both files rely on: the stub returns to the slot
 * PK_PROBE_RET_TO_COPY bytes before the copy of the displaced
 * instructions, and the slot stepped PK_PROBE_REDZONE bytes below the
 * function's stack pointer before calling the stub.
 */
#define PK_PROBE_RET_TO_COPY 14
#define PK_PROBE_REDZONE 128
struct pk_tramp_env;
PK_HIDDEN void pk_ret_divert_env(struct pk_tramp_env *env);
PK_HIDDEN int pk_ret_busy_at(uintptr_t ip);

#endif /* PK_PROBE_PROBE_H */
