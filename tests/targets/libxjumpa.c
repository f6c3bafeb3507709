// SPDX-License-Identifier: MIT
/* libxjumpa.c - xj_lib_f(a) = a + 1, xj_lib_g(a) = 2a, and nothing jumps into xj_lib_f (test_probe_xjump loads libxjumpb.so in its place). */
__asm__(".text\n"
	".globl xj_lib_f\n.type xj_lib_f,@function\n"
	"xj_lib_f:\n"
	"	mov %rdi, %rax\n"
	"	add $1, %rax\n"
	"	ret\n"
	".size xj_lib_f, .-xj_lib_f\n"
	".globl xj_lib_g\n.type xj_lib_g,@function\n"
	"xj_lib_g:\n"
	"	lea (%rdi,%rdi,1), %rax\n"
	"	ret\n"
	".size xj_lib_g, .-xj_lib_g\n");
