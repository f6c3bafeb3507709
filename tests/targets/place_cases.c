// SPDX-License-Identifier: MIT
/* place_cases.c - functions whose compiled shapes decide a probe's kind (issue 12): built by gcc and clang, -O2/-O3, PIC and not, with and without -fcf-protection (tests/extra.cmake). */

/*
 * Each build is one variant (PC_VARIANT names it, PC_PREFIX prefixes the
 * exported names so the non-PIC variants link into one executable). What
 * each function is for:
 *
 *   switch10   a dense switch: a jump table (lea; movslq; add; jmp *reg,
 *              or jmp *T(,%idx,8) without PIC), bounded by cmp; ja
 *   switch_loop a switch in a loop: the table's base hoisted out of it
 *   tail_ops   return o->fn(x): jmp *0x80(%rdi), a tail call
 *   tail_tbl   a pointer loaded from an array, then a tail call
 *   tail_cb    a callback kept in a callee-saved register across a call,
 *              then a tail call through it
 *   cgoto      computed goto (&&label) through a static table of label
 *              addresses: read like a jump table where the jmp is traced
 *              to it (clang), else an int3 probe (GCC: the function makes
 *              addresses of its own code)
 *   cgoto_stack computed goto to &&label + an int32 offset between labels
 *              (no relocation), the target kept in a volatile local: the
 *              jmp reads it back from the stack (jmp *-8(%rsp), or mov;
 *              jmp *%reg): int3 probe (a jump probe on main f504f86, and
 *              a probe at a label inside ran the middle of the jmp)
 *   cgoto_tls  the same through a thread's writable word (per thread: the
 *              stress test runs it from several)
 *   call_first a call among the first instructions (after a push)
 *   call_only  a call first of all (after the stack adjustment)
 *   zero, ident short functions (3 bytes, 7 with endbr64): the padding
 *              after them displaced too
 *
 * run(k, x): calls case k with x, the same way the test's reference does.
 */
#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#ifndef PC_PREFIX
#define PC_PREFIX pc_
#endif
#define F(name) CAT(PC_PREFIX, name)
/* Called as written: GCC's IPA would fold zero() and ident() otherwise. */
#if defined(__GNUC__) && !defined(__clang__)
#define NOI __attribute__((noinline, noipa, used))
#else
#define NOI __attribute__((noinline, used))
#endif

typedef int (*pc_fn)(int);

struct pc_ops {
	long pad[16];
	pc_fn fn;		/* at 0x80 */
};

/* Per thread: the stress test calls every case from several. */
__thread volatile int F(sink);

NOI int F(leaf0)(int x) { return x * 3 + 1; }
NOI int F(leaf1)(int x) { return x ^ 0x5a5a; }
NOI int F(leaf2)(int x) { return x - 77; }
NOI int F(leaf3)(int x) { return (x << 3) + 5; }
NOI int F(leaf4)(int x) { F(sink) = x; return x / 3; }
NOI int F(leaf5)(int x) { return x % 11 + 2; }
NOI int F(leaf6)(int x) { return ~x; }
NOI int F(leaf7)(int x) { return x * x; }

NOI int F(switch10)(unsigned int k, int x)
{
	switch (k) {
	case 0: return F(leaf0)(x) + 1;
	case 1: return F(leaf1)(x) * 2;
	case 2: return F(leaf2)(x) - 3;
	case 3: return F(leaf3)(x + 4);
	case 4: return F(leaf4)(x) ^ 5;
	case 5: return F(leaf5)(x) + 6;
	case 6: return F(leaf6)(x) * 7;
	case 7: return F(leaf7)(x) - 8;
	case 8: return F(leaf0)(x * 9);
	case 9: return F(leaf1)(x) + 10;
	default: return -1;
	}
}

NOI int F(switch_loop)(const unsigned char *ops, int n, int x)
{
	for (int i = 0; i < n; i++) {
		switch (ops[i]) {
		case 0: x += 3; break;
		case 1: x *= 5; break;
		case 2: x ^= 0x77; break;
		case 3: x -= 11; break;
		case 4: x = F(leaf2)(x); break;
		case 5: x <<= 1; break;
		case 6: x = F(leaf6)(x); break;
		case 7: x = x / 2 + 1; break;
		default: x++; break;
		}
	}
	return x;
}

NOI int F(tail_ops)(const struct pc_ops *o, int x)
{
	return o->fn(x);
}

NOI int F(tail_tbl)(const pc_fn *tbl, unsigned int i, int x)
{
	pc_fn f = tbl[i & 3];

	return f(x + 1);
}

NOI int F(tail_cb)(pc_fn f, int x)
{
	F(sink) = F(leaf0)(x);
	return f(x + F(sink));
}

NOI int F(cgoto)(const unsigned char *ops, int n)
{
	static const void *const tbl[] = { &&op_inc, &&op_dbl, &&op_end };
	int x = 0, i = 0;

	goto *tbl[i < n ? ops[i] : 2];
op_inc:
	x++;
	i++;
	goto *tbl[i < n ? ops[i] : 2];
op_dbl:
	x *= 2;
	i++;
	goto *tbl[i < n ? ops[i] : 2];
op_end:
	return x;
}

NOI int F(cgoto_stack)(int op)
{
	static const int offs[] = { 0, &&l1 - &&l0, &&l2 - &&l0 };
	long acc = 0;
	void *volatile t;

	t = &&l0 + offs[op];
	goto *t;
l0:	__asm__ volatile("add $1, %0" : "+r"(acc) :: "memory");
l1:	acc += 2;
	__asm__ volatile("" : "+r"(acc) :: "memory");
l2:	acc += 4;
	__asm__ volatile("" : "+r"(acc) :: "memory");
	return (int)acc;
}

__thread void *volatile F(cgoto_word);

NOI int F(cgoto_tls)(int op)
{
	static const int offs[] = { 0, &&l1 - &&l0, &&l2 - &&l0 };
	long acc = 0;

	F(cgoto_word) = &&l0 + offs[op];
	goto *F(cgoto_word);
l0:	__asm__ volatile("add $3, %0" : "+r"(acc) :: "memory");
l1:	acc += 5;
	__asm__ volatile("" : "+r"(acc) :: "memory");
l2:	acc += 7;
	__asm__ volatile("" : "+r"(acc) :: "memory");
	return (int)acc;
}

NOI int F(call_first)(int x)
{
	return F(leaf0)(x) + F(leaf1)(x + 1);
}

NOI int F(call_only)(int x)
{
	F(leaf4)(x);
	return x + F(sink);
}

NOI int F(zero)(void)
{
	return 0;
}

NOI int F(ident)(int x)
{
	return x;
}

/* Case k with x, as the test calls it; the reference is the unprobed run. */
NOI int F(run)(int k, int x)
{
	static const unsigned char ops[] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 1, 0 };
	static const unsigned char gops[] = { 0, 1, 0, 1, 1, 0 };
	static const struct pc_ops o = { .fn = F(leaf3) };
	static const pc_fn tbl[4] = { F(leaf0), F(leaf5), F(leaf6), F(leaf7) };
	/* Through pointers: clang folds calls of so short a function. */
	static int (*volatile const zp)(void) = F(zero);
	static int (*volatile const ip)(int) = F(ident);

	switch (k) {
	case 0: return F(switch10)((unsigned int)x % 12, x);
	case 1: return F(switch_loop)(ops, (int)sizeof(ops) - (x & 3), x);
	case 2: return F(tail_ops)(&o, x);
	case 3: return F(tail_tbl)(tbl, (unsigned int)x, x);
	case 4: return F(tail_cb)(F(leaf5), x);
	case 5: return F(cgoto)(gops, x % 7);
	case 6: return F(call_first)(x);
	case 7: return F(call_only)(x);
	case 8: return zp() + x;
	case 9: return ip(x * 5);
	case 10: return F(cgoto_stack)(x % 3) + x;
	case 11: return F(cgoto_tls)(x % 3) + x;
	default: return 0;
	}
}
