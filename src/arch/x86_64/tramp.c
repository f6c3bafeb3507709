// SPDX-License-Identifier: MIT
/* tramp.c - x86-64 trampoline code: a probe chunk's stubs and divert code, a probe point's slot, the return trampoline. */

/*
 * The layout is tramp.h's; this file writes its bytes. Everything here
 * runs before the code is reachable (the probe layer fills a free slot or a
 * new chunk, then patches a site to lead there). The return trampoline's
 * common code is ordinary PK_NOPROBE text, instantiated by the probe layer
 * from ret_common.h's PK_ARCH_RET_COMMON().
 *
 * The stubs save and restore every register a handler may see or change,
 * so handlers are plain C: a struct pk_regs on the stack (the stub's return
 * address is its last word, pk_private_ret), the stack aligned to 16 for
 * the call, the vector state around it on a 64-byte aligned area below
 * (as tramp.h's "Vector state" says), DF cleared.
 * The call and the stub's ret pair up, so the return stack buffer predicts
 * both. The fast stub skips the saved flags; the others restore them
 * without popf (flags_code()).
 */
#include <cpuid.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "arch/arch.h"

/* The chunk head (tramp.h's picture). */
#define STUB_FAST 0
#define STUB_POST 480
#define HEAD_DIVERT 960
#define STUB_FULL 1024
#define STUB_FAST_GPR 1280
#define STUB_POST_GPR 1536
#define STUB_FULL_GPR 1792
#define HEAD_DISPATCH 2032
#define HEAD_DISPATCH_FULL 2040
#define DIVERT_LEN 37

#define SLOT_DIVERT 26	/* the je, or its NOP */
#define JCC32_LEN 6
_Static_assert(PK_TRAMP_SLOT_ENTRY + PK_TRAMP_CALL_LEN == SLOT_DIVERT,
	       "the stub call, then the je");
_Static_assert(SLOT_DIVERT + JCC32_LEN == PK_TRAMP_SLOT_COPY,
	       "the je, then the copy");
_Static_assert(PK_TRAMP_SLOT_RET == PK_TRAMP_SLOT_ENTRY + 10,
	       "the return address of call_seq()'s call");
_Static_assert(HEAD_DISPATCH_FULL + 8 <= PK_TRAMP_HEAD, "the head's words");
_Static_assert(DIVERT_LEN <= STUB_FULL - HEAD_DIVERT,
	       "the divert code fits before the full stub");
_Static_assert(PK_TRAMP_COPY_MAX ==
	       PK_TRAMP_SLOT_SIZE - PK_TRAMP_SLOT_COPY - PK_ARCH_JMP_LEN,
	       "the copy, then the jmp back");

/* The offset of initial-exec thread-local @tls from the thread pointer. */
static int32_t tp_off(const void *tls)
{
	uintptr_t tp;

	__asm__("mov %%fs:0, %0" : "=r"(tp));
	return (int32_t)(intptr_t)((uintptr_t)tls - tp);
}

static size_t put(uint8_t *b, const void *bytes, size_t len)
{
	memcpy(b, bytes, len);
	return len;
}

/* ---------------------------------------------------------- vector state */

/*
 * What a handler may clobber, and what each stub saves of it (tramp.h
 * gives the reasons): XCR0's state components, by number.
 */
#define XS_X87 0x1ull
#define XS_SSE 0x2ull
#define XS_AVX 0x4ull
#define XS_AVX512 0xe0ull	/* opmask k0-7, ZMM_Hi256, Hi16_ZMM */
#define XS_PKRU 0x200ull
#define XS_AMX 0x60000ull	/* TILECFG, TILEDATA */

/* How a stub saves its vector state: PK_VSAVE_* (tramp.h). */
static struct {
	struct pk_arch_vsave full;	/* the full stub's */
	int sahf;			/* LAHF/SAHF in 64-bit mode */
} vec;

/* The fast stub's and the return trampoline's (PK_ARCH_RET_COMMON reads it). */
struct pk_arch_vsave pk_arch_vsave;

static void xgetbv(uint32_t idx, uint32_t *lo, uint32_t *hi)
{
	__asm__ volatile(".byte 0x0f, 0x01, 0xd0" /* xgetbv */
			 : "=a"(*lo), "=d"(*hi) : "c"(idx));
}

/*
 * The bytes XSAVE (@compacted 0: the standard format) or XSAVEC writes
 * for the components @mask (the CPU takes mask & XCR0), a multiple of 64.
 * Both start with the legacy region and the header (576 bytes). The
 * standard format puts component i >= 2 at CPUID(0xd, i).EBX: the area
 * ends where the last one requested does (no larger than CPUID(0xd,
 * 0).EBX, the size for all of XCR0). The compacted one packs only the
 * requested components, in order, each aligned to 64 if CPUID(0xd,
 * i).ECX bit 1 says so; CPUID(0xd, 1).EBX is the size of every XCR0 |
 * IA32_XSS component, AMX's 8 KB tiles too, far more than a stub saves.
 */
uint32_t pk_arch_xsave_size(uint64_t mask, int compacted)
{
	uint32_t a, b, c, d, lo, hi, size = 576;

	xgetbv(0, &lo, &hi);
	mask &= (uint64_t)hi << 32 | lo;
	for (unsigned int i = 2; i < 63; i++) {
		if (!(mask & (1ull << i)))
			continue;
		__cpuid_count(0xd, i, a, b, c, d);
		if (compacted) {
			if (c & 0x2)
				size = (size + 63) & ~63u;
			size += a;
		} else if (b + a > size) {
			size = b + a;	/* offset + size */
		}
	}
	return (size + 63) & ~63u;
}

static void set_xsave(struct pk_arch_vsave *v, int xsavec, uint64_t m)
{
	v->mode = xsavec ? PK_VSAVE_XSAVEC : PK_VSAVE_XSAVE;
	v->mask_lo = (uint32_t)m;
	v->mask_hi = (uint32_t)(m >> 32);
	v->size = pk_arch_xsave_size(m, xsavec);
}

/* What the CPU and the kernel give this process: once, before any stub. */
static void vec_init_once(void)
{
	uint32_t a, b, c, d, lo, hi;
	uint64_t xcr0 = 0;
	int xsavec = 0;

	vec.full = (struct pk_arch_vsave){ .mode = PK_VSAVE_FX, .size = 512 };
	vec.sahf = __get_cpuid(0x80000001, &a, &b, &c, &d) && (c & bit_LAHF_LM);
	pk_arch_vsave = (struct pk_arch_vsave){ .mode = PK_VSAVE_XMM, .size = 256 };
	if (__get_cpuid(1, &a, &b, &c, &d) && (c & bit_OSXSAVE) &&
	    __get_cpuid_max(0, NULL) >= 0xd) {
		xgetbv(0, &lo, &hi);
		xcr0 = (uint64_t)hi << 32 | lo;
		__cpuid_count(0xd, 1, a, b, c, d);
		xsavec = !!(a & 0x2);
	}
	if ((xcr0 & (XS_X87 | XS_SSE)) != (XS_X87 | XS_SSE))
		return;
	/*
	 * Inside a function: everything a handler may change but PKRU (not
	 * vector state: changed only on purpose, by pkey_set()) and the AMX
	 * tiles (usable only after arch_prctl(ARCH_REQ_XCOMP_PERM); no
	 * compiler or libc uses them behind a handler's back).
	 */
	set_xsave(&vec.full, xsavec, xcr0 & ~(XS_PKRU | XS_AMX));
	if ((xcr0 & XS_AVX512) == XS_AVX512)
		set_xsave(&pk_arch_vsave, xsavec, XS_SSE | XS_AVX | XS_AVX512);
	else if (xcr0 & XS_AVX)
		pk_arch_vsave = (struct pk_arch_vsave){ .mode = PK_VSAVE_YMM,
							.size = 512 };
}

static void vec_init(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, vec_init_once);
}

#ifdef PK_TEST_TRAMP
/*
 * test_arch_tramp only (tramp.c compiled into it; never in the library):
 * the stubs built from now on save as @fast (the fast stub and
 * PK_ARCH_RET_COMMON) and @full say, as on a CPU with fewer features.
 */
void pk_arch_tramp_test_modes(const struct pk_arch_vsave *fast,
			      const struct pk_arch_vsave *full);
void pk_arch_tramp_test_modes(const struct pk_arch_vsave *fast,
			      const struct pk_arch_vsave *full)
{
	vec_init();
	pk_arch_vsave = *fast;
	vec.full = *full;
}

/* The same: stubs built from now on restore the flags by popf (@sahf 0). */
void pk_arch_tramp_test_sahf(int sahf);
void pk_arch_tramp_test_sahf(int sahf)
{
	vec_init();
	vec.sahf = sahf;
}
#endif

/* The ModRM, SIB and displacement of [rsp + @disp] with register @reg. */
static size_t modrm_rsp(uint8_t *b, unsigned int reg, int32_t disp)
{
	size_t n = 0;
	int d8 = disp >= -128 && disp <= 127;

	b[n++] = (uint8_t)((d8 ? 0x44 : 0x84) | (reg & 7) << 3);
	b[n++] = 0x24;				/* SIB: [rsp] */
	if (d8)
		b[n++] = (uint8_t)disp;
	else
		n += pk_tramp_put32(b + n, (uint32_t)disp);
	return n;
}

/* movaps xmm@r <-> [rsp + 16 r], r = 0..15; @load: to the register. */
static size_t xmm_moves(uint8_t *b, int load)
{
	size_t n = 0;

	for (unsigned int r = 0; r < 16; r++) {
		if (r >= 8)
			b[n++] = 0x44;			/* REX.R */
		b[n++] = 0x0f;
		b[n++] = load ? 0x28 : 0x29;
		n += modrm_rsp(b + n, r, (int32_t)(16 * r));
	}
	return n;
}

/*
 * vmovaps ymm@r <-> [rsp + 32 r], r = 0..15, through rax = rsp + 128 and
 * rdx = rsp + 384 (saved, so scratch here): every move a 5-byte VEX2 with
 * an 8-bit displacement, so that both entry stubs fit the chunk head.
 */
static size_t ymm_moves(uint8_t *b, int load)
{
	size_t n = put(b, "\x48\x8d\x84\x24\x80\x00\x00\x00"	/* lea rax,[rsp+128] */
		       "\x48\x8d\x94\x24\x80\x01\x00\x00", 16);	/* lea rdx,[rsp+384] */

	for (unsigned int r = 0; r < 16; r++) {
		b[n++] = 0xc5;				/* VEX2 */
		b[n++] = r >= 8 ? 0x7c : 0xfc;		/* ~R, vvvv=1111, L=1 */
		b[n++] = load ? 0x28 : 0x29;
		b[n++] = (uint8_t)(0x40 | (r & 7) << 3 | (r < 8 ? 0 : 2));
		b[n++] = (uint8_t)(32 * (r & 7) - 128);	/* disp8 */
	}
	return n;
}

/*
 * After ymm_moves(): r12b = 1 if every saved upper half is zero (then
 * vzeroupper after the restore gives back exactly that, with the upper
 * state clean for SSE code). In the registers, all saved now: a tree of
 * vorps (depth 4), then the upper half of the result tested. Not from the
 * saved area: 128-bit loads of the upper halves of 256-bit stores just
 * made are not store-forwarded on every CPU, and a chain of 16 dependent
 * vpor on them cost more than the whole save.
 */
static size_t vorps_ymm(uint8_t *b, unsigned int d, unsigned int s)
{
	b[0] = 0xc4;					/* VEX3, map 0F */
	b[1] = (uint8_t)((d < 8) << 7 | 1 << 6 | (s < 8) << 5 | 0x01);
	b[2] = (uint8_t)((~d & 15) << 3 | 1 << 2);	/* vvvv = d, L = 1 */
	b[3] = 0x56;					/* vorps */
	b[4] = (uint8_t)(0xc0 | (d & 7) << 3 | (s & 7));
	return 5;
}

static size_t ymm_uppers_zero(uint8_t *b)
{
	size_t n = 0;

	for (unsigned int step = 1; step < 16; step *= 2)
		for (unsigned int r = 0; r < 16; r += 2 * step)
			n += vorps_ymm(b + n, r, r + step);	/* ymm r |= ymm r+step */
	return n + put(b + n, "\xc4\xe3\x7d\x19\xc0\x01"	/* vextractf128 $1,ymm0,xmm0 */
		       "\xc4\xe2\x79\x17\xc0"		/* vptest xmm0,xmm0 */
		       "\x41\x0f\x94\xc4"		/* sete r12b */
		       "\xc5\xf8\x77", 18);		/* vzeroupper */
}

/* mov $@m's halves, %eax / %edx: the XSAVE feature request. */
static size_t xsave_mask(uint8_t *b, uint64_t m)
{
	size_t n = 0;

	b[n++] = 0xb8;
	n += pk_tramp_put32(b + n, (uint32_t)m);
	b[n++] = 0xba;
	n += pk_tramp_put32(b + n, (uint32_t)(m >> 32));
	return n;
}

/* The XSAVE header (the area's bytes 512-575) zeroed, as XRSTOR wants. */
static size_t xsave_header(uint8_t *b)
{
	size_t n = put(b, "\x31\xc0", 2);		/* xor eax,eax */

	for (int32_t off = 512; off < 576; off += 8) {
		n += put(b + n, "\x48\x89", 2);		/* mov [rsp+off],rax */
		n += modrm_rsp(b + n, 0, off);
	}
	return n;
}

/* xsave64/xsavec64/xrstor64/fxsave64/fxrstor64 (%rsp). */
static size_t xs_insn(uint8_t *b, uint8_t op, unsigned int ext)
{
	b[0] = 0x48;
	b[1] = 0x0f;
	b[2] = op;
	b[3] = (uint8_t)(ext << 3 | 4);
	b[4] = 0x24;
	return 5;
}

/*
 * A stub's vector save (@load 0) or restore (1) as @v says, with rsp at
 * its area (@v->size bytes, 64-aligned). @full: inside a function, where
 * the x87 stack may hold values: emptied (emms) for the handler after the
 * save.
 */
static size_t vec_code(uint8_t *b, const struct pk_arch_vsave *v, int full,
		       int load)
{
	uint64_t m = (uint64_t)v->mask_hi << 32 | v->mask_lo;
	size_t n = 0;

	switch (v->mode) {
	case PK_VSAVE_XMM:
		return xmm_moves(b, load);
	case PK_VSAVE_YMM:
		n = ymm_moves(b, load);
		if (!load)
			return n + ymm_uppers_zero(b + n);
		return n + put(b + n, "\x45\x84\xe4"	/* test r12b,r12b */
			       "\x74\x03"		/* jz +3 */
			       "\xc5\xf8\x77", 8);	/* vzeroupper */
	case PK_VSAVE_FX:
		n = xs_insn(b, 0xae, load ? 1 : 0);	/* fx(save|rstor)64 */
		break;
	default:
		if (!load)
			n += xsave_header(b + n);
		n += xsave_mask(b + n, m);
		if (load)
			n += xs_insn(b + n, 0xae, 5);	/* xrstor64 */
		else if (v->mode == PK_VSAVE_XSAVEC)
			n += xs_insn(b + n, 0xc7, 4);	/* xsavec64 */
		else
			n += xs_insn(b + n, 0xae, 4);	/* xsave64 */
		break;
	}
	if (!load && full)
		n += put(b + n, "\x0f\x77", 2);		/* emms: an empty x87
							   stack, as a C
							   function expects */
	return n;
}

/*
 * pk_arch_vsave_call() (arch.h): the save of the fast stub, in C and asm.
 * Compiled for general registers only, so that nothing here touches a
 * vector register before the save or after the restore.
 */
#define VS_XMM(op, a)							\
	__asm__ volatile(op " %%xmm0, 0(%0)\n\t" op " %%xmm1, 16(%0)\n\t"	\
			 op " %%xmm2, 32(%0)\n\t" op " %%xmm3, 48(%0)\n\t"	\
			 op " %%xmm4, 64(%0)\n\t" op " %%xmm5, 80(%0)\n\t"	\
			 op " %%xmm6, 96(%0)\n\t" op " %%xmm7, 112(%0)\n\t"	\
			 op " %%xmm8, 128(%0)\n\t" op " %%xmm9, 144(%0)\n\t"	\
			 op " %%xmm10, 160(%0)\n\t" op " %%xmm11, 176(%0)\n\t"	\
			 op " %%xmm12, 192(%0)\n\t" op " %%xmm13, 208(%0)\n\t"	\
			 op " %%xmm14, 224(%0)\n\t" op " %%xmm15, 240(%0)"	\
			 :: "r"(a) : "memory")
#define VL_XMM(op, a)							\
	__asm__ volatile(op " 0(%0), %%xmm0\n\t" op " 16(%0), %%xmm1\n\t"	\
			 op " 32(%0), %%xmm2\n\t" op " 48(%0), %%xmm3\n\t"	\
			 op " 64(%0), %%xmm4\n\t" op " 80(%0), %%xmm5\n\t"	\
			 op " 96(%0), %%xmm6\n\t" op " 112(%0), %%xmm7\n\t"	\
			 op " 128(%0), %%xmm8\n\t" op " 144(%0), %%xmm9\n\t"	\
			 op " 160(%0), %%xmm10\n\t" op " 176(%0), %%xmm11\n\t"	\
			 op " 192(%0), %%xmm12\n\t" op " 208(%0), %%xmm13\n\t"	\
			 op " 224(%0), %%xmm14\n\t" op " 240(%0), %%xmm15"	\
			 :: "r"(a) : "memory")
#define VS_YMM(op, a)							\
	__asm__ volatile(op " %%ymm0, 0(%0)\n\t" op " %%ymm1, 32(%0)\n\t"	\
			 op " %%ymm2, 64(%0)\n\t" op " %%ymm3, 96(%0)\n\t"	\
			 op " %%ymm4, 128(%0)\n\t" op " %%ymm5, 160(%0)\n\t"	\
			 op " %%ymm6, 192(%0)\n\t" op " %%ymm7, 224(%0)\n\t"	\
			 op " %%ymm8, 256(%0)\n\t" op " %%ymm9, 288(%0)\n\t"	\
			 op " %%ymm10, 320(%0)\n\t" op " %%ymm11, 352(%0)\n\t"	\
			 op " %%ymm12, 384(%0)\n\t" op " %%ymm13, 416(%0)\n\t"	\
			 op " %%ymm14, 448(%0)\n\t" op " %%ymm15, 480(%0)"	\
			 :: "r"(a) : "memory")
#define VL_YMM(op, a)							\
	__asm__ volatile(op " 0(%0), %%ymm0\n\t" op " 32(%0), %%ymm1\n\t"	\
			 op " 64(%0), %%ymm2\n\t" op " 96(%0), %%ymm3\n\t"	\
			 op " 128(%0), %%ymm4\n\t" op " 160(%0), %%ymm5\n\t"	\
			 op " 192(%0), %%ymm6\n\t" op " 224(%0), %%ymm7\n\t"	\
			 op " 256(%0), %%ymm8\n\t" op " 288(%0), %%ymm9\n\t"	\
			 op " 320(%0), %%ymm10\n\t" op " 352(%0), %%ymm11\n\t"	\
			 op " 384(%0), %%ymm12\n\t" op " 416(%0), %%ymm13\n\t"	\
			 op " 448(%0), %%ymm14\n\t" op " 480(%0), %%ymm15"	\
			 :: "r"(a) : "memory")

__attribute__((target("general-regs-only"), no_sanitize_address)) PK_NOPROBE
void *pk_arch_vsave_call(void *(*fn)(void *), void *arg)
{
	const struct pk_arch_vsave v = pk_arch_vsave;
	uint8_t buf[v.size + 64];
	uint8_t *a = (uint8_t *)(((uintptr_t)buf + 63) & ~(uintptr_t)63);
	volatile uint64_t *hdr = (volatile uint64_t *)(a + 512);
	void *ret;

	switch (v.mode) {
	case PK_VSAVE_XMM:
		VS_XMM("movaps", a);
		break;
	case PK_VSAVE_YMM:
		VS_YMM("vmovaps", a);
		break;
	default:
		for (int i = 0; i < 8; i++)
			hdr[i] = 0;		/* the XSAVE header, as XRSTOR wants */
		if (v.mode == PK_VSAVE_XSAVEC)
			__asm__ volatile("xsavec64 (%0)" :: "r"(a), "a"(v.mask_lo),
					 "d"(v.mask_hi) : "memory");
		else
			__asm__ volatile("xsave64 (%0)" :: "r"(a), "a"(v.mask_lo),
					 "d"(v.mask_hi) : "memory");
		break;
	}
	ret = fn(arg);
	switch (v.mode) {
	case PK_VSAVE_XMM:
		VL_XMM("movaps", a);
		break;
	case PK_VSAVE_YMM:
		VL_YMM("vmovaps", a);
		break;
	default:
		__asm__ volatile("xrstor64 (%0)" :: "r"(a), "a"(v.mask_lo),
				 "d"(v.mask_hi) : "memory");
		break;
	}
	return ret;
}

/* ------------------------------------------------------------ chunk head */

/*
 * The flags back from the saved image (rsp + 16, above the saved rcx and
 * rax, which are scratch until popped after this): DF, OF (0x7f + 1
 * overflows, 0x7f + 0 does not), then SF ZF AF PF CF by sahf. The flags a
 * handler may change (PK_ARCH_USER_FLAGS) are exactly these; popf would
 * restore the others too, which no handler changes, and costs 4-5 ns
 * (microcoded) where this costs under 1. Without LAHF/SAHF in 64-bit mode
 * (the first x86-64 CPUs): popf.
 */
static size_t flags_code(uint8_t *b)
{
	static const uint8_t code[] = {
		0x48, 0x8b, 0x44, 0x24, 0x10,		/* mov rax,[rsp+16] */
		0xfc,					/* cld */
		0xa9, 0x00, 0x04, 0x00, 0x00,		/* test eax,0x400 (DF) */
		0x74, 0x01,				/* jz +1 */
		0xfd,					/* std */
		0x89, 0xc1,				/* mov ecx,eax */
		0xc1, 0xe9, 0x0b,			/* shr ecx,11 */
		0x83, 0xe1, 0x01,			/* and ecx,1 (OF) */
		0x80, 0xc1, 0x7f,			/* add cl,0x7f: OF */
		0x88, 0xc4,				/* mov ah,al */
		0x9e,					/* sahf */
	};

	return put(b, code, sizeof(code));
}

/* The save: flags, the general registers as a struct pk_regs. */
static const uint8_t stub_save[] = {
	0x9c, 0x50, 0x51, 0x52, 0x53,		/* pushf; rax rcx rdx rbx */
	0x48, 0x8d, 0x84, 0x24, 0xb0, 0, 0, 0,	/* lea rax,[rsp+176] */
	0x50, 0x55, 0x56, 0x57,			/* rsp rbp rsi rdi */
	0x41, 0x50, 0x41, 0x51, 0x41, 0x52, 0x41, 0x53, /* r8-r11 */
	0x41, 0x54, 0x41, 0x55, 0x41, 0x56, 0x41, 0x57, /* r12-r15 */
	0x48, 0x83, 0xec, 0x08,			/* sub rsp,8 (ip) */
	0x48, 0x89, 0xe7,			/* mov rdi,rsp */
	0x48, 0x89, 0xe3,			/* mov rbx,rsp */
	0x48, 0x83, 0xe4, 0xc0,			/* and rsp,-64 */
};

/*
 * After the handlers: the general registers back (rsp from rbx), then as
 * @kind says: the flags or the divert test, and the ret into the slot.
 */
static size_t stub_tail(uint8_t *b, int kind, int32_t dsp)
{
	static const uint8_t restore[] = {
		0x48, 0x89, 0xdc,			/* mov rsp,rbx */
		0x48, 0x83, 0xc4, 0x08,			/* add rsp,8 (ip) */
		0x41, 0x5f, 0x41, 0x5e, 0x41, 0x5d, 0x41, 0x5c, /* r15-r12 */
		0x41, 0x5b, 0x41, 0x5a, 0x41, 0x59, 0x41, 0x58, /* r11-r8 */
		0x5f, 0x5e, 0x5d,			/* rdi rsi rbp */
		0x48, 0x83, 0xc4, 0x08,			/* skip rsp */
		0x5b, 0x5a,				/* rbx rdx */
	};
	static const uint8_t pop_rcx_rax[] = {
		0x59, 0x58,				/* rcx rax */
	};
	/* Past the saved flags (restored or not, no flag changes here). */
	static const uint8_t skip_flags[] = {
		0x48, 0x8d, 0x64, 0x24, 0x08,		/* lea rsp,[rsp+8] */
	};
	static const uint8_t divert_test[] = {
		0x64, 0x48, 0x39, 0x24, 0x25,		/* cmp %rsp,%fs:disp32 */
	};
	size_t n = put(b, restore, sizeof(restore));

	if (kind == STUB_FAST) {
		n += put(b + n, pop_rcx_rax, sizeof(pop_rcx_rax));
		n += put(b + n, skip_flags, sizeof(skip_flags));
		/*
		 * ZF: this call is to be diverted. Not in the other stubs:
		 * their flags are the program's, and their slots hold a NOP
		 * for the je.
		 */
		n += put(b + n, divert_test, sizeof(divert_test));
		n += pk_tramp_put32(b + n, dsp);
	} else if (vec.sahf) {
		n += flags_code(b + n);
		n += put(b + n, pop_rcx_rax, sizeof(pop_rcx_rax));
		n += put(b + n, skip_flags, sizeof(skip_flags));
	} else {
		n += put(b + n, pop_rcx_rax, sizeof(pop_rcx_rax));
		b[n++] = 0x9d;				/* popf */
	}
	b[n++] = 0xc3;				/* ret into the slot */
	return n;
}

/* call [rip + the head word of @kind's dispatcher], at @off + @n. */
static size_t stub_call(uint8_t *b, size_t off, size_t n, int kind)
{
	put(b, "\xff\x15", 2);
	pk_tramp_put32(b + 2, (int32_t)((kind == STUB_FAST ? HEAD_DISPATCH :
					  HEAD_DISPATCH_FULL) - (off + n + 6)));
	return 6;
}

/*
 * A stub, at @off in its chunk: the register save around a dispatcher.
 * @kind: STUB_FAST (pre-handlers at an entry: the vector save of
 * pk_arch_vsave, flags not restored, the divert test), STUB_POST
 * (post-handlers after an entry's first instruction: the same vector
 * save, the flags restored) or STUB_FULL (inside a function: vec.full,
 * the flags restored). The dispatcher's second argument is 0: the
 * vector state is saved.
 */
static size_t build_stub(uint8_t *b, size_t off, int kind, int32_t dsp)
{
	int full = kind == STUB_FULL;
	const struct pk_arch_vsave *v = full ? &vec.full : &pk_arch_vsave;
	size_t n = put(b, stub_save, sizeof(stub_save));

	n += put(b + n, "\x48\x81\xec", 3);	/* sub rsp,imm32: the area */
	n += pk_tramp_put32(b + n, (uint32_t)v->size);
	n += vec_code(b + n, v, full, 0);
	n += put(b + n, "\xfc\x31\xf6", 3);	/* cld; xor esi,esi */
	n += stub_call(b + n, off, n, kind);
	n += vec_code(b + n, v, full, 1);
	return n + stub_tail(b + n, kind, dsp);
}

/*
 * The general-registers-only twin (tramp.h, "Handlers that touch only
 * general registers") of the stub of @kind at @plain, at @off: the same
 * save of the general registers; then, if the slot's owner says that
 * every handler there touches general registers only, the dispatcher is
 * called with the owner as its second argument and no vector or x87
 * state saved;
 * else on into @plain's code after the same save (its vector save, its
 * call with 0). A probe without the flag that joins the slot makes the
 * owner say so before it is linked; the dispatcher runs only flagged
 * handlers in a call with 1 (it may race that), so what the slot's
 * callers see is never a handler's vector registers.
 */
static size_t build_gpr_stub(uint8_t *b, size_t off, int kind, size_t plain,
			     int32_t dsp)
{
	static const uint8_t check[] = {
		0x48, 0x8b, 0x87, 0x90, 0, 0, 0,	/* mov rax,[rdi+144]: the
							   return address */
		0x48, 0x83, 0xe0, 0xc0,			/* and rax,-64: its slot */
		0x48, 0x8b, 0x00,			/* mov rax,[rax]: owner */
		0xf6, 0x00, PK_TRAMP_OWNER_GPR,		/* testb $GPR,(rax) */
		0x0f, 0x84,				/* jz rel32: */
	};
	size_t n = 0;

	/*
	 * At an entry no flag is live and DF is clear (SysV ABI; the fast
	 * stub restores no flag): neither pushf nor cld, which cost 1.2 and
	 * 0.8 ns of a 9 ns hit where this was measured. regs->flags reads
	 * 0x202 (IF and bit 1: DF clear) instead of the flags.
	 */
	if (kind == STUB_FAST)
		n += put(b, "\x68\x02\x02\x00\x00", 5);	/* push $0x202 */
	else
		b[n++] = 0x9c;				/* pushf */
	n += put(b + n, stub_save + 1, sizeof(stub_save) - 1);
	_Static_assert(offsetof(struct pk_regs, pk_private_ret) == 144,
		       "the check's displacement");
	n += put(b + n, check, sizeof(check));
	n += pk_tramp_put32(b + n, (int32_t)(plain + sizeof(stub_save) -
					     (off + n + 4)));
	if (kind != STUB_FAST)
		b[n++] = 0xfc;				/* cld */
	n += put(b + n, "\x48\x89\xc6", 3);	/* mov rsi,rax: the owner */
	n += stub_call(b + n, off, n, kind);
	return n + stub_tail(b + n, kind, dsp);
}

/*
 * The divert code (tramp.h), reached by the slot's je with the function's
 * stack: rsp at its return address.
 */
static size_t build_divert(uint8_t *b, const struct pk_tramp_env *env)
{
	size_t n = 0;

	n += put(b + n, "\x64\xff\x34\x25", 4);		/* push %fs:cont */
	n += pk_tramp_put32(b + n, tp_off(env->divert_cont));
	n += put(b + n, "\x8f\x04\x24", 3);		/* popq (%rsp): over
							   the return address */
	/*
	 * "to" is read before the request is marked taken (a signal
	 * handler's hit may post another after), kept in the red zone (no
	 * register is free: a -fipa-ra caller may keep a value even in r11)
	 * and jumped to from there.
	 */
	n += put(b + n, "\x64\xff\x34\x25", 4);		/* push %fs:to */
	n += pk_tramp_put32(b + n, tp_off(env->divert_to));
	n += put(b + n, "\x64\x80\x0c\x25", 4);		/* orb $1,%fs:sp */
	n += pk_tramp_put32(b + n, tp_off(env->divert_sp));
	b[n++] = 1;
	n += put(b + n, "\x48\x8d\x64\x24\x10", 5);	/* lea rsp,[rsp+16] */
	n += put(b + n, "\xff\x64\x24\xf0", 4);		/* jmp *-16(%rsp) */
	return n;
}

int pk_arch_tramp_head(uint8_t *buf, const struct pk_tramp_env *env)
{
	int32_t dsp = tp_off(env->divert_sp);

	vec_init();
	memset(buf, PK_ARCH_TRAP_BYTE, PK_TRAMP_HEAD);
	if (build_stub(buf + STUB_FAST, STUB_FAST, STUB_FAST, dsp) > STUB_POST - STUB_FAST ||
	    build_stub(buf + STUB_POST, STUB_POST, STUB_POST, dsp) > HEAD_DIVERT - STUB_POST ||
	    build_stub(buf + STUB_FULL, STUB_FULL, STUB_FULL, dsp) > STUB_FAST_GPR - STUB_FULL ||
	    build_gpr_stub(buf + STUB_FAST_GPR, STUB_FAST_GPR, STUB_FAST, STUB_FAST,
			   dsp) > STUB_POST_GPR - STUB_FAST_GPR ||
	    build_gpr_stub(buf + STUB_POST_GPR, STUB_POST_GPR, STUB_POST, STUB_POST,
			   dsp) > STUB_FULL_GPR - STUB_POST_GPR ||
	    build_gpr_stub(buf + STUB_FULL_GPR, STUB_FULL_GPR, STUB_FULL, STUB_FULL,
			   dsp) > HEAD_DISPATCH - STUB_FULL_GPR ||
	    build_divert(buf + HEAD_DIVERT, env) != DIVERT_LEN)
		return -E2BIG;
	memcpy(buf + HEAD_DISPATCH, &env->dispatch, sizeof(env->dispatch));
	memcpy(buf + HEAD_DISPATCH_FULL, &env->dispatch_full,
	       sizeof(env->dispatch_full));
	return 0;
}

/* ------------------------------------------------------------------ slot */

/*
 * lea rsp,[rsp-128]; call @stub; lea rsp,[rsp+128] (PK_TRAMP_CALL_LEN
 * bytes) at @b, which runs at @at.
 */
static void call_seq(uint8_t *b, uintptr_t at, uintptr_t stub)
{
	size_t n = put(b, "\x48\x8d\x64\x24\x80", 5);

	b[n++] = 0xe8;
	n += pk_tramp_put32(b + n, (int32_t)(stub - (at + n + 4)));
	put(b + n, "\x48\x8d\xa4\x24\x80\x00\x00\x00", 8);
}

/*
 * Whether instruction @code (@len bytes) leaves the x87/MMX state as it
 * found it: then after it, at a function's entry, that state is still
 * the empty x87 stack of a call boundary, and post-handlers there go
 * through the post stub (the entry's vector save) instead of the full
 * one (XSAVEC and XRSTOR: 130 ns where this was measured). Conservative:
 * no x87 escape (D8-DF), no fwait, and of the 0F map only opcodes that
 * cannot name an MMX register or the x87/SSE state (fxsave, ldmxcsr,
 * xrstor, ... are 0F AE and 0F C7).
 */
static int keeps_x87(const uint8_t *code, size_t len)
{
	size_t i = 0;
	uint8_t op;

	while (i < len && (code[i] == 0x66 || code[i] == 0x67 || code[i] == 0xf0 ||
			   code[i] == 0xf2 || code[i] == 0xf3 || code[i] == 0x2e ||
			   code[i] == 0x36 || code[i] == 0x3e || code[i] == 0x26 ||
			   code[i] == 0x64 || code[i] == 0x65))
		i++;
	if (i < len && (code[i] & 0xf0) == 0x40)	/* REX */
		i++;
	if (i >= len)
		return 0;
	op = code[i];
	if ((op >= 0xd8 && op <= 0xdf) || op == 0x9b)
		return 0;
	if (op != 0x0f)
		return 1;	/* one-byte map; VEX, EVEX, XOP: no x87 or MMX */
	if (++i >= len)
		return 0;
	op = code[i];
	return op == 0x05 || op == 0x0b || (op >= 0x10 && op <= 0x1f) ||
	       op == 0x28 || op == 0x29 || op == 0x2e || op == 0x2f ||
	       (op >= 0x40 && op <= 0x4f) || (op >= 0x80 && op <= 0x9f) ||
	       op == 0xa2 || op == 0xa3 || op == 0xab || op == 0xaf ||
	       op == 0xb0 || op == 0xb1 || (op >= 0xb3 && op <= 0xbf) ||
	       op == 0xc0 || op == 0xc1 || (op >= 0xc8 && op <= 0xcf);
}

int pk_arch_tramp_slot(uint8_t *slot, const struct pk_tramp_slot *s,
		       struct pk_reloc_map *map)
{
	const size_t cap = PK_TRAMP_SLOT_SIZE - PK_ARCH_JMP_LEN;
	uintptr_t full = s->head + (s->gpr ? STUB_FULL_GPR : STUB_FULL);
	uintptr_t post = !s->full && keeps_x87(s->code, s->first_len) ?
			 s->head + (s->gpr ? STUB_POST_GPR : STUB_POST) : full;
	uintptr_t fast = s->head + (s->gpr ? STUB_FAST_GPR : STUB_FAST);
	struct pk_reloc_map rest;
	size_t at = PK_TRAMP_SLOT_COPY, first;
	int n, ft = 1;

	map->n = 0;
	memset(slot, PK_ARCH_TRAP_BYTE, PK_TRAMP_SLOT_SIZE);
	memcpy(slot, &s->owner, sizeof(s->owner));
	call_seq(slot + PK_TRAMP_SLOT_ENTRY, s->at + PK_TRAMP_SLOT_ENTRY,
		 s->full ? full : fast);
	if (s->full) {
		/* nopw 0(%rax,%rax): no divert after popf */
		put(slot + SLOT_DIVERT, "\x66\x0f\x1f\x44\x00\x00", JCC32_LEN);
	} else {
		put(slot + SLOT_DIVERT, "\x0f\x84", 2);	/* je rel32 */
		pk_tramp_put32(slot + SLOT_DIVERT + 2,
			       (int32_t)(s->head + HEAD_DIVERT -
					 (s->at + SLOT_DIVERT + JCC32_LEN)));
	}
	first = s->int3 || s->post ? s->first_len : s->len;
	if (s->int3)
		n = pk_arch_relocate_one(s->code, s->len, s->addr, slot + at,
					 cap - at, s->at + at, &ft);
	else
		n = pk_arch_relocate(s->code, first, s->addr, slot + at,
				     cap - at, s->at + at, map);
	if (n < 0)
		return n;
	at += (size_t)n;
	if (s->post) {
		if (!ft || at + PK_TRAMP_CALL_LEN > cap)
			return -E2BIG;
		call_seq(slot + at, s->at + at, post);
		at += PK_TRAMP_CALL_LEN;
	}
	if (first < s->len) {
		/* A jump probe's other displaced instructions, after post. */
		n = pk_arch_relocate(s->code + first, s->len - first,
				     s->addr + first, slot + at, cap - at,
				     s->at + at, &rest);
		if (n < 0)
			return n;
		for (unsigned int i = 0; i < rest.n && map->n < PK_RELOC_MAX; i++) {
			map->src[map->n] = (uint8_t)(rest.src[i] + first);
			map->dst[map->n] = (uint8_t)(rest.dst[i] + at -
						     PK_TRAMP_SLOT_COPY);
			map->n++;
		}
		at += (size_t)n;
	}
	if (ft && pk_arch_encode_jmp(slot + at, s->at + at, s->addr + s->len))
		return -ERANGE;
	return 0;
}

size_t pk_arch_entry_skip(const uint8_t *code, size_t avail)
{
	static const uint8_t endbr64[] = { 0xf3, 0x0f, 0x1e, 0xfa };

	return avail >= sizeof(endbr64) &&
	       !memcmp(code, endbr64, sizeof(endbr64)) ? sizeof(endbr64) : 0;
}

/* ----------------------------------------------------- return trampoline */

void pk_arch_ret_code(uint8_t *buf, size_t len, size_t nent,
		      uintptr_t common)
{
	vec_init();
	memset(buf, PK_ARCH_TRAP_BYTE, len);
	memcpy(buf, &common, sizeof(common));
	for (size_t k = 0; k < nent; k++) {
		size_t at = PK_RET_ENT0 + k * PK_RET_ENT_SIZE;
		uint8_t *e = buf + at;

		put(e, "\xff\x54\x24\xf8", 4);		/* call *-8(%rsp) */
		/* landing: jmp *[rip+rel32], to the word at +0 */
		put(e + PK_RET_ENT_LAND, "\xff\x25", 2);
		pk_tramp_put32(e + PK_RET_ENT_LAND + 2,
			       -(int32_t)(at + PK_RET_ENT_LAND + 6));
	}
}

