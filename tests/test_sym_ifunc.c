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

static int hits;

static void count(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p, (void)r, (void)ctx;
	__atomic_add_fetch(&hits, 1, __ATOMIC_RELAXED);
}

/* The implementation probed: calls through the PLT reach it. */
static void probe_strlen(void)
{
	PK_OPTS(pk_probe_opts, o, .symbol = "libc.so.6:strlen", .pre = count);
	size_t (*volatile f)(const char *) = (size_t (*)(const char *))
		dlsym(libc, "strlen");
	struct pk_probe *p;
	size_t sum = 0;

	if (!ASSERT_OK(pk_probe_create(&o, &p), "probe strlen's implementation"))
		return;
	if (ASSERT_OK(pk_probe_register(&p, 1), "register")) {
		for (int i = 0; i < 10; i++)
			sum += f("probekit");
		pk_probe_unregister(&p, 1);
	}
	pk_probe_destroy(p);
	ASSERT_EQ(sum, 80, "strlen still right");
	ASSERT_GE(hits, 10, "its calls counted");
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
	probe_strlen();
	return t_exit();
}
