// SPDX-License-Identifier: MIT
/* decode.c - x86-64 instruction decoding through Zydis, classified for patching. */
#include <errno.h>
#include <stddef.h>
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

/*
 * The branch index's fast path: the length of the common instructions
 * from tables (the opcode maps of the Intel SDM, volume 2, appendix A),
 * at a few nanoseconds each where Zydis takes about a hundred. Anything
 * not in the tables below, or any doubt (an immediate-size prefix on a
 * branch, VEX and EVEX, lock, x87, moffs, XOP, 3DNow!, enter, invalid opcodes and
 * group members), is Zydis' to decode: fast_len() returns 0 for it. The tables
 * are checked against Zydis over whole libraries (tests/test_arch_branch.c).
 */
#define F_M	0x01	/* a ModRM byte (and SIB, displacement) */
#define F_I8	0x02	/* an 8-bit immediate */
#define F_I16	0x04	/* a 16-bit immediate */
#define F_IZ	0x08	/* a 32-bit immediate, 16-bit with 0x66 */
#define F_IV	0x10	/* mov r, imm: 64-bit with REX.W */
#define F_REL	0x20	/* the immediate is a branch displacement */
#define F_GRP3	0x40	/* f6/f7: an immediate for /0 and /1 only */
#define F_X	0x80	/* Zydis decides */

#define ALU(o) [o + 0 ... o + 3] = F_M, [o + 4] = F_I8, [o + 5] = F_IZ

/* One-byte opcodes; prefixes and 0f are handled before. */
static const uint8_t map1[256] = {
	ALU(0x00), [0x06 ... 0x07] = F_X, ALU(0x08), [0x0e ... 0x0f] = F_X,
	ALU(0x10), [0x16 ... 0x17] = F_X, ALU(0x18), [0x1e ... 0x1f] = F_X,
	ALU(0x20), [0x26 ... 0x27] = F_X, ALU(0x28), [0x2e ... 0x2f] = F_X,
	ALU(0x30), [0x36 ... 0x37] = F_X, ALU(0x38), [0x3e ... 0x3f] = F_X,
	[0x40 ... 0x4f] = F_X,
	[0x60 ... 0x62] = F_X, [0x63] = F_M, [0x64 ... 0x67] = F_X,
	[0x68] = F_IZ, [0x69] = F_M | F_IZ, [0x6a] = F_I8, [0x6b] = F_M | F_I8,
	[0x70 ... 0x7f] = F_I8 | F_REL,
	[0x80] = F_M | F_I8, [0x81] = F_M | F_IZ, [0x82] = F_X,
	[0x83] = F_M | F_I8, [0x84 ... 0x8b] = F_M, [0x8c] = F_X, [0x8d] = F_M,
	[0x8e ... 0x8f] = F_X,
	[0x9a] = F_X, [0xa0 ... 0xa3] = F_X, [0xa8] = F_I8, [0xa9] = F_IZ,
	[0xb0 ... 0xb7] = F_I8, [0xb8 ... 0xbf] = F_IV,
	[0xc0 ... 0xc1] = F_M | F_I8, [0xc2] = F_I16, [0xc4 ... 0xc5] = F_X,
	[0xc6] = F_M | F_I8, [0xc7] = F_M | F_IZ, [0xc8] = F_X, [0xca] = F_I16,
	[0xcd] = F_I8, [0xce] = F_X,
	[0xd0 ... 0xd3] = F_M, [0xd4 ... 0xd6] = F_X, [0xd8 ... 0xdf] = F_X,
	[0xe0 ... 0xe3] = F_I8 | F_REL, [0xe4 ... 0xe7] = F_I8,
	[0xe8 ... 0xe9] = F_IZ | F_REL, [0xea] = F_X, [0xeb] = F_I8 | F_REL,
	[0xf0] = F_X, [0xf2 ... 0xf3] = F_X, [0xf6 ... 0xf7] = F_M | F_GRP3,
	[0xfe ... 0xff] = F_M,
};

/* Two-byte opcodes (0f xx); 0f 38 and 0f 3a are handled before. */
static const uint8_t map2[256] = {
	[0x00 ... 0x01] = F_X, [0x02 ... 0x03] = F_M, [0x04] = F_X, [0x0a] = F_X,
	[0x0c] = F_X,
	[0x0d] = F_M, [0x0f] = F_X, [0x10 ... 0x1f] = F_M, [0x20 ... 0x23] = F_X,
	[0x24 ... 0x27] = F_X, [0x28 ... 0x2f] = F_M, [0x36] = F_X,
	[0x38 ... 0x3f] = F_X, [0x40 ... 0x6f] = F_M,
	[0x70 ... 0x73] = F_M | F_I8, [0x74 ... 0x76] = F_M,
	[0x78 ... 0x7b] = F_X, [0x7c ... 0x7f] = F_M,
	[0x80 ... 0x8f] = F_IZ | F_REL, [0x90 ... 0x9f] = F_M, [0xa3] = F_M,
	[0xa4] = F_M | F_I8, [0xa5] = F_M, [0xa6 ... 0xa7] = F_X, [0xab] = F_M,
	[0xac] = F_M | F_I8, [0xad ... 0xb7] = F_M, [0xb8] = F_X, [0xb9] = F_M,
	[0xba] = F_M | F_I8,
	[0xbb ... 0xc1] = F_M, [0xc2] = F_M | F_I8, [0xc3] = F_M,
	[0xc4 ... 0xc6] = F_M | F_I8, [0xc7] = F_M, [0xd0 ... 0xff] = F_M,
};

/* The legacy prefixes (REX apart): 2 operand size, 3 lock. */
static const uint8_t legacy[256] = {
	[0x26] = 1, [0x2e] = 1, [0x36] = 1, [0x3e] = 1, [0x64 ... 0x65] = 1,
	[0x66] = 2, [0x67] = 1, [0xf0] = 3, [0xf2 ... 0xf3] = 1,
};

/*
 * The length of the instruction at @b (@avail bytes readable), or 0: not
 * one the tables know (Zydis decides). *@rel: the size of its branch
 * displacement (1 or 4), which ends it, or 0.
 */
static int fast_len(const uint8_t *b, size_t avail, int *rel)
{
	size_t i = 0;
	int opsz = 0, rexw = 0, one = 0, f;
	uint8_t op;

	*rel = 0;
	while (i < avail && i < 14 && legacy[b[i]]) {
		if (legacy[b[i]] == 3)
			return 0;	/* lock: only some may carry it */
		opsz |= legacy[b[i]] == 2;
		i++;
	}
	if (i < avail && (b[i] & 0xf0) == 0x40) {
		rexw = b[i] & 0x08;
		i++;
	}
	if (i >= avail)
		return 0;
	op = b[i++];
	if (op == 0x0f) {
		if (i >= avail)
			return 0;
		op = b[i++];
		if (op == 0x38 || op == 0x3a) {
			if (i >= avail)
				return 0;
			i++;
			f = op == 0x38 ? F_M : F_M | F_I8;
		} else {
			f = map2[op];
		}
	} else if (op == 0xc4 || op == 0xc5 || op == 0x62) {
		return 0;	/* VEX, EVEX: Zydis knows their holes */
	} else {
		f = map1[op];
		one = 1;
	}
	if (f & F_X)
		return 0;
	if (f & F_M) {
		uint8_t m, mod, rm, reg;

		if (i >= avail)
			return 0;
		m = b[i++];
		mod = m >> 6;
		rm = m & 7;
		reg = (m >> 3) & 7;
		if ((f & F_GRP3) && reg < 2)
			f |= op == 0xf6 ? F_I8 : F_IZ;
		/* The groups' holes, as Zydis has them (seen in data). */
		if (one && ((op == 0xfe && reg > 1) ||
			    (op == 0xff && (reg == 7 ||
					    (mod == 3 && (reg == 3 || reg == 5)))) ||
			    ((op == 0xc6 || op == 0xc7) && reg && m != 0xf8) ||
			    (op == 0x8d && mod == 3)))
			return 0;
		if (one && op == 0xc7 && m == 0xf8)
			f |= F_REL;	/* xbegin rel32 */
		if (mod != 3) {
			if (rm == 4) {
				if (i >= avail)
					return 0;
				if (mod == 0 && (b[i] & 7) == 5)
					i += 4;
				i++;
			} else if (mod == 0 && rm == 5) {
				i += 4;	/* [rip + disp32] */
			}
			i += mod == 1 ? 1 : mod == 2 ? 4 : 0;
		}
	}
	if ((f & F_REL) && opsz && (f & F_IZ))
		return 0;	/* rel16: vendors differ */
	i += (f & F_I8) ? 1 : 0;
	i += (f & F_I16) ? 2 : 0;
	i += (f & F_IZ) ? (opsz && !rexw ? 2 : 4) : 0;	/* REX.W wins */
	i += (f & F_IV) ? (rexw ? 8 : opsz ? 2 : 4) : 0;
	if (i > 15 || i > avail)
		return 0;
	if (f & F_REL)
		*rel = (f & F_IZ) ? 4 : 1;
	return (int)i;
}

static size_t scan(const uint8_t *b, size_t len, uint64_t runtime,
		   void (*emit)(uint64_t target, void *ctx), void *ctx,
		   int fast)
{
	ZydisDecoderContext zctx;
	ZydisDecodedInstruction insn;
	ZydisDecoder dec;
	size_t at = 0, n = 0;

	if (ZYAN_FAILED(ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64,
					 ZYDIS_STACK_WIDTH_64)) ||
	    ZYAN_FAILED(ZydisDecoderEnableMode(&dec, ZYDIS_DECODER_MODE_MINIMAL,
					       ZYAN_TRUE)))
		return 0;
	while (at < len) {
		int l, rel;

		l = fast ? fast_len(b + at, len - at, &rel) : 0;
		if (l) {
			n++;
			at += (size_t)l;
			if (rel == 1)
				emit(runtime + at + (uint64_t)(int64_t)(int8_t)b[at - 1],
				     ctx);
			else if (rel == 4)
				emit(runtime + at + (uint64_t)(int64_t)(int32_t)
						  ((uint32_t)b[at - 4] |
						   (uint32_t)b[at - 3] << 8 |
						   (uint32_t)b[at - 2] << 16 |
						   (uint32_t)b[at - 1] << 24),
				     ctx);
			continue;
		}
		if (ZYAN_FAILED(ZydisDecoderDecodeInstruction(&dec, &zctx, b + at,
							      len - at, &insn))) {
			at++;
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

size_t pk_arch_branch_targets(const void *code, size_t len, uint64_t runtime,
			      void (*emit)(uint64_t target, void *ctx),
			      void *ctx)
{
	return scan(code, len, runtime, emit, ctx, 1);
}

size_t pk_arch_branch_targets_zydis(const void *code, size_t len,
				    uint64_t runtime,
				    void (*emit)(uint64_t target, void *ctx),
				    void *ctx)
{
	return scan(code, len, runtime, emit, ctx, 0);
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
