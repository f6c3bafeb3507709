// SPDX-License-Identifier: MIT
/* xref.c - the index of every direct branch destination in a loaded object (design: xref.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "arch/arch.h"
#include "internal.h"
#include "probe/xref.h"
#include "sym/sym.h"
#include "util/maps.h"

#define CACHE_MAX 64		/* indexes kept; the least recently used goes */

/* An executable section: where its bytes are in the file. */
struct xsec {
	uint64_t addr, size, offset;
};

struct pk_xref {
	struct pk_xref *next;	/* the cache's list, most recent first */
	uintptr_t bias;
	dev_t dev;		/* the file's identity when it was indexed */
	ino_t ino;
	off_t size;
	struct timespec mtime;
	int err;		/* 0, or why there is no index (cached too) */
	uint32_t *t;		/* distinct rel32 destinations - bias, sorted */
	size_t n;
	uint32_t *s;		/* decoding start points, sorted */
	uint32_t *d;		/* code addresses data holds - bias, sorted */
	size_t nd;
	size_t ns;
	struct xsec *sec;	/* sorted by address */
	size_t nsec;
	struct pk_xref_stats st;
	/*
	 * The loaded object this index was last verified to be of (its file's
	 * identity stat(2)ed against the index's) while dlpi_adds was
	 * seen_adds - 1: until another object is loaded, the object at bias
	 * stays that one, and queries skip the stat. 0: not since. Under
	 * xref_lock.
	 */
	unsigned long long seen_adds;
	const void *seen_phdr;	/* and that object's dlpi_phdr */
	/*
	 * The rel8 candidates (rel8_candidate()) of the whole object, built
	 * once RC_AFTER checks have asked for them (arming a batch): bit
	 * t - lo set where a byte of the code would be the opcode of a rel8
	 * branch landing on t. NULL: not built (the file is read instead).
	 */
	uint8_t *rc;
	uint64_t rc_lo, rc_hi;
	unsigned int rc_asks;
};

/* ------------------------------------------------------------ sorting */

#define RADIX 256

/* LSD radix sort of @n 32-bit keys in four 8-bit passes, through @tmp. */
static void radix_sort(uint32_t *a, uint32_t *tmp, size_t n, size_t *count)
{
	for (int shift = 0; shift < 32; shift += 8) {
		size_t sum = 0;

		memset(count, 0, RADIX * sizeof(*count));
		for (size_t i = 0; i < n; i++)
			count[(a[i] >> shift) & (RADIX - 1)]++;
		for (size_t k = 0; k < RADIX; k++) {
			size_t c = count[k];

			count[k] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++)
			tmp[count[(a[i] >> shift) & (RADIX - 1)]++] = a[i];
		memcpy(a, tmp, n * sizeof(*a));
	}
}

/* Sort and drop duplicates; the new count. */
static size_t sort_unique(uint32_t *a, size_t n, size_t *peak, size_t held)
{
	uint32_t *tmp;
	size_t *count, m = 0;

	if (n < 2)
		return n;
	tmp = malloc(n * sizeof(*tmp));
	count = malloc(RADIX * sizeof(*count));
	if (tmp && count) {
		radix_sort(a, tmp, n, count);
		if (*peak < held + n * sizeof(*tmp) + RADIX * sizeof(*count))
			*peak = held + n * sizeof(*tmp) + RADIX * sizeof(*count);
	}
	free(tmp);
	free(count);
	if (!tmp || !count)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!m || a[m - 1] != a[i])
			a[m++] = a[i];
	return m;
}

/* ------------------------------------------------------------ building */

struct sec {
	uint64_t addr, size, offset;
	const uint8_t *bytes;
};

struct build {
	struct sec *sec;
	size_t nsec, sec_cap;
	uint64_t lo, hi;	/* the executable sections' span */
	uint32_t *starts;	/* decoding start points */
	size_t nstarts, starts_cap;
	uint32_t *t;		/* destinations */
	size_t nt, t_cap;
	int oom;
};

static void add_start(struct build *b, uint64_t addr)
{
	if (addr < b->lo || addr >= b->hi)
		return;
	if (PK_GROW(&b->starts, &b->starts_cap, b->nstarts + 1)) {
		b->oom = 1;
		return;
	}
	b->starts[b->nstarts++] = (uint32_t)addr;
}

static void emit(uint64_t target, void *ctx)
{
	struct build *b = ctx;

	/* Destinations outside the object's code cannot be probe points here. */
	if (target < b->lo || target >= b->hi)
		return;
	if (b->nt == b->t_cap && PK_GROW(&b->t, &b->t_cap, b->nt + 1)) {
		b->oom = 1;
		return;
	}
	b->t[b->nt++] = (uint32_t)target;
}

/* Function starts from a symbol table: where decoding is in step. */
static void symbol_starts(struct build *b, Elf *e, Elf_Scn *scn,
			  const GElf_Shdr *sh)
{
	Elf_Data *d = elf_getdata(scn, NULL);

	(void)e;
	for (size_t i = 0; d && sh->sh_entsize &&
			   i < sh->sh_size / sh->sh_entsize; i++) {
		GElf_Sym s;
		int type;

		if (!gelf_getsym(d, (int)i, &s) || s.st_shndx == SHN_UNDEF)
			continue;
		type = GELF_ST_TYPE(s.st_info);
		if (type == STT_FUNC || type == STT_GNU_IFUNC)
			add_start(b, s.st_value);
	}
}

#define ONES 0x0101010101010101ull

/* Whether some byte of @w may be zero (never a false "no"). */
static uint64_t zero_byte(uint64_t w)
{
	return (w - ONES) & ~w & (ONES << 7);
}

/* Whether some byte of @w is e8, e9, 0f or c7 (or, rarely, a false yes). */
static int may_begin(uint64_t w)
{
	return zero_byte((w | ONES) ^ (ONES * 0xe9)) ||
	       zero_byte(w ^ (ONES * 0x0f)) || zero_byte(w ^ (ONES * 0xc7));
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

/*
 * Function starts from .eh_frame_hdr's binary search table (one entry per
 * FDE): in the usual encoding only (version 1, a 4-byte eh_frame_ptr,
 * fde_count udata4, table datarel sdata4); anything else adds none.
 */
static void eh_starts(struct build *b, Elf_Scn *scn, const GElf_Shdr *sh)
{
	Elf_Data *d = elf_rawdata(scn, NULL);
	const uint8_t *p;
	size_t size, count;

	if (!d || !d->d_buf)
		return;
	p = d->d_buf;
	size = d->d_size;
	if (size < 12 || p[0] != 1 || (p[1] & 0x07) != 0x03 ||
	    p[2] != 0x03 /* DW_EH_PE_udata4 */ ||
	    p[3] != 0x3b /* DW_EH_PE_datarel | DW_EH_PE_sdata4 */) {
		pk_dbg("xref: .eh_frame_hdr in an encoding not read here: "
		       "function starts from symbols only");
		return;
	}
	count = get32(p + 8);
	if (count > (size - 12) / 8)
		count = (size - 12) / 8;
	for (size_t i = 0; i < count; i++)
		add_start(b, sh->sh_addr +
			     (uint64_t)(int64_t)(int32_t)get32(p + 12 + 8 * i));
}

/* ------------------------- entries that no branch instruction names */

struct asec {
	uint64_t addr, size;
	const uint8_t *bytes;
};

/* The allocated sections with file bytes, for reading by address. */
static size_t alloc_secs(Elf *e, struct asec **out)
{
	struct asec *a = NULL;
	size_t n = 0, cap = 0;
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
		    !(sh.sh_flags & SHF_ALLOC) || !sh.sh_size)
			continue;
		d = elf_rawdata(scn, NULL);
		if (!d || !d->d_buf || d->d_size < sh.sh_size)
			continue;
		if (PK_GROW(&a, &cap, n + 1))
			break;
		a[n++] = (struct asec){ sh.sh_addr, sh.sh_size, d->d_buf };
	}
	*out = a;
	return n;
}

/* The file's bytes at address @addr, and how many follow in one section. */
static const uint8_t *at_addr(const struct asec *a, size_t n, uint64_t addr,
			      size_t *room)
{
	for (size_t i = 0; i < n; i++)
		if (addr >= a[i].addr && addr < a[i].addr + a[i].size) {
			*room = (size_t)(a[i].addr + a[i].size - addr);
			return a[i].bytes + (addr - a[i].addr);
		}
	*room = 0;
	return NULL;
}

#define XTABLE_MAX 65536	/* a jump table's entries read, at most */

/*
 * Jump tables of int32 offsets from their own address (GCC's and clang's
 * PIC and PIE tables: lea T(%rip),%b; movslq (%b,%i,4),%r; add %b,%r;
 * jmp *%r): every lea T(%rip) of a 64-bit register in the code, T read as
 * such a table for as long as each entry names the object's code. Their
 * entries land in other functions too (GCC moves cases into f.cold, a
 * symbol and FDE of its own, whose scan sees no table). No decoding: a
 * superset (a lea of anything else reads as a table of junk, which adds
 * destinations, refusing jump probes, never hiding one).
 */
static int u64_cmp(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return (a > b) - (a < b);
}

static void table_entries(struct build *b, const struct asec *a, size_t na)
{
	uint64_t *ts = NULL;
	size_t nt = 0, cap = 0;

	for (size_t i = 0; i < b->nsec; i++) {
		const struct sec *sc = &b->sec[i];
		const uint8_t *p = sc->bytes;

		for (size_t j = 0; j + 7 <= sc->size; j++) {
			const uint8_t *m;
			uint64_t t;

			/* The lea's opcode byte: memchr skips to the next. */
			m = memchr(p + j + 1, 0x8d, sc->size - j - 1);
			if (!m || (size_t)(m - p) + 6 > sc->size)
				break;
			j = (size_t)(m - p) - 1;
			if ((p[j] != 0x48 && p[j] != 0x4c) || p[j + 1] != 0x8d ||
			    (p[j + 2] & 0xc7) != 0x05)
				continue;
			t = sc->addr + j + 7 +
			    (uint64_t)(int64_t)(int32_t)get32(p + j + 3);
			/* Tables are 4-aligned data, never in the code. */
			if ((t & 3) || (t >= b->lo && t < b->hi))
				continue;
			if (PK_GROW(&ts, &cap, nt + 1)) {
				b->oom = 1;
				free(ts);
				return;
			}
			ts[nt++] = t;
		}
	}
	qsort(ts, nt, sizeof(*ts), u64_cmp);
	/* Each table up to the next one (GCC and clang put them end to end). */
	for (size_t i = 0; i < nt; i++) {
		uint64_t t = ts[i], stop = UINT64_MAX;
		const uint8_t *q;
		size_t room;

		if (i && ts[i - 1] == t)
			continue;
		for (size_t k = i + 1; k < nt; k++)
			if (ts[k] != t) {
				stop = ts[k];
				break;
			}
		q = at_addr(a, na, t, &room);
		for (size_t k = 0; q && k + 4 <= room && k / 4 < XTABLE_MAX &&
				   t + k < stop; k += 4) {
			uint64_t d = t + (uint64_t)(int64_t)(int32_t)get32(q + k);

			if (d < b->lo || d >= b->hi)
				break;
			emit(d, b);
		}
	}
	free(ts);
}

struct pads {
	struct build *b;
	const struct asec *a;
	size_t na;
};

static void pad_emit(uint64_t pad, void *ctx)
{
	emit(pad, ((struct pads *)ctx)->b);
}

/* One FDE's LSDA: its landing pads, or (not readable) all its bytes. */
static int lsda_pads(uint64_t start, uint64_t range, uint64_t lsda,
		     void *ctx)
{
	struct pads *pc = ctx;
	const uint8_t *q;
	size_t room;

	q = at_addr(pc->a, pc->na, lsda, &room);
	if (q && !pk_eh_landing_pads(q, room, lsda, start, pad_emit, pc))
		return 0;
	pk_dbg("xref: the LSDA of the function at 0x%" PRIx64 " cannot be "
	       "read: no jump probe in it", start);
	for (uint64_t x = start + 1; x < start + range && !pc->b->oom; x++)
		emit(x, pc->b);
	return 0;
}

/*
 * C++ landing pads (and any other personality's LSDA call sites): the
 * unwinder jumps to them from .gcc_except_table's function-relative
 * offsets, which neither a branch nor a relocation names. Where
 * .eh_frame cannot be read through, every byte of the code is a
 * destination (no jump probe in this object, rather than a wrong one).
 */
static void eh_pads(struct build *b, Elf *e, const struct asec *a, size_t na)
{
	struct pads pc = { b, a, na };
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	if (elf_getshdrstrndx(e, &shstrndx))
		return;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		const char *nm;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS)
			continue;
		nm = elf_strptr(e, shstrndx, sh.sh_name);
		if (!nm || strcmp(nm, ".eh_frame"))
			continue;
		d = elf_rawdata(scn, NULL);
		if (!d || !d->d_buf)
			continue;
		if (pk_eh_each_lsda(d->d_buf, d->d_size, sh.sh_addr, lsda_pads,
				    &pc) == -EINVAL) {
			pk_dbg("xref: .eh_frame not read through: landing pads "
			       "unknown, no jump probe in this object");
			b->oom = 1;	/* refused as if no index */
		}
	}
}

static int sec_cmp(const void *a, const void *b)
{
	const struct xsec *x = a, *y = b;

	return (x->addr > y->addr) - (x->addr < y->addr);
}

/*
 * The code addresses the object's data holds, for pk_xref_data_in(): the
 * targets of its dynamic relocations (R_X86_64_RELATIVE: the addend; a
 * packed RELR one: the word at its place; R_X86_64_64, GLOB_DAT,
 * JUMP_SLOT: the symbol's value plus the addend),
 * and in an executable that is not position independent (no relocation
 * for its own pointers) every aligned 8-byte word of its other allocated
 * sections. Only those in the code's span [@lo, @hi) are kept.
 */
#ifndef SHT_RELR
#define SHT_RELR 19
#endif

/* The 8-byte word the file holds at address @a, or 0. */
static uint64_t file_word(Elf *e, uint64_t a)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;
		uint64_t w;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
		    !(sh.sh_flags & SHF_ALLOC) || a < sh.sh_addr ||
		    a + 8 > sh.sh_addr + sh.sh_size)
			continue;
		data = elf_rawdata(scn, NULL);
		if (!data || !data->d_buf || a - sh.sh_addr + 8 > data->d_size)
			return 0;
		memcpy(&w, (const uint8_t *)data->d_buf + (a - sh.sh_addr), 8);
		return w;
	}
	return 0;
}

static int add_ptr(uint32_t **d, size_t *n, size_t *cap, uint64_t t,
		   uint64_t lo, uint64_t hi)
{
	if (t < lo || t >= hi)
		return 0;
	if (PK_GROW(d, cap, *n + 1))
		return -ENOMEM;
	(*d)[(*n)++] = (uint32_t)t;
	return 0;
}

/*
 * SHT_RELR (-z pack-relative-relocs, glibc 2.36's libc): the places of
 * relative relocations, whose addends are the words there in the file.
 */
static int relr_pointers(Elf *e, Elf_Scn *scn, const GElf_Shdr *sh,
			 uint32_t **d, size_t *n, size_t *cap, uint64_t lo,
			 uint64_t hi)
{
	Elf_Data *data = elf_rawdata(scn, NULL);
	uint64_t where = 0;

	for (size_t i = 0; data && data->d_buf && (i + 1) * 8 <= data->d_size &&
			   (i + 1) * 8 <= sh->sh_size; i++) {
		uint64_t ent;

		memcpy(&ent, (const uint8_t *)data->d_buf + 8 * i, 8);
		if (!(ent & 1)) {
			where = ent;
			if (add_ptr(d, n, cap, file_word(e, where), lo, hi))
				return -ENOMEM;
			where += 8;
			continue;
		}
		for (int b = 1; b < 64; b++)
			if (((ent >> b) & 1) &&
			    add_ptr(d, n, cap, file_word(e, where + 8 * (b - 1)),
				    lo, hi))
				return -ENOMEM;
		where += 63 * 8;
	}
	return 0;
}

static int data_pointers(Elf *e, uint64_t lo, uint64_t hi, struct pk_xref *x)
{
	uint32_t *d = NULL;
	size_t n = 0, cap = 0;
	Elf_Scn *scn = NULL;
	GElf_Ehdr eh;
	int exec;

	if (!gelf_getehdr(e, &eh))
		return -ENOEXEC;
	exec = eh.e_type == ET_EXEC;
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_RELR) {
			if (relr_pointers(e, scn, &sh, &d, &n, &cap, lo, hi)) {
				free(d);
				return -ENOMEM;
			}
			continue;
		}
		if (sh.sh_type == SHT_RELA && sh.sh_entsize) {
			Elf_Scn *ss = elf_getscn(e, sh.sh_link);
			Elf_Data *sd = ss ? elf_getdata(ss, NULL) : NULL;

			data = elf_getdata(scn, NULL);
			for (size_t i = 0; data && i < sh.sh_size / sh.sh_entsize; i++) {
				GElf_Rela r;
				GElf_Sym sym;
				uint64_t t;

				if (!gelf_getrela(data, (int)i, &r))
					continue;
				switch (GELF_R_TYPE(r.r_info)) {
				case R_X86_64_RELATIVE:
					t = (uint64_t)r.r_addend;
					break;
				case R_X86_64_64:
				case R_X86_64_GLOB_DAT:
				case R_X86_64_JUMP_SLOT:
					if (!sd || !gelf_getsym(sd, (int)GELF_R_SYM(r.r_info),
								&sym) ||
					    sym.st_shndx == SHN_UNDEF)
						continue;
					t = sym.st_value + (uint64_t)r.r_addend;
					break;
				default:
					continue;
				}
				if (t < lo || t >= hi)
					continue;
				if (PK_GROW(&d, &cap, n + 1)) {
					free(d);
					return -ENOMEM;
				}
				d[n++] = (uint32_t)t;
			}
			continue;
		}
		if (!exec || sh.sh_type != SHT_PROGBITS ||
		    !(sh.sh_flags & SHF_ALLOC) || (sh.sh_flags & SHF_EXECINSTR))
			continue;
		data = elf_rawdata(scn, NULL);
		for (size_t o = (8 - (sh.sh_addr & 7)) & 7;
		     data && data->d_buf && o + 8 <= data->d_size; o += 8) {
			uint64_t w;

			memcpy(&w, (const uint8_t *)data->d_buf + o, 8);
			if (w < lo || w >= hi)
				continue;
			if (PK_GROW(&d, &cap, n + 1)) {
				free(d);
				return -ENOMEM;
			}
			d[n++] = (uint32_t)w;
		}
	}
	{
		size_t peak = 0;

		x->nd = sort_unique(d, n, &peak, 0);
		if (n && !x->nd) {
			free(d);
			return -ENOMEM;
		}
	}
	x->d = d;
	return 0;
}

/*
 * Index the file open at @fd. @id/@id_len: the loaded object's build id,
 * which the file's must equal (@id_len 0: not checked).
 */
static int build_fd(int fd, const uint8_t *id, size_t id_len,
		    struct pk_xref *x)
{
	struct build b = { .lo = UINT64_MAX };
	uint8_t fid[PK_BUILD_ID_MAX];
	size_t fid_len = 0, peak;
	Elf_Scn *scn = NULL;
	Elf *e;
	int err = 0;

	elf_version(EV_CURRENT);
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e || elf_kind(e) != ELF_K_ELF) {
		elf_end(e);
		return -ENOEXEC;
	}
	/* The executable sections, and the file's build id. */
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_NOTE && !fid_len) {
			d = elf_rawdata(scn, NULL);
			if (d && d->d_buf)
				fid_len = pk_note_build_id(d->d_buf, d->d_size, fid);
		}
		if (sh.sh_type != SHT_PROGBITS || !(sh.sh_flags & SHF_ALLOC) ||
		    !(sh.sh_flags & SHF_EXECINSTR) || !sh.sh_size)
			continue;
		d = elf_rawdata(scn, NULL);
		if (!d || !d->d_buf || d->d_size < sh.sh_size)
			continue;
		if (PK_GROW(&b.sec, &b.sec_cap, b.nsec + 1)) {
			err = -ENOMEM;
			goto out;
		}
		b.sec[b.nsec++] = (struct sec){ sh.sh_addr, sh.sh_size,
						sh.sh_offset, d->d_buf };
		if (sh.sh_addr < b.lo)
			b.lo = sh.sh_addr;
		if (sh.sh_addr + sh.sh_size > b.hi)
			b.hi = sh.sh_addr + sh.sh_size;
	}
	if (id_len && (fid_len != id_len || memcmp(fid, id, id_len))) {
		err = -ENOEXEC;		/* replaced on disk since loaded */
		goto out;
	}
	if (!b.nsec) {
		err = -ENOEXEC;
		goto out;
	}
	if (b.hi > UINT32_MAX) {
		err = -E2BIG;
		goto out;
	}
	/* Where decoding starts: sections, symbols, FDEs. */
	for (size_t i = 0; i < b.nsec; i++)
		add_start(&b, b.sec[i].addr);
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		size_t shstrndx;
		const char *nm;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_SYMTAB || sh.sh_type == SHT_DYNSYM) {
			symbol_starts(&b, e, scn, &sh);
			continue;
		}
		if (elf_getshdrstrndx(e, &shstrndx))
			continue;
		nm = elf_strptr(e, shstrndx, sh.sh_name);
		if (nm && !strcmp(nm, ".eh_frame_hdr"))
			eh_starts(&b, scn, &sh);
	}
	if (b.oom) {
		err = -ENOMEM;
		goto out;
	}
	peak = b.starts_cap * sizeof(*b.starts);
	b.nstarts = sort_unique(b.starts, b.nstarts, &peak, peak);
	if (!b.nstarts) {
		err = -ENOMEM;
		goto out;
	}
	x->st.starts = b.nstarts;
	/*
	 * Every byte that could begin a jmp, call, jcc or xbegin rel32 (e8,
	 * e9, 0f 8x, c7 f8) and whose destination would be in the code: a
	 * superset of the rel32 branches a decoding finds, with no decoding.
	 * rel8 branches are decoded exactly, near each probe, at its check.
	 */
	for (size_t i = 0; i < b.nsec; i++) {
		const struct sec *sc = &b.sec[i];
		const uint8_t *p = sc->bytes;

		for (size_t j = 0; j + 5 <= sc->size; j++) {
			size_t at;

			/* Eight bytes at a time while none can begin one. */
			if ((j & 7) == 0 && j + 8 <= sc->size) {
				uint64_t w;

				memcpy(&w, p + j, 8);
				if (!may_begin(w)) {
					j += 7;
					continue;
				}
			}
			if (p[j] == 0xe8 || p[j] == 0xe9)
				at = j + 1;
			else if (j + 6 <= sc->size &&
				 ((p[j] == 0x0f && (p[j + 1] & 0xf0) == 0x80) ||
				  (p[j] == 0xc7 && p[j + 1] == 0xf8)))
				at = j + 2;
			else
				continue;
			emit(sc->addr + at + 4 +
			     (uint64_t)(int64_t)(int32_t)get32(p + at), &b);
		}
		x->st.text_bytes += sc->size;
	}
	/* Jump table entries and landing pads: entries no branch names. */
	{
		struct asec *a = NULL;
		size_t na = alloc_secs(e, &a);

		table_entries(&b, a, na);
		eh_pads(&b, e, a, na);
		free(a);
	}
	if (b.oom) {
		err = -ENOMEM;
		goto out;
	}
	x->st.branches = b.nt;
	if (peak < b.starts_cap * sizeof(*b.starts) + b.t_cap * sizeof(*b.t))
		peak = b.starts_cap * sizeof(*b.starts) + b.t_cap * sizeof(*b.t);
	/* Kept for the exact decoding near a probe. */
	x->s = b.starts;
	x->ns = b.nstarts;
	b.starts = NULL;
	x->sec = malloc(b.nsec * sizeof(*x->sec));
	if (!x->sec) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < b.nsec; i++)
		x->sec[i] = (struct xsec){ b.sec[i].addr, b.sec[i].size,
					   b.sec[i].offset };
	x->nsec = b.nsec;
	qsort(x->sec, x->nsec, sizeof(*x->sec), sec_cmp);
	x->n = sort_unique(b.t, b.nt, &peak, b.t_cap * sizeof(*b.t));
	if (b.nt && !x->n) {
		err = -ENOMEM;
		goto out;
	}
	/* Keep only what is used. */
	x->t = x->n ? realloc(b.t, x->n * sizeof(*b.t)) : NULL;
	if (x->n && !x->t) {
		x->t = b.t;
	} else if (!x->n) {
		free(b.t);
	}
	b.t = NULL;
	x->st.targets = x->n;
	err = data_pointers(e, b.lo, b.hi, x);
	if (err)
		goto out;
	x->st.bytes = sizeof(*x) + x->n * sizeof(*x->t) +
		      x->ns * sizeof(*x->s) + x->nsec * sizeof(*x->sec) +
		      x->nd * sizeof(*x->d);
	x->st.peak_bytes = peak;
out:
	free(b.sec);
	free(b.starts);
	free(b.t);
	elf_end(e);
	return err;
}

int pk_xref_build(const char *path, uintptr_t bias, struct pk_xref **out)
{
	struct pk_xref *x = calloc(1, sizeof(*x));
	int fd, err;

	if (!x)
		return -ENOMEM;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		free(x);
		return -ENOEXEC;
	}
	x->bias = bias;
	err = build_fd(fd, NULL, 0, x);
	close(fd);
	if (err) {
		pk_xref_free(x);
		return err;
	}
	*out = x;
	return 0;
}

void pk_xref_get_stats(const struct pk_xref *x, struct pk_xref_stats *st)
{
	*st = x->st;
}

void pk_xref_free(struct pk_xref *x)
{
	if (!x)
		return;
	free(x->t);
	free(x->s);
	free(x->d);
	free(x->sec);
	free(x->rc);
	free(x);
}

/* ------------------------------------------------------------ the cache */

static pthread_mutex_t xref_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pk_xref *cache;	/* guarded by xref_lock */

static void xref_fork_prepare(void)
{
	pthread_mutex_lock(&xref_lock);
}

static void xref_fork_release(void)
{
	pthread_mutex_unlock(&xref_lock);
}

PK_ATFORK(xref, PK_RANK_SYM, xref_fork_prepare, xref_fork_release,
	  xref_fork_release);

/* The loaded object that holds an address: its bias, file and build id. */
struct obj {
	uintptr_t addr;
	int found;
	uintptr_t bias;
	char path[PATH_MAX];
	uint8_t id[PK_BUILD_ID_MAX];
	size_t id_len;
	int mapped;		/* the mapping's file is known: */
	dev_t dev;		/* its device and inode, from the kernel */
	uint64_t ino;
	unsigned long long adds; /* objects loaded so far (dlpi_adds) */
	const void *phdr;	/* its program headers (dlpi_phdr): two
				 * objects may share a bias (a non-PIE
				 * executable and a library linked at a
				 * fixed address: both 0), not these */
};

/*
 * The identity of the file mapped at @o->addr, as the kernel has it: the
 * path the loader recorded may name another file by now (a relative
 * dlopen() then chdir(), a library replaced on disk), and an object
 * without a build id cannot be told from it otherwise.
 */
static void mapped_file(struct obj *o)
{
	struct pk_maps ms = PK_MAPS_INIT;
	struct pk_mapinfo mi;

	if (!pk_maps_open(&ms, 0) && !pk_maps_find(&ms, o->addr, &mi) &&
	    mi.ino) {
		o->mapped = 1;
		o->dev = makedev(mi.dev_major, mi.dev_minor);
		o->ino = mi.ino;
	}
	pk_maps_close(&ms);
}

/*
 * mapped_file()'s answers (a read of /proc/self/maps, the most a check
 * cost) per load bias, while no object is loaded: until then the object
 * at a bias stays the one the answer was about (dlpi_adds only grows;
 * glibc's dlpi_subs does not, after dlmopen). Under xref_lock.
 */
#define MAPPED_MAX 16

static struct {
	uintptr_t bias;
	const void *phdr;
	unsigned long long adds;
	int mapped;
	dev_t dev;
	uint64_t ino;
} mapped_seen[MAPPED_MAX];
static unsigned int mapped_next;

static void mapped_file_cached(struct obj *o)
{
	unsigned int i;

	pk_assert_held(&xref_lock);
	for (i = 0; i < MAPPED_MAX; i++)
		if (mapped_seen[i].adds == o->adds + 1 &&
		    mapped_seen[i].bias == o->bias &&
		    mapped_seen[i].phdr == o->phdr) {
			o->mapped = mapped_seen[i].mapped;
			o->dev = mapped_seen[i].dev;
			o->ino = mapped_seen[i].ino;
			return;
		}
	mapped_file(o);
	i = mapped_next++ % MAPPED_MAX;
	mapped_seen[i].bias = o->bias;
	mapped_seen[i].phdr = o->phdr;
	mapped_seen[i].adds = o->adds + 1;	/* 0: an empty slot */
	mapped_seen[i].mapped = o->mapped;
	mapped_seen[i].dev = o->dev;
	mapped_seen[i].ino = o->ino;
}

/* @st is the file mapped at @o->addr, where that is known. */
static int is_mapped_file(const struct obj *o, const struct stat *st)
{
	return !o->mapped || (st->st_dev == o->dev && st->st_ino == o->ino);
}

static int find_obj(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct obj *o = arg;
	int in = 0;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum && !in; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t s = info->dlpi_addr + ph->p_vaddr;

		in = ph->p_type == PT_LOAD && o->addr >= s &&
		     o->addr < s + ph->p_memsz;
	}
	if (!in)
		return 0;
	o->found = 1;
	o->bias = info->dlpi_addr;
	o->adds = info->dlpi_adds;
	o->phdr = info->dlpi_phdr;
	/* The executable: its file through /proc, whatever its path now. */
	snprintf(o->path, sizeof(o->path), "%s",
		 info->dlpi_name && *info->dlpi_name ? info->dlpi_name
						     : "/proc/self/exe");
	/* The loaded object's build id, read while the loader keeps it mapped. */
	for (int i = 0; i < info->dlpi_phnum && !o->id_len; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_NOTE)
			o->id_len = pk_note_build_id(
				(const uint8_t *)(info->dlpi_addr + ph->p_vaddr),
				ph->p_filesz, o->id);
	}
	return 1;
}

static int same_file(const struct pk_xref *x, uintptr_t bias,
		     const struct stat *st)
{
	return x->bias == bias && x->dev == st->st_dev &&
	       x->ino == st->st_ino && x->size == st->st_size &&
	       x->mtime.tv_sec == st->st_mtim.tv_sec &&
	       x->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

/* The index of @o's file, from the cache or built now. Under xref_lock. */
static struct pk_xref *get_index(const struct obj *o)
{
	struct pk_xref **pp, *x;
	struct stat st;
	size_t n = 0;
	int fd = -1;

	pk_assert_held(&xref_lock);
	/* Verified since no object was loaded: the same object. */
	for (pp = &cache; (x = *pp); pp = &x->next)
		if (x->bias == o->bias && x->seen_adds == o->adds + 1 &&
		    x->seen_phdr == o->phdr) {
			*pp = x->next;
			x->next = cache;
			cache = x;
			return x;
		}
	/* A hit costs a stat(2): the file's identity now. */
	if (!stat(o->path, &st) && is_mapped_file(o, &st)) {
		for (pp = &cache; (x = *pp); pp = &x->next) {
			if (!same_file(x, o->bias, &st))
				continue;
			/* To the front: the most recently used. */
			*pp = x->next;
			x->next = cache;
			cache = x;
			x->seen_adds = o->adds + 1;
			x->seen_phdr = o->phdr;
			return x;
		}
		fd = open(o->path, O_RDONLY | O_CLOEXEC);
	}
	/* The identity of what is read (the file may have changed since). */
	if (fd >= 0 && (fstat(fd, &st) || !is_mapped_file(o, &st))) {
		pk_dbg("xref: %s is not the file mapped at %#" PRIxPTR,
		       o->path, o->addr);
		close(fd);
		fd = -1;
	}
	x = calloc(1, sizeof(*x));
	if (!x) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	x->bias = o->bias;
	if (fd < 0) {
		/* Nothing to cache: an unreadable file is asked about again. */
		x->err = -ENOEXEC;
		return x;
	}
	x->dev = st.st_dev;
	x->ino = st.st_ino;
	x->size = st.st_size;
	x->mtime = st.st_mtim;
	x->err = build_fd(fd, o->id, o->id_len, x);
	close(fd);
	x->seen_adds = o->adds + 1;
	x->seen_phdr = o->phdr;
	if (x->err)
		pk_dbg("xref: %s: no branch index (%d)", o->path, x->err);
	else
		pk_dbg("xref: %s: %zu start points, %zu rel32 destinations, "
		       "%zu bytes", o->path, x->st.starts, x->st.targets,
		       x->st.bytes);
	/* At the front; an index of another file at the same bias goes. */
	x->next = cache;
	cache = x;
	for (pp = &x->next; *pp;) {
		struct pk_xref *y = *pp;

		if (y->bias == o->bias || ++n >= CACHE_MAX) {
			*pp = y->next;
			pk_xref_free(y);
		} else {
			pp = &y->next;
		}
	}
	return x;
}

struct near {
	uint64_t lo, hi;	/* the window (lo, hi), file addresses */
	uint64_t hit;
	int found;
};

static void near_emit(uint64_t t, void *ctx)
{
	struct near *n = ctx;

	if (t > n->lo && t < n->hi && !n->found) {
		n->found = 1;
		n->hit = t;
	}
}

/*
 * The branches near (@lo, @hi), decoded exactly as a decoding of the
 * whole object would (each stretch from its start point), from the file
 * open at @fd: every instruction starting within 130 bytes of the window,
 * as far as a rel8 branch reaches. Return: 0, 1 (*@hit), -EIO.
 */
static int near_branches(const struct pk_xref *x, int fd, uint64_t lo,
			 uint64_t hi, uint64_t *hit)
{
	uint64_t from = lo > 130 ? lo - 130 : 0, to = hi + 130;
	struct near n = { .lo = lo, .hi = hi };
	uint8_t *buf = NULL;
	size_t cap = 0;
	int err = 0;

	for (size_t i = 0; i < x->nsec && !n.found && !err; i++) {
		const struct xsec *sc = &x->sec[i];
		uint64_t end = sc->addr + sc->size, a, b;
		size_t k;

		if (sc->addr >= to || end <= from)
			continue;
		a = from > sc->addr ? from : sc->addr;
		b = to < end ? to : end;
		/* The stretch holding a (a section's start is a start point). */
		k = PK_LOWER_BOUND(x->ns, j, x->s[j] <= a);
		for (k = k ? k - 1 : 0; k < x->ns && x->s[k] < b && !n.found; k++) {
			uint64_t st = x->s[k], se = end, cut;
			size_t len;

			if (st < sc->addr)
				continue;
			if (k + 1 < x->ns && x->s[k + 1] < end)
				se = x->s[k + 1];
			/* What starts past b reaches nothing with rel8. */
			cut = se < b + 16 ? se : b + 16;
			len = cut - st;
			if (len > cap) {
				uint8_t *nb = realloc(buf, len);

				if (!nb) {
					err = -ENOMEM;
					break;
				}
				buf = nb;
				cap = len;
			}
			if (pread(fd, buf, len, (off_t)(sc->offset + (st - sc->addr))) !=
			    (ssize_t)len) {
				err = -EIO;
				break;
			}
			pk_arch_branch_targets(buf, len, st, near_emit, &n);
		}
	}
	free(buf);
	if (err)
		return err;
	*hit = n.hit;
	return n.found;
}

/*
 * Whether a rel8 branch could land in (@lo, @hi) at all: a byte within
 * reach (130 bytes either side, as near_branches() decodes) that would be
 * the opcode of one (jcc 70-7f, jmp eb, loop e0-e2, jrcxz e3) whose 8-bit
 * displacement after it names a destination inside. Every rel8 branch an
 * exact decoding finds is such a byte, so without one there is nothing to
 * decode: in libxml2, 94 % of functions' checks end here. 1, 0, -EIO.
 */
static int rel8_candidate(const struct pk_xref *x, int fd, uint64_t lo,
			  uint64_t hi)
{
	uint64_t from = lo > 130 ? lo - 130 : 0, to = hi + 130;
	uint8_t buf[512];

	for (size_t i = 0; i < x->nsec; i++) {
		const struct xsec *sc = &x->sec[i];
		uint64_t end = sc->addr + sc->size, a, b;

		if (sc->addr >= to || end <= from)
			continue;
		a = from > sc->addr ? from : sc->addr;
		b = to < end ? to : end;
		while (a < b) {
			/* The displacement byte of the last opcode too. */
			size_t len = b - a + 1 > sizeof(buf) ? sizeof(buf) :
				     (size_t)(b - a + 1);
			size_t got;

			if (a + len > end)
				len = (size_t)(end - a);
			got = (size_t)pread(fd, buf, len,
					    (off_t)(sc->offset + (a - sc->addr)));
			if (got != len)
				return -EIO;
			for (size_t k = 0; k + 1 < len; k++) {
				uint8_t op = buf[k];
				uint64_t t = a + k + 2 + (uint64_t)(int64_t)(int8_t)buf[k + 1];

				if (((op & 0xf0) == 0x70 || op == 0xeb ||
				     (op >= 0xe0 && op <= 0xe3)) && t > lo && t < hi)
					return 1;
			}
			if (len < 2)
				break;
			a += len - 1;
		}
	}
	return 0;
}

/*
 * The query of one pk_xref_*_in(): the index of the object holding @lo,
 * built or cached, under xref_lock; @q answers from it for the object's
 * offset @a. @far: the answer when @lo lies beyond what the index covers.
 */
typedef int xref_query_fn(struct pk_xref *x, const struct obj *o, uint32_t a,
			  size_t len, uintptr_t *at);

static int xref_query(uintptr_t lo, size_t len, uintptr_t *at, int far,
		      xref_query_fn *q)
{
	struct obj *o = calloc(1, sizeof(*o));
	struct pk_xref *x;
	int ret;

	if (!o)
		return -ENOMEM;
	o->addr = lo;
	dl_iterate_phdr(find_obj, o);
	if (!o->found) {
		free(o);
		return -ENOENT;
	}
	pthread_mutex_lock(&xref_lock);
	mapped_file_cached(o);
	x = get_index(o);
	if (!x) {
		ret = -ENOMEM;
	} else if (x->err) {
		ret = x->err;
		if (!x->dev && !x->ino)
			pk_xref_free(x);	/* not cached */
	} else if (lo >= o->bias && lo - o->bias < UINT32_MAX) {
		ret = q(x, o, (uint32_t)(lo - o->bias), len, at);
	} else {
		ret = far;
	}
	pthread_mutex_unlock(&xref_lock);
	free(o);
	return ret;
}

#define RC_AFTER 32		/* file-read rel8 checks before the bitmap */
#define RC_SPAN_MAX (1ull << 28)	/* code spans given one, at most (32 MiB kept) */

static int is_rel8_op(uint8_t op)
{
	return (op & 0xf0) == 0x70 || op == 0xeb || (op >= 0xe0 && op <= 0xe3);
}

/*
 * x->rc from the file open at @fd (the bytes the index was made from):
 * every byte of an executable section that would be a rel8 branch's
 * opcode (as rel8_candidate() reads them, its displacement byte in the
 * section too) marks its destination. The span reaches 130 bytes past
 * the code either way, as far as a candidate's destination can. Nothing
 * is kept if a read fails or memory is short (the file is read per check
 * then, as before).
 */
static void rc_build(struct pk_xref *x, int fd)
{
	uint64_t lo = UINT64_MAX, hi = 0, span;
	size_t cap = 65536;
	uint8_t *rc, *buf;

	for (size_t i = 0; i < x->nsec; i++) {
		if (x->sec[i].addr < lo)
			lo = x->sec[i].addr;
		if (x->sec[i].addr + x->sec[i].size > hi)
			hi = x->sec[i].addr + x->sec[i].size;
	}
	if (!x->nsec)
		return;
	lo = lo > 130 ? lo - 130 : 0;
	hi += 130;
	span = hi - lo;
	if (span > RC_SPAN_MAX)
		return;
	rc = calloc((size_t)(span + 7) / 8, 1);
	buf = malloc(cap);
	if (!rc || !buf)
		goto fail;
	for (size_t i = 0; i < x->nsec; i++) {
		const struct xsec *sc = &x->sec[i];

		/* Chunks overlap by a byte: the last opcode's displacement. */
		for (uint64_t a = 0; a + 1 < sc->size;) {
			size_t len = sc->size - a > cap ? cap : (size_t)(sc->size - a);

			if (pread(fd, buf, len, (off_t)(sc->offset + a)) != (ssize_t)len)
				goto fail;
			for (size_t k = 0; k + 1 < len; k++) {
				uint64_t t, w;

				/* Eight bytes at a time while none is an opcode. */
				if (!(k & 7) && k + 8 <= len) {
					memcpy(&w, buf + k, 8);
					if (!zero_byte((w & (ONES * 0xf0)) ^ (ONES * 0x70)) &&
					    !zero_byte(w ^ (ONES * 0xeb)) &&
					    !zero_byte((w & (ONES * 0xfc)) ^ (ONES * 0xe0))) {
						k += 7;
						continue;
					}
				}
				if (!is_rel8_op(buf[k]))
					continue;
				t = sc->addr + a + k + 2 +
				    (uint64_t)(int64_t)(int8_t)buf[k + 1];
				if (t >= lo && t < hi)
					rc[(t - lo) / 8] |= (uint8_t)(1u << ((t - lo) % 8));
			}
			a += len - 1;
		}
	}
	free(buf);
	x->rc = rc;
	x->rc_lo = lo;
	x->rc_hi = hi;
	x->st.bytes += (size_t)(span + 7) / 8;
	return;
fail:
	free(buf);
	free(rc);
	/* Not again at every later check (each one a read of the code). */
	x->rc_asks = UINT_MAX;
}

/* Whether x->rc has a candidate landing in (@lo, @hi). */
static int rc_any(const struct pk_xref *x, uint64_t lo, uint64_t hi)
{
	for (uint64_t t = lo + 1; t < hi; t++)
		if (t >= x->rc_lo && t < x->rc_hi &&
		    (x->rc[(t - x->rc_lo) / 8] >> ((t - x->rc_lo) % 8) & 1))
			return 1;
	return 0;
}

static int lands_q(struct pk_xref *x, const struct obj *o, uint32_t a,
		   size_t len, uintptr_t *at)
{
	size_t i = PK_LOWER_BOUND(x->n, k, x->t[k] <= a);
	struct stat st;
	uint64_t hit;
	int fd, ret;

	if (i < x->n && x->t[i] < a + len) {
		*at = o->bias + x->t[i];
		return 1;
	}
	/* No byte that could be a rel8 branch landing there: nothing to read. */
	if (x->rc && !rc_any(x, a, (uint64_t)a + len))
		return 0;
	fd = open(o->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -ENOEXEC;
	/* The bytes the index was made from, or none. */
	if (fstat(fd, &st) || !same_file(x, o->bias, &st))
		ret = -ENOEXEC;
	else if (x->rc || (ret = rel8_candidate(x, fd, a, (uint64_t)a + len)) > 0)
		ret = near_branches(x, fd, a, (uint64_t)a + len, &hit);
	/* Many checks in one object (a batch): its candidates once. */
	if (ret >= 0 && !x->rc && x->rc_asks != UINT_MAX &&
	    ++x->rc_asks >= RC_AFTER)
		rc_build(x, fd);
	if (ret > 0)
		*at = o->bias + hit;
	close(fd);
	return ret;
}

int pk_xref_lands_in(uintptr_t lo, size_t len, uintptr_t *at)
{
	return xref_query(lo, len, at, 0, lands_q);
}

static int start_q(struct pk_xref *x, const struct obj *o, uint32_t a,
		   size_t len, uintptr_t *at)
{
	size_t i = PK_LOWER_BOUND(x->ns, k, x->s[k] < a);

	if (i < x->ns && x->s[i] < (uint64_t)a + len) {
		*at = o->bias + x->s[i];
		return 1;
	}
	return 0;
}

int pk_xref_start_in(uintptr_t lo, size_t len, uintptr_t *at)
{
	return xref_query(lo, len, at, -E2BIG, start_q);
}

static int data_q(struct pk_xref *x, const struct obj *o, uint32_t a,
		  size_t len, uintptr_t *at)
{
	size_t i = PK_LOWER_BOUND(x->nd, k, x->d[k] <= a);

	if (i < x->nd && x->d[i] < (uint64_t)a + len) {
		*at = o->bias + x->d[i];
		return 1;
	}
	return 0;
}

int pk_xref_data_in(uintptr_t lo, size_t len, uintptr_t *at)
{
	return xref_query(lo, len, at, -E2BIG, data_q);
}
