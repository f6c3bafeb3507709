// SPDX-License-Identifier: MIT
/* rseq.c - the restartable-sequence critical sections a loaded object declares, which no probe may displace or trap in (design: rseq.h). */
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
#include <unistd.h>

#include "internal.h"
#include "probe/rseq.h"
#include "sym/sym.h"

#define CACHE_MAX 64		/* objects remembered; the oldest goes */
#define CS_SIZE 32		/* struct rseq_cs: u32 version, u32 flags,
				 * u64 start_ip, post_commit_offset, abort_ip */

struct cs {
	uintptr_t lo, hi;	/* [start_ip, start_ip + post_commit_offset) */
	uintptr_t abort;	/* abort_ip, after its 4 signature bytes */
};

/* One object's sections, as found when first asked. */
struct robj {
	uintptr_t bias;
	dev_t dev;
	ino_t ino;
	unsigned long long adds;	/* dlpi_adds when last confirmed */
	const void *phdr;		/* and its dlpi_phdr then */
	struct cs *cs;
	size_t n;
};

static pthread_mutex_t rseq_lock = PTHREAD_MUTEX_INITIALIZER;
static struct robj cache[CACHE_MAX];	/* guarded by rseq_lock */
static size_t ncache, next_out;

struct find {
	uintptr_t addr;
	int found;
	uintptr_t bias;
	unsigned long long adds;	/* objects loaded so far */
	const void *phdr;	/* dlpi_phdr: a bias may be two objects' */
	char path[PATH_MAX];
	uint8_t id[PK_BUILD_ID_MAX];	/* the loaded object's build id */
	size_t id_len;
	/* The object's loaded segments, where a descriptor must lie. */
	unsigned int nseg;
	struct { uintptr_t lo, hi; } seg[16];
};

static int find_obj(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct find *f = arg;
	int in = 0;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t s = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && f->addr >= s &&
		    f->addr < s + ph->p_memsz)
			in = 1;
	}
	if (!in)
		return 0;
	f->found = 1;
	f->bias = info->dlpi_addr;
	f->adds = info->dlpi_adds;
	f->phdr = info->dlpi_phdr;
	for (int i = 0; i < info->dlpi_phnum && f->nseg < 16; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_R))
			continue;
		f->seg[f->nseg].lo = info->dlpi_addr + ph->p_vaddr;
		f->seg[f->nseg].hi = f->seg[f->nseg].lo + ph->p_memsz;
		f->nseg++;
	}
	for (int i = 0; i < info->dlpi_phnum && !f->id_len; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_NOTE)
			f->id_len = pk_note_build_id(
				(const uint8_t *)(info->dlpi_addr + ph->p_vaddr),
				ph->p_filesz, f->id);
	}
	/* The executable has no name here: its file is /proc/self/exe. */
	snprintf(f->path, sizeof(f->path), "%s",
		 info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name :
							 "/proc/self/exe");
	return 1;
}

static int loaded(const struct find *f, uintptr_t a, size_t len)
{
	for (unsigned int i = 0; i < f->nseg; i++)
		if (a >= f->seg[i].lo && len <= f->seg[i].hi - a)
			return 1;
	return 0;
}

/*
 * The descriptors of @f's object: its __rseq_cs section, read where it is
 * loaded (the dynamic linker has relocated the addresses in it). An
 * object with no such section, or whose file cannot be read, has none.
 */
static int read_cs(const struct find *f, int fd, struct robj *o)
{
	uint8_t fid[PK_BUILD_ID_MAX];
	size_t shstrndx, fid_len = 0, n = 0;
	GElf_Shdr cs = { 0 };
	Elf_Scn *scn = NULL;
	uintptr_t at = 0;
	Elf *e;

	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e)
		return 0;
	if (elf_kind(e) != ELF_K_ELF || elf_getshdrstrndx(e, &shstrndx)) {
		elf_end(e);
		return 0;
	}
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_NOTE && !fid_len) {
			Elf_Data *d = elf_getdata(scn, NULL);

			if (d && d->d_buf)
				fid_len = pk_note_build_id(d->d_buf, d->d_size, fid);
			continue;
		}
		if (sh.sh_type == SHT_NOBITS || !(sh.sh_flags & SHF_ALLOC))
			continue;
		name = elf_strptr(e, shstrndx, sh.sh_name);
		if (name && !strcmp(name, "__rseq_cs") && !cs.sh_size)
			cs = sh;
	}
	elf_end(e);
	/* Another file than the one loaded (replaced on disk since)? */
	if (f->id_len && (fid_len != f->id_len || memcmp(fid, f->id, fid_len))) {
		pk_dbg("probe: %s is not the object loaded at %#" PRIxPTR
		       " (build ids differ): its restartable sequences are not "
		       "known", f->path, f->bias);
		return 0;
	}
	if (cs.sh_size) {
		at = f->bias + cs.sh_addr;
		n = cs.sh_size / CS_SIZE;
	}
	if (!n || !loaded(f, at, n * CS_SIZE))
		return 0;
	o->cs = calloc(n, sizeof(*o->cs));
	if (!o->cs)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const uint8_t *d = (const uint8_t *)at + i * CS_SIZE;
		uint32_t version;
		uint64_t start, len, abort;

		memcpy(&version, d, 4);
		memcpy(&start, d + 8, 8);
		memcpy(&len, d + 16, 8);
		memcpy(&abort, d + 24, 8);
		/* Version 0 is the only one; a zeroed slot is none. */
		if (version || !len || start + len < start)
			continue;
		o->cs[o->n].lo = (uintptr_t)start;
		o->cs[o->n].hi = (uintptr_t)(start + len);
		o->cs[o->n].abort = (uintptr_t)abort;
		o->n++;
	}
	return 0;
}

/* @f's object from the cache, or read now. Under rseq_lock. */
static const struct robj *get_obj(const struct find *f, int *err)
{
	struct robj o = { .bias = f->bias };
	struct stat st;
	int fd;

	*err = 0;
	/*
	 * Nothing loaded since: the object at that bias is the same one
	 * (dlpi_adds only grows; dlpi_subs is not monotonic in glibc).
	 */
	for (size_t i = 0; i < ncache; i++)
		if (cache[i].bias == f->bias && cache[i].adds == f->adds &&
		    cache[i].phdr == f->phdr)
			return &cache[i];
	fd = open(f->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;	/* no file (the vDSO): nothing declared */
	if (fstat(fd, &st)) {
		close(fd);
		return NULL;
	}
	for (size_t i = 0; i < ncache; i++)
		if (cache[i].bias == f->bias && cache[i].dev == st.st_dev &&
		    cache[i].ino == st.st_ino) {
			close(fd);
			cache[i].adds = f->adds;
			cache[i].phdr = f->phdr;
			return &cache[i];
		}
	o.dev = st.st_dev;
	o.ino = st.st_ino;
	o.adds = f->adds;
	o.phdr = f->phdr;
	if (elf_version(EV_CURRENT) != EV_NONE)
		*err = read_cs(f, fd, &o);
	close(fd);
	if (*err)
		return NULL;
	if (ncache < CACHE_MAX) {
		cache[ncache] = o;
		return &cache[ncache++];
	}
	{
		size_t slot = next_out;

		free(cache[slot].cs);
		cache[slot] = o;
		next_out = (slot + 1) % CACHE_MAX;
		return &cache[slot];
	}
}

/*
 * Whether running [@lo, @lo + @len) out of line, or writing over it, meets
 * section @c: an instruction in it, or the one ending at its start (the
 * rseq_cs store: run elsewhere, a preemption before the jump back finds
 * the thread outside and the kernel clears rseq_cs for the section's run),
 * or the signature before its abort handler (checked by the kernel at an
 * abort), or an abort handler inside the range after its first byte.
 */
static int meets(const struct cs *c, uintptr_t lo, size_t len)
{
	uintptr_t hi = lo + len;

	return (c->lo <= hi && c->hi > lo) ||
	       (c->abort >= 4 && c->abort - 4 < hi && c->abort > lo) ||
	       (c->abort > lo && c->abort < hi);
}

int pk_rseq_cs_in(uintptr_t lo, size_t len, uintptr_t *start)
{
	struct find *f = calloc(1, sizeof(*f));
	const struct robj *o;
	int err, ret = 0;

	if (!f)
		return -ENOMEM;
	f->addr = lo;
	dl_iterate_phdr(find_obj, f);
	if (!f->found) {
		free(f);
		return 0;	/* code outside every object declares none */
	}
	pthread_mutex_lock(&rseq_lock);
	o = get_obj(f, &err);
	for (size_t i = 0; o && i < o->n; i++)
		if (meets(&o->cs[i], lo, len)) {
			*start = o->cs[i].lo;
			ret = 1;
			break;
		}
	pthread_mutex_unlock(&rseq_lock);
	free(f);
	return o ? ret : err;
}
