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
 *   pk_ret_stub_tail()   the stub's last instructions at @b (<= @room
 *			  bytes, room for the divert code after them
 *			  included): ret into the slot, with ZF set when this
 *			  call is to be diverted. With less than 10 bytes, 4
 *			  bytes that clear ZF and ret, and no divert ever.
 *			  @cont_off: slot return -> the slot's copy of the
 *			  displaced instructions; @redzone: bytes the slot
 *			  steps over. Returns the bytes written.
 *   pk_ret_divert_code() the chunk's divert code (<= @room bytes), which
 *			  the slot's je reaches with the function's stack;
 *			  only where the stub left room for it.
 *   pk_ret_slot_divert() the slot's je (6 bytes at @b, running at @at).
 *   pk_ret_busy_at()	  @ip is on the way from the divert code into a
 *			  slot (the sweep must wait). Async-signal-safe.
 */
PK_HIDDEN size_t pk_ret_stub_tail(uint8_t *b, size_t room, unsigned int cont_off,
				  unsigned int redzone);
PK_HIDDEN void pk_ret_divert_code(uint8_t *b, size_t room);
PK_HIDDEN void pk_ret_slot_divert(uint8_t *b, uintptr_t at, uintptr_t divert);
PK_HIDDEN int pk_ret_busy_at(uintptr_t ip);

#endif /* PK_PROBE_PROBE_H */
