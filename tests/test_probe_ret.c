// SPDX-License-Identifier: MIT
/* test_probe_ret.c - return probes: values, per-call data, recursion, longjmp, tail calls, signals, thread exit, unregister with threads inside. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "probekit.h"

#define POOL 8		/* PROBEKIT_RETPROBE_THREADS for this test */

/* --------------------------------------------------------------- targets */

T_NOINLINE long rt_plain(long a, long b)
{
	volatile long x = a;

	return x * 3 + b;
}

/* Arguments 7 and 8 are on the stack: a diverted call must keep them there. */
T_NOINLINE long rt_args8(long a, long b, long c, long d, long e, long f, long g,
		       long h)
{
	volatile long x = a;

	return x + b * 2 + c * 3 + d * 4 + e * 5 + f * 6 + g * 7 + h * 8;
}

T_NOINLINE double rt_fp(double a, long n)
{
	volatile double x = a;

	return x * 0.5 + (double)n;
}

/* Recursion through a volatile pointer: no tail-recursion elimination. */
T_NOINLINE long rt_rec(long n);
static long (*volatile rec_ptr)(long) = rt_rec;

T_NOINLINE long rt_rec(long n)
{
	volatile long pad = n;

	if (n <= 0)
		return 1000;
	return rec_ptr(n - 1) + pad * 3;
}

static long rec_ref(long n)
{
	return n <= 0 ? 1000 : rec_ref(n - 1) + n * 3;
}

static jmp_buf jb;

/* Leaves by longjmp when @n > 0. */
T_NOINLINE long rt_lj(long n)
{
	volatile long x = n;

	if (x > 0)
		longjmp(jb, (int)x);
	return x + 5;
}

/* setjmp inside; the probed rt_lj it calls jumps back here. */
T_NOINLINE long rt_outer(long n)
{
	static jmp_buf inner;
	volatile long x = n;

	memcpy(inner, jb, sizeof(jb));
	if (!setjmp(jb))
		rt_lj(1);
	memcpy(jb, inner, sizeof(jb));
	return x * 2;
}

/*
 * rt_tail adds 3 and tail-jumps to rt_leaf, which returns 2a + 7. Both
 * start with at least 5 bytes of plain instructions.
 */
long rt_tail(long a);
long rt_leaf(long a);
__asm__(".text\n"
	".globl rt_leaf\n.type rt_leaf,@function\n"
	"rt_leaf:\n"
	"	lea 7(%rdi,%rdi,1), %rax\n"
	"	nop\n"
	"	ret\n"
	".size rt_leaf, .-rt_leaf\n"
	".globl rt_tail\n.type rt_tail,@function\n"
	"rt_tail:\n"
	"	lea 1(%rdi), %rdi\n"
	"	add $2, %rdi\n"
	"	jmp rt_leaf\n"
	".size rt_tail, .-rt_tail\n");

T_NOINLINE long rt_sig(long n)
{
	volatile long x = n;

	raise(SIGUSR1);
	return x + 1;
}

static volatile int wait_in, wait_go;

T_NOINLINE long rt_wait(long n)
{
	volatile long x = n;

	wait_in = 1;
	while (!wait_go)
		__asm__ volatile("pause");
	return x + 1;
}

T_NOINLINE long rt_exit(long n)
{
	volatile long x = n;

	if (x)
		pthread_exit((void *)x);
	return x;
}

/* -------------------------------------------------------------- handlers */

struct log {
	int entries, rets;
	long args[256];		/* by entry order */
	long vals[256];		/* by return order */
	long data_seen[256];	/* by return order: the call's data */
	uint64_t entry_rsp, ret_rsp;
	int who[8], nwho;
	long bad;
};

static int log_entry(struct pk_retprobe *rp, struct pk_regs *r, void *data,
		     void *ctx)
{
	struct log *l = ctx;

	(void)rp;
	if (l->entries < 256)
		l->args[l->entries] = (long)pk_regs_arg(r, 0);
	l->entries++;
	l->entry_rsp = r->rsp;
	if ((uintptr_t)data % 16)
		l->bad++;
	memcpy(data, &r->rdi, sizeof(r->rdi));
	return 0;
}

static void log_ret(struct pk_retprobe *rp, struct pk_regs *r, void *data,
		    void *ctx)
{
	struct log *l = ctx;
	long d;

	(void)rp;
	memcpy(&d, data, sizeof(d));
	if (l->rets < 256) {
		l->vals[l->rets] = (long)pk_regs_ret(r);
		l->data_seen[l->rets] = d;
	}
	l->rets++;
	l->ret_rsp = r->rsp;
}

static void count_ret(struct pk_retprobe *rp, struct pk_regs *r, void *data,
		      void *ctx)
{
	(void)rp, (void)r, (void)data;
	__atomic_add_fetch((int *)ctx, 1, __ATOMIC_RELAXED);
}

/* Uses floating point: xmm0 (the double returned) must survive. */
static volatile double fp_sink;
static void fp_ret(struct pk_retprobe *rp, struct pk_regs *r, void *data,
		   void *ctx)
{
	double acc = 0.25;

	(void)rp, (void)data;
	for (int i = 0; i < 4; i++)
		acc = acc * 3.5 + (double)r->rax;
	fp_sink = acc;
	(*(int *)ctx)++;
}

static void plus_100(struct pk_retprobe *rp, struct pk_regs *r, void *data,
		     void *ctx)
{
	(void)rp, (void)data, (void)ctx;
	r->rax += 100;
}

static int skip_odd(struct pk_retprobe *rp, struct pk_regs *r, void *data,
		    void *ctx)
{
	(void)rp, (void)data, (void)ctx;
	return (int)(r->rdi & 1);
}

static int mk(const char *sym, void *addr, pk_retprobe_entry_fn e,
	      pk_retprobe_ret_fn f, void *ctx, struct pk_retprobe **out)
{
	PK_OPTS(pk_retprobe_opts, o, .symbol = sym, .addr = addr, .entry = e,
		.ret = f, .ctx = ctx, .data_size = sizeof(long));

	return pk_retprobe_create(&o, out);
}

static unsigned long missed(struct pk_retprobe *rp)
{
	struct pk_retprobe_info i = { .sz = sizeof(i) };

	pk_retprobe_get_info(rp, &i);
	return i.missed;
}

/* ----------------------------------------------------------------- tests */

static void test_basic(void)
{
	static struct log l;
	struct pk_retprobe *rp = NULL, *fp = NULL, *chg = NULL;
	struct pk_retprobe_info info = { .sz = sizeof(info) };
	int fp_calls = 0;

	if (!ASSERT_OK(mk("rt_plain", NULL, log_entry, log_ret, &l, &rp), "create") ||
	    !ASSERT_OK(pk_retprobe_register(&rp, 1), "register"))
		goto out;
	ASSERT_EQ(pk_retprobe_register(&rp, 1), -EINVAL, "register twice");
	for (long i = 0; i < 5; i++)
		ASSERT_EQ(rt_plain(i, 1), i * 3 + 1, "probed result");
	ASSERT_EQ(l.entries, 5, "entry handler calls");
	ASSERT_EQ(l.rets, 5, "return handler calls");
	for (int i = 0; i < 5; i++) {
		ASSERT_EQ(l.vals[i], i * 3 + 1, "return value seen");
		ASSERT_EQ(l.data_seen[i], i, "per-call data from the entry");
	}
	ASSERT_EQ(l.ret_rsp, l.entry_rsp + 8, "rsp after the return");
	ASSERT_EQ(l.bad, 0, "data area 16-byte aligned");
	ASSERT_OK(pk_retprobe_get_info(rp, &info), "info");
	ASSERT_EQ(info.func, (uintptr_t)rt_plain, "info.func");
	ASSERT_EQ(info.armed, 1, "armed");
	ASSERT_EQ(info.missed, 0, "no miss");
	ASSERT_LE(info.bytes, 512, "bytes per return probe");
	printf("bytes per return probe: %zu\n", info.bytes);
	ASSERT_OK(pk_retprobe_unregister(&rp, 1), "unregister");
	ASSERT_EQ(pk_retprobe_unregister(&rp, 1), -EINVAL, "unregister twice");
	ASSERT_EQ(rt_plain(2, 2), 8, "after");
	ASSERT_EQ(l.rets, 5, "no handler after unregister");
	ASSERT_OK(pk_retprobe_register(&rp, 1), "register again");
	ASSERT_EQ(rt_plain(2, 2), 8, "again");
	ASSERT_EQ(l.rets, 6, "handler again");

	/* A float return value survives a handler that uses floating point. */
	if (ASSERT_OK(mk("rt_fp", NULL, NULL, fp_ret, &fp_calls, &fp), "fp") &&
	    ASSERT_OK(pk_retprobe_register(&fp, 1), "register fp")) {
		ASSERT_TRUE(rt_fp(3.0, 4) == 5.5, "xmm0 return value kept");
		ASSERT_EQ(fp_calls, 1, "fp handler ran");
	}
	/* The return handler may change the return value; entry may decline. */
	if (ASSERT_OK(mk(NULL, (void *)rt_leaf, skip_odd, plus_100, NULL, &chg),
		      "changer") &&
	    ASSERT_OK(pk_retprobe_register(&chg, 1), "register changer")) {
		ASSERT_EQ(rt_leaf(2), 111, "rax changed by the handler");
		ASSERT_EQ(rt_leaf(3), 13, "entry handler declined: unchanged");
	}
out:
	pk_retprobe_destroy(rp);
	pk_retprobe_destroy(fp);
	pk_retprobe_destroy(chg);
}

static void test_recursion(void)
{
	static struct log l;
	struct pk_retprobe *rp = NULL;
	int n = 100, ok = 1;

	if (!ASSERT_OK(mk("rt_rec", NULL, log_entry, log_ret, &l, &rp), "create") ||
	    !ASSERT_OK(pk_retprobe_register(&rp, 1), "register"))
		goto out;
	ASSERT_EQ(rt_rec(n), rec_ref(n), "recursive result");
	ASSERT_EQ(l.entries, n + 1, "entries");
	ASSERT_EQ(l.rets, n + 1, "one return per level");
	/* Innermost first: the k-th return is level k's (argument k). */
	for (int k = 0; k <= n; k++)
		ok &= l.data_seen[k] == k && l.vals[k] == rec_ref(k);
	ASSERT_TRUE(ok, "each level: its own data and its own return value");
	ASSERT_EQ(missed(rp), 0, "no miss at depth 100");
	/* Deeper than the per-thread stack: correct results, misses counted. */
	memset(&l, 0, sizeof(l));
	ASSERT_EQ(rt_rec(200), rec_ref(200), "result past the depth limit");
	ASSERT_EQ(l.rets, PK_RETPROBE_DEPTH, "returns seen up to the limit");
	ASSERT_EQ(missed(rp), 201 - PK_RETPROBE_DEPTH, "the rest missed");
	memset(&l, 0, sizeof(l));
	ASSERT_EQ(rt_rec(3), rec_ref(3), "after");
	ASSERT_EQ(l.rets, 4, "all seen again");
out:
	pk_retprobe_destroy(rp);
}

static void test_longjmp(void)
{
	int lj_rets = 0, outer_rets = 0;
	struct pk_retprobe *rp[2] = { 0 };
	volatile int jumped = 0, ok = 1;

	if (!ASSERT_OK(mk("rt_lj", NULL, NULL, count_ret, &lj_rets, &rp[0]), "lj") ||
	    !ASSERT_OK(mk("rt_outer", NULL, NULL, count_ret, &outer_rets, &rp[1]),
		       "outer") ||
	    !ASSERT_OK(pk_retprobe_register(rp, 2), "register"))
		goto out;
	/* Many more jumps out than records per thread: none may leak. */
	for (volatile int i = 0; i < 3 * PK_RETPROBE_DEPTH; i++) {
		if (setjmp(jb)) {
			jumped++;
			continue;
		}
		rt_lj(1 + i % 3);
	}
	ASSERT_EQ(jumped, 3 * PK_RETPROBE_DEPTH, "every call jumped out");
	ASSERT_EQ(lj_rets, 0, "no return handler for calls left by longjmp");
	ASSERT_EQ(rt_lj(0), 5, "next normal return correct");
	ASSERT_EQ(lj_rets, 1, "and probed");
	ASSERT_EQ(missed(rp[0]), 0, "no stale record filled the stack");
	/* A probed call jumps back into the probed call that set the target. */
	for (int i = 0; i < 2 * PK_RETPROBE_DEPTH; i++)
		ok &= rt_outer(i) == 2 * i;
	ASSERT_TRUE(ok, "outer results after inner longjmps");
	ASSERT_EQ(outer_rets, 2 * PK_RETPROBE_DEPTH, "outer returns probed");
	ASSERT_EQ(lj_rets, 1, "inner never returned");
	ASSERT_EQ(missed(rp[0]) + missed(rp[1]), 0, "no miss");
out:
	pk_retprobe_destroy(rp[0]);
	pk_retprobe_destroy(rp[1]);
}

static struct log tl, ll;
static int tail_order[4], ntail;

static void tail_ret(struct pk_retprobe *rp, struct pk_regs *r, void *d, void *c)
{
	log_ret(rp, r, d, c);
	tail_order[ntail++ & 3] = c == &tl ? 1 : 2;
}

static void test_tail_call(void)
{
	struct pk_retprobe *rp[2] = { 0 };

	if (!ASSERT_OK(mk("rt_tail", NULL, log_entry, tail_ret, &tl, &rp[0]), "tail") ||
	    !ASSERT_OK(mk("rt_leaf", NULL, log_entry, tail_ret, &ll, &rp[1]), "leaf") ||
	    !ASSERT_OK(pk_retprobe_register(rp, 2), "register"))
		goto out;
	ASSERT_EQ(rt_tail(10), 33, "tail-call result");
	ASSERT_EQ(tl.rets, 1, "caller's return seen");
	ASSERT_EQ(ll.rets, 1, "tail callee's return seen");
	ASSERT_EQ(tail_order[0], 2, "callee's handler first");
	ASSERT_EQ(tail_order[1], 1, "then the caller's");
	ASSERT_EQ(tl.vals[0], 33, "caller sees the value it returns");
	ASSERT_EQ(ll.vals[0], 33, "callee sees it too");
	ASSERT_EQ(tl.data_seen[0], 10, "caller's data");
	ASSERT_EQ(ll.data_seen[0], 13, "callee's data");
	ASSERT_EQ(rt_leaf(1), 9, "direct call");
	ASSERT_EQ(ll.rets, 2, "direct call probed");
out:
	pk_retprobe_destroy(rp[0]);
	pk_retprobe_destroy(rp[1]);
}

static int multi_order[8], nmulti;

static int m_entry(struct pk_retprobe *rp, struct pk_regs *r, void *d, void *c)
{
	(void)rp, (void)r;
	*(long *)d = (long)(intptr_t)c * 10;
	multi_order[nmulti++ & 7] = (int)(intptr_t)c;
	return 0;
}

static void m_ret(struct pk_retprobe *rp, struct pk_regs *r, void *d, void *c)
{
	(void)rp;
	if (*(long *)d != (long)(intptr_t)c * 10 || r->rax != 17)
		multi_order[nmulti++ & 7] = -1;
	else
		multi_order[nmulti++ & 7] = 10 + (int)(intptr_t)c;
}

static void test_several(void)
{
	struct pk_retprobe *rp[3] = { 0 };

	for (int i = 0; i < 3; i++)
		if (!ASSERT_OK(mk("rt_plain", NULL, m_entry, m_ret,
				  (void *)(intptr_t)(i + 1), &rp[i]), "create"))
			goto out;
	if (!ASSERT_OK(pk_retprobe_register(rp, 2), "register 1 and 2") ||
	    !ASSERT_OK(pk_retprobe_register(&rp[2], 1), "register 3 later"))
		goto out;
	ASSERT_EQ(rt_plain(5, 2), 17, "result");
	ASSERT_EQ(nmulti, 6, "three entries, three returns");
	ASSERT_EQ(multi_order[0], 1, "entry 1");
	ASSERT_EQ(multi_order[1], 2, "entry 2");
	ASSERT_EQ(multi_order[2], 3, "entry 3");
	ASSERT_EQ(multi_order[3], 13, "return 3 first, own data");
	ASSERT_EQ(multi_order[4], 12, "return 2");
	ASSERT_EQ(multi_order[5], 11, "return 1 last");
	ASSERT_OK(pk_retprobe_unregister(&rp[1], 1), "remove the middle one");
	nmulti = 0;
	ASSERT_EQ(rt_plain(5, 2), 17, "result");
	ASSERT_EQ(nmulti, 4, "two left");
	ASSERT_EQ(multi_order[2], 13, "3 returns");
	ASSERT_EQ(multi_order[3], 11, "1 returns");
out:
	for (int i = 0; i < 3; i++)
		pk_retprobe_destroy(rp[i]);
}

/* An entry probe and a return probe share a trampoline. */
static int mixed_log[8], nmixed;

static void mixed_pre(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p, (void)r, (void)ctx;
	mixed_log[nmixed++ & 7] = 1;
}

static int mixed_entry(struct pk_retprobe *rp, struct pk_regs *r, void *d,
		       void *c)
{
	(void)rp, (void)r, (void)d, (void)c;
	mixed_log[nmixed++ & 7] = 2;
	return 0;
}

static void mixed_ret(struct pk_retprobe *rp, struct pk_regs *r, void *d,
		      void *c)
{
	(void)rp, (void)d, (void)c;
	mixed_log[nmixed++ & 7] = r->rax == 204 ? 3 : -1;	/* sum of k * k */
}

static void test_mixed_and_stack_args(void)
{
	PK_OPTS(pk_probe_opts, po, .symbol = "rt_args8", .pre = mixed_pre);
	struct pk_probe *p = NULL;
	struct pk_retprobe *rp = NULL;
	long want = 1 + 2 * 2 + 3 * 3 + 4 * 4 + 5 * 5 + 6 * 6 + 7 * 7 + 8 * 8;

	if (!ASSERT_OK(pk_probe_create(&po, &p), "entry probe") ||
	    !ASSERT_OK(mk("rt_args8", NULL, mixed_entry, mixed_ret, NULL, &rp),
		       "return probe") ||
	    !ASSERT_OK(pk_probe_register(&p, 1), "register entry probe") ||
	    !ASSERT_OK(pk_retprobe_register(&rp, 1), "register return probe"))
		goto out;
	ASSERT_EQ(rt_args8(1, 2, 3, 4, 5, 6, 7, 8), want, "stack arguments seen");
	ASSERT_EQ(nmixed, 3, "entry, entry, return");
	ASSERT_EQ(mixed_log[0], 1, "entry probe first (registered first)");
	ASSERT_EQ(mixed_log[1], 2, "then the return probe's entry");
	ASSERT_EQ(mixed_log[2], 3, "return handler saw the value");
	ASSERT_OK(pk_retprobe_unregister(&rp, 1), "remove the return probe");
	ASSERT_EQ(rt_args8(1, 2, 3, 4, 5, 6, 7, 8), want, "entry probe alone");
	ASSERT_EQ(nmixed, 4, "entry probe still there");
	ASSERT_OK(pk_retprobe_register(&rp, 1), "return probe again");
	ASSERT_OK(pk_probe_unregister(&p, 1), "remove the entry probe");
	ASSERT_EQ(rt_args8(1, 2, 3, 4, 5, 6, 7, 8), want, "return probe alone");
	ASSERT_EQ(nmixed, 6, "its entry and return");
	ASSERT_EQ(mixed_log[5], 3, "value");
out:
	pk_probe_destroy(p);
	pk_retprobe_destroy(rp);
}

/* A signal handler (on an alternate stack) calls probed code mid-call. */
static volatile long sig_val;
static void on_usr1(int sig)
{
	(void)sig;
	sig_val = rt_leaf(20);
}

static void *first_hit_in_handler(void *arg)
{
	(void)arg;
	raise(SIGUSR1);		/* no alternate stack in this thread */
	return (void *)rt_leaf(1);
}

static void test_signal(void)
{
	int sig_rets = 0, leaf_rets = 0;
	struct pk_retprobe *rp[2] = { 0 };
	struct sigaction sa, old;
	stack_t ss = { 0 }, oss;

	ss.ss_size = 1 << 16;
	ss.ss_sp = malloc(ss.ss_size);
	sigaltstack(&ss, &oss);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sa.sa_flags = SA_ONSTACK;
	sigaction(SIGUSR1, &sa, &old);
	if (!ASSERT_OK(mk("rt_sig", NULL, NULL, count_ret, &sig_rets, &rp[0]), "sig") ||
	    !ASSERT_OK(mk("rt_leaf", NULL, NULL, count_ret, &leaf_rets, &rp[1]), "leaf") ||
	    !ASSERT_OK(pk_retprobe_register(rp, 2), "register"))
		goto out;
	for (int i = 0; i < 10; i++) {
		sig_val = 0;
		ASSERT_EQ(rt_sig(i), i + 1, "interrupted call's result");
		ASSERT_EQ(sig_val, 47, "signal handler's call result");
	}
	ASSERT_EQ(sig_rets, 10, "outer returns");
	ASSERT_EQ(leaf_rets, 10, "returns inside the signal handler");
	/* A thread whose first hit is in a signal handler: records claimed there. */
	{
		pthread_t t;
		void *res = NULL;

		sig_val = 0;
		pthread_create(&t, NULL, first_hit_in_handler, NULL);
		pthread_join(t, &res);
		ASSERT_EQ(sig_val, 47, "first hit in a handler: result");
		ASSERT_EQ((long)res, 9, "the thread's later call");
		ASSERT_EQ(leaf_rets, 12, "both probed");
		ASSERT_EQ(missed(rp[1]), 0, "records claimed in the handler");
	}
out:
	pk_retprobe_destroy(rp[0]);
	pk_retprobe_destroy(rp[1]);
	sigaction(SIGUSR1, &old, NULL);
	sigaltstack(&oss, NULL);
	free(ss.ss_sp);
}

static void *exit_thread(void *arg)
{
	long r = rt_exit(0);	/* a normal return first */

	rt_exit((long)arg + r);	/* pthread_exit inside the probed call */
	return NULL;
}

static void test_thread_exit(void)
{
	int rets = 0;
	struct pk_retprobe *rp = NULL;

	if (!ASSERT_OK(mk("rt_exit", NULL, NULL, count_ret, &rets, &rp), "create") ||
	    !ASSERT_OK(pk_retprobe_register(&rp, 1), "register"))
		goto out;
	/* Five times as many threads as the pool has blocks, one at a time. */
	for (long i = 0; i < 5 * POOL; i++) {
		pthread_t t;
		void *res = NULL;

		pthread_create(&t, NULL, exit_thread, (void *)(i + 1));
		pthread_join(t, &res);
		if (!ASSERT_EQ((long)res, i + 1, "pthread_exit value"))
			break;
	}
	ASSERT_EQ(rets, 5 * POOL, "each thread's normal return probed");
	ASSERT_EQ(missed(rp), 0, "exited threads gave their records back");
out:
	pk_retprobe_destroy(rp);
}

/* A thread inside a probed call when the probe goes: returns correctly. */
static void *wait_thread(void *arg)
{
	return (void *)rt_wait((long)arg);
}

static void test_unregister_inside(void)
{
	int rets = 0;
	struct pk_retprobe *rp = NULL;
	pthread_t t;
	void *res = NULL;

	if (!ASSERT_OK(mk("rt_wait", NULL, NULL, count_ret, &rets, &rp), "create") ||
	    !ASSERT_OK(pk_retprobe_register(&rp, 1), "register"))
		goto out;
	wait_in = wait_go = 0;
	pthread_create(&t, NULL, wait_thread, (void *)41);
	while (!wait_in)
		usleep(1000);
	ASSERT_OK(pk_retprobe_unregister(&rp, 1), "unregister, a thread inside");
	pk_retprobe_destroy(rp);
	rp = NULL;	/* a use of the freed probe: ASan's build reports it */
	wait_go = 1;
	pthread_join(t, &res);
	ASSERT_EQ((long)res, 42, "it returned to its caller");
	ASSERT_EQ(rets, 0, "without the handler of the gone probe");
out:
	wait_go = 1;
	pk_retprobe_destroy(rp);
}

/* Unregister waits for a return handler that is running. */
static volatile int blk_in, blk_go, blk_out;

static void blocking_ret(struct pk_retprobe *rp, struct pk_regs *r, void *d,
			 void *c)
{
	(void)rp, (void)r, (void)d, (void)c;
	blk_in = 1;
	while (!blk_go)
		__asm__ volatile("pause");
	blk_out = 1;
}

static void *plain_thread(void *arg)
{
	(void)arg;
	return (void *)rt_plain(1, 1);
}

static void *release_later(void *arg)
{
	double end = t_now() + 0.2;

	(void)arg;
	while (t_now() < end)
		usleep(10000);
	blk_go = 1;
	return NULL;
}

static void test_unregister_waits(void)
{
	struct pk_retprobe *rp = NULL;
	pthread_t t1, t2;
	void *res = NULL;

	if (!ASSERT_OK(mk("rt_plain", NULL, NULL, blocking_ret, NULL, &rp), "create") ||
	    !ASSERT_OK(pk_retprobe_register(&rp, 1), "register"))
		goto out;
	pthread_create(&t1, NULL, plain_thread, NULL);
	while (!blk_in)
		usleep(1000);
	pthread_create(&t2, NULL, release_later, NULL);
	ASSERT_OK(pk_retprobe_unregister(&rp, 1), "unregister");
	ASSERT_EQ(blk_out, 1, "returned only after the handler left");
	pthread_join(t1, &res);
	pthread_join(t2, NULL);
	ASSERT_EQ((long)res, 4, "the call's result");
out:
	blk_go = 1;
	pk_retprobe_destroy(rp);
}

static void test_refusals(void)
{
	struct pk_retprobe *rp = NULL;
	PK_OPTS(pk_retprobe_opts, no_ret, .symbol = "rt_plain");
	PK_OPTS(pk_retprobe_opts, big, .symbol = "rt_plain", .ret = count_ret,
		.data_size = PK_RETPROBE_DATA_MAX + 1);
	PK_OPTS(pk_retprobe_opts, max, .symbol = "rt_plain", .ret = count_ret,
		.data_size = PK_RETPROBE_DATA_MAX);
	PK_OPTS(pk_retprobe_opts, none, .ret = count_ret);

	pk_set_log(t_quiet_log, NULL);
	ASSERT_EQ(pk_retprobe_create(&no_ret, &rp), -EINVAL, "no return handler");
	ASSERT_EQ(pk_retprobe_create(&big, &rp), -E2BIG, "data too large");
	ASSERT_EQ(pk_retprobe_create(&none, &rp), -EINVAL, "no symbol nor address");
	ASSERT_EQ(mk("no_such_function_here", NULL, NULL, count_ret, NULL, &rp),
		  -ENOENT, "missing symbol");
	ASSERT_EQ(mk(NULL, (char *)rt_plain + 1, NULL, count_ret, NULL, &rp),
		  -EINVAL, "not a function's start");
	if (ASSERT_OK(pk_retprobe_create(&max, &rp), "largest data")) {
		struct pk_retprobe *two[2] = { rp, rp };

		ASSERT_EQ(pk_retprobe_register(two, 2), -EINVAL, "same probe twice");
		ASSERT_EQ(pk_retprobe_unregister(&rp, 1), -EINVAL, "not armed");
		pk_retprobe_destroy(rp);
	}
	if (ASSERT_OK(pk_retprobe_create(&max, &rp), "a probe to describe")) {
		struct pk_retprobe_info info = { .sz = sizeof(info) };
		struct pk_retprobe_info zero = { .sz = 0 };

		ASSERT_EQ(pk_retprobe_get_info(NULL, &info), -EINVAL, "info of NULL");
		ASSERT_EQ(pk_retprobe_get_info(rp, NULL), -EINVAL, "info into NULL");
		ASSERT_EQ(pk_retprobe_get_info(rp, &zero), -EINVAL, "info.sz 0");
		ASSERT_EQ(pk_retprobe_register(&rp, 0), -EINVAL, "register n 0");
		ASSERT_EQ(pk_retprobe_unregister(&rp, 0), -EINVAL, "unregister n 0");
		ASSERT_OK(pk_retprobe_get_info(rp, &info), "info");
		ASSERT_EQ(info.armed, 0, "n 0: nothing armed");
		pk_retprobe_destroy(rp);
	}
	{
		/* sz below the fields this version needs; an unknown tail. */
		struct {
			struct pk_retprobe_opts o;
			char tail[8];
		} grown = { .o = { .sz = sizeof(grown), .symbol = "rt_plain",
				   .ret = count_ret } };
		struct pk_retprobe_opts small = { .sz = sizeof(size_t),
						  .symbol = "rt_plain",
						  .ret = count_ret };

		ASSERT_EQ(pk_retprobe_create(&small, &rp), -EINVAL, "opts.sz too small");
		grown.tail[5] = 1;
		ASSERT_EQ(pk_retprobe_create(&grown.o, &rp), -EINVAL,
			  "unknown non-zero trailing bytes");
		grown.tail[5] = 0;
		if (ASSERT_OK(pk_retprobe_create(&grown.o, &rp), "zero trailing bytes"))
			pk_retprobe_destroy(rp);
	}
	ASSERT_EQ(pk_retprobe_register(NULL, 1), -EINVAL, "NULL set");
	ASSERT_EQ(pk_retprobe_unregister(NULL, 1), -EINVAL, "NULL unregister");
	pk_retprobe_destroy(NULL);
	pk_set_log(NULL, NULL);
}

int main(void)
{
	char n[16];

	snprintf(n, sizeof(n), "%d", POOL);
	setenv("PROBEKIT_RETPROBE_THREADS", n, 1);
	test_basic();
	test_recursion();
	test_longjmp();
	test_tail_call();
	test_several();
	test_mixed_and_stack_args();
	test_signal();
	test_thread_exit();
	test_unregister_inside();
	test_unregister_waits();
	test_refusals();
	return t_exit();
}
