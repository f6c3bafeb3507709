// SPDX-License-Identifier: MIT
/* test_probe_vector.c - vector, x87 and caller-saved registers across probe handlers: AVX arguments at an entry, live xmm/ymm in the middle of a function, return values, callers that rely on what the callee leaves alone (GCC -fipa-ra); jump and int3 probes. */

/*
 * Handlers are ordinary C: they may use any caller-saved register, and
 * glibc's AVX2 string functions (which snprintf calls) end with vzeroupper,
 * clearing every ymm's upper half. The handlers here do that on purpose
 * (vt_clobber_vector()) and call snprintf too, then check that the probed
 * code computes what it computes unprobed. The targets are in
 * vector_targets.c, built with -mavx2; this file has no AVX code, so the
 * CPU check below runs first.
 */
#include <cpuid.h>
#include <stdio.h>
#include <xmmintrin.h>
#include <string.h>

#include "harness.h"
#include "probekit.h"
#include "vector_targets.h"

static int hits;

/* A handler as a user writes one: formats a line (AVX2 string functions). */
static void use_libc(void)
{
	char buf[96];

	snprintf(buf, sizeof(buf), "hit %d of a probe on %s", hits, "a vector function");
	hits += strlen(buf) > 0;
}

static int have_avx512;

static void pre_clobber(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p, (void)r, (void)ctx;
	use_libc();
	vt_clobber_vector();
	if (have_avx512)
		vt_clobber_avx512();
}

/* A handler's own use of the caller-saved general registers. */
static void clobber_gprs(void)
{
	__asm__ volatile("mov $-1, %%rcx\n\tmov $-1, %%rsi\n\tmov $-1, %%rdi\n\t"
			 "mov $-1, %%r8\n\tmov $-1, %%r9\n\tmov $-1, %%r10\n\t"
			 "mov $-1, %%r11"
			 ::: "rcx", "rsi", "rdi", "r8", "r9", "r10", "r11");
}

static void ret_clobber(struct pk_retprobe *rp, struct pk_regs *r, void *data,
			void *ctx)
{
	(void)rp, (void)r, (void)data, (void)ctx;
	use_libc();
	vt_clobber_vector();
	if (have_avx512)
		vt_clobber_avx512();
	clobber_gprs();
}

/* All eight x87 registers, as a handler computing with long double may. */
static void ret_x87(struct pk_retprobe *rp, struct pk_regs *r, void *data,
		    void *ctx)
{
	(void)rp, (void)r, (void)data, (void)ctx;
	hits++;
	__asm__ volatile("fld1\n\tfld1\n\tfld1\n\tfld1\n\tfld1\n\tfld1\n\tfld1\n\tfld1\n\t"
			 "fstp %%st(0)\n\tfstp %%st(0)\n\tfstp %%st(0)\n\tfstp %%st(0)\n\t"
			 "fstp %%st(0)\n\tfstp %%st(0)\n\tfstp %%st(0)\n\tfstp %%st(0)"
			 ::: "st", "st(1)", "st(2)", "st(3)", "st(4)", "st(5)",
			 "st(6)", "st(7)");
}

/* All eight x87 registers, and an inexact division (MXCSR's PE flag). */
static void pre_x87(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	volatile double a = 1, b = 3;

	(void)p, (void)r, (void)ctx;
	hits++;
	a = a / b;
	ret_x87(NULL, NULL, NULL, NULL);
}

static struct pk_probe *arm_with(void *fn, size_t off, unsigned int flags,
				 pk_probe_handler_fn pre, const char *what)
{
	PK_OPTS(pk_probe_opts, o, .addr = fn, .offset = off, .pre = pre,
		.flags = flags);
	struct pk_probe *p = NULL;

	if (!ASSERT_OK(pk_probe_create(&o, &p), what))
		return NULL;
	if (!ASSERT_OK(pk_probe_register(&p, 1), what)) {
		pk_probe_destroy(p);
		return NULL;
	}
	return p;
}

static struct pk_probe *arm(void *fn, size_t off, unsigned int flags,
			    const char *what)
{
	return arm_with(fn, off, flags, pre_clobber, what);
}

static void disarm(struct pk_probe *p)
{
	if (!p)
		return;
	pk_probe_unregister(&p, 1);
	pk_probe_destroy(p);
}

static struct pk_retprobe *arm_ret(void *fn, pk_retprobe_ret_fn ret,
				   const char *what)
{
	PK_OPTS(pk_retprobe_opts, o, .addr = fn, .ret = ret);
	struct pk_retprobe *rp = NULL;

	if (!ASSERT_OK(pk_retprobe_create(&o, &rp), what))
		return NULL;
	if (!ASSERT_OK(pk_retprobe_register(&rp, 1), what)) {
		pk_retprobe_destroy(rp);
		return NULL;
	}
	return rp;
}

static void disarm_ret(struct pk_retprobe *rp)
{
	if (!rp)
		return;
	pk_retprobe_unregister(&rp, 1);
	pk_retprobe_destroy(rp);
}

static const char *kind_name(unsigned int flags)
{
	return flags & PK_PROBE_F_INT3 ? "int3" : "jump";
}

/* An entry probe on double vt_sum8(__m256d a, __m256d b): ymm0/ymm1 whole. */
static void entry_m256d(unsigned int flags)
{
	static const double a[4] = { 1, 2, 3, 4 }, b[4] = { 10, 20, 30, 40 };
	struct pk_probe *p = arm(vt_addr_sum8(), 0, flags, "entry probe on vt_sum8");
	int h = hits;
	double v;

	if (!p)
		return;
	v = vt_call_sum8(a, b);
	ASSERT_TRUE(hits > h, "the entry handler ran");
	if (!ASSERT_EQ((long long)v, 110, "vt_sum8(__m256d {1,2,3,4}, {10,20,30,40})"))
		printf("  %s probe: ymm0/ymm1 upper halves lost (%g)\n",
		       kind_name(flags), v);
	disarm(p);
}

/* An offset probe inside vt_mid_xmm9, whose xmm9 holds x across it. */
static void mid_xmm9(unsigned int flags)
{
	struct pk_probe *p = arm((void *)vt_mid_xmm9, vt_mid_xmm9_off, flags,
				 "offset probe in vt_mid_xmm9");
	int h = hits;
	long v;

	if (!p)
		return;
	v = vt_mid_xmm9(0x1234567);
	ASSERT_TRUE(hits > h, "the handler ran");
	if (!ASSERT_EQ(v, 0x1234567, "xmm9 across a mid-function probe"))
		printf("  %s probe: xmm9 lost\n", kind_name(flags));
	disarm(p);
}

/* ymm15, ymm3 (upper halves too) and xmm8 live across an offset probe. */
static void mid_ymm(unsigned int flags)
{
	struct pk_probe *p = arm((void *)vt_mid_ymm, vt_mid_ymm_off, flags,
				 "offset probe in vt_mid_ymm");
	long out[12], x = 0x7100;
	int h = hits, bad = 0;

	if (!p)
		return;
	memset(out, 0, sizeof(out));
	vt_mid_ymm(x, out);
	ASSERT_TRUE(hits > h, "the handler ran");
	for (int i = 0; i < 4; i++) {
		bad += !ASSERT_EQ(out[i], x, "ymm15 lane across a mid-function probe");
		bad += !ASSERT_EQ(out[4 + i], x + 1, "ymm3 lane across a mid-function probe");
	}
	bad += !ASSERT_EQ(out[8], x + 2, "xmm8 across a mid-function probe");
	if (bad)
		printf("  %s probe: %d of 9 vector values lost\n", kind_name(flags), bad);
	disarm(p);
}

/* st0 and MXCSR live across an offset probe whose handler uses both. */
static void mid_x87(unsigned int flags)
{
	struct pk_probe *p = arm_with((void *)vt_mid_x87, vt_mid_x87_off, flags,
				      pre_x87, "offset probe in vt_mid_x87");
	static const double in = 42.5;
	unsigned int csr = _mm_getcsr();
	uint64_t out[2] = { 0, 0 };
	double v;
	int h = hits;

	if (!p)
		return;
	_mm_setcsr(csr & ~0x3fu);	/* no exception flag set */
	vt_mid_x87(&in, out);
	_mm_setcsr(csr);
	ASSERT_TRUE(hits > h, "the handler ran");
	memcpy(&v, &out[0], sizeof(v));
	if (!ASSERT_EQ((long long)(v * 10), 425, "st0 across a mid-function probe"))
		printf("  %s probe: st0 is %g\n", kind_name(flags), v);
	if (!ASSERT_EQ(out[1] & 0x3f, 0, "MXCSR's flags across a mid-function probe"))
		printf("  %s probe: MXCSR %#x\n", kind_name(flags), (unsigned int)out[1]);
	disarm(p);
}

/*
 * An entry probe leaves the upper state as it found it: not in use
 * (XGETBV(1)'s XINUSE bit 2), where the CPU reports it, when the call
 * was made with it clean. (Saving and restoring ymm0-15 would leave it
 * in use, all zero, and SSE code slower after on many CPUs.)
 */
static void entry_clean(void)
{
	struct pk_probe *p;
	unsigned int ea, eb, ec, ed, lo, hi;
	long v;

	__cpuid_count(0xd, 1, ea, eb, ec, ed);
	if (!(ea & 0x4)) {
		printf("no XGETBV(1): the upper state's use is not checked\n");
		return;
	}
	p = arm((void *)vt_leaf, 0, 0, "entry probe on vt_leaf");
	if (!p)
		return;
	__asm__ volatile("vzeroupper");
	v = vt_leaf(4);
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
	(void)hi;
	ASSERT_EQ(v, 5, "vt_leaf(4)");
	ASSERT_EQ(lo & 4, 0, "ymm upper state not in use after an entry probe hit");
	disarm(p);
}

/* zmm16 (all lanes) and k1 as vt_avx512_caller() / vt_mid_zmm() left them. */
static void check_zmm(const long out[10], long x, const char *what)
{
	int bad = 0;

	for (int i = 0; i < 8; i++)
		bad += out[i] != x + 1;
	bad += (out[8] & 0xffff) != ((x + 2) & 0xffff);
	if (bad)
		printf("  %s: %d of 9 zmm16 lanes and k1 lost\n", what, bad);
	ASSERT_EQ(bad, 0, what);
}

/* AVX-512: zmm16 and k1 across entry, mid-function and return probes. */
static void avx512(void)
{
	struct pk_retprobe *rp;
	struct pk_probe *p;
	long out[10];

	memset(out, 0, sizeof(out));
	vt_avx512_caller(0x300, out);
	check_zmm(out, 0x300, "zmm16/k1 across vt_leaf unprobed");
	for (int k = 0; k < 2; k++) {
		unsigned int flags = k ? PK_PROBE_F_INT3 : 0;

		p = arm((void *)vt_leaf, 0, flags, "entry probe on vt_leaf");
		if (p) {
			memset(out, 0, sizeof(out));
			vt_avx512_caller(0x400, out);
			check_zmm(out, 0x400, "zmm16/k1 across an entry probe");
			disarm(p);
		}
		p = arm((void *)vt_mid_zmm, vt_mid_zmm_off, flags,
			"offset probe in vt_mid_zmm");
		if (p) {
			memset(out, 0, sizeof(out));
			vt_mid_zmm(0x500, out);
			check_zmm(out, 0x500, "zmm16/k1 across a mid-function probe");
			disarm(p);
		}
	}
	rp = arm_ret((void *)vt_leaf, ret_clobber, "return probe on vt_leaf");
	if (rp) {
		memset(out, 0, sizeof(out));
		vt_avx512_caller(0x600, out);
		check_zmm(out, 0x600, "zmm16/k1 across a return probe");
		disarm_ret(rp);
	}
}

/* What vt_ipa_caller() finds after its call to vt_leaf(x). */
static int check_ipa(long x, const char *what)
{
	static const char *const names[] = { "rcx", "rsi", "r8", "r9", "r10",
					     "r11", "xmm2", "xmm8", "xmm15",
					     "ymm9 lane 3", "rdi" };
	static const long want[] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0 };
	long out[16], r;
	int bad = 0;

	memset(out, 0, sizeof(out));
	r = vt_ipa_caller(x, out);
	ASSERT_EQ(r, x + 1, "vt_leaf's result");
	for (unsigned int i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		if (out[i] != x + want[i]) {
			printf("  %s: %s is %#lx, not %#lx\n", what, names[i],
			       (unsigned long)out[i], (unsigned long)(x + want[i]));
			bad++;
		}
	}
	ASSERT_EQ(bad, 0, what);
	return bad;
}

/* A caller that keeps values where the callee does not write (-fipa-ra). */
static void entry_ipa(unsigned int flags)
{
	struct pk_probe *p = arm((void *)vt_leaf, 0, flags, "entry probe on vt_leaf");
	int h = hits;

	if (!p)
		return;
	check_ipa(0x5000, flags & PK_PROBE_F_INT3 ?
		  "registers the callee leaves, across an int3 entry probe" :
		  "registers the callee leaves, across an entry probe");
	ASSERT_TRUE(hits > h, "the handler ran");
	disarm(p);
}

static void ret_ipa(void)
{
	struct pk_retprobe *rp = arm_ret((void *)vt_leaf, ret_clobber,
					 "return probe on vt_leaf");
	int h = hits;

	if (!rp)
		return;
	check_ipa(0x6000, "registers the callee leaves, across a return probe");
	ASSERT_TRUE(hits > h, "the return handler ran");
	disarm_ret(rp);
}

/* __m256d returned in ymm0; double in xmm0; long double in st0. */
static void ret_values(void)
{
	struct pk_retprobe *rp = arm_ret(vt_addr_ret4(), ret_clobber,
					 "return probe on vt_ret4");
	double out[4];
	long double ld;
	int h = hits;

	if (rp) {
		memset(out, 0, sizeof(out));
		vt_call_ret4(100, out);
		ASSERT_TRUE(hits > h, "the return handler ran");
		for (int i = 0; i < 4; i++)
			if (!ASSERT_EQ((long long)out[i], 100 + i,
				       "a lane of the __m256d vt_ret4 returned"))
				printf("  return probe: lane %d is %g\n", i, out[i]);
		disarm_ret(rp);
	}
	rp = arm_ret((void *)vt_ret_double, ret_clobber,
		     "return probe on vt_ret_double");
	if (rp) {
		ASSERT_EQ((long long)(vt_ret_double(4) * 10), 100,
			  "the double vt_ret_double returned (xmm0)");
		disarm_ret(rp);
	}
	rp = arm_ret((void *)vt_ret_ld, ret_x87, "return probe on vt_ret_ld");
	if (rp) {
		h = hits;
		ld = vt_ret_ld(7);
		ASSERT_TRUE(hits > h, "the x87 return handler ran");
		if (!ASSERT_EQ((long long)ld, 21,
			       "the long double vt_ret_ld returned (st0)"))
			printf("  return probe: st0 is %Lg\n", ld);
		disarm_ret(rp);
	}
}

int main(void)
{
	unsigned int a, b, c, d;

	if (!__builtin_cpu_supports("avx") || !__builtin_cpu_supports("avx2"))
		SKIP("the CPU has no AVX2 (the targets are built with -mavx2)");
	__cpuid_count(7, 0, a, b, c, d);
	have_avx512 = (b & bit_AVX512F) && __builtin_cpu_supports("avx512f");
	printf("AVX-512F: %s\n", have_avx512 ? "present: zmm/k cases run" :
	       "absent: the zmm/k cases do not run");
	/* Reference results, unprobed. */
	{
		static const double x[4] = { 1, 2, 3, 4 }, y[4] = { 10, 20, 30, 40 };

		ASSERT_EQ((long long)vt_call_sum8(x, y), 110, "vt_sum8 unprobed");
		ASSERT_EQ(vt_mid_xmm9(5), 5, "vt_mid_xmm9 unprobed");
		if (check_ipa(0x100, "vt_ipa_caller unprobed"))
			return t_exit();
	}
	for (int k = 0; k < 2; k++) {
		unsigned int flags = k ? PK_PROBE_F_INT3 : 0;

		entry_m256d(flags);
		mid_xmm9(flags);
		mid_ymm(flags);
		entry_ipa(flags);
		mid_x87(flags);
	}
	entry_clean();
	ret_ipa();
	ret_values();
	if (have_avx512)
		avx512();
	return t_exit();
}
