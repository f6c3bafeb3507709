/* SPDX-License-Identifier: MIT */
/* place_cases.h - the compiled placement cases (tests/targets/place_cases.c) as test_place_cases.c and stress_place.c find and run them. */
#ifndef PK_TEST_PLACE_CASES_H
#define PK_TEST_PLACE_CASES_H

#include <dlfcn.h>
#include <stdio.h>

/* The probed functions of place_cases.c, in run()'s case order. */
static const char *const pc_names[] = {
	"switch10", "switch_loop", "tail_ops", "tail_tbl", "tail_cb",
	"cgoto", "call_first", "call_only", "zero", "ident",
	"cgoto_stack", "cgoto_tls",
};
#define PC_N (sizeof(pc_names) / sizeof(pc_names[0]))

/* One build of place_cases.c: a shared library, or linked in (non-PIC). */
struct pc_variant {
	const char *name;	/* also tests/cases/place/NAME.out */
	const char *lib;	/* libplace_NAME.so in PK_TARGET_DIR, or NULL */
	const char *prefix;	/* its functions' prefix */
	void *fn[PC_N];
	int (*run)(int k, int x);
};

static struct pc_variant pc_variants[] = {
#ifndef PC_NOPIE
	{ .name = "gcc_O2_pic", .lib = "libplace_gcc_O2_pic.so", .prefix = "pc_" },
	{ .name = "gcc_O3_pic_cet", .lib = "libplace_gcc_O3_pic_cet.so", .prefix = "pc_" },
	{ .name = "clang_O2_pic", .lib = "libplace_clang_O2_pic.so", .prefix = "pc_" },
	{ .name = "clang_O3_pic_cet", .lib = "libplace_clang_O3_pic_cet.so", .prefix = "pc_" },
#else
	{ .name = "gcc_O2_nopie", .lib = NULL, .prefix = "pcg_" },
	{ .name = "clang_O2_nopie_cet", .lib = NULL, .prefix = "pcc_" },
#endif
};
#define PC_NVARIANTS (sizeof(pc_variants) / sizeof(pc_variants[0]))

/* Find @v's functions: 0, or -1 (not built: no clang, say). */
static inline int pc_load(struct pc_variant *v)
{
	char path[1024], sym[128];
	const char *dir = getenv("PK_TARGET_DIR");
	void *h;

	if (v->lib) {
		snprintf(path, sizeof(path), "%s/%s", dir ? dir : ".", v->lib);
		h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	} else {
		h = dlopen(NULL, RTLD_NOW);
	}
	if (!h)
		return -1;
	for (size_t i = 0; i < PC_N; i++) {
		snprintf(sym, sizeof(sym), "%s%s", v->prefix, pc_names[i]);
		v->fn[i] = dlsym(h, sym);
		if (!v->fn[i])
			return -1;
	}
	snprintf(sym, sizeof(sym), "%srun", v->prefix);
	*(void **)&v->run = dlsym(h, sym);
	return v->run ? 0 : -1;
}

#endif /* PK_TEST_PLACE_CASES_H */
