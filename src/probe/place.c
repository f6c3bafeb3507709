// SPDX-License-Identifier: MIT
/* place.c - placing a probe: its point in the function, and whether a jump probe is safe there or an int3 probe it is. */

/*
 * From the function's original bytes (probe.c undoes the probes armed in
 * it first): the probe point is the function's entry (after an endbr64,
 * which must stay first under IBT) or an instruction boundary @offset
 * bytes in, found by decoding from the start. A jump probe displaces the
 * whole instructions covering a jmp there and is safe only if they lie
 * inside the function, hold no call, int3 or static key site, no branch
 * of the function or (xref.h) direct branch of the rest of its object
 * lands inside them after the first byte, no indirect jmp of the function
 * could, and they relocate into a slot. Otherwise an int3 probe, whose one
 * instruction must run (or be emulated) in a slot. Nothing here changes
 * anything.
 */

#include <errno.h>
#include <inttypes.h>

#include "arch/arch.h"
#include "internal.h"
#include "probe/probe.h"
#include "probe/xref.h"

static int key_site_in(const struct pk_func *fn, uintptr_t at, size_t len)
{
	for (size_t i = 0; fn->jump_table && i + sizeof(struct pk_jump_entry) <=
			   fn->jump_table_size; i += sizeof(struct pk_jump_entry)) {
		const struct pk_jump_entry *je =
			(const struct pk_jump_entry *)(fn->jump_table + i);

		if (je->code < at + len && at < je->code + PK_ARCH_JMP_LEN)
			return 1;
	}
	return 0;
}

/*
 * Whether a jump probe is safe at p->addr; @code holds the function's
 * original bytes. -ENOTSUP (logged at debug level) means "an int3 probe".
 */
static int place_jump(struct pk_probe_place *p, int post,
		      const struct pk_func *fn, const uint8_t *code,
		      const char *what)
{
	uintptr_t end = fn->start + fn->size;
	size_t off, cap = PK_TRAMP_COPY_MAX - (post ? PK_TRAMP_CALL_LEN : 0);
	uint8_t copy[64];
	uintptr_t hit;
	int err;

	/* The displaced instructions: whole ones covering a jmp. */
	for (off = 0; off < PK_ARCH_JMP_LEN;) {
		struct pk_insn in;
		uintptr_t at = p->addr + off;

		if (at >= end || pk_arch_decode(code + (at - fn->start), end - at,
						at, &in)) {
			pk_dbg("probe: %s: the instructions from the probe point "
			       "end before %d bytes (function of %zu bytes): int3 "
			       "probe", what, PK_ARCH_JMP_LEN, fn->size);
			return -ENOTSUP;
		}
		if (key_site_in(fn, at, in.len)) {
			pk_dbg("probe: %s: a static key's branch site follows: "
			       "int3 probe", what);
			return -ENOTSUP;
		}
		/*
		 * A call would return into the slot, where no sweep can see
		 * the thread (its ip is in the callee); int3 cannot be moved.
		 * RIP-relative operands, jmp and jcc move (pk_arch_relocate).
		 */
		if ((in.flags & PK_INSN_F_CALL) || in.kind == PK_INSN_TRAP) {
			pk_dbg("probe: %s: displaced instruction at +%zu is a %s: "
			       "int3 probe", what, (size_t)(at - fn->start),
			       (in.flags & PK_INSN_F_CALL) ? "call" : "trap");
			return -ENOTSUP;
		}
		off += in.len;
	}
	p->len = (uint8_t)off;
	if (off > PK_TEXT_MAX)
		return -ENOTSUP;
	/* No branch of the function may land inside them after their first byte. */
	for (uintptr_t at = fn->start; at < end;) {
		struct pk_insn in;

		if (pk_arch_decode(code + (at - fn->start), end - at, at, &in)) {
			pk_dbg("probe: %s: cannot decode the function at +%zu, so "
			       "cannot prove no branch lands in the displaced "
			       "bytes: int3 probe", what, (size_t)(at - fn->start));
			return -ENOTSUP;
		}
		if (in.flags & PK_INSN_F_INDIRECT_JMP) {
			pk_dbg("probe: %s: an indirect jmp at +%zu (a jump table?) "
			       "could land anywhere: int3 probe", what,
			       (size_t)(at - fn->start));
			return -ENOTSUP;
		}
		if (in.target > p->addr && in.target < p->addr + p->len) {
			pk_dbg("probe: %s: the branch at +%zu lands inside the "
			       "displaced bytes: int3 probe", what,
			       (size_t)(at - fn->start));
			return -ENOTSUP;
		}
		at += in.len;
	}
	/*
	 * Nor any direct branch of the rest of the object: functions jump
	 * into each other (glibc's __mempcpy_sse2_unaligned to memcpy+3),
	 * and a stripped library's have no symbol to scan them by (xref.h).
	 */
	err = pk_xref_lands_in(p->addr, p->len, &hit);
	if (err) {
		if (err > 0)
			pk_dbg("probe: %s: a branch elsewhere in %s lands inside "
			       "the displaced bytes (at +%zu of %u): int3 probe",
			       what, fn->object, (size_t)(hit - p->addr), p->len);
		else
			pk_dbg("probe: %s: no index of the branches in %s (%d), "
			       "so cannot prove none lands in the displaced bytes: "
			       "int3 probe", what, fn->object, err);
		return -ENOTSUP;
	}
	/* Relocatable, and short enough for a slot (checked at a nearby address). */
	err = pk_arch_relocate(code + (p->addr - fn->start), p->len, p->addr,
			       copy, cap, p->addr + 4096, NULL);
	if (err < 0) {
		pk_dbg("probe: %s: displaced instructions cannot be relocated "
		       "(%d): int3 probe", what, err);
		return -ENOTSUP;
	}
	return 0;
}

/* An int3 probe: the probed instruction must run (or be emulated) in a slot. */
static int place_int3(struct pk_probe_place *p, int post,
		      const struct pk_func *fn, const uint8_t *code,
		      const char *what)
{
	size_t cap = PK_TRAMP_COPY_MAX - (post ? PK_TRAMP_CALL_LEN : 0);
	uint8_t copy[64];
	int ft, n;

	n = pk_arch_relocate_one(code + (p->addr - fn->start),
				 fn->start + fn->size - p->addr, p->addr, copy,
				 cap, p->addr + 4096, &ft);
	if (n < 0) {
		pk_err("probe: %s: the instruction at +%zu can be neither moved "
		       "nor emulated (%d)", what, (size_t)(p->addr - fn->start), n);
		return -ENOTSUP;
	}
	p->len = p->first_len;
	return 0;
}

int pk_probe_place(const struct pk_func *fn, const uint8_t *code,
		   size_t offset, int post, int force_int3, const char *what,
		   struct pk_probe_place *p)
{
	uintptr_t entry = fn->start + pk_arch_entry_skip(code, fn->size);
	struct pk_insn in0;
	int err;

	p->addr = entry;
	if (offset) {
		/* On an instruction boundary: decode from the function's start. */
		uintptr_t at = fn->start, to = fn->start + offset;

		while (at < to) {
			struct pk_insn in;

			if (pk_arch_decode(code + (at - fn->start),
					   fn->start + fn->size - at, at, &in)) {
				pk_err("probe: %s: cannot decode the function at "
				       "+%zu, before the offset %zu", what,
				       (size_t)(at - fn->start), offset);
				return -EINVAL;
			}
			at += in.len;
		}
		if (at != to) {
			pk_err("probe: %s: offset %zu is not an instruction "
			       "boundary (the instruction there ends at +%zu)",
			       what, offset, (size_t)(at - fn->start));
			return -EINVAL;
		}
		if (to > entry)
			p->addr = to;
	}
	/* Inside the function every register and flag may be live. */
	p->full = p->addr != entry;
	if (pk_arch_decode(code + (p->addr - fn->start),
			   fn->start + fn->size - p->addr, p->addr, &in0)) {
		pk_err("probe: %s: cannot decode the probed instruction", what);
		return -EINVAL;
	}
	p->first_len = in0.len;
	if (key_site_in(fn, p->addr, in0.len)) {
		pk_err("probe: %s: a static key's branch site is there", what);
		return -EINVAL;
	}
	if (in0.kind == PK_INSN_TRAP) {
		pk_err("probe: %s: there is an int3 there already", what);
		return -ENOTSUP;
	}
	if (post && (in0.flags & PK_INSN_F_BRANCH)) {
		pk_err("probe: %s: a post-handler needs an instruction that falls "
		       "through; the one at +%zu is a branch, call, ret or trap",
		       what, (size_t)(p->addr - fn->start));
		return -ENOTSUP;
	}
	err = force_int3 ? -ENOTSUP : place_jump(p, post, fn, code, what);
	if (!err) {
		p->kind = PK_PROBE_JUMP;
	} else if (err == -ENOTSUP) {
		err = place_int3(p, post, fn, code, what);
		if (!err)
			p->kind = PK_PROBE_INT3;
	}
	return err;
}
