// SPDX-License-Identifier: MIT
/* reloc.c - copy x86-64 instructions to another address, keeping their meaning. */

/*
 * What moves and how (the instruction at @from + off goes to @to + doff):
 *
 *   position independent           copied as is
 *   [rip+disp32] memory operand    disp32 re-targeted to the same address
 *   jmp rel8 / jmp rel32           jmp rel32 to the same target
 *   call rel32, call *reg/mem      only as the last instruction: what a
 *                                  call does, pushing the original return
 *                                  address itself (below), so the callee
 *                                  returns into the original code, never
 *                                  into the copy; a call before the last
 *                                  is refused, -ENOTSUP (its return address
 *                                  would be among the moved bytes)
 *   jcc rel8 / jcc rel32           jcc rel32 to the same target
 *   loop*, jrcxz, jecxz, prefixed  refused, -ENOTSUP (no rel32 form; rare)
 *   relative branches, other
 *   PC-relative forms, 32-bit
 *   (addr32) [eip+x]
 *
 * A target out of a rel32's reach from the copy is refused with -ERANGE.
 */
#include <asm/prctl.h>
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <Zydis/Zydis.h>

#include "arch/arch.h"

static int rel32_fits(int64_t v)
{
	return v == (int32_t)v;
}

static void put32(uint8_t *p, int64_t v)
{
	int32_t x = (int32_t)v;

	memcpy(p, &x, sizeof(x));
}

static int relocate_call(const void *src, size_t avail, uint64_t from,
			 uint8_t *dst, size_t cap, uint64_t to);

int pk_arch_relocate(const void *src, size_t len, uint64_t from, uint8_t *dst,
		     size_t cap, uint64_t to, struct pk_reloc_map *map)
{
	const uint8_t *s = src;
	ZydisDecoder dec;
	size_t off = 0, doff = 0;

	if (ZYAN_FAILED(ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64,
					 ZYDIS_STACK_WIDTH_64)))
		return -EINVAL;
	if (map)
		map->n = 0;
	while (off < len) {
		ZydisDecoderContext ctx;
		ZydisDecodedInstruction in;
		uint64_t ip = from + off, nip, dip = to + doff;
		uint8_t out[16];
		size_t olen;

		if (ZYAN_FAILED(ZydisDecoderDecodeInstruction(&dec, &ctx, s + off,
							      len - off, &in)))
			return -EINVAL;
		nip = ip + in.length;
		memcpy(out, s + off, in.length);
		olen = in.length;

		if (in.mnemonic == ZYDIS_MNEMONIC_CALL) {
			int r;

			if (off + in.length != len)
				return -ENOTSUP;
			r = relocate_call(s + off, in.length, ip, dst + doff,
					  cap - doff, dip);
			if (r < 0)
				return r;
			if (map) {
				if (map->n == PK_RELOC_MAX)
					return -E2BIG;
				map->src[map->n] = (uint8_t)off;
				map->dst[map->n] = (uint8_t)doff;
				map->n++;
			}
			return (int)(doff + (size_t)r);
		}
		if ((in.attributes & ZYDIS_ATTRIB_HAS_MODRM) &&
		    in.raw.modrm.mod == 0 && in.raw.modrm.rm == 5) {
			/* [rip+disp32]; with addr32 it would be [eip+x]. */
			uint64_t target = nip + (uint64_t)in.raw.disp.value;

			if (in.address_width != 64)
				return -ENOTSUP;
			if (!rel32_fits((int64_t)(target - (dip + olen))))
				return -ERANGE;
			put32(out + in.raw.disp.offset,
			      (int64_t)(target - (dip + olen)));
		} else if (in.attributes & ZYDIS_ATTRIB_IS_RELATIVE) {
			uint64_t target = nip + (uint64_t)in.raw.imm[0].value.s;
			int is_jmp = in.mnemonic == ZYDIS_MNEMONIC_JMP;
			int is_call = in.mnemonic == ZYDIS_MNEMONIC_CALL;
			int is_jcc = in.meta.category == ZYDIS_CATEGORY_COND_BR &&
				     in.mnemonic != ZYDIS_MNEMONIC_LOOP &&
				     in.mnemonic != ZYDIS_MNEMONIC_LOOPE &&
				     in.mnemonic != ZYDIS_MNEMONIC_LOOPNE &&
				     in.mnemonic != ZYDIS_MNEMONIC_JRCXZ &&
				     in.mnemonic != ZYDIS_MNEMONIC_JECXZ &&
				     in.mnemonic != ZYDIS_MNEMONIC_JCXZ;
			uint8_t op = s[off + in.raw.prefix_count];

			if (!in.raw.imm[0].is_relative || in.raw.prefix_count ||
			    in.operand_width != 64)
				return -ENOTSUP;
			if (is_jmp && (op == 0xeb || op == 0xe9)) {
				out[0] = 0xe9;
				olen = 5;
			} else if (is_call && op == 0xe8) {
				out[0] = 0xe8;
				olen = 5;
			} else if (is_jcc && op >= 0x70 && op <= 0x7f) {
				out[0] = 0x0f;
				out[1] = (uint8_t)(0x80 | (op & 0x0f));
				olen = 6;
			} else if (is_jcc && op == 0x0f) {
				olen = 6;	/* 0f 8x rel32: keep the opcode */
			} else {
				return -ENOTSUP;
			}
			if (!rel32_fits((int64_t)(target - (dip + olen))))
				return -ERANGE;
			put32(out + olen - 4, (int64_t)(target - (dip + olen)));
		}
		if (doff + olen > cap)
			return -E2BIG;
		if (map) {
			if (map->n == PK_RELOC_MAX)
				return -E2BIG;
			map->src[map->n] = (uint8_t)off;
			map->dst[map->n] = (uint8_t)doff;
			map->n++;
		}
		memcpy(dst + doff, out, olen);
		off += in.length;
		doff += olen;
	}
	return (int)doff;
}

/*
 * A call moved out of line must not return into the copy (a thread there
 * could not be told apart from one that is running it), so it is turned
 * into what a call does, pushing the original return address itself:
 *
 *   push qword [rip+k]       ff 35 k        (6 bytes)
 *   jmp target               e9 rel32, or the call's own ff /2 operand
 *                            as ff /4 (a memory operand [rip+x] re-targeted)
 *   .quad from + length      the return address
 *
 * An operand based on rsp is refused: the push moves it. The target is
 * read after the push, not before as the call does: the same unless the
 * operand is the word the push writes, below the stack pointer, which a
 * function that calls cannot keep anything in.
 */
static int relocate_call(const void *src, size_t avail, uint64_t from,
			 uint8_t *dst, size_t cap, uint64_t to)
{
	ZydisDecodedInstruction in;
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	ZydisDecoder dec;
	const uint8_t *s = src;
	uint8_t out[40];
	size_t n = 6, jl;
	uint64_t ret;
	int32_t k;

	if (ZYAN_FAILED(ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64,
					 ZYDIS_STACK_WIDTH_64)) ||
	    ZYAN_FAILED(ZydisDecoderDecodeFull(&dec, src, avail, &in, ops)))
		return -EINVAL;
	if (in.mnemonic != ZYDIS_MNEMONIC_CALL)
		return -EINVAL;
	ret = from + in.length;
	if (in.operand_width != 64 || in.raw.prefix_count > 1 ||
	    (in.raw.prefix_count == 1 && s[0] != 0x3e &&	/* notrack */
	     (s[0] & 0xf0) != 0x40))				/* REX */
		return -ENOTSUP;
	if ((in.attributes & ZYDIS_ATTRIB_IS_RELATIVE) && !in.raw.prefix_count &&
	    s[0] == 0xe8) {
		uint64_t target = ret + (uint64_t)in.raw.imm[0].value.s;

		if (pk_arch_encode_jmp(out + n, to + n, target))
			return -ERANGE;
		jl = PK_ARCH_JMP_LEN;
	} else if (in.raw.modrm.offset && in.raw.modrm.reg == 2 &&
		   s[in.raw.modrm.offset - 1] == 0xff) {
		/* ff /2: the same operand as ff /4, unless it reads rsp. */
		const ZydisDecodedOperand *o = &ops[0];
		size_t m = in.raw.modrm.offset;

		if ((o->type == ZYDIS_OPERAND_TYPE_REGISTER &&
		     o->reg.value == ZYDIS_REGISTER_RSP) ||
		    (o->type == ZYDIS_OPERAND_TYPE_MEMORY &&
		     (o->mem.base == ZYDIS_REGISTER_RSP ||
		      o->mem.index == ZYDIS_REGISTER_RSP)))
			return -ENOTSUP;
		if (in.address_width != 64)
			return -ENOTSUP;
		memcpy(out + n, s, in.length);
		jl = in.length;
		if (in.raw.modrm.mod == 0 && in.raw.modrm.rm == 5) {
			/* [rip+disp32], re-targeted to the same word */
			uint64_t t = ret + (uint64_t)in.raw.disp.value;

			if (!rel32_fits((int64_t)(t - (to + n + jl))))
				return -ERANGE;
			put32(out + n + in.raw.disp.offset,
			      (int64_t)(t - (to + n + jl)));
		} else if (in.attributes & ZYDIS_ATTRIB_IS_RELATIVE) {
			return -ENOTSUP;
		}
		/* /2 (call) becomes /4 (jmp). */
		out[n + m] = (uint8_t)((s[m] & ~0x38) | (4 << 3));
	} else {
		return -ENOTSUP;
	}
	/* push qword [rip+k]: the quad right after the jmp. */
	out[0] = 0xff;
	out[1] = 0x35;
	k = (int32_t)jl;
	memcpy(out + 2, &k, sizeof(k));
	n += jl;
	memcpy(out + n, &ret, sizeof(ret));
	n += sizeof(ret);
	if (n > cap)
		return -E2BIG;
	memcpy(dst, out, n);
	return (int)n;
}

int pk_arch_relocate_one(const void *src, size_t avail, uint64_t from,
			 uint8_t *dst, size_t cap, uint64_t to,
			 int *falls_through)
{
	ZydisDecodedInstruction in;
	ZydisDecoderContext ctx;
	ZydisDecoder dec;
	int r;

	*falls_through = 1;
	if (ZYAN_FAILED(ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64,
					 ZYDIS_STACK_WIDTH_64)) ||
	    ZYAN_FAILED(ZydisDecoderDecodeInstruction(&dec, &ctx, src, avail,
						      &in)))
		return -EINVAL;
	if (in.mnemonic != ZYDIS_MNEMONIC_CALL)
		return pk_arch_relocate(src, in.length, from, dst, cap, to, NULL);
	r = relocate_call(src, in.length, from, dst, cap, to);
	if (r >= 0)
		*falls_through = 0;
	return r;
}

/* Linux 6.6+ names; absent from older uapi headers. */
#ifndef ARCH_SHSTK_STATUS
#define ARCH_SHSTK_STATUS 0x5005
#endif

int pk_arch_shstk_active(void)
{
	unsigned long long features = 0;

	/* Older kernels: EINVAL, no shadow stack. */
	return syscall(SYS_arch_prctl, ARCH_SHSTK_STATUS, &features) == 0 &&
	       (features & 0x1ULL);	/* ARCH_SHSTK_SHSTK */
}
