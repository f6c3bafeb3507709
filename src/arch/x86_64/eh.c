// SPDX-License-Identifier: MIT
/* eh.c - unwind info (.eh_frame) for the x86-64 return trampoline, so unwinders walk through its landings. */

/*
 * An unwinder (C++ exceptions, pthread_exit's forced unwind, backtrace())
 * that meets landing k on the stack must go on to the real caller, which
 * only record k knows. The stack word the landing was returned through
 * still holds the landing's address while the unwinder looks (it runs
 * below it), so one FDE covers every entry with the rule (CFA = the word
 * + 16, see below)
 *
 *	caller's rsp    = CFA - 8
 *	return address  at recs + (*(CFA - 16) - landing 0) / PK_RET_ENT_SIZE
 *			   * rec_size: record k's first field
 *
 * The CFA is rsp + 8, not rsp: libgcc tells frames apart by the CFA of
 * their callee (uw_identify_context()), and with CFA = rsp this frame and
 * the probed function's (whose CFA is the word + 8 too) would look alike,
 * so phase 2 of an exception resumed below us (_Unwind_Resume after a
 * cleanup in the probed function) would take us for the handler's frame
 * and abort. The caller's rsp is then given explicitly (DW_CFA_val_offset).
 */
#include <string.h>

#include "arch/arch.h"

#define FDE_START 8	/* pc - 1 of landing 0 lies in entry 0; one byte
			   before it too */
#define DWARF_RSP 7
#define DWARF_RA 16	/* x86-64's return address column */

static void put64(uint8_t *b, uint64_t v)
{
	memcpy(b, &v, 8);
}

size_t pk_arch_ret_eh(uint8_t *b, uintptr_t code, size_t nent, uintptr_t recs,
		      size_t rec_size)
{
	uintptr_t pc = code + FDE_START, land0 = code + PK_RET_ENT0 + PK_RET_ENT_LAND;
	size_t range = PK_RET_ENT0 - FDE_START + nent * PK_RET_ENT_SIZE;
	size_t n = 0, cie = 0, fde, e0, mul = rec_size / PK_RET_ENT_SIZE;

	if (rec_size % PK_RET_ENT_SIZE || !mul || mul > 31)
		return 0;	/* beyond DW_OP_lit31 */
	/* CIE: version 1, "zR", code align 1, data align -8, RA column 16. */
	n = 4;
	pk_tramp_put32(b + n, 0);
	n += 4;
	b[n++] = 1;
	memcpy(b + n, "zR", 3);
	n += 3;
	b[n++] = 1;		/* code alignment */
	b[n++] = 0x78;		/* data alignment -8 (sleb) */
	b[n++] = DWARF_RA;	/* return address column */
	b[n++] = 1;		/* augmentation data length */
	b[n++] = 0x00;		/* FDE pointers: DW_EH_PE_absptr */
	b[n++] = 0x0c;		/* DW_CFA_def_cfa rsp, 8 */
	b[n++] = DWARF_RSP;
	b[n++] = 8;
	while ((n - cie) % 8)
		b[n++] = 0;	/* DW_CFA_nop */
	pk_tramp_put32(b + cie, (uint32_t)(n - cie - 4));

	fde = n;
	n += 4;
	pk_tramp_put32(b + n, (uint32_t)(n - cie));	/* back to the CIE */
	n += 4;
	put64(b + n, pc);
	n += 8;
	put64(b + n, range);
	n += 8;
	b[n++] = 0;		/* augmentation data length */
	b[n++] = 0x14;		/* DW_CFA_val_offset: the caller's rsp is */
	b[n++] = DWARF_RSP;
	b[n++] = 1;		/* CFA - 8 */
	b[n++] = 0x10;		/* DW_CFA_expression: where the RA is */
	b[n++] = DWARF_RA;
	e0 = n++;		/* expression length */
	/* The CFA is pushed first. */
	b[n++] = 0x40;		/* DW_OP_lit16 */
	b[n++] = 0x1c;		/* DW_OP_minus: the word */
	b[n++] = 0x06;		/* DW_OP_deref: the landing's address */
	b[n++] = 0x0e;		/* DW_OP_const8u landing 0 */
	put64(b + n, land0);
	n += 8;
	b[n++] = 0x1c;		/* DW_OP_minus: k * PK_RET_ENT_SIZE */
	b[n++] = (uint8_t)(0x30 + mul);	/* DW_OP_lit<mul> */
	b[n++] = 0x1e;		/* DW_OP_mul: k * rec_size */
	b[n++] = 0x0e;		/* DW_OP_const8u recs */
	put64(b + n, recs);
	n += 8;
	b[n++] = 0x22;		/* DW_OP_plus: &recs[k], its return address */
	b[e0] = (uint8_t)(n - e0 - 1);
	while ((n - fde) % 8)
		b[n++] = 0;
	pk_tramp_put32(b + fde, (uint32_t)(n - fde - 4));
	pk_tramp_put32(b + n, 0);	/* terminator */
	_Static_assert(PK_ARCH_RET_EH_MAX >= 88, "the CIE, the FDE, the end");
	return n + 4;
}
