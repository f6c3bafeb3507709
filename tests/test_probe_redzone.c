// SPDX-License-Identifier: MIT
/* test_probe_redzone.c - a probe hit, at entry and mid-function, jump and int3, leaves the 128 bytes below rsp untouched. */

/*
 * The red zone (PITFALLS.md 17): the 128 bytes below rsp belong to the code
 * that was running. The kernel's 2025 nop5 uprobe optimization shipped a
 * `call` into its trampoline that wrote there and corrupted USDT arguments
 * kept in it. Here assembly fills all 16 words below rsp with a pattern
 * before the probe point and copies them out after it, so any byte a
 * trampoline (or the handler's frame) wrote is seen; the handler also reads
 * them at the hit, through the rsp it is given, as a USDT probe's handler
 * would.
 *
 *   rz_mid     a leaf: fills [rsp-128, rsp), then at rz_mid+RZ_MID_OFF
 *              plain moves (the probe point), then copies the 16 words
 *              to rdi[0..15]; returns rdi + 1
 *   rz_entry   mov/lea/ret, probed at its entry; rz_drive fills the 128
 *              bytes below where rz_entry's rsp will be (below the return
 *              address its call pushes), calls it, copies them to
 *              rsi[0..15]; returns rdi + 1
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "probekit.h"

#define RZ_WORDS 16
#define RZ_BASE 0xa55a3cc300000000ull

long rz_mid(uint64_t *out);
long rz_entry(long x);
long rz_drive(long x, uint64_t *out);
extern const char rz_mid_probe[];

/* Fill 16 words at \base + 8*i (i = 0..15) from rax, incrementing it. */
__asm__(".macro rz_fill base\n"
	"	movabs $0xa55a3cc300000000, %rax\n"
	"	.irp i,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"
	"	mov %rax, \\base+8*\\i(%rsp)\n"
	"	inc %rax\n"
	"	.endr\n"
	".endm\n"
	/* Copy the 16 words at \base + 8*i to (\dst). */
	".macro rz_copy base, dst\n"
	"	.irp i,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n"
	"	mov \\base+8*\\i(%rsp), %rax\n"
	"	mov %rax, 8*\\i(\\dst)\n"
	"	.endr\n"
	".endm\n"
	".text\n"
	".globl rz_mid\n"
	".type rz_mid,@function\n"
	"rz_mid:\n"
	"	rz_fill -128\n"
	".globl rz_mid_probe\n"
	"rz_mid_probe:\n"
	"	mov %rdi, %rdx\n"		/* 3 bytes */
	"	mov %rdx, %rcx\n"		/* 3 bytes: 6 movable */
	"	rz_copy -128, %rcx\n"
	"	lea 1(%rdi), %rax\n"
	"	ret\n"
	".size rz_mid, .-rz_mid\n"
	".globl rz_entry\n"
	".type rz_entry,@function\n"
	"rz_entry:\n"
	"	mov %rdi, %rax\n"		/* 3 bytes */
	"	lea 1(%rax), %rax\n"		/* 4 bytes */
	"	ret\n"
	".size rz_entry, .-rz_entry\n"
	/*
	 * At rz_drive's entry rsp = S; its call puts rz_entry's return
	 * address at S-8, so rz_entry's red zone is [S-136, S-8).
	 */
	".globl rz_drive\n"
	".type rz_drive,@function\n"
	"rz_drive:\n"
	"	rz_fill -136\n"
	"	call rz_entry\n"
	"	mov %rax, %rdx\n"
	"	rz_copy -136, %rsi\n"
	"	mov %rdx, %rax\n"
	"	ret\n"
	".size rz_drive, .-rz_drive\n");

struct rz_seen {
	int hits;
	uint64_t at_hit[RZ_WORDS];	/* below regs->rsp when the handler ran */
};

static void rz_pre(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	struct rz_seen *s = ctx;
	const uint64_t *below = (const uint64_t *)(uintptr_t)(r->rsp - 8 * RZ_WORDS);

	(void)p;
	s->hits++;
	memcpy(s->at_hit, below, sizeof(s->at_hit));
}

static void rz_post(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p, (void)r, (void)ctx;
}

/* Every word of @w is the pattern; @when says where they were read. */
static void check_words(const uint64_t *w, const char *when)
{
	int bad = 0;

	for (int i = 0; i < RZ_WORDS; i++)
		if (w[i] != RZ_BASE + (uint64_t)i) {
			printf("  %s: word %d (rsp-%d) is %#llx, not %#llx\n",
			       when, i, 8 * (RZ_WORDS - i),
			       (unsigned long long)w[i],
			       (unsigned long long)(RZ_BASE + (uint64_t)i));
			bad++;
		}
	ASSERT_EQ(bad, 0, when);
}

struct rz_case {
	const char *name;
	int mid;		/* rz_mid at its probe point, else rz_entry */
	unsigned int flags;
	int post;
	int kind;
};

static const struct rz_case cases[] = {
	{ "entry, jump", 0, 0, 0, PK_PROBE_JUMP },
	{ "entry, jump, post", 0, 0, 1, PK_PROBE_JUMP },
	{ "entry, int3", 0, PK_PROBE_F_INT3, 0, PK_PROBE_INT3 },
	{ "mid, jump", 1, 0, 0, PK_PROBE_JUMP },
	{ "mid, jump, post", 1, 0, 1, PK_PROBE_JUMP },
	{ "mid, int3", 1, PK_PROBE_F_INT3, 0, PK_PROBE_INT3 },
	{ "mid, int3, post", 1, PK_PROBE_F_INT3, 1, PK_PROBE_INT3 },
};

static long run(const struct rz_case *c, uint64_t *out)
{
	return c->mid ? rz_mid(out) - (long)(uintptr_t)out
		      : rz_drive(41, out) - 41;
}

static void test_case(const struct rz_case *c)
{
	uint64_t out[RZ_WORDS];
	struct rz_seen s = { 0 };
	struct pk_probe_info info = { .sz = sizeof(info) };
	struct pk_probe *p = NULL;
	PK_OPTS(pk_probe_opts, o, .pre = rz_pre, .ctx = &s, .flags = c->flags,
		.post = c->post ? rz_post : NULL);
	char what[96];

	if (c->mid) {
		o.addr = (void *)rz_mid;
		o.offset = (size_t)(rz_mid_probe - (const char *)rz_mid);
	} else {
		o.addr = (void *)rz_entry;
	}
	snprintf(what, sizeof(what), "%s: create", c->name);
	if (!ASSERT_OK(pk_probe_create(&o, &p), what))
		return;
	ASSERT_OK(pk_probe_get_info(p, &info), "get_info");
	snprintf(what, sizeof(what), "%s: kind", c->name);
	ASSERT_EQ(info.kind, c->kind, what);
	snprintf(what, sizeof(what), "%s: register", c->name);
	if (ASSERT_OK(pk_probe_register(&p, 1), what)) {
		for (int k = 0; k < 3; k++) {
			memset(out, 0, sizeof(out));
			memset(s.at_hit, 0, sizeof(s.at_hit));
			snprintf(what, sizeof(what), "%s: result", c->name);
			ASSERT_EQ(run(c, out), 1, what);
			snprintf(what, sizeof(what), "%s: hit %d", c->name, k + 1);
			ASSERT_EQ(s.hits, k + 1, what);
			snprintf(what, sizeof(what), "%s: the 128 bytes below rsp after the hit",
				 c->name);
			check_words(out, what);
			snprintf(what, sizeof(what), "%s: the 128 bytes below rsp seen by the handler",
				 c->name);
			check_words(s.at_hit, what);
		}
		snprintf(what, sizeof(what), "%s: unregister", c->name);
		ASSERT_OK(pk_probe_unregister(&p, 1), what);
	}
	pk_probe_destroy(p);
}

int main(void)
{
	uint64_t out[RZ_WORDS];

	/* The assembly does what it should unprobed. */
	memset(out, 0, sizeof(out));
	ASSERT_EQ(rz_mid(out) - (long)(uintptr_t)out, 1, "rz_mid result");
	check_words(out, "unprobed rz_mid copies the pattern");
	memset(out, 0, sizeof(out));
	ASSERT_EQ(rz_drive(41, out), 42, "rz_drive result");
	check_words(out, "unprobed rz_drive copies the pattern");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		test_case(&cases[i]);
	return t_exit();
}
