// SPDX-License-Identifier: MIT
/* test_place_cases.c - jump probes where int3 was used: indirect jmps classified, calls among the displaced bytes moved (issue 12, items 1-2). */

/*
 * 1. Hand-written shapes with a known answer (pl_* below):
 *    pl_table_ok    a jump table whose entries land past the displaced
 *                   bytes: jump probe (on main 3a01b81: int3, any
 *                   indirect jmp refused)
 *    pl_table_in    the same, one entry landing at +2, inside them (a loop
 *                   head): int3 probe, and it runs right
 *    pl_cgoto_in    a computed goto whose label is at +2 (lea of it):
 *                   int3 probe
 *    pl_reg_own     jmp through an untraced register in a function that
 *                   makes an address of its own code: int3 probe
 *    pl_tail        a tail call through a struct's pointer: jump probe
 *    pl_push_call   push %rbx; call: the call moved as push + jmp, a jump
 *                   probe; the callee returns into the original code
 *    pl_push_icall, pl_push_ripcall  the same with call *%rbx and
 *                   call *x(%rip) (its operand re-targeted)
 *    pl_icall_short call *%rsi (2 bytes) first: would return inside the
 *                   displaced bytes: int3 probe
 *    pl_short_nop   4 bytes then NOP padding: the padding displaced too,
 *    pl_short_cc    (4 bytes then int3 padding) a jump probe
 *    pl_short_packed another function right after it: int3 probe
 *    pl_short_fall  its last instruction falls through (the symbol ends
 *                   before its ret): int3 probe
 *    pl_dptr        entered at +2 by pl_dptr_user's jmp through a pointer
 *                   in .data.rel.ro (a relocation's target): int3 probe
 *                   (on main 3a01b81 a jump probe, and the pointer's jmp
 *                   ran the middle of it)
 * 2. Real compiler output: tests/targets/place_cases.c built by gcc and
 *    clang (-O2/-O3, PIC and, in test_place_nopie, non-PIC; with and
 *    without -fcf-protection). Each function's kind and reason is
 *    compared with tests/cases/place/VARIANT.out (PK_REBASE=1 rewrites
 *    them: review the diff), and every one but cgoto must be a jump
 *    probe. Then all are armed in one batch and run() gives the unprobed
 *    results, each probe hit once per call.
 * With a shadow stack active the moved calls are int3 probes: checked
 * as such (the expectations say jump, so the test skips then).
 */
#include <errno.h>
#include <stdint.h>

#include "harness.h"
#include "place_cases.h"

long pl_table_ok(long n);
long pl_table_in(long n);
long pl_cgoto_in(long n);
long pl_reg_own(long n);
long pl_tail(const void *o, long x);
long pl_push_call(long x);
long pl_icall_short(long x, long (*f)(long));
long pl_leaf(long x);
long pl_short_nop(long x);
long pl_short_cc(long x);
long pl_short_packed(long x);
long pl_packed_next(long x);
long pl_short_fall(long x);
long pl_dptr(long x);
long pl_push_icall(long x, long (*f)(long));
long pl_push_ripcall(long x);
long pl_dptr_user(long x);

__asm__(".text\n"
	/* n iterations of a loop whose head is reached by a table */
	".globl pl_table_ok\n.type pl_table_ok,@function\n"
	"pl_table_ok:\n"
	"	xor %eax, %eax\n"
	"	mov %rdi, %r8\n"
	"	nop\n"
	"1:	add $1, %rax\n"			/* +6: past the 5 bytes */
	"	sub $1, %r8\n"
	"	xor %ecx, %ecx\n"
	"	test %r8, %r8\n"
	"	setne %cl\n"
	"	lea .Lpl_tok(%rip), %rdx\n"
	"	movslq (%rdx,%rcx,4), %rcx\n"
	"	add %rdx, %rcx\n"
	"	jmp *%rcx\n"
	"2:	ret\n"
	".size pl_table_ok, .-pl_table_ok\n"
	".section .rodata\n"
	".p2align 2\n"
	".Lpl_tok: .long 2b-.Lpl_tok, 1b-.Lpl_tok\n"
	".text\n"
	/* the same with the loop head at +2 */
	".globl pl_table_in\n.type pl_table_in,@function\n"
	"pl_table_in:\n"
	"	xor %eax, %eax\n"
	"1:	add $1, %rax\n"			/* +2: inside */
	"	sub $1, %rdi\n"
	"	xor %ecx, %ecx\n"
	"	test %rdi, %rdi\n"
	"	setne %cl\n"
	"	lea .Lpl_tin(%rip), %rdx\n"
	"	movslq (%rdx,%rcx,4), %rcx\n"
	"	add %rdx, %rcx\n"
	"	jmp *%rcx\n"
	"2:	ret\n"
	".size pl_table_in, .-pl_table_in\n"
	".section .rodata\n"
	".p2align 2\n"
	".Lpl_tin: .long 2b-.Lpl_tin, 1b-.Lpl_tin\n"
	".text\n"
	/* computed goto to +2 */
	".globl pl_cgoto_in\n.type pl_cgoto_in,@function\n"
	"pl_cgoto_in:\n"
	"	xor %eax, %eax\n"
	"1:	add $1, %rax\n"			/* +2 */
	"	sub $1, %rdi\n"
	"	lea 1b(%rip), %rdx\n"
	"	lea 2f(%rip), %rcx\n"
	"	test %rdi, %rdi\n"
	"	cmovne %rdx, %rcx\n"
	"	jmp *%rcx\n"
	"2:	ret\n"
	".size pl_cgoto_in, .-pl_cgoto_in\n"
	/* an untraced register, and its own address made elsewhere */
	".globl pl_reg_own\n.type pl_reg_own,@function\n"
	"pl_reg_own:\n"
	"	xor %eax, %eax\n"
	"1:	add $1, %rax\n"			/* +2 */
	"	sub $1, %rdi\n"
	"	lea 2f(%rip), %rcx\n"
	"	mov %rcx, %rdx\n"
	"	sub $(2f-1b), %rdx\n"		/* = 1b: arithmetic on own code */
	"	test %rdi, %rdi\n"
	"	cmovne %rdx, %rcx\n"
	"	mov %rcx, %r9\n"
	"	jmp *%r9\n"
	"2:	ret\n"
	".size pl_reg_own, .-pl_reg_own\n"
	/* tail call through a struct's pointer */
	".globl pl_tail\n.type pl_tail,@function\n"
	"pl_tail:\n"
	"	mov %rdi, %rax\n"
	"	mov %rsi, %rdi\n"
	"	add $3, %rdi\n"
	"	jmp *0x80(%rax)\n"
	".size pl_tail, .-pl_tail\n"
	".globl pl_push_call\n.type pl_push_call,@function\n"
	"pl_push_call:\n"
	"	push %rbx\n"
	"	call pl_leaf\n"
	"	pop %rbx\n"
	"	add $1, %rax\n"
	"	ret\n"
	".size pl_push_call, .-pl_push_call\n"
	/* an indirect call, through a register and through [rip+x], moved */
	".globl pl_push_icall\n.type pl_push_icall,@function\n"
	"pl_push_icall:\n"
	"	push %rbx\n"
	"	mov %rsi, %rbx\n"
	"	call *%rbx\n"			/* +4: ends at +6 */
	"	pop %rbx\n"
	"	add $4, %rax\n"
	"	ret\n"
	".size pl_push_icall, .-pl_push_icall\n"
	".globl pl_push_ripcall\n.type pl_push_ripcall,@function\n"
	"pl_push_ripcall:\n"
	"	push %rbx\n"
	"	call *.Lpl_leafp(%rip)\n"	/* +1: ends at +7 */
	"	pop %rbx\n"
	"	add $5, %rax\n"
	"	ret\n"
	".size pl_push_ripcall, .-pl_push_ripcall\n"
	".section .data.rel.ro,\"aw\"\n"
	".p2align 3\n"
	".Lpl_leafp: .quad pl_leaf\n"
	".text\n"
	".globl pl_icall_short\n.type pl_icall_short,@function\n"
	"pl_icall_short:\n"
	"	call *%rsi\n"
	"	add $2, %rax\n"
	"	nop\n"
	"	nop\n"
	"	ret\n"
	".size pl_icall_short, .-pl_icall_short\n"
	/* short functions: padding after them (NOPs; int3s), or none */
	".p2align 4\n"
	".globl pl_short_nop\n.type pl_short_nop,@function\n"
	"pl_short_nop:\n"
	"	lea 1(%rdi), %eax\n"
	"	ret\n"
	".size pl_short_nop, .-pl_short_nop\n"
	".p2align 4\n"
	".globl pl_short_cc\n.type pl_short_cc,@function\n"
	"pl_short_cc:\n"
	"	mov %rdi, %rax\n"
	"	ret\n"
	".size pl_short_cc, .-pl_short_cc\n"
	".p2align 4, 0xcc\n"
	".globl pl_short_packed\n.type pl_short_packed,@function\n"
	"pl_short_packed:\n"
	"	lea 2(%rdi), %eax\n"
	"	ret\n"
	".size pl_short_packed, .-pl_short_packed\n"
	".globl pl_packed_next\n.type pl_packed_next,@function\n"
	"pl_packed_next:\n"
	"	lea 3(%rdi), %rax\n"
	"	ret\n"
	".size pl_packed_next, .-pl_packed_next\n"
	/* its symbol ends before its ret: what follows is not padding */
	".p2align 4\n"
	".globl pl_short_fall\n.type pl_short_fall,@function\n"
	"pl_short_fall:\n"
	"	lea 4(%rdi), %rax\n"
	".size pl_short_fall, .-pl_short_fall\n"
	"	ret\n"
	/* entered at +2 through a pointer in data, by pl_dptr_user */
	".p2align 4\n"
	".globl pl_dptr\n.type pl_dptr,@function\n"
	"pl_dptr:\n"
	"	xor %eax, %eax\n"
	"1:	add %rdi, %rax\n"		/* +2 */
	"	add $1, %rax\n"
	"	ret\n"
	".size pl_dptr, .-pl_dptr\n"
	".globl pl_dptr_user\n.type pl_dptr_user,@function\n"
	"pl_dptr_user:\n"
	"	mov $100, %eax\n"
	"	jmp *.Lpl_dptr_at2(%rip)\n"
	".size pl_dptr_user, .-pl_dptr_user\n"
	".section .data.rel.ro,\"aw\"\n"
	".p2align 3\n"
	".Lpl_dptr_at2: .quad 1b\n"
	".text\n"
	".p2align 4\n"
	".globl pl_leaf\n.type pl_leaf,@function\n"
	"pl_leaf:\n"
	"	lea 7(%rdi,%rdi,2), %rax\n"
	"	ret\n"
	".size pl_leaf, .-pl_leaf\n");

static volatile unsigned long hits[64];

static void on_pre(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p;
	(void)r;
	__atomic_add_fetch(&hits[(uintptr_t)ctx], 1, __ATOMIC_RELAXED);
}

static int create(void *addr, uintptr_t slot, struct pk_probe **out)
{
	PK_OPTS(pk_probe_opts, o, .addr = addr, .pre = on_pre,
		.ctx = (void *)slot);

	*out = NULL;
	return pk_probe_create(&o, out);
}

static int info_of(struct pk_probe *p, int *reason)
{
	struct pk_probe_info info = { .sz = sizeof(info) };

	if (pk_probe_get_info(p, &info))
		return -1;
	*reason = info.reason;
	return info.kind;
}

static long leaf_ref(long x)
{
	return 3 * x + 7;
}

struct pl_ops {
	long pad[16];
	long (*fn)(long);
};

/* The hand-written cases: kind and reason, then results and hits armed. */
static void test_asm(void)
{
	static const struct pl_ops ops = { .fn = pl_leaf };
	static const struct {
		const char *name;
		void *fn;
		int kind, reason;
	} c[] = {
		{ "pl_table_ok", (void *)pl_table_ok, PK_PROBE_JUMP, PK_PROBE_WHY_IJMP_PROVEN },
		{ "pl_table_in", (void *)pl_table_in, PK_PROBE_INT3, PK_PROBE_WHY_IJMP },
		{ "pl_cgoto_in", (void *)pl_cgoto_in, PK_PROBE_INT3, PK_PROBE_WHY_IJMP_MADE },
		{ "pl_reg_own", (void *)pl_reg_own, PK_PROBE_INT3, PK_PROBE_WHY_IJMP },
		{ "pl_tail", (void *)pl_tail, PK_PROBE_JUMP, PK_PROBE_WHY_IJMP_PROVEN },
		{ "pl_push_call", (void *)pl_push_call, PK_PROBE_JUMP, PK_PROBE_WHY_CALL_MOVED },
		{ "pl_icall_short", (void *)pl_icall_short, PK_PROBE_INT3, PK_PROBE_WHY_CALL },
		{ "pl_short_nop", (void *)pl_short_nop, PK_PROBE_JUMP, PK_PROBE_WHY_PADDING },
		{ "pl_short_cc", (void *)pl_short_cc, PK_PROBE_JUMP, PK_PROBE_WHY_PADDING },
		{ "pl_short_packed", (void *)pl_short_packed, PK_PROBE_INT3, PK_PROBE_WHY_SHORT },
		{ "pl_short_fall", (void *)pl_short_fall, PK_PROBE_INT3, PK_PROBE_WHY_SHORT },
		{ "pl_dptr", (void *)pl_dptr, PK_PROBE_INT3, PK_PROBE_WHY_XREF },
		{ "pl_push_icall", (void *)pl_push_icall, PK_PROBE_JUMP, PK_PROBE_WHY_CALL_MOVED },
		{ "pl_push_ripcall", (void *)pl_push_ripcall, PK_PROBE_JUMP, PK_PROBE_WHY_CALL_MOVED },
	};
	struct pk_probe *p[14] = { 0 };
	const int n = 14;

	for (int i = 0; i < n; i++) {
		int kind, reason = 0;

		if (!ASSERT_OK(create(c[i].fn, (uintptr_t)i, &p[i]), c[i].name))
			goto out;
		kind = info_of(p[i], &reason);
		if (!ASSERT_EQ(kind, c[i].kind, c[i].name) ||
		    !ASSERT_EQ(reason, c[i].reason, c[i].name))
			fprintf(stderr, "  %s: kind %d reason %d\n", c[i].name,
				kind, reason);
	}
	if (!ASSERT_OK(pk_probe_register(p, (size_t)n), "register the asm cases"))
		goto out;
	for (long k = 1; k <= 5; k++) {
		ASSERT_EQ(pl_table_ok(k), k, "pl_table_ok result");
		ASSERT_EQ(pl_table_in(k), k, "pl_table_in result");
		ASSERT_EQ(pl_cgoto_in(k), k, "pl_cgoto_in result");
		ASSERT_EQ(pl_reg_own(k), k, "pl_reg_own result");
		ASSERT_EQ(pl_tail(&ops, k), leaf_ref(k + 3), "pl_tail result");
		ASSERT_EQ(pl_push_call(k), leaf_ref(k) + 1, "pl_push_call result");
		ASSERT_EQ(pl_icall_short(k, pl_leaf), leaf_ref(k) + 2,
			  "pl_icall_short result");
		ASSERT_EQ(pl_short_nop(k), k + 1, "pl_short_nop result");
		ASSERT_EQ(pl_short_cc(k), k, "pl_short_cc result");
		ASSERT_EQ(pl_short_packed(k), k + 2, "pl_short_packed result");
		ASSERT_EQ(pl_short_fall(k), k + 4, "pl_short_fall result");
		ASSERT_EQ(pl_packed_next(k), k + 3, "pl_packed_next result");
		ASSERT_EQ(pl_dptr(k), k + 1, "pl_dptr result");
		ASSERT_EQ(pl_push_icall(k, pl_leaf), leaf_ref(k) + 4,
			  "pl_push_icall result");
		ASSERT_EQ(pl_push_ripcall(k), leaf_ref(k) + 5,
			  "pl_push_ripcall result");
		/* Not counted: it enters pl_dptr past the probe point. */
		ASSERT_EQ(pl_dptr_user(k), k + 101, "pl_dptr_user result");
	}
	/* Entered once per call: a loop head inside never re-runs the entry. */
	for (int i = 0; i < n; i++)
		ASSERT_EQ(hits[i], 5, c[i].name);
	ASSERT_OK(pk_probe_unregister(p, (size_t)n), "unregister");
out:
	for (int i = 0; i < n; i++)
		pk_probe_destroy(p[i]);
}

static const char *why_name(int r)
{
	switch (r) {
	case PK_PROBE_WHY_PLAIN: return "jump plain";
	case PK_PROBE_WHY_IJMP_PROVEN: return "jump ijmp_proven";
	case PK_PROBE_WHY_CALL_MOVED: return "jump call_moved";
	case PK_PROBE_WHY_PADDING: return "jump padding";
	case PK_PROBE_WHY_IJMP: return "int3 ijmp";
	case PK_PROBE_WHY_IJMP_MADE: return "int3 ijmp_made";
	case PK_PROBE_WHY_CALL: return "int3 call";
	case PK_PROBE_WHY_SHORT: return "int3 short";
	case PK_PROBE_WHY_BRANCH_IN: return "int3 branch_in";
	case PK_PROBE_WHY_XREF: return "int3 xref";
	default: return "other";
	}
}

#define RUNS 40

/* One compiled variant: golden kinds, then the armed run against the unprobed. */
static void test_variant(struct pc_variant *v, int rebase)
{
	struct pk_probe *p[PC_N] = { 0 };
	int ref[PC_N][RUNS], base = 32;
	char got[2048] = "", want[2048] = "", path[1024];
	const char *src = getenv("PK_SOURCE_DIR");
	size_t o = 0;
	FILE *f;

	if (pc_load(v)) {
		printf("%s: not built here (no clang?): skipped\n", v->name);
		return;
	}
	for (size_t k = 0; k < PC_N; k++)
		for (int x = 0; x < RUNS; x++)
			ref[k][x] = v->run((int)k, x);
	for (size_t k = 0; k < PC_N; k++) {
		int kind, reason = 0;

		hits[base + k] = 0;
		if (!ASSERT_OK(create(v->fn[k], base + k, &p[k]), pc_names[k]))
			goto out;
		kind = info_of(p[k], &reason);
		o += (size_t)snprintf(got + o, sizeof(got) - o, "%s %s\n",
				      pc_names[k], why_name(reason));
		/* Only a computed goto may need int3. */
		if (strncmp(pc_names[k], "cgoto", 5) &&
		    !ASSERT_EQ(kind, PK_PROBE_JUMP, pc_names[k]))
			fprintf(stderr, "  %s %s: %s\n", v->name, pc_names[k],
				why_name(reason));
	}
	snprintf(path, sizeof(path), "%s/tests/cases/place/%s.out",
		 src ? src : ".", v->name);
	if (rebase) {
		f = fopen(path, "w");
		if (ASSERT_TRUE(f, path)) {
			fputs(got, f);
			fclose(f);
		}
	} else {
		f = fopen(path, "r");
		if (ASSERT_TRUE(f, "golden file exists (PK_REBASE=1 makes it)")) {
			want[fread(want, 1, sizeof(want) - 1, f)] = 0;
			fclose(f);
		}
		if (!ASSERT_EQ(strcmp(got, want), 0, v->name))
			fprintf(stderr, "  got:\n%s  want:\n%s", got, want);
	}
	if (!ASSERT_OK(pk_probe_register(p, PC_N), v->name))
		goto out;
	for (size_t k = 0; k < PC_N; k++) {
		for (int x = 0; x < RUNS; x++)
			if (!ASSERT_EQ(v->run((int)k, x), ref[k][x], pc_names[k]))
				break;
		ASSERT_EQ(hits[base + k], RUNS, pc_names[k]);
	}
	ASSERT_OK(pk_probe_unregister(p, PC_N), "unregister");
	printf("%s:\n%s", v->name, got);
out:
	for (size_t k = 0; k < PC_N; k++)
		pk_probe_destroy(p[k]);
}

int main(void)
{
	int rebase = getenv("PK_REBASE") && !strcmp(getenv("PK_REBASE"), "1");
	struct pk_probe *p = NULL;
	int reason;

	/* A moved call is refused under a shadow stack: the cases say jump. */
	if (!create((void *)pl_push_call, 0, &p) && info_of(p, &reason) == PK_PROBE_INT3 &&
	    reason == PK_PROBE_WHY_CALL) {
		pk_probe_destroy(p);
		SKIP("a shadow stack is active: calls are not moved");
	}
	pk_probe_destroy(p);
	test_asm();
	for (size_t i = 0; i < PC_NVARIANTS; i++)
		test_variant(&pc_variants[i], rebase);
	return t_exit();
}
