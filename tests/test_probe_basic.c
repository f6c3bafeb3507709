// SPDX-License-Identifier: MIT
/* test_probe_basic.c - symbols, entry probes on a library and the executable, refusals. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "probe_target.h"
#include "probekit.h"

/* A function of the executable itself. */
__attribute__((noinline)) long exe_mix(long a, long b)
{
	volatile long x = a;

	return x * 7 - b;
}

__attribute__((noinline, used)) static long pt_dup_static(long a)
{
	volatile long x = a;

	return x + 2;
}

struct seen {
	int hits;
	uint64_t args[6];
	uint64_t ip;
	int order[4], norder;
};

static void record(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	struct seen *s = ctx;

	(void)p;
	s->hits++;
	s->ip = r->ip;
	for (unsigned int i = 0; i < 6; i++)
		s->args[i] = pk_regs_arg(r, i);
}

static struct seen order_log;

static void first(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p, (void)r, (void)ctx;
	order_log.order[order_log.norder++ & 3] = 1;
}

static void second(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p, (void)r, (void)ctx;
	order_log.order[order_log.norder++ & 3] = 2;
}

/* Changes the first argument: the function must see it. */
static void double_arg0(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p, (void)ctx;
	r->rdi *= 2;
}

/* Uses vector registers: the probed function's xmm arguments must survive. */
static volatile double sink;
static void clobber_fp(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	double acc = 1.5;

	(void)p, (void)ctx;
	for (int i = 0; i < 8; i++)
		acc = acc * 1.25 + (double)r->rdi;
	sink = acc;
}

static int attach(const char *sym, void *addr, pk_probe_handler_fn fn,
		  void *ctx, struct pk_probe **out)
{
	PK_OPTS(pk_probe_opts, o, .symbol = sym, .addr = addr, .pre = fn,
		.ctx = ctx);

	return pk_probe_create(&o, out);
}

static void test_symbols(void)
{
	struct pk_sym s;

	ASSERT_OK(pk_sym_lookup("pt_sum6", &s), "lookup pt_sum6");
	ASSERT_EQ(s.addr, (uintptr_t)pt_sum6, "address");
	ASSERT_EQ(s.table, PK_SYM_DYNSYM, "exported: .dynsym");
	ASSERT_GE(s.size, 5, "size from the symbol table");
	ASSERT_TRUE(strstr(s.object, "libprobetarget.so"), "object");
	ASSERT_OK(pk_sym_lookup("libprobetarget.so:pt_sum6", &s), "qualified");
	ASSERT_OK(pk_sym_lookup("libprobetarget:pt_sum6", &s), "up to a dot");
	ASSERT_OK(pk_sym_lookup("pt_static_mul", &s), "static function");
	ASSERT_EQ(s.addr, (uintptr_t)pt_get_static_mul(), "its address");
	ASSERT_EQ(s.table, PK_SYM_SYMTAB, "static: .symtab");
	ASSERT_OK(pk_sym_lookup("exe_mix", &s), "executable's function");
	ASSERT_EQ(s.addr, (uintptr_t)exe_mix, "its address");
	ASSERT_EQ(pk_sym_lookup("pt_dup_static", &s), -EINVAL, "two locals: ambiguous");
	ASSERT_OK(pk_sym_lookup("test_probe_basic:pt_dup_static", &s), "qualified local");
	ASSERT_EQ(s.addr, (uintptr_t)pt_dup_static, "the executable's one");
	ASSERT_EQ(pk_sym_lookup("no_such_function_here", &s), -ENOENT, "missing");
	ASSERT_EQ(pk_sym_lookup("libnothere.so:pt_sum6", &s), -ENOENT, "no object");
	ASSERT_EQ(pk_sym_lookup(":x", &s), -EINVAL, "empty object");
	ASSERT_EQ(pk_sym_lookup("", &s), -EINVAL, "empty");
	ASSERT_OK(pk_sym_lookup("libc.so.6:getpid", &s), "libc");
	ASSERT_EQ(s.addr, (uintptr_t)dlsym(RTLD_DEFAULT, "getpid"), "libc getpid");
}

static void test_entry_probe(void)
{
	struct seen lib = { 0 }, exe = { 0 };
	struct pk_probe *p[2] = { 0 };
	struct pk_probe_info info = { .sz = sizeof(info) };
	long want = pt_sum6_ref(1, 2, 3, 4, 5, 6);

	if (!ASSERT_OK(attach("libprobetarget.so:pt_sum6", NULL, record, &lib, &p[0]),
		       "create by symbol") ||
	    !ASSERT_OK(attach(NULL, (void *)exe_mix, record, &exe, &p[1]),
		       "create by address"))
		goto out;
	ASSERT_EQ(pt_sum6(1, 2, 3, 4, 5, 6), want, "unprobed result");
	if (!ASSERT_OK(pk_probe_register(p, 2), "register both, one batch"))
		goto out;
	ASSERT_EQ(pk_probe_register(p, 1), -EINVAL, "register twice");
	for (int i = 0; i < 3; i++) {
		ASSERT_EQ(pt_sum6(1, 2, 3, 4, 5, 6), want, "probed result");
		ASSERT_EQ(exe_mix(6, 5), 37, "probed exe result");
	}
	ASSERT_EQ(lib.hits, 3, "library hits");
	ASSERT_EQ(exe.hits, 3, "executable hits");
	for (unsigned int i = 0; i < 6; i++)
		ASSERT_EQ(lib.args[i], i + 1, "argument seen by the handler");
	ASSERT_EQ(exe.args[0], 6, "exe arg0");
	ASSERT_EQ(exe.args[1], 5, "exe arg1");
	ASSERT_EQ(lib.ip, (uintptr_t)pt_sum6 +
		  (!memcmp((void *)pt_sum6, "\xf3\x0f\x1e\xfa", 4) ? 4 : 0), "regs->ip");
	ASSERT_OK(pk_probe_get_info(p[0], &info), "info");
	ASSERT_EQ(info.armed, 1, "armed");
	ASSERT_GE(info.displaced, 5, "displaced bytes");
	ASSERT_LE(info.bytes, 256, "bytes per probe");
	ASSERT_EQ(info.kind, PK_PROBE_JUMP, "a jump probe");
	printf("bytes per probe: %zu, displaced %zu\n", info.bytes, info.displaced);
	ASSERT_NE(memcmp((void *)info.addr, "\x00", 1), 2, "readable");
	ASSERT_OK(pk_probe_unregister(p, 2), "unregister both");
	ASSERT_EQ(pk_probe_unregister(p, 1), -EINVAL, "unregister twice");
	ASSERT_EQ(pt_sum6(1, 2, 3, 4, 5, 6), want, "result after");
	ASSERT_EQ(lib.hits, 3, "no hit after unregister");
	/* Armed again: the bytes came back exactly. */
	ASSERT_OK(pk_probe_register(p, 2), "re-register");
	ASSERT_EQ(pt_sum6(1, 2, 3, 4, 5, 6), want, "result re-armed");
	ASSERT_EQ(lib.hits, 4, "hit re-armed");
out:
	pk_probe_destroy(p[0]);
	pk_probe_destroy(p[1]);
	ASSERT_EQ(exe_mix(6, 5), 37, "exe result after destroy");
}

static void test_shared_and_regs(void)
{
	struct pk_probe *a = NULL, *b = NULL, *c = NULL, *d = NULL, *e = NULL;
	struct seen s = { 0 };

	if (!ASSERT_OK(attach("pt_sum6", NULL, first, NULL, &a), "a") ||
	    !ASSERT_OK(attach("pt_sum6", NULL, second, NULL, &b), "b"))
		goto out;
	ASSERT_OK(pk_probe_register(&a, 1), "register a");
	ASSERT_OK(pk_probe_register(&b, 1), "register b on the same address");
	pt_sum6(0, 0, 0, 0, 0, 0);
	ASSERT_EQ(order_log.norder, 2, "both ran");
	ASSERT_EQ(order_log.order[0], 1, "registration order 1");
	ASSERT_EQ(order_log.order[1], 2, "registration order 2");
	ASSERT_OK(pk_probe_unregister(&a, 1), "remove a, b stays");
	pt_sum6(0, 0, 0, 0, 0, 0);
	ASSERT_EQ(order_log.norder, 3, "b alone");
	ASSERT_EQ(order_log.order[2], 2, "b ran");
	ASSERT_OK(pk_probe_unregister(&b, 1), "remove b");

	/* A handler may change argument registers. */
	if (ASSERT_OK(attach("pt_sum6", NULL, double_arg0, NULL, &c), "c")) {
		ASSERT_OK(pk_probe_register(&c, 1), "register c");
		ASSERT_EQ(pt_sum6(10, 0, 0, 0, 0, 0), 20, "changed rdi seen");
		ASSERT_OK(pk_probe_unregister(&c, 1), "remove c");
		ASSERT_EQ(pt_sum6(10, 0, 0, 0, 0, 0), 10, "unchanged after");
	}
	/* Vector arguments survive a handler that uses floating point. */
	if (ASSERT_OK(attach("pt_fmix", NULL, clobber_fp, NULL, &d), "d")) {
		double want = pt_fmix(1.5, 2.25, 3);

		ASSERT_OK(pk_probe_register(&d, 1), "register d");
		ASSERT_TRUE(pt_fmix(1.5, 2.25, 3) == want, "xmm arguments kept");
	}
	/* endbr64 stays first. */
	if (ASSERT_OK(attach("pt_asm_endbr", NULL, record, &s, &e), "endbr")) {
		struct pk_probe_info info = { .sz = sizeof(info) };

		pk_probe_get_info(e, &info);
		ASSERT_EQ(info.addr, (uintptr_t)pt_asm_endbr + 4, "probed after endbr64");
		ASSERT_OK(pk_probe_register(&e, 1), "register endbr");
		ASSERT_EQ(pt_asm_endbr(40, 2), 42, "endbr result");
		ASSERT_EQ(s.hits, 1, "endbr hit");
		ASSERT_MEM_EQ((void *)pt_asm_endbr, "\xf3\x0f\x1e\xfa", 4, "endbr64 in place");
	}
	/* PC-relative displaced instructions move: [rip+x] and a widened jz. */
	{
		struct seen rs = { 0 };
		struct pk_probe *pr[2] = { 0 };

		if (ASSERT_OK(attach("pt_asm_rip", NULL, record, &rs, &pr[0]), "rip probe") &&
		    ASSERT_OK(attach("pt_asm_jcc", NULL, record, &rs, &pr[1]), "jcc probe") &&
		    ASSERT_OK(pk_probe_register(pr, 2), "register rip+jcc")) {
			ASSERT_EQ(pt_asm_rip(5), 105, "[rip+x] load from the trampoline");
			ASSERT_EQ(pt_asm_jcc(0), -1, "jz taken from the trampoline");
			ASSERT_EQ(pt_asm_jcc(41), 42, "jz not taken");
			ASSERT_EQ(rs.hits, 3, "hits");
			ASSERT_OK(pk_probe_unregister(pr, 2), "unregister rip+jcc");
			ASSERT_EQ(pt_asm_rip(5), 105, "restored");
			ASSERT_EQ(pt_asm_jcc(0), -1, "restored jcc");
		}
		pk_probe_destroy(pr[0]);
		pk_probe_destroy(pr[1]);
	}
out:
	pk_probe_destroy(a);
	pk_probe_destroy(b);
	pk_probe_destroy(c);
	pk_probe_destroy(d);
	pk_probe_destroy(e);
}

static void ret_unused(struct pk_retprobe *rp, struct pk_regs *r, void *data,
		       void *ctx)
{
	(void)rp, (void)r, (void)data, (void)ctx;
}

static void test_refusals(void)
{
	struct pk_probe *p = NULL;
	struct pk_sym s;
	PK_OPTS(pk_probe_opts, none, .pre = record);

	pk_set_log(t_quiet_log, NULL);
	ASSERT_EQ(pk_probe_create(&none, &p), -EINVAL, "neither symbol nor address");
	{
		/*
		 * A size no options struct has (a caller's wrong sz): refused
		 * before its "unknown fields" are read, not read a MiB past
		 * the caller's struct.
		 */
		PK_OPTS(pk_probe_opts, huge, .symbol = "pt_sum6", .pre = record);
		PK_OPTS(pk_retprobe_opts, rhuge, .symbol = "pt_sum6",
			.ret = ret_unused);
		struct pk_retprobe *rp = NULL;

		huge.sz = rhuge.sz = 1 << 20;
		ASSERT_EQ(pk_probe_create(&huge, &p), -E2BIG, "opts.sz 1 MiB");
		ASSERT_EQ(pk_retprobe_create(&rhuge, &rp), -E2BIG,
			  "retprobe opts.sz 1 MiB");
		/* A larger struct whose unknown tail is zero is fine. */
		struct { struct pk_probe_opts o; char more[64]; } bigger = {
			.o = { .sz = sizeof(bigger), .symbol = "pt_sum6",
			       .pre = record } };

		if (ASSERT_OK(pk_probe_create(&bigger.o, &p), "a newer, larger opts"))
			pk_probe_destroy(p);
		bigger.more[10] = 1;
		ASSERT_EQ(pk_probe_create(&bigger.o, &p), -EINVAL,
			  "a field this version does not know, set");
	}
	/* No jump probe possible: int3 probes, see tests/test_probe_int3.c. */
	/*
	 * Neither a jump probe (jrcxz's target is inside the first 5 bytes)
	 * nor an int3 probe (jrcxz can be neither moved nor emulated), with
	 * no post-handler asked for.
	 */
	ASSERT_EQ(attach("pt_asm_jrcxz", NULL, record, NULL, &p), -ENOTSUP,
		  "jrcxz: neither movable nor emulable");
	ASSERT_EQ(pt_asm_jrcxz(7), 7, "pt_asm_jrcxz still runs");
	{
		/* A return probe needs that entry probe: refused the same way. */
		PK_OPTS(pk_retprobe_opts, ro, .symbol = "pt_asm_jrcxz",
			.ret = ret_unused);
		struct pk_retprobe *rp = NULL;

		ASSERT_EQ(pk_retprobe_create(&ro, &rp), -ENOTSUP,
			  "jrcxz: no return probe either");
	}
	ASSERT_EQ(attach(NULL, (char *)exe_mix + 1, record, NULL, &p), -EINVAL,
		  "not a function's start");
	ASSERT_EQ(attach(NULL, &t_passed, record, NULL, &p), -EINVAL,
		  "data, not code");
	ASSERT_EQ(attach("no_such_function_here", NULL, record, NULL, &p), -ENOENT,
		  "missing symbol");
	if (ASSERT_OK(pk_sym_lookup("libprobekit.so:pk_probe_dispatch", &s),
		      "the dispatcher has a .symtab entry"))
		ASSERT_EQ(attach(NULL, (void *)s.addr, record, NULL, &p), -EINVAL,
			  "probekit's own trap path (PK_NOPROBE)");
	/* A trampoline: where an armed probe's jmp goes. */
	if (ASSERT_OK(attach("exe_mix", NULL, record, NULL, &p), "probe for tramp")) {
		struct pk_probe *q = NULL;
		struct pk_probe_info info = { .sz = sizeof(info) };
		int32_t rel;
		uintptr_t tramp;

		ASSERT_OK(pk_probe_register(&p, 1), "arm");
		pk_probe_get_info(p, &info);
		memcpy(&rel, (char *)info.addr + info.displaced - 4, 4);
		tramp = info.addr + info.displaced + (uintptr_t)(intptr_t)rel;
		ASSERT_EQ(attach(NULL, (void *)tramp, record, NULL, &q), -EINVAL,
			  "a trampoline");
		ASSERT_EQ(attach(NULL, (void *)(tramp & ~(uintptr_t)0xffff), record,
				 NULL, &q), -EINVAL, "a trampoline stub");
		pk_probe_destroy(p);
	}
	ASSERT_EQ(pk_probe_register(NULL, 1), -EINVAL, "NULL set");
	ASSERT_EQ(pk_probe_unregister(NULL, 1), -EINVAL, "NULL unregister");
	pk_probe_destroy(NULL);
	pk_set_log(NULL, NULL);
}

/* Unregister waits for a handler that is running, and only for its own. */
static volatile int blk_entered, blk_release, blk_left;

static void blocker(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p, (void)r, (void)ctx;
	blk_entered = 1;
	while (!blk_release)
		__asm__ volatile("pause");
	blk_left = 1;
}

static void *call_sum6(void *arg)
{
	(void)arg;
	pt_sum6(1, 1, 1, 1, 1, 1);
	return NULL;
}

static void *release_later(void *arg)
{
	double end = t_now() + 0.2;

	(void)arg;
	/* The sweep signal cuts a sleep short (EINTR), as any signal does. */
	while (t_now() < end)
		usleep(10000);
	blk_release = 1;
	return NULL;
}

static void test_unregister_waits(void)
{
	struct pk_probe *a = NULL, *b = NULL;
	pthread_t t1, t2;

	if (!ASSERT_OK(attach("pt_sum6", NULL, blocker, NULL, &a), "blocker") ||
	    !ASSERT_OK(attach("exe_mix", NULL, record, &order_log, &b), "other") ||
	    !ASSERT_OK(pk_probe_register(&a, 1), "register blocker") ||
	    !ASSERT_OK(pk_probe_register(&b, 1), "register other"))
		goto out;
	pthread_create(&t1, NULL, call_sum6, NULL);
	while (!blk_entered)
		usleep(1000);
	ASSERT_OK(pk_probe_unregister(&b, 1), "unregister an unrelated probe");
	ASSERT_EQ(blk_left, 0, "not held up by the blocker, still running");
	pthread_create(&t2, NULL, release_later, NULL);
	ASSERT_OK(pk_probe_unregister(&a, 1), "unregister the running one");
	ASSERT_EQ(blk_left, 1, "returned only after its handler left");
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
out:
	blk_release = 1;
	pk_probe_destroy(a);
	pk_probe_destroy(b);
}

int main(void)
{
	test_symbols();
	test_entry_probe();
	test_shared_and_regs();
	test_refusals();
	test_unregister_waits();
	return t_exit();
}
