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
 *   +0    fast stub: save flags, GPRs, xmm0-7 as a struct pk_regs, call
 *         the fast dispatcher (pre-handlers at a function's entry), restore
 *         all but the flags (none is live at an entry: SysV ABI, DF clear),
 *         then "cmp %rsp, %fs:divert.sp; ret": ZF tells the slot whether
 *         this thread diverts the call (see "divert" below)
 *   +192  divert code
 *   +256  full stub: the same, calling the full dispatcher and ending in
 *         popf; ret (inside a function, post-handlers: any flag may be live)
 *   +496  the fast dispatcher's address, +504 the full one's
 *   +512  (PK_TRAMP_HEAD) slot 0, then one slot per PK_TRAMP_SLOT_SIZE
 *
 * A slot (one per probe point P; aligned to its size, so a return address
 * inside it rounds down to its first word):
 *
 *   +0   the owner's word: its struct tramp, which the dispatcher reads
 *   +8   (PK_TRAMP_SLOT_ENTRY) lea rsp,[rsp-128]  step over the red zone
 *   +13  call stub (fast, or full where flags are live)
 *   +18  (PK_TRAMP_SLOT_RET, the pre-handlers' return address)
 *        lea rsp,[rsp+128]
 *   +26  je divert (fast stub) or a 6-byte NOP (full: its popf came last)
 *   +32  (PK_TRAMP_SLOT_COPY) the displaced instructions, relocated; with
 *        post-handlers, after the first of them a stub call like the one
 *        at +8 (PK_TRAMP_CALL_LEN bytes, to the full stub)
 *        jmp P + len (none after a call copied as push + jmp)
 *
 * Divert (return probes, src/probe/ret.c): a pre-handler at a function's
 * entry may post this thread's request { sp, to, cont } with sp = the
 * address of the fast stub's return address. The stub's cmp then sets ZF,
 * the slot's je reaches the divert code with the function's stack pointer
 * (its return address on top), which writes cont over that return address,
 * marks the request taken (sp | 1), pops the word and jumps to "to" (through
 * r11, free at a function's entry: PLT stubs clobber it). PK_TRAMP_STUB_SP
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
 */

#define PK_TRAMP_CHUNK_SIZE (64 * 1024)
#define PK_TRAMP_HEAD 512
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
