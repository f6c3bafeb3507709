// SPDX-License-Identifier: MIT
/* libarmcachea.c - test_place_batch's first object: c_two plain (a jump probe fits), c_three at +0x40; libarmcacheb.c is loaded where it was, with other code at the same places. */
__asm__(
	".text\n"
	".p2align 6\n"
	".globl c_one\n.type c_one,@function\n"
	"c_one:\n"
	"	push %rbp\n"
	"	mov %rsp,%rbp\n"
	"	test %edi,%edi\n"
	"	je 2f\n"
	"	.byte 0x66, 0x90\n"		/* where B has a jmp rel8 */
	"2:	pop %rbp\n"
	"	ret\n"
	".size c_one, .-c_one\n"
	".p2align 4\n"
	".globl c_two\n.type c_two,@function\n"
	"c_two:\n"
	"	mov %edi,%eax\n"
	"	add $1,%eax\n"
	"	add $2,%eax\n"
	"	ret\n"
	".size c_two, .-c_two\n"
	".p2align 5\n"
	".globl c_three\n.type c_three,@function\n"
	"c_three:\n"		/* 32 bytes: covers B's c_pad and c_three */
	"	mov %edi,%eax\n"
	"	add $3,%eax\n"
	"	.fill 26, 1, 0x90\n"
	"	ret\n"
	".size c_three, .-c_three\n");
