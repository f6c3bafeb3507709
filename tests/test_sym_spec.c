// SPDX-License-Identifier: MIT
/* test_sym_spec.c - the specs users write: globs over names and objects, paths, C++ names, FILE#NAME, OBJECT:0xOFFSET, files not loaded; pk_sym_each(). */
#include <dlfcn.h>
#include <errno.h>
#include <fnmatch.h>
#include <link.h>
#include <sys/stat.h>

#include "harness.h"

int st_a_call(int);
int st_b_call(int);
void *st_a_dup_addr(void);
void *st_b_dup_addr(void);
void *st_impl_addr(void);
int st_ifunc(int);
int symcxx_call(int);

struct seen {
	int n, bad, file, ifunc;
	const char *glob;	/* every name must match it */
	char names[64][512];
};

static int collect(const struct pk_sym *s, void *ctx)
{
	struct seen *sn = ctx;

	if (sn->glob && fnmatch(sn->glob, s->name, 0))
		sn->bad++;
	if (!s->size)
		sn->bad++;
	sn->file += !!(s->flags & PK_SYM_F_FILE);
	sn->ifunc += !!(s->flags & PK_SYM_F_IFUNC);
	if (sn->n < 64)
		snprintf(sn->names[sn->n], sizeof(sn->names[0]), "%s", s->name);
	sn->n++;
	return 0;
}

static int has(const struct seen *sn, const char *name)
{
	for (int i = 0; i < sn->n && i < 64; i++)
		if (!strcmp(sn->names[i], name))
			return 1;
	return 0;
}

static int stop_at_two(const struct pk_sym *s, void *ctx)
{
	(void)s;
	return ++*(int *)ctx == 2 ? -ECANCELED : 0;
}

static void globs(void)
{
	struct seen sn = { .glob = "st_glob_*" };
	struct pk_sym s;
	int calls = 0;

	ASSERT_EQ(pk_sym_each("st_glob_*", collect, &sn), 3, "name glob: 3");
	ASSERT_EQ(sn.bad, 0, "each matches the glob, with a size");
	ASSERT_TRUE(has(&sn, "st_glob_two"), "st_glob_two among them");
	memset(&sn, 0, sizeof(sn));
	ASSERT_EQ(pk_sym_each("libsymtar*:st_glob_t*", collect, &sn), 2,
		  "object glob and name glob");
	memset(&sn, 0, sizeof(sn));
	ASSERT_GE(pk_sym_each("libsymtarget.so:*", collect, &sn), 10,
		  "every function of one object");
	ASSERT_TRUE(has(&sn, "st_a_call") && has(&sn, "st_dup"),
		    "exported and static ones");
	memset(&sn, 0, sizeof(sn));
	sn.glob = "str*";
	ASSERT_GE(pk_sym_each("libc.so.6:str*", collect, &sn), 10,
		  "libc's str*");
	ASSERT_EQ(sn.bad, 0, "all str*, sized");
	ASSERT_GE(sn.ifunc, 3, "IFUNCs among them (resolved)");
	ASSERT_TRUE(has(&sn, "strlen"), "strlen among them");
	ASSERT_EQ(pk_sym_each("st_glob_*", stop_at_two, &calls), -ECANCELED,
		  "the callback's error stops the walk");
	ASSERT_EQ(calls, 2, "after two");
	ASSERT_EQ(pk_sym_lookup("st_glob_*", &s), -EINVAL,
		  "lookup: a glob matching 3");
	ASSERT_OK(pk_sym_lookup("st_glob_tw?", &s), "lookup: a glob matching 1");
	ASSERT_EQ(pk_sym_each("st_no_such_*", collect, &sn), -ENOENT,
		  "a glob matching nothing");
	ASSERT_EQ(pk_sym_each("libnothere*:*", collect, &sn), -ENOENT,
		  "an object glob matching nothing");
	ASSERT_EQ(pk_sym_each("st_glob_one", NULL, NULL), -EINVAL, "no fn");
}

static void paths(void)
{
	struct pk_sym s;
	void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
	void *want = libc ? dlsym(libc, "malloc") : NULL;	/* not ASan's */
	char tmpl[] = "/tmp/test_sym_spec.XXXXXX", link[64], spec[128];
	const char *paths[] = { "/lib/x86_64-linux-gnu/libc.so.6",
				"/usr/lib/x86_64-linux-gnu/libc.so.6" };
	struct seen sn = { 0 };
	const char *dir = getenv("PK_TARGET_DIR");

	for (int i = 0; i < 2; i++) {
		snprintf(spec, sizeof(spec), "%s:malloc", paths[i]);
		if (access(paths[i], R_OK))
			continue;
		if (ASSERT_OK(pk_sym_lookup(spec, &s), spec))
			ASSERT_EQ(s.addr, (uintptr_t)want, "dlsym's malloc");
	}
	if (mkdtemp(tmpl)) {
		snprintf(link, sizeof(link), "%s/c.so", tmpl);
		if (!symlink("/lib/x86_64-linux-gnu/libc.so.6", link)) {
			snprintf(spec, sizeof(spec), "%s:malloc", link);
			if (ASSERT_OK(pk_sym_lookup(spec, &s), "through a link"))
				ASSERT_EQ(s.addr, (uintptr_t)want, "same malloc");
			unlink(link);
		}
		rmdir(tmpl);
	}
	ASSERT_EQ(pk_sym_lookup("/nonexistent/libc.so.6:malloc", &s), -ENOENT,
		  "a path that is no file");
	/* A file that is not loaded: read on disk, file addresses. */
	if (!dir)
		return;
	snprintf(spec, sizeof(spec), "%s/libunloadtarget.so:ut_*", dir);
	ASSERT_EQ(pk_sym_each(spec, collect, &sn), 3, "a file not loaded");
	ASSERT_EQ(sn.file, 3, "flagged PK_SYM_F_FILE");
	snprintf(spec, sizeof(spec), "%s/libunloadtarget.so:ut_fn", dir);
	ASSERT_EQ(pk_sym_lookup(spec, &s), -ENOENT, "lookup: not loaded");
}

static void cxx(void)
{
	void *m_int = dlsym(RTLD_DEFAULT, "_ZN2ns3Cls6methodEi");
	void *m_dbl = dlsym(RTLD_DEFAULT, "_ZN2ns3Cls6methodEd");
	void *only = dlsym(RTLD_DEFAULT, "_ZN2ns3Cls4onlyEi");
	void *tw = dlsym(RTLD_DEFAULT, "_ZN2ns5twiceIiEET_S1_");
	struct seen sn = { 0 };
	struct pk_sym s;

	if (!dlsym(RTLD_DEFAULT, "__cxa_demangle"))
		SKIP("no C++ runtime loaded (libsymcxx.so links libstdc++)");
	if (ASSERT_OK(pk_sym_lookup("ns::Cls::only", &s), "ns::Cls::only")) {
		ASSERT_EQ(s.addr, (uintptr_t)only, "its address");
		ASSERT_EQ(strcmp(s.name, "ns::Cls::only(int)"), 0, "demangled name");
	}
	ASSERT_EQ(pk_sym_lookup("ns::Cls::method", &s), -EINVAL,
		  "overloaded without a parameter list");
	if (ASSERT_OK(pk_sym_lookup("ns::Cls::method(int)", &s), "method(int)"))
		ASSERT_EQ(s.addr, (uintptr_t)m_int, "method(int)'s address");
	if (ASSERT_OK(pk_sym_lookup("libsymcxx.so:ns::Cls::method( double )", &s),
		      "method(double), object given, spaces"))
		ASSERT_EQ(s.addr, (uintptr_t)m_dbl, "method(double)'s address");
	if (ASSERT_OK(pk_sym_lookup("ns::twice<int>", &s), "a template"))
		ASSERT_EQ(s.addr, (uintptr_t)tw, "twice<int>'s address");
	if (ASSERT_OK(pk_sym_lookup("ns::twice<int>(int)", &s),
		      "a template with its parameters"))
		ASSERT_EQ(s.addr, (uintptr_t)tw, "twice<int>(int)'s address");
	if (ASSERT_OK(pk_sym_lookup("_ZN2ns3Cls4onlyEi", &s), "mangled"))
		ASSERT_EQ(s.addr, (uintptr_t)only, "same function");
	ASSERT_EQ(pk_sym_each("libsymcxx.so:ns::Cls::*", collect, &sn), 3,
		  "a glob over demangled names");
	ASSERT_EQ(pk_sym_lookup("ns::Cls::nosuch", &s), -ENOENT, "no such method");
	ASSERT_EQ(symcxx_call(1), 2 + 3 + 4 + 2, "the library works");
}

static void files(void)
{
	struct pk_sym s;

	ASSERT_EQ(st_a_call(1) + st_b_call(1), 2 + 7, "targets work");
	ASSERT_EQ(pk_sym_lookup("st_dup", &s), -EINVAL,
		  "two statics of one name: ambiguous");
	if (ASSERT_OK(pk_sym_lookup("libsymtarget.so:libsymtarget.c#st_dup", &s),
		      "FILE#NAME (a)")) {
		ASSERT_EQ(s.addr, (uintptr_t)st_a_dup_addr(), "a's st_dup");
		ASSERT_EQ(strcmp(s.file, "libsymtarget.c"), 0, "its file");
	}
	if (ASSERT_OK(pk_sym_lookup("symtarget_b.c#st_dup", &s), "FILE#NAME (b)"))
		ASSERT_EQ(s.addr, (uintptr_t)st_b_dup_addr(), "b's st_dup");
	if (ASSERT_OK(pk_sym_lookup("symtarget_?.c#st_dup", &s), "FILE glob"))
		ASSERT_EQ(s.addr, (uintptr_t)st_b_dup_addr(), "b's st_dup");
	ASSERT_EQ(pk_sym_lookup("nosuch.c#st_dup", &s), -ENOENT, "no such file");
	ASSERT_EQ(pk_sym_lookup("#st_dup", &s), -EINVAL, "empty file");
	ASSERT_EQ(pk_sym_lookup("x.c#", &s), -EINVAL, "empty name");
}

static void offsets(void)
{
	struct pk_sym s, by;
	char spec[128];

	if (!ASSERT_OK(pk_sym_lookup("st_b_call", &s), "st_b_call"))
		return;
	snprintf(spec, sizeof(spec), "libsymtarget.so:%#lx",
		 (unsigned long)(s.addr - s.base));
	if (ASSERT_OK(pk_sym_lookup(spec, &by), "OBJECT:0xOFFSET")) {
		ASSERT_EQ(by.addr, s.addr, "same function");
		ASSERT_EQ(by.size, s.size, "same size");
		ASSERT_EQ(strcmp(by.name, "st_b_call"), 0, "named by its symbol");
	}
	snprintf(spec, sizeof(spec), "libsymtarget.so:%#lx",
		 (unsigned long)(s.addr - s.base + 1));
	ASSERT_EQ(pk_sym_lookup(spec, &by), -EINVAL, "inside a function");
	ASSERT_EQ(pk_sym_lookup("libsymtarget.so:0x7fffffff", &by), -ENOENT,
		  "no function there");
	ASSERT_EQ(pk_sym_lookup("libsymtarget.so:0xzz", &by), -EINVAL,
		  "not hex");
	ASSERT_EQ(pk_sym_lookup("0x1000", &by), -ENOENT,
		  "an offset needs an object (else a name)");
}

static void own_ifunc(void)
{
	struct pk_sym s;

	ASSERT_EQ(st_ifunc(2), 6, "the IFUNC works");
	if (!ASSERT_OK(pk_sym_lookup("st_ifunc", &s), "our IFUNC"))
		return;
	ASSERT_EQ(s.addr, (uintptr_t)st_impl_addr(), "its implementation");
	ASSERT_EQ(strcmp(s.impl, "st_impl_plain"), 0, "named from .symtab");
	ASSERT_EQ(s.table, PK_SYM_SYMTAB, "sized by .symtab");
}

int main(void)
{
	struct pk_sym s;

	ASSERT_EQ(pk_sym_lookup("libc.so.6:", &s), -EINVAL, "empty name");
	ASSERT_EQ(pk_sym_lookup(":malloc", &s), -EINVAL, "empty object");
	globs();
	paths();
	files();
	offsets();
	own_ifunc();
	cxx();
	return t_exit();
}
