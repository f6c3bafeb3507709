// SPDX-License-Identifier: MIT
/* decode.c - x86-64 instruction decoding through Zydis, classified for patching. */
#include <errno.h>
#include <string.h>

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
