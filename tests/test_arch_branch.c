// SPDX-License-Identifier: MIT
/* test_arch_branch.c - the branch index's fast length tables agree with Zydis over whole libraries, and find every kind of relative branch. */

/*
 * pk_arch_branch_targets() measures common instructions from opcode tables
 * and leaves the rest to Zydis; pk_arch_branch_targets_zydis() decodes all
 * with Zydis. Over every executable section of libc, libstdc++, libm, libz
 * and this test (and, unless PK_TEST_QUICK is set or the build is
 * sanitized, the largest libLLVM here), decoded linearly from each
 * section's start, both must decode the same number of instructions and
 * emit the same destinations in the same order. Then a hand-made sequence
 * of every relative branch form gives its known destinations.
 */
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdint.h>

#include "arch/arch.h"
#include "harness.h"

struct list {
	uint64_t *v;
	size_t n, cap;
};

static void push(uint64_t t, void *ctx)
{
	struct list *l = ctx;

	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 4096;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
		if (!l->v)
			abort();
	}
	l->v[l->n++] = t;
}

/* Returns 0 (checked), 1 (differs), -1 (file unreadable). */
static int one_file(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), bad = 0;
	size_t insns = 0, bytes = 0, branches = 0;
	Elf_Scn *scn = NULL;
	Elf *e;

	if (fd < 0)
		return -1;
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	while (e && (scn = elf_nextscn(e, scn))) {
		struct list a = { 0 }, z = { 0 };
		size_t na, nz;
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
		    !(sh.sh_flags & SHF_EXECINSTR))
			continue;
		d = elf_rawdata(scn, NULL);
		if (!d || !d->d_buf)
			continue;
		na = pk_arch_branch_targets(d->d_buf, d->d_size, sh.sh_addr,
					    push, &a);
		nz = pk_arch_branch_targets_zydis(d->d_buf, d->d_size,
						  sh.sh_addr, push, &z);
		if (na != nz || a.n != z.n ||
		    (a.n && memcmp(a.v, z.v, a.n * sizeof(*a.v)))) {
			size_t k = 0;

			while (k < a.n && k < z.n && a.v[k] == z.v[k])
				k++;
			fprintf(stderr, "%s: section at %#lx: %zu/%zu instructions, "
				"%zu/%zu branches (tables/Zydis); first difference "
				"at branch %zu (%#lx vs %#lx)\n", path,
				(unsigned long)sh.sh_addr, na, nz, a.n, z.n, k,
				k < a.n ? (unsigned long)a.v[k] : 0ul,
				k < z.n ? (unsigned long)z.v[k] : 0ul);
			bad = 1;
		}
		insns += nz;
		branches += z.n;
		bytes += d->d_size;
		free(a.v);
		free(z.v);
	}
	elf_end(e);
	close(fd);
	printf("%s: %zu bytes, %zu instructions, %zu branches: %s\n", path,
	       bytes, insns, branches, bad ? "DIFFER" : "same");
	return bad;
}

/* Every relative form once, then their destinations (runtime 0x1000). */
static void test_forms(void)
{
	static const uint8_t code[] = {
		0xeb, 0x10,				/* 0: jmp +0x10 -> 0x12 */
		0xe9, 0x00, 0x01, 0x00, 0x00,		/* 2: jmp -> 0x107 */
		0xe8, 0xf9, 0xff, 0xff, 0xff,		/* 7: call -> 0x5 */
		0x74, 0xfe,				/* c: jz -> 0xc */
		0x0f, 0x85, 0x10, 0x00, 0x00, 0x00,	/* e: jnz -> 0x24 */
		0xe2, 0x02,				/* 14: loop -> 0x18 */
		0xe3, 0x00,				/* 16: jrcxz -> 0x18 */
		0xc7, 0xf8, 0x00, 0x00, 0x00, 0x00,	/* 18: xbegin -> 0x1e */
		0xf2, 0xe9, 0x01, 0x00, 0x00, 0x00,	/* 1e: bnd jmp -> 0x25 */
		0x48, 0x8b, 0x05, 0x10, 0x00, 0x00, 0x00, /* 24: mov [rip] */
		0xc5, 0xfd, 0x6f, 0x44, 0x24, 0x20,	/* 2b: vmovdqa */
		0x62, 0xf1, 0x7c, 0x48, 0x28, 0x04, 0x24, /* 31: vmovaps zmm */
		0x48, 0xb8, 1, 2, 3, 4, 5, 6, 7, 8,	/* 38: movabs */
		0x66, 0x0f, 0x3a, 0x0f, 0xc1, 0x08,	/* 42: palignr */
		0xf6, 0x44, 0x24, 0x08, 0x01,		/* 48: test byte */
		0x7f, 0x80,				/* 4d: jg -> 0xffffffcf */
	};
	static const uint64_t want[] = { 0x1012, 0x1107, 0x1005, 0x100c,
					 0x1024, 0x1018, 0x1018, 0x101e,
					 0x1025, 0x0fcf };
	struct list a = { 0 };
	size_t n = pk_arch_branch_targets(code, sizeof(code), 0x1000, push, &a);

	ASSERT_EQ(n, 16, "instructions in the forms");
	if (ASSERT_EQ(a.n, PK_ARRAY_SIZE(want), "branches in the forms"))
		for (size_t i = 0; i < a.n; i++)
			ASSERT_EQ(a.v[i], want[i], "a destination");
	free(a.v);
}

int main(void)
{
	static const char *const libs[] = {
		"/usr/lib/x86_64-linux-gnu/libc.so.6",
		"/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
		"/usr/lib/x86_64-linux-gnu/libm.so.6",
		"/usr/lib/x86_64-linux-gnu/libz.so.1",
		"/proc/self/exe",
		"/usr/lib/x86_64-linux-gnu/libLLVM-15.so.1",
		"/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1",
	};
	int big = !getenv("PK_TEST_QUICK");
	int checked = 0;

#if defined(__SANITIZE_ADDRESS__)
	big = 0;
#endif
	test_forms();
	for (size_t i = 0; i < PK_ARRAY_SIZE(libs); i++) {
		int r;

		if (strstr(libs[i], "LLVM") && !big)
			continue;
		r = one_file(libs[i]);
		if (r < 0)
			continue;
		checked++;
		ASSERT_EQ(r, 0, libs[i]);
		if (strstr(libs[i], "LLVM"))
			big = 0;	/* one is enough */
	}
	ASSERT_GE(checked, 2, "libraries checked");
	return t_exit();
}
