// SPDX-License-Identifier: MIT
/* decode.c - x86-64 instruction decoding through Zydis, classified for patching. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ucontext.h>

#include <Zydis/Zydis.h>

#include "arch/arch.h"

/*
 * The common instructions decoded without Zydis: a placement decodes
 * every instruction of the function (place.c), and arming every function
 * of libstdc++ spent half its time in ZydisDecoderDecodeInstruction()
 * (about 190 ns an instruction here). fast_decode() knows the lengths and
 * kinds of the general-purpose integer instructions of the one-byte map
 * and a few of the 0f map, in the forms compilers emit, and answers
 * exactly what the Zydis path below does (test_arch_decode_fast compares
 * the two at every byte offset of real libraries' code); anything else
 * (VEX, EVEX, SSE, x87, lock, 67, rare or invalid opcodes, a prefix after
 * REX, 66 on a branch) returns 0 and goes to Zydis.
 */
enum {
	F_X = 0,	/* not here: Zydis */
	F_1,		/* the opcode alone */
	F_M,		/* ModRM (+ SIB + disp) */
	F_MI8,		/* ModRM, imm8 */
	F_MIZ,		/* ModRM, imm16/32 */
	F_I8,		/* imm8 */
	F_IZ,		/* imm16/32 */
	F_S,		/* special: the switch in fast_decode() */
};

/* The one-byte map in 64-bit mode, prefixes aside. */
static const uint8_t op1[256] = {
	/* ALU r/m,r; r,r/m; al,imm8; eax,imm: 00-05 ... 38-3d */
	[0x00] = F_M, F_M, F_M, F_M, F_I8, F_IZ,
	[0x08] = F_M, F_M, F_M, F_M, F_I8, F_IZ,
	[0x10] = F_M, F_M, F_M, F_M, F_I8, F_IZ,
	[0x18] = F_M, F_M, F_M, F_M, F_I8, F_IZ,
	[0x20] = F_M, F_M, F_M, F_M, F_I8, F_IZ,
	[0x28] = F_M, F_M, F_M, F_M, F_I8, F_IZ,
	[0x30] = F_M, F_M, F_M, F_M, F_I8, F_IZ,
	[0x38] = F_M, F_M, F_M, F_M, F_I8, F_IZ,
	[0x50] = F_1, F_1, F_1, F_1, F_1, F_1, F_1, F_1,	/* push */
	[0x58] = F_1, F_1, F_1, F_1, F_1, F_1, F_1, F_1,	/* pop */
	[0x63] = F_M,					/* movsxd */
	[0x68] = F_IZ, F_MIZ, F_I8, F_MI8,		/* push, imul */
	[0x70] = F_S, F_S, F_S, F_S, F_S, F_S, F_S, F_S,	/* jcc rel8 */
	[0x78] = F_S, F_S, F_S, F_S, F_S, F_S, F_S, F_S,
	[0x80] = F_MI8, F_MIZ, F_X, F_MI8,		/* group 1 */
	[0x84] = F_M, F_M, F_M, F_M,			/* test, xchg */
	[0x88] = F_M, F_M, F_M, F_M,			/* mov */
	[0x8d] = F_S,					/* lea */
	[0x90] = F_S, F_1, F_1, F_1, F_1, F_1, F_1, F_1,	/* nop, xchg */
	[0x98] = F_1, F_1,				/* cbw, cwd */
	[0x9c] = F_1, F_1,				/* pushf, popf */
	[0xa4] = F_1, F_1, F_1, F_1, F_I8, F_IZ,	/* movs, cmps, test */
	[0xaa] = F_1, F_1, F_1, F_1, F_1, F_1,		/* stos, lods, scas */
	[0xb0] = F_I8, F_I8, F_I8, F_I8, F_I8, F_I8, F_I8, F_I8,
	[0xb8] = F_S, F_S, F_S, F_S, F_S, F_S, F_S, F_S,	/* mov r, imm */
	[0xc0] = F_S, F_S,				/* shifts, imm8 */
	[0xc2] = F_S, F_S,				/* ret */
	[0xc6] = F_S, F_S,				/* mov r/m, imm */
	[0xc9] = F_1,					/* leave */
	[0xcc] = F_S,					/* int3 */
	[0xd0] = F_S, F_S, F_S, F_S,			/* shifts */
	[0xe8] = F_S, F_S,				/* call, jmp rel32 */
	[0xeb] = F_S,					/* jmp rel8 */
	[0xf4] = F_S, F_1,				/* hlt, cmc */
	[0xf6] = F_S, F_S,				/* group 3 */
	[0xf8] = F_1, F_1, F_1, F_1, F_1, F_1,		/* clc ... std */
	[0xfe] = F_S, F_S,				/* groups 4, 5 */
};

/* The 0f map: only these (no 66, f2, f3 before most of them). */
static const uint8_t op2[256] = {
	[0x05] = F_1,					/* syscall */
	[0x0b] = F_S,					/* ud2 */
	[0x1f] = F_S,					/* nop r/m */
	[0x40] = F_M, F_M, F_M, F_M, F_M, F_M, F_M, F_M,	/* cmovcc */
	[0x48] = F_M, F_M, F_M, F_M, F_M, F_M, F_M, F_M,
	[0x80] = F_S, F_S, F_S, F_S, F_S, F_S, F_S, F_S,	/* jcc rel32 */
	[0x88] = F_S, F_S, F_S, F_S, F_S, F_S, F_S, F_S,
	[0xa3] = F_M, F_MI8, F_M,			/* bt, shld */
	[0xab] = F_M, F_MI8, F_M,			/* bts, shrd */
	[0xaf] = F_M,					/* imul */
	[0xb0] = F_M, F_M,				/* cmpxchg */
	[0xb3] = F_M,					/* btr */
	[0xb6] = F_M, F_M,				/* movzx */
	[0xbb] = F_M, F_M, F_M, F_M, F_M,		/* btc, bsf, bsr, movsx */
	[0xc0] = F_M, F_M,				/* xadd */
};

/*
 * The ModRM at @b (and its SIB and displacement): its length (0: past
 * @avail), and whether it is RIP-relative.
 */
static size_t modrm_len(const uint8_t *b, size_t avail, int *rip)
{
	uint8_t m = b[0], mod = m >> 6, rm = m & 7;
	size_t n = 1;

	*rip = 0;
	if (mod != 3 && rm == 4) {
		if (avail < 2)
			return 0;
		n = 2;
		if (mod == 0 && (b[1] & 7) == 5)
			n += 4;
	} else if (mod == 0 && rm == 5) {
		*rip = 1;
		n += 4;
	}
	if (mod == 1)
		n += 1;
	else if (mod == 2)
		n += 4;
	return n <= avail ? n : 0;
}

static int32_t rd32(const uint8_t *p)
{
	int32_t v;

	memcpy(&v, p, 4);
	return v;
}

/*
 * 1 with *@out as pk_arch_decode()'s Zydis path would fill it, or 0.
 * *@rel: 1 where the instruction has a relative immediate (a direct
 * branch: out->target is its destination), else 0.
 */
static int fast_decode(const uint8_t *b, size_t avail, uint64_t runtime,
		       struct pk_insn *out, int *rel)
{
	size_t i = 0, n, mlen = 0, imm = 0;
	int o16 = 0, rep = 0, rex = 0, rip = 0, cls, reg = -1, map2 = 0;
	uint8_t op;

	for (;; i++) {
		if (i >= avail || i >= 4)
			return 0;
		switch (b[i]) {
		case 0x66:
			o16 = 1;
			continue;
		case 0xf2:
		case 0xf3:
			rep = 1;
			continue;
		case 0x26: case 0x2e: case 0x36: case 0x3e: case 0x64: case 0x65:
			continue;
		}
		break;
	}
	if ((b[i] & 0xf0) == 0x40) {
		rex = b[i++];
		if (i >= avail)
			return 0;
	}
	if (rex & 8)
		o16 = 0;	/* REX.W wins over 66 */
	op = b[i++];
	if (op == 0x0f) {
		if (i >= avail || rep)
			return 0;
		op = b[i++];
		map2 = 1;
		cls = op2[op];
	} else {
		cls = op1[op];
	}
	if (cls == F_X)
		return 0;
	memset(out, 0, sizeof(*out));
	out->kind = PK_INSN_PLAIN;
	*rel = 0;
	/* What has a ModRM: the classes, and the specials that take one. */
	if (cls == F_M || cls == F_MI8 || cls == F_MIZ ||
	    (cls == F_S && (map2 ? op == 0x1f :
			    (op == 0x8d || op == 0xc0 || op == 0xc1 ||
			     op == 0xc6 || op == 0xc7 || (op >= 0xd0 && op <= 0xd3) ||
			     op >= 0xf6)))) {
		if (i >= avail)
			return 0;
		mlen = modrm_len(b + i, avail - i, &rip);
		if (!mlen)
			return 0;
		reg = (b[i] >> 3) & 7;
	}
	switch (cls) {
	case F_1:
		break;
	case F_M:
		break;
	case F_MI8:
	case F_I8:
		imm = 1;
		break;
	case F_MIZ:
	case F_IZ:
		imm = o16 ? 2 : 4;
		break;
	default:
		if (map2) {
			switch (op) {
			case 0x0b:			/* ud2 */
				if (o16)
					return 0;
				out->flags = PK_INSN_F_BRANCH | PK_INSN_F_NOFALL;
				break;
			case 0x1f:			/* nop r/m */
				if (reg != 0)
					return 0;
				out->kind = PK_INSN_NOP;
				break;
			default:			/* 0f 80-8f: jcc rel32 */
				if (o16 || i + 4 > avail)
					return 0;
				out->len = (uint8_t)(i + 4);
				out->kind = PK_INSN_RELATIVE;
				out->flags = PK_INSN_F_BRANCH;
				out->target = runtime + out->len +
					      (uint64_t)(int64_t)rd32(b + i);
				*rel = 1;
				return 1;
			}
			break;
		}
		switch (op) {
		case 0x70: case 0x71: case 0x72: case 0x73:
		case 0x74: case 0x75: case 0x76: case 0x77:
		case 0x78: case 0x79: case 0x7a: case 0x7b:
		case 0x7c: case 0x7d: case 0x7e: case 0x7f:
		case 0xeb:
			if (o16 || rep || i + 1 > avail)
				return 0;
			out->len = (uint8_t)(i + 1);
			out->target = runtime + out->len +
				      (uint64_t)(int64_t)(int8_t)b[i];
			if (op == 0xeb) {
				out->kind = PK_INSN_JMP;
				out->flags = PK_INSN_F_BRANCH | PK_INSN_F_NOFALL;
			} else {
				out->kind = PK_INSN_RELATIVE;
				out->flags = PK_INSN_F_BRANCH;
			}
			*rel = 1;
			return 1;
		case 0xe8:
		case 0xe9:
			if (o16 || rep || i + 4 > avail)
				return 0;
			out->len = (uint8_t)(i + 4);
			out->target = runtime + out->len +
				      (uint64_t)(int64_t)rd32(b + i);
			if (op == 0xe9) {
				out->kind = PK_INSN_JMP;
				out->flags = PK_INSN_F_BRANCH | PK_INSN_F_NOFALL;
			} else {
				out->kind = PK_INSN_CALL;
				out->flags = PK_INSN_F_BRANCH | PK_INSN_F_CALL;
			}
			*rel = 1;
			return 1;
		case 0x8d:			/* lea: memory only */
			if (mlen && (b[i] >> 6) == 3)
				return 0;
			break;
		case 0x90:			/* nop; not pause, xchg r8 */
			if (o16 || rep || rex)
				return 0;
			out->kind = PK_INSN_NOP;
			break;
		case 0xb8: case 0xb9: case 0xba: case 0xbb:
		case 0xbc: case 0xbd: case 0xbe: case 0xbf:
			imm = (rex & 8) ? 8 : o16 ? 2 : 4;
			break;
		case 0xc0:
		case 0xc1:
			if (reg == 6)
				return 0;
			imm = 1;
			break;
		case 0xd0: case 0xd1: case 0xd2: case 0xd3:
			if (reg == 6)
				return 0;
			break;
		case 0xc2:
		case 0xc3:			/* ret (rep ret too) */
			if (o16)
				return 0;
			imm = op == 0xc2 ? 2 : 0;
			out->flags = PK_INSN_F_BRANCH | PK_INSN_F_NOFALL;
			break;
		case 0xc6:
		case 0xc7:			/* mov r/m, imm (not xabort/xbegin) */
			if (reg != 0)
				return 0;
			imm = op == 0xc6 ? 1 : o16 ? 2 : 4;
			break;
		case 0xcc:
			if (o16 || rep || rex)
				return 0;
			out->kind = PK_INSN_TRAP;
			out->flags = PK_INSN_F_BRANCH;
			break;
		case 0xf4:
			if (o16 || rep || rex)
				return 0;
			out->flags = PK_INSN_F_BRANCH | PK_INSN_F_NOFALL;
			break;
		case 0xf6:
		case 0xf7:			/* test /0 takes an imm; not /1 */
			if (reg == 1)
				return 0;
			if (reg == 0)
				imm = op == 0xf6 ? 1 : o16 ? 2 : 4;
			break;
		case 0xfe:
			if (reg > 1)
				return 0;
			break;
		case 0xff:
			/* inc, dec, call, jmp, push r/m; not far, not /7 */
			if (reg == 3 || reg == 5 || reg == 7 || o16)
				return 0;
			if (reg == 2)
				out->flags = PK_INSN_F_BRANCH | PK_INSN_F_CALL;
			if (reg == 4)
				out->flags = PK_INSN_F_BRANCH | PK_INSN_F_NOFALL |
					     PK_INSN_F_INDIRECT_JMP;
			break;
		default:
			return 0;
		}
	}
	/* Prefixes Zydis reads as hints on some of these; not here. */
	if (rep && op != 0xc3 && !(op >= 0xa4 && op <= 0xaf && !map2))
		return 0;
	n = i + mlen + imm;
	if (n > avail || n > 15)
		return 0;
	out->len = (uint8_t)n;
	if (rip && out->kind != PK_INSN_NOP)	/* nopl (rip): a nop, as Zydis has it */
		out->kind = PK_INSN_RELATIVE;
	return 1;
}

/* pk_arch_decode() through Zydis alone (the reference fast_decode() keeps to). */
int pk_arch_decode_zydis(const void *code, size_t avail, uint64_t runtime,
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

int pk_arch_decode_fast(const void *code, size_t avail, uint64_t runtime,
			struct pk_insn *out)
{
	int rel;

	return fast_decode(code, avail, runtime, out, &rel);
}

int pk_arch_decode(const void *code, size_t avail, uint64_t runtime,
		   struct pk_insn *out)
{
	int rel;

	if (fast_decode(code, avail, runtime, out, &rel))
		return 0;
	return pk_arch_decode_zydis(code, avail, runtime, out);
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
		struct pk_insn fi;
		int rel;

		if (fast_decode(b + at, len - at, runtime + at, &fi, &rel)) {
			n++;
			if (rel)
				emit(fi.target, ctx);
			at += fi.len;
			continue;
		}
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
