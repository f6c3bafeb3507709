// SPDX-License-Identifier: MIT
/* copy.c - a byte copy that no sanitizer intercepts, for moving whole pages of the program's memory. */

#include "arch/arch.h"

/*
 * rep movsb is neither a libc call (which ASan intercepts) nor a memory
 * access the compiler instruments: the page watchpoints (src/fault/) move
 * pages that may hold ASan redzones of globals.
 */
void pk_arch_copy_unchecked(void *dst, const void *src, size_t len)
{
	__asm__ volatile("rep movsb"
			 : "+D"(dst), "+S"(src), "+c"(len) : : "memory");
}
