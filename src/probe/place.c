// SPDX-License-Identifier: MIT
/* place.c - placing a probe: its point in the function, and whether a jump probe is safe there or an int3 probe it is. */

/*
 * From the function's original bytes (probe.c undoes the probes armed in
 * it first): the probe point is the function's entry (after an endbr64,
 * which must stay first under IBT) or an instruction boundary @offset
 * bytes in, found by decoding from the start. A jump probe displaces the
 * whole instructions covering a jmp there and is safe only if they lie
 * inside the function (or its padding, below), hold no int3 or static key
 * site, no branch of the function or (xref.h) direct branch of the rest
 * of its object lands inside them after the first byte, no code pointer
 * its data holds names an address there (a relocation's target: any
 * indirect jmp could use it), no indirect jmp of the function can land
 * there (below), and they relocate into a slot. Otherwise an int3 probe,
 * whose one instruction must run (or be emulated) in a slot. Nothing here
 * changes anything.
 *
 * Indirect jmps (pk_arch_ijmp_scan() classifies each): a jump table's
 * entries are read where the object has them (int32 offsets or 64-bit
 * addresses) for as long as each names an address in the object's code:
 * a real table's entries all do, so the run covers the table whatever its
 * bound (reading on past it only refuses more); none may land inside the
 * displaced bytes after their first byte, nor a direct branch from
 * elsewhere into the table's dispatch sequence (it would bring another
 * index or table). A jmp through a code pointer loaded from memory (a tail
 * call) lands on a function's entry or on an address some code made: the
 * function must make none inside its displaced bytes (a lea or immediate
 * of it: a computed goto's label, &&label), and a word it reads whose
 * address is known must not hold one now; where the word's address is not
 * known or the word is writable, the function must make no address of its
 * own code at all (&&label + offset, stored and reloaded, lands anywhere). A jmp through a register whose
 * value is not traced to a load (a callback kept in a callee-saved
 * register, a pointer loaded in another block) likewise, where the
 * function makes no address of its own code at all and no table it loads
 * from (read as above) holds one inside the displaced bytes. Anything
 * else stays int3.
 *
 * A short function (the jmp's 5 bytes reach past its end): where its
 * last instruction never falls through (ret, jmp) and what follows is
 * padding (NOPs, int3s, no endbr64) where no function starts and no
 * branch lands, that padding is displaced too; it is never run, in place
 * or in the slot.
 *
 * A call among the displaced bytes: where it ends at or past the jmp's 5
 * bytes it is their last instruction, and reloc.c moves it as "push the
 * original return address; jmp callee": the callee returns into the
 * original code, never into the slot. Not under a shadow stack (the
 * callee's ret would find no matching entry there).
 *
 * Why the kind was chosen goes to p->reason (enum pk_probe_reason).
 */

#include <errno.h>
#include <inttypes.h>
#include <link.h>
#include <stdlib.h>

#include "arch/arch.h"
#include "internal.h"
#include "probe/probe.h"
#include "probe/rseq.h"
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

/* The loaded object holding an address: its code and where a table lies. */
struct obj_segs {
	uintptr_t addr;
	int found;
	unsigned int n;
	struct {
		uintptr_t lo, hi;
		int exec, write;
	} seg[16];
	uintptr_t relro_lo, relro_hi;	/* read-only after relocation */
};

static int find_segs(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct obj_segs *o = arg;
	int in = 0;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t s = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && o->addr >= s &&
		    o->addr < s + ph->p_memsz)
			in = 1;
	}
	if (!in)
		return 0;
	o->found = 1;
	for (int i = 0; i < info->dlpi_phnum && o->n < 16; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_R))
			continue;
		o->seg[o->n].lo = info->dlpi_addr + ph->p_vaddr;
		o->seg[o->n].hi = o->seg[o->n].lo + ph->p_memsz;
		o->seg[o->n].exec = !!(ph->p_flags & PF_X);
		o->seg[o->n].write = !!(ph->p_flags & PF_W);
		o->n++;
	}
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_GNU_RELRO) {
			o->relro_lo = info->dlpi_addr + ph->p_vaddr;
			o->relro_hi = o->relro_lo + ph->p_memsz;
		}
	}
	return 1;
}

static int in_code(const struct obj_segs *o, uint64_t a)
{
	for (unsigned int i = 0; i < o->n; i++)
		if (o->seg[i].exec && a >= o->seg[i].lo && a < o->seg[i].hi)
			return 1;
	return 0;
}

/* How many bytes from @a on are in one readable segment. */
static size_t readable(const struct obj_segs *o, uint64_t a)
{
	for (unsigned int i = 0; i < o->n; i++)
		if (a >= o->seg[i].lo && a < o->seg[i].hi)
			return o->seg[i].hi - a;
	return 0;
}

/*
 * Whether the 8 bytes at @a may change at run time: in a writable segment
 * of the object (not its RELRO part), or not in the object at all.
 */
static int writable(const struct obj_segs *o, uint64_t a)
{
	if (a >= o->relro_lo && a + 8 <= o->relro_hi)
		return 0;
	for (unsigned int i = 0; i < o->n; i++)
		if (a >= o->seg[i].lo && a + 8 <= o->seg[i].hi)
			return o->seg[i].write;
	return 1;
}

size_t pk_probe_tail(const struct pk_func *fn)
{
	struct obj_segs o = { .addr = fn->start };
	uintptr_t end = fn->start + fn->size;

	dl_iterate_phdr(find_segs, &o);
	for (unsigned int i = 0; i < o.n; i++)
		if (o.seg[i].exec && end >= o.seg[i].lo && end < o.seg[i].hi)
			return o.seg[i].hi - end < PK_TEXT_MAX ?
			       o.seg[i].hi - end : PK_TEXT_MAX;
	return 0;
}

/*
 * The padding after @fn, displaced too where its last instruction (ending
 * at its end, @off bytes from the probe point) never falls through: NOPs
 * and int3s up to the jmp's 5 bytes, none the start of a function (a
 * symbol, an FDE) nor, as place_jump() checks next, a branch target. Its
 * bytes are never run, so the slot's copy of them is never run either.
 * Return: the displaced bytes with it, or -ENOTSUP.
 */
static int padding(const struct pk_probe_place *p, const struct pk_func *fn,
		   const uint8_t *code, size_t avail, size_t off, int fall,
		   const char *what)
{
	uintptr_t end = fn->start + fn->size, hit;
	int err;

	if (p->addr + off != end || fall) {
		pk_dbg("probe: %s: the function ends %zu bytes after the probe "
		       "point, and may run on past its end: int3 probe", what,
		       off);
		return -ENOTSUP;
	}
	while (off < PK_ARCH_JMP_LEN) {
		uintptr_t at = p->addr + off;
		struct pk_insn in;

		/* An endbr64 (a NOP too) is the next function's landing pad. */
		if (at - fn->start >= avail ||
		    pk_arch_decode(code + (at - fn->start),
				   avail - (at - fn->start), at, &in) ||
		    (in.kind != PK_INSN_NOP && in.kind != PK_INSN_TRAP) ||
		    pk_arch_entry_skip(code + (at - fn->start),
				       avail - (at - fn->start)) ||
		    off + in.len > PK_TEXT_MAX) {
			pk_dbg("probe: %s: no padding after the function's %zu "
			       "bytes from the probe point: int3 probe", what,
			       (size_t)(end - p->addr));
			return -ENOTSUP;
		}
		off += in.len;
	}
	err = pk_xref_start_in(end, p->addr + off - end, &hit);
	if (err) {
		pk_dbg("probe: %s: what follows the function may be another's "
		       "(%d): int3 probe", what, err);
		return -ENOTSUP;
	}
	return (int)off;
}

#define TABLE_MAX 65536		/* entries read, at most */

/*
 * A jump table's entries from its first on, as long as each names code of
 * the object: 1 if one lands in (@lo, @hi), 0 if none, -ENOTSUP (not one
 * entry names code: not a table; or longer than TABLE_MAX).
 */
static int table_lands_in(const struct obj_segs *o, const struct pk_ijmp *j,
			  uint64_t lo, uint64_t hi, size_t *entries)
{
	size_t esz = j->cls == PK_IJMP_TABLE_REL ? 4 : 8, room, n;

	room = readable(o, j->table) / esz;
	for (n = 0; n < room && n < TABLE_MAX; n++) {
		uint64_t t;

		if (esz == 4) {
			int32_t e;

			pk_arch_copy_unchecked(&e, (const void *)(j->table + 4 * n),
					       4);
			t = j->base + (uint64_t)(int64_t)e;
		} else {
			pk_arch_copy_unchecked(&t, (const void *)(j->table + 8 * n),
					       8);
		}
		if (!in_code(o, t))
			break;
		if (t > lo && t < hi) {
			*entries = n;
			return 1;
		}
	}
	*entries = n;
	return n && n < TABLE_MAX ? 0 : -ENOTSUP;
}

#define IJMP_MAX 1024	/* indirect jmps and table loads in a function */

/*
 * Whether @j (of @fn) can land in the displaced bytes after their first
 * byte; @reg: the function has a jmp through an untraced register, so its
 * table loads count. 0, or -ENOTSUP.
 */
static int ijmp_safe(const struct pk_probe_place *p, const struct obj_segs *o,
		     const struct pk_ijmp *j, int reg, uint64_t own,
		     const struct pk_func *fn, const char *what)
{
	uint64_t lo = p->addr, hi = p->addr + p->len, w;
	size_t at = (size_t)(j->at - fn->start), entries = 0;
	uintptr_t hit;
	int err;

	switch (j->cls) {
	case PK_IJMP_REG:
		return 0;
	case PK_IJMP_POINTER:
		/*
		 * A word on the stack, in a struct, in writable data: it holds
		 * whatever the program stored there, and where the function
		 * makes an address of its own code (a computed goto's &&label
		 * plus an offset, stored and loaded again, as gcc -O0 and a
		 * volatile do), that address can be anywhere in it.
		 */
		if (own && (!j->table || readable(o, j->table) < 8 ||
			    writable(o, j->table))) {
			pk_dbg("probe: %s: the jmp at +%zu reads its target from "
			       "memory that may change, and the instruction at "
			       "+%zu makes an address of the function's own "
			       "code: int3 probe", what, at,
			       (size_t)(own - fn->start));
			return -ENOTSUP;
		}
		if (!j->table || readable(o, j->table) < 8)
			return 0;	/* a struct's, another object's word */
		pk_arch_copy_unchecked(&w, (const void *)j->table, 8);
		if (w > lo && w < hi) {
			pk_dbg("probe: %s: the jmp at +%zu reads an address "
			       "inside the displaced bytes: int3 probe", what, at);
			return -ENOTSUP;
		}
		return 0;
	case PK_IJMP_LOAD_REL:
	case PK_IJMP_LOAD_ABS:
		if (!reg)
			return 0;	/* the jmps are traced: not a jmp's table */
		/* Not a table of code (no entry names code): data. */
		if (table_lands_in(o, j, lo, hi, &entries) > 0) {
			pk_dbg("probe: %s: the table the load at +%zu reads holds "
			       "an address inside the displaced bytes: int3 probe",
			       what, at);
			return -ENOTSUP;
		}
		return 0;
	case PK_IJMP_LOAD_UNKNOWN:
		if (!reg)
			return 0;
		pk_dbg("probe: %s: a jmp through a register, and a table load "
		       "at +%zu from an unknown table: int3 probe", what, at);
		return -ENOTSUP;
	case PK_IJMP_TABLE_REL:
	case PK_IJMP_TABLE_ABS:
		err = table_lands_in(o, j, lo, hi, &entries);
		if (err) {
			pk_dbg("probe: %s: the jump table of the jmp at +%zu %s: "
			       "int3 probe", what, at,
			       err > 0 ? "lands inside the displaced bytes"
				       : "cannot be read as one");
			return -ENOTSUP;
		}
		/* No way into its dispatch but through the load. */
		err = pk_xref_lands_in(j->seq, j->at - j->seq + 1, &hit);
		if (err) {
			pk_dbg("probe: %s: a branch may land inside the dispatch "
			       "of the jump table at +%zu (%d): int3 probe", what,
			       at, err);
			return -ENOTSUP;
		}
		pk_dbg("probe: %s: the jump table at +%zu: %zu entries read, "
		       "none inside the displaced bytes", what, at, entries);
		return 0;
	default:
		pk_dbg("probe: %s: cannot tell where the indirect jmp at +%zu "
		       "goes: int3 probe", what, at);
		return -ENOTSUP;
	}
}

/*
 * Whether no indirect jmp of @fn can land in the displaced bytes after
 * their first byte (the header comment): 0, or -ENOTSUP (p->reason set).
 */
static int ijmps_safe(struct pk_probe_place *p, const struct pk_func *fn,
		      const uint8_t *code, const char *what)
{
	uint64_t lo = p->addr, hi = p->addr + p->len, made, own;
	struct obj_segs o = { .addr = fn->start };
	struct pk_ijmp *js;
	int n, err = -ENOTSUP, reg = 0;

	p->reason = PK_PROBE_WHY_IJMP;
	js = malloc(IJMP_MAX * sizeof(*js));
	if (!js)
		return -ENOTSUP;
	n = pk_arch_ijmp_scan(code, fn->size, fn->start, lo, hi, js, IJMP_MAX,
			      &made, &own);
	if (n < 0 || n > IJMP_MAX) {
		pk_dbg("probe: %s: its indirect jmps cannot be classified (%d): "
		       "int3 probe", what, n);
		goto out;
	}
	if (made) {
		pk_dbg("probe: %s: the instruction at +%zu makes an address "
		       "inside the displaced bytes (a computed goto?): int3 "
		       "probe", what, (size_t)(made - fn->start));
		p->reason = PK_PROBE_WHY_IJMP_MADE;
		goto out;
	}
	dl_iterate_phdr(find_segs, &o);
	if (!o.found)
		goto out;
	/*
	 * A jmp through a register not traced to a load: its value came
	 * from elsewhere in the function (or its caller). Where the function
	 * makes no address of its own code, only a table it reads could
	 * give one: every table load is read as one.
	 */
	for (int i = 0; i < n; i++)
		reg |= js[i].cls == PK_IJMP_REG;
	if (reg && own) {
		pk_dbg("probe: %s: a jmp through a register, and the instruction "
		       "at +%zu makes an address of the function's own code: "
		       "int3 probe", what, (size_t)(own - fn->start));
		goto out;
	}
	err = 0;
	for (int i = 0; i < n && !err; i++)
		err = ijmp_safe(p, &o, &js[i], reg, own, fn, what);
out:
	free(js);
	return err;
}

/*
 * Whether a jump probe is safe at p->addr; @code holds the function's
 * original bytes. -ENOTSUP (logged at debug level) means "an int3 probe".
 */
static int place_jump(struct pk_probe_place *p, int post,
		      const struct pk_func *fn, const uint8_t *code,
		      size_t avail, const char *what)
{
	uintptr_t end = fn->start + fn->size;
	size_t off, cap = PK_TRAMP_COPY_MAX - (post ? PK_TRAMP_CALL_LEN : 0);
	uint8_t copy[64];
	uintptr_t hit;
	int err, ijmp = 0, fall = 1, tactic = PK_PROBE_WHY_PLAIN;

	/* The displaced instructions: whole ones covering a jmp. */
	for (off = 0; off < PK_ARCH_JMP_LEN;) {
		struct pk_insn in;
		uintptr_t at = p->addr + off;

		if (at >= end) {
			/* A short function: its padding too, if it has one. */
			int n = padding(p, fn, code, avail, off, fall, what);

			if (n < 0) {
				p->reason = PK_PROBE_WHY_SHORT;
				return -ENOTSUP;
			}
			off = (size_t)n;
			tactic = PK_PROBE_WHY_PADDING;
			break;
		}
		if (pk_arch_decode(code + (at - fn->start), end - at, at, &in)) {
			pk_dbg("probe: %s: the instruction at +%zu does not decode "
			       "within the function: int3 probe", what,
			       (size_t)(at - fn->start));
			p->reason = PK_PROBE_WHY_UNDECODABLE;
			return -ENOTSUP;
		}
		fall = !(in.flags & PK_INSN_F_NOFALL);
		if (key_site_in(fn, at, in.len)) {
			pk_dbg("probe: %s: a static key's branch site follows: "
			       "int3 probe", what);
			p->reason = PK_PROBE_WHY_KEY_SITE;
			return -ENOTSUP;
		}
		if (in.kind == PK_INSN_TRAP) {
			pk_dbg("probe: %s: displaced instruction at +%zu is a "
			       "trap: int3 probe", what, (size_t)(at - fn->start));
			p->reason = PK_PROBE_WHY_TRAP;
			return -ENOTSUP;
		}
		/*
		 * A call returning into the slot could not be told from a
		 * thread running it; moved as push + jmp it returns to the
		 * original code after it, which must be past the displaced
		 * bytes: the call is the last of them. RIP-relative operands,
		 * jmp and jcc move (pk_arch_relocate).
		 */
		if (in.flags & PK_INSN_F_CALL) {
			if (off + in.len < PK_ARCH_JMP_LEN) {
				pk_dbg("probe: %s: the call at +%zu would return "
				       "inside the displaced bytes: int3 probe",
				       what, (size_t)(at - fn->start));
				p->reason = PK_PROBE_WHY_CALL;
				return -ENOTSUP;
			}
			if (pk_arch_shstk_active()) {
				pk_dbg("probe: %s: a call among the displaced "
				       "bytes, and a shadow stack is active (the "
				       "callee's ret would not match): int3 probe",
				       what);
				p->reason = PK_PROBE_WHY_CALL;
				return -ENOTSUP;
			}
			tactic = PK_PROBE_WHY_CALL_MOVED;
		}
		off += in.len;
	}
	p->len = (uint8_t)off;
	if (off > PK_TEXT_MAX) {
		p->reason = PK_PROBE_WHY_RELOC;
		return -ENOTSUP;
	}
	/*
	 * Run in the trampoline, a critical section's part aborts nothing
	 * (nor does the store before it protect it); the jmp must not cover
	 * an abort handler's signature or start.
	 */
	err = pk_rseq_cs_in(p->addr, off, &hit);
	if (err < 0)
		return err;
	if (err) {
		pk_dbg("probe: %s: the displaced bytes hold part of the "
		       "restartable sequence at %#" PRIxPTR ": int3 probe", what,
		       hit);
		p->reason = PK_PROBE_WHY_RSEQ;
		return -ENOTSUP;
	}
	/* No branch of the function may land inside them after their first byte. */
	for (uintptr_t at = fn->start; at < end;) {
		struct pk_insn in;

		if (pk_arch_decode(code + (at - fn->start), end - at, at, &in)) {
			pk_dbg("probe: %s: cannot decode the function at +%zu, so "
			       "cannot prove no branch lands in the displaced "
			       "bytes: int3 probe", what, (size_t)(at - fn->start));
			p->reason = PK_PROBE_WHY_UNDECODABLE;
			return -ENOTSUP;
		}
		if (in.flags & PK_INSN_F_INDIRECT_JMP)
			ijmp = 1;
		if (in.target > p->addr && in.target < p->addr + p->len) {
			pk_dbg("probe: %s: the branch at +%zu lands inside the "
			       "displaced bytes: int3 probe", what,
			       (size_t)(at - fn->start));
			p->reason = PK_PROBE_WHY_BRANCH_IN;
			return -ENOTSUP;
		}
		at += in.len;
	}
	/* Nor any of its indirect jmps. */
	if (ijmp) {
		err = ijmps_safe(p, fn, code, what);
		if (err)
			return err;
		if (tactic == PK_PROBE_WHY_PLAIN)
			tactic = PK_PROBE_WHY_IJMP_PROVEN;
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
		p->reason = err > 0 ? PK_PROBE_WHY_XREF : PK_PROBE_WHY_NO_XREF;
		return -ENOTSUP;
	}
	/* Nor any code pointer its data holds (an indirect jmp could use it). */
	err = pk_xref_data_in(p->addr, p->len, &hit);
	if (err) {
		pk_dbg("probe: %s: %s: int3 probe", what, err > 0 ?
		       "a pointer in the object's data names an address inside "
		       "the displaced bytes" : "no index of the object's data");
		p->reason = err > 0 ? PK_PROBE_WHY_XREF : PK_PROBE_WHY_NO_XREF;
		return -ENOTSUP;
	}
	/* Relocatable, and short enough for a slot (checked at a nearby address). */
	err = pk_arch_relocate(code + (p->addr - fn->start), p->len, p->addr,
			       copy, cap, p->addr + 4096, NULL);
	if (err < 0) {
		pk_dbg("probe: %s: displaced instructions cannot be relocated "
		       "(%d): int3 probe", what, err);
		p->reason = PK_PROBE_WHY_RELOC;
		return -ENOTSUP;
	}
	p->reason = (uint8_t)tactic;
	return 0;
}

static int in_call(const uint8_t *code, size_t avail, uintptr_t at)
{
	struct pk_insn in;

	return !pk_arch_decode(code, avail, at, &in) &&
	       (in.flags & PK_INSN_F_CALL);
}

/* An int3 probe: the probed instruction must run (or be emulated) in a slot. */
static int place_int3(struct pk_probe_place *p, int post,
		      const struct pk_func *fn, const uint8_t *code,
		      const char *what)
{
	size_t cap = PK_TRAMP_COPY_MAX - (post ? PK_TRAMP_CALL_LEN : 0);
	uint8_t copy[64];
	int ft, n;

	/* A call emulated as push + jmp returns where no shadow stack has it. */
	if (in_call(code + (p->addr - fn->start),
		    fn->start + fn->size - p->addr, p->addr) &&
	    pk_arch_shstk_active()) {
		pk_err("probe: %s: the instruction at +%zu is a call, and a "
		       "shadow stack is active: it cannot run out of line",
		       what, (size_t)(p->addr - fn->start));
		return -ENOTSUP;
	}
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
		   size_t avail, size_t offset, int post, int force_int3, const char *what,
		   struct pk_probe_place *p)
{
	uintptr_t entry = fn->start + pk_arch_entry_skip(code, fn->size), cs;
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
	/*
	 * An int3 signalled in a critical section (at its first instruction
	 * or after) sends the thread to the section's abort handler, not to
	 * the probe; the instruction that ends at its start (the store of
	 * rseq_cs) run out of line is followed by a jump back from outside
	 * the section, where a preemption clears rseq_cs for the run (and
	 * the signature before an abort handler must stay as it is).
	 */
	err = pk_rseq_cs_in(p->addr, in0.len, &cs);
	if (err < 0)
		return err;
	if (err) {
		pk_err("probe: %s: in, or on the rseq_cs store or the abort "
		       "signature of, the restartable sequence (rseq(2)) that "
		       "starts at %#" PRIxPTR ": a probe there breaks it (the "
		       "kernel aborts it at the trap, or it runs unprotected); "
		       "refused", what, cs);
		return -EPERM;
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
	p->reason = PK_PROBE_WHY_FORCED;
	err = force_int3 ? -ENOTSUP : place_jump(p, post, fn, code, avail,
							what);
	if (!err) {
		p->kind = PK_PROBE_JUMP;
	} else if (err == -ENOTSUP) {
		err = place_int3(p, post, fn, code, what);
		if (!err)
			p->kind = PK_PROBE_INT3;
	}
	return err;
}
