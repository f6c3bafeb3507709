/* SPDX-License-Identifier: MIT */
/* context.h - x86-64: a trapped thread's signal context, inline for the trap path (see arch.h). */
#ifndef PK_ARCH_X86_64_CONTEXT_H
#define PK_ARCH_X86_64_CONTEXT_H

#include <signal.h>
#include <stdint.h>
#include <sys/ucontext.h>

/* int3 raises SIGTRAP with si_code SI_KERNEL (TRAP_BRKPT is for debuggers). */
static PK_NOPROBE_INLINE int pk_arch_trap_hit(const siginfo_t *si)
{
	return si->si_code == SI_KERNEL;
}

/* RIP is past the int3 when the handler runs. */
static PK_NOPROBE_INLINE uintptr_t pk_arch_trap_addr(const ucontext_t *uc)
{
	return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP] - PK_ARCH_TRAP_LEN;
}

static PK_NOPROBE_INLINE int pk_arch_trap_present(const void *addr)
{
	return *(const volatile uint8_t *)addr == PK_ARCH_TRAP_BYTE;
}

static PK_NOPROBE_INLINE void pk_arch_set_pc(ucontext_t *uc, uintptr_t pc)
{
	uc->uc_mcontext.gregs[REG_RIP] = (greg_t)pc;
}

/* As the call would: the return address pushed at RSP - 8. */
static PK_NOPROBE_INLINE void pk_arch_emulate_call(ucontext_t *uc,
						   uintptr_t ret,
						   uintptr_t target)
{
	greg_t *g = uc->uc_mcontext.gregs;

	g[REG_RSP] -= 8;
	*(uint64_t *)g[REG_RSP] = ret;
	g[REG_RIP] = (greg_t)target;
}

#endif /* PK_ARCH_X86_64_CONTEXT_H */
