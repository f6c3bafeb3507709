// SPDX-License-Identifier: MIT
/* test_sym_replaced.c - a loaded library replaced on disk (review item 6): its symbols come from the file mapped (through /proc/self/map_files/ where this process may open it), or the lookup is refused, never read from the new file at the path. */
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness.h"

#ifndef SYMREPL_A
#error "SYMREPL_A and SYMREPL_B: the paths of the two builds"
#endif

static int sh(const char *fmt, const char *a, const char *b)
{
	char cmd[8192];

	snprintf(cmd, sizeof(cmd), fmt, a, b);
	return system(cmd);
}

int main(void)
{
	char dir[] = "/tmp/test_sym_replaced.XXXXXX", lib[256];
	int (*f)(int);
	struct pk_sym s;
	void *h;
	int err;

	if (!mkdtemp(dir))
		SKIP("no temporary directory");
	snprintf(lib, sizeof(lib), "%s/libsymrepl.so", dir);
	if (sh("cp '%s' '%s'", SYMREPL_A, lib))
		SKIP("cannot copy the library");
	h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!ASSERT_TRUE(h, "dlopen the copy"))
		goto out;
	f = (int (*)(int))(uintptr_t)dlsym(h, "sr_f");
	ASSERT_EQ(f(1), 2, "sr_f works");
	if (ASSERT_OK(pk_sym_lookup("libsymrepl.so:sr_f", &s), "before"))
		ASSERT_EQ(s.addr, (uintptr_t)f, "dlsym's address");

	/* The same build copied over it (a new inode): still read. */
	ASSERT_EQ(sh("cp '%s' '%s.new'", SYMREPL_A, lib), 0, "copy A again");
	ASSERT_EQ(sh("mv '%s.new' '%s'", lib, lib), 0, "over the loaded one");
	if (ASSERT_OK(pk_sym_lookup("libsymrepl.so:sr_f", &s), "same build id"))
		ASSERT_EQ(s.addr, (uintptr_t)f, "... dlsym's address");

	/* Another build at the path (apt upgrade, a rebuild). */
	ASSERT_EQ(sh("cp '%s' '%s.new'", SYMREPL_B, lib), 0, "copy B");
	ASSERT_EQ(sh("mv '%s.new' '%s'", lib, lib), 0, "over the loaded one");
	err = pk_sym_lookup("libsymrepl.so:sr_f", &s);
	if (getenv("PROBEKIT_TEST_NO_MAP_FILES")) {
		ASSERT_EQ(err, -ENOENT, "replaced, map_files not opened: refused");
	} else if (err == -ENOENT) {
		printf("map_files not readable here (no CAP_SYS_ADMIN): refused\n");
	} else if (ASSERT_OK(err, "replaced: read through map_files")) {
		ASSERT_EQ(s.addr, (uintptr_t)f, "... dlsym's address, not B's");
	}
	if (!err)
		ASSERT_EQ(s.addr, (uintptr_t)f, "never the new file's address");
	ASSERT_EQ(f(2), 3, "sr_f still works");
	dlclose(h);
out:
	sh("rm -rf '%s'%s", dir, "");
	return t_exit();
}
