// SPDX-License-Identifier: MIT
/* test_arch_branch.c - the branch index's fast length tables agree with Zydis over whole libraries, and find every kind of relative branch. */

/*
 * pk_arch_branch_targets() measures common instructions from opcode tables
 * (fast_len()) and leaves the rest to Zydis. Over every executable section
 * of libc, libstdc++, libm, libz, libcrypto and this test (and, unless
 * PK_TEST_QUICK is set or the build is sanitized, a libLLVM), walked as
 * Zydis decodes them, every instruction the tables measure has Zydis'
 * length and is a relative branch exactly when Zydis says so. Then a
 * hand-made sequence of every relative branch form gives its known
 * destinations, and the same through Zydis alone.
 * (Checked once more widely, 2026-12-01: every ELF file under /usr/bin,
 * /usr/sbin and /usr/lib/x86_64-linux-gnu of this Debian 12 machine.)
 */
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdint.h>

#include "harness.h"
/* White box: fast_len() is static there. */
#include "arch/x86_64/decode.c"

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

/*
 * Along Zydis' walk of every executable section of @path: where Zydis
 * decodes an instruction, the tables measure it the same or leave it to
 * Zydis (0). Where Zydis decodes nothing (data in text) the tables may
 * measure something: junk either way. Returns 0 (agree), 1 (differ),
 * -1 (file unreadable).
 */
static int one_file(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), bad = 0;
	size_t insns = 0, bytes = 0, fast = 0;
	ZydisDecoder dec;
	Elf_Scn *scn = NULL;
	Elf *e;

	if (fd < 0)
		return -1;
	ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	ZydisDecoderEnableMode(&dec, ZYDIS_DECODER_MODE_MINIMAL, ZYAN_TRUE);
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	while (e && (scn = elf_nextscn(e, scn))) {
		const uint8_t *b;
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
		    !(sh.sh_flags & SHF_EXECINSTR))
			continue;
		d = elf_rawdata(scn, NULL);
		if (!d || !d->d_buf)
			continue;
		b = d->d_buf;
		for (size_t at = 0; at < d->d_size;) {
			ZydisDecoderContext zc;
			ZydisDecodedInstruction in;
			int rel, fl = fast_len(b + at, d->d_size - at, &rel);

			if (ZYAN_FAILED(ZydisDecoderDecodeInstruction(
				    &dec, &zc, b + at, d->d_size - at, &in))) {
				at++;
				continue;
			}
			insns++;
			fast += fl != 0;
			if (fl && (fl != in.length ||
				   (rel != 0) != !!in.raw.imm[0].is_relative) &&
			    bad++ < 5) {
				fprintf(stderr, "%s: %#lx: tables %d bytes (rel %d), "
					"Zydis %u:", path,
					(unsigned long)(sh.sh_addr + at), fl, rel,
					in.length);
				for (size_t k = 0; k < 12 && at + k < d->d_size; k++)
					fprintf(stderr, " %02x", b[at + k]);
				fprintf(stderr, "\n");
			}
			at += in.length;
		}
		bytes += d->d_size;
	}
	elf_end(e);
	close(fd);
	printf("%s: %zu bytes, %zu instructions, %.1f%% measured by the "
	       "tables: %s\n", path, bytes, insns,
	       insns ? 100.0 * fast / insns : 0.0, bad ? "DIFFER" : "agree");
	return !!bad;
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
	a.n = 0;
	n = pk_arch_branch_targets_zydis(code, sizeof(code), 0x1000, push, &a);
	ASSERT_EQ(n, 16, "instructions in the forms (Zydis)");
	if (ASSERT_EQ(a.n, PK_ARRAY_SIZE(want), "branches in the forms (Zydis)"))
		for (size_t i = 0; i < a.n; i++)
			ASSERT_EQ(a.v[i], want[i], "a destination (Zydis)");
	free(a.v);
}

int main(void)
{
	static const char *const libs[] = {
		"/usr/lib/x86_64-linux-gnu/libc.so.6",
		"/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
		"/usr/lib/x86_64-linux-gnu/libm.so.6",
		"/usr/lib/x86_64-linux-gnu/libz.so.1",
		"/usr/lib/x86_64-linux-gnu/libcrypto.so.3",
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
