// SPDX-License-Identifier: MIT
/* test_probe_unload.c - probes of a dlclose'd library are retired (not armed, -ESTALE), and a fresh probe on its copy loaded again at the same address fires. */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"
#include "probekit.h"

/*
 * On main before the fix: after dlclose the stale probe stayed armed=1,
 * its unregister failed (-EINVAL/-EBUSY) forever, and a fresh probe on
 * the copy loaded again at the same address registered but never fired
 * (it joined the stale trampoline).
 */

typedef long (*fn_t)(long);

static char lib_path[4096], lib_b_path[4096];
static unsigned long hits_old, hits_new, rets;

static void pre_old(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p;
	(void)r;
	(void)ctx;
	hits_old++;
}

static void pre_new(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p;
	(void)r;
	(void)ctx;
	hits_new++;
}

static void on_ret(struct pk_retprobe *rp, struct pk_regs *r, void *data,
		   void *ctx)
{
	(void)rp;
	(void)r;
	(void)data;
	(void)ctx;
	rets++;
}

static void *load_from(const char *path, fn_t *fn, fn_t *ret)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return NULL;
	}
	*fn = (fn_t)dlsym(h, "ut_fn");
	*ret = (fn_t)dlsym(h, "ut_ret");
	if (!*fn || !*ret) {
		dlclose(h);
		return NULL;
	}
	return h;
}

static void *load(fn_t *fn, fn_t *ret)
{
	return load_from(lib_path, fn, ret);
}

/*
 * An execute-only site is not read (memcmp() there faults where
 * protection keys make PROT_EXEC alone execute-only): registering says
 * -EACCES and leaves the probe usable. On main before the fix it was read
 * (here, without PKU, the register succeeded; with PKU it would fault).
 */
static void exec_only(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	struct pk_probe *p;
	fn_t fn, ret;
	void *h = load(&fn, &ret), *page;

	if (!ASSERT_TRUE(h, "dlopen for the execute-only case"))
		return;
	page = (void *)((uintptr_t)ret & ~(uintptr_t)(pg - 1));
	{
		PK_OPTS(pk_probe_opts, o, .addr = (void *)ret, .pre = pre_new);

		if (!ASSERT_OK(pk_probe_create(&o, &p), "create (execute-only)"))
			return;
	}
	if (!ASSERT_OK(mprotect(page, (size_t)pg, PROT_EXEC), "mprotect --x"))
		return;
	ASSERT_EQ(pk_probe_register(&p, 1), -EACCES,
		  "register on execute-only code: -EACCES");
	ASSERT_OK(mprotect(page, (size_t)pg, PROT_READ | PROT_EXEC), "mprotect r-x");
	hits_new = 0;
	ASSERT_OK(pk_probe_register(&p, 1), "register once readable again");
	ASSERT_EQ(ret(1), 101, "probed call");
	ASSERT_EQ(hits_new, 1, "probe fires");
	ASSERT_OK(pk_probe_unregister(&p, 1), "unregister");
	hits_new = 0;
	pk_probe_destroy(p);
	ASSERT_OK(dlclose(h), "dlclose (execute-only case)");
}

/*
 * A probe created on an object that was unloaded, registered while a
 * probe on ANOTHER object loaded at the same address is armed there: it
 * must not join that trampoline (its handler would fire on code it was
 * not placed on): -ESTALE. On main before the fix it joined (register 0,
 * and pre_old fired on libunloadtargetb's ut_fn).
 */
static void other_object(void)
{
	struct pk_probe_info info = { .sz = sizeof(info) };
	uint8_t a_code[8];
	struct pk_probe *pa, *q;
	fn_t fa, ra, fb, rb;
	void *h = load(&fa, &ra);

	if (!ASSERT_TRUE(h, "dlopen A for the other-object case"))
		return;
	{
		PK_OPTS(pk_probe_opts, o, .addr = (void *)fa, .pre = pre_old);

		if (!ASSERT_OK(pk_probe_create(&o, &pa), "create on A"))
			return;
	}
	memcpy(a_code, (const void *)fa, sizeof(a_code));
	ASSERT_OK(dlclose(h), "dlclose A");
	h = load_from(lib_b_path, &fb, &rb);
	if (!ASSERT_TRUE(h, "dlopen B (libunloadtargetb.so)"))
		return;
	printf("A's ut_fn was at %p, B's is at %p\n", (void *)fa, (void *)fb);
	if (fb != fa || !memcmp(a_code, (const void *)fb, sizeof(a_code))) {
		printf("SKIP other-object case: the loader put B elsewhere, "
		       "or B's ut_fn starts with A's bytes\n");
		pk_probe_destroy(pa);
		dlclose(h);
		return;
	}
	{
		PK_OPTS(pk_probe_opts, o, .addr = (void *)fb, .pre = pre_new);

		if (!ASSERT_OK(pk_probe_create(&o, &q), "create on B") ||
		    !ASSERT_OK(pk_probe_register(&q, 1), "register on B"))
			return;
	}
	ASSERT_EQ(pk_probe_register(&pa, 1), -ESTALE,
		  "A's probe does not join B's trampoline: -ESTALE");
	hits_old = hits_new = 0;
	ASSERT_EQ(fb(2), 17, "B's probed call");
	ASSERT_EQ(hits_new, 1, "B's probe fires");
	ASSERT_EQ(hits_old, 0, "A's probe does not fire on B's code");
	if (!pk_probe_get_info(pa, &info) && info.armed)
		pk_probe_unregister(&pa, 1);	/* joined (before the fix) */
	ASSERT_OK(pk_probe_unregister(&q, 1), "unregister B's probe");
	pk_probe_destroy(q);
	pk_probe_destroy(pa);
	ASSERT_OK(dlclose(h), "dlclose B");
}

/*
 * Probed code munmap()ed behind the dynamic linker's back (no dlclose, so
 * dlpi_subs does not move): unregistering looks at the site itself and
 * says -ESTALE, writing nothing, whether another mapping took its place
 * or none did. On main before the fix the probes stayed armed and their
 * unregister failed for good: -EBUSY over the new mapping (the text
 * layer found other bytes), -EINVAL with nothing mapped.
 */
static void unmapped(void)
{
	long pg = sysconf(_SC_PAGESIZE);
	static uint8_t saved[65536], pattern[65536];
	struct pk_probe *pf, *pr, *pz, *pn;
	fn_t fn, ret, third;
	void *h = load(&fn, &ret), *page, *m;
	int same = 1;

	if (!ASSERT_TRUE(h, "dlopen for the munmap case"))
		return;
	third = (fn_t)dlsym(h, "ut_third");
	page = (void *)((uintptr_t)fn & ~(uintptr_t)(pg - 1));
	if (!ASSERT_TRUE(third, "ut_third") ||
	    (uintptr_t)ret + 16 > (uintptr_t)page + (size_t)pg ||
	    (uintptr_t)third + 16 > (uintptr_t)page + (size_t)pg ||
	    (size_t)pg > sizeof(saved)) {
		printf("SKIP munmap case: ut_fn, ut_ret, ut_third not on one page\n");
		dlclose(h);
		return;
	}
	memcpy(saved, page, (size_t)pg);
	memset(pattern, 0xcc, (size_t)pg);
	{
		PK_OPTS(pk_probe_opts, of, .addr = (void *)fn, .pre = pre_old);
		PK_OPTS(pk_probe_opts, orr, .addr = (void *)ret, .pre = pre_old);
		PK_OPTS(pk_probe_opts, oz, .addr = (void *)third, .pre = pre_old);

		if (!ASSERT_OK(pk_probe_create(&of, &pf), "create (munmap)") ||
		    !ASSERT_OK(pk_probe_create(&orr, &pr), "create (munmap) 2") ||
		    !ASSERT_OK(pk_probe_register(&pf, 1), "register (munmap)") ||
		    !ASSERT_OK(pk_probe_register(&pr, 1), "register (munmap) 2") ||
		    !ASSERT_OK(pk_probe_create(&oz, &pz), "create (munmap) 3") ||
		    !ASSERT_OK(pk_probe_register(&pz, 1), "register (munmap) 3"))
			return;
	}
	/* Another mapping in its place. */
	ASSERT_OK(munmap(page, (size_t)pg), "munmap the probed code");
	m = mmap(page, (size_t)pg, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (!ASSERT_TRUE(m == page, "map other code there"))
		return;
	memcpy(page, pattern, (size_t)pg);
	ASSERT_OK(mprotect(page, (size_t)pg, PROT_READ | PROT_EXEC), "mprotect r-x");
	ASSERT_EQ(pk_probe_unregister(&pf, 1), -ESTALE,
		  "unregister over a new mapping: -ESTALE");
	same = !memcmp(page, pattern, (size_t)pg);
	ASSERT_TRUE(same, "the new mapping is not written to");
	/* Nothing there. */
	ASSERT_OK(munmap(page, (size_t)pg), "munmap again");
	ASSERT_EQ(pk_probe_unregister(&pr, 1), -ESTALE,
		  "unregister of unmapped code: -ESTALE");
	/* The library's code back, for dlclose. */
	m = mmap(page, (size_t)pg, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (!ASSERT_TRUE(m == page, "map the code back"))
		return;
	memcpy(page, saved, (size_t)pg);
	ASSERT_OK(mprotect(page, (size_t)pg, PROT_READ | PROT_EXEC), "mprotect r-x");
	hits_old = 0;
	ASSERT_EQ(fn(2), 11, "the code, unprobed");
	ASSERT_EQ(hits_old, 0, "retired probe does not fire");
	/*
	 * A new probe where pz's code was (pz not unregistered): pz's
	 * trampoline is looked at and retired first, so that the new one
	 * gets its own (before: it joined pz's, whose jump is gone: no hit).
	 */
	{
		PK_OPTS(pk_probe_opts, o, .addr = (void *)third, .pre = pre_new);

		if (!ASSERT_OK(pk_probe_create(&o, &pn), "create on the code mapped back") ||
		    !ASSERT_OK(pk_probe_register(&pn, 1), "register it"))
			return;
	}
	hits_new = 0;
	ASSERT_EQ(third(5), 4, "the new probe's call");
	ASSERT_EQ(hits_new, 1, "the new probe fires");
	ASSERT_EQ(hits_old, 0, "the old one does not");
	ASSERT_EQ(pk_probe_unregister(&pz, 1), -ESTALE, "the old one is stale");
	ASSERT_OK(pk_probe_unregister(&pn, 1), "unregister the new one");
	hits_new = 0;
	pk_probe_destroy(pn);
	pk_probe_destroy(pz);
	pk_probe_destroy(pf);
	pk_probe_destroy(pr);
	ASSERT_OK(dlclose(h), "dlclose (munmap case)");
}

int main(void)
{
	const char *dir = getenv("PK_TARGET_DIR");
	struct pk_probe_info info = { .sz = sizeof(info) };
	struct pk_retprobe_info rinfo = { .sz = sizeof(rinfo) };
	struct pk_probe *p, *fresh, *third, *unarmed;
	struct pk_retprobe *rp, *rfresh, *runarmed;
	fn_t fn, ret, fn2, ret2, fn3, ret3;
	void *h;

	if (!dir)
		SKIP("PK_TARGET_DIR not set (run through ctest)");
	snprintf(lib_path, sizeof(lib_path), "%s/libunloadtarget.so", dir);
	snprintf(lib_b_path, sizeof(lib_b_path), "%s/libunloadtargetb.so", dir);
	exec_only();
	unmapped();
	h = load(&fn, &ret);
	if (!ASSERT_TRUE(h, "dlopen libunloadtarget.so"))
		return t_exit();
	{
		PK_OPTS(pk_probe_opts, o, .addr = (void *)fn, .pre = pre_old);
		PK_OPTS(pk_retprobe_opts, ro, .addr = (void *)ret, .ret = on_ret);

		if (!ASSERT_OK(pk_probe_create(&o, &p), "create") ||
		    !ASSERT_OK(pk_probe_create(&o, &unarmed), "create unarmed") ||
		    !ASSERT_OK(pk_retprobe_create(&ro, &rp), "retprobe create") ||
		    !ASSERT_OK(pk_retprobe_create(&ro, &runarmed),
			       "retprobe create unarmed") ||
		    !ASSERT_OK(pk_probe_register(&p, 1), "register") ||
		    !ASSERT_OK(pk_retprobe_register(&rp, 1), "retprobe register"))
			return t_exit();
	}
	ASSERT_EQ(fn(2), 11, "probed call");
	ASSERT_EQ(ret(2), 102, "return-probed call");
	ASSERT_EQ(hits_old, 1, "probe fired");
	ASSERT_EQ(rets, 1, "return probe fired");

	ASSERT_OK(dlclose(h), "dlclose");
	if (dlopen(lib_path, RTLD_NOW | RTLD_NOLOAD))
		SKIP("libunloadtarget.so was not unloaded by dlclose");

	/* Noticed by the next API call: retired, not armed, -ESTALE. */
	ASSERT_EQ(pk_probe_unregister(&p, 1), -ESTALE, "unregister: stale");
	ASSERT_OK(pk_probe_get_info(p, &info), "info");
	ASSERT_EQ(info.armed, 0, "stale probe not armed");
	ASSERT_EQ(pk_probe_unregister(&p, 1), -ESTALE, "unregister again: stale");
	ASSERT_EQ(pk_probe_register(&p, 1), -ESTALE, "register: stale");
	ASSERT_EQ(pk_retprobe_unregister(&rp, 1), -ESTALE,
		  "retprobe unregister: stale");
	ASSERT_OK(pk_retprobe_get_info(rp, &rinfo), "retprobe info");
	ASSERT_EQ(rinfo.armed, 0, "stale return probe not armed");
	ASSERT_EQ(pk_retprobe_unregister(&rp, 1), -ESTALE,
		  "retprobe unregister again: stale");
	/* Created before the unload, never armed: its code is not read. */
	ASSERT_EQ(pk_probe_register(&unarmed, 1), -ESTALE,
		  "register a probe created before the unload");
	ASSERT_EQ(pk_retprobe_register(&runarmed, 1), -ESTALE,
		  "register a return probe created before the unload");
	pk_probe_destroy(unarmed);
	pk_retprobe_destroy(runarmed);

	/* Loaded again: where it was before, usually. */
	h = load(&fn2, &ret2);
	if (!ASSERT_TRUE(h, "dlopen again"))
		return t_exit();
	printf("ut_fn at %p, then %p\n", (void *)fn, (void *)fn2);
	ASSERT_EQ(fn2(2), 11, "unprobed copy runs");
	ASSERT_EQ(hits_old, 1, "stale probe does not fire on the new copy");
	{
		PK_OPTS(pk_probe_opts, o, .addr = (void *)fn2, .pre = pre_new);
		PK_OPTS(pk_retprobe_opts, ro, .addr = (void *)ret2, .ret = on_ret);

		if (!ASSERT_OK(pk_probe_create(&o, &fresh), "create fresh") ||
		    !ASSERT_OK(pk_retprobe_create(&ro, &rfresh), "retprobe fresh") ||
		    !ASSERT_OK(pk_probe_register(&fresh, 1), "register fresh") ||
		    !ASSERT_OK(pk_retprobe_register(&rfresh, 1),
			       "retprobe register fresh"))
			return t_exit();
	}
	rets = 0;
	ASSERT_EQ(fn2(3), 16, "fresh probe's call");
	ASSERT_EQ(hits_new, 1, "fresh probe fires");
	ASSERT_EQ(hits_old, 1, "stale one does not");
	ASSERT_EQ(ret2(3), 103, "fresh return probe's call");
	ASSERT_EQ(rets, 1, "fresh return probe fires");
	ASSERT_EQ(pk_probe_unregister(&p, 1), -ESTALE, "old still stale");

	/* Unloaded and loaded again with no probe call in between. */
	ASSERT_OK(dlclose(h), "dlclose 2");
	h = load(&fn3, &ret3);
	if (!ASSERT_TRUE(h, "dlopen a third time"))
		return t_exit();
	printf("then %p\n", (void *)fn3);
	{
		PK_OPTS(pk_probe_opts, o, .addr = (void *)fn3, .pre = pre_new);

		if (!ASSERT_OK(pk_probe_create(&o, &third), "create third") ||
		    !ASSERT_OK(pk_probe_register(&third, 1), "register third"))
			return t_exit();
	}
	hits_new = 0;
	ASSERT_EQ(fn3(3), 16, "third probe's call");
	ASSERT_EQ(hits_new, 1, "third probe fires");
	ASSERT_EQ(pk_probe_unregister(&fresh, 1), -ESTALE,
		  "the fresh one went stale");
	ASSERT_EQ(pk_retprobe_unregister(&rfresh, 1), -ESTALE,
		  "the fresh return probe went stale");
	ASSERT_OK(pk_probe_unregister(&third, 1), "unregister third");
	ASSERT_EQ(fn3(3), 16, "copy restored");
	ASSERT_EQ(hits_new, 1, "no hit after unregister");
	pk_probe_destroy(third);
	pk_probe_destroy(fresh);
	pk_retprobe_destroy(rfresh);
	pk_probe_destroy(p);	/* stale: freed */
	pk_retprobe_destroy(rp);
	ASSERT_OK(dlclose(h), "dlclose again");
	other_object();
	return t_exit();
}
