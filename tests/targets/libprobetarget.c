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
 *   pt_asm_icall  starts with an indirect call through a register.
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
	".data\n.balign 8\npt_asm_data: .quad 100\n.text\n");
