// SPDX-License-Identifier: MIT
/* test_probe_int3.c - int3 probes, offset probes, post-handlers, live registers/flags/red zone, their refusals. */
#include <errno.h>
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

struct seen {
	int pre, post;
	uint64_t pre_ip, post_ip, pre_rax, post_rax, post_rdi, flags;
	uint64_t args[6];
	int order[8], norder;
};

static void on_pre(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	struct seen *s = ctx;

	(void)p;
	s->pre++;
	s->pre_ip = r->ip;
	s->pre_rax = r->rax;
	s->flags = r->flags;
	for (unsigned int i = 0; i < 6; i++)
		s->args[i] = pk_regs_arg(r, i);
	s->order[s->norder++ & 7] = 1;
}

static void on_post(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	struct seen *s = ctx;

	(void)p;
	s->post++;
	s->post_ip = r->ip;
	s->post_rax = r->rax;
	s->post_rdi = r->rdi;
	s->order[s->norder++ & 7] = 2;
}

/* The post-handler changes rax after "mov %rdi,%rax": the function sees it. */
static void post_set_rax(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	on_post(p, r, ctx);
	r->rax = 1000;
}

static void double_arg0(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	on_pre(p, r, ctx);
	r->rdi *= 2;
}

/* Uses the stack, vector registers and libc, and leaves garbage behind. */
static volatile double sink;
static void busy(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	char junk[512];
	double acc = 1.5;

	on_pre(p, r, ctx);
	memset(junk, 0x5a, sizeof(junk));
	for (int i = 0; i < 8; i++)
		acc = acc * 1.25 + junk[i];
	sink = acc;
}

static int create(const char *sym, void *addr, size_t off, unsigned int flags,
		  pk_probe_handler_fn pre, pk_probe_handler_fn post, void *ctx,
		  struct pk_probe **out)
{
	PK_OPTS(pk_probe_opts, o, .symbol = sym, .addr = addr, .pre = pre,
		.ctx = ctx, .offset = off, .post = post, .flags = flags);

	*out = NULL;
	return pk_probe_create(&o, out);
}

static int kind_of(struct pk_probe *p)
{
	struct pk_probe_info info = { .sz = sizeof(info) };

	if (pk_probe_get_info(p, &info))
		return -1;
	return info.kind;
}

static int icalls;
static void icallee(void)
{
	icalls++;
}

/* Where a jump probe is impossible, an int3 probe works. */
static void test_fallbacks(void)
{
	static const char *const syms[] = { "pt_asm_short", "pt_asm_loop",
					    "pt_asm_call", "pt_asm_icall" };
	struct seen s[4] = { 0 };
	struct pk_probe *p[4] = { 0 };
	uint8_t before[4][8];
	void *fn[4] = { (void *)pt_asm_short, (void *)pt_asm_loop,
			(void *)pt_asm_call, (void *)pt_asm_icall };

	for (int i = 0; i < 4; i++) {
		memcpy(before[i], fn[i], 8);
		/*
		 * pt_asm_call's call rel32 is the last displaced instruction:
		 * a jump probe since issue 12 (test_place_call); forced here.
		 */
		if (!ASSERT_OK(create(syms[i], NULL, 0, i == 2 ? PK_PROBE_F_INT3 : 0,
				      on_pre, NULL, &s[i], &p[i]), syms[i]))
			goto out;
		ASSERT_EQ(kind_of(p[i]), PK_PROBE_INT3, "planned as an int3 probe");
	}
	if (!ASSERT_OK(pk_probe_register(p, 4), "register four int3 probes, one batch"))
		goto out;
	for (int i = 0; i < 4; i++) {
		ASSERT_EQ(kind_of(p[i]), PK_PROBE_INT3, "armed as an int3 probe");
		ASSERT_EQ(*(uint8_t *)fn[i], 0xcc, "int3 on the probed instruction");
		ASSERT_MEM_EQ((uint8_t *)fn[i] + 1, before[i] + 1, 4, "the rest unchanged");
	}
	for (int k = 0; k < 3; k++) {
		pt_asm_short();
		ASSERT_EQ(pt_asm_loop(4), 10, "loop result");
		ASSERT_EQ(pt_asm_call(7), 7, "call result (emulated call)");
		ASSERT_EQ(pt_asm_icall(9, icallee), 9, "indirect call result");
	}
	ASSERT_EQ(icalls, 3, "indirect callee ran");
	for (int i = 0; i < 4; i++) {
		/* pt_asm_call calls pt_asm_short. */
		ASSERT_EQ(s[i].pre, i == 0 ? 6 : 3, syms[i]);
		ASSERT_EQ(s[i].pre_ip, (uintptr_t)fn[i], "regs->ip is the probe point");
	}
	ASSERT_EQ(s[1].args[0], 4, "argument seen through an int3 probe");
	ASSERT_OK(pk_probe_unregister(p, 4), "unregister");
	for (int i = 0; i < 4; i++)
		ASSERT_MEM_EQ(fn[i], before[i], 8, "bytes restored");
	ASSERT_EQ(pt_asm_loop(4), 10, "loop result after");
	ASSERT_EQ(s[1].pre, 3, "no hit after unregister");
out:
	for (int i = 0; i < 4; i++)
		pk_probe_destroy(p[i]);
}

/* PK_PROBE_F_INT3 where a jump probe would fit. */
static void test_forced(void)
{
	struct seen s = { 0 }, r = { 0 }, j = { 0 }, e = { 0 };
	struct pk_probe *p[4] = { 0 };
	long want = pt_sum6_ref(1, 2, 3, 4, 5, 6);

	if (!ASSERT_OK(create("pt_sum6", NULL, 0, PK_PROBE_F_INT3, on_pre, NULL, &s,
			      &p[0]), "forced sum6") ||
	    !ASSERT_OK(create("pt_asm_rip", NULL, 0, PK_PROBE_F_INT3, on_pre, NULL,
			      &r, &p[1]), "forced rip") ||
	    !ASSERT_OK(create("pt_asm_jcc", NULL, 0, PK_PROBE_F_INT3, on_pre, NULL,
			      &j, &p[2]), "forced jcc") ||
	    !ASSERT_OK(create(NULL, (void *)exe_mix, 0, PK_PROBE_F_INT3, double_arg0,
			      NULL, &e, &p[3]), "forced exe"))
		goto out;
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(kind_of(p[i]), PK_PROBE_INT3, "int3 as asked");
	if (!ASSERT_OK(pk_probe_register(p, 4), "register"))
		goto out;
	ASSERT_EQ(pt_sum6(1, 2, 3, 4, 5, 6), want, "sum6 result");
	for (unsigned int i = 0; i < 6; i++)
		ASSERT_EQ(s.args[i], i + 1, "arguments");
	ASSERT_EQ(pt_asm_rip(5), 105, "[rip+x] moved out of line");
	ASSERT_EQ(pt_asm_jcc(0), -1, "test run out of line");
	ASSERT_EQ(pt_asm_jcc(41), 42, "jcc not taken");
	ASSERT_EQ(exe_mix(3, 1), 6 * 7 - 1, "changed rdi seen by the function");
	ASSERT_EQ(s.pre, 1, "sum6 hits");
	ASSERT_EQ(r.pre, 1, "rip hits");
	ASSERT_EQ(j.pre, 2, "jcc hits");
	ASSERT_EQ(e.pre, 1, "exe hits");
	ASSERT_OK(pk_probe_unregister(p, 4), "unregister");
	ASSERT_EQ(exe_mix(3, 1), 20, "exe unchanged after");
out:
	for (int i = 0; i < 4; i++)
		pk_probe_destroy(p[i]);
}

/* Post-handlers run after the probed instruction, with the registers then. */
static void test_post(void)
{
	for (int forced = 0; forced < 2; forced++) {
		struct seen s = { 0 };
		struct pk_probe *p = NULL;

		if (!ASSERT_OK(create("pt_asm_post", NULL, 0, forced ? PK_PROBE_F_INT3 : 0,
				      on_pre, post_set_rax, &s, &p), "create pre+post"))
			continue;
		ASSERT_EQ(kind_of(p), forced ? PK_PROBE_INT3 : PK_PROBE_JUMP, "kind");
		if (ASSERT_OK(pk_probe_register(&p, 1), "register")) {
			ASSERT_EQ(pt_asm_post(7, 2), 1000 + 5 + 2, "post changed rax");
			ASSERT_EQ(s.pre, 1, "pre ran");
			ASSERT_EQ(s.post, 1, "post ran");
			ASSERT_EQ(s.order[0], 1, "pre first");
			ASSERT_EQ(s.order[1], 2, "then post");
			ASSERT_EQ(s.pre_ip, (uintptr_t)pt_asm_post, "pre ip");
			ASSERT_EQ(s.post_ip, (uintptr_t)pt_asm_post + 3,
				  "post ip: after the probed instruction");
			ASSERT_EQ(s.post_rax, 7, "post sees mov %rdi,%rax done");
			ASSERT_EQ(s.post_rdi, 7, "post sees rdi");
			ASSERT_OK(pk_probe_unregister(&p, 1), "unregister");
			ASSERT_EQ(pt_asm_post(7, 2), 14, "result after");
		}
		pk_probe_destroy(p);
	}
}

/*
 * A probe in the middle of a leaf that keeps data in the red zone and live
 * values in every register and in CF, AF, SF, OF and DF: nothing changes.
 */
static void test_offset_live(void)
{
	uint64_t ref[20], *out = pt_live_out();

	pt_asm_live();
	memcpy(ref, out, sizeof(ref));
	ASSERT_EQ(ref[0] & 0xc91, 0xc91, "CF AF SF DF OF set at the probe point");
	ASSERT_EQ(ref[0] & 0x44, 0, "ZF PF clear");
	ASSERT_EQ(ref[17], 0x1111, "red zone word");
	for (int mode = 0; mode < 3; mode++) {
		struct seen s = { 0 };
		struct pk_probe *p = NULL;
		struct pk_probe_info info = { .sz = sizeof(info) };
		unsigned int flags = mode ? PK_PROBE_F_INT3 : 0;
		pk_probe_handler_fn post = mode == 2 ? on_post : NULL;

		memset(out, 0, sizeof(ref));
		if (!ASSERT_OK(create("pt_asm_live", NULL, pt_live_off(), flags, busy,
				      post, &s, &p), "create at the offset"))
			continue;
		pk_probe_get_info(p, &info);
		ASSERT_EQ(info.addr, (uintptr_t)pt_asm_live + pt_live_off(), "probed address");
		ASSERT_EQ(info.kind, mode ? PK_PROBE_INT3 : PK_PROBE_JUMP, "kind");
		if (ASSERT_OK(pk_probe_register(&p, 1), "register")) {
			pt_asm_live();
			ASSERT_EQ(s.pre, 1, "hit");
			ASSERT_EQ(s.post, mode == 2, "post hit");
			ASSERT_EQ(s.pre_rax, 0xa0a0a0a0a0a0a001ull, "handler sees rax");
			ASSERT_EQ(s.flags & 0xcd5, ref[0] & 0xcd5, "handler sees the flags");
			for (int i = 0; i < 20; i++) {
				char what[96];

				snprintf(what, sizeof(what), "word %d (0 flags, 1-15 GPRs, "
					 "16 rsp, 17-19 red zone) kept, mode %d", i, mode);
				ASSERT_EQ(out[i], ref[i], what);
			}
			ASSERT_OK(pk_probe_unregister(&p, 1), "unregister");
		}
		pk_probe_destroy(p);
	}
}

/* Clears CF, sets ZF, and tries TF (not a flag a handler may change). */
static void edit_flags(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	on_pre(p, r, ctx);
	r->flags = (r->flags & ~0x1ull) | 0x40 | 0x100;
}

/* Inside a function a handler's changes to the arithmetic flags are kept. */
static void test_edit_flags(void)
{
	uint64_t *out = pt_live_out(), ref;

	pt_asm_live();
	ref = out[0];
	for (int mode = 0; mode < 2; mode++) {
		struct seen s = { 0 };
		struct pk_probe *p = NULL;

		if (!ASSERT_OK(create("pt_asm_live", NULL, pt_live_off(),
				      mode ? PK_PROBE_F_INT3 : 0, edit_flags, NULL,
				      &s, &p), "create") ||
		    !ASSERT_OK(pk_probe_register(&p, 1), "register")) {
			pk_probe_destroy(p);
			continue;
		}
		pt_asm_live();
		ASSERT_EQ(s.pre, 1, "hit");
		ASSERT_EQ(out[0] & 0x1, 0, "CF cleared by the handler");
		ASSERT_EQ(out[0] & 0x40, 0x40, "ZF set by the handler");
		ASSERT_EQ(out[0] & 0x100, 0, "TF not taken from the handler");
		ASSERT_EQ(out[0] & ~0x141ull, ref & ~0x141ull, "other flags kept");
		ASSERT_EQ(out[1], 0xa0a0a0a0a0a0a001ull, "rax kept");
		pk_probe_destroy(p);
	}
}

static int trap_fn(const struct pk_fault *f, void *ctx)
{
	(void)f, (void)ctx;
	return PK_FAULT_UNHANDLED;
}

/* Every new option's failure paths. */
static void test_refusals(void)
{
	struct pk_probe *p = NULL, *q = NULL;
	struct seen s = { 0 };
	uint8_t before[16];

	pk_set_log(t_quiet_log, NULL);
	ASSERT_EQ(create("pt_asm_post", NULL, 1, 0, on_pre, NULL, &s, &p), -EINVAL,
		  "offset inside an instruction");
	ASSERT_EQ(create("pt_asm_post", NULL, 2, PK_PROBE_F_INT3, on_pre, NULL, &s,
			 &p), -EINVAL, "offset inside an instruction (int3)");
	ASSERT_EQ(create("pt_asm_post", NULL, 1000, 0, on_pre, NULL, &s, &p), -EINVAL,
		  "offset past the end");
	ASSERT_EQ(create("pt_asm_endbr", NULL, 2, 0, on_pre, NULL, &s, &p), -EINVAL,
		  "offset inside endbr64");
	if (ASSERT_OK(create("pt_asm_endbr", NULL, 4, 0, on_pre, NULL, &s, &p),
		      "offset 4 after endbr64: the entry")) {
		struct pk_probe_info info = { .sz = sizeof(info) };

		pk_probe_get_info(p, &info);
		ASSERT_EQ(info.addr, (uintptr_t)pt_asm_endbr + 4, "address");
		pk_probe_destroy(p);
	}
	ASSERT_EQ(create("pt_asm_post", NULL, 0, 0x80, on_pre, NULL, &s, &p), -EINVAL,
		  "unknown flag");
	ASSERT_EQ(create("pt_asm_short", NULL, 0, 0, on_pre, on_post, &s, &p), -ENOTSUP,
		  "post-handler after a ret");
	ASSERT_EQ(create("pt_asm_jcc", NULL, 3, 0, on_pre, on_post, &s, &p), -ENOTSUP,
		  "post-handler after a jcc");
	ASSERT_EQ(create("pt_asm_call", NULL, 0, PK_PROBE_F_INT3, NULL, on_post, &s, &p),
		  -ENOTSUP, "post-handler after a call");
	/* An old caller's smaller options: offset and post not read. */
	{
		struct pk_probe_opts o = { .sz = offsetof(struct pk_probe_opts, offset),
					   .symbol = "pt_asm_post", .pre = on_pre };

		if (ASSERT_OK(pk_probe_create(&o, &p), "options without offset")) {
			ASSERT_EQ(kind_of(p), PK_PROBE_JUMP, "jump probe");
			pk_probe_destroy(p);
		}
	}
	/* Several probes on one address: the first decides the kind. */
	memcpy(before, (void *)pt_asm_post, sizeof(before));
	if (ASSERT_OK(create("pt_asm_post", NULL, 0, 0, on_pre, NULL, &s, &p), "jump") &&
	    ASSERT_OK(pk_probe_register(&p, 1), "register jump")) {
		if (ASSERT_OK(create("pt_asm_post", NULL, 0, PK_PROBE_F_INT3, on_pre,
				     NULL, &s, &q), "int3 on a jump probe's address"))
			ASSERT_EQ(pk_probe_register(&q, 1), -EBUSY, "kinds differ");
		pk_probe_destroy(q);
		if (ASSERT_OK(create("pt_asm_post", NULL, 0, 0, on_pre, on_post, &s, &q),
			      "post on a pre-only jump probe's address"))
			ASSERT_EQ(pk_probe_register(&q, 1), -EBUSY, "needs post, has none");
		pk_probe_destroy(q);
		/* A probe created while another is armed sees the original code. */
		if (ASSERT_OK(create("pt_asm_post", NULL, 3, 0, on_pre, NULL, &s, &q),
			      "offset inside an armed jump probe's bytes")) {
			ASSERT_EQ(pk_probe_register(&q, 1), -EBUSY, "overlap");
			ASSERT_EQ(kind_of(q), PK_PROBE_JUMP, "still only planned");
		}
		pk_probe_destroy(q);
		q = NULL;
		ASSERT_EQ(pt_asm_post(1, 1), 7, "first probe still works");
		pk_probe_destroy(p);
		p = NULL;
	}
	ASSERT_MEM_EQ((void *)pt_asm_post, before, sizeof(before), "code restored");
	/* Post first, then a pre-only probe joins it. */
	s.pre = s.post = 0;
	if (ASSERT_OK(create("pt_asm_post", NULL, 0, 0, NULL, on_post, &s, &p), "post") &&
	    ASSERT_OK(create("pt_asm_post", NULL, 0, 0, on_pre, NULL, &s, &q), "pre") &&
	    ASSERT_OK(pk_probe_register(&p, 1), "register post") &&
	    ASSERT_OK(pk_probe_register(&q, 1), "pre-only joins")) {
		ASSERT_EQ(pt_asm_post(1, 1), 7, "result");
		ASSERT_EQ(s.pre, 1, "pre once");
		ASSERT_EQ(s.post, 1, "post once");
	}
	pk_probe_destroy(p);
	pk_probe_destroy(q);
	p = q = NULL;
	/* The trap chain entry is somebody else's. */
	if (ASSERT_OK(pk_trap_register((void *)pt_asm_short, trap_fn, NULL),
		      "foreign trap entry") &&
	    ASSERT_OK(create("pt_asm_short", NULL, 0, 0, on_pre, NULL, &s, &p), "int3")) {
		ASSERT_EQ(pk_probe_register(&p, 1), -EBUSY, "trap entry taken");
		ASSERT_EQ(*(uint8_t *)pt_asm_short, 0xc3, "nothing armed");
		ASSERT_OK(pk_trap_unregister((void *)pt_asm_short), "remove it");
		ASSERT_OK(pk_probe_register(&p, 1), "then it works");
		pt_asm_short();
		ASSERT_OK(pk_probe_unregister(&p, 1), "unregister");
	}
	pk_probe_destroy(p);
	pk_set_log(NULL, NULL);
}

/*
 * A batch whose later int3 probe's trap entry is refused: the earlier
 * one's entry, already taken, must go again, and its code stay as it was.
 */
static void test_later_trap_refused(void)
{
	struct seen s[2] = { 0 };
	struct pk_probe *p[2] = { 0 };
	uint8_t before[8];
	/* Planned in address order: f2 is the later one. */
	void *lo = (void *)pt_asm_loop, *hi = (void *)pt_asm_icall;
	void *f1 = lo < hi ? lo : hi, *f2 = lo < hi ? hi : lo;

	pk_set_log(t_quiet_log, NULL);
	memcpy(before, f1, sizeof(before));
	if (!ASSERT_OK(pk_trap_register(f2, trap_fn, NULL), "foreign entry at f2"))
		goto out;
	if (ASSERT_OK(create(NULL, f1, 0, PK_PROBE_F_INT3, on_pre, NULL, &s[0], &p[0]),
		      "int3 at f1") &&
	    ASSERT_OK(create(NULL, f2, 0, PK_PROBE_F_INT3, on_pre, NULL, &s[1], &p[1]),
		      "int3 at f2")) {
		ASSERT_EQ(pk_probe_register(p, 2), -EBUSY, "f2's trap entry taken");
		ASSERT_MEM_EQ(f1, before, sizeof(before), "f1's code unchanged");
		ASSERT_EQ(pt_asm_loop(4), 10, "loop result");
		ASSERT_EQ(pt_asm_icall(9, icallee), 9, "indirect call result");
		ASSERT_EQ(s[0].pre + s[1].pre, 0, "nothing hit");
		for (int i = 0; i < 2; i++) {
			struct pk_probe_info info = { .sz = sizeof(info) };

			ASSERT_OK(pk_probe_get_info(p[i], &info), "info");
			ASSERT_EQ(info.armed, 0, "not armed");
		}
		if (ASSERT_OK(pk_trap_register(f1, trap_fn, NULL),
			      "no entry left at f1"))
			ASSERT_OK(pk_trap_unregister(f1), "remove it");
	}
	ASSERT_OK(pk_trap_unregister(f2), "remove f2's");
out:
	pk_probe_destroy(p[0]);
	pk_probe_destroy(p[1]);
	pk_set_log(NULL, NULL);
}

int main(void)
{
	test_fallbacks();
	test_forced();
	test_post();
	test_offset_live();
	test_edit_flags();
	test_refusals();
	test_later_trap_refused();
	return t_exit();
}
