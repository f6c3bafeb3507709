// SPDX-License-Identifier: MIT
/* libxreffix.c - for test_xref_bias0: linked at a fixed address (0x50000000), so loaded there with load bias 0, as the non-PIE test program is; c_one's jmp rel8 lands at c_two + 2, inside the bytes a jump probe on c_two would displace. */
__asm__(".text\n.p2align 6\n"
	".globl c_one\n.type c_one,@function\nc_one:\n"
	"	test %edi,%edi\n	je 1f\n	mov %edi,%eax\n"
	"	.byte 0xeb, c_two_l + 2 - (. + 1)\n"
	"1:	xor %eax,%eax\n	ret\n.size c_one, .-c_one\n"
	".p2align 4\n.globl c_two\n.type c_two,@function\nc_two:\nc_two_l:\n"
	"	mov %edi,%eax\n	add $1,%eax\n	add $2,%eax\n	ret\n.size c_two, .-c_two\n");
