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
	/* rcx, and below rsi, rdi, r8-r11: dead after a return, not saved. */     \
	"	lea -8(%rsp), %rsp\n"                                              \
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
	"	lea -48(%rsp), %rsp\n"                                             \
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
	"	and $-16, %rsp\n"                                                  \
	"	sub $32, %rsp\n"                                                   \
	"	movaps %xmm0, (%rsp)\n"		/* floating-point return values */ \
	"	movaps %xmm1, 16(%rsp)\n"                                          \
	"	call " #dispatch "\n"                                              \
	"	movaps (%rsp), %xmm0\n"                                            \
	"	movaps 16(%rsp), %xmm1\n"                                          \
	"	mov %rbx, %rsp\n"                                                  \
	"	.cfi_def_cfa_register %rsp\n"                                      \
	/*                                                                         \
	* The return value (the handler may have changed it) and rbx; the          \
	* other callee-saved registers the dispatcher kept.                        \
	*/                                                                         \
	"	mov 128(%rsp), %rax\n"                                             \
	"	mov 112(%rsp), %rdx\n"                                             \
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
