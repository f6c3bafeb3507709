// SPDX-License-Identifier: MIT
/* elf.c - one ELF file's functions: .dynsym with symbol versions, .symtab with source files, MiniDebugInfo's .symtab, the debug file's .symtab, .eh_frame FDEs. */

/*
 * Versions (.gnu.version, .gnu.version_d): a .dynsym entry's version index
 * names its version; bit 15 set means a non-default version (NAME@V, a
 * compat symbol the link editor never binds new references to), clear the
 * default (NAME@@V). Index 0 and 1 are unversioned. In a .symtab (and a
 * debug file's), versioned definitions carry the suffix in their name
 * ("memcpy@GLIBC_2.2.5", "memcpy@@GLIBC_2.14"): split the same way.
 *
 * Source files: in a .symtab, locals follow the STT_FILE entry of the file
 * they were compiled from; globals come after all locals, their file lost.
 *
 * The debug file (Debian's *-dbg / *-dbgsym packages) is looked for as GDB
 * does: DIR/.build-id/xx/rest.debug from .note.gnu.build-id, else the
 * .gnu_debuglink name in DIR/<the object's directory>/, beside the object
 * and in its .debug/ directory. Its .symtab is read only when the object
 * has none (what the stripped object lacks), and only if its build-id
 * matches where both have one.
 *
 * MiniDebugInfo (minidebug.c): a stripped file's .gnu_debugdata section,
 * an xz-compressed ELF file with a .symtab of the functions .dynsym lacks.
 * Where the file has no .symtab it is read (table PK_SYM_MINIDEBUG)
 * instead of looking for a debug file: a section that cannot be unpacked
 * or parsed, or whose build-id is not the file's, is refused with an
 * error line naming the file and why, and the debug file is looked for as
 * if there were none.
 */
#include <errno.h>
#include <fcntl.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <probekit/sym.h>

#include "internal.h"
#include "sym/sym.h"

#define DEBUG_DIR "/usr/lib/debug"

struct file {
	int fd;
	Elf *e;
	size_t shstrndx;
};

static int file_open(struct file *f, const char *path)
{
	f->fd = open(path, O_RDONLY | O_CLOEXEC);
	f->e = NULL;
	if (f->fd < 0)
		return -ENOENT;
	elf_version(EV_CURRENT);
	f->e = elf_begin(f->fd, ELF_C_READ, NULL);
	if (!f->e || elf_kind(f->e) != ELF_K_ELF ||
	    elf_getshdrstrndx(f->e, &f->shstrndx)) {
		elf_end(f->e);
		close(f->fd);
		f->e = NULL;
		f->fd = -1;
		return -ENOENT;
	}
	return 0;
}

static void file_close(struct file *f)
{
	if (f->fd < 0)
		return;
	elf_end(f->e);
	close(f->fd);
	f->fd = -1;
}

static Elf_Scn *find_scn(struct file *f, const char *want, int type,
			 GElf_Shdr *sh)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(f->e, scn))) {
		const char *nm;

		if (!gelf_getshdr(scn, sh))
			continue;
		if (type && (int)sh->sh_type == type)
			return scn;
		nm = want ? elf_strptr(f->e, f->shstrndx, sh->sh_name) : NULL;
		if (nm && !strcmp(nm, want))
			return scn;
	}
	return NULL;
}

/* The build-id note's bytes into @id (up to @cap): its length, 0 if none. */
static size_t build_id(struct file *f, uint8_t *id, size_t cap)
{
	GElf_Shdr sh;
	Elf_Scn *scn = find_scn(f, ".note.gnu.build-id", 0, &sh);
	Elf_Data *d = scn ? elf_getdata(scn, NULL) : NULL;
	size_t off = 0, noff, doff;
	GElf_Nhdr nh;

	while (d && (off = gelf_getnote(d, off, &nh, &noff, &doff)) > 0)
		if (nh.n_type == NT_GNU_BUILD_ID && nh.n_descsz <= cap) {
			memcpy(id, (uint8_t *)d->d_buf + doff, nh.n_descsz);
			return nh.n_descsz;
		}
	return 0;
}

const char *pk_elf_debug_dir(void)
{
	const char *d = pk_getenv("PROBEKIT_DEBUG_DIR");

	return d ? d : DEBUG_DIR;
}

/* Open @f's debug file into @dbg; 0, or -ENOENT. */
static int debug_open(struct file *f, const char *path, struct file *dbg,
		      char *found, size_t cap)
{
	const char *dir = pk_elf_debug_dir();
	uint8_t id[64], id2[64];
	size_t idl = build_id(f, id, sizeof(id));
	char cand[PATH_MAX], real[PATH_MAX], *slash;
	const char *link = NULL;
	GElf_Shdr sh;
	Elf_Scn *scn;

	if (!*dir)
		return -ENOENT;
	if (idl > 1) {
		int l = snprintf(cand, sizeof(cand), "%s/.build-id/%02x/", dir,
				 id[0]);

		for (size_t i = 1; i < idl && l < (int)sizeof(cand) - 8; i++)
			l += snprintf(cand + l, sizeof(cand) - (size_t)l,
				      "%02x", id[i]);
		snprintf(cand + l, sizeof(cand) - (size_t)l, ".debug");
		if (!file_open(dbg, cand)) {
			snprintf(found, cap, "%s", cand);
			return 0;
		}
	}
	scn = find_scn(f, ".gnu_debuglink", 0, &sh);
	if (scn) {
		Elf_Data *d = elf_getdata(scn, NULL);

		if (d && d->d_size && memchr(d->d_buf, 0, d->d_size))
			link = d->d_buf;
	}
	if (!link || !realpath(path, real))
		return -ENOENT;
	slash = strrchr(real, '/');
	*slash = 0;
	for (int i = 0; i < 3; i++) {
		static const char *const fmt[] = { "%s%s/%s", "%.0s%s/%s",
						   "%.0s%s/.debug/%s" };

		snprintf(cand, sizeof(cand), fmt[i], dir, real, link);
		if (file_open(dbg, cand))
			continue;
		/* A debuglink names a file, not a build: check the id too. */
		if (idl && build_id(dbg, id2, sizeof(id2)) == idl &&
		    memcmp(id, id2, idl)) {
			file_close(dbg);
			continue;
		}
		snprintf(found, cap, "%s", cand);
		return 0;
	}
	return -ENOENT;
}

/*
 * The ELF file in @f's .gnu_debugdata (section @scn), unpacked into @md
 * (md->fd is -1; *@buf holds its bytes, freed by the caller after
 * elf_end()). Return: 0, or -ENOENT with an error line (refused).
 */
static int minidebug_open(struct file *f, Elf_Scn *scn, const char *path,
			  struct file *md, void **buf)
{
	Elf_Data *d = elf_rawdata(scn, NULL);
	uint8_t id[64], id2[64];
	size_t len, idl, idl2;
	const char *why = NULL;
	int err;

	*buf = NULL;
	md->fd = -1;
	md->e = NULL;
	if (!d || !d->d_buf || !d->d_size) {
		why = "empty section";
		goto refuse;
	}
	err = pk_minidebug_unpack(d->d_buf, d->d_size, buf, &len, &why);
	if (err)
		goto refuse;
	md->e = elf_memory(*buf, len);
	if (!md->e || elf_kind(md->e) != ELF_K_ELF ||
	    elf_getshdrstrndx(md->e, &md->shstrndx)) {
		why = "not an ELF file once unpacked";
		goto refuse;
	}
	/* As for a debug file: another build's symbols would be wrong ones. */
	idl = build_id(f, id, sizeof(id));
	idl2 = build_id(md, id2, sizeof(id2));
	if (idl && idl2 && (idl != idl2 || memcmp(id, id2, idl))) {
		why = "its build id is not the file's (another build's symbols)";
		goto refuse;
	}
	return 0;
refuse:
	pk_err("sym: %s: .gnu_debugdata (MiniDebugInfo) not read: %s", path,
	       why ? why : "cannot be unpacked");
	if (md->e)
		elf_end(md->e);
	md->e = NULL;
	free(*buf);
	*buf = NULL;
	return -ENOENT;
}

struct verdefs {
	const char **name;	/* by version index */
	size_t n;
};

static int verdefs_read(struct file *f, struct verdefs *v)
{
	GElf_Shdr sh;
	Elf_Scn *scn = find_scn(f, NULL, SHT_GNU_verdef, &sh);
	Elf_Data *d = scn ? elf_getdata(scn, NULL) : NULL;
	size_t off = 0;

	v->name = NULL;
	v->n = 0;
	for (size_t k = 0; d && k < sh.sh_info; k++) {
		GElf_Verdef vd;
		GElf_Verdaux va;

		if (!gelf_getverdef(d, (int)off, &vd) ||
		    !gelf_getverdaux(d, (int)(off + vd.vd_aux), &va))
			break;
		if (vd.vd_ndx >= v->n) {
			size_t nn = vd.vd_ndx + 1u;
			const char **p = realloc(v->name, nn * sizeof(*p));

			if (!p)
				return -ENOMEM;
			for (size_t i = v->n; i < nn; i++)
				p[i] = NULL;
			v->name = p;
			v->n = nn;
		}
		if (!(vd.vd_flags & VER_FLG_BASE))
			v->name[vd.vd_ndx] = elf_strptr(f->e, sh.sh_link,
							va.vda_name);
		if (!vd.vd_next)
			break;
		off += vd.vd_next;
	}
	return 0;
}

/* Symbols of one table; @table: enum pk_sym_table to report. */
struct filter {
	const char *prefix;	/* NULL: every symbol */
	size_t len;
	int mangled;		/* _Z... too */
};

static int scan_table(struct file *f, Elf_Scn *scn, const GElf_Shdr *sh,
		      int table, const struct filter *flt,
		      int (*fn)(const struct pk_elf_sym *, void *), void *ctx)
{
	Elf_Data *d = elf_getdata(scn, NULL), *vd = NULL;
	struct verdefs v = { 0 };
	const char *file = NULL;
	char buf[1024];
	int ret = 0;

	if (!d || !sh->sh_entsize)
		return 0;
	if (sh->sh_type == SHT_DYNSYM) {
		GElf_Shdr vsh;
		Elf_Scn *vs = find_scn(f, NULL, SHT_GNU_versym, &vsh);

		vd = vs ? elf_getdata(vs, NULL) : NULL;
		if (vd && verdefs_read(f, &v))
			return -ENOMEM;
	}
	for (size_t i = 0; !ret && i < sh->sh_size / sh->sh_entsize; i++) {
		struct pk_elf_sym es = { .table = table };
		GElf_Sym s;
		GElf_Versym vs;
		const char *nm, *at;

		if (!gelf_getsym(d, (int)i, &s))
			continue;
		nm = elf_strptr(f->e, sh->sh_link, s.st_name);
		if (GELF_ST_TYPE(s.st_info) == STT_FILE) {
			file = nm && *nm ? nm : NULL;
			continue;
		}
		if (!nm || (flt->prefix && flt->len &&
			    (nm[0] != flt->prefix[0] ||
			     strncmp(nm, flt->prefix, flt->len)) &&
			    !(flt->mangled && nm[0] == '_' && nm[1] == 'Z')))
			continue;	/* the cheap test first: most fail it */
		if (!*nm || s.st_shndx == SHN_UNDEF || !s.st_value ||
		    (GELF_ST_TYPE(s.st_info) != STT_FUNC &&
		     GELF_ST_TYPE(s.st_info) != STT_GNU_IFUNC))
			continue;
		es.name = nm;
		es.value = s.st_value;
		es.size = s.st_size;
		es.type = GELF_ST_TYPE(s.st_info);
		es.bind = GELF_ST_BIND(s.st_info);
		es.file = es.bind == STB_LOCAL ? file : NULL;
		if (vd && gelf_getversym(vd, (int)i, &vs)) {
			unsigned int ndx = vs & 0x7fff;

			if (ndx >= 2 && ndx < v.n && v.name[ndx]) {
				es.version = v.name[ndx];
				es.hidden = !!(vs & 0x8000);
			}
		} else if ((at = strchr(nm, '@')) && at != nm &&
			   (size_t)(at - nm) < sizeof(buf)) {
			memcpy(buf, nm, (size_t)(at - nm));
			buf[at - nm] = 0;
			es.name = buf;
			es.hidden = at[1] != '@';
			es.version = at + (es.hidden ? 1 : 2);
		}
		ret = fn(&es, ctx);
	}
	free(v.name);
	return ret;
}

struct fde_ctx {
	int (*fn)(const struct pk_elf_sym *, void *);
	void *ctx;
	uint64_t plt[4][2];	/* .plt, .plt.got, .plt.sec: stubs, not functions */
	int nplt;
};

static int one_fde(uint64_t start, uint64_t range, void *arg)
{
	struct fde_ctx *fc = arg;
	struct pk_elf_sym es = {
		.value = start, .size = range, .type = STT_FUNC,
		.bind = STB_LOCAL, .table = PK_SYM_EH_FRAME,
	};

	for (int i = 0; i < fc->nplt; i++)
		if (start >= fc->plt[i][0] && start < fc->plt[i][1])
			return 0;
	return fc->fn(&es, fc->ctx);
}

int pk_elf_scan(const char *path, unsigned int flags, const char *prefix,
		int (*fn)(const struct pk_elf_sym *s, void *ctx), void *ctx,
		struct pk_elf_info *info)
{
	struct filter flt = { prefix, prefix ? strlen(prefix) : 0,
			      !!(flags & PK_ELF_MANGLED) };
	struct file f, dbg = { .fd = -1 };
	struct fde_ctx fc = { fn, ctx, { { 0 } }, 0 };
	Elf_Scn *scn = NULL, *eh_frame = NULL, *debugdata = NULL;
	GElf_Shdr eh_sh = { 0 };
	GElf_Ehdr eh;
	int ret = 0;

	memset(info, 0, sizeof(*info));
	if (file_open(&f, path))
		return -ENOENT;
	if (gelf_getehdr(f.e, &eh))
		info->e_type = eh.e_type;
	while (!ret && (scn = elf_nextscn(f.e, scn))) {
		GElf_Shdr sh;
		const char *nm;

		if (!gelf_getshdr(scn, &sh))
			continue;
		nm = elf_strptr(f.e, f.shstrndx, sh.sh_name);
		if (nm && !strcmp(nm, "__pk_jump_table")) {
			info->jump_table = sh.sh_addr;
			info->jump_table_size = sh.sh_size;
		}
		if (sh.sh_type == SHT_SYMTAB)
			info->has_symtab = 1;
		if ((flags & PK_ELF_SYMS) &&
		    (sh.sh_type == SHT_SYMTAB || sh.sh_type == SHT_DYNSYM))
			ret = scan_table(&f, scn, &sh,
					 sh.sh_type == SHT_DYNSYM ? PK_SYM_DYNSYM
								  : PK_SYM_SYMTAB,
					 &flt, fn, ctx);
		if (nm && !strncmp(nm, ".plt", 4) && fc.nplt < 4) {
			fc.plt[fc.nplt][0] = sh.sh_addr;
			fc.plt[fc.nplt++][1] = sh.sh_addr + sh.sh_size;
		}
		if (nm && !strcmp(nm, ".eh_frame") && sh.sh_type == SHT_PROGBITS) {
			eh_frame = scn;
			eh_sh = sh;
		}
		if (nm && !strcmp(nm, ".gnu_debugdata") &&
		    sh.sh_type == SHT_PROGBITS)
			debugdata = scn;
	}
	if (!ret && (flags & PK_ELF_FDES) && eh_frame) {
		Elf_Data *d = elf_getdata(eh_frame, NULL);

		if (d && d->d_buf) {
			int r = pk_eh_each_fde(d->d_buf, d->d_size,
					       eh_sh.sh_addr, one_fde, &fc);

			if (r < 0)
				ret = r;
		}
	}
	if (!ret && (flags & PK_ELF_DEBUG) && !info->has_symtab && debugdata) {
		struct file md;
		void *buf;

		if (!minidebug_open(&f, debugdata, path, &md, &buf)) {
			GElf_Shdr sh;

			scn = find_scn(&md, NULL, SHT_SYMTAB, &sh);
			if (scn) {
				ret = scan_table(&md, scn, &sh, PK_SYM_MINIDEBUG,
						 &flt, fn, ctx);
				/* Its identity is the file's (sym.c's cache). */
				snprintf(info->debug, sizeof(info->debug), "%s",
					 path);
			}
			elf_end(md.e);
			free(buf);
			if (scn) {
				file_close(&f);
				return ret;
			}
		}
	}
	if (!ret && (flags & PK_ELF_DEBUG) && !info->has_symtab &&
	    !debug_open(&f, path, &dbg, info->debug, sizeof(info->debug))) {
		GElf_Shdr sh;

		scn = find_scn(&dbg, NULL, SHT_SYMTAB, &sh);
		if (scn)
			ret = scan_table(&dbg, scn, &sh, PK_SYM_DEBUG, &flt, fn,
					 ctx);
		else
			info->debug[0] = 0;
		file_close(&dbg);
	}
	file_close(&f);
	return ret;
}

int pk_elf_irelative(const char *path, uint64_t resolver, uint64_t *slot)
{
	struct file f;
	Elf_Scn *scn = NULL;
	int ret = -ENOENT;

	if (file_open(&f, path))
		return -ENOENT;
	while (ret && (scn = elf_nextscn(f.e, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA ||
		    !sh.sh_entsize || !(d = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Rela r;

			if (!gelf_getrela(d, (int)i, &r) ||
			    GELF_R_TYPE(r.r_info) != R_X86_64_IRELATIVE ||
			    (uint64_t)r.r_addend != resolver)
				continue;
			*slot = r.r_offset;
			ret = 0;
			break;
		}
	}
	file_close(&f);
	return ret;
}

size_t pk_elf_build_id(const char *path, uint8_t *id, size_t cap)
{
	struct file f;
	size_t n;

	if (file_open(&f, path))
		return 0;
	n = build_id(&f, id, cap);
	file_close(&f);
	return n;
}
