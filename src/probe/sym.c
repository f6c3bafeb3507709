// SPDX-License-Identifier: MIT
/* sym.c - function symbols of every loaded object, from .dynsym and .symtab (libelf). */

/*
 * "name" or "object:name". Objects are what dl_iterate_phdr() lists: the
 * executable (named by its file's base name) and every loaded library,
 * including dlopen'ed ones. "object" matches a base name exactly or up to a
 * dot that follows it ("libz.so.1" matches libz.so.1.2.13, "libz" too).
 *
 * Which definition wins, as the dynamic linker would pick:
 *   1. global and weak definitions: the first object in load order
 *      (interposition: the executable before its libraries);
 *   2. otherwise local ones (static functions, .symtab only): exactly one
 *      address must carry the name, else -EINVAL (ambiguous).
 * Only defined functions (STT_FUNC, STT_GNU_IFUNC refused: its address is a
 * resolver) count. The same address under .dynsym and .symtab is one match,
 * reported as .dynsym. Files are read again at every lookup; nothing is
 * cached, so a library loaded later is seen at once.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <link.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "probe/probe.h"

struct match {
	uintptr_t addr;
	size_t size;
	int table;
	int global;
	int ifunc;
	char object[256];
};

struct lookup {
	const char *object;	/* NULL: any */
	const char *name;
	struct match m[8];
	int n;			/* matches kept (distinct addresses) */
	int total;		/* distinct addresses seen */
	int objects_seen;
};

static int object_matches(const char *path, const char *want)
{
	const char *base = strrchr(path, '/');
	size_t l = strlen(want);

	base = base ? base + 1 : path;
	return !strncmp(base, want, l) && (base[l] == 0 || base[l] == '.');
}

/* Keep the tail of a long path: the base name is what matters. */
static void copy_str(char *dst, size_t cap, const char *src)
{
	size_t l = strlen(src);

	if (l >= cap)
		src += l - (cap - 1), l = cap - 1;
	memcpy(dst, src, l);
	dst[l] = 0;
}

static void add_match(struct lookup *lk, uintptr_t addr, const GElf_Sym *s,
		      int table, const char *path)
{
	for (int i = 0; i < lk->n; i++)
		if (lk->m[i].addr == addr) {
			if (table == PK_SYM_DYNSYM)
				lk->m[i].table = PK_SYM_DYNSYM;
			if (!lk->m[i].size)
				lk->m[i].size = s->st_size;
			return;
		}
	lk->total++;
	if (lk->n == (int)PK_ARRAY_SIZE(lk->m))
		return;
	lk->m[lk->n] = (struct match){
		.addr = addr,
		.size = s->st_size,
		.table = table,
		.global = GELF_ST_BIND(s->st_info) != STB_LOCAL,
		.ifunc = GELF_ST_TYPE(s->st_info) == STT_GNU_IFUNC,
	};
	copy_str(lk->m[lk->n].object, sizeof(lk->m[0].object), path);
	lk->n++;
}

static void scan_file(struct lookup *lk, const char *path, uintptr_t bias)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf_Scn *scn = NULL;
	Elf *e;

	if (fd < 0)
		return;		/* the vDSO, or a deleted file */
	e = elf_begin(fd, ELF_C_READ, NULL);
	while (e && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) ||
		    (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) ||
		    !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			const char *nm;

			if (!gelf_getsym(d, (int)i, &s) ||
			    s.st_shndx == SHN_UNDEF || !s.st_value ||
			    (GELF_ST_TYPE(s.st_info) != STT_FUNC &&
			     GELF_ST_TYPE(s.st_info) != STT_GNU_IFUNC))
				continue;
			nm = elf_strptr(e, sh.sh_link, s.st_name);
			if (!nm || strcmp(nm, lk->name))
				continue;
			add_match(lk, bias + s.st_value, &s,
				  sh.sh_type == SHT_DYNSYM ? PK_SYM_DYNSYM
							   : PK_SYM_SYMTAB,
				  path);
		}
	}
	elf_end(e);
	close(fd);
}

static int each_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct lookup *lk = arg;
	char exe[PATH_MAX];
	const char *path = info->dlpi_name;

	(void)size;
	if (!path || !*path) {
		ssize_t l = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

		if (l <= 0)
			return 0;
		exe[l] = 0;
		path = exe;
	}
	if (lk->object && !object_matches(path, lk->object))
		return 0;
	lk->objects_seen++;
	scan_file(lk, path, info->dlpi_addr);
	return 0;
}

int pk_sym_lookup(const char *spec, struct pk_sym *out)
{
	struct lookup *lk;
	const char *colon;
	char obj[256];
	int pick = -1, ret = 0;

	if (!spec || !*spec || !out)
		return -EINVAL;
	lk = calloc(1, sizeof(*lk));
	if (!lk)
		return -ENOMEM;
	colon = strrchr(spec, ':');
	lk->name = spec;
	if (colon) {
		if (colon == spec || !colon[1] ||
		    (size_t)(colon - spec) >= sizeof(obj)) {
			free(lk);
			return -EINVAL;
		}
		memcpy(obj, spec, (size_t)(colon - spec));
		obj[colon - spec] = 0;
		lk->object = obj;
		lk->name = colon + 1;
	}
	elf_version(EV_CURRENT);
	dl_iterate_phdr(each_object, lk);

	for (int i = 0; i < lk->n && pick < 0; i++)
		if (lk->m[i].global)
			pick = i;	/* load order: what the linker binds */
	if (pick < 0 && lk->total == 1)
		pick = 0;
	if (lk->object && !lk->objects_seen) {
		pk_err("sym: \"%s\": no loaded object is called %s", spec,
		       lk->object);
		ret = -ENOENT;
	} else if (!lk->total) {
		pk_err("sym: \"%s\": no function of that name in %s", spec,
		       lk->object ? lk->object : "any loaded object");
		ret = -ENOENT;
	} else if (pick < 0) {
		pk_err("sym: \"%s\" is ambiguous: %d local functions carry that "
		       "name (first two in %s and %s); qualify it as object:name "
		       "or attach by address", spec, lk->total, lk->m[0].object,
		       lk->m[lk->n > 1 ? 1 : 0].object);
		ret = -EINVAL;
	} else if (lk->m[pick].ifunc) {
		pk_err("sym: \"%s\" is an IFUNC (its address is a resolver); "
		       "attach to the implementation it resolves to", spec);
		ret = -EINVAL;
	} else {
		out->addr = lk->m[pick].addr;
		out->size = lk->m[pick].size;
		out->table = lk->m[pick].table;
		copy_str(out->object, sizeof(out->object), lk->m[pick].object);
		pk_dbg("sym: %s = %#lx size %zu from %s of %s", spec,
		       (unsigned long)out->addr, out->size,
		       out->table == PK_SYM_DYNSYM ? ".dynsym" : ".symtab",
		       out->object);
	}
	free(lk);
	return ret;
}

/* ------------------------------------------------- address -> function */

struct addr_lookup {
	uintptr_t addr;
	int found_obj;
	uintptr_t bias;
	char path[PATH_MAX];
};

static int find_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct addr_lookup *al = arg;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t s = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type != PT_LOAD || al->addr < s ||
		    al->addr >= s + ph->p_memsz)
			continue;
		al->found_obj = 1;
		al->bias = info->dlpi_addr;
		if (info->dlpi_name && *info->dlpi_name) {
			snprintf(al->path, sizeof(al->path), "%s",
				 info->dlpi_name);
		} else {
			ssize_t l = readlink("/proc/self/exe", al->path,
					     sizeof(al->path) - 1);

			al->path[l > 0 ? l : 0] = 0;
		}
		return 1;
	}
	return 0;
}

/*
 * The functions of the object last asked about, sorted by address, so that
 * arming thousands of probes in one library reads its file once. Keyed by
 * path and load bias (a library unloaded and another loaded at the same
 * place under the same path is read again only if its size changed: good
 * enough for a cache whose misses cost one file read).
 */
struct func_ent {
	uintptr_t start;
	size_t size;
	int table;
};

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

/* fork(): nothing is half-cached in a child. */
static void sym_fork_prepare(void)
{
	pthread_mutex_lock(&cache_lock);
}

static void sym_fork_release(void)
{
	pthread_mutex_unlock(&cache_lock);
}

PK_ATFORK(sym, PK_RANK_SYM, sym_fork_prepare, sym_fork_release,
	  sym_fork_release);

static struct {			/* guarded by cache_lock */
	char path[PATH_MAX];
	uintptr_t bias;
	off_t file_size;
	struct func_ent *f;
	size_t n;
	uintptr_t jump_table;
	size_t jump_table_size;
} cache;

static int ent_cmp(const void *a, const void *b)
{
	const struct func_ent *x = a, *y = b;

	if (x->start != y->start)
		return (x->start > y->start) - (x->start < y->start);
	return x->table - y->table;	/* .dynsym first */
}

static int cache_fill(const char *path, uintptr_t bias)
{
	struct stat st;
	Elf_Scn *scn = NULL;
	size_t cap = 0, shstrndx;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	Elf *e;

	if (fd < 0 || fstat(fd, &st)) {
		if (fd >= 0)
			close(fd);
		return -ENOENT;
	}
	if (!strcmp(cache.path, path) && cache.bias == bias &&
	    cache.file_size == st.st_size) {
		close(fd);
		return 0;
	}
	free(cache.f);
	memset(&cache, 0, sizeof(cache));
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e || elf_getshdrstrndx(e, &shstrndx)) {
		elf_end(e);
		close(fd);
		return -ENOENT;
	}
	while ((scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		const char *nm;

		if (!gelf_getshdr(scn, &sh))
			continue;
		nm = elf_strptr(e, shstrndx, sh.sh_name);
		if (nm && !strcmp(nm, "__pk_jump_table")) {
			cache.jump_table = bias + sh.sh_addr;
			cache.jump_table_size = sh.sh_size;
		}
		if ((sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) ||
		    !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;

			if (!gelf_getsym(d, (int)i, &s) ||
			    GELF_ST_TYPE(s.st_info) != STT_FUNC ||
			    s.st_shndx == SHN_UNDEF || !s.st_size)
				continue;
			if (PK_GROW(&cache.f, &cap, cache.n + 1)) {
				elf_end(e);
				close(fd);
				free(cache.f);
				memset(&cache, 0, sizeof(cache));
				return -ENOMEM;
			}
			cache.f[cache.n++] = (struct func_ent){
				bias + s.st_value, s.st_size,
				sh.sh_type == SHT_DYNSYM ? PK_SYM_DYNSYM : PK_SYM_SYMTAB
			};
		}
	}
	elf_end(e);
	close(fd);
	if (cache.n > 1)
		qsort(cache.f, cache.n, sizeof(*cache.f), ent_cmp);
	snprintf(cache.path, sizeof(cache.path), "%s", path);
	cache.bias = bias;
	cache.file_size = st.st_size;
	return 0;
}

int pk_sym_func_at(uintptr_t addr, struct pk_func *out)
{
	struct addr_lookup al = { .addr = addr };
	int err;

	memset(out, 0, sizeof(*out));
	dl_iterate_phdr(find_object, &al);
	if (!al.found_obj)
		return -ENOENT;
	elf_version(EV_CURRENT);
	pthread_mutex_lock(&cache_lock);
	err = cache_fill(al.path, al.bias);
	if (!err) {
		/* The last function starting at or before @addr, then back over
		   aliases and nested symbols until one covers it. */
		size_t i = PK_LOWER_BOUND(cache.n, k, cache.f[k].start <= addr);

		err = -ENOENT;
		while (i-- > 0) {
			const struct func_ent *f = &cache.f[i];

			if (addr < f->start + f->size) {
				out->start = f->start;
				out->size = f->size;
				out->table = f->table;
				err = 0;
				/* Prefer the .dynsym entry of the same start. */
				while (i > 0 && cache.f[i - 1].start == f->start) {
					i--;
					out->table = cache.f[i].table;
					if (cache.f[i].size > out->size)
						out->size = cache.f[i].size;
				}
				break;
			}
			if (addr - f->start > (1u << 24))
				break;	/* nothing that large: stop looking */
		}
		out->jump_table = cache.jump_table;
		out->jump_table_size = cache.jump_table_size;
	}
	pthread_mutex_unlock(&cache_lock);
	snprintf(out->object, sizeof(out->object), "%s", al.path);
	return err;
}
