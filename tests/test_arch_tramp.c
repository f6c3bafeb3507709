// SPDX-License-Identifier: MIT
/* test_arch_tramp.c - the x86-64 stubs' and return trampoline's vector save in every mode tramp.c can choose (no AVX, AVX, XSAVE, XSAVEC, FXSAVE), run on this CPU with tramp.c compiled in. */

/*
 * The probe-layer tests (test_probe_vector) run the mode this CPU gets.
 * Here each mode a CPU with fewer (or other) features would get is forced
 * (pk_arch_tramp_test_modes(), built only into this test), a chunk head is
 * built and mapped, and its stubs and a PK_ARCH_RET_COMMON instance are
 * called directly with known register contents and a dispatcher that
 * clobbers what a handler may; what must survive is compared.
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

/* What t_shim loads before the call and stores after it. */
struct vstate {
	uint8_t ymm[16][32];	/* 0 */
	uint64_t gpr[7];	/* 512: rcx rsi rdi r8 r9 r10 r11 */
	double st0;		/* 568 */
	uint32_t mxcsr;		/* 576 */
};

/* void t_shim(void *target, struct vstate *s): call *target with *s loaded. */
void t_shim(void *target, struct vstate *s);
__asm__(".text\n"
	".globl t_shim\n"
	".type t_shim,@function\n"
	"t_shim:\n"
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
	"	fldl 568(%rbx)\n	ldmxcsr 576(%rbx)\n"
	"	mov 512(%rbx), %rcx\n	mov 520(%rbx), %rsi\n	mov 528(%rbx), %rdi\n"
	"	mov 536(%rbx), %r8\n	mov 544(%rbx), %r9\n	mov 552(%rbx), %r10\n"
	"	mov 560(%rbx), %r11\n"
	"	call *%rbp\n"
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
	"	fstpl 568(%rbx)\n	stmxcsr 576(%rbx)\n	vzeroupper\n"
	"	add $8, %rsp\n	pop %r15\n	pop %r14\n	pop %r13\n"
	"	pop %r12\n	pop %rbp\n	pop %rbx\n	ret\n"
	".size t_shim, .-t_shim\n");

static int calls, x87_clobber;

/* What a handler may do: every vector register, MXCSR's flags, the x87 stack. */
static void clobber(void)
{
	volatile double a = 1, b = 3;

	calls++;
	a = a / b;	/* MXCSR PE */
	__asm__ volatile(TT_SET_YMM0_15
			 "mov $-1, %%rcx\n\tmov $-1, %%rsi\n\tmov $-1, %%rdi\n\t"
			 "mov $-1, %%r8\n\tmov $-1, %%r9\n\tmov $-1, %%r10\n\t"
			 "mov $-1, %%r11"
			 ::: TT_XMM0_15, "rcx", "rsi", "rdi", "r8", "r9", "r10",
			 "r11");
	if (x87_clobber)
		__asm__ volatile("fld1\n\tfld1\n\tfld1\n\tfld1\n\t"
				 "fld1\n\tfld1\n\tfld1\n\tfld1\n\t"
				 "fstp %%st(0)\n\tfstp %%st(0)\n\tfstp %%st(0)\n\t"
				 "fstp %%st(0)\n\tfstp %%st(0)\n\tfstp %%st(0)\n\t"
				 "fstp %%st(0)\n\tfstp %%st(0)"
				 ::: "st", "st(1)", "st(2)", "st(3)", "st(4)",
				 "st(5)", "st(6)", "st(7)");
}

static void t_dispatch(struct pk_regs *r)
{
	(void)r;
	clobber();
}

/* The return trampoline's dispatcher: leave by jmp to the word's address. */
uint64_t t_ret_dispatch(struct pk_regs *r);
uint64_t t_ret_dispatch(struct pk_regs *r)
{
	clobber();
	r->flags = 0;
	return 0;
}

PK_ARCH_RET_COMMON(t_ret_common, t_ret_dispatch);
void t_ret_common(void);

/* Called like a function: the word (our return address) is just popped. */
void t_ret_enter(void);
__asm__(".text\n"
	".globl t_ret_enter\n"
	".type t_ret_enter,@function\n"
	"t_ret_enter:\n"
	"	lea 8(%rsp), %rsp\n"
	"	jmp t_ret_common\n"
	".size t_ret_enter, .-t_ret_enter\n");

static void fill(struct vstate *s)
{
	memset(s, 0, sizeof(*s));
	for (int r = 0; r < 16; r++)
		for (int i = 0; i < 32; i++)
			s->ymm[r][i] = (uint8_t)(r * 32 + i + 1);
	for (int i = 0; i < 7; i++)
		s->gpr[i] = 0x1111111111111111ull * (uint64_t)(i + 1);
	s->st0 = 42.5;
	s->mxcsr = 0x1f80;	/* the default: all masked, no flag */
}

enum what { W_XMM = 1, W_YMM = 2, W_GPR = 4, W_ST0 = 8, W_MXCSR = 16 };

/* Call @target with fill()'s state; compare what @want says must survive. */
static void run(void *target, int want, int x87, const char *what)
{
	struct vstate in, out;
	int c = calls, bad = 0;

	fill(&in);
	out = in;
	x87_clobber = x87;
	t_shim(target, &out);
	if (!ASSERT_EQ(calls, c + 1, what))
		return;
	for (int r = 0; r < 16; r++) {
		if ((want & W_XMM) && memcmp(in.ymm[r], out.ymm[r], 16)) {
			printf("  %s: xmm%d changed\n", what, r);
			bad++;
		}
		if ((want & W_YMM) && memcmp(in.ymm[r] + 16, out.ymm[r] + 16, 16)) {
			printf("  %s: ymm%d's upper half changed\n", what, r);
			bad++;
		}
	}
	if ((want & W_GPR) && memcmp(in.gpr, out.gpr, sizeof(in.gpr))) {
		printf("  %s: caller-saved general registers changed\n", what);
		bad++;
	}
	if ((want & W_ST0) && in.st0 != out.st0) {
		printf("  %s: st0 %g\n", what, out.st0);
		bad++;
	}
	if ((want & W_MXCSR) && (out.mxcsr & 0x3f)) {
		printf("  %s: MXCSR flags %#x\n", what, out.mxcsr & 0x3f);
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

/*
 * pk_arch_xsave_size() against the CPU: with every component of @mask in
 * use (ymm15's upper half, and with AVX-512 k7, zmm15's and zmm31's upper
 * parts: each the last bytes of its component), XSAVE(C) into areas of
 * 0x00 and of 0xff bytes; the last byte that changed in either must end
 * the computed size exactly (its 64-byte multiple). Before, XSAVEC's size
 * was at least CPUID(0xd, 1).EBX: every XCR0 | IA32_XSS component's.
 */
static _Alignas(64) uint8_t xs_area[16384];

static void xsave_into(uint64_t mask, int compacted, int avx512)
{
	uint32_t lo = (uint32_t)mask, hi = (uint32_t)(mask >> 32);

	if (avx512)
		__asm__ volatile("vcmptrueps %%ymm15, %%ymm15, %%ymm15\n\t"
				 "vpternlogd $0xff, %%zmm15, %%zmm15, %%zmm15\n\t"
				 "vpternlogd $0xff, %%zmm31, %%zmm31, %%zmm31\n\t"
				 "kxnorw %%k7, %%k7, %%k7\n\t"
				 "test %2, %2\n\tjz 1f\n\t"
				 "xsavec64 (%3)\n\tjmp 2f\n"
				 "1:\txsave64 (%3)\n2:\n\t"
				 "vzeroupper"
				 :: "a"(lo), "d"(hi), "r"(compacted), "r"(xs_area)
				 : "memory", "xmm15", "cc");
	else
		__asm__ volatile("vcmptrueps %%ymm15, %%ymm15, %%ymm15\n\t"
				 "test %2, %2\n\tjz 1f\n\t"
				 "xsavec64 (%3)\n\tjmp 2f\n"
				 "1:\txsave64 (%3)\n2:\n\t"
				 "vzeroupper"
				 :: "a"(lo), "d"(hi), "r"(compacted), "r"(xs_area)
				 : "memory", "xmm15", "cc");
}

static void check_xsave_size(uint64_t mask, int compacted, int avx512)
{
	uint32_t size = pk_arch_xsave_size(mask, compacted);
	size_t last = 0;

	for (int fill = 0; fill < 2; fill++) {
		memset(xs_area, fill ? 0xff : 0, sizeof(xs_area));
		xsave_into(mask, compacted, avx512);
		for (size_t i = sizeof(xs_area); i-- > 0;)
			if (xs_area[i] != (fill ? 0xff : 0)) {
				if (i + 1 > last)
					last = i + 1;
				break;
			}
	}
	printf("%s, mask %#llx: %u bytes computed, %zu written\n",
	       compacted ? "XSAVEC" : "XSAVE", (unsigned long long)mask, size, last);
	ASSERT_TRUE(last <= size, "XSAVE(C) writes within the computed size");
	ASSERT_EQ(size, (last + 63) & ~(size_t)63,
		  "the computed size is what XSAVE(C) writes, to 64 bytes");
}

int main(void)
{
	uint32_t a, b, c, d, lo, hi;
	uint64_t xcr0;
	int xsavec;
	const struct pk_arch_vsave xmm = { .mode = PK_VSAVE_XMM, .size = 256 },
				   ymm = { .mode = PK_VSAVE_YMM, .size = 512 },
				   fx = { .mode = PK_VSAVE_FX, .size = 512 };
	struct {
		const char *name;
		struct pk_arch_vsave fast, full;
		int fast_want;
	} modes[6];
	int nm = 0;

	if (!__builtin_cpu_supports("avx2"))
		SKIP("the CPU has no AVX2 (the shim loads ymm registers)");
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	xcr0 = (uint64_t)hi << 32 | lo;
	__cpuid_count(0xd, 1, a, b, c, d);
	xsavec = !!(a & 2);
	printf("XCR0 %#llx, XSAVEC %s\n", (unsigned long long)xcr0, xsavec ? "yes" : "no");
	{
		int avx512 = (xcr0 & 0xe0) == 0xe0;
		/* What tramp.c asks for: fast stub, full stub; and less. */
		const uint64_t masks[] = { 0x3, xcr0 & 0x7, xcr0 & 0xe6,
					   xcr0 & ~(0x200ull | 0x60000ull) };

		for (size_t i = 0; i < sizeof(masks) / sizeof(masks[0]); i++) {
			check_xsave_size(masks[i], 0, avx512);
			if (xsavec)
				check_xsave_size(masks[i], 1, avx512);
		}
	}
	/* No AVX: xmm0-15 at an entry, FXSAVE inside a function. */
	modes[nm++] = (typeof(modes[0])){ "no AVX", xmm, fx, W_XMM };
	/* AVX without XSAVEC, and the default here. */
	modes[nm++] = (typeof(modes[0])){ "AVX, XSAVE", ymm,
					  xs(PK_VSAVE_XSAVE, xcr0 & 0x7), W_XMM | W_YMM };
	if (xsavec)
		modes[nm++] = (typeof(modes[0])){ "AVX, XSAVEC", ymm,
						  xs(PK_VSAVE_XSAVEC, xcr0 & 0x7),
						  W_XMM | W_YMM };
	/* AVX-512's fast mode, XSAVE(C) at the entry: here without zmm/k. */
	modes[nm++] = (typeof(modes[0])){ "XSAVE at the entry",
					  xs(PK_VSAVE_XSAVE, xcr0 & 0xe6),
					  xs(PK_VSAVE_XSAVE, xcr0 & 0x7), W_XMM | W_YMM };
	if (xsavec)
		modes[nm++] = (typeof(modes[0])){ "XSAVEC at the entry",
						  xs(PK_VSAVE_XSAVEC, xcr0 & 0xe6),
						  xs(PK_VSAVE_XSAVEC, xcr0 & 0x7),
						  W_XMM | W_YMM };
	for (int i = 0; i < nm; i++) {
		char what[96];
		uint8_t *head;

		pk_arch_tramp_test_modes(&modes[i].fast, &modes[i].full);
		head = tt_map_head((uintptr_t)t_dispatch);
		if (!head)
			continue;
		/* The fast stub: at an entry, the x87 stack is empty (ABI). */
		snprintf(what, sizeof(what), "%s: fast stub", modes[i].name);
		run(head, modes[i].fast_want | W_GPR, 0, what);
		/* The full stub (at +1024, tramp.c's STUB_FULL): everything. */
		snprintf(what, sizeof(what), "%s: full stub", modes[i].name);
		run(head + 1024, W_XMM | W_GPR | W_ST0 | W_MXCSR |
			  (modes[i].full.mode == PK_VSAVE_FX ? 0 : W_YMM), 1, what);
		munmap(head, PK_TRAMP_HEAD);
		/* The return trampoline: as the fast stub, and st0. */
		snprintf(what, sizeof(what), "%s: return trampoline", modes[i].name);
		run((void *)t_ret_enter, modes[i].fast_want | W_GPR | W_ST0, 1, what);
	}
	return t_exit();
}
