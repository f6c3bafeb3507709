// SPDX-License-Identifier: MIT
/* test_fault_resume.c - a handled fault resumes with every register, flag and vector register it had, and with the handler's edits. */
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ucontext.h>
#include <unistd.h>

#include "probekit.h"
#include "harness.h"

/*
 * probekit resumes a handled fault itself, without rt_sigreturn, where it
 * can (src/arch/x86_64/resume.c). The thread must come back exactly as
 * rt_sigreturn would bring it back: t_fault_regs() loads known values into
 * every general register, the flags (DF and the arithmetic flags set),
 * MXCSR, the x87 control word and xmm0-15, stores to a protected page, and
 * saves them all again. The handler scribbles on all of those before it
 * returns, so a resume that left out any of them shows. ctest runs this a
 * second time with PROBEKIT_FAULT_SIGRETURN=1: the same results through
 * the kernel's rt_sigreturn.
 */

struct regs {
	uint64_t g[15];		/* rax rbx rcx rdx rsi rdi rbp r8-r15 */
	uint64_t flags;
	uint32_t mxcsr;
	uint16_t fcw;
	uint8_t pad[2];
	uint8_t xmm[16][16];
};

void t_fault_regs(const struct regs *in, struct regs *out, char *p);
/* rdi = in, rsi = out, rdx = the page to store to (its value in rdi) */
__asm__(
	"	.text\n"
	"	.globl	t_fault_regs\n"
	"	.type	t_fault_regs,@function\n"
	"t_fault_regs:\n"
	"	push	%rbx\n"
	"	push	%rbp\n"
	"	push	%r12\n"
	"	push	%r13\n"
	"	push	%r14\n"
	"	push	%r15\n"
	"	push	%rsi\n"			/* out, at 8(%rsp) later */
	"	push	%rdx\n"			/* p */
	"	sub	$8, %rsp\n"		/* old MXCSR, x87 CW */
	"	stmxcsr	(%rsp)\n"
	"	fnstcw	4(%rsp)\n"
	"	ldmxcsr	128(%rdi)\n"
	"	fldcw	132(%rdi)\n"
	"	movdqu	136+0*16(%rdi), %xmm0\n"
	"	movdqu	136+1*16(%rdi), %xmm1\n"
	"	movdqu	136+2*16(%rdi), %xmm2\n"
	"	movdqu	136+3*16(%rdi), %xmm3\n"
	"	movdqu	136+4*16(%rdi), %xmm4\n"
	"	movdqu	136+5*16(%rdi), %xmm5\n"
	"	movdqu	136+6*16(%rdi), %xmm6\n"
	"	movdqu	136+7*16(%rdi), %xmm7\n"
	"	movdqu	136+8*16(%rdi), %xmm8\n"
	"	movdqu	136+9*16(%rdi), %xmm9\n"
	"	movdqu	136+10*16(%rdi), %xmm10\n"
	"	movdqu	136+11*16(%rdi), %xmm11\n"
	"	movdqu	136+12*16(%rdi), %xmm12\n"
	"	movdqu	136+13*16(%rdi), %xmm13\n"
	"	movdqu	136+14*16(%rdi), %xmm14\n"
	"	movdqu	136+15*16(%rdi), %xmm15\n"
	"	push	120(%rdi)\n"		/* flags */
	"	mov	0*8(%rdi), %rax\n"
	"	mov	1*8(%rdi), %rbx\n"
	"	mov	2*8(%rdi), %rcx\n"
	"	mov	3*8(%rdi), %rdx\n"
	"	mov	4*8(%rdi), %rsi\n"
	"	mov	6*8(%rdi), %rbp\n"
	"	mov	7*8(%rdi), %r8\n"
	"	mov	8*8(%rdi), %r9\n"
	"	mov	9*8(%rdi), %r10\n"
	"	mov	10*8(%rdi), %r11\n"
	"	mov	11*8(%rdi), %r12\n"
	"	mov	12*8(%rdi), %r13\n"
	"	mov	13*8(%rdi), %r14\n"
	"	mov	14*8(%rdi), %r15\n"
	"	mov	16(%rsp), %rdi\n"	/* p (flags pushed above it) */
	"	popfq\n"
	"	movb	$0x5a, (%rdi)\n"	/* faults; handled; resumed */
	"	pushfq\n"
	"	push	%rdi\n"
	"	mov	32(%rsp), %rdi\n"	/* out */
	"	mov	%rax, 0*8(%rdi)\n"
	"	mov	%rbx, 1*8(%rdi)\n"
	"	mov	%rcx, 2*8(%rdi)\n"
	"	mov	%rdx, 3*8(%rdi)\n"
	"	mov	%rsi, 4*8(%rdi)\n"
	"	pop	5*8(%rdi)\n"		/* rdi */
	"	mov	%rbp, 6*8(%rdi)\n"
	"	mov	%r8, 7*8(%rdi)\n"
	"	mov	%r9, 8*8(%rdi)\n"
	"	mov	%r10, 9*8(%rdi)\n"
	"	mov	%r11, 10*8(%rdi)\n"
	"	mov	%r12, 11*8(%rdi)\n"
	"	mov	%r13, 12*8(%rdi)\n"
	"	mov	%r14, 13*8(%rdi)\n"
	"	mov	%r15, 14*8(%rdi)\n"
	"	pop	120(%rdi)\n"		/* flags */
	"	cld\n"
	"	stmxcsr	128(%rdi)\n"
	"	fnstcw	132(%rdi)\n"
	"	movdqu	%xmm0, 136+0*16(%rdi)\n"
	"	movdqu	%xmm1, 136+1*16(%rdi)\n"
	"	movdqu	%xmm2, 136+2*16(%rdi)\n"
	"	movdqu	%xmm3, 136+3*16(%rdi)\n"
	"	movdqu	%xmm4, 136+4*16(%rdi)\n"
	"	movdqu	%xmm5, 136+5*16(%rdi)\n"
	"	movdqu	%xmm6, 136+6*16(%rdi)\n"
	"	movdqu	%xmm7, 136+7*16(%rdi)\n"
	"	movdqu	%xmm8, 136+8*16(%rdi)\n"
	"	movdqu	%xmm9, 136+9*16(%rdi)\n"
	"	movdqu	%xmm10, 136+10*16(%rdi)\n"
	"	movdqu	%xmm11, 136+11*16(%rdi)\n"
	"	movdqu	%xmm12, 136+12*16(%rdi)\n"
	"	movdqu	%xmm13, 136+13*16(%rdi)\n"
	"	movdqu	%xmm14, 136+14*16(%rdi)\n"
	"	movdqu	%xmm15, 136+15*16(%rdi)\n"
	"	ldmxcsr	(%rsp)\n"
	"	fldcw	4(%rsp)\n"
	"	add	$24, %rsp\n"		/* MXCSR/CW, p, out */
	"	pop	%r15\n"
	"	pop	%r14\n"
	"	pop	%r13\n"
	"	pop	%r12\n"
	"	pop	%rbp\n"
	"	pop	%rbx\n"
	"	ret\n"
	"	.size	t_fault_regs, .-t_fault_regs\n");

_Static_assert(offsetof(struct regs, flags) == 120 &&
	       offsetof(struct regs, mxcsr) == 128 &&
	       offsetof(struct regs, fcw) == 132 &&
	       offsetof(struct regs, xmm) == 136, "t_fault_regs offsets");

/* CF PF AF ZF SF DF OF, and bit 1 (always set) */
#define FLAGS_SET 0xcd7u
#define FLAGS_MASK 0xcd5u

static long page;
static char *pg;
static int mode;		/* what the handler does */
static int calls;

enum { SCRIBBLE, SET_RCX_SKIP, BLOCK_SIGUSR2 };

static int on_fault(const struct pk_fault *f, void *ctx)
{
	ucontext_t *uc = f->ucontext;
	static const uint8_t junk[16] = { 0xee, 0xee, 0xee, 0xee, 0xee, 0xee,
					  0xee, 0xee, 0xee, 0xee, 0xee, 0xee,
					  0xee, 0xee, 0xee, 0xee };
	uint32_t mx = 0x7f80;	/* round toward zero: not the test's */
	uint16_t cw = 0x0c7f;

	(void)ctx;
	calls++;
	/* What a handler may do to the live state: all of it must go. */
	__asm__ volatile("movdqu %0, %%xmm0\n movdqu %0, %%xmm7\n"
			 "movdqu %0, %%xmm8\n movdqu %0, %%xmm15\n"
			 "ldmxcsr %1\n fldcw %2"
			 :: "m"(junk), "m"(mx), "m"(cw)
			 : "xmm0", "xmm7", "xmm8", "xmm15");
	switch (mode) {
	case SET_RCX_SKIP:	/* new rcx; skip the 3-byte store */
		uc->uc_mcontext.gregs[REG_RCX] = 0x1234;
		uc->uc_mcontext.gregs[REG_RIP] += 3;
		return PK_FAULT_HANDLED;
	case BLOCK_SIGUSR2:	/* rt_sigreturn's job: the mask to resume with */
		sigaddset(&uc->uc_sigmask, SIGUSR2);
		break;
	}
	mprotect(f->start, (size_t)page, PROT_READ | PROT_WRITE);
	return PK_FAULT_HANDLED;
}

static void fill(struct regs *in)
{
	memset(in, 0, sizeof(*in));
	for (int i = 0; i < 15; i++)
		in->g[i] = 0x1111111111111111ull * (uint64_t)(i + 1) ^ 0x0123456789abcdefull;
	in->g[5] = (uint64_t)(uintptr_t)pg;	/* rdi: the address stored to */
	in->flags = FLAGS_SET;
	in->mxcsr = 0x3f80 | 0x2000;	/* masked, round down */
	in->fcw = 0x007f;		/* single precision */
	for (int i = 0; i < 16; i++)
		for (int b = 0; b < 16; b++)
			in->xmm[i][b] = (uint8_t)(i * 16 + b + 1);
}

static struct pk_fault_stats stats_now(void)
{
	struct pk_fault_stats st = { .sz = sizeof(st) };

	ASSERT_OK(pk_fault_stats(&st), "stats");
	return st;
}

static void test_everything_back(int expect_resume)
{
	struct pk_fault_stats st0 = stats_now(), st1;
	struct regs in, out;

	fill(&in);
	memset(&out, 0, sizeof(out));
	mode = SCRIBBLE;
	mprotect(pg, (size_t)page, PROT_NONE);
	t_fault_regs(&in, &out, pg);
	st1 = stats_now();
	ASSERT_EQ(pg[0], 0x5a, "the store ran after the fault");
	for (int i = 0; i < 15; i++)
		ASSERT_EQ(out.g[i], in.g[i], "general register kept");
	ASSERT_EQ(out.flags & FLAGS_MASK, in.flags & FLAGS_MASK,
		  "flags kept, DF included");
	ASSERT_EQ(out.mxcsr, in.mxcsr, "MXCSR kept");
	ASSERT_EQ(out.fcw, in.fcw, "x87 control word kept");
	ASSERT_MEM_EQ(out.xmm, in.xmm, sizeof(in.xmm), "xmm0-15 kept");
	ASSERT_EQ(st1.faults - st0.faults, 1, "one fault handled");
	ASSERT_EQ(st1.resumed - st0.resumed, (uint64_t)expect_resume,
		  "resumed without rt_sigreturn, unless told not to");
}

static void test_edits_honoured(int expect_resume)
{
	struct pk_fault_stats st0 = stats_now(), st1;
	struct regs in, out;

	fill(&in);
	mode = SET_RCX_SKIP;
	pg[0] = 0;
	mprotect(pg, (size_t)page, PROT_NONE);
	t_fault_regs(&in, &out, pg);
	st1 = stats_now();
	mprotect(pg, (size_t)page, PROT_READ | PROT_WRITE);
	ASSERT_EQ(out.g[2], 0x1234, "the handler's rcx");
	ASSERT_EQ(pg[0], 0, "the skipped store did not run");
	ASSERT_EQ(out.g[0], in.g[0], "other registers kept");
	ASSERT_EQ(st1.resumed - st0.resumed, (uint64_t)expect_resume,
		  "edited registers: resumed without rt_sigreturn too");
}

static void test_mask_edit_uses_sigreturn(void)
{
	struct pk_fault_stats st0 = stats_now(), st1;
	sigset_t now;

	mode = BLOCK_SIGUSR2;
	mprotect(pg, (size_t)page, PROT_NONE);
	*(volatile char *)pg = 1;
	st1 = stats_now();
	pthread_sigmask(SIG_SETMASK, NULL, &now);
	ASSERT_TRUE(sigismember(&now, SIGUSR2), "uc_sigmask set on return");
	ASSERT_EQ(st1.resumed - st0.resumed, 0, "that needs rt_sigreturn");
	sigdelset(&now, SIGUSR2);
	pthread_sigmask(SIG_SETMASK, &now, NULL);
}

int main(void)
{
	int resume = !getenv("PROBEKIT_FAULT_SIGRETURN");
	stack_t ss;

	/* On an alternate signal stack (ASan gives every thread one) the
	 * interrupted stack may have no room: rt_sigreturn resumes. */
	if (sigaltstack(NULL, &ss) == 0 && !(ss.ss_flags & SS_DISABLE)) {
		printf("test_fault_resume: on an alternate signal stack: "
		       "rt_sigreturn expected\n");
		resume = 0;
	}

	page = sysconf(_SC_PAGESIZE);
	pg = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE,
		  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_OK(pk_fault_register(pg, (size_t)page, on_fault, NULL),
		  "register");
	test_everything_back(resume);
	test_edits_honoured(resume);
	test_mask_edit_uses_sigreturn();
	ASSERT_EQ(calls, 3, "the handler ran once per fault");
	ASSERT_OK(pk_fault_unregister(pg), "unregister");
	return t_exit();
}
