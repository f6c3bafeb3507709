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
#define PK_ARCH_RET_COMMON(name, dispatch) PK_ARCH_RET_COMMON_(name, dispatch, "")

/*
 * PK_ARCH_RET_COMMON_GPR(name, dispatch, dispatch_gpr, hint) - the same,
 * for handlers that may touch general registers only
 * (PK_PROBE_F_GPR_ONLY): where the initial-exec thread-local byte @hint is
 * non-zero, @dispatch_gpr(regs, 1) is called first, with no vector or x87
 * state saved, and returns 0 when it is done, or non-zero having done
 * nothing (a handler of this return may use vector registers); then, or
 * where @hint is 0, the state is saved as above and @dispatch(regs, 0) is
 * called. @hint only spares a call that would return non-zero: the
 * default path stays as it was (that call, before the save, cost 11 ns of
 * a 47 ns return probe hit where this was measured).
 */
#define PK_ARCH_RET_COMMON_GPR(name, dispatch, dispatch_gpr, hint)                 \
	PK_ARCH_RET_COMMON_(name, dispatch,                                        \
	"	mov " #hint "@gottpoff(%rip), %rax\n"                              \
	"	cmpb $0, %fs:(%rax)\n"                                             \
	"	je 8f\n"                                                           \
	"	mov $1, %esi\n"                                                    \
	"	call " #dispatch_gpr "\n"                                          \
	"	test %rax, %rax\n"                                                 \
	"	jz 7f\n"                                                           \
	"	mov %rbx, %rdi\n"                                                  \
	"8:\n")

#define PK_ARCH_RET_COMMON_(name, dispatch, gpr_first)                             \
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
	"	and $-64, %rsp\n"                                                  \
	gpr_first                                                                  \
	/* The x87 return values (st0, st1) and the vector registers (tramp.h). */ \
	"	sub $64, %rsp\n"		/* st0, st1 */                     \
	"	mov %rsp, %r13\n"                                                  \
	"	xor %r12d, %r12d\n"		/* how many */                     \
	"	fxam\n"                                                            \
	"	fnstsw %ax\n"                                                      \
	"	and $0x4500, %ax\n"                                                \
	"	cmp $0x4100, %ax\n"		/* C3, C0: empty */                \
	"	je 2f\n"                                                           \
	"	fstpt 0(%r13)\n"                                                   \
	"	inc %r12d\n"                                                       \
	"	fxam\n"                                                            \
	"	fnstsw %ax\n"                                                      \
	"	and $0x4500, %ax\n"                                                \
	"	cmp $0x4100, %ax\n"                                                \
	"	je 2f\n"                                                           \
	"	fstpt 16(%r13)\n"                                                  \
	"	inc %r12d\n"                                                       \
	"2:	sub pk_arch_vsave(%rip), %rsp\n"                                   \
	"	mov pk_arch_vsave+16(%rip), %eax\n"		/* mode */         \
	"	cmp $1, %eax\n"                                                    \
	"	jb 3f\n"		/* PK_VSAVE_XMM */                         \
	"	je 4f\n"		/* PK_VSAVE_YMM */                         \
	"	xor %eax, %eax\n"		/* the XSAVE header, zeroed */     \
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
	"	cmpl $4, pk_arch_vsave+16(%rip)\n"		/* PK_VSAVE_XSAVEC */ \
	"	je 5f\n"                                                           \
	"	xsave64 (%rsp)\n"                                                  \
	"	jmp 9f\n"                                                          \
	"5:	xsavec64 (%rsp)\n"                                                 \
	"	jmp 9f\n"                                                          \
	"3:	movaps %xmm0, 0(%rsp)\n"                                           \
	"	movaps %xmm1, 16(%rsp)\n"                                          \
	"	movaps %xmm2, 32(%rsp)\n"                                          \
	"	movaps %xmm3, 48(%rsp)\n"                                          \
	"	movaps %xmm4, 64(%rsp)\n"                                          \
	"	movaps %xmm5, 80(%rsp)\n"                                          \
	"	movaps %xmm6, 96(%rsp)\n"                                          \
	"	movaps %xmm7, 112(%rsp)\n"                                         \
	"	movaps %xmm8, 128(%rsp)\n"                                         \
	"	movaps %xmm9, 144(%rsp)\n"                                         \
	"	movaps %xmm10, 160(%rsp)\n"                                        \
	"	movaps %xmm11, 176(%rsp)\n"                                        \
	"	movaps %xmm12, 192(%rsp)\n"                                        \
	"	movaps %xmm13, 208(%rsp)\n"                                        \
	"	movaps %xmm14, 224(%rsp)\n"                                        \
	"	movaps %xmm15, 240(%rsp)\n"                                        \
	"	jmp 9f\n"                                                          \
	"4:	vmovaps %ymm0, 0(%rsp)\n"                                          \
	"	vmovaps %ymm1, 32(%rsp)\n"                                         \
	"	vmovaps %ymm2, 64(%rsp)\n"                                         \
	"	vmovaps %ymm3, 96(%rsp)\n"                                         \
	"	vmovaps %ymm4, 128(%rsp)\n"                                        \
	"	vmovaps %ymm5, 160(%rsp)\n"                                        \
	"	vmovaps %ymm6, 192(%rsp)\n"                                        \
	"	vmovaps %ymm7, 224(%rsp)\n"                                        \
	"	vmovaps %ymm8, 256(%rsp)\n"                                        \
	"	vmovaps %ymm9, 288(%rsp)\n"                                        \
	"	vmovaps %ymm10, 320(%rsp)\n"                                       \
	"	vmovaps %ymm11, 352(%rsp)\n"                                       \
	"	vmovaps %ymm12, 384(%rsp)\n"                                       \
	"	vmovaps %ymm13, 416(%rsp)\n"                                       \
	"	vmovaps %ymm14, 448(%rsp)\n"                                       \
	"	vmovaps %ymm15, 480(%rsp)\n"                                       \
	/* r14b: every upper half is zero (tramp.c's ymm_uppers_zero()). */        \
	"	vorps %ymm1, %ymm0, %ymm0\n"                                       \
	"	vorps %ymm3, %ymm2, %ymm2\n"                                       \
	"	vorps %ymm5, %ymm4, %ymm4\n"                                       \
	"	vorps %ymm7, %ymm6, %ymm6\n"                                       \
	"	vorps %ymm9, %ymm8, %ymm8\n"                                       \
	"	vorps %ymm11, %ymm10, %ymm10\n"                                    \
	"	vorps %ymm13, %ymm12, %ymm12\n"                                    \
	"	vorps %ymm15, %ymm14, %ymm14\n"                                    \
	"	vorps %ymm2, %ymm0, %ymm0\n"                                       \
	"	vorps %ymm6, %ymm4, %ymm4\n"                                       \
	"	vorps %ymm10, %ymm8, %ymm8\n"                                      \
	"	vorps %ymm14, %ymm12, %ymm12\n"                                    \
	"	vorps %ymm4, %ymm0, %ymm0\n"                                       \
	"	vorps %ymm12, %ymm8, %ymm8\n"                                      \
	"	vorps %ymm8, %ymm0, %ymm0\n"                                       \
	"	vextractf128 $1, %ymm0, %xmm0\n"                                   \
	"	vptest %xmm0, %xmm0\n"                                             \
	"	sete %r14b\n"                                                      \
	"	vzeroupper\n"                                                      \
	"9:	xor %esi, %esi\n"                                                  \
	"	call " #dispatch "\n"                                              \
	"	mov pk_arch_vsave+16(%rip), %eax\n"                                \
	"	cmp $1, %eax\n"                                                    \
	"	jb 3f\n"                                                           \
	"	je 4f\n"                                                           \
	"	mov pk_arch_vsave+8(%rip), %eax\n"                                 \
	"	mov pk_arch_vsave+12(%rip), %edx\n"                                \
	"	xrstor64 (%rsp)\n"                                                 \
	"	jmp 9f\n"                                                          \
	"3:	movaps 0(%rsp), %xmm0\n"                                           \
	"	movaps 16(%rsp), %xmm1\n"                                          \
	"	movaps 32(%rsp), %xmm2\n"                                          \
	"	movaps 48(%rsp), %xmm3\n"                                          \
	"	movaps 64(%rsp), %xmm4\n"                                          \
	"	movaps 80(%rsp), %xmm5\n"                                          \
	"	movaps 96(%rsp), %xmm6\n"                                          \
	"	movaps 112(%rsp), %xmm7\n"                                         \
	"	movaps 128(%rsp), %xmm8\n"                                         \
	"	movaps 144(%rsp), %xmm9\n"                                         \
	"	movaps 160(%rsp), %xmm10\n"                                        \
	"	movaps 176(%rsp), %xmm11\n"                                        \
	"	movaps 192(%rsp), %xmm12\n"                                        \
	"	movaps 208(%rsp), %xmm13\n"                                        \
	"	movaps 224(%rsp), %xmm14\n"                                        \
	"	movaps 240(%rsp), %xmm15\n"                                        \
	"	jmp 9f\n"                                                          \
	"4:	vmovaps 0(%rsp), %ymm0\n"                                          \
	"	vmovaps 32(%rsp), %ymm1\n"                                         \
	"	vmovaps 64(%rsp), %ymm2\n"                                         \
	"	vmovaps 96(%rsp), %ymm3\n"                                         \
	"	vmovaps 128(%rsp), %ymm4\n"                                        \
	"	vmovaps 160(%rsp), %ymm5\n"                                        \
	"	vmovaps 192(%rsp), %ymm6\n"                                        \
	"	vmovaps 224(%rsp), %ymm7\n"                                        \
	"	vmovaps 256(%rsp), %ymm8\n"                                        \
	"	vmovaps 288(%rsp), %ymm9\n"                                        \
	"	vmovaps 320(%rsp), %ymm10\n"                                       \
	"	vmovaps 352(%rsp), %ymm11\n"                                       \
	"	vmovaps 384(%rsp), %ymm12\n"                                       \
	"	vmovaps 416(%rsp), %ymm13\n"                                       \
	"	vmovaps 448(%rsp), %ymm14\n"                                       \
	"	vmovaps 480(%rsp), %ymm15\n"                                       \
	"	test %r14b, %r14b\n"                                               \
	"	jz 9f\n"                                                           \
	"	vzeroupper\n"		/* the upper state clean again */          \
	"9:	cmp $1, %r12d\n"                                                   \
	"	jb 2f\n"                                                           \
	"	je 6f\n"                                                           \
	"	fldt 16(%r13)\n"                                                   \
	"6:	fldt (%r13)\n"                                                     \
"2:\n"                                                                             \
"7:\n"                                                                             \
	"	mov %rbx, %rsp\n"                                                  \
	"	.cfi_def_cfa_register %rsp\n"                                      \
	/*                                                                         \
	* The return value (the handler may have changed it), the other            \
	* caller-saved registers, and rbx; the other callee-saved registers        \
	* the dispatcher kept.                                                     \
	*/                                                                         \
	"	mov 32(%rsp), %r12\n"		/* scratch above */                \
	"	mov 24(%rsp), %r13\n"                                              \
	"	mov 16(%rsp), %r14\n"                                              \
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
