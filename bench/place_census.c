// SPDX-License-Identifier: MIT
/* place_census.c - which kind of probe every .dynsym function of real libraries gets, and why (issue 12). */

/*
 * For each library (default: liblzma, libxml2, libpcre2-8, libstdc++;
 * or the sonames or paths given after the options): dlopen() it, and
 * for every defined function symbol of its .dynsym with a size (one per
 * address: aliases counted once) create an entry probe, read
 * pk_probe_get_info()'s kind and reason, and destroy it. Nothing is ever
 * registered: no code is changed. Prints a table per library and, with
 * --json, JSON lines (bench.h's contract): bench "place", case LIB,
 * metrics int3_share_of_functions (percent), functions, jump, int3,
 * refused (create failed), and one count per reason (reason_NAME).
 * --quick: the first 300 functions of each. PLACE_CENSUS_VERBOSE=1 lists
 * every function's kind and reason (with PROBEKIT_LOG=debug: the why).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "probekit.h"

static const char *const default_libs[] = {
	"liblzma.so.5", "libxml2.so.2", "libpcre2-8.so.0", "libstdc++.so.6",
};

static const struct {
	int why;
	const char *name;
} reasons[] = {
	{ PK_PROBE_WHY_PLAIN, "jump_plain" },
	{ PK_PROBE_WHY_IJMP_PROVEN, "jump_ijmp_proven" },
	{ PK_PROBE_WHY_CALL_MOVED, "jump_call_moved" },
	{ PK_PROBE_WHY_PADDING, "jump_padding" },
	{ PK_PROBE_WHY_SHORT, "int3_short" },
	{ PK_PROBE_WHY_KEY_SITE, "int3_key_site" },
	{ PK_PROBE_WHY_TRAP, "int3_trap" },
	{ PK_PROBE_WHY_CALL, "int3_call" },
	{ PK_PROBE_WHY_UNDECODABLE, "int3_undecodable" },
	{ PK_PROBE_WHY_BRANCH_IN, "int3_branch_in" },
	{ PK_PROBE_WHY_IJMP, "int3_ijmp" },
	{ PK_PROBE_WHY_IJMP_MADE, "int3_ijmp_made" },
	{ PK_PROBE_WHY_XREF, "int3_xref" },
	{ PK_PROBE_WHY_NO_XREF, "int3_no_xref" },
	{ PK_PROBE_WHY_RELOC, "int3_reloc" },
	{ PK_PROBE_WHY_RSEQ, "int3_rseq" },
};
#define NREASONS (sizeof(reasons) / sizeof(reasons[0]))

static int addr_cmp(const void *a, const void *b)
{
	uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;

	return (x > y) - (x < y);
}

/* The defined, sized function symbols of @path's .dynsym, + @bias, unique. */
static size_t dynsym_funcs(const char *path, uintptr_t bias, uintptr_t **out)
{
	uintptr_t *v = NULL;
	size_t n = 0, cap = 0;
	Elf_Scn *scn = NULL;
	Elf *e;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	*out = NULL;
	if (fd < 0)
		return 0;
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ, NULL);
	while (e && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM ||
		    !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;

			if (!gelf_getsym(d, (int)i, &s) || s.st_shndx == SHN_UNDEF ||
			    GELF_ST_TYPE(s.st_info) != STT_FUNC || !s.st_size)
				continue;
			if (n == cap) {
				uintptr_t *nv;

				cap = cap ? 2 * cap : 1024;
				nv = realloc(v, cap * sizeof(*v));
				if (!nv)
					break;
				v = nv;
			}
			v[n++] = bias + s.st_value;
		}
	}
	elf_end(e);
	close(fd);
	if (!n) {
		free(v);
		return 0;
	}
	qsort(v, n, sizeof(*v), addr_cmp);
	{
		size_t m = 0;

		for (size_t i = 0; i < n; i++)
			if (!m || v[m - 1] != v[i])
				v[m++] = v[i];
		n = m;
	}
	*out = v;
	return n;
}

static void one(const char *bench_case, double v, const char *unit,
		const char *metric)
{
	struct bench_series s = { .n = 0 };

	bench_add(&s, v);
	bench_report("place", bench_case, metric, unit, &s);
}

static void census(const char *lib)
{
	unsigned long by[64] = { 0 }, jump = 0, int3 = 0, refused = 0;
	struct link_map *lm = NULL;
	uintptr_t *fns;
	char name[64];
	size_t n;
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	const char *b, *verbose = getenv("PLACE_CENSUS_VERBOSE");

	/* The case: the soname up to ".so". */
	b = strrchr(lib, '/');
	snprintf(name, sizeof(name), "%s", b ? b + 1 : lib);
	if (strstr(name, ".so"))
		*strstr(name, ".so") = 0;
	if (!h || dlinfo(h, RTLD_DI_LINKMAP, &lm) || !lm) {
		bench_skip("place", name, "int3_share_of_functions",
			   "library not installed");
		if (h)
			dlclose(h);
		return;
	}
	n = dynsym_funcs(lm->l_name, lm->l_addr, &fns);
	if (bench_opts.quick && n > 300)
		n = 300;
	for (size_t i = 0; i < n; i++) {
		PK_OPTS(pk_probe_opts, o, .addr = (void *)fns[i]);
		struct pk_probe_info info = { .sz = sizeof(info) };
		struct pk_probe *p;

		if (pk_probe_create(&o, &p)) {
			refused++;
			continue;
		}
		if (!pk_probe_get_info(p, &info)) {
			if (info.kind == PK_PROBE_JUMP)
				jump++;
			else
				int3++;
			if (info.reason > 0 && info.reason < 64)
				by[info.reason]++;
			if (verbose) {
				Dl_info di;

				if (dladdr((void *)fns[i], &di) && di.dli_sname)
					printf("    %s+%#lx kind %d reason %d\n",
					       di.dli_sname,
					       (unsigned long)(fns[i] -
							       (uintptr_t)lm->l_addr),
					       info.kind, info.reason);
			}
		}
		pk_probe_destroy(p);
	}
	free(fns);
	printf("%s (%s): %zu functions\n", name, lm->l_name, n);
	one(name, n ? 100.0 * (double)int3 / (double)(jump + int3) : 0,
	    "%", "int3_share_of_functions");
	one(name, (double)n, "", "functions");
	one(name, (double)jump, "", "jump");
	one(name, (double)int3, "", "int3");
	one(name, (double)refused, "", "refused");
	for (size_t r = 0; r < NREASONS; r++) {
		char m[64];

		snprintf(m, sizeof(m), "reason_%s", reasons[r].name);
		one(name, (double)by[reasons[r].why], "", m);
	}
	dlclose(h);
}

int main(int argc, char **argv)
{
	int first = argc;

	/* Options first (bench.h's), then libraries. */
	for (int i = 1; i < argc; i++)
		if (strncmp(argv[i], "--", 2)) {
			first = i;
			break;
		}
	bench_init(first, argv);
	if (first < argc)
		for (int i = first; i < argc; i++)
			census(argv[i]);
	else
		for (size_t i = 0; i < sizeof(default_libs) / sizeof(default_libs[0]); i++)
			census(default_libs[i]);
	return 0;
}
