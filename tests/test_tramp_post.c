// SPDX-License-Identifier: MIT
/* test_tramp_post.c - post-handlers after a function's first instruction: live flags, vector and caller-saved registers survive, and an x87 or MMX first instruction's state too; live flags across a pre-handler inside a function (jump and int3 probes). */

/*
 * A post-handler at a function's entry runs after the first instruction,
 * through the post stub (the entry's vector save, the flags restored)
 * unless that instruction may leave something on the x87 stack or in an
 * MMX register, where the full stub (XSAVEC) runs it. Each target below
 * keeps something live across the post-handler, which clobbers what a C
 * handler may (every ymm register, the flags, the x87 stack, the
 * caller-saved general registers) and formats a line with snprintf (glibc's
 * AVX2 string functions).
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "tramp_test.h"
#include "probekit.h"

/*
 * The targets. Each starts with the instruction the post-handler follows;
 * the 5-byte NOP after it makes room for the jump with no flag written.
 *
 * pt_lt5(x):   x < 5 by cmp, the flags live across the post-handler
 * pt_cf():     clc, then CF (a post-handler may set it through regs->flags)
 * pt_df():     std, then DF (restored to 1; the handler ran with DF 0)
 * pt_vadd():   ymm0 += ymm1 (dwords), all 16 ymm live (the caller's shim)
 * pt_x87(p,q): *q = *p through st0, live across the post-handler
 * pt_mmx(p,q): *q = *p through mm0
 */
long pt_lt5(long x);
long pt_cf(void);
long pt_df(void);
void pt_vadd(void);
void pt_x87(const double *p, double *q);
void pt_mmx(const uint64_t *p, uint64_t *q);
__asm__(".text\n"
	".globl pt_lt5\n.type pt_lt5,@function\npt_lt5:\n"
	"	cmp $5, %rdi\n"
	"	nopl 0(%rax,%rax,1)\n"
	"	mov $0, %eax\n"
	"	setl %al\n"
	"	ret\n"
	".size pt_lt5, .-pt_lt5\n"
	".globl pt_cf\n.type pt_cf,@function\npt_cf:\n"
	"	clc\n"
	"	nopl 0(%rax,%rax,1)\n"
	"	mov $0, %eax\n"
	"	setc %al\n"
	"	ret\n"
	".size pt_cf, .-pt_cf\n"
	".globl pt_df\n.type pt_df,@function\npt_df:\n"
	"	std\n"
	"	nopl 0(%rax,%rax,1)\n"
	"	pushf\n"
	"	pop %rax\n"
	"	cld\n"
	"	shr $10, %eax\n"
	"	and $1, %eax\n"
	"	ret\n"
	".size pt_df, .-pt_df\n"
	".globl pt_vadd\n.type pt_vadd,@function\npt_vadd:\n"
	"	vpaddd %ymm1, %ymm0, %ymm0\n"
	"	nopl 0(%rax,%rax,1)\n"
	"	ret\n"
	".size pt_vadd, .-pt_vadd\n"
	".globl pt_x87\n.type pt_x87,@function\npt_x87:\n"
	"	fldl (%rdi)\n"
	"	nopl 0(%rax,%rax,1)\n"
	"	fstpl (%rsi)\n"
	"	ret\n"
	".size pt_x87, .-pt_x87\n"
	".globl pt_mmx\n.type pt_mmx,@function\npt_mmx:\n"
	"	movq (%rdi), %mm0\n"
	"	nopl 0(%rax,%rax,1)\n"
	"	movq %mm0, (%rsi)\n"
	"	emms\n"
	"	ret\n"
	".size pt_mmx, .-pt_mmx\n");

/* What pt_shim loads before calling pt_vadd and stores after. */
struct vstate {
	uint32_t ymm[16][8];	/* 0 */
	uint64_t gpr[9];	/* 512: rcx rdx rsi rdi r8 r9 r10 r11 rax */
};

/* void pt_shim(struct vstate *s): pt_vadd() with *s in the registers. */
void pt_shim(struct vstate *s);
__asm__(".text\n"
	".globl pt_shim\n.type pt_shim,@function\npt_shim:\n"
	"	push %rbx\n"
	"	mov %rdi, %rbx\n"
	"	vmovdqu 0(%rbx), %ymm0\n	vmovdqu 32(%rbx), %ymm1\n"
	"	vmovdqu 64(%rbx), %ymm2\n	vmovdqu 96(%rbx), %ymm3\n"
	"	vmovdqu 128(%rbx), %ymm4\n	vmovdqu 160(%rbx), %ymm5\n"
	"	vmovdqu 192(%rbx), %ymm6\n	vmovdqu 224(%rbx), %ymm7\n"
	"	vmovdqu 256(%rbx), %ymm8\n	vmovdqu 288(%rbx), %ymm9\n"
	"	vmovdqu 320(%rbx), %ymm10\n	vmovdqu 352(%rbx), %ymm11\n"
	"	vmovdqu 384(%rbx), %ymm12\n	vmovdqu 416(%rbx), %ymm13\n"
	"	vmovdqu 448(%rbx), %ymm14\n	vmovdqu 480(%rbx), %ymm15\n"
	"	mov 512(%rbx), %rcx\n	mov 520(%rbx), %rdx\n"
	"	mov 528(%rbx), %rsi\n	mov 536(%rbx), %rdi\n"
	"	mov 544(%rbx), %r8\n	mov 552(%rbx), %r9\n"
	"	mov 560(%rbx), %r10\n	mov 568(%rbx), %r11\n"
	"	mov 576(%rbx), %rax\n"
	"	call pt_vadd\n"
	"	mov %rcx, 512(%rbx)\n	mov %rdx, 520(%rbx)\n"
	"	mov %rsi, 528(%rbx)\n	mov %rdi, 536(%rbx)\n"
	"	mov %r8, 544(%rbx)\n	mov %r9, 552(%rbx)\n"
	"	mov %r10, 560(%rbx)\n	mov %r11, 568(%rbx)\n"
	"	mov %rax, 576(%rbx)\n"
	"	vmovdqu %ymm0, 0(%rbx)\n	vmovdqu %ymm1, 32(%rbx)\n"
	"	vmovdqu %ymm2, 64(%rbx)\n	vmovdqu %ymm3, 96(%rbx)\n"
	"	vmovdqu %ymm4, 128(%rbx)\n	vmovdqu %ymm5, 160(%rbx)\n"
	"	vmovdqu %ymm6, 192(%rbx)\n	vmovdqu %ymm7, 224(%rbx)\n"
	"	vmovdqu %ymm8, 256(%rbx)\n	vmovdqu %ymm9, 288(%rbx)\n"
	"	vmovdqu %ymm10, 320(%rbx)\n	vmovdqu %ymm11, 352(%rbx)\n"
	"	vmovdqu %ymm12, 384(%rbx)\n	vmovdqu %ymm13, 416(%rbx)\n"
	"	vmovdqu %ymm14, 448(%rbx)\n	vmovdqu %ymm15, 480(%rbx)\n"
	"	vzeroupper\n"
	"	pop %rbx\n"
	"	ret\n"
	".size pt_shim, .-pt_shim\n");

static int pre_hits, post_hits;
static int flags_mode;		/* what the post-handler does to the flags */

/* Everything a C handler may change, as a handler would change it. */
static void clobber(void)
{
	char buf[96];

	snprintf(buf, sizeof(buf), "post-handler %d, %s", post_hits, "clobbering");
	post_hits += strlen(buf) > 0;
	__asm__ volatile(TT_SET_YMM0_15
			 "fld1\n\tfld1\n\tfld1\n\tfld1\n\t"
			 "fld1\n\tfld1\n\tfld1\n\tfld1\n\t"
			 "fstp %%st(0)\n\tfstp %%st(0)\n\tfstp %%st(0)\n\t"
			 "fstp %%st(0)\n\tfstp %%st(0)\n\tfstp %%st(0)\n\t"
			 "fstp %%st(0)\n\tfstp %%st(0)\n\t"
			 "mov $-1, %%rcx\n\tmov $-1, %%rdx\n\tmov $-1, %%rsi\n\t"
			 "mov $-1, %%rdi\n\tmov $-1, %%r8\n\tmov $-1, %%r9\n\t"
			 "mov $-1, %%r10\n\tmov $-1, %%r11"
			 ::: TT_XMM0_15, "st", "st(1)", "st(2)", "st(3)", "st(4)",
			 "st(5)", "st(6)", "st(7)", "rcx", "rdx", "rsi", "rdi", "r8",
			 "r9", "r10", "r11", "cc");
	/* The flags the stub finds when the dispatcher returns. */
	if (flags_mode & 1)
		__asm__ volatile("xor %%eax, %%eax" ::: "rax", "cc");	/* ZF, SF 0, OF 0 */
	else
		__asm__ volatile("mov $-1, %%eax\n\ttest %%eax, %%eax"	/* SF */
				 ::: "rax", "cc");
}

static void pre(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p, (void)r, (void)ctx;
	pre_hits++;
}

static void post(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p, (void)ctx;
	if (flags_mode & 2)
		r->flags |= 1;		/* CF, through the registers */
	clobber();
}

static struct pk_probe *arm(void *fn, unsigned int flags, const char *what)
{
	PK_OPTS(pk_probe_opts, o, .addr = fn, .pre = pre, .post = post,
		.flags = flags);
	struct pk_probe *p = NULL;

	if (!ASSERT_OK(pk_probe_create(&o, &p), what))
		return NULL;
	if (!ASSERT_OK(pk_probe_register(&p, 1), what)) {
		pk_probe_destroy(p);
		return NULL;
	}
	if (!(flags & PK_PROBE_F_INT3)) {
		struct pk_probe_info info = { .sz = sizeof(info) };

		ASSERT_OK(pk_probe_get_info(p, &info), "pk_probe_get_info");
		ASSERT_EQ(info.kind, PK_PROBE_JUMP, "a jump probe, as asked");
	}
	return p;
}

static void disarm(struct pk_probe *p)
{
	if (p) {
		ASSERT_OK(pk_probe_unregister(&p, 1), "pk_probe_unregister");
		pk_probe_destroy(p);
	}
}

static void flags_cases(unsigned int flags, const char *kind)
{
	static const long xs[] = { 3, 7, 5, LONG_MIN + 2, -1, LONG_MAX };
	struct pk_probe *p = arm((void *)pt_lt5, flags, "probe on pt_lt5");
	int bad = 0;

	if (!p)
		return;
	for (int mode = 0; mode < 2; mode++) {
		flags_mode = mode;
		for (size_t i = 0; i < sizeof(xs) / sizeof(xs[0]); i++)
			if (pt_lt5(xs[i]) != (xs[i] < 5)) {
				printf("  %s probe: pt_lt5(%ld) wrong after a post-handler "
				       "that left %s\n", kind, xs[i],
				       mode ? "ZF set" : "SF set");
				bad++;
			}
	}
	flags_mode = 0;
	disarm(p);
	ASSERT_EQ(bad, 0, "SF, ZF, OF live across a post-handler");

	p = arm((void *)pt_cf, flags, "probe on pt_cf");
	if (p) {
		ASSERT_EQ(pt_cf(), 0, "CF live across a post-handler");
		flags_mode = 2;
		ASSERT_EQ(pt_cf(), 1, "CF as the post-handler set it in regs->flags");
		flags_mode = 0;
		disarm(p);
	}
	p = arm((void *)pt_df, flags, "probe on pt_df");
	if (p) {
		ASSERT_EQ(pt_df(), 1, "DF live across a post-handler");
		disarm(p);
	}
}

/* The full stub's flags: a probe inside pt_lt5, after its cmp. */
static void mid_flags_case(unsigned int flags, const char *kind)
{
	static const long xs[] = { 3, 7, 5, LONG_MIN + 2, -1, LONG_MAX };
	PK_OPTS(pk_probe_opts, o, .addr = (void *)pt_lt5, .offset = 4,
		.pre = post, .flags = flags);
	struct pk_probe *p = NULL;
	int bad = 0;

	if (!ASSERT_OK(pk_probe_create(&o, &p), "probe inside pt_lt5") ||
	    !ASSERT_OK(pk_probe_register(&p, 1), "probe inside pt_lt5")) {
		pk_probe_destroy(p);
		return;
	}
	for (int mode = 0; mode < 2; mode++) {
		flags_mode = mode;
		for (size_t i = 0; i < sizeof(xs) / sizeof(xs[0]); i++)
			if (pt_lt5(xs[i]) != (xs[i] < 5)) {
				printf("  %s probe at pt_lt5+4: pt_lt5(%ld) wrong\n",
				       kind, xs[i]);
				bad++;
			}
	}
	flags_mode = 0;
	disarm(p);
	pre_hits += 12;		/* no pre-handler of its own: post() ran as one */
	ASSERT_EQ(bad, 0, "SF, ZF, OF live across a mid-function pre-handler");
}

static void vector_case(unsigned int flags, const char *kind, int uppers)
{
	struct vstate s, want;
	struct pk_probe *p = arm((void *)pt_vadd, flags, "probe on pt_vadd");
	int bad = 0;

	if (!p)
		return;
	for (int r = 0; r < 16; r++)
		for (int k = 0; k < 8; k++)
			s.ymm[r][k] = k < 4 || uppers ? (uint32_t)(0x1000 * r + k + 1) : 0;
	for (int g = 0; g < 9; g++)
		s.gpr[g] = 0x5150000000000000ull + (uint64_t)g;
	want = s;
	for (int k = 0; k < 8; k++)
		want.ymm[0][k] += want.ymm[1][k];
	pt_shim(&s);
	for (int r = 0; r < 16; r++)
		if (memcmp(s.ymm[r], want.ymm[r], sizeof(s.ymm[r]))) {
			printf("  %s probe: ymm%d %08x... != %08x... (%s upper halves)\n",
			       kind, r, s.ymm[r][0], want.ymm[r][0],
			       uppers ? "non-zero" : "zero");
			bad++;
		}
	for (int g = 0; g < 9; g++)
		if (s.gpr[g] != want.gpr[g]) {
			printf("  %s probe: caller-saved register %d lost\n", kind, g);
			bad++;
		}
	disarm(p);
	ASSERT_EQ(bad, 0, uppers ? "ymm0-15 (upper halves in use) and the "
		  "caller-saved registers across a post-handler" :
		  "ymm0-15 (upper halves zero) and the caller-saved registers "
		  "across a post-handler");
}

static void x87_cases(unsigned int flags)
{
	struct pk_probe *p = arm((void *)pt_x87, flags, "probe on pt_x87");
	double in = 2.75, out = 0;
	uint64_t mi = 0x0123456789abcdefull, mo = 0;

	if (p) {
		pt_x87(&in, &out);
		ASSERT_TRUE(out == in, "st0 loaded by the first instruction, across a "
			    "post-handler that uses the x87 stack");
		disarm(p);
	}
	p = arm((void *)pt_mmx, flags, "probe on pt_mmx");
	if (p) {
		pt_mmx(&mi, &mo);
		ASSERT_EQ(mo, mi, "mm0 loaded by the first instruction, across a "
			  "post-handler that uses the x87 stack");
		disarm(p);
	}
}

int main(void)
{
	static const unsigned int kinds[] = { 0, PK_PROBE_F_INT3 };

	if (!__builtin_cpu_supports("avx2"))
		SKIP("the CPU has no AVX2 (the targets and the handler use ymm registers)");
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		const char *kind = kinds[i] ? "int3" : "jump";
		int hits = post_hits;

		flags_cases(kinds[i], kind);
		mid_flags_case(kinds[i], kind);
		vector_case(kinds[i], kind, 0);
		vector_case(kinds[i], kind, 1);
		x87_cases(kinds[i]);
		ASSERT_EQ(post_hits - hits, 31, "every post-handler ran");
	}
	ASSERT_EQ(pre_hits, post_hits, "each post-handler after its pre-handler");
	return t_exit();
}
