// SPDX-License-Identifier: MIT
/* test_sym_ifunc.c - an IFUNC resolves to the implementation this process's calls reach, sized by the debug file's .symtab or else by its .eh_frame FDE; a probe on it counts the calls. */
#include <dlfcn.h>
#include <errno.h>
#include <unwind.h>

#include "harness.h"

/* libgcc's: the FDE covering a pc (bases.func: the FDE's initial location). */
struct dwarf_eh_bases {
	void *tbase, *dbase, *func;
};
extern const void *_Unwind_Find_FDE(void *pc, struct dwarf_eh_bases *bases);

static const char *const ifuncs[] = { "strlen", "memcpy", "memset", "strchr",
				      "memcmp" };

static void *libc;	/* libc's handle: its IFUNCs, not ASan's interceptors */

static int lookup(const char *name, struct pk_sym *s)
{
	char spec[128];

	snprintf(spec, sizeof(spec), "libc.so.6:%s", name);
	return pk_sym_lookup(spec, s);
}

static void one(const char *name, struct pk_sym *dbg, int have_dbg)
{
	void *want = dlsym(libc, name);
	struct dwarf_eh_bases b = { 0 };
	struct pk_sym s;
	char what[160];

	snprintf(what, sizeof(what), "%s resolves (FDE only)", name);
	if (!ASSERT_OK(lookup(name, &s), what))
		return;
	snprintf(what, sizeof(what), "%s: dlsym's address", name);
	ASSERT_EQ(s.addr, (uintptr_t)want, what);
	snprintf(what, sizeof(what), "%s: flagged IFUNC", name);
	ASSERT_TRUE(s.flags & PK_SYM_F_IFUNC, what);
	snprintf(what, sizeof(what), "%s: extent from the FDE", name);
	ASSERT_EQ(s.table, PK_SYM_EH_FRAME, what);
	snprintf(what, sizeof(what), "%s: size > 0", name);
	ASSERT_GE(s.size, 1, what);
	snprintf(what, sizeof(what), "%s: libgcc's FDE starts there too", name);
	ASSERT_TRUE(_Unwind_Find_FDE((void *)(s.addr + 1), &b) &&
		    (uintptr_t)b.func == s.addr, what);
	snprintf(what, sizeof(what), "%s: the implementation named by offset",
		 name);
	ASSERT_TRUE(strstr(s.impl, "ifunc target at 0x") != NULL, what);
	printf("%s -> %s, %zu bytes (FDE); with debug file: %s, %zu bytes\n",
	       name, s.impl, s.size, have_dbg ? dbg->impl : "-",
	       have_dbg ? dbg->size : 0);
	if (!have_dbg)
		return;
	snprintf(what, sizeof(what), "%s: the debug file's size == the FDE's",
		 name);
	ASSERT_EQ(dbg->size, s.size, what);
	ASSERT_EQ(dbg->addr, s.addr, "same address with the debug file");
	ASSERT_EQ(dbg->table, PK_SYM_DEBUG, "extent from the debug file");
	ASSERT_TRUE(!strncmp(dbg->impl, "__", 2), "named as in the debug file");
}

static int hits[3];
static int counting;	/* only the loops' calls: not probekit's own */

static void count(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p, (void)r;
	if (__atomic_load_n(&counting, __ATOMIC_RELAXED))
		__atomic_add_fetch((int *)ctx, 1, __ATOMIC_RELAXED);
}

/*
 * The implementations probed: calls through pointers dlsym() gave (what
 * the program's PLT binds) are counted, each exactly (the program's own
 * count is the independent figure).
 */
static void probe_calls(void)
{
	static const char *const spec[3] = { "libc.so.6:strlen",
					     "libc.so.6:memset",
					     "libc.so.6:memcpy" };
	size_t (*volatile len)(const char *) =
		(size_t (*)(const char *))dlsym(libc, "strlen");
	void *(*volatile set)(void *, int, size_t) =
		(void *(*)(void *, int, size_t))dlsym(libc, "memset");
	void *(*volatile cpy)(void *, const void *, size_t) =
		(void *(*)(void *, const void *, size_t))dlsym(libc, "memcpy");
	struct pk_probe *p[3];
	char buf[64], src[64] = "probekit";
	size_t sum = 0;
	int n = 0;

	for (int i = 0; i < 3; i++) {
		PK_OPTS(pk_probe_opts, o, .symbol = spec[i], .pre = count,
			.ctx = &hits[i]);

		if (!ASSERT_OK(pk_probe_create(&o, &p[n]), spec[i]))
			continue;
		n++;
	}
	if (n < 3 || !ASSERT_OK(pk_probe_register(p, 3), "register the three")) {
		while (n--)
			pk_probe_destroy(p[n]);
		return;
	}
	__atomic_store_n(&counting, 1, __ATOMIC_SEQ_CST);
	for (int i = 0; i < 10; i++)
		sum += len("probekit");
	for (int i = 0; i < 7; i++)
		set(buf, i, sizeof(buf));
	for (int i = 0; i < 5; i++)
		cpy(buf, src, sizeof(buf));
	__atomic_store_n(&counting, 0, __ATOMIC_SEQ_CST);
	pk_probe_unregister(p, 3);
	for (int i = 0; i < 3; i++)
		pk_probe_destroy(p[i]);
	ASSERT_EQ(sum, 80, "strlen still right");
	ASSERT_EQ(strcmp(buf, "probekit"), 0, "memcpy still right");
	ASSERT_EQ(hits[0], 10, "strlen's 10 calls counted");
	ASSERT_EQ(hits[1], 7, "memset's 7 calls counted");
	ASSERT_EQ(hits[2], 5, "memcpy's 5 calls counted");
}

int main(void)
{
	struct pk_sym dbg[sizeof(ifuncs) / sizeof(ifuncs[0])];
	int have[sizeof(ifuncs) / sizeof(ifuncs[0])];
	struct pk_sym s;

	libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
	if (!libc)
		SKIP("no libc.so.6 loaded (not glibc)");
	for (size_t i = 0; i < sizeof(ifuncs) / sizeof(ifuncs[0]); i++)
		have[i] = !lookup(ifuncs[i], &dbg[i]) &&
			  dbg[i].table == PK_SYM_DEBUG;
	if (!have[0])
		printf("no debug file for libc (libc6-dbg): FDE extents only\n");
	else if (ASSERT_OK(pk_sym_lookup(dbg[0].impl, &s),
			   "the implementation by its own name (debug file)"))
		ASSERT_EQ(s.addr, dbg[0].addr, "same function");
	setenv("PROBEKIT_DEBUG_DIR", "", 1);	/* no debug files: FDEs */
	for (size_t i = 0; i < sizeof(ifuncs) / sizeof(ifuncs[0]); i++)
		one(ifuncs[i], &dbg[i], have[i]);
	ASSERT_EQ(pk_sym_lookup("__strlen_avx2_no_such", &s), -ENOENT,
		  "no such implementation");
	probe_calls();
	return t_exit();
}
