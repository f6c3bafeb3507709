// SPDX-License-Identifier: MIT
/* libtexttarget.c - a library whose function starts with a known patchable site. */

/* nop5; mov eax,1; ret; mov eax,2; ret: a jmp +6 at the site makes it return 2. */
__asm__(".text\n"
	".globl pk_tt_site_fn\n"
	".type pk_tt_site_fn, @function\n"
	"pk_tt_site_fn:\n"
	"	.byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n"
	"	movl $1, %eax\n"
	"	ret\n"
	"	movl $2, %eax\n"
	"	ret\n"
	".size pk_tt_site_fn, . - pk_tt_site_fn\n");
