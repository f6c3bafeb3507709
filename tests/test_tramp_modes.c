// SPDX-License-Identifier: MIT
/* test_tramp_modes.c - the post stub (post-handlers at an entry) and the flags restore of the post and full stubs, in every vector save mode and with sahf or popf, run with tramp.c compiled in. */

/*
 * As test_arch_tramp does for the fast and full stubs: each mode tramp.c
 * can choose is forced (pk_arch_tramp_test_modes(), and
 * pk_arch_tramp_test_sahf() for CPUs without LAHF/SAHF in 64-bit mode,
 * built only into this test), a chunk head is built and mapped, and its
 * post and full stubs are called directly with known registers and flags,
 * through a dispatcher that clobbers what a handler may and, in one pass,
 * flips every flag a handler may change in regs->flags.
 */
#include <cpuid.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "harness.h"
#include "tramp_test.h"
#include "arch/arch.h"

void pk_arch_tramp_test_modes(const struct pk_arch_vsave *fast,
			      const struct pk_arch_vsave *full);
void pk_arch_tramp_test_sahf(int sahf);

/* tramp.c's STUB_POST and STUB_FULL: the post and full stubs in a head. */
#define POST_STUB 480
#define FULL_STUB 1024

struct vstate {
	uint8_t ymm[16][32];	/* 0 */
	uint64_t gpr[7];	/* 512: rcx rsi rdi r8 r9 r10 r11 */
	uint64_t flags;		/* 568: loaded before the call, stored after */
};

/* void m_shim(void *target, struct vstate *s): call *target with *s loaded. */
void m_shim(void *target, struct vstate *s);
__asm__(".text\n"
	".globl m_shim\n"
	".type m_shim,@function\n"
	"m_shim:\n"
	"	push %rbx\n	push %rbp\n	push %r12\n	push %r13\n"
	"	push %r14\n	push %r15\n	sub $8, %rsp\n"
	"	mov %rsi, %rbx\n	mov %rdi, %rbp\n"
	"	vmovdqu 0(%rbx), %ymm0\n	vmovdqu 32(%rbx), %ymm1\n"
	"	vmovdqu 64(%rbx), %ymm2\n	vmovdqu 96(%rbx), %ymm3\n"
	"	vmovdqu 128(%rbx), %ymm4\n	vmovdqu 160(%rbx), %ymm5\n"
	"	vmovdqu 192(%rbx), %ymm6\n	vmovdqu 224(%rbx), %ymm7\n"
	"	vmovdqu 256(%rbx), %ymm8\n	vmovdqu 288(%rbx), %ymm9\n"
	"	vmovdqu 320(%rbx), %ymm10\n	vmovdqu 352(%rbx), %ymm11\n"
	"	vmovdqu 384(%rbx), %ymm12\n	vmovdqu 416(%rbx), %ymm13\n"
	"	vmovdqu 448(%rbx), %ymm14\n	vmovdqu 480(%rbx), %ymm15\n"
	"	mov 512(%rbx), %rcx\n	mov 520(%rbx), %rsi\n	mov 528(%rbx), %rdi\n"
	"	mov 536(%rbx), %r8\n	mov 544(%rbx), %r9\n	mov 552(%rbx), %r10\n"
	"	mov 560(%rbx), %r11\n"
	"	push 568(%rbx)\n	popf\n"
	"	call *%rbp\n"
	"	pushf\n	pop 568(%rbx)\n	cld\n"
	"	mov %rcx, 512(%rbx)\n	mov %rsi, 520(%rbx)\n	mov %rdi, 528(%rbx)\n"
	"	mov %r8, 536(%rbx)\n	mov %r9, 544(%rbx)\n	mov %r10, 552(%rbx)\n"
	"	mov %r11, 560(%rbx)\n"
	"	vmovdqu %ymm0, 0(%rbx)\n	vmovdqu %ymm1, 32(%rbx)\n"
	"	vmovdqu %ymm2, 64(%rbx)\n	vmovdqu %ymm3, 96(%rbx)\n"
	"	vmovdqu %ymm4, 128(%rbx)\n	vmovdqu %ymm5, 160(%rbx)\n"
	"	vmovdqu %ymm6, 192(%rbx)\n	vmovdqu %ymm7, 224(%rbx)\n"
	"	vmovdqu %ymm8, 256(%rbx)\n	vmovdqu %ymm9, 288(%rbx)\n"
	"	vmovdqu %ymm10, 320(%rbx)\n	vmovdqu %ymm11, 352(%rbx)\n"
	"	vmovdqu %ymm12, 384(%rbx)\n	vmovdqu %ymm13, 416(%rbx)\n"
	"	vmovdqu %ymm14, 448(%rbx)\n	vmovdqu %ymm15, 480(%rbx)\n"
	"	vzeroupper\n"
	"	add $8, %rsp\n	pop %r15\n	pop %r14\n	pop %r13\n"
	"	pop %r12\n	pop %rbp\n	pop %rbx\n	ret\n"
	".size m_shim, .-m_shim\n");

#define USER_FLAGS 0xcd5ull	/* CF PF AF ZF SF DF OF */

static int calls, flip;

/* A handler's worth of damage: every vector register, the GPRs, the flags. */
static void m_dispatch(struct pk_regs *r)
{
	calls++;
	__asm__ volatile(TT_SET_YMM0_15
			 "mov $-1, %%rcx\n\tmov $-1, %%rsi\n\tmov $-1, %%rdi\n\t"
			 "mov $-1, %%r8\n\tmov $-1, %%r9\n\tmov $-1, %%r10\n\t"
			 "mov $-1, %%r11\n\t"
			 "xor %%eax, %%eax"	/* ZF set, the others clear */
			 ::: TT_XMM0_15, "rax", "rcx", "rsi", "rdi", "r8", "r9",
			 "r10", "r11", "cc");
	if (flip)
		r->flags ^= USER_FLAGS;
}

/*
 * One call of the stub at @target with flags @fl (and upper halves in use
 * or not, @uppers); @ymm: the upper halves must survive too.
 */
static void run(void *target, uint64_t fl, int uppers, int ymm, const char *what)
{
	struct vstate in, out;
	uint64_t want;
	int c = calls, bad = 0;

	memset(&in, 0, sizeof(in));
	for (int r = 0; r < 16; r++)
		for (int i = 0; i < 32; i++)
			in.ymm[r][i] = i < 16 || uppers ? (uint8_t)(r * 32 + i + 1) : 0;
	for (int i = 0; i < 7; i++)
		in.gpr[i] = 0x1111111111111111ull * (uint64_t)(i + 1);
	in.flags = fl | 0x2;
	out = in;
	m_shim(target, &out);
	if (!ASSERT_EQ(calls, c + 1, what))
		return;
	for (int r = 0; r < 16; r++)
		if (memcmp(in.ymm[r], out.ymm[r], ymm ? 32 : 16)) {
			printf("  %s: ymm%d changed\n", what, r);
			bad++;
		}
	if (memcmp(in.gpr, out.gpr, sizeof(in.gpr))) {
		printf("  %s: caller-saved general registers changed\n", what);
		bad++;
	}
	want = (in.flags ^ (flip ? USER_FLAGS : 0)) & USER_FLAGS;
	if ((out.flags & USER_FLAGS) != want) {
		printf("  %s: flags %#llx, want %#llx (in %#llx%s)\n", what,
		       (unsigned long long)(out.flags & USER_FLAGS),
		       (unsigned long long)want, (unsigned long long)in.flags,
		       flip ? ", flipped by the handler" : "");
		bad++;
	}
	ASSERT_EQ(bad, 0, what);
}

static struct pk_arch_vsave xs(uint32_t mode, uint64_t mask)
{
	uint32_t a, b, c, d, size = 576;

	for (unsigned int i = 2; i < 63; i++) {
		if (!(mask & (1ull << i)))
			continue;
		__cpuid_count(0xd, i, a, b, c, d);
		if (a + b > size)
			size = a + b;
	}
	return (struct pk_arch_vsave){ .mode = mode, .size = (size + 63) & ~63u,
				       .mask_lo = (uint32_t)mask,
				       .mask_hi = (uint32_t)(mask >> 32) };
}

int main(void)
{
	static const uint64_t flag_sets[] = { 0, 0x8d5, 0xcd5, 0x400, 0x801, 0x44 };
	uint32_t a, b, c, d, lo, hi;
	uint64_t xcr0;
	int xsavec, sahf;
	const struct pk_arch_vsave xmm = { .mode = PK_VSAVE_XMM, .size = 256 },
				   ymm = { .mode = PK_VSAVE_YMM, .size = 512 },
				   fx = { .mode = PK_VSAVE_FX, .size = 512 };
	struct {
		const char *name;
		struct pk_arch_vsave fast, full;
		int fast_ymm, full_ymm;
	} modes[5];
	int nm = 0;

	if (!__builtin_cpu_supports("avx2"))
		SKIP("the CPU has no AVX2 (the shim loads ymm registers)");
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	xcr0 = (uint64_t)hi << 32 | lo;
	__cpuid_count(0xd, 1, a, b, c, d);
	xsavec = !!(a & 2);
	sahf = __get_cpuid(0x80000001, &a, &b, &c, &d) && (c & bit_LAHF_LM);
	modes[nm++] = (typeof(modes[0])){ "no AVX", xmm, fx, 0, 0 };
	modes[nm++] = (typeof(modes[0])){ "AVX, XSAVE", ymm,
					  xs(PK_VSAVE_XSAVE, xcr0 & 0x7), 1, 1 };
	if (xsavec)
		modes[nm++] = (typeof(modes[0])){ "AVX, XSAVEC", ymm,
						  xs(PK_VSAVE_XSAVEC, xcr0 & 0x7), 1, 1 };
	modes[nm++] = (typeof(modes[0])){ "XSAVE at the entry",
					  xs(PK_VSAVE_XSAVE, xcr0 & 0xe6),
					  xs(PK_VSAVE_XSAVE, xcr0 & 0x7), 1, 1 };
	if (xsavec)
		modes[nm++] = (typeof(modes[0])){ "XSAVEC at the entry",
						  xs(PK_VSAVE_XSAVEC, xcr0 & 0xe6),
						  xs(PK_VSAVE_XSAVEC, xcr0 & 0x7), 1, 1 };
	for (int s = sahf; s >= 0; s--) {
		pk_arch_tramp_test_sahf(s);
		for (int i = 0; i < nm; i++) {
			char what[128];
			uint8_t *head;

			pk_arch_tramp_test_modes(&modes[i].fast, &modes[i].full);
			head = tt_map_head((uintptr_t)m_dispatch);
			if (!head)
				continue;
			for (size_t f = 0; f < sizeof(flag_sets) / sizeof(flag_sets[0]); f++)
				for (flip = 0; flip < 2; flip++)
					for (int up = 0; up < 2; up++) {
						snprintf(what, sizeof(what),
							 "%s, %s: post stub, flags %#llx%s",
							 modes[i].name, s ? "sahf" : "popf",
							 (unsigned long long)flag_sets[f],
							 up ? ", upper halves in use" : "");
						run(head + POST_STUB, flag_sets[f], up,
						    modes[i].fast_ymm, what);
						snprintf(what, sizeof(what),
							 "%s, %s: full stub, flags %#llx%s",
							 modes[i].name, s ? "sahf" : "popf",
							 (unsigned long long)flag_sets[f],
							 up ? ", upper halves in use" : "");
						run(head + FULL_STUB, flag_sets[f], up,
						    modes[i].full_ymm, what);
					}
			flip = 0;
			munmap(head, PK_TRAMP_HEAD);
		}
	}
	return t_exit();
}
