// SPDX-License-Identifier: MIT
/* libsymtarget.c - functions test_sym_spec names: a static sharing its name with one in symtarget_b.c, an IFUNC of its own, a family for globs. */

#define API __attribute__((visibility("default"), noinline))

/* Same name, other body, in symtarget_b.c. */
static __attribute__((noinline)) int st_dup(int x)
{
	volatile int v = x;

	return v + 1;
}

API int st_a_call(int x)
{
	return st_dup(x);
}

API void *st_a_dup_addr(void)
{
	return (void *)st_dup;
}

API int st_glob_one(int x) { volatile int v = x; return v + 1; }
API int st_glob_two(int x) { volatile int v = x; return v + 2; }
API int st_glob_three(int x) { volatile int v = x; return v + 3; }

/* An IFUNC whose implementation has a name in .symtab only. */
static __attribute__((noinline)) int st_impl_plain(int x)
{
	volatile int v = x;

	return v * 3;
}

static int (*st_resolve(void))(int)
{
	return st_impl_plain;
}

API int st_ifunc(int x) __attribute__((ifunc("st_resolve")));

API void *st_impl_addr(void)
{
	return (void *)st_impl_plain;
}
