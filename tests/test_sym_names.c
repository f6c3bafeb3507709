// SPDX-License-Identifier: MIT
/* test_sym_names.c - review findings on names (issue 10): a default version sharing its address with a compat one, C++ names as written (built-in types, std abbreviations, operators, anonymous namespaces, ABI tags), IFUNCs apart from their resolvers and unexported ones, no function start inside another. */
#include <dlfcn.h>
#include <errno.h>
#include <fnmatch.h>

#include "harness.h"

int symcxx_call(int);
int st_a_call(int);
void *st_impl_addr(void);

struct found {
	int n, def, compat, ifunc, resolver;
	const char *name;	/* counted in def/compat */
	uintptr_t want;		/* an IFUNC's implementation */
};

static int collect(const struct pk_sym *s, void *ctx)
{
	struct found *f = ctx;

	f->n++;
	if (f->name && !strcmp(s->name, f->name)) {
		f->def += s->version[0] && !(s->flags & PK_SYM_F_COMPAT);
		f->compat += !!(s->flags & PK_SYM_F_COMPAT);
	}
	if ((s->flags & PK_SYM_F_IFUNC) && s->addr == f->want)
		f->ifunc++;
	if (!strcmp(s->name, "st_resolve") || !strcmp(s->name, "ti_resolve"))
		f->resolver++;
	return 0;
}

/* Item 2: dlopen@GLIBC_2.2.5 and dlopen@@GLIBC_2.34 are one address. */
static void default_versions(void)
{
	void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
	struct found f = { .name = "pthread_create" };
	struct pk_sym s;

	if (!libc || !dlvsym(libc, "pthread_create", "GLIBC_2.34") ||
	    !dlvsym(libc, "pthread_create", "GLIBC_2.2.5")) {
		printf("libc has no pthread_create@GLIBC_2.2.5 and @@GLIBC_2.34: "
		       "not checked\n");
		return;
	}
	ASSERT_GE(pk_sym_each("libc.so.6:pthread_create*", collect, &f), 1,
		  "libc.so.6:pthread_create* matches");
	ASSERT_EQ(f.def, 1, "pthread_create listed by its default version");
	ASSERT_EQ(f.compat, 0, "... not by the compat one");
	if (ASSERT_OK(pk_sym_lookup("libc.so.6:dlopen", &s), "dlopen")) {
		ASSERT_EQ(strcmp(s.version, "GLIBC_2.34"), 0,
			  "dlopen is dlopen@@GLIBC_2.34");
		ASSERT_FALSE(s.flags & PK_SYM_F_COMPAT, "... not a compat one");
	}
	if (ASSERT_OK(pk_sym_lookup("libc.so.6:dlopen@GLIBC_2.2.5", &s),
		      "dlopen@GLIBC_2.2.5"))
		ASSERT_TRUE(s.flags & PK_SYM_F_COMPAT, "... the compat one");
	dlclose(libc);
}

/* Item 3: C++ names as written. */
static void cxx_names(void)
{
	static const char *const specs[] = {
		"a::f(unsigned long)", "a::f",
		"(anonymous namespace)::hid", "(anonymous namespace)::hid(int)",
		"libsymcxx.so:label", "libsymcxx.so:label(int)",
		"libsymcxx.so:label[abi:cxx11](int)", "label[abi:cxx11]",
		"std::ostream::flush", "std::ostream::operator<<(int)",
		"std::locale::operator==",
		"std::locale::operator==(std::locale const&) const",
	};
	struct pk_sym s, one;

	ASSERT_EQ(symcxx_call(1), 2 + 3 + 4 + 2, "the library works");
	for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++)
		ASSERT_OK(pk_sym_lookup(specs[i], &s), specs[i]);
	if (ASSERT_OK(pk_sym_lookup("label", &s), "label")) {
		ASSERT_EQ(strcmp(s.name, "label[abi:cxx11](int)"), 0,
			  "shown with its ABI tag");
		if (ASSERT_OK(pk_sym_lookup("label[abi:cxx11](int)", &one),
			      "by its whole demangled name"))
			ASSERT_EQ(one.addr, s.addr, "the same function");
	}
	if (ASSERT_OK(pk_sym_lookup("std::ostream::flush", &s), "flush"))
		ASSERT_EQ(s.addr, (uintptr_t)dlsym(RTLD_DEFAULT, "_ZNSo5flushEv"),
			  "std::ostream::flush is _ZNSo5flushEv");
	ASSERT_EQ(pk_sym_lookup("a::f(int)", &s), -ENOENT,
		  "other parameters: no match");
	ASSERT_EQ(pk_sym_lookup("a::g", &s), -ENOENT, "no such function");
}

/* Item 10: an unexported IFUNC of this executable. */
static __attribute__((noipa)) int ti_impl(int x)
{
	return x * 7;
}

static int (*ti_resolve(void))(int)
{
	return ti_impl;
}

int ti_ifunc(int x) __attribute__((ifunc("ti_resolve")));
int (*volatile ti_ptr)(int) = ti_ifunc;

static void ifuncs(void)
{
	struct found f = { .want = (uintptr_t)st_impl_addr() };
	struct pk_sym s;

	ASSERT_EQ(ti_ptr(3), 21, "the IFUNC works");
	if (ASSERT_OK(pk_sym_lookup("ti_ifunc", &s), "an unexported IFUNC"))
		ASSERT_EQ(s.addr, (uintptr_t)ti_impl, "its implementation");
	ASSERT_EQ(st_a_call(1), 2, "libsymtarget.so works");
	ASSERT_GE(pk_sym_each("libsymtarget.so:st_*", collect, &f), 1,
		  "libsymtarget.so:st_*");
	ASSERT_EQ(f.ifunc, 1, "st_ifunc listed, as its implementation");
	ASSERT_EQ(f.resolver, 1, "st_resolve listed apart");
}

/* Item 11: every start pk_sym_each(OBJECT:0x*) offers is a function's. */
static int inside;

static void log_inside(enum pk_log_level level, const char *msg, void *ctx)
{
	(void)ctx;
	if (level <= PK_LOG_ERROR && strstr(msg, "bytes into the function")) {
		if (!inside++)
			printf("first: %s\n", msg);
	}
}

static int count(const struct pk_sym *s, void *ctx)
{
	(void)s;
	++*(int *)ctx;
	return 0;
}

static void starts(void)
{
	int n = 0;

	pk_set_log(log_inside, NULL);
	ASSERT_GE(pk_sym_each("libc.so.6:0x*", count, &n), 1000,
		  "libc.so.6:0x*: its functions");
	pk_set_log(NULL, NULL);
	ASSERT_EQ(inside, 0, "no start offered inside a function "
		  "(__clone's, setcontext's nested FDEs)");
}

int main(void)
{
	default_versions();
	cxx_names();
	ifuncs();
	starts();
	return t_exit();
}
