// SPDX-License-Identifier: MIT
/* test_sym_version.c - a plain name is its default version (what dlsym binds), NAME@V another (what dlvsym gives). */
#include <dlfcn.h>
#include <errno.h>

#include "harness.h"

/* Names glibc 2.36 (x86-64) defines in a default and a compat version. */
static const char *const compat[] = {
	"glob", "globfree", "sched_getaffinity", "sched_setaffinity",
	"pthread_cond_wait", "pthread_cond_signal", "realpath", "regexec",
	"fmemopen", "posix_spawn",
};

static void *libc;	/* libc's own handle: its definitions, not an interposer's */

static void plain_is_default(void)
{
	for (size_t i = 0; i < sizeof(compat) / sizeof(compat[0]); i++) {
		struct pk_sym s;
		void *want = dlsym(RTLD_DEFAULT, compat[i]);
		char what[200], spec[64];

		/* What the program's calls bind to (under ASan: its
		   interceptor, first in load order). */
		snprintf(what, sizeof(what), "%s resolves", compat[i]);
		if (!want || !ASSERT_OK(pk_sym_lookup(compat[i], &s), what))
			continue;
		snprintf(what, sizeof(what), "%s: dlsym's address", compat[i]);
		ASSERT_EQ(s.addr, (uintptr_t)want, what);
		/* libc's own: its default version. */
		snprintf(spec, sizeof(spec), "libc.so.6:%s", compat[i]);
		if (!ASSERT_OK(pk_sym_lookup(spec, &s), spec))
			continue;
		snprintf(what, sizeof(what), "%s: dlsym's on libc's handle", spec);
		ASSERT_EQ(s.addr, (uintptr_t)dlsym(libc, compat[i]), what);
		snprintf(what, sizeof(what), "%s: a default version named", spec);
		ASSERT_TRUE(s.version[0] && !(s.flags & PK_SYM_F_COMPAT), what);
	}
}

static void explicit_versions(void)
{
	struct pk_sym s;

	/* memcpy: both versions exist; the default one is an IFUNC. */
	if (ASSERT_OK(pk_sym_lookup("libc.so.6:memcpy", &s), "memcpy"))
		ASSERT_EQ(s.addr, (uintptr_t)dlsym(libc, "memcpy"),
			  "memcpy: dlsym's (the IFUNC's target)");
	if (ASSERT_OK(pk_sym_lookup("memcpy@GLIBC_2.2.5", &s), "memcpy@GLIBC_2.2.5")) {
		ASSERT_EQ(s.addr, (uintptr_t)dlvsym(RTLD_DEFAULT, "memcpy",
						    "GLIBC_2.2.5"),
			  "memcpy@GLIBC_2.2.5: dlvsym's");
		ASSERT_TRUE(s.flags & PK_SYM_F_COMPAT, "a compat version");
		ASSERT_EQ(strcmp(s.version, "GLIBC_2.2.5"), 0, "its version");
	}
	if (ASSERT_OK(pk_sym_lookup("libc.so.6:memcpy@@GLIBC_2.14", &s), "memcpy@@GLIBC_2.14"))
		ASSERT_EQ(s.addr, (uintptr_t)dlvsym(RTLD_DEFAULT, "memcpy",
						    "GLIBC_2.14"),
			  "memcpy@@GLIBC_2.14: dlvsym's");
	if (ASSERT_OK(pk_sym_lookup("libc.so.6:glob@GLIBC_2.2.5", &s), "glob@GLIBC_2.2.5"))
		ASSERT_EQ(s.addr, (uintptr_t)dlvsym(RTLD_DEFAULT, "glob",
						    "GLIBC_2.2.5"),
			  "glob@GLIBC_2.2.5: dlvsym's");
	if (ASSERT_OK(pk_sym_lookup("glob@GLIBC_2.27", &s), "glob@GLIBC_2.27"))
		ASSERT_EQ(s.addr, (uintptr_t)dlsym(libc, "glob"),
			  "glob@GLIBC_2.27 is libc's default");

	/* Failure paths. */
	ASSERT_EQ(pk_sym_lookup("memcpy@@GLIBC_2.2.5", &s), -ENOENT,
		  "@@ of a compat version: not a default one");
	ASSERT_EQ(pk_sym_lookup("memcpy@GLIBC_9.99", &s), -ENOENT,
		  "no such version");
	ASSERT_EQ(pk_sym_lookup("getpid@GLIBC_2.2.5x", &s), -ENOENT,
		  "no such version of a single-version name");
	ASSERT_EQ(pk_sym_lookup("memcpy@", &s), -EINVAL, "empty version");
	ASSERT_EQ(pk_sym_lookup("memcpy@@", &s), -EINVAL, "empty @@ version");
	ASSERT_EQ(pk_sym_lookup("@GLIBC_2.2.5", &s), -EINVAL, "no name");
}

int main(void)
{
	libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
	if (!libc || !dlvsym(RTLD_DEFAULT, "memcpy", "GLIBC_2.2.5"))
		SKIP("this libc has no memcpy@GLIBC_2.2.5 (not x86-64 glibc)");
	plain_is_default();
	explicit_versions();
	return t_exit();
}
