// SPDX-License-Identifier: MIT
/* zload.c - libZydis loaded by the agent itself: its segments mapped and relocated here, outside every link map (0.03 ms, against 0.16 for a dlmopen() namespace with its own libc). */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"

/*
 * libZydis.so is pure code and tables: it allocates nothing, has no TLS,
 * no constructor that matters (frame_dummy and the TM clone table only),
 * and asks libc for memcpy, memset and strlen, plus __assert_fail and
 * __stack_chk_fail on paths that end the process. So the agent maps it
 * like a minimal dynamic linker would, for itself alone:
 *   1. the PT_LOAD segments at their offsets within one reservation;
 *      the tail of the last file page of a writable segment zeroed and
 *      the rest of its memory size anonymous (.bss);
 *   2. its RELA relocations applied: RELATIVE, and 64, GLOB_DAT and
 *      JUMP_SLOT against its own definitions, or against the agent's
 *      memcpy/memset/strlen below for the three libc functions (so
 *      decoding, which runs on probekit's signal path too, never enters
 *      a libc function a probe may be on), libc's for the two fatal
 *      ones, NULL for the weak undefined ones; anything else (another
 *      relocation type, another undefined symbol, TLS) refuses the file;
 *   3. its PT_GNU_RELRO made read-only again, and the five functions
 *      zydis.c calls looked up in its .dynsym.
 * It appears in no link map: dl_iterate_phdr(), dladdr() and a debugger
 * do not see it (a crash inside Zydis shows an anonymous-looking
 * address in a file mapping of libZydis.so), and nothing is registered
 * for unwinding through it (it calls nothing back). If the file cannot
 * be loaded so, zydis.c falls back on dlmopen().
 */
#define PAGE_DOWN(x, pg) ((x) & ~((uintptr_t)(pg) - 1))
#define PAGE_UP(x, pg) PAGE_DOWN((x) + (pg) - 1, pg)

/* glibc's; <assert.h> declares it only without NDEBUG. */
extern void __assert_fail(const char *expr, const char *file,
			  unsigned int line, const char *fn)
	__attribute__((noreturn));

/* The agent's own copies: no libc function a probe may be on. */
static void *z_memcpy(void *d, const void *s, size_t n)
{
	unsigned char *dp = d;
	const unsigned char *sp = s;

	while (n--)
		*dp++ = *sp++;
	return d;
}

static void *z_memset(void *d, int c, size_t n)
{
	unsigned char *dp = d;

	while (n--)
		*dp++ = (unsigned char)c;
	return d;
}

static size_t z_strlen(const char *s)
{
	size_t n = 0;

	while (s[n])
		n++;
	return n;
}

static void *import(const char *name)
{
	if (!strcmp(name, "memcpy"))
		return (void *)z_memcpy;
	if (!strcmp(name, "memset"))
		return (void *)z_memset;
	if (!strcmp(name, "strlen"))
		return (void *)z_strlen;
	if (!strcmp(name, "__assert_fail"))
		return (void *)__assert_fail;
	if (!strcmp(name, "__stack_chk_fail"))
		return (void *)abort;
	return NULL;
}

struct zobj {
	uint8_t *base;		/* where vaddr 0 is */
	size_t span;
	const ElfW(Sym) *sym;
	const char *str;
	size_t nsym;
};

static int prot_of(uint32_t f)
{
	return (f & PF_R ? PROT_READ : 0) | (f & PF_W ? PROT_WRITE : 0) |
	       (f & PF_X ? PROT_EXEC : 0);
}

static int map_segments(struct zobj *z, int fd, const ElfW(Phdr) *ph,
			int n, size_t pg)
{
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	void *r;

	for (int i = 0; i < n; i++) {
		if (ph[i].p_type == PT_TLS || ph[i].p_type == PT_INTERP)
			return -ENOTSUP;
		if (ph[i].p_type != PT_LOAD)
			continue;
		/* mmap() maps whole pages: offset and address agree in one. */
		if ((ph[i].p_offset ^ ph[i].p_vaddr) & (pg - 1) ||
		    ph[i].p_filesz > ph[i].p_memsz)
			return -ENOEXEC;
		if (ph[i].p_vaddr < lo)
			lo = ph[i].p_vaddr;
		if (ph[i].p_vaddr + ph[i].p_memsz > hi)
			hi = ph[i].p_vaddr + ph[i].p_memsz;
	}
	if (lo != 0 || hi <= lo)
		return -ENOEXEC;
	z->span = PAGE_UP(hi, pg);
	r = mmap(NULL, z->span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (r == MAP_FAILED)
		return -ENOMEM;
	z->base = r;
	for (int i = 0; i < n; i++) {
		const ElfW(Phdr) *p = &ph[i];
		uintptr_t start = PAGE_DOWN(p->p_vaddr, pg);
		uintptr_t fend = p->p_vaddr + p->p_filesz;
		uintptr_t mend = PAGE_UP(p->p_vaddr + p->p_memsz, pg);
		/* Writable while relocating; mprotect()ed below. */
		int prot = prot_of(p->p_flags) | PROT_WRITE;

		if (p->p_type != PT_LOAD)
			continue;
		if (p->p_filesz &&
		    mmap(z->base + start, PAGE_UP(fend, pg) - start, prot,
			 MAP_PRIVATE | MAP_FIXED, fd,
			 (off_t)PAGE_DOWN(p->p_offset, pg)) == MAP_FAILED)
			return -errno;
		if (p->p_memsz > p->p_filesz) {
			uintptr_t zpage = PAGE_UP(fend, pg);

			z_memset(z->base + fend, 0, zpage - fend);
			if (mend > zpage &&
			    mmap(z->base + zpage, mend - zpage, prot,
				 MAP_PRIVATE | MAP_FIXED | MAP_ANONYMOUS, -1,
				 0) == MAP_FAILED)
				return -errno;
		}
	}
	return 0;
}

static int relocate(struct zobj *z, const ElfW(Rela) *r, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		/* Not always aligned (packed tables): stored bytewise. */
		uint8_t *at = z->base + r[i].r_offset;
		uint64_t v;
		uint32_t type = ELF64_R_TYPE(r[i].r_info);
		uint32_t si = ELF64_R_SYM(r[i].r_info);
		uintptr_t s = 0;

		if (r[i].r_offset + 8 > z->span)
			return -ENOEXEC;
		if (type == R_X86_64_RELATIVE) {
			v = (uintptr_t)z->base + (uint64_t)r[i].r_addend;
			z_memcpy(at, &v, sizeof(v));
			continue;
		}
		if (type != R_X86_64_64 && type != R_X86_64_GLOB_DAT &&
		    type != R_X86_64_JUMP_SLOT)
			return -ENOTSUP;
		if (si >= z->nsym)
			return -ENOEXEC;
		if (z->sym[si].st_shndx != SHN_UNDEF) {
			s = (uintptr_t)z->base + z->sym[si].st_value;
		} else {
			s = (uintptr_t)import(z->str + z->sym[si].st_name);
			if (!s && ELF64_ST_BIND(z->sym[si].st_info) != STB_WEAK)
				return -ENOTSUP;
		}
		v = s + (type == R_X86_64_64 ? (uint64_t)r[i].r_addend : 0);
		z_memcpy(at, &v, sizeof(v));
	}
	return 0;
}

void *pka_zload_sym(void *obj, const char *name)
{
	struct zobj *z = obj;

	for (size_t i = 1; z && i < z->nsym; i++)
		if (z->sym[i].st_shndx != SHN_UNDEF &&
		    ELF64_ST_TYPE(z->sym[i].st_info) == STT_FUNC &&
		    !strcmp(z->str + z->sym[i].st_name, name))
			return z->base + z->sym[i].st_value;
	return NULL;
}

void *pka_zload(const char *path)
{
	static struct zobj z;
	size_t pg = (size_t)getpagesize(), relasz = 0, jmpsz = 0;
	const ElfW(Rela) *rela = NULL, *jmp = NULL;
	ElfW(Phdr) ph[16];
	const ElfW(Dyn) *dyn = NULL;
	ElfW(Ehdr) eh;
	int fd, err = -ENOEXEC;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
	    eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_type != ET_DYN ||
	    eh.e_machine != EM_X86_64 || eh.e_phentsize != sizeof(ph[0]) ||
	    eh.e_phnum > 16 ||
	    pread(fd, ph, eh.e_phnum * sizeof(ph[0]), (off_t)eh.e_phoff) !=
		    (ssize_t)(eh.e_phnum * sizeof(ph[0])))
		goto fail;
	err = map_segments(&z, fd, ph, eh.e_phnum, pg);
	if (err)
		goto fail;
	for (int i = 0; i < eh.e_phnum; i++)
		if (ph[i].p_type == PT_DYNAMIC && ph[i].p_vaddr < z.span &&
		    ph[i].p_memsz <= z.span - ph[i].p_vaddr)
			dyn = (const ElfW(Dyn) *)(z.base + ph[i].p_vaddr);
	err = -ENOEXEC;
	if (!dyn)
		goto fail;
	for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++) {
		uint8_t *p = z.base + d->d_un.d_ptr;

		/* A table the file points to lies inside what was mapped. */
		if ((d->d_tag == DT_RELA || d->d_tag == DT_JMPREL ||
		     d->d_tag == DT_SYMTAB || d->d_tag == DT_STRTAB) &&
		    d->d_un.d_ptr >= z.span)
			goto fail;
		switch (d->d_tag) {
		case DT_RELA: rela = (const ElfW(Rela) *)p; break;
		case DT_RELASZ: relasz = d->d_un.d_val; break;
		case DT_JMPREL: jmp = (const ElfW(Rela) *)p; break;
		case DT_PLTRELSZ: jmpsz = d->d_un.d_val; break;
		case DT_SYMTAB: z.sym = (const ElfW(Sym) *)p; break;
		case DT_STRTAB: z.str = (const char *)p; break;
		case DT_TEXTREL: goto fail;
		}
	}
	if ((rela && relasz > z.span - (size_t)((uint8_t *)rela - z.base)) ||
	    (jmp && jmpsz > z.span - (size_t)((uint8_t *)jmp - z.base)))
		goto fail;
	z.nsym = pka_dynsym_count(dyn, (uintptr_t)z.base);
	if (!z.sym || !z.str || !z.nsym)
		goto fail;
	err = relocate(&z, rela, rela ? relasz / sizeof(*rela) : 0);
	if (!err)
		err = relocate(&z, jmp, jmp ? jmpsz / sizeof(*jmp) : 0);
	if (err)
		goto fail;
	/* The segments' own protections, then RELRO read-only. */
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < eh.e_phnum; i++) {
			const ElfW(Phdr) *p = &ph[i];
			uintptr_t a = PAGE_DOWN(p->p_vaddr, pg);

			if (!pass && p->p_type == PT_LOAD)
				mprotect(z.base + a,
					 PAGE_UP(p->p_vaddr + p->p_memsz, pg) - a,
					 prot_of(p->p_flags));
			else if (pass && p->p_type == PT_GNU_RELRO &&
				 PAGE_DOWN(p->p_vaddr + p->p_memsz, pg) > a)
				mprotect(z.base + a,
					 PAGE_DOWN(p->p_vaddr + p->p_memsz, pg) - a,
					 PROT_READ);
		}
	close(fd);
	return &z;
fail:
	if (z.base)
		munmap(z.base, z.span);
	memset(&z, 0, sizeof(z));
	close(fd);
	(void)err;
	return NULL;
}
