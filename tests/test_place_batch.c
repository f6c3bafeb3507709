// SPDX-License-Identifier: MIT
/* test_place_batch.c - what arming many probes in one object caches (the symbol index, the branch index's file check and its rel8 candidates) is not used for another object loaded where that one was. */

/*
 * pk_sym_func_at() and the branch index (probe/xref.c) skip re-checking an
 * object's file while no object was loaded since they last did (dlpi_adds),
 * and after 32 checks in one object the index keeps its rel8 candidates
 * as a bitmap instead of reading the file at each check. A copy of
 * libarmcachea.so is probed past that point, unloaded, replaced on disk
 * by libarmcacheb.so under the same path (rename(2)) and loaded again at
 * its address (skipped if the loader puts it elsewhere): there c_one jumps
 * (rel8) to c_two+2, so c_two must be an int3 probe (PK_PROBE_WHY_XREF),
 * as it is once B's own bitmap is built too; and B's c_three starts 16
 * bytes into where A's c_three was, which A's symbol index would call the
 * middle of a function.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>

#include "harness.h"
#include "probekit.h"

static void pre(struct pk_probe *p, struct pk_regs *r, void *c)
{
	(void)p, (void)r, (void)c;
}

/* Create a probe on @f: its kind and reason (-errno, 0 as kind if refused). */
static int place(void *f, int *reason)
{
	PK_OPTS(pk_probe_opts, o, .addr = f, .pre = pre);
	struct pk_probe_info in = { .sz = sizeof(in) };
	struct pk_probe *p = NULL;
	int err = pk_probe_create(&o, &p);

	*reason = err;
	if (err)
		return 0;
	if (pk_probe_get_info(p, &in) || in.func != (uintptr_t)f)
		in.kind = -1;
	*reason = in.reason;
	pk_probe_destroy(p);
	return in.kind;
}

/* Copy @from to @to through a temporary name and rename(2): a new file. */
static int install(const char *from, const char *to)
{
	char tmp[4200], buf[65536];
	int in = open(from, O_RDONLY), out;
	ssize_t n;

	snprintf(tmp, sizeof(tmp), "%s.new", to);
	out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0755);
	if (in < 0 || out < 0)
		return -1;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			return -1;
	close(in);
	close(out);
	return n < 0 ? -1 : rename(tmp, to);
}

static void *sym(void *h, const char *name)
{
	void *f = dlsym(h, name);

	if (!f) {
		fprintf(stderr, "no %s in the library\n", name);
		exit(1);
	}
	return f;
}

int main(void)
{
	const char *dir = getenv("PK_TARGET_DIR");
	char pa[4096], pb[4096], tdir[] = "/tmp/pk-place-batch.XXXXXX", lib[4200];
	void *ha, *hb, *two_a, *three_a, *two_b, *three_b, *one_b, *pad_b;
	int why, kind;

	if (!dir)
		SKIP("PK_TARGET_DIR is not set");
	snprintf(pa, sizeof(pa), "%s/libarmcachea.so", dir);
	snprintf(pb, sizeof(pb), "%s/libarmcacheb.so", dir);
	if (!getenv("T_VERBOSE"))
		pk_set_log(t_quiet_log, NULL);
	if (!mkdtemp(tdir))
		SKIP("cannot make a directory in /tmp");
	snprintf(lib, sizeof(lib), "%s/libarmcache.so", tdir);
	if (!ASSERT_OK(install(pa, lib), "copy libarmcachea.so"))
		return 1;

	ha = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!ASSERT_TRUE(ha, "dlopen libarmcachea.so"))
		return 1;
	two_a = sym(ha, "c_two");
	three_a = sym(ha, "c_three");
	/* Past the 32 checks after which the rel8 candidates are kept. */
	for (int i = 0; i < 40; i++) {
		kind = place(two_a, &why);
		if (!ASSERT_EQ(kind, PK_PROBE_JUMP, "A: c_two is a jump probe") ||
		    !ASSERT_EQ(why, PK_PROBE_WHY_PLAIN, "A: nothing in the way"))
			return 1;
	}
	ASSERT_EQ(place(three_a, &why), PK_PROBE_JUMP, "A: c_three is a jump probe");
	dlclose(ha);
	if (!ASSERT_FALSE(dlopen(lib, RTLD_NOW | RTLD_NOLOAD), "A unloaded"))
		return 1;
	if (!ASSERT_OK(install(pb, lib), "libarmcacheb.so over it"))
		return 1;

	hb = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!ASSERT_TRUE(hb, "dlopen libarmcacheb.so"))
		return 1;
	one_b = sym(hb, "c_one");
	two_b = sym(hb, "c_two");
	pad_b = sym(hb, "c_pad");
	three_b = sym(hb, "c_three");
	if (two_b != two_a) {
		unlink(lib);
		rmdir(tdir);
		SKIP("libarmcacheb.so was not loaded where libarmcachea.so was "
		     "(%p, %p)", two_b, two_a);
	}
	ASSERT_EQ((uintptr_t)three_b, (uintptr_t)three_a + 16, "B's layout");

	/* A's index and bitmap say nothing lands in c_two: not B's. */
	kind = place(two_b, &why);
	ASSERT_EQ(kind, PK_PROBE_INT3, "B: c_two is an int3 probe");
	ASSERT_EQ(why, PK_PROBE_WHY_XREF, "B: c_one's jmp lands in it");
	/* A's symbol index: the middle of its c_three. */
	kind = place(three_b, &why);
	ASSERT_EQ(kind, PK_PROBE_JUMP, "B: c_three starts a function");
	/* B's own bitmap, built past 32 checks, says the same of c_two. */
	for (int i = 0; i < 40; i++) {
		place(i & 1 ? one_b : pad_b, &why);
	}
	kind = place(two_b, &why);
	ASSERT_EQ(kind, PK_PROBE_INT3, "B (bitmap): c_two is an int3 probe");
	ASSERT_EQ(why, PK_PROBE_WHY_XREF, "B (bitmap): c_one's jmp lands in it");
	dlclose(hb);
	unlink(lib);
	rmdir(tdir);
	return t_exit();
}
