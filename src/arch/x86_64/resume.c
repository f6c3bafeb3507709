// SPDX-License-Identifier: MIT
/* resume.c - leave a signal handler for the interrupted context without rt_sigreturn. */

/*
 * Why: a handled fault (a GC barrier, a watchpoint's page) costs a kernel
 * round trip to deliver the signal and another, rt_sigreturn, to resume.
 * The second is not needed when the signal did not change what only the
 * kernel can restore: probekit installs its handlers with SA_NODEFER and an
 * empty sa_mask, so the kernel left the thread's signal mask alone at
 * delivery, and everything else rt_sigreturn restores is user state: the
 * extended state (XRSTOR, which user code may run), the general registers,
 * the flags and RIP. bench_fault measured ~7 % per handled fault.
 *
 * pk_arch_resume_ok() says when it is safe; otherwise the handler returns
 * and the kernel resumes the thread as always.
 */

#include <asm/prctl.h>
#include <signal.h>
#include <stddef.h>
#include <sys/syscall.h>
#include <sys/ucontext.h>
#include <unistd.h>

#include "arch/arch.h"

/* Linux 6.6+ names; absent from older uapi headers. */
#ifndef ARCH_SHSTK_STATUS
#define ARCH_SHSTK_STATUS 0x5005
#endif
#define SHSTK_ENABLED 0x1ULL

/* The offsets the code below uses (x86-64 Linux ABI). */
_Static_assert(offsetof(ucontext_t, uc_mcontext.gregs) == 40, "gregs");
_Static_assert(offsetof(ucontext_t, uc_mcontext.fpregs) == 224, "fpregs");
_Static_assert(REG_R8 == 0 && REG_RDI == 8 && REG_RSP == 15 &&
	       REG_RIP == 16 && REG_EFL == 17 && REG_ERR == 19, "gregs order");

int pk_arch_resume_usable(void)
{
	unsigned long long features = 0;

	/*
	 * A shadow stack holds a token the kernel pushed at delivery, which
	 * only rt_sigreturn pops. The loader enables it at start-up or never.
	 */
	if (syscall(SYS_arch_prctl, ARCH_SHSTK_STATUS, &features) == 0 &&
	    (features & SHSTK_ENABLED))
		return 0;
	return 1;
}

/*
 * pk_arch_resume(uc): XRSTOR the frame's extended state with the feature
 * mask the kernel saved with it (fx_sw_bytes.xfeatures, which leaves out
 * state the process may not use, as AMX tiles without permission), put
 * RFLAGS and RIP just below the red zone of the interrupted stack, load
 * the general registers, switch to that stack, popfq and ret $128. Nothing
 * after the XRSTOR touches vector registers.
 */
__asm__(
	"	.pushsection pk_noprobe_text,\"ax\",@progbits\n"
	"	.globl	pk_arch_resume\n"
	"	.hidden	pk_arch_resume\n"
	"	.type	pk_arch_resume,@function\n"
	"pk_arch_resume:\n"
	"	mov	224(%rdi), %rsi\n"		/* uc_mcontext.fpregs */
	"	mov	472(%rsi), %eax\n"		/* sw_reserved.xfeatures */
	"	mov	476(%rsi), %edx\n"
	"	xrstor64 (%rsi)\n"
	"	mov	40+15*8(%rdi), %rsi\n"		/* RSP */
	"	sub	$144, %rsi\n"
	"	mov	40+17*8(%rdi), %rax\n"		/* EFL */
	"	mov	%rax, (%rsi)\n"
	"	mov	40+16*8(%rdi), %rax\n"		/* RIP */
	"	mov	%rax, 8(%rsi)\n"
	"	mov	%rsi, 40+19*8(%rdi)\n"		/* ERR: a scratch slot */
	"	mov	40+0*8(%rdi), %r8\n"
	"	mov	40+1*8(%rdi), %r9\n"
	"	mov	40+2*8(%rdi), %r10\n"
	"	mov	40+3*8(%rdi), %r11\n"
	"	mov	40+4*8(%rdi), %r12\n"
	"	mov	40+5*8(%rdi), %r13\n"
	"	mov	40+6*8(%rdi), %r14\n"
	"	mov	40+7*8(%rdi), %r15\n"
	"	mov	40+9*8(%rdi), %rsi\n"
	"	mov	40+10*8(%rdi), %rbp\n"
	"	mov	40+11*8(%rdi), %rbx\n"
	"	mov	40+12*8(%rdi), %rdx\n"
	"	mov	40+13*8(%rdi), %rax\n"
	"	mov	40+14*8(%rdi), %rcx\n"
	"	mov	40+19*8(%rdi), %rsp\n"
	"	mov	40+8*8(%rdi), %rdi\n"
	"	popfq\n"
	"	ret	$128\n"
	"	.size	pk_arch_resume, .-pk_arch_resume\n"
	"	.popsection\n");
