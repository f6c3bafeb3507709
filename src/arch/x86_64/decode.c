// SPDX-License-Identifier: MIT
/* decode.c - x86-64 instruction decoding through Zydis, classified for patching. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ucontext.h>

#include <Zydis/Zydis.h>

#include "arch/arch.h"

int pk_arch_decode(const void *code, size_t avail, uint64_t runtime,
		   struct pk_insn *out)
{
	ZydisDecoderContext ctx;
	ZydisDecodedInstruction insn;
	ZydisDecoder dec;

	/* Operands are not decoded: the raw immediate is all a branch needs. */
	if (ZYAN_FAILED(ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64,
					 ZYDIS_STACK_WIDTH_64)))
		return -EINVAL;
	if (ZYAN_FAILED(ZydisDecoderDecodeInstruction(&dec, &ctx, code, avail,
						      &insn)))
		return -EINVAL;

	memset(out, 0, sizeof(*out));
	out->len = insn.length;
	if (insn.mnemonic == ZYDIS_MNEMONIC_CALL)
		out->flags |= PK_INSN_F_CALL;
	switch (insn.meta.category) {
	case ZYDIS_CATEGORY_COND_BR:
	case ZYDIS_CATEGORY_UNCOND_BR:
	case ZYDIS_CATEGORY_CALL:
	case ZYDIS_CATEGORY_RET:
	case ZYDIS_CATEGORY_INTERRUPT:
		out->flags |= PK_INSN_F_BRANCH;
		break;
	default:
		if (insn.mnemonic == ZYDIS_MNEMONIC_UD0 ||
		    insn.mnemonic == ZYDIS_MNEMONIC_UD1 ||
		    insn.mnemonic == ZYDIS_MNEMONIC_UD2 ||
		    insn.mnemonic == ZYDIS_MNEMONIC_HLT)
			out->flags |= PK_INSN_F_BRANCH;
		break;
	}
	if (insn.mnemonic == ZYDIS_MNEMONIC_JMP ||
	    insn.mnemonic == ZYDIS_MNEMONIC_RET ||
	    insn.mnemonic == ZYDIS_MNEMONIC_UD0 ||
	    insn.mnemonic == ZYDIS_MNEMONIC_UD1 ||
	    insn.mnemonic == ZYDIS_MNEMONIC_UD2 ||
	    insn.mnemonic == ZYDIS_MNEMONIC_HLT)
		out->flags |= PK_INSN_F_NOFALL;
	if (insn.meta.category == ZYDIS_CATEGORY_NOP ||
	    insn.meta.category == ZYDIS_CATEGORY_WIDENOP) {
		out->kind = PK_INSN_NOP;
	} else if (insn.mnemonic == ZYDIS_MNEMONIC_INT3) {
		out->kind = PK_INSN_TRAP;
	} else if ((insn.mnemonic == ZYDIS_MNEMONIC_JMP ||
		    insn.mnemonic == ZYDIS_MNEMONIC_CALL) &&
		   (insn.attributes & ZYDIS_ATTRIB_IS_RELATIVE) &&
		   insn.raw.imm[0].is_relative && insn.operand_width == 64) {
		/* jmp/call rel8/rel32: the target is relative to the next insn. */
		out->kind = insn.mnemonic == ZYDIS_MNEMONIC_JMP ? PK_INSN_JMP
								: PK_INSN_CALL;
		out->target = runtime + insn.length +
			      (uint64_t)insn.raw.imm[0].value.s;
	} else if (insn.attributes & ZYDIS_ATTRIB_IS_RELATIVE) {
		out->kind = PK_INSN_RELATIVE;
		if (insn.raw.imm[0].is_relative)
			out->target = runtime + insn.length +
				      (uint64_t)insn.raw.imm[0].value.s;
		else if (insn.mnemonic == ZYDIS_MNEMONIC_JMP)
			out->flags |= PK_INSN_F_INDIRECT_JMP; /* jmp [rip+x] */
	} else {
		out->kind = PK_INSN_PLAIN;
		if (insn.mnemonic == ZYDIS_MNEMONIC_JMP)
			out->flags |= PK_INSN_F_INDIRECT_JMP;
	}
	return 0;
}

size_t pk_arch_branch_targets(const void *code, size_t len, uint64_t runtime,
			      void (*emit)(uint64_t target, void *ctx),
			      void *ctx)
{
	ZydisDecoderContext zctx;
	ZydisDecodedInstruction insn;
	ZydisDecoder dec;
	const uint8_t *b = code;
	size_t at = 0, n = 0;

	/* Minimal mode: the length and the raw immediates, nothing else. */
	if (ZYAN_FAILED(ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64,
					 ZYDIS_STACK_WIDTH_64)) ||
	    ZYAN_FAILED(ZydisDecoderEnableMode(&dec, ZYDIS_DECODER_MODE_MINIMAL,
					       ZYAN_TRUE)))
		return 0;
	while (at < len) {
		if (ZYAN_FAILED(ZydisDecoderDecodeInstruction(&dec, &zctx, b + at,
							      len - at, &insn))) {
			at++;	/* data among the code: step over a byte */
			continue;
		}
		n++;
		/* Only branches have a relative immediate ([rip+x] is a disp). */
		if (insn.raw.imm[0].is_relative)
			emit(runtime + at + insn.length +
			     (uint64_t)insn.raw.imm[0].value.s, ctx);
		at += insn.length;
	}
	return n;
}

/* The ucontext gregs index of a 64-bit general register, or -1. */
static PK_NOPROBE_INLINE int greg_index(ZydisRegister r)
{
	static const struct {
		ZydisRegister zr;
		int greg;
	} map[] = {
		{ ZYDIS_REGISTER_RAX, REG_RAX }, { ZYDIS_REGISTER_RCX, REG_RCX },
		{ ZYDIS_REGISTER_RDX, REG_RDX }, { ZYDIS_REGISTER_RBX, REG_RBX },
		{ ZYDIS_REGISTER_RBP, REG_RBP }, { ZYDIS_REGISTER_RSI, REG_RSI },
		{ ZYDIS_REGISTER_RDI, REG_RDI }, { ZYDIS_REGISTER_R8, REG_R8 },
		{ ZYDIS_REGISTER_R9, REG_R9 }, { ZYDIS_REGISTER_R10, REG_R10 },
		{ ZYDIS_REGISTER_R11, REG_R11 }, { ZYDIS_REGISTER_R12, REG_R12 },
		{ ZYDIS_REGISTER_R13, REG_R13 }, { ZYDIS_REGISTER_R14, REG_R14 },
		{ ZYDIS_REGISTER_R15, REG_R15 },
	};

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (map[i].zr == r)
			return map[i].greg;
	return -1;	/* RSP (signal frames go there), RIP, none */
}

/* Like greg_index(), RSP included: where a register's value is read. */
static PK_NOPROBE_INLINE int greg_value_index(ZydisRegister r)
{
	return r == ZYDIS_REGISTER_RSP ? REG_RSP : greg_index(r);
}

static PK_NOPROBE_INLINE ZydisRegister reg64(ZydisRegister r)
{
	return r == ZYDIS_REGISTER_NONE ? r :
	       ZydisRegisterGetLargestEnclosing(ZYDIS_MACHINE_MODE_LONG_64, r);
}

PK_NOPROBE int pk_arch_access(const void *code, size_t avail,
			      const long long *gregs,
			      struct pk_access *out)
{
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	ZydisDecodedInstruction insn;
	const ZydisDecodedOperandMem *m = NULL;
	ZydisRegister moved = ZYDIS_REGISTER_NONE;
	ZydisDecoder dec;
	uint32_t size = 0;
	int stack = 0;
	uint64_t ea;

	if (ZYAN_FAILED(ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64,
					 ZYDIS_STACK_WIDTH_64)) ||
	    ZYAN_FAILED(ZydisDecoderDecodeFull(&dec, code, avail, &insn, ops)))
		return -ENOTSUP;
	if (insn.address_width != 64 ||
	    insn.meta.branch_type != ZYDIS_BRANCH_TYPE_NONE)
		return -ENOTSUP;
	/* Exactly one memory operand, hidden ones (stack, strings) included. */
	for (unsigned int i = 0; i < insn.operand_count; i++) {
		if (ops[i].type != ZYDIS_OPERAND_TYPE_MEMORY)
			continue;
		if (m || ops[i].mem.type != ZYDIS_MEMOP_TYPE_MEM)
			return -ENOTSUP;
		m = &ops[i].mem;
		size = ops[i].size / 8;
		stack = ops[i].visibility == ZYDIS_OPERAND_VISIBILITY_HIDDEN &&
			reg64(m->base) == ZYDIS_REGISTER_RSP;
	}
	/* A stack operation (push, pop) accesses past rsp, not at it. */
	if (!m || m->segment == ZYDIS_REGISTER_FS ||
	    m->segment == ZYDIS_REGISTER_GS || !size || stack)
		return -ENOTSUP;
	memset(out, 0, sizeof(*out));
	out->size = size;
	out->len = insn.length;
	if (m->base == ZYDIS_REGISTER_RIP) {
		out->how = PK_ACCESS_MOVE_RIP;
		out->addr = (uint64_t)gregs[REG_RIP] + insn.length +
			    (uint64_t)m->disp.value;
		return 0;
	}
	/* The range accessed, whether or not the access can be moved. */
	ea = (uint64_t)m->disp.value;
	if (m->base != ZYDIS_REGISTER_NONE) {
		int b = greg_value_index(reg64(m->base));

		if (b < 0)
			return -ENOTSUP;
		ea += (uint64_t)gregs[b];
	}
	if (m->index != ZYDIS_REGISTER_NONE) {
		int ix = greg_value_index(reg64(m->index));

		if (ix < 0)
			return -ENOTSUP;
		ea += (uint64_t)gregs[ix] * (m->scale ? m->scale : 1);
	}
	out->addr = ea;
	if (m->base != ZYDIS_REGISTER_NONE)
		moved = reg64(m->base);
	else if (m->index != ZYDIS_REGISTER_NONE && m->scale <= 1)
		moved = reg64(m->index);
	if (greg_index(moved) < 0 || reg64(m->index) == reg64(m->base))
		return 0;	/* how 0: cannot be moved */
	/* The moved register must play no other part in the instruction. */
	for (unsigned int i = 0; i < insn.operand_count; i++)
		if (ops[i].type == ZYDIS_OPERAND_TYPE_REGISTER &&
		    (reg64(ops[i].reg.value) == moved ||
		     ops[i].reg.value == ZYDIS_REGISTER_RIP))
			return 0;
	out->how = PK_ACCESS_MOVE_REG;
	out->reg = (int8_t)greg_index(moved);
	return 0;
}

/* ------------------------------------------------ indirect jmps (place.c) */

/*
 * What the classification keeps of each instruction of the function: its
 * place, whether it can end a straight line (a branch, call, ret), the
 * 64-bit general registers it writes (explicit or hidden operands), and
 * its first two explicit operands.
 */
struct cop {
	uint8_t type;		/* ZydisOperandType */
	uint8_t size;		/* bytes */
	uint16_t reg;		/* register: the 64-bit enclosing one */
	uint16_t base, index;	/* memory: 64-bit, or RIP, or NONE */
	uint8_t scale;
	int64_t disp;
	uint64_t imm;
};

struct cins {
	uint64_t at;
	uint16_t mnem;
	uint8_t len;
	uint8_t nops;
	uint8_t barrier;	/* may not fall through, or a call */
	uint8_t ijmp;
	uint32_t writes;	/* bit i: greg_bit() i written */
	struct cop op[2];
};

static int greg_bit(ZydisRegister r)
{
	r = reg64(r);
	if (r >= ZYDIS_REGISTER_RAX && r <= ZYDIS_REGISTER_R15)
		return (int)(r - ZYDIS_REGISTER_RAX);
	return -1;
}

static int cins_fill(const ZydisDecodedInstruction *in,
		     const ZydisDecodedOperand *ops, uint64_t at,
		     struct cins *c)
{
	memset(c, 0, sizeof(*c));
	c->at = at;
	c->mnem = (uint16_t)in->mnemonic;
	c->len = in->length;
	switch (in->meta.category) {
	case ZYDIS_CATEGORY_COND_BR:
	case ZYDIS_CATEGORY_UNCOND_BR:
	case ZYDIS_CATEGORY_CALL:
	case ZYDIS_CATEGORY_RET:
	case ZYDIS_CATEGORY_INTERRUPT:
	case ZYDIS_CATEGORY_SYSCALL:
		c->barrier = 1;
		break;
	default:
		break;
	}
	if (in->mnemonic == ZYDIS_MNEMONIC_UD2 || in->mnemonic == ZYDIS_MNEMONIC_HLT)
		c->barrier = 1;
	for (unsigned int i = 0; i < in->operand_count; i++) {
		const ZydisDecodedOperand *o = &ops[i];

		if (o->type == ZYDIS_OPERAND_TYPE_REGISTER &&
		    (o->actions & ZYDIS_OPERAND_ACTION_MASK_WRITE) &&
		    greg_bit(o->reg.value) >= 0)
			c->writes |= 1u << greg_bit(o->reg.value);
		if (o->visibility != ZYDIS_OPERAND_VISIBILITY_EXPLICIT ||
		    c->nops == 2)
			continue;
		struct cop *d = &c->op[c->nops++];

		d->type = (uint8_t)o->type;
		d->size = (uint8_t)(o->size / 8);
		if (o->type == ZYDIS_OPERAND_TYPE_REGISTER) {
			d->reg = (uint16_t)reg64(o->reg.value);
		} else if (o->type == ZYDIS_OPERAND_TYPE_MEMORY) {
			if (o->mem.type != ZYDIS_MEMOP_TYPE_MEM &&
			    o->mem.type != ZYDIS_MEMOP_TYPE_AGEN)
				d->type = ZYDIS_OPERAND_TYPE_UNUSED;
			if (o->mem.segment == ZYDIS_REGISTER_FS ||
			    o->mem.segment == ZYDIS_REGISTER_GS)
				d->type = ZYDIS_OPERAND_TYPE_UNUSED;
			d->base = (uint16_t)(o->mem.base == ZYDIS_REGISTER_RIP ?
				  o->mem.base : reg64(o->mem.base));
			d->index = (uint16_t)reg64(o->mem.index);
			d->scale = o->mem.scale;
			d->disp = o->mem.disp.has_displacement ?
				  o->mem.disp.value : 0;
			if (in->address_width != 64)
				d->type = ZYDIS_OPERAND_TYPE_UNUSED;
		} else if (o->type == ZYDIS_OPERAND_TYPE_IMMEDIATE) {
			d->imm = o->imm.value.u;
			if (o->imm.is_relative)
				d->type = ZYDIS_OPERAND_TYPE_UNUSED;
		}
	}
	c->ijmp = in->mnemonic == ZYDIS_MNEMONIC_JMP &&
		  !(in->attributes & ZYDIS_ATTRIB_IS_RELATIVE &&
		    ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE) &&
		  (ops[0].type == ZYDIS_OPERAND_TYPE_REGISTER ||
		   ops[0].type == ZYDIS_OPERAND_TYPE_MEMORY);
	return 0;
}

/* The address a rip-relative memory operand of @c names. */
static uint64_t rip_addr(const struct cins *c, const struct cop *o)
{
	return c->at + c->len + (uint64_t)o->disp;
}

struct fscan {
	const struct cins *ins;
	size_t n;
	const uint64_t *tgt;	/* the function's direct branch targets, sorted */
	size_t ntgt;
};

static int is_target(const struct fscan *f, uint64_t a)
{
	size_t lo = 0, hi = f->ntgt;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (f->tgt[mid] < a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < f->ntgt && f->tgt[lo] == a;
}

/*
 * The instruction before @j (an index) that last wrote @reg on the
 * straight line into @j: none of those in between is a barrier or a
 * branch target of the function. -1: not found so.
 */
static long def_before(const struct fscan *f, long j, uint16_t reg)
{
	int bit = greg_bit(reg);

	if (bit < 0)
		return -1;
	for (long k = j - 1; k >= 0; k--) {
		if (is_target(f, f->ins[k + 1].at) || f->ins[k].barrier)
			return -1;
		if (f->ins[k].writes & (1u << bit))
			return k;
	}
	return -1;
}

/*
 * @reg's value at @j if it is a constant address that lea [rip+x] made:
 * the straight-line def, or else every write of @reg in the function is
 * the same lea (the compiler reads no other value there: a value from a
 * call or from the caller, on entry or given back by a pop of a
 * callee-saved register, is not a lea of its table). 0: not known.
 */
static uint64_t lea_value(const struct fscan *f, long j, uint16_t reg)
{
	long d = def_before(f, j, reg);
	int bit = greg_bit(reg);
	uint64_t v = 0;

	if (bit < 0)
		return 0;
	if (d >= 0) {
		const struct cins *c = &f->ins[d];

		if (c->mnem == ZYDIS_MNEMONIC_LEA && c->nops == 2 &&
		    c->op[0].reg == reg && c->op[0].size == 8 &&
		    c->op[1].base == ZYDIS_REGISTER_RIP &&
		    c->op[1].index == ZYDIS_REGISTER_NONE)
			return rip_addr(c, &c->op[1]);
		return 0;
	}
	for (size_t k = 0; k < f->n; k++) {
		const struct cins *c = &f->ins[k];
		uint64_t a;

		/* A pop gives back the caller's value, as on entry. */
		if (!(c->writes & (1u << bit)) || c->mnem == ZYDIS_MNEMONIC_POP)
			continue;
		if (c->mnem != ZYDIS_MNEMONIC_LEA || c->op[0].reg != reg ||
		    c->op[0].size != 8 || c->op[1].base != ZYDIS_REGISTER_RIP ||
		    c->op[1].index != ZYDIS_REGISTER_NONE)
			return 0;
		a = rip_addr(c, &c->op[1]);
		if (v && v != a)
			return 0;
		v = a;
	}
	return v;
}

/*
 * movslq (%b,%i,4), %r: a relative jump table's entry, loaded (and, for
 * untraced jmps only, a 32-bit mov of the same form: unsigned entries).
 */
static int is_rel_load32(const struct cins *c)
{
	return c->mnem == ZYDIS_MNEMONIC_MOV && c->nops == 2 &&
	       c->op[0].type == ZYDIS_OPERAND_TYPE_REGISTER &&
	       c->op[0].size == 4 &&
	       c->op[1].type == ZYDIS_OPERAND_TYPE_MEMORY &&
	       c->op[1].size == 4 && c->op[1].scale == 4 &&
	       c->op[1].index != ZYDIS_REGISTER_NONE &&
	       c->op[1].base != ZYDIS_REGISTER_RIP;
}

static int is_rel_load(const struct cins *c)
{
	return c->mnem == ZYDIS_MNEMONIC_MOVSXD && c->nops == 2 &&
	       c->op[0].size == 8 &&
	       c->op[1].type == ZYDIS_OPERAND_TYPE_MEMORY &&
	       c->op[1].size == 4 && c->op[1].scale == 4 &&
	       c->op[1].index != ZYDIS_REGISTER_NONE &&
	       c->op[1].base != ZYDIS_REGISTER_RIP;
}

/* mov T(,%i,8), %r or mov (%b,%i,8), %r: a word of a table, loaded. */
static int is_abs_load(const struct cins *c)
{
	return c->mnem == ZYDIS_MNEMONIC_MOV && c->nops == 2 &&
	       c->op[0].type == ZYDIS_OPERAND_TYPE_REGISTER &&
	       c->op[0].size == 8 &&
	       c->op[1].type == ZYDIS_OPERAND_TYPE_MEMORY &&
	       c->op[1].size == 8 && c->op[1].scale == 8 &&
	       c->op[1].index != ZYDIS_REGISTER_NONE &&
	       c->op[1].base != ZYDIS_REGISTER_RIP;
}

/* A memory operand a jmp (or the load feeding it) reads its target from. */
static void classify_mem(const struct fscan *f, long j, const struct cop *m,
			 struct pk_ijmp *out)
{
	if (m->type != ZYDIS_OPERAND_TYPE_MEMORY || m->size != 8)
		return;
	if (m->index != ZYDIS_REGISTER_NONE && m->scale == 8) {
		uint64_t t = 0;

		if (m->base == ZYDIS_REGISTER_NONE)
			t = (uint64_t)m->disp;	/* non-PIC: jmp *T(,%idx,8) */
		else if (m->base != ZYDIS_REGISTER_RIP)
			t = lea_value(f, j, m->base);
		if (t) {
			out->cls = PK_IJMP_TABLE_ABS;
			out->seq = f->ins[j].at;
			out->table = m->base == ZYDIS_REGISTER_NONE ?
				     t : t + (uint64_t)m->disp;
			return;
		}
	}
	/* A code pointer from memory: a tail call (a struct's, a GOT's). */
	out->cls = PK_IJMP_POINTER;
	if (m->base == ZYDIS_REGISTER_RIP && m->index == ZYDIS_REGISTER_NONE)
		out->table = rip_addr(&f->ins[j], m);	/* the one word */
	else if (m->base != ZYDIS_REGISTER_NONE &&
		 m->index == ZYDIS_REGISTER_NONE) {
		uint64_t t = lea_value(f, j, m->base);	/* lea T; jmp *8(T) */

		if (t)
			out->table = t + (uint64_t)m->disp;
	}
}

static void classify(const struct fscan *f, long j, struct pk_ijmp *out)
{
	const struct cins *c = &f->ins[j];
	long d, e;

	memset(out, 0, sizeof(*out));
	out->at = c->at;
	out->cls = PK_IJMP_UNKNOWN;
	if (c->op[0].type == ZYDIS_OPERAND_TYPE_MEMORY) {
		if (c->op[0].base == ZYDIS_REGISTER_RIP &&
		    c->op[0].index == ZYDIS_REGISTER_NONE) {
			out->cls = PK_IJMP_POINTER;
			out->table = rip_addr(c, &c->op[0]);
			return;
		}
		classify_mem(f, j, &c->op[0], out);
		return;
	}
	if (c->op[0].type != ZYDIS_OPERAND_TYPE_REGISTER)
		return;
	/* Unless it is traced to a table or a load below: a value from elsewhere. */
	out->cls = PK_IJMP_REG;
	d = def_before(f, j, c->op[0].reg);
	if (d < 0)
		return;
	const struct cins *dc = &f->ins[d];

	if (dc->mnem == ZYDIS_MNEMONIC_MOV && dc->nops == 2 &&
	    dc->op[0].type == ZYDIS_OPERAND_TYPE_REGISTER &&
	    dc->op[0].size == 8 && dc->op[0].reg == c->op[0].reg) {
		/* mov mem, %reg; jmp *%reg */
		if (dc->op[1].type == ZYDIS_OPERAND_TYPE_MEMORY)
			classify_mem(f, d, &dc->op[1], out);
		else if (dc->op[1].type != ZYDIS_OPERAND_TYPE_REGISTER)
			out->cls = PK_IJMP_UNKNOWN;	/* an immediate */
		return;	/* mov %reg2, %reg: REG */
	}
	if (dc->mnem == ZYDIS_MNEMONIC_POP)
		return;	/* a value from the stack: REG */
	/*
	 * Arithmetic on the target: a table, or nothing known. lea
	 * T(%rip), %b; movslq (%b,%i,4), %r; add %b, %r; jmp *%r: the
	 * entries are offsets from what add adds (T, or another lea's).
	 */
	out->cls = PK_IJMP_UNKNOWN;
	if (dc->mnem != ZYDIS_MNEMONIC_ADD || dc->nops != 2 ||
	    dc->op[0].type != ZYDIS_OPERAND_TYPE_REGISTER ||
	    dc->op[0].size != 8 || dc->op[0].reg != c->op[0].reg ||
	    dc->op[1].type != ZYDIS_OPERAND_TYPE_REGISTER ||
	    dc->op[1].size != 8)
		return;
	e = def_before(f, d, c->op[0].reg);
	if (e < 0)
		return;
	const struct cins *ec = &f->ins[e];

	if (!is_rel_load(ec) || ec->op[0].reg != c->op[0].reg)
		return;
	{
		uint64_t t = lea_value(f, e, ec->op[1].base);
		uint64_t b = lea_value(f, d, dc->op[1].reg);

		/* The add's operand must not be written between: checked by
		   lea_value(d) on the straight line or over the function. */
		if (!t || !b)
			return;
		out->cls = PK_IJMP_TABLE_REL;
		out->table = t + (uint64_t)ec->op[1].disp;
		out->base = b;
		out->seq = ec->at;
	}
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

int pk_arch_ijmp_scan(const void *code, size_t size, uint64_t runtime,
		      uint64_t lo, uint64_t hi, struct pk_ijmp *out,
		      size_t max, uint64_t *made, uint64_t *own)
{
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	ZydisDecodedInstruction in;
	ZydisDecoder dec;
	const uint8_t *b = code;
	struct cins *ins = NULL;
	uint64_t *tgt = NULL;
	size_t n = 0, cap = 0, nt = 0, at = 0, nj = 0;
	int ret = 0;

	*made = *own = 0;
	if (ZYAN_FAILED(ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64,
					 ZYDIS_STACK_WIDTH_64)))
		return -EINVAL;
	cap = size / 3 + 8;
	ins = malloc(cap * sizeof(*ins));
	tgt = malloc(cap * sizeof(*tgt));
	if (!ins || !tgt) {
		ret = -ENOMEM;
		goto out;
	}
	while (at < size) {
		if (n == cap) {
			size_t nc = cap * 2;
			struct cins *ni = realloc(ins, nc * sizeof(*ins));
			uint64_t *ntg;

			if (!ni) {
				ret = -ENOMEM;
				goto out;
			}
			ins = ni;
			ntg = realloc(tgt, nc * sizeof(*tgt));
			if (!ntg) {
				ret = -ENOMEM;
				goto out;
			}
			tgt = ntg;
			cap = nc;
		}
		if (ZYAN_FAILED(ZydisDecoderDecodeFull(&dec, b + at, size - at,
						       &in, ops))) {
			ret = -EINVAL;
			goto out;
		}
		cins_fill(&in, ops, runtime + at, &ins[n]);
		if ((in.attributes & ZYDIS_ATTRIB_IS_RELATIVE) &&
		    in.raw.imm[0].is_relative)
			tgt[nt++] = runtime + at + in.length +
				    (uint64_t)in.raw.imm[0].value.s;
		/* What the function makes of an address in (lo, hi). */
		for (unsigned int i = 0; i < in.operand_count; i++) {
			const ZydisDecodedOperand *o = &ops[i];
			uint64_t a;

			if (o->type == ZYDIS_OPERAND_TYPE_MEMORY &&
			    o->mem.base == ZYDIS_REGISTER_RIP &&
			    in.mnemonic == ZYDIS_MNEMONIC_LEA) {
				a = runtime + at + in.length +
				    (uint64_t)o->mem.disp.value;
			} else if (o->type == ZYDIS_OPERAND_TYPE_IMMEDIATE &&
				   !o->imm.is_relative) {
				a = o->imm.value.u;
			} else if (o->type == ZYDIS_OPERAND_TYPE_MEMORY &&
				   o->mem.base == ZYDIS_REGISTER_NONE &&
				   o->mem.index == ZYDIS_REGISTER_NONE &&
				   in.mnemonic == ZYDIS_MNEMONIC_LEA) {
				a = (uint64_t)o->mem.disp.value;
			} else if (o->type == ZYDIS_OPERAND_TYPE_MEMORY &&
				   o->mem.base != ZYDIS_REGISTER_RIP &&
				   in.mnemonic == ZYDIS_MNEMONIC_LEA &&
				   o->mem.disp.has_displacement) {
				/*
				 * Non-PIC lea label(%reg): a label's address plus
				 * an offset (clang's &&l0 + offs[i]). Its own code,
				 * but not itself an address in (lo, hi).
				 */
				a = (uint64_t)o->mem.disp.value;
				if (a >= runtime && a < runtime + size && !*own)
					*own = runtime + at;
				continue;
			} else {
				continue;
			}
			if (a > lo && a < hi && !*made)
				*made = runtime + at;
			if (a >= runtime && a < runtime + size && !*own)
				*own = runtime + at;
		}
		at += in.length;
		n++;
	}
	qsort(tgt, nt, sizeof(*tgt), u64_cmp);
	{
		struct fscan f = { ins, n, tgt, nt };

		for (size_t k = 0; k < n; k++) {
			struct pk_ijmp *o = nj < max ? &out[nj] : NULL;
			const struct cins *c = &ins[k];

			if (c->ijmp) {
				if (o)
					classify(&f, (long)k, o);
				nj++;
				continue;
			}
			/* The table loads, for jmps traced to no table. */
			if (!is_rel_load(c) && !is_rel_load32(c) &&
			    !is_abs_load(c))
				continue;
			if (o) {
				memset(o, 0, sizeof(*o));
				o->at = o->seq = c->at;
				if (!is_abs_load(c)) {
					uint64_t t = lea_value(&f, (long)k,
							       c->op[1].base);

					o->cls = t ? PK_IJMP_LOAD_REL
						   : PK_IJMP_LOAD_UNKNOWN;
					o->table = t + (uint64_t)c->op[1].disp;
					o->base = t;
				} else {
					uint64_t t = c->op[1].base ==
						     ZYDIS_REGISTER_NONE ? 0 :
						     lea_value(&f, (long)k,
							       c->op[1].base);

					o->cls = PK_IJMP_LOAD_ABS;
					o->table = t + (uint64_t)c->op[1].disp;
					if (c->op[1].base != ZYDIS_REGISTER_NONE &&
					    !t)
						o->cls = PK_IJMP_LOAD_UNKNOWN;
				}
			}
			nj++;
		}
	}
	ret = nj > INT32_MAX ? INT32_MAX : (int)nj;
out:
	free(ins);
	free(tgt);
	return ret;
}
