/* SPDX-License-Identifier: MIT */
/* tramp.h - the x86-64 trampoline layout: a probe chunk's head and slots, the return trampoline's entries. */
#ifndef PK_ARCH_X86_64_TRAMP_H
#define PK_ARCH_X86_64_TRAMP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"

/*
 * This is the one place the layout is written down; tramp.c generates it
 * and checks its code against these offsets, the probe layer (src/probe/)
 * uses only the names.
 *
 * A chunk (PK_TRAMP_CHUNK_SIZE bytes, aligned to its size, mapped within
 * rel32 reach of the code it serves, never writable):
 *
 *   +0    fast stub: save flags, GPRs and the vector registers
 *         (below) as a struct pk_regs, call the fast dispatcher
 *         (pre-handlers at a function's entry), restore all but the flags
 *         (none is live at an entry: SysV ABI, DF clear), then
 *         "cmp %rsp, %fs:divert.sp; ret": ZF tells the slot whether this
 *         thread diverts the call (see "divert" below)
 *   +480  post stub: the same save, calling the full dispatcher, the
 *         flags restored (post-handlers after a function's first
 *         instruction, where flags may be live but the x87/MMX state is
 *         still a call boundary's: tramp.c's keeps_x87())
 *   +960  divert code
 *   +1024 full stub: the same with all the vector, x87 and MXCSR state,
 *         calling the full dispatcher, the flags restored (inside a
 *         function: pre-handlers, and post-handlers where the first
 *         instruction may touch the x87/MMX state)
 *   +1280 fast, +1536 post, +1792 full stub's general-registers-only
 *         twins (below)
 *   +2032 the fast dispatcher's address, +2040 the full one's
 *
 * A dispatcher is void fn(struct pk_regs *r, uintptr_t gpr): @gpr 0 when
 * the stub saved the vector state as below; else it did not (then only
 * handlers that touch general registers only may run), and @gpr is the
 * slot's owner (the word at slot +0).
 *   +2048 (PK_TRAMP_HEAD) slot 0, then one slot per PK_TRAMP_SLOT_SIZE
 *
 * A slot (one per probe point P; aligned to its size, so a return address
 * inside it rounds down to its first word):
 *
 *   +0   the owner's word: its struct tramp, which the dispatcher reads
 *   +8   (PK_TRAMP_SLOT_ENTRY) lea rsp,[rsp-128]  step over the red zone
 *   +13  call stub (fast, or full where flags are live)
 *   +18  (PK_TRAMP_SLOT_RET, the pre-handlers' return address)
 *        lea rsp,[rsp+128]
 *   +26  je divert (fast stub) or a 6-byte NOP (full: its flags are the
 *        program's)
 *   +32  (PK_TRAMP_SLOT_COPY) the displaced instructions, relocated; with
 *        post-handlers, after the first of them a stub call like the one
 *        at +8 (PK_TRAMP_CALL_LEN bytes, to the post or the full stub)
 *        jmp P + len (none after a call copied as push + jmp)
 *
 * Divert (return probes, src/probe/ret.c): a pre-handler at a function's
 * entry may post this thread's request { sp, to, cont } with sp = the
 * address of the fast stub's return address. The stub's cmp then sets ZF,
 * the slot's je reaches the divert code with the function's stack pointer
 * (its return address on top), which writes cont over that return address,
 * marks the request taken (sp | 1), pops the word and jumps to "to" (read
 * before the mark, through the red zone below the word: no register is
 * free even at an entry, see "Vector state"). PK_TRAMP_STUB_SP
 * leads from the stub's return-address word to the function's stack
 * pointer.
 *
 * The return trampoline (a code region of return probes, one entry per
 * record, PK_RET_ENT_SIZE bytes each):
 *
 *   +0   the address of the common code (PK_ARCH_RET_COMMON())
 *   +8   int3 x 8 (the unwind info starts here: unwinders look up pc - 1)
 *   +16  (PK_RET_ENT0) entry 0:  call *-8(%rsp)
 *   +20  landing 0 (PK_RET_ENT_LAND):  jmp *[rip - 26] (to the word at +0)
 *   +32  entry 1 ...
 *
 * Vector state around a handler. A handler is C: it may change any
 * caller-saved register, and glibc's AVX2 string functions end with
 * vzeroupper, clearing the upper half of every ymm. What must survive:
 *
 * - At a function's entry (the fast stub): the vector registers, all 16
 *   (32 with AVX-512) and whole, and the mask registers k0-k7. Not only
 *   the argument registers xmm/ymm/zmm0-7: a caller compiled by GCC with
 *   -fipa-ra (the default from -O2) keeps values in any register the
 *   callee, when it binds locally, is known not to write. Not the x87
 *   stack (empty at a call: the ABI, which -fipa-ra keeps) nor the MXCSR
 *   and x87 control words (callee-saved: a handler keeps them).
 *   pk_arch_vsave says how: without AVX movaps xmm0-15; with AVX but not
 *   AVX-512 vmovaps ymm0-15, then, if every upper half was zero,
 *   vzeroupper after the restore (the same values, and the upper state
 *   left clean, not "in use", for SSE code after; XGETBV(1) would tell
 *   directly, but costs 15-38 ns where this was measured), and a
 *   vzeroupper before the handler in any case (all is saved: the handler
 *   starts with the upper state clean whatever the caller left); with
 *   AVX-512 XSAVEC (else XSAVE) of the SSE, AVX, opmask and ZMM
 *   components.
 * - After a function's first instruction (the post stub): as at an
 *   entry, where that instruction cannot touch the x87 or MMX state (the
 *   full stub's otherwise).
 * - At a return (PK_ARCH_RET_COMMON): the same as at an entry (-fipa-ra
 *   callers again), and the x87 return values: st0 and st1, stored and
 *   reloaded while fxam finds them non-empty (the status word's
 *   condition codes are dead at a return), so the handler finds an empty
 *   x87 stack.
 * - Inside a function (the full stub): everything, XSAVEC (else XSAVE;
 *   FXSAVE without XSAVE) of the components XCR0 enables but PKRU and
 *   the AMX tiles, with MXCSR and the whole x87 state, then emms, so the
 *   handler finds an empty x87 stack; XRSTOR after.
 *
 * Handlers that touch only general registers (PK_PROBE_F_GPR_ONLY): a
 * slot whose first probe had the flag calls the twin of its stub. The
 * twin saves the general registers and the flags as its stub does, then
 * reads the slot's owner (the word at slot +0): if its first byte has
 * PK_TRAMP_OWNER_GPR set (every probe linked there has the flag) it calls
 * the dispatcher with gpr = the owner and saves no vector, mask or x87 state at
 * all; else it goes on into its stub's vector save after the same
 * general-register save. The owner bit only picks the cheaper path; what
 * keeps the caller's vector registers safe is that a gpr dispatch
 * calls flagged handlers only (the dispatcher compiled without vector
 * registers, src/probe/probe.c).
 *
 * Never XSAVEOPT: its modified optimisation skips components unchanged
 * since the last XRSTOR from the same address, but a stack area is
 * reused by other frames in between. The areas are on the stack, 64-byte
 * aligned below the struct pk_regs (a thread's signal frame needs as
 * much), so nesting and signals need nothing more.
 */

/*
 * How a stub saves the vector state: the fast stub and PK_ARCH_RET_COMMON
 * as pk_arch_vsave says (tramp.c sets it once, before any stub exists),
 * the full stub as tramp.c's own copy for it.
 */
#define PK_VSAVE_XMM 0		/* movaps xmm0-15 */
#define PK_VSAVE_YMM 1		/* vmovaps ymm0-15, vzeroupper if the upper
				   halves were all zero */
#define PK_VSAVE_FX 2		/* fxsave64 */
#define PK_VSAVE_XSAVE 3	/* xsave64 of mask */
#define PK_VSAVE_XSAVEC 4	/* xsavec64 of mask */
struct pk_arch_vsave {
	uint64_t size;		/* the area's bytes, a multiple of 64 */
	uint32_t mask_lo, mask_hi; /* XSAVE's requested-feature bitmap */
	uint32_t mode;		/* PK_VSAVE_* */
	uint32_t pad;
};
_Static_assert(sizeof(struct pk_arch_vsave) == 24, "ret_common.h's offsets");
PK_HIDDEN extern struct pk_arch_vsave pk_arch_vsave;

/*
 * pk_arch_xsave_size() - the bytes XSAVE (@compacted 0) or XSAVEC (1)
 * writes for the state components @mask (and XCR0), a multiple of 64:
 * struct pk_arch_vsave's size for that mode and mask.
 * Context: XSAVE enabled (CPUID.1:ECX.OSXSAVE); any thread.
 */
PK_HIDDEN uint32_t pk_arch_xsave_size(uint64_t mask, int compacted);

/* The owner's first byte: every handler of the slot touches general registers only. */
#define PK_TRAMP_OWNER_GPR 0x1

#define PK_TRAMP_CHUNK_SIZE (64 * 1024)
#define PK_TRAMP_HEAD 2048
#define PK_TRAMP_SLOT_SIZE 64
#define PK_TRAMP_SLOT_ENTRY 8
#define PK_TRAMP_SLOT_RET 18
#define PK_TRAMP_SLOT_COPY 32
#define PK_TRAMP_CALL_LEN 18
/* Room for the copy and the jmp back. */
#define PK_TRAMP_COPY_MAX (PK_TRAMP_SLOT_SIZE - PK_TRAMP_SLOT_COPY - 5)
#define PK_TRAMP_STUB_SP (8 + 128)

/*
 * Where in the address space chunks may go (x86-64 Linux): below
 * PK_ARCH_USER_TOP, the end of the 47-bit user half less its guard page
 * (TASK_SIZE with 4-level paging; with 5-level paging mmap() stays below it
 * unless asked for more; only [vsyscall] is listed above it), and from
 * PK_ARCH_MMAP_MIN up, 64 KiB: the highest usual vm.mmap_min_addr, under
 * which the kernel refuses to map.
 */
#define PK_ARCH_USER_TOP 0x7ffffffff000ul
#define PK_ARCH_MMAP_MIN 0x10000ul

#define PK_RET_ENT0 16
#define PK_RET_ENT_SIZE 16
#define PK_RET_ENT_LAND 4

/* The stack pointer in a struct pk_regs (arch.h). */
static PK_NOPROBE_INLINE uintptr_t pk_arch_regs_sp(const struct pk_regs *r)
{
	return (uintptr_t)r->rsp;
}

/* Flags a probe handler may change where they are restored: CF PF AF ZF SF DF OF. */
#define PK_ARCH_USER_FLAGS 0xcd5ull

/* PK_ARCH_RET_COMMON(name, dispatch): arch.h's contract. */
#include "arch/x86_64/ret_common.h"

/* Store @v at @b, little-endian as the ISA is, unaligned; its size. */
static inline size_t pk_tramp_put32(uint8_t *b, uint32_t v)
{
	memcpy(b, &v, sizeof(v));
	return sizeof(v);
}

#endif /* PK_ARCH_X86_64_TRAMP_H */
