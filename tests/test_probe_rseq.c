// SPDX-License-Identifier: MIT
/* test_probe_rseq.c - no probe breaks a restartable sequence: a jump probe whose displaced bytes hold part of one (or its rseq_cs store, or its abort signature) becomes an int3 probe, a probe in one or on its store is refused, and a probe before one leaves it working (per-CPU counts exact while probed). */

/*
 * The functions are assembly with their descriptors in __rseq_cs, as
 * librseq and tcmalloc place them (src/probe/rseq.h):
 *
 *   rs_inc(counts)  counts[cpu]++ in a critical section on glibc's
 *                   registered rseq area: movq GOT (7 bytes), movq (3),
 *                   leaq desc (7), store to rseq_cs, then the section
 *                   (rs_inc_cs) from the read of cpu_id to the store of
 *                   the count; its abort handler starts the section
 *                   again (not the function: the entry probe would count
 *                   the call twice)
 *   rs_two(x)       x + 1: a 2-byte nop, a 3-byte mov (its store's
 *                   place), then a section of one lea
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/rseq.h>

#include "harness.h"
#include "probekit.h"

void rs_inc(uint64_t *counts);
long rs_two(long x);
extern const char rs_inc_cs[], rs_inc_cs2[], rs_inc_store[], rs_inc_ret[],
	rs_inc_sig[];

__asm__(".text\n"
	".globl rs_inc\n"
	".type rs_inc,@function\n"
	"rs_inc:\n"
	"	movq __rseq_offset@GOTPCREL(%rip), %rcx\n"
	"	movq (%rcx), %rcx\n"
	".Lrs_inc_retry:\n"
	"	leaq .Lrs_inc_desc(%rip), %rax\n"
	".globl rs_inc_store\n"
	"rs_inc_store:\n"
	"	movq %rax, %fs:8(%rcx)\n"	/* struct rseq.rseq_cs */
	".globl rs_inc_cs\n"
	"rs_inc_cs:\n"
	"	movl %fs:4(%rcx), %edx\n"	/* struct rseq.cpu_id */
	".globl rs_inc_cs2\n"
	"rs_inc_cs2:\n"
	"	movq (%rdi,%rdx,8), %rax\n"
	"	addq $1, %rax\n"
	"	movq %rax, (%rdi,%rdx,8)\n"	/* the commit */
	".Lrs_inc_end:\n"
	".globl rs_inc_ret\n"
	"rs_inc_ret:\n"
	"	ret\n"
	".globl rs_inc_sig\n"
	"rs_inc_sig:\n"
	"	.byte 0x0f, 0xb9, 0x3d\n"	/* ud1 carrying the signature */
	"	.long 0x53053053\n"		/* glibc's RSEQ_SIG */
	".Lrs_inc_abort:\n"
	"	jmp .Lrs_inc_retry\n"
	".size rs_inc, .-rs_inc\n"
	".globl rs_two\n"
	".type rs_two,@function\n"
	"rs_two:\n"
	"	xchg %ax, %ax\n"
	"	movq %rdi, %rax\n"
	".Lrs_two_start:\n"
	"	leaq 1(%rdi), %rax\n"
	".Lrs_two_end:\n"
	"	ret\n"
	"	.byte 0x0f, 0xb9, 0x3d\n"
	"	.long 0x53053053\n"
	".Lrs_two_abort:\n"
	"	jmp rs_two\n"
	".size rs_two, .-rs_two\n"
	".pushsection __rseq_cs, \"aw\"\n"
	".balign 32\n"
	".Lrs_inc_desc:\n"
	"	.long 0, 0\n"
	"	.quad rs_inc_cs, .Lrs_inc_end - rs_inc_cs, .Lrs_inc_abort\n"
	".balign 32\n"
	"	.long 0, 0\n"
	"	.quad .Lrs_two_start, .Lrs_two_end - .Lrs_two_start, .Lrs_two_abort\n"
	".popsection\n");

static unsigned long hits;

static void count(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p;
	(void)r;
	(void)ctx;
	__atomic_add_fetch(&hits, 1, __ATOMIC_RELAXED);
}

static int make_f(void *fn, size_t offset, unsigned int flags,
		  struct pk_probe **out)
{
	PK_OPTS(pk_probe_opts, o, .addr = fn, .offset = offset, .pre = count,
		.flags = flags);

	return pk_probe_create(&o, out);
}

static int make(void *fn, size_t offset, struct pk_probe **out)
{
	return make_f(fn, offset, 0, out);
}

static int reason(struct pk_probe *p, int *kind)
{
	struct pk_probe_info in = { .sz = sizeof(in) };

	if (pk_probe_get_info(p, &in))
		return -1;
	*kind = in.kind;
	return in.reason;
}

#define NCPU 1024
#define NTHREADS 4
#define PER_THREAD 200000

static uint64_t counts[NCPU];

static void *worker(void *arg)
{
	(void)arg;
	for (int i = 0; i < PER_THREAD; i++) {
		rs_inc(counts);
		if (!(i & 1023))
			sched_yield();	/* migrations, preemptions */
	}
	return NULL;
}

int main(void)
{
	struct pk_probe *p = NULL;
	size_t cs_off = (size_t)(rs_inc_cs - (const char *)rs_inc);
	pthread_t th[NTHREADS];
	uint64_t sum = 0;
	int kind = 0, r;

	/* In the section: no probe of either kind. */
	pk_set_log(t_quiet_log, NULL);
	r = make((void *)rs_inc, cs_off, &p);
	pk_set_log(NULL, NULL);
	ASSERT_EQ(r, -EPERM, "a probe at a critical section's start");
	pk_set_log(t_quiet_log, NULL);
	r = make((void *)rs_inc, (size_t)(rs_inc_cs2 - (const char *)rs_inc), &p);
	pk_set_log(NULL, NULL);
	ASSERT_EQ(r, -EPERM, "a probe inside a critical section");
	/* Unrefused, this int3 probe's first hit killed the process (139). */
	pk_set_log(t_quiet_log, NULL);
	r = make_f((void *)rs_inc, cs_off, PK_PROBE_F_INT3, &p);
	pk_set_log(NULL, NULL);
	ASSERT_EQ(r, -EPERM, "an int3 probe at a critical section's start");
	/* The store of rseq_cs run out of line leaves the section unprotected. */
	pk_set_log(t_quiet_log, NULL);
	r = make((void *)rs_inc, (size_t)(rs_inc_store - (const char *)rs_inc), &p);
	pk_set_log(NULL, NULL);
	ASSERT_EQ(r, -EPERM, "a probe on the rseq_cs store");
	/* A jmp over the ret would cover the abort handler's signature. */
	if (ASSERT_OK(make((void *)rs_inc, (size_t)(rs_inc_ret - (const char *)rs_inc), &p),
		      "a probe on the ret before the signature")) {
		ASSERT_EQ(reason(p, &kind), PK_PROBE_WHY_RSEQ, "why the ret's kind");
		ASSERT_EQ(kind, PK_PROBE_INT3, "the ret's kind");
		pk_probe_destroy(p);
	}
	pk_set_log(t_quiet_log, NULL);
	r = make((void *)rs_inc, (size_t)(rs_inc_sig - (const char *)rs_inc), &p);
	pk_set_log(NULL, NULL);
	ASSERT_EQ(r, -EPERM, "a probe on the signature");
	/* The jmp would displace the section's start: an int3 probe before it. */
	if (ASSERT_OK(make((void *)rs_two, 0, &p), "rs_two's entry")) {
		ASSERT_EQ(reason(p, &kind), PK_PROBE_WHY_RSEQ, "why rs_two's kind");
		ASSERT_EQ(kind, PK_PROBE_INT3, "rs_two's kind");
		if (ASSERT_OK(pk_probe_register(&p, 1), "register rs_two")) {
			ASSERT_EQ(rs_two(41), 42, "rs_two probed");
			ASSERT_EQ(hits, 1, "rs_two's hits");
			ASSERT_OK(pk_probe_unregister(&p, 1), "unregister rs_two");
		}
		pk_probe_destroy(p);
	}
	/* Before the section: a jump probe, and the section still works. */
	hits = 0;
	if (!ASSERT_OK(make((void *)rs_inc, 0, &p), "rs_inc's entry"))
		return t_exit();
	ASSERT_EQ(reason(p, &kind), PK_PROBE_WHY_PLAIN, "why rs_inc's kind");
	ASSERT_EQ(kind, PK_PROBE_JUMP, "rs_inc's kind");
	if (!ASSERT_OK(pk_probe_register(&p, 1), "register rs_inc"))
		return t_exit();
	if (__rseq_size == 0) {
		/* No area: cpu_id reads as -1 and the section cannot run. */
		ASSERT_OK(pk_probe_unregister(&p, 1), "unregister rs_inc");
		pk_probe_destroy(p);
		printf("note: glibc registered no rseq area here "
		       "(glibc.pthread.rseq=0, or rseq(2) refused): the section "
		       "was not run, only the placements checked\n");
		return t_exit();
	}
	for (int i = 0; i < NTHREADS; i++)
		pthread_create(&th[i], NULL, worker, NULL);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	ASSERT_OK(pk_probe_unregister(&p, 1), "unregister rs_inc");
	pk_probe_destroy(p);
	for (int i = 0; i < NCPU; i++)
		sum += counts[i];
	ASSERT_EQ(hits, (unsigned long)NTHREADS * PER_THREAD, "rs_inc's hits");
	ASSERT_EQ(sum, (uint64_t)NTHREADS * PER_THREAD,
		  "per-CPU counts through the critical section");
	return t_exit();
}
