// SPDX-License-Identifier: MIT
/* vector_targets.c - test_probe_vector's probed functions: AVX arguments and return values, and code that keeps vector and general registers live where a probe runs. Built with -mavx2 (tests/extra.cmake); called only once the CPU is known to have AVX2. */
#include <immintrin.h>

#include "harness.h"
#include "vector_targets.h"

/* The horizontal sums of two __m256d arguments (ymm0, ymm1). */
T_NOINLINE double vt_sum8(__m256d a, __m256d b)
{
	__m256d s = _mm256_add_pd(a, b);
	__m128d lo = _mm256_castpd256_pd128(s), hi = _mm256_extractf128_pd(s, 1);

	lo = _mm_add_pd(lo, hi);
	return _mm_cvtsd_f64(_mm_add_sd(lo, _mm_unpackhi_pd(lo, lo)));
}

/* { x, x + 1, x + 2, x + 3 }, returned in ymm0. */
T_NOINLINE __m256d vt_ret4(double x)
{
	volatile double v = x;

	return _mm256_set_pd(v + 3, v + 2, v + 1, v);
}

T_NOINLINE double vt_ret_double(double x)
{
	volatile double v = x;

	return v * 2.5;
}

/* Calls vt_sum8 as the compiler would, with the values in ymm0 and ymm1. */
double vt_call_sum8(const double a[4], const double b[4])
{
	return vt_sum8(_mm256_loadu_pd(a), _mm256_loadu_pd(b));
}

/* Calls vt_ret4 and stores all four lanes of its ymm0. */
void vt_call_ret4(double x, double out[4])
{
	_mm256_storeu_pd(out, vt_ret4(x));
}

void *vt_addr_sum8(void)
{
	return (void *)vt_sum8;
}

void *vt_addr_ret4(void)
{
	return (void *)vt_ret4;
}

/* What the AVX2 string functions leave: every ymm's upper half cleared. */
void vt_clobber_vector(void)
{
	__asm__ volatile("vpxor %%xmm0, %%xmm0, %%xmm0\n\t"
			 "vpxor %%xmm1, %%xmm1, %%xmm1\n\t"
			 "vpxor %%xmm2, %%xmm2, %%xmm2\n\t"
			 "vpxor %%xmm8, %%xmm8, %%xmm8\n\t"
			 "vpxor %%xmm9, %%xmm9, %%xmm9\n\t"
			 "vpxor %%xmm15, %%xmm15, %%xmm15\n\t"
			 "vpcmpeqd %%ymm3, %%ymm3, %%ymm3\n\t"
			 "vpcmpeqd %%ymm9, %%ymm9, %%ymm9\n\t"
			 "vzeroupper"
			 ::: "xmm0", "xmm1", "xmm2", "xmm3", "xmm8", "xmm9", "xmm15");
}

/*
 * The assembly targets (vector_targets.h says what each does). Each one's
 * probe point is a label whose offset from the function's start is in a
 * .rodata word; the displaced bytes there are plain moves (a jump probe
 * fits) and nothing jumps into them.
 */
__asm__(".text\n"
	/* long vt_mid_xmm9(long x): x goes through xmm9 across the probe. */
	".globl vt_mid_xmm9\n"
	".type vt_mid_xmm9,@function\n"
	"vt_mid_xmm9:\n"
	"	endbr64\n"
	"	movq %rdi, %xmm9\n"
	"1:	mov %rdi, %rax\n"
	"	mov %rax, %rdx\n"
	"	mov %rdx, %rcx\n"
	"	movq %xmm9, %rax\n"
	"	ret\n"
	".size vt_mid_xmm9, .-vt_mid_xmm9\n"
	".section .rodata\n"
	".globl vt_mid_xmm9_off\n"
	"vt_mid_xmm9_off: .long 1b - vt_mid_xmm9\n"
	".text\n"

	/*
	 * void vt_mid_ymm(long x, long out[12]): ymm15 = x in all lanes,
	 * ymm3 = x + 1, xmm8 = x + 2 (low lane) across the probe; stores
	 * them after it, then vzeroupper.
	 */
	".globl vt_mid_ymm\n"
	".type vt_mid_ymm,@function\n"
	"vt_mid_ymm:\n"
	"	endbr64\n"
	"	movq %rdi, %xmm15\n"
	"	vpbroadcastq %xmm15, %ymm15\n"
	"	lea 1(%rdi), %rax\n"
	"	movq %rax, %xmm3\n"
	"	vpbroadcastq %xmm3, %ymm3\n"
	"	lea 2(%rdi), %rax\n"
	"	movq %rax, %xmm8\n"
	"1:	mov %rdi, %rax\n"
	"	mov %rax, %rdx\n"
	"	mov %rdx, %rcx\n"
	"	vmovdqu %ymm15, (%rsi)\n"
	"	vmovdqu %ymm3, 32(%rsi)\n"
	"	movq %xmm8, 64(%rsi)\n"
	"	vzeroupper\n"
	"	ret\n"
	".size vt_mid_ymm, .-vt_mid_ymm\n"
	".section .rodata\n"
	".globl vt_mid_ymm_off\n"
	"vt_mid_ymm_off: .long 1b - vt_mid_ymm\n"
	".text\n"

	/*
	 * void vt_mid_x87(const double *in, uint64_t out[2]): *in in st0
	 * across the probe, stored as a double to out[0] after it; MXCSR
	 * stored after it to out[1] (its exception flags as the caller left
	 * them, a handler's arithmetic aside).
	 */
	".globl vt_mid_x87\n"
	".type vt_mid_x87,@function\n"
	"vt_mid_x87:\n"
	"	endbr64\n"
	"	fldl (%rdi)\n"
	"1:	mov %rdi, %rax\n"
	"	mov %rax, %rdx\n"
	"	mov %rdx, %rcx\n"
	"	fstpl (%rsi)\n"
	"	stmxcsr 8(%rsi)\n"
	"	ret\n"
	".size vt_mid_x87, .-vt_mid_x87\n"
	".section .rodata\n"
	".globl vt_mid_x87_off\n"
	"vt_mid_x87_off: .long 1b - vt_mid_x87\n"
	".text\n"

	/*
	 * long vt_leaf(long x): x + 1, touching rax only, as a callee whose
	 * caller was compiled with GCC's -fipa-ra (the default at -O2) sees
	 * it: the caller may keep values in any register the callee leaves
	 * alone.
	 */
	".globl vt_leaf\n"
	".type vt_leaf,@function\n"
	"vt_leaf:\n"
	"	endbr64\n"
	"	mov %rdi, %rax\n"
	"	add $1, %rax\n"
	"	nop\n"
	"	ret\n"
	".size vt_leaf, .-vt_leaf\n"

	/*
	 * long vt_ipa_caller(long x, long out[16]): calls vt_leaf(x) with
	 * rcx rsi r8-r11 = x + 1..6 and xmm2, xmm8, xmm15 = x + 7..9, ymm9's
	 * upper lanes = x + 10, and stores what they hold after the call:
	 * out[0..5] the general registers, out[6..8] the xmm, out[9] ymm9's
	 * lane 3; rdi is kept too (out[10]: the out pointer's survival is
	 * checked by the store itself).
	 */
	".globl vt_ipa_caller\n"
	".type vt_ipa_caller,@function\n"
	"vt_ipa_caller:\n"
	"	endbr64\n"
	"	push %rbx\n"
	"	push %r12\n"
	"	sub $8, %rsp\n"
	"	mov %rsi, %rbx\n"
	"	mov %rdi, %r12\n"
	"	lea 1(%rdi), %rcx\n"
	"	lea 2(%rdi), %rsi\n"
	"	lea 3(%rdi), %r8\n"
	"	lea 4(%rdi), %r9\n"
	"	lea 5(%rdi), %r10\n"
	"	lea 6(%rdi), %r11\n"
	"	lea 7(%rdi), %rax\n"
	"	movq %rax, %xmm2\n"
	"	lea 8(%rdi), %rax\n"
	"	movq %rax, %xmm8\n"
	"	lea 9(%rdi), %rax\n"
	"	movq %rax, %xmm15\n"
	"	lea 10(%rdi), %rax\n"
	"	movq %rax, %xmm9\n"
	"	vpbroadcastq %xmm9, %ymm9\n"
	"	call vt_leaf\n"
	"	mov %rcx, 0(%rbx)\n"
	"	mov %rsi, 8(%rbx)\n"
	"	mov %r8, 16(%rbx)\n"
	"	mov %r9, 24(%rbx)\n"
	"	mov %r10, 32(%rbx)\n"
	"	mov %r11, 40(%rbx)\n"
	"	movq %xmm2, 48(%rbx)\n"
	"	movq %xmm8, 56(%rbx)\n"
	"	movq %xmm15, 64(%rbx)\n"
	"	vextracti128 $1, %ymm9, %xmm9\n"
	"	vpextrq $1, %xmm9, 72(%rbx)\n"
	"	mov %rdi, 80(%rbx)\n"
	"	vzeroupper\n"
	"	add $8, %rsp\n"
	"	pop %r12\n"
	"	pop %rbx\n"
	"	ret\n"
	".size vt_ipa_caller, .-vt_ipa_caller\n");

/* x * 3 in st0. */
T_NOINLINE long double vt_ret_ld(double x)
{
	volatile long double v = x;

	return v * 3;
}

/*
 * AVX-512 (run only where the CPU has AVX512F): long vt_avx512_caller(long
 * x, long out[10]) puts x + 1 in every lane of zmm16, the low 16 bits of
 * x + 2 in k1, calls vt_leaf(x) and stores zmm16 to out[0..7], k1 to
 * out[8]: what a -fipa-ra caller keeps across a callee that leaves them
 * alone. long vt_mid_zmm(long x, long out[10]) does the same around a
 * probe point inside it instead of a call.
 */
__asm__(".text\n"
	".globl vt_avx512_caller\n"
	".type vt_avx512_caller,@function\n"
	"vt_avx512_caller:\n"
	"	endbr64\n"
	"	push %rbx\n"
	"	push %r12\n"
	"	sub $8, %rsp\n"
	"	mov %rsi, %rbx\n"
	"	mov %rdi, %r12\n"
	"	lea 1(%rdi), %rax\n"
	"	vpbroadcastq %rax, %zmm16\n"
	"	lea 2(%rdi), %eax\n"
	"	kmovw %eax, %k1\n"
	"	call vt_leaf\n"
	"	vmovdqu64 %zmm16, (%rbx)\n"
	"	kmovw %k1, %ecx\n"
	"	mov %rcx, 64(%rbx)\n"
	"	vzeroupper\n"
	"	add $8, %rsp\n"
	"	pop %r12\n"
	"	pop %rbx\n"
	"	ret\n"
	".size vt_avx512_caller, .-vt_avx512_caller\n"

	".globl vt_mid_zmm\n"
	".type vt_mid_zmm,@function\n"
	"vt_mid_zmm:\n"
	"	endbr64\n"
	"	lea 1(%rdi), %rax\n"
	"	vpbroadcastq %rax, %zmm16\n"
	"	lea 2(%rdi), %eax\n"
	"	kmovw %eax, %k1\n"
	"1:	mov %rdi, %rax\n"
	"	mov %rax, %rdx\n"
	"	mov %rdx, %rcx\n"
	"	vmovdqu64 %zmm16, (%rsi)\n"
	"	kmovw %k1, %ecx\n"
	"	mov %rcx, 64(%rsi)\n"
	"	vzeroupper\n"
	"	ret\n"
	".size vt_mid_zmm, .-vt_mid_zmm\n"
	".section .rodata\n"
	".globl vt_mid_zmm_off\n"
	"vt_mid_zmm_off: .long 1b - vt_mid_zmm\n"
	".text\n");

/* What a handler compiled for AVX-512 may do: zmm16 and k1 cleared. */
__attribute__((target("avx512f"))) void vt_clobber_avx512(void)
{
	__asm__ volatile("vpxord %%zmm16, %%zmm16, %%zmm16\n\t"
			 "kxorw %%k1, %%k1, %%k1\n\t"
			 "vzeroupper" ::: "xmm16", "k1");
}
