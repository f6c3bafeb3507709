// SPDX-License-Identifier: MIT
/* test_probe_gpr.c - PK_PROBE_F_GPR_ONLY: handlers that touch general registers only run without the vector save, the probed code's vector and general registers intact; a probe without the flag on the same address brings the save back. */

/*
 * The targets are test_probe_vector's (vector_targets.c, -mavx2): double
 * vt_sum8(__m256d, __m256d), whose ymm0/ymm1 arguments must arrive whole;
 * vt_ipa_caller(), which keeps general, xmm and ymm values live across a
 * call of vt_leaf() as a -fipa-ra caller does; vt_mid_ymm(), with ymm and
 * xmm values live across an offset probe.
 *
 * The flagged handlers here keep the promise (compiled for general
 * registers only); one on purpose breaks it (clobbers every vector
 * register through asm): its effect on vt_sum8 shows whether a hit took
 * the cheap path, so the test can see the path change when a probe
 * without the flag joins and leaves.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "probekit.h"
#include "vector_targets.h"

#define GPR_ONLY __attribute__((target("general-regs-only")))

static unsigned long gpr_hits, plain_hits, post_hits;
static uint64_t seen_arg0;
static long set_rdi = -1;

/* Keeps the promise: counts, reads an argument, may change one. */
GPR_ONLY static void pre_gpr(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p, (void)ctx;
	__atomic_add_fetch(&gpr_hits, 1, __ATOMIC_RELAXED);
	seen_arg0 = pk_regs_arg(r, 0);
	if (set_rdi >= 0)
		r->rdi = (uint64_t)set_rdi;
}

GPR_ONLY static void post_gpr(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p, (void)r, (void)ctx;
	__atomic_add_fetch(&post_hits, 1, __ATOMIC_RELAXED);
}

/* Breaks the promise: every ymm register zeroed, as glibc's AVX2 code leaves them. */
static void pre_liar(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p, (void)r, (void)ctx;
	__atomic_add_fetch(&gpr_hits, 1, __ATOMIC_RELAXED);
	vt_clobber_vector();
}

/* No flag: uses (and clobbers) the vector registers, as a plain handler may. */
static void pre_plain(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	char buf[64];

	(void)p, (void)r, (void)ctx;
	snprintf(buf, sizeof(buf), "hit %lu", plain_hits);
	plain_hits += strlen(buf) > 0;
	vt_clobber_vector();
}

static struct pk_probe *make(void *fn, size_t off, unsigned int flags,
			     pk_probe_handler_fn pre, pk_probe_handler_fn post,
			     const char *what)
{
	PK_OPTS(pk_probe_opts, o, .addr = fn, .offset = off, .pre = pre,
		.post = post, .flags = flags);
	struct pk_probe *p = NULL;

	if (!ASSERT_OK(pk_probe_create(&o, &p), what))
		return NULL;
	return p;
}

static struct pk_probe *arm(void *fn, size_t off, unsigned int flags,
			    pk_probe_handler_fn pre, pk_probe_handler_fn post,
			    const char *what)
{
	struct pk_probe *p = make(fn, off, flags, pre, post, what);

	if (p && !ASSERT_OK(pk_probe_register(&p, 1), what)) {
		pk_probe_destroy(p);
		return NULL;
	}
	return p;
}

static void disarm(struct pk_probe *p)
{
	if (!p)
		return;
	ASSERT_OK(pk_probe_unregister(&p, 1), "unregister");
	pk_probe_destroy(p);
}

static double sum8(void)
{
	static const double a[4] = { 1, 2, 3, 4 }, b[4] = { 10, 20, 30, 40 };

	return vt_call_sum8(a, b);
}

/* vt_ipa_caller(x)'s outputs as unprobed: bad lanes counted, printed. */
static int ipa_bad(long x, const char *what)
{
	long out[16];
	int bad = 0;

	memset(out, 0, sizeof(out));
	if (vt_ipa_caller(x, out) != x + 1)
		bad++;
	for (int i = 0; i < 6; i++)
		bad += out[i] != x + 1 + i;
	for (int i = 0; i < 3; i++)
		bad += out[6 + i] != x + 7 + i;
	bad += out[9] != x + 10;
	if (bad)
		printf("  %s: %d of 11 values of vt_ipa_caller lost\n", what, bad);
	return bad;
}

static const char *kind(unsigned int flags)
{
	return flags & PK_PROBE_F_INT3 ? "int3" : "jump";
}

/* A flagged probe whose handler keeps the promise: everything intact. */
static void kept(unsigned int flags)
{
	struct pk_probe *p = arm(vt_addr_sum8(), 0, PK_PROBE_F_GPR_ONLY | flags,
				 pre_gpr, NULL, "flagged probe on vt_sum8");
	struct pk_probe_info info = { .sz = sizeof(info) };
	unsigned long h = gpr_hits;
	char what[96];
	double v;

	if (!p)
		return;
	pk_probe_get_info(p, &info);
	ASSERT_EQ(info.kind, flags & PK_PROBE_F_INT3 ? PK_PROBE_INT3 : PK_PROBE_JUMP,
		  "the probe's kind");
	v = sum8();
	ASSERT_EQ(gpr_hits, h + 1, "the flagged handler ran");
	snprintf(what, sizeof(what), "%s: vt_sum8's __m256d arguments", kind(flags));
	ASSERT_EQ((long long)v, 110, what);
	disarm(p);

	p = arm((void *)vt_leaf, 0, PK_PROBE_F_GPR_ONLY | flags, pre_gpr, NULL,
		"flagged probe on vt_leaf");
	if (!p)
		return;
	h = gpr_hits;
	snprintf(what, sizeof(what), "%s: flagged probe on vt_leaf", kind(flags));
	ASSERT_EQ(ipa_bad(0x5100, what), 0, what);
	ASSERT_EQ(gpr_hits, h + 1, "the flagged handler ran");
	ASSERT_EQ(seen_arg0, 0x5100, "the handler sees the argument in rdi");
	/* A general register the handler changes reaches the function. */
	set_rdi = 99;
	ASSERT_EQ(vt_leaf(4), 100, "vt_leaf with rdi set to 99 by the handler");
	set_rdi = -1;
	ASSERT_EQ(vt_leaf(4), 5, "vt_leaf(4)");
	disarm(p);
}

/* Inside a function, and with a post-handler: the twins of the other stubs. */
static void mid(unsigned int flags)
{
	struct pk_probe *p = arm((void *)vt_mid_ymm, vt_mid_ymm_off,
				 PK_PROBE_F_GPR_ONLY | flags, pre_gpr, post_gpr,
				 "flagged offset probe in vt_mid_ymm");
	unsigned long h = gpr_hits, ph = post_hits;
	long out[12], x = 0x7100;
	int bad = 0;

	if (!p)
		return;
	memset(out, 0, sizeof(out));
	vt_mid_ymm(x, out);
	for (int i = 0; i < 4; i++)
		bad += (out[i] != x) + (out[4 + i] != x + 1);
	bad += out[8] != x + 2;
	if (bad)
		printf("  %s: %d of 9 vector values of vt_mid_ymm lost\n", kind(flags), bad);
	ASSERT_EQ(bad, 0, "vector values across a flagged offset probe");
	ASSERT_EQ(gpr_hits, h + 1, "the flagged pre-handler ran");
	if (!(flags & PK_PROBE_F_INT3))
		ASSERT_EQ(post_hits, ph + 1, "the flagged post-handler ran");
	disarm(p);
}

/*
 * The cheap path is taken, and given up while a probe without the flag is
 * armed on the same address: seen through a handler that breaks the
 * promise (vt_sum8's sum is lost exactly when no vector state is saved).
 */
static void mixed(unsigned int flags)
{
	struct pk_probe *liar = arm(vt_addr_sum8(), 0, PK_PROBE_F_GPR_ONLY | flags,
				    pre_liar, NULL, "promise-breaking flagged probe");
	struct pk_probe *plain, *gpr2;
	unsigned long h, ph;
	char what[128];

	if (!liar)
		return;
	h = gpr_hits;
	snprintf(what, sizeof(what), "%s: the flagged probe alone skips the vector save "
		 "(its promise-breaking handler loses vt_sum8's arguments)", kind(flags));
	ASSERT_TRUE((long long)sum8() != 110, what);
	ASSERT_EQ(gpr_hits, h + 1, "the flagged handler ran");

	/* One without the flag joins: every hit saves the vector state. */
	plain = arm(vt_addr_sum8(), 0, flags, pre_plain, NULL, "unflagged probe joins");
	gpr2 = arm(vt_addr_sum8(), 0, PK_PROBE_F_GPR_ONLY | flags, pre_gpr, NULL,
		   "a second flagged probe joins");
	if (plain) {
		h = gpr_hits;
		ph = plain_hits;
		for (int i = 0; i < 100; i++) {
			snprintf(what, sizeof(what), "%s: flagged and unflagged probes on "
				 "vt_sum8, call %d", kind(flags), i);
			if (!ASSERT_EQ((long long)sum8(), 110, what))
				break;
		}
		ASSERT_EQ(plain_hits, ph + 100, "the unflagged handler ran on every hit");
		ASSERT_EQ(gpr_hits, h + (gpr2 ? 200 : 100), "the flagged handlers ran on every hit");
		disarm(plain);
	}
	/* It left: the cheap path again. */
	snprintf(what, sizeof(what), "%s: back to no vector save once the unflagged "
		 "probe left", kind(flags));
	ASSERT_TRUE((long long)sum8() != 110, what);
	disarm(gpr2);
	disarm(liar);
}

/* An unflagged probe first: its trampoline saves the vector state for good. */
static void plain_first(void)
{
	struct pk_probe *plain = arm(vt_addr_sum8(), 0, 0, pre_plain, NULL,
				     "unflagged probe first");
	struct pk_probe *liar = arm(vt_addr_sum8(), 0, PK_PROBE_F_GPR_ONLY, pre_liar,
				    NULL, "then a flagged one");

	if (plain && liar) {
		ASSERT_EQ((long long)sum8(), 110, "both armed: the vector state saved");
		disarm(plain);
		plain = NULL;
		ASSERT_EQ((long long)sum8(), 110,
			  "the flagged one alone on a trampoline an unflagged one made");
	}
	disarm(plain);
	disarm(liar);
}

/* ------------------------------------------------------- return probes */

static unsigned long ret_gpr_hits, ret_plain_hits;
static long set_rax = -1;

GPR_ONLY static int entry_gpr(struct pk_retprobe *rp, struct pk_regs *r,
			      void *data, void *ctx)
{
	(void)rp, (void)ctx;
	*(uint64_t *)data = pk_regs_arg(r, 0);
	return 0;
}

GPR_ONLY static void ret_gpr(struct pk_retprobe *rp, struct pk_regs *r,
			     void *data, void *ctx)
{
	(void)rp, (void)data, (void)ctx;
	__atomic_add_fetch(&ret_gpr_hits, 1, __ATOMIC_RELAXED);
	if (set_rax >= 0)
		r->rax = (uint64_t)set_rax;
}

static void ret_liar(struct pk_retprobe *rp, struct pk_regs *r, void *data,
		     void *ctx)
{
	(void)rp, (void)r, (void)data, (void)ctx;
	__atomic_add_fetch(&ret_gpr_hits, 1, __ATOMIC_RELAXED);
	vt_clobber_vector();
}

static void ret_plain(struct pk_retprobe *rp, struct pk_regs *r, void *data,
		      void *ctx)
{
	char buf[64];

	(void)rp, (void)r, (void)data, (void)ctx;
	snprintf(buf, sizeof(buf), "return %lu", ret_plain_hits);
	ret_plain_hits += strlen(buf) > 0;
	vt_clobber_vector();
}

static struct pk_retprobe *arm_ret(void *fn, unsigned int flags,
				   pk_retprobe_entry_fn entry,
				   pk_retprobe_ret_fn ret, const char *what)
{
	PK_OPTS(pk_retprobe_opts, o, .addr = fn, .entry = entry, .ret = ret,
		.data_size = 8, .flags = flags);
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
	ASSERT_OK(pk_retprobe_unregister(&rp, 1), "unregister return probe");
	pk_retprobe_destroy(rp);
}

/* vt_ret4()'s __m256d (ymm0): lanes lost. */
static int ret4_bad(void)
{
	double out[4] = { 0, 0, 0, 0 };
	int bad = 0;

	vt_call_ret4(100, out);
	for (int i = 0; i < 4; i++)
		bad += out[i] != 100 + i;
	return bad;
}

/* Flagged return probes: return values in ymm0, xmm0, st0 and rax intact. */
static void ret_kept(void)
{
	struct pk_retprobe *rp = arm_ret(vt_addr_ret4(), PK_PROBE_F_GPR_ONLY,
					 entry_gpr, ret_gpr, "flagged return probe on vt_ret4");
	unsigned long h = ret_gpr_hits;
	long double ld;

	if (rp) {
		ASSERT_EQ(ret4_bad(), 0, "vt_ret4's __m256d (ymm0) through a flagged return probe");
		ASSERT_EQ(ret_gpr_hits, h + 1, "the flagged return handler ran");
		disarm_ret(rp);
	}
	rp = arm_ret((void *)vt_ret_double, PK_PROBE_F_GPR_ONLY, NULL, ret_gpr,
		     "flagged return probe on vt_ret_double");
	if (rp) {
		ASSERT_EQ((long long)(vt_ret_double(4) * 10), 100,
			  "the double vt_ret_double returned (xmm0)");
		disarm_ret(rp);
	}
	rp = arm_ret((void *)vt_ret_ld, PK_PROBE_F_GPR_ONLY, NULL, ret_gpr,
		     "flagged return probe on vt_ret_ld");
	if (rp) {
		ld = vt_ret_ld(7);
		ASSERT_EQ((long long)ld, 21, "the long double vt_ret_ld returned (st0)");
		disarm_ret(rp);
	}
	rp = arm_ret((void *)vt_leaf, PK_PROBE_F_GPR_ONLY, entry_gpr, ret_gpr,
		     "flagged return probe on vt_leaf");
	if (rp) {
		h = ret_gpr_hits;
		ASSERT_EQ(ipa_bad(0x6100, "flagged return probe on vt_leaf"), 0,
			  "vt_ipa_caller's registers across a flagged return probe");
		ASSERT_EQ(ret_gpr_hits, h + 1, "the flagged return handler ran");
		set_rax = 777;
		ASSERT_EQ(vt_leaf(1), 777, "rax set by the flagged return handler");
		set_rax = -1;
		disarm_ret(rp);
	}
}

/*
 * The return side's cheap path, seen through a promise-breaking return
 * handler, and given up while an unflagged return probe rides on the call.
 */
static void ret_mixed(void)
{
	struct pk_retprobe *liar = arm_ret(vt_addr_ret4(), PK_PROBE_F_GPR_ONLY, NULL,
					   ret_liar, "promise-breaking flagged return probe");
	struct pk_retprobe *plain;
	unsigned long h, ph;

	if (!liar)
		return;
	h = ret_gpr_hits;
	ASSERT_TRUE(ret4_bad() > 0, "a flagged return probe alone saves no vector "
		    "state (its promise-breaking handler loses ymm0)");
	ASSERT_EQ(ret_gpr_hits, h + 1, "the flagged return handler ran");
	plain = arm_ret(vt_addr_ret4(), 0, NULL, ret_plain, "unflagged return probe joins");
	if (plain) {
		h = ret_gpr_hits;
		ph = ret_plain_hits;
		for (int i = 0; i < 100; i++)
			if (!ASSERT_EQ(ret4_bad(), 0, "flagged and unflagged return "
				       "probes on vt_ret4: ymm0 intact"))
				break;
		ASSERT_EQ(ret_plain_hits, ph + 100, "the unflagged return handler ran");
		ASSERT_EQ(ret_gpr_hits, h + 100, "the flagged return handler ran");
		disarm_ret(plain);
	}
	ASSERT_TRUE(ret4_bad() > 0, "back to no vector save once the unflagged "
		    "return probe left");
	disarm_ret(liar);

	/* An unflagged entry probe beside a flagged return probe. */
	liar = arm_ret(vt_addr_ret4(), PK_PROBE_F_GPR_ONLY, entry_gpr, ret_gpr,
		       "flagged return probe");
	{
		struct pk_probe *p = arm(vt_addr_ret4(), 0, 0, pre_plain, NULL,
					 "unflagged entry probe beside it");

		ASSERT_EQ(ret4_bad(), 0, "vt_ret4 with both");
		disarm(p);
	}
	disarm_ret(liar);
}

/* Unknown flags are still refused; the flag combines with the others. */
static void flags_checked(void)
{
	PK_OPTS(pk_probe_opts, o, .addr = (void *)vt_leaf, .pre = pre_gpr,
		.flags = 0x4);
	struct pk_probe *p = NULL;

	ASSERT_EQ(pk_probe_create(&o, &p), -EINVAL, "an unknown flag");
	o.flags = PK_PROBE_F_GPR_ONLY | PK_PROBE_F_INT3;
	if (ASSERT_OK(pk_probe_create(&o, &p), "PK_PROBE_F_GPR_ONLY | PK_PROBE_F_INT3"))
		pk_probe_destroy(p);
	{
		PK_OPTS(pk_retprobe_opts, ro, .addr = (void *)vt_leaf, .ret = ret_gpr,
			.flags = PK_PROBE_F_INT3);
		struct pk_retprobe *rp = NULL;

		ASSERT_EQ(pk_retprobe_create(&ro, &rp), -EINVAL,
			  "a return probe's flags: PK_PROBE_F_GPR_ONLY only");
		ro.flags = PK_PROBE_F_GPR_ONLY;
		if (ASSERT_OK(pk_retprobe_create(&ro, &rp), "a flagged return probe"))
			pk_retprobe_destroy(rp);
	}
}

int main(void)
{
	if (!__builtin_cpu_supports("avx2"))
		SKIP("the CPU has no AVX2 (the targets take __m256d)");
	ASSERT_EQ((long long)sum8(), 110, "vt_sum8 unprobed");
	ASSERT_EQ(ipa_bad(0x5000, "unprobed"), 0, "vt_ipa_caller unprobed");
	flags_checked();
	for (int k = 0; k < 2; k++) {
		unsigned int flags = k ? PK_PROBE_F_INT3 : 0;

		kept(flags);
		mid(flags);
		mixed(flags);
	}
	plain_first();
	ret_kept();
	ret_mixed();
	return t_exit();
}
