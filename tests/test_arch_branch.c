/* test_arch_branch.c - the branch index's decoding (pk_arch_branch_targets(), Zydis' minimal mode) finds every direct branch a full Zydis decoding finds, over whole libraries, and every kind of relative branch. */

/*
 * pk_arch_branch_targets() decodes in Zydis' minimal mode and takes any
 * relative raw immediate for a branch's. Over every executable section of
 * libc, libstdc++, libm, libz, libcrypto and this test (and, unless
 * PK_TEST_QUICK is set or the build is sanitized, a libLLVM), walked
 * linearly as the scan walks (a byte that does not decode stepped over,
 * data in text included), it decodes as many instructions as a full Zydis
 * decoding (operands and all) and passes on exactly the destinations of
 * the instructions that decoding calls branches with a relative immediate
 * operand, in the same order. Then a hand-made sequence of every relative
 * branch form gives its known destinations.
 */
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdint.h>

#include <Zydis/Zydis.h>

#include "harness.h"
#include "arch/arch.h"

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
 * The reference: a full decoding of @len bytes at @b (running at @runtime),
 * the same linear walk, every direct branch's destination into @l
 * (*@bad set where a relative operand is not a jmp, jcc, call's).
 * Return: the number of instructions decoded.
 */
static size_t full_walk(const uint8_t *b, size_t len, uint64_t runtime,
			struct list *l, int *bad)
{
	ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
	ZydisDecodedInstruction in;
	ZydisDecoder dec;
	size_t n = 0;

	ZydisDecoderInit(&dec, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
	for (size_t at = 0; at < len;) {
		if (ZYAN_FAILED(ZydisDecoderDecodeFull(&dec, b + at, len - at,
						       &in, ops))) {
			at++;
			continue;
		}
		n++;
		for (unsigned int i = 0; i < in.operand_count_visible; i++) {
			ZyanU64 t;

			if (ops[i].type != ZYDIS_OPERAND_TYPE_IMMEDIATE ||
			    !ops[i].imm.is_relative)
				continue;
			/* A relative immediate is a branch's (xbegin: no branch type). */
			if ((in.meta.category != ZYDIS_CATEGORY_COND_BR &&
			     in.meta.category != ZYDIS_CATEGORY_UNCOND_BR &&
			     in.meta.category != ZYDIS_CATEGORY_CALL) ||
			    ZYAN_FAILED(ZydisCalcAbsoluteAddress(&in, &ops[i],
								  runtime + at, &t))) {
				fprintf(stderr, "%#lx: a relative operand of %s\n",
					(unsigned long)(runtime + at),
					ZydisMnemonicGetString(in.mnemonic));
				*bad = 1;
				t = 0;
			}
			push(t, l);
		}
		at += in.length;
	}
	return n;
}

/*
 * Every executable section of @path, through both. Returns 0 (the same),
 * 1 (differ), -1 (file unreadable).
 */
static int one_file(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), bad = 0;
	size_t insns = 0, bytes = 0, branches = 0;
	struct list want = { 0 }, got = { 0 };
	Elf_Scn *scn = NULL;
	Elf *e;

	if (fd < 0)
		return -1;
	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	while (e && (scn = elf_nextscn(e, scn))) {
		size_t nw, ng;
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
		    !(sh.sh_flags & SHF_EXECINSTR))
			continue;
		d = elf_rawdata(scn, NULL);
		if (!d || !d->d_buf)
			continue;
		want.n = got.n = 0;
		nw = full_walk(d->d_buf, d->d_size, sh.sh_addr, &want, &bad);
		ng = pk_arch_branch_targets(d->d_buf, d->d_size, sh.sh_addr,
					    push, &got);
		if (nw != ng || want.n != got.n ||
		    memcmp(want.v, got.v, want.n * sizeof(*want.v))) {
			size_t k = 0;

			while (k < want.n && k < got.n && want.v[k] == got.v[k])
				k++;
			fprintf(stderr, "%s: section at %#lx: %zu/%zu instructions, "
				"%zu/%zu branches, first difference at branch %zu\n",
				path, (unsigned long)sh.sh_addr, nw, ng, want.n,
				got.n, k);
			bad = 1;
		}
		insns += nw;
		branches += want.n;
		bytes += d->d_size;
	}
	elf_end(e);
	close(fd);
	free(want.v);
	free(got.v);
	printf("%s: %zu bytes, %zu instructions, %zu direct branches: %s\n",
	       path, bytes, insns, branches, bad ? "DIFFER" : "the same");
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
