// SPDX-License-Identifier: MIT
/* test_arch_decode_fast.c - pk_arch_decode()'s table-driven fast path answers exactly what Zydis does, at every byte offset of real libraries' code and on random bytes. */

/*
 * pk_arch_decode() decodes the common instructions itself and passes the
 * rest to Zydis (decode.c); placement proofs rest on its lengths, branch
 * destinations and kinds. Here, at every byte offset of the executable
 * segments of libc, libstdc++, libxml2, liblzma, libz, libm and this test
 * (whichever load), with all the bytes to the segment's end and again cut
 * short (1 to 15 bytes), and on 2^20 random 16-byte strings biased
 * towards prefixes and the opcodes the fast path knows, its answer
 * (return value, length, kind, flags, target) equals
 * pk_arch_decode_zydis()'s. And the fast path is taken: it decodes at
 * least 80 % of the instructions of libc's code walked linearly.
 */
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>

#include "harness.h"
#include "arch/arch.h"

static long long compared, differ;

static void cmp_at(const uint8_t *p, size_t avail, uint64_t rt)
{
	struct pk_insn a, z;
	int ra, rz;

	memset(&a, 0xa5, sizeof(a));
	memset(&z, 0x5a, sizeof(z));
	ra = pk_arch_decode(p, avail, rt, &a);
	rz = pk_arch_decode_zydis(p, avail, rt, &z);
	compared++;
	if (ra == rz && (ra || (a.len == z.len && a.kind == z.kind &&
				a.flags == z.flags && a.target == z.target)))
		return;
	if (differ++ < 20) {
		fprintf(stderr, "differs at %#" PRIx64 " (avail %zu):", rt, avail);
		for (size_t i = 0; i < 15 && i < avail; i++)
			fprintf(stderr, " %02x", p[i]);
		fprintf(stderr, "\n  fast %d len %u kind %u flags %#x target %#" PRIx64
			"\n  zydis %d len %u kind %u flags %#x target %#" PRIx64 "\n",
			ra, a.len, a.kind, a.flags, a.target, rz, z.len, z.kind,
			z.flags, z.target);
	}
}

struct segs {
	const char *want;
	uintptr_t lo[8], hi[8];
	int n;
};

static int find(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct segs *s = arg;

	(void)size;
	if (s->want ? !strstr(info->dlpi_name, s->want) : info->dlpi_name[0])
		return 0;
	for (int i = 0; i < info->dlpi_phnum && s->n < 8; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			s->lo[s->n] = info->dlpi_addr + ph->p_vaddr;
			s->hi[s->n++] = info->dlpi_addr + ph->p_vaddr + ph->p_filesz;
		}
	}
	return 1;
}

static int lib(const char *soname, const char *match)
{
	struct segs s = { .want = match };

	if (soname && !dlopen(soname, RTLD_NOW | RTLD_LOCAL))
		return 0;
	dl_iterate_phdr(find, &s);
	for (int k = 0; k < s.n; k++)
		for (uintptr_t a = s.lo[k]; a < s.hi[k]; a++) {
			size_t room = s.hi[k] - a;

			cmp_at((const uint8_t *)a, room, a);
			cmp_at((const uint8_t *)a, room < a % 15 + 1 ? room : a % 15 + 1, a);
		}
	printf("%s: %d segment(s)\n", soname ? soname : "this test", s.n);
	return s.n;
}

/* Of the instructions a linear decoding of @n bytes at @p meets: how many the fast path decodes. */
static double fast_share(const uint8_t *p, size_t n)
{
	size_t all = 0, fast = 0;
	struct pk_insn in;

	for (size_t at = 0; at < n;) {
		if (pk_arch_decode_fast(p + at, n - at, at, &in)) {
			fast++;
		} else if (pk_arch_decode_zydis(p + at, n - at, at, &in)) {
			at++;
			continue;
		}
		all++;
		at += in.len;
	}
	return all ? (double)fast / (double)all : 0;
}

int main(void)
{
	static const uint8_t pick[] = { 0x66, 0xf2, 0xf3, 0x2e, 0x3e, 0x64, 0x48,
					0x41, 0x4c, 0x0f, 0xff, 0xc7, 0xc6, 0xf6,
					0xf7, 0x8d, 0x90, 0xc3, 0xe8, 0xe9, 0xeb,
					0x74, 0x1f, 0x80, 0x81, 0x83, 0xb8, 0xcc };
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	struct segs libc = { .want = "libc.so" };
	int libs = 0;

	libs += lib(NULL, NULL) > 0;
	libs += lib("libc.so.6", "libc.so") > 0;
	libs += lib("libstdc++.so.6", "libstdc++") > 0;
	libs += lib("libxml2.so.2", "libxml2") > 0;
	libs += lib("liblzma.so.5", "liblzma") > 0;
	libs += lib("libz.so.1", "libz.so") > 0;
	libs += lib("libm.so.6", "libm.so") > 0;
	ASSERT_GE(libs, 2, "libraries compared");
	for (int i = 0; i < (1 << 20); i++) {
		uint8_t b[16];

		for (int k = 0; k < 16; k++) {
			seed ^= seed << 13;
			seed ^= seed >> 7;
			seed ^= seed << 17;
			b[k] = (seed & 0x300) ? (uint8_t)(seed >> 24)
					      : pick[(seed >> 24) % sizeof(pick)];
		}
		cmp_at(b, 16, 0x1000 + (seed & 0xffff));
		cmp_at(b, (seed >> 40) % 16 + 1, 0x1000);
	}
	printf("%lld decodings compared, %lld differ\n", compared, differ);
	ASSERT_EQ(differ, 0, "fast path answers as Zydis");

	dl_iterate_phdr(find, &libc);
	if (libc.n) {
		double f = fast_share((const uint8_t *)libc.lo[0],
				      libc.hi[0] - libc.lo[0]);

		printf("libc, decoded linearly: %.1f %% of its instructions by "
		       "the fast path\n", 100 * f);
		ASSERT_GE(f * 100, 80, "the fast path takes most of libc's code");
	}
	return t_failed ? 1 : 0;
}
