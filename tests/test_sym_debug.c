// SPDX-License-Identifier: MIT
/* test_sym_debug.c - a stripped library's static function: by offset with its FDE's extent (and probed there), then found in its separate debug file by build-id and by .gnu_debuglink (build-id checked), under PROBEKIT_DEBUG_DIR. */
#include <dlfcn.h>
#include <errno.h>

#include "harness.h"

static char tmp[] = "/tmp/test_sym_debug.XXXXXX";

static int sh(const char *fmt, const char *a, const char *b)
{
	char cmd[2048];

	snprintf(cmd, sizeof(cmd), fmt, a, b);
	return system(cmd);
}

static void cleanup(void)
{
	sh("rm -rf '%s'%s", tmp, "");
}

static int hits;

static void count(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p, (void)r, (void)ctx;
	__atomic_add_fetch(&hits, 1, __ATOMIC_RELAXED);
}

/*
 * The stripped static function by offset: bounded by its FDE, and a probe
 * there counts the calls sd_call() makes to it.
 */
static void by_offset(void *h, uintptr_t off)
{
	int (*call)(int) = (int (*)(int))(uintptr_t)dlsym(h, "sd_call");
	struct pk_probe *p;
	struct pk_sym s;
	char spec[64];
	int sum = 0;

	snprintf(spec, sizeof(spec), "libsymdbg.so:%#lx", (unsigned long)off);
	if (!ASSERT_OK(pk_sym_lookup(spec, &s), "OBJECT:0xOFFSET of a stripped static"))
		return;
	ASSERT_EQ(s.table, PK_SYM_EH_FRAME, "bounded by its FDE");
	ASSERT_GE(s.size, 1, "a size from the FDE");
	{
		PK_OPTS(pk_probe_opts, o, .symbol = spec, .pre = count);

		if (!ASSERT_OK(pk_probe_create(&o, &p), "probe it by offset"))
			return;
	}
	if (ASSERT_OK(pk_probe_register(&p, 1), "register")) {
		for (int i = 0; i < 3; i++)
			sum += call(i);
		pk_probe_unregister(&p, 1);
	}
	pk_probe_destroy(p);
	ASSERT_EQ(sum, 0 * 11 + 11 + 22 + 3, "sd_call still right");
	ASSERT_EQ(hits, 3, "its 3 calls counted");
}

int main(void)
{
	const char *dir = getenv("PK_TARGET_DIR");
	char src[1024], lib[1200], id[128] = "", path[4096], other[1024];
	void *(*addr)(void);
	struct pk_sym s;
	void *h;
	FILE *f;

	if (!dir)
		SKIP("PK_TARGET_DIR not set");
	if (system("command -v objcopy >/dev/null && command -v readelf >/dev/null"))
		SKIP("no objcopy/readelf (binutils)");
	if (!mkdtemp(tmp))
		SKIP("no temporary directory");
	atexit(cleanup);
	snprintf(src, sizeof(src), "%s/libsymdbg.so", dir);
	snprintf(other, sizeof(other), "%s/libsymtarget.so", dir);
	snprintf(lib, sizeof(lib), "%s/lib/libsymdbg.so", tmp);
	/* The library stripped (.dynsym only), its debug file apart. */
	if (sh("mkdir -p '%s/lib/.debug' '%s/dbg'", tmp, tmp) ||
	    sh("objcopy --only-keep-debug '%s' '%s/d.debug'", src, tmp) ||
	    sh("strip --strip-all -o '%s' '%s'", lib, src)) {
		ASSERT_TRUE(0, "prepare the stripped copy");
		return t_exit();
	}
	snprintf(path, sizeof(path), "readelf -n '%s' | awk '/Build ID/ { print $3 }'", src);
	f = popen(path, "r");
	if (!f || !fgets(id, sizeof(id), f) || strlen(id) < 4)
		SKIP("no build-id in %s", src);
	pclose(f);
	id[strcspn(id, "\n")] = 0;
	h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!ASSERT_TRUE(h, "load the stripped copy"))
		return t_exit();
	addr = (void *(*)(void))(uintptr_t)dlsym(h, "sd_hidden_addr");

	/* No debug file anywhere: only .dynsym. */
	setenv("PROBEKIT_DEBUG_DIR", "", 1);
	if (ASSERT_OK(pk_sym_lookup("libsymdbg.so:sd_call", &s), "exported: .dynsym"))
		by_offset(h, (uintptr_t)addr() - s.base);
	ASSERT_EQ(pk_sym_lookup("libsymdbg.so:sd_hidden", &s), -ENOENT,
		  "static, no debug file: not found");

	/* By build-id: DIR/.build-id/xx/rest.debug. */
	snprintf(path, sizeof(path), "mkdir -p '%s/dbg/.build-id/%.2s' && cp '%s/d.debug' '%s/dbg/.build-id/%.2s/%s.debug'",
		 tmp, id, tmp, tmp, id, id + 2);
	ASSERT_EQ(system(path), 0, "lay out the build-id tree");
	snprintf(path, sizeof(path), "%s/dbg", tmp);
	setenv("PROBEKIT_DEBUG_DIR", path, 1);
	if (ASSERT_OK(pk_sym_lookup("libsymdbg.so:sd_hidden", &s), "by build-id")) {
		ASSERT_EQ(s.addr, (uintptr_t)addr(), "its address");
		ASSERT_EQ(s.table, PK_SYM_DEBUG, "from the debug file");
		ASSERT_GE(s.size, 1, "sized");
		ASSERT_EQ(strcmp(s.file, "libsymdbg.c"), 0, "its source file too");
	}
	ASSERT_OK(pk_sym_lookup("libsymdbg.so:libsymdbg.c#sd_hidden", &s),
		  "FILE#NAME from the debug file");

	/* By .gnu_debuglink: beside the object in .debug/. */
	snprintf(path, sizeof(path), "%s/none", tmp);
	setenv("PROBEKIT_DEBUG_DIR", path, 1);
	ASSERT_EQ(pk_sym_lookup("libsymdbg.so:sd_hidden", &s), -ENOENT,
		  "no build-id tree, no debuglink yet: not found");
	dlclose(h);
	if (sh("cd '%s' && objcopy --add-gnu-debuglink=d.debug '%s'", tmp, lib) ||
	    sh("cp '%s/d.debug' '%s/lib/.debug/d.debug'", tmp, tmp)) {
		ASSERT_TRUE(0, "add the debuglink");
		return t_exit();
	}
	h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	addr = (void *(*)(void))(uintptr_t)dlsym(h, "sd_hidden_addr");
	if (ASSERT_OK(pk_sym_lookup("libsymdbg.so:sd_hidden", &s), "by debuglink"))
		ASSERT_EQ(s.addr, (uintptr_t)addr(), "its address");

	/* A debuglink's file of another build: refused by build-id. */
	sh("objcopy --only-keep-debug '%s' '%s/lib/.debug/d.debug'", other, tmp);
	ASSERT_EQ(pk_sym_lookup("libsymdbg.so:sd_hidden", &s), -ENOENT,
		  "another build's debug file: not used");
	ASSERT_OK(pk_sym_lookup("libsymdbg.so:sd_call", &s), "still .dynsym");
	dlclose(h);
	return t_exit();
}
