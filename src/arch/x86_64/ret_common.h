/* SPDX-License-Identifier: MIT */
/* ret_common.h - x86-64: the return trampoline's common code, as a macro the probe layer instantiates. */
#ifndef PK_ARCH_X86_64_RET_COMMON_H
#define PK_ARCH_X86_64_RET_COMMON_H

/*
 * PK_ARCH_RET_COMMON(name, dispatch) - define function @name, where every
 * landing of the return trampoline jumps (arch.h's contract), calling
 * @dispatch (uint64_t dispatch(struct pk_regs *)). A macro, so that the
 * code is the probe layer's object's and calls its dispatcher by name:
 * arch never calls up into the probe layer, and the call stays direct.
 *
 * Entered by jmp from a landing with rsp = the stack word + 8 and [word]
 * = the landing. The struct pk_regs it builds ends at the word
 * (pk_private_ret is the word), so writing regs->pk_private_ret restores
 * the stack. CFI: a frame whose return address is at CFA - 8, the word;
 * while it still holds the landing the unwinder goes on through the
 * entries' FDE (eh.c), afterwards straight to the caller.
 */
#define PK_ARCH_RET_COMMON(name, dispatch)                                         \
	__asm__(".pushsection pk_noprobe_text,\"ax\",@progbits\n"                  \
	".globl " #name "\n"                                                       \
	".hidden " #name "\n"                                                      \
	".type " #name ",@function\n"                                              \
	#name ":\n"                                                                \
	"	.cfi_startproc\n"                                                  \
	"	.cfi_def_cfa_offset 0\n"                                           \
	/* The word, then flags' place (not saved: no flag is live here). */       \
	"	lea -16(%rsp), %rsp\n"                                             \
	"	.cfi_def_cfa_offset 16\n"                                          \
	"	push %rax\n"                                                       \
	"	.cfi_def_cfa_offset 24\n"                                          \
	/*                                                                         \
	 * rcx, and below rsi, rdi, r8-r11: dead after a return under the psABI,   \
	 * but a caller compiled with GCC's -fipa-ra relies on those the callee    \
	 * does not write (tramp.h, "Vector state").                               \
	 */                                                                        \
	"	push %rcx\n"                                                       \
	"	.cfi_def_cfa_offset 32\n"                                          \
	"	push %rdx\n"                                                       \
	"	.cfi_def_cfa_offset 40\n"                                          \
	"	push %rbx\n"                                                       \
	"	.cfi_def_cfa_offset 48\n"                                          \
	"	.cfi_offset %rbx, -48\n"                                           \
	"	lea 48(%rsp), %rax\n"		/* rsp after the return */         \
	"	push %rax\n"                                                       \
	"	.cfi_def_cfa_offset 56\n"                                          \
	"	push %rbp\n"                                                       \
	"	.cfi_def_cfa_offset 64\n"                                          \
	"	.cfi_offset %rbp, -64\n"                                           \
	"	push %rsi\n"                                                       \
	"	.cfi_def_cfa_offset 72\n"                                          \
	"	push %rdi\n"                                                       \
	"	.cfi_def_cfa_offset 80\n"                                          \
	"	push %r8\n"                                                        \
	"	.cfi_def_cfa_offset 88\n"                                          \
	"	push %r9\n"                                                        \
	"	.cfi_def_cfa_offset 96\n"                                          \
	"	push %r10\n"                                                       \
	"	.cfi_def_cfa_offset 104\n"                                         \
	"	push %r11\n"                                                       \
	"	.cfi_def_cfa_offset 112\n"                                         \
	"	push %r12\n"                                                       \
	"	push %r13\n"                                                       \
	"	push %r14\n"                                                       \
	"	push %r15\n"                                                       \
	"	.cfi_def_cfa_offset 144\n"                                         \
	"	.cfi_offset %r12, -120\n"                                          \
	"	.cfi_offset %r13, -128\n"                                          \
	"	.cfi_offset %r14, -136\n"                                          \
	"	.cfi_offset %r15, -144\n"                                          \
	"	lea -8(%rsp), %rsp\n"		/* ip */                           \
	"	.cfi_def_cfa_offset 152\n"                                         \
	"	mov %rsp, %rdi\n"                                                  \
	"	mov %rsp, %rbx\n"                                                  \
	"	.cfi_def_cfa_register %rbx\n"                                      \
	/* All the vector and x87 state (tramp.h), below a 64-aligned rsp. */     \
	"	and $-64, %rsp\n"                                                  \
	"	sub pk_arch_vsave(%rip), %rsp\n"                                   \
	"	xor %eax, %eax\n"		/* the XSAVE header, zeroed */       \
	"	mov %rax, 512(%rsp)\n"                                             \
	"	mov %rax, 520(%rsp)\n"                                             \
	"	mov %rax, 528(%rsp)\n"                                             \
	"	mov %rax, 536(%rsp)\n"                                             \
	"	mov %rax, 544(%rsp)\n"                                             \
	"	mov %rax, 552(%rsp)\n"                                             \
	"	mov %rax, 560(%rsp)\n"                                             \
	"	mov %rax, 568(%rsp)\n"                                             \
	"	mov pk_arch_vsave+8(%rip), %eax\n"                                 \
	"	mov pk_arch_vsave+12(%rip), %edx\n"                                \
	"	cmpl $1, pk_arch_vsave+16(%rip)\n"                                 \
	"	je 3f\n"                                                           \
	"	ja 4f\n"                                                           \
	"	fxsave64 (%rsp)\n"                                                 \
	"	jmp 5f\n"                                                          \
	"3:	xsave64 (%rsp)\n"                                                  \
	"	jmp 5f\n"                                                          \
	"4:	xsavec64 (%rsp)\n"                                                 \
	"5:	emms\n"			/* an empty x87 stack for C */       \
	"	call " #dispatch "\n"                                              \
	"	mov pk_arch_vsave+8(%rip), %eax\n"                                 \
	"	mov pk_arch_vsave+12(%rip), %edx\n"                                \
	"	cmpl $0, pk_arch_vsave+16(%rip)\n"                                 \
	"	je 6f\n"                                                           \
	"	xrstor64 (%rsp)\n"                                                 \
	"	jmp 7f\n"                                                          \
	"6:	fxrstor64 (%rsp)\n"                                                \
	"7:\n"                                                                     \
	"	mov %rbx, %rsp\n"                                                  \
	"	.cfi_def_cfa_register %rsp\n"                                      \
	/*                                                                         \
	* The return value (the handler may have changed it), the other            \
	* caller-saved registers, and rbx; the other callee-saved registers        \
	* the dispatcher kept.                                                     \
	*/                                                                         \
	"	mov 128(%rsp), %rax\n"                                             \
	"	mov 120(%rsp), %rcx\n"                                             \
	"	mov 112(%rsp), %rdx\n"                                             \
	"	mov 80(%rsp), %rsi\n"                                              \
	"	mov 72(%rsp), %rdi\n"                                              \
	"	mov 64(%rsp), %r8\n"                                               \
	"	mov 56(%rsp), %r9\n"                                               \
	"	mov 48(%rsp), %r10\n"                                              \
	"	mov 40(%rsp), %r11\n"                                              \
	"	mov 104(%rsp), %rbx\n"                                             \
	"	.cfi_restore %rbx\n"                                               \
	"	cmpq $0, 136(%rsp)\n"		/* regs->flags: divert? */         \
	"	lea 144(%rsp), %rsp\n"                                             \
	"	.cfi_def_cfa_offset 8\n"                                           \
	"	jne 1f\n"                                                          \
	"	lea 8(%rsp), %rsp\n"                                               \
	"	.cfi_def_cfa_offset 0\n"                                           \
	"	jmp *-8(%rsp)\n"                                                   \
	"1:\n"                                                                     \
	"	.cfi_def_cfa_offset 8\n"                                           \
	"	ret\n"                                                             \
	"	.cfi_endproc\n"                                                    \
	".size " #name ", .-" #name "\n"                                           \
	".popsection\n")

#endif /* PK_ARCH_X86_64_RET_COMMON_H */
