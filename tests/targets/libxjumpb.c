// SPDX-License-Identifier: MIT
/* libxjumpb.c - libxjumpa.c's xj_lib_f, and an xj_lib_g that jumps to xj_lib_f+3, inside a jump probe's displaced bytes. */
__asm__(".text\n"
	".globl xj_lib_f\n.type xj_lib_f,@function\n"
	"xj_lib_f:\n"
	"	mov %rdi, %rax\n"
	".Lxj_lib_f3:\n"
	"	add $1, %rax\n"
	"	ret\n"
	".size xj_lib_f, .-xj_lib_f\n"
	".globl xj_lib_g\n.type xj_lib_g,@function\n"
	"xj_lib_g:\n"
	"	lea (%rdi,%rdi,1), %rax\n"
	"	{disp32} jmp .Lxj_lib_f3\n"
	".size xj_lib_g, .-xj_lib_g\n"
	/* Not the same size as libxjumpa.so (sym.c's cache keys on it). */
	".globl xj_lib_pad\n.type xj_lib_pad,@function\n"
	"xj_lib_pad:\n"
	"	ret\n"
	".size xj_lib_pad, .-xj_lib_pad\n");
