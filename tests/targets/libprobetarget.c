// SPDX-License-Identifier: MIT
/* libprobetarget.c - functions for probe tests: C ones with known results, asm ones with known bytes. */
#include <stdint.h>

/* Keeps a local in the red zone below rsp (a leaf): the trampoline must not touch it. */
__attribute__((noinline, visibility("default"))) long pt_sum6(long a, long b, long c,
							       long d, long e, long f)
{
	volatile long x = a;

	return x + b * 2 + c * 3 + d * 4 + e * 5 + f * 6;
}

/* Floating-point arguments arrive in xmm0/xmm1. */
__attribute__((noinline, visibility("default"))) double pt_fmix(double a, double b,
								 long n)
{
	volatile double x = a;

	return x * b + (double)n;
}

/* A static function: only in .symtab. */
__attribute__((noinline)) static long pt_static_mul(long a, long b)
{
	volatile long x = a;

	return x * b;
}

/* Same name as a static function of the test program: ambiguous unqualified. */
__attribute__((noinline, used)) static long pt_dup_static(long a)
{
	volatile long x = a;

	return x + 1;
}

__attribute__((visibility("default"))) long (*pt_get_static_mul(void))(long, long)
{
	(void)pt_dup_static;
	return pt_static_mul;
}

/*
 * Functions with exact bytes:
 *   pt_asm_loop   a loop branches back to +2, inside the first 5 bytes;
 *   pt_asm_rip    starts with a RIP-relative load;
 *   pt_asm_endbr  endbr64, then plain code: probed at +4;
 *   pt_asm_short  a 1-byte ret;
 *   pt_asm_jcc    test; jz (rel8, widened when moved): -1 for 0, else a+1;
 *   pt_asm_call   starts with a call (would return into the trampoline);
 *   pt_asm_icall  starts with an indirect call through a register;
 *   pt_asm_jrcxz  starts with jrcxz (no rel32 form: cannot be moved) whose
 *                 target is inside the first 5 bytes: returns a.
 */
__asm__(".text\n"
	".globl pt_asm_loop\n.type pt_asm_loop,@function\n"
	"pt_asm_loop:\n"
	"	xor %eax, %eax\n"
	"1:	add %rdi, %rax\n"
	"	dec %rdi\n"
	"	jnz 1b\n"
	"	ret\n"
	".size pt_asm_loop, .-pt_asm_loop\n"
	".globl pt_asm_rip\n.type pt_asm_rip,@function\n"
	"pt_asm_rip:\n"
	"	mov pt_asm_data(%rip), %rax\n"
	"	add %rdi, %rax\n"
	"	ret\n"
	".size pt_asm_rip, .-pt_asm_rip\n"
	".globl pt_asm_endbr\n.type pt_asm_endbr,@function\n"
	"pt_asm_endbr:\n"
	"	endbr64\n"
	"	push %rbp\n"
	"	mov %rsp, %rbp\n"
	"	lea (%rdi,%rsi,1), %rax\n"
	"	pop %rbp\n"
	"	ret\n"
	".size pt_asm_endbr, .-pt_asm_endbr\n"
	".globl pt_asm_short\n.type pt_asm_short,@function\n"
	"pt_asm_short:\n"
	".Lpt_short:\n"
	"	ret\n"
	".size pt_asm_short, .-pt_asm_short\n"
	".globl pt_asm_jcc\n.type pt_asm_jcc,@function\n"
	"pt_asm_jcc:\n"
	"	test %rdi, %rdi\n"
	"	jz 1f\n"
	"	lea 1(%rdi), %rax\n"
	"	ret\n"
	"1:	mov $-1, %rax\n"
	"	ret\n"
	".size pt_asm_jcc, .-pt_asm_jcc\n"
	".globl pt_asm_call\n.type pt_asm_call,@function\n"
	"pt_asm_call:\n"
	"	call .Lpt_short\n"
	"	mov %rdi, %rax\n"
	"	ret\n"
	".size pt_asm_call, .-pt_asm_call\n"
	".globl pt_asm_icall\n.type pt_asm_icall,@function\n"
	"pt_asm_icall:\n"
	"	call *%rsi\n"
	"	mov %rdi, %rax\n"
	"	nop\n"
	"	nop\n"
	"	nop\n"
	"	ret\n"
	".size pt_asm_icall, .-pt_asm_icall\n"
	".globl pt_asm_jrcxz\n.type pt_asm_jrcxz,@function\n"
	"pt_asm_jrcxz:\n"
	"	jrcxz 1f\n"
	"1:	mov %rdi, %rax\n"
	"	ret\n"
	".size pt_asm_jrcxz, .-pt_asm_jrcxz\n"
	".data\n.balign 8\npt_asm_data: .quad 100\n.text\n");

/*
 * pt_asm_post   mov %rdi,%rax; add $5,%rax; add %rsi,%rax; ret: a post-
 *               handler after the first instruction sees rax == rdi.
 * pt_asm_live   a leaf that keeps data in the red zone and distinct values
 *               in every GPR and CF, AF, SF, OF and DF set, across a probe
 *               point at pt_live_off (3 register-to-itself movs, 9 bytes),
 *               then writes flags, the 15 GPRs other than rsp, rsp and
 *               three red-zone words to pt_live_out() (20 words).
 */
__asm__(".text\n"
	".globl pt_asm_post\n.type pt_asm_post,@function\n"
	"pt_asm_post:\n"
	"	mov %rdi, %rax\n"
	"	add $5, %rax\n"
	"	add %rsi, %rax\n"
	"	ret\n"
	".size pt_asm_post, .-pt_asm_post\n"
	".globl pt_asm_live\n.type pt_asm_live,@function\n"
	"pt_asm_live:\n"
	"	push %rbx\n push %rbp\n push %r12\n push %r13\n push %r14\n push %r15\n"
	"	movq $0x1111, -16(%rsp)\n"
	"	movq $0x2222, -64(%rsp)\n"
	"	movq $0x3333, -128(%rsp)\n"
	"	mov $0x7f, %al\n"
	"	add $1, %al\n"		/* OF SF AF set, ZF PF clear */
	"	stc\n"
	"	std\n"
	"	movabs $0xa0a0a0a0a0a0a001, %rax\n"
	"	movabs $0xa0a0a0a0a0a0a002, %rbx\n"
	"	movabs $0xa0a0a0a0a0a0a003, %rcx\n"
	"	movabs $0xa0a0a0a0a0a0a004, %rdx\n"
	"	movabs $0xa0a0a0a0a0a0a005, %rsi\n"
	"	movabs $0xa0a0a0a0a0a0a006, %rdi\n"
	"	movabs $0xa0a0a0a0a0a0a007, %rbp\n"
	"	movabs $0xa0a0a0a0a0a0a008, %r8\n"
	"	movabs $0xa0a0a0a0a0a0a009, %r9\n"
	"	movabs $0xa0a0a0a0a0a0a00a, %r10\n"
	"	movabs $0xa0a0a0a0a0a0a00b, %r11\n"
	"	movabs $0xa0a0a0a0a0a0a00c, %r12\n"
	"	movabs $0xa0a0a0a0a0a0a00d, %r13\n"
	"	movabs $0xa0a0a0a0a0a0a00e, %r14\n"
	"	movabs $0xa0a0a0a0a0a0a00f, %r15\n"
	".Lpt_live_probe:\n"
	"	mov %rax, %rax\n"
	"	mov %rbx, %rbx\n"
	"	mov %rcx, %rcx\n"
	"	pushfq\n"			/* -8(%rsp): no red-zone data there */
	"	popq .Lpt_live_out+0(%rip)\n"
	"	cld\n"
	"	mov %rax, .Lpt_live_out+8(%rip)\n"
	"	mov %rbx, .Lpt_live_out+16(%rip)\n"
	"	mov %rcx, .Lpt_live_out+24(%rip)\n"
	"	mov %rdx, .Lpt_live_out+32(%rip)\n"
	"	mov %rsi, .Lpt_live_out+40(%rip)\n"
	"	mov %rdi, .Lpt_live_out+48(%rip)\n"
	"	mov %rbp, .Lpt_live_out+56(%rip)\n"
	"	mov %r8, .Lpt_live_out+64(%rip)\n"
	"	mov %r9, .Lpt_live_out+72(%rip)\n"
	"	mov %r10, .Lpt_live_out+80(%rip)\n"
	"	mov %r11, .Lpt_live_out+88(%rip)\n"
	"	mov %r12, .Lpt_live_out+96(%rip)\n"
	"	mov %r13, .Lpt_live_out+104(%rip)\n"
	"	mov %r14, .Lpt_live_out+112(%rip)\n"
	"	mov %r15, .Lpt_live_out+120(%rip)\n"
	"	mov %rsp, .Lpt_live_out+128(%rip)\n"
	"	mov -16(%rsp), %rax\n mov %rax, .Lpt_live_out+136(%rip)\n"
	"	mov -64(%rsp), %rax\n mov %rax, .Lpt_live_out+144(%rip)\n"
	"	mov -128(%rsp), %rax\n mov %rax, .Lpt_live_out+152(%rip)\n"
	"	pop %r15\n pop %r14\n pop %r13\n pop %r12\n pop %rbp\n pop %rbx\n"
	"	ret\n"
	".size pt_asm_live, .-pt_asm_live\n"
	".data\n.balign 8\n"
	".Lpt_live_out: .zero 160\n"
	"pt_live_off_v: .quad .Lpt_live_probe - pt_asm_live\n"
	".text\n"
	/* Accessors: a copy relocation would give the test its own copy. */
	".globl pt_live_out\n.type pt_live_out,@function\n"
	"pt_live_out:\n"
	"	lea .Lpt_live_out(%rip), %rax\n"
	"	ret\n"
	".size pt_live_out, .-pt_live_out\n"
	".globl pt_live_off\n.type pt_live_off,@function\n"
	"pt_live_off:\n"
	"	mov pt_live_off_v(%rip), %rax\n"
	"	ret\n"
	".size pt_live_off, .-pt_live_off\n");
