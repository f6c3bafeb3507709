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
