/* SPDX-License-Identifier: MIT */
/* fault_context.h - x86-64: a faulting or single-stepping thread's signal context, inline for the fault path (see arch.h). */
#ifndef PK_ARCH_X86_64_FAULT_CONTEXT_H
#define PK_ARCH_X86_64_FAULT_CONTEXT_H

/*
 * The definitions of arch.h's "fault layer" block for x86-64 Linux: the
 * ucontext's gregs (REG_* indices), RFLAGS' trap flag, the page-fault
 * error code the kernel leaves in REG_ERR, and the signal frame's
 * extended state (for pk_arch_resume_ok()). Contracts: arch.h.
 */

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/ucontext.h>

#define X86_EFLAGS_TF 0x100		/* trap flag: single-step */
#define X86_TRAP_PF 14			/* REG_TRAPNO of a page fault */
#define X86_PF_WRITE 0x2		/* REG_ERR bits of a page fault */
#define X86_PF_INSTR 0x10
#define X86_INSN_MAX 15			/* longest instruction, bytes */
#define X86_FPX_SW_BYTES 464		/* struct _fpx_sw_bytes in the FXSAVE
					   area fpregs points to */
#define X86_FP_XSTATE_MAGIC1 0x46505853u	/* there: an XSAVE frame */
#define X86_SIGFRAME_MAX 65536		/* how far below the interrupted
					   stack pointer a frame may lie */

/* rel32: a RIP-relative operand reaches 2 GiB either way. */
#define PK_ARCH_PCREL_REACH ((size_t)2 << 30)

static PK_NOPROBE_INLINE uintptr_t pk_arch_pc(const ucontext_t *uc)
{
	return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
}

static PK_NOPROBE_INLINE unsigned int pk_arch_fault_access(const ucontext_t *uc)
{
	unsigned long err = (unsigned long)uc->uc_mcontext.gregs[REG_ERR];

	if (uc->uc_mcontext.gregs[REG_TRAPNO] != X86_TRAP_PF)
		return 0;
	if (err & X86_PF_INSTR)
		return PK_ACCESS_EXEC;
	return err & X86_PF_WRITE ? PK_ACCESS_WRITE : PK_ACCESS_READ;
}

static PK_NOPROBE_INLINE void pk_arch_set_step(ucontext_t *uc, int on)
{
	if (on)
		uc->uc_mcontext.gregs[REG_EFL] |= X86_EFLAGS_TF;
	else
		uc->uc_mcontext.gregs[REG_EFL] &= ~(greg_t)X86_EFLAGS_TF;
}

/* @reg: a gregs index (pk_arch_access() gives those). */
static PK_NOPROBE_INLINE void pk_arch_reg_add(ucontext_t *uc, int reg,
					      uintptr_t delta)
{
	greg_t *g = &uc->uc_mcontext.gregs[reg];

	*g = (greg_t)((uint64_t)*g + delta);
}

static PK_NOPROBE_INLINE int pk_arch_access_at(const ucontext_t *uc,
					       uintptr_t page_size,
					       struct pk_access *out)
{
	uintptr_t pc = pk_arch_pc(uc);
	size_t avail = page_size - (pc & (page_size - 1));

	if (avail > X86_INSN_MAX)
		avail = X86_INSN_MAX;
	return pk_arch_access((const void *)pc, avail, uc->uc_mcontext.gregs,
			      out);
}

/*
 * The frame's extended state must be an XSAVE area (the magic in its
 * software-reserved bytes): resume.c restores it with XRSTOR.
 */
static PK_NOPROBE_INLINE int pk_arch_resume_ok(const ucontext_t *uc)
{
	const uint32_t *sw;
	uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];

	if (!uc->uc_mcontext.fpregs ||
	    (uc->uc_mcontext.gregs[REG_EFL] & X86_EFLAGS_TF) ||
	    (uintptr_t)uc >= sp || sp - (uintptr_t)uc > X86_SIGFRAME_MAX)
		return 0;
	sw = (const uint32_t *)((const char *)uc->uc_mcontext.fpregs +
				X86_FPX_SW_BYTES);
	return sw[0] == X86_FP_XSTATE_MAGIC1;
}

#endif /* PK_ARCH_X86_64_FAULT_CONTEXT_H */
