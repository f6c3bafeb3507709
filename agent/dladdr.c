// SPDX-License-Identifier: MIT
/* dladdr.c - the agent's dladdr()/dladdr1(): glibc's scans every symbol of the object each call, 70 calls on libc before main (0.8 ms). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"

/*
 * The sig layer's constructor asks dladdr() which object each libc
 * function it resolves lies in (about 20 calls), and, only where libc has
 * no DT_GNU_HASH to look them up in (spawn_init()), dladdr1() for the
 * extent of about 30 libc functions (src/sig/interpose.c): glibc answers
 * each by walking all of libc's symbols, 10 us a call, most of what an
 * idle agent cost a process. The agent's objects are linked with
 * --wrap=dladdr,--wrap=dladdr1 (agent/CMakeLists.txt) to these:
 *   dladdr()  the object only, from dl_iterate_phdr(): dli_fname and
 *             dli_fbase (where its mapping starts, as glibc's); dli_sname
 *             and dli_saddr NULL, as glibc leaves them for an address no
 *             symbol covers. The library's one caller compares
 *             dli_fbase only (src/sig/interpose.c, resolve()).
 *   dladdr1() with RTLD_DL_SYMENT: a symbol that starts exactly at the
 *             address (the first such in .dynsym), from a hash by
 *             address of the last object asked about (one pass over its
 *             .dynsym, kept until another object is asked about: the
 *             index is the agent's, ~50 KB for libc); else (an IFUNC's
 *             implementation, which has no dynamic symbol: strlen's
 *             __strlen_avx2) the symbol covering it by glibc's rule, in
 *             one pass over the same .dynsym, not glibc's walk of every
 *             hash chain (10 us each, 4 such before main); any other
 *             flag: glibc's. A .dynsym mapped and never unmapped
 *             under a running constructor: the library asks before main
 *             only (spawn_init()).
 */
int __real_dladdr(const void *addr, Dl_info *info);
int __real_dladdr1(const void *addr, Dl_info *info, void **extra, int flags);
int __wrap_dladdr(const void *addr, Dl_info *info);
int __wrap_dladdr1(const void *addr, Dl_info *info, void **extra, int flags);

struct find {
	uintptr_t addr;
	Dl_info *info;
	const ElfW(Sym) *sym;
	const ElfW(Sym) *cover;	/* exact_sym()'s fallback */
	int want_sym, found;
	int none;		/* indexed, and no symbol covers addr */
};

/* Symbols in .dynsym: from DT_GNU_HASH's last chain, or DT_HASH's nchain. */
size_t pka_dynsym_count(const ElfW(Dyn) *d, uintptr_t bias)
{
	const uint32_t *gnu = NULL, *sysv = NULL;

	for (; d->d_tag != DT_NULL; d++) {
		/* ld.so relocated these in place: absolute (the vdso: not). */
		uintptr_t p = d->d_un.d_ptr;

		if (p < bias)
			p += bias;
		if (d->d_tag == DT_GNU_HASH)
			gnu = (const uint32_t *)p;
		else if (d->d_tag == DT_HASH)
			sysv = (const uint32_t *)p;
	}
	if (gnu) {
		uint32_t nb = gnu[0], base = gnu[1], words = gnu[2], last = 0;
		const uint32_t *bucket = gnu + 4 + words * (sizeof(ElfW(Addr)) / 4);
		const uint32_t *chain = bucket + nb;

		for (uint32_t i = 0; i < nb; i++)
			if (bucket[i] > last)
				last = bucket[i];
		if (last < base)
			return base;
		while (!(chain[last - base] & 1))
			last++;
		return last + 1;
	}
	return sysv ? sysv[1] : 0;
}

/*
 * The last object dladdr1() was asked about: its .dynsym's defined
 * symbols hashed by address (open addressing, indexes + 1, 0 empty), so
 * that 30 questions about libc cost one pass over its symbols.
 */
static struct {
	uintptr_t bias;
	const ElfW(Sym) *tab;
	const char *str;
	uint32_t *slot;
	size_t mask;
	size_t n;		/* symbols in tab */
} last;

static size_t addr_hash(uintptr_t a, size_t mask)
{
	return (size_t)((a * 0x9e3779b97f4a7c15ull) >> 20) & mask;
}

static int index_object(struct dl_phdr_info *info)
{
	const ElfW(Dyn) *dyn = NULL;
	const ElfW(Sym) *tab = NULL;
	const char *str = NULL;
	size_t n, cap = 16;
	uint32_t *slot;

	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)(info->dlpi_addr +
						  info->dlpi_phdr[i].p_vaddr);
	if (!dyn)
		return -1;
	for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++) {
		uintptr_t p = d->d_un.d_ptr;

		if (p < info->dlpi_addr)
			p += info->dlpi_addr;
		if (d->d_tag == DT_SYMTAB)
			tab = (const ElfW(Sym) *)p;
		else if (d->d_tag == DT_STRTAB)
			str = (const char *)p;
	}
	n = pka_dynsym_count(dyn, info->dlpi_addr);
	if (!tab || !str || !n || n > (1u << 24))
		return -1;
	while (cap < 2 * n)
		cap *= 2;
	slot = calloc(cap, sizeof(*slot));
	if (!slot)
		return -1;
	for (size_t i = 1; i < n; i++) {
		const ElfW(Sym) *s = &tab[i];
		size_t h;

		if (s->st_shndx == SHN_UNDEF ||
		    ELF64_ST_TYPE(s->st_info) == STT_TLS)
			continue;
		h = addr_hash(info->dlpi_addr + s->st_value, cap - 1);
		while (slot[h])
			h = (h + 1) & (cap - 1);
		slot[h] = (uint32_t)i + 1;
	}
	free(last.slot);
	last.bias = info->dlpi_addr;
	last.tab = tab;
	last.str = str;
	last.slot = slot;
	last.mask = cap - 1;
	last.n = n;
	return 0;
}

/* The first .dynsym entry that starts exactly at f->addr, as glibc's order. */
static void exact_sym(struct dl_phdr_info *info, struct find *f)
{
	const ElfW(Sym) *best = NULL;

	if ((!last.slot || last.bias != info->dlpi_addr) &&
	    index_object(info))
		return;
	for (size_t h = addr_hash(f->addr, last.mask); last.slot[h];
	     h = (h + 1) & last.mask) {
		const ElfW(Sym) *s = &last.tab[last.slot[h] - 1];

		if (last.bias + s->st_value == f->addr && (!best || s < best))
			best = s;
	}
	/*
	 * None starts there: the defined one (not TLS, not absolute) that
	 * covers it, the highest-starting such, as glibc's _dl_addr()
	 * chooses; a symbol without a size covers its own address only.
	 */
	for (size_t i = 1; !best && i < last.n; i++) {
		const ElfW(Sym) *s = &last.tab[i];
		uintptr_t a = last.bias + s->st_value;

		/* An undefined one with a value (a PLT entry): that only. */
		int exact = !s->st_size || s->st_shndx == SHN_UNDEF;

		if (ELF64_ST_TYPE(s->st_info) == STT_TLS ||
		    s->st_shndx == SHN_ABS ||
		    (s->st_shndx == SHN_UNDEF && !s->st_value) ||
		    f->addr < a || (exact ? f->addr != a :
					    f->addr - a >= s->st_size))
			continue;
		if (!f->cover || f->cover->st_value < s->st_value)
			f->cover = s;
	}
	if (!best && f->cover) {
		f->sym = f->cover;
		f->info->dli_sname = last.str + f->cover->st_name;
		f->info->dli_saddr = f->cover->st_shndx == SHN_UNDEF ? NULL :
			(void *)(last.bias + f->cover->st_value);
		return;
	}
	if (!best) {
		f->none = 1;	/* glibc's answer too: no symbol */
		return;
	}
	f->sym = best;
	f->info->dli_sname = last.str + best->st_name;
	f->info->dli_saddr = (void *)f->addr;
}

/* Where the object's mapping starts: glibc's dli_fbase (l_map_start). */
static uintptr_t map_start(const struct dl_phdr_info *info)
{
	uintptr_t lo = UINTPTR_MAX, page = (uintptr_t)getpagesize();

	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_LOAD &&
		    info->dlpi_phdr[i].p_vaddr < lo)
			lo = info->dlpi_phdr[i].p_vaddr;
	return info->dlpi_addr + (lo == UINTPTR_MAX ? 0 : lo & ~(page - 1));
}

static int find_obj(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct find *f = arg;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type != PT_LOAD || f->addr < lo ||
		    f->addr - lo >= ph->p_memsz)
			continue;
		f->found = 1;
		f->info->dli_fname = info->dlpi_name;
		f->info->dli_fbase = (void *)map_start(info);
		f->info->dli_sname = NULL;
		f->info->dli_saddr = NULL;
		if (f->want_sym)
			exact_sym(info, f);
		return 1;
	}
	return 0;
}

int __wrap_dladdr(const void *addr, Dl_info *info)
{
	struct find f = { .addr = (uintptr_t)addr, .info = info };

	dl_iterate_phdr(find_obj, &f);
	return f.found;
}

int __wrap_dladdr1(const void *addr, Dl_info *info, void **extra, int flags)
{
	struct find f = { .addr = (uintptr_t)addr, .info = info,
			  .want_sym = 1 };

	if (flags != RTLD_DL_SYMENT)
		return __real_dladdr1(addr, info, extra, flags);
	dl_iterate_phdr(find_obj, &f);
	if (f.found && f.none) {
		*extra = NULL;
		return 1;
	}
	if (!f.found || !f.sym)
		return __real_dladdr1(addr, info, extra, flags);
	*extra = (void *)f.sym;
	return 1;
}

/* The wrappers have glibc's types: a changed declaration fails here. */
static __typeof__(dladdr) *const chk_dladdr __attribute__((unused)) =
	__wrap_dladdr;
static __typeof__(dladdr1) *const chk_dladdr1 __attribute__((unused)) =
	__wrap_dladdr1;
