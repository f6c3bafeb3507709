// SPDX-License-Identifier: MIT
/* sym.c - functions of the loaded objects by spec (names, versions, globs, C++ names, files, offsets) and by address. */

/*
 * Specs: include/probekit/sym.h. Objects are what dl_iterate_phdr() lists
 * (the executable, named by its file, and every loaded library, dlopen'ed
 * ones included); a spec whose OBJECT is a path no loaded object has is
 * read from that file (pk_sym_each() only).
 *
 * Which definition a plain name means, as the dynamic linker binds it:
 *   1. its default version only (NAME@@V, or unversioned); a compat
 *      version (NAME@V) only when it is all there is and one address;
 *   2. global and weak definitions: the first object in load order
 *      (interposition: the executable before its libraries);
 *   3. otherwise local ones (static functions): exactly one address must
 *      carry the name, else -EINVAL (ambiguous; FILE#NAME or an offset
 *      tells them apart).
 * The same address under several tables is one function, reported from
 * .dynsym. An IFUNC is resolved by the dynamic linker itself: dlvsym() or
 * dlsym() on the handle of the object that defines it (dlopen with
 * RTLD_NOLOAD: nothing new is loaded), then named and sized by the
 * object's index (below).
 *
 * Names (specs): each file's function symbols read once into the names
 * cache, sorted by name (below), so N specs do not read every object N
 * times. Files: a loaded object's are read from the file mapped
 * (object_file(): the path if it is still that file, else
 * /proc/self/map_files/, else none).
 *
 * The index (pk_sym_func_at(), offsets, IFUNC targets): one object's
 * functions sorted by address, from every table and every FDE, cached for
 * the object last asked about, so that arming thousands of probes in one
 * library reads its file once (and, once verified, stat(2)s it no more
 * until another object is loaded: cache.seen_adds). A symbol covering an
 * address wins over an FDE; an FDE sizes what no symbol does (stripped
 * executables, a stripped libc's IFUNC implementations with no debug file
 * installed).
 */
#include <dlfcn.h>
#include <errno.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <link.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <probekit/sym.h>

#include "internal.h"
#include "probe/probe.h"
#include "sym/sym.h"
#include "sym/spec.h"
#include "util/maps.h"

/* ------------------------------------------------------------- objects */

struct object {
	char path[PATH_MAX];
	uintptr_t bias;
	int exe;		/* the executable (dlpi_name "") */
	uintptr_t addr;		/* where its first PT_LOAD is mapped */
	uint8_t id[PK_BUILD_ID_MAX];	/* its build id, read in memory */
	size_t id_len;
};

struct objects {
	struct object *o;
	size_t n, cap;
	int nomem;
};

static int exe_path(char *buf, size_t cap)
{
	ssize_t l = readlink("/proc/self/exe", buf, cap - 1);

	if (l <= 0)
		return -ENOENT;
	buf[l] = 0;
	return 0;
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

size_t pk_note_build_id(const uint8_t *p, size_t size, uint8_t *id)
{
	size_t at = 0;

	while (at + 12 <= size) {
		uint32_t nsz = get32(p + at), dsz = get32(p + at + 4),
			 type = get32(p + at + 8);
		size_t name = at + 12, desc = name + ((nsz + 3) & ~3u);

		if (desc + dsz > size || desc < name)
			break;
		if (type == NT_GNU_BUILD_ID && nsz == 4 &&
		    !memcmp(p + name, "GNU", 4) && dsz && dsz <= PK_BUILD_ID_MAX) {
			memcpy(id, p + desc, dsz);
			return dsz;
		}
		at = desc + ((dsz + 3) & ~3u);
	}
	return 0;
}

/* @o's first mapped address and in-memory build id, from @info. */
static void object_phdrs(struct object *o, const struct dl_phdr_info *info)
{
	o->addr = 0;
	o->id_len = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];

		if (ph->p_type == PT_LOAD && !o->addr)
			o->addr = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_NOTE && !o->id_len)
			o->id_len = pk_note_build_id(
				(const uint8_t *)(info->dlpi_addr + ph->p_vaddr),
				ph->p_filesz, o->id);
	}
}

static int list_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct objects *os = arg;
	struct object *o;

	(void)size;
	if (PK_GROW(&os->o, &os->cap, os->n + 1)) {
		os->nomem = 1;
		return 1;
	}
	o = &os->o[os->n];
	o->bias = info->dlpi_addr;
	o->exe = !info->dlpi_name || !*info->dlpi_name;
	object_phdrs(o, info);
	if (o->exe ? exe_path(o->path, sizeof(o->path)) :
		     (size_t)snprintf(o->path, sizeof(o->path), "%s",
				      info->dlpi_name) >= sizeof(o->path))
		return 0;
	os->n++;	/* the vDSO and deleted files: pk_elf_scan() skips them */
	return 0;
}

/* The loaded objects, in load order: a snapshot (no loader lock held after). */
static int objects_get(struct objects *os)
{
	memset(os, 0, sizeof(*os));
	dl_iterate_phdr(list_object, os);
	if (os->nomem) {
		free(os->o);
		return -ENOMEM;
	}
	return 0;
}

/*
 * The file to read a loaded object's symbols from: its path if that is
 * still the file mapped (the same build id, or where either has none the
 * same device and inode as the mapping), else the mapping itself through
 * /proc/self/map_files/ (where this process may open it: CAP_SYS_ADMIN or
 * CAP_CHECKPOINT_RESTORE), else none: a library replaced on disk since it
 * was loaded has other addresses. Results are kept for the path's
 * identity (device, inode, size, mtime) and the object's load bias.
 */
static pthread_mutex_t verify_lock = PTHREAD_MUTEX_INITIALIZER;
static struct verified {		/* guarded by verify_lock */
	char path[PATH_MAX];
	uintptr_t bias;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	int how;			/* 0: path, 1: map_files, -1: none */
	char map_files[64];		/* /proc/self/map_files/LO-HI */
} verified[64];
static unsigned int verified_next;	/* guarded by verify_lock */

static int same_stat(const struct verified *v, const struct stat *st)
{
	return v->dev == st->st_dev && v->ino == st->st_ino &&
	       v->size == st->st_size && v->mtime.tv_sec == st->st_mtim.tv_sec &&
	       v->mtime.tv_nsec == st->st_mtim.tv_nsec;
}

/* PROBEKIT_TEST_NO_MAP_FILES=1: as if map_files could not be opened (tests' copy only). */
static int test_no_map_files(void)
{
#ifdef PK_TEST_HOOKS
	return pk_env_flag("TEST_NO_MAP_FILES");
#else
	return 0;
#endif
}

static int object_verify(const struct object *o, const struct stat *st,
			 char *out, size_t cap)
{
	struct pk_maps ms = PK_MAPS_INIT;
	struct pk_mapinfo mi = { 0 };
	int same = -1, mapped;

	if (o->id_len) {
		uint8_t fid[PK_BUILD_ID_MAX];
		size_t fl = pk_elf_build_id(o->path, fid, sizeof(fid));

		same = fl == o->id_len && !memcmp(fid, o->id, fl);
	}
	mapped = !pk_maps_open(&ms, 0) && !pk_maps_find(&ms, o->addr, &mi) &&
		 mi.ino;
	pk_maps_close(&ms);
	if (same < 0 && mapped)
		same = makedev(mi.dev_major, mi.dev_minor) == st->st_dev &&
		       mi.ino == st->st_ino;
	if (same) {	/* or not known: the path, as the loader named it */
		snprintf(out, cap, "%s", o->path);
		return 0;
	}
	if (mapped && !test_no_map_files()) {
		int fd;

		snprintf(out, cap, "/proc/self/map_files/%" PRIxPTR "-%" PRIxPTR,
			 mi.lo, mi.hi);
		fd = open(out, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			close(fd);
			pk_dbg("sym: %s was replaced on disk: reading the "
			       "mapped file (%s)", o->path, out);
			return 0;
		}
	}
	out[0] = 0;
	pk_err("sym: %s is not the file loaded at %#" PRIxPTR " (replaced on "
	       "disk since it was loaded%s): its symbols are not read",
	       o->path, o->bias, o->id_len ? ", another build id" : "");
	return -ENOENT;
}

/* The file to read @o's symbols from into @out: 0, or -ENOENT (logged). */
static int object_file(const struct object *o, char *out, size_t cap)
{
	struct verified *v;
	struct stat st;
	int err;

	if (stat(o->path, &st))
		return -ENOENT;
	pthread_mutex_lock(&verify_lock);
	for (size_t i = 0; i < PK_ARRAY_SIZE(verified); i++) {
		v = &verified[i];
		if (v->bias == o->bias && same_stat(v, &st) &&
		    !strcmp(v->path, o->path)) {
			snprintf(out, cap, "%s", v->how ? v->map_files : o->path);
			if (v->how < 0)
				out[0] = 0;
			pthread_mutex_unlock(&verify_lock);
			if (!out[0])
				pk_err("sym: %s is not the file loaded at %#"
				       PRIxPTR " (replaced on disk since it was "
				       "loaded): its symbols are not read",
				       o->path, o->bias);
			return out[0] ? 0 : -ENOENT;
		}
	}
	pthread_mutex_unlock(&verify_lock);
	err = object_verify(o, &st, out, cap);
	pthread_mutex_lock(&verify_lock);
	v = &verified[verified_next++ % PK_ARRAY_SIZE(verified)];
	snprintf(v->path, sizeof(v->path), "%s", o->path);
	v->bias = o->bias;
	v->dev = st.st_dev;
	v->ino = st.st_ino;
	v->size = st.st_size;
	v->mtime = st.st_mtim;
	v->how = err ? -1 : strcmp(out, o->path) != 0;
	snprintf(v->map_files, sizeof(v->map_files), "%s", v->how > 0 ? out : "");
	pthread_mutex_unlock(&verify_lock);
	return err;
}

/* -------------------------------------------------------------- specs */

struct spec {
	char buf[1024];
	const char *text;	/* the spec as given, for messages */
	const char *obj;	/* NULL: any */
	int obj_path;		/* obj holds '/': matched by dev/ino */
	int obj_stat;		/* 0: dev/ino below are obj's */
	dev_t dev;
	ino_t ino;
	int obj_glob;
	const char *file;	/* FILE#NAME, or NULL */
	const char *name;	/* NULL with an offset */
	const char *version;	/* NAME@V / NAME@@V, or NULL */
	int ver_default;	/* @@ */
	int has_offset;
	uint64_t offset;
	int name_glob;
	int cxx;		/* "::" or a parameter list: C++ as written */
	int params;		/* a parameter list given */
	char cname[1024];	/* the name without ABI tags: what name points to */
	int abi_tag;		/* the name had one */
	char key[128];		/* an identifier every match's mangled name holds */
	char norm[1024];	/* name without spaces, when params */
	char prefix[256];	/* what every (unmangled) match starts with */
};

static int has_glob(const char *s)
{
	return !!strpbrk(s, "*?[");
}

static void squeeze(char *dst, size_t cap, const char *src)
{
	size_t n = 0;

	for (; *src && n + 1 < cap; src++)
		if (*src != ' ')
			dst[n++] = *src;
	dst[n] = 0;
}

/*
 * @src without its C++ ABI tags ("label[abi:cxx11](int)" -> "label(int)"):
 * the mangled name holds them (B5cxx11), users rarely write them, and
 * their '[' is no glob.
 */
static void strip_abi(char *dst, size_t cap, const char *src)
{
	size_t n = 0;

	while (*src && n + 1 < cap) {
		const char *end;

		if (!strncmp(src, "[abi:", 5) && (end = strchr(src, ']'))) {
			src = end + 1;
			continue;
		}
		dst[n++] = *src++;
	}
	dst[n] = 0;
}

static int is_ident(char c)
{
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9');
}

/*
 * Words of a C++ name as written that its mangled name never spells: the
 * standard library's abbreviations (St, Sa, Sb, Ss, Si, So, Sd), keywords
 * and built-in types (one letter each), operator names.
 */
static int unspelled(const char *w, size_t l)
{
	static const char *const words[] = {
		"std", "allocator", "basic_string", "string", "istream",
		"ostream", "iostream", "basic_istream", "basic_ostream",
		"basic_iostream", "operator", "const", "volatile", "void",
		"bool", "char", "short", "int", "long", "unsigned", "signed",
		"float", "double", "wchar_t", "char8_t", "char16_t", "char32_t",
		"auto", "decltype", "anonymous", "namespace", "lambda",
	};

	for (size_t i = 0; i < PK_ARRAY_SIZE(words); i++)
		if (strlen(words[i]) == l && !strncmp(w, words[i], l))
			return 1;
	return w[0] >= '0' && w[0] <= '9';
}

/*
 * An identifier every mangled name matching @sp spells out, or none: the
 * longest part of the qualified name itself (outside parameter lists,
 * template arguments, ABI tags and braces; before any operator), next to
 * no glob character and not a word unspelled() lists.
 */
static void spec_key(struct spec *sp)
{
	const char *s = sp->name, *best = NULL;
	size_t bl = 0;
	int depth = 0;

	while (*s) {
		const char *b = s;

		if (strchr("(<[{", *s)) {
			depth++;
			s++;
			continue;
		}
		if (strchr(")>]}", *s)) {
			depth -= depth > 0;
			s++;
			continue;
		}
		while (is_ident(*s))
			s++;
		if (s == b) {
			s++;
			continue;
		}
		if ((size_t)(s - b) == 8 && !strncmp(b, "operator", 8))
			break;	/* "operator<<": '<' is no bracket */
		if (!depth && (size_t)(s - b) > bl &&
		    (b == sp->name || !strchr("*?[]", b[-1])) &&
		    (!*s || !strchr("*?[]", *s)) && !unspelled(b, (size_t)(s - b))) {
			best = b;
			bl = (size_t)(s - b);
		}
	}
	if (best && bl < sizeof(sp->key)) {
		memcpy(sp->key, best, bl);
		sp->key[bl] = 0;
	}
}

/* Where the parameter list of demangled @d starts, or its end if none. */
static size_t params_at(const char *d);

static int spec_parse(const char *text, struct spec *sp)
{
	char *colon, *name, *at, *hash;

	memset(sp, 0, sizeof(*sp));
	sp->text = text;
	if (!text || !*text || strlen(text) >= sizeof(sp->buf))
		return -EINVAL;
	strcpy(sp->buf, text);
	name = sp->buf;
	colon = (char *)pk_spec_obj_colon(sp->buf);
	if (colon) {
		if (colon == sp->buf || !colon[1])
			return -EINVAL;
		*colon = 0;
		sp->obj = sp->buf;
		name = colon + 1;
		sp->obj_path = !!strchr(sp->obj, '/');
		sp->obj_glob = !sp->obj_path && has_glob(sp->obj);
		if (sp->obj_path) {
			struct stat st;

			sp->obj_stat = stat(sp->obj, &st);
			sp->dev = st.st_dev;
			sp->ino = st.st_ino;
		}
		if (name[0] == '0' && (name[1] == 'x' || name[1] == 'X')) {
			char *end;

			if (!strcmp(name + 2, "*")) {
				sp->has_offset = 2;	/* every function */
				return 0;
			}
			sp->offset = strtoull(name + 2, &end, 16);
			if (end == name + 2 || *end)
				return -EINVAL;
			sp->has_offset = 1;
			return 0;
		}
	}
	hash = strchr(name, '#');
	if (hash) {
		if (hash == name || !hash[1])
			return -EINVAL;
		*hash = 0;
		sp->file = name;
		name = hash + 1;
	}
	at = strchr(name, '@');
	if (at) {
		*at = 0;
		sp->ver_default = at[1] == '@';
		sp->version = at + 1 + sp->ver_default;
		if (!*sp->version)
			return -EINVAL;
	}
	if (!*name)
		return -EINVAL;
	strip_abi(sp->cname, sizeof(sp->cname), name);
	sp->abi_tag = strcmp(sp->cname, name) != 0;
	name = sp->cname;
	if (!*name)
		return -EINVAL;
	sp->name = name;
	sp->name_glob = has_glob(name);
	/* A list at its end ("(anonymous namespace)::f" has none). */
	sp->params = params_at(name) < strlen(name);
	sp->cxx = sp->params || strstr(name, "::") || strchr(name, '<') ||
		  strchr(name, '~') || sp->abi_tag;
	if (sp->params)
		squeeze(sp->norm, sizeof(sp->norm), name);
	snprintf(sp->prefix, sizeof(sp->prefix), "%.*s",
		 (int)strcspn(name, "*?["), name);
	spec_key(sp);
	return 0;
}

static int spec_many(const struct spec *sp)
{
	return sp->obj_glob || sp->has_offset == 2 || sp->name_glob || (sp->file && has_glob(sp->file));
}

/* @base as named, or each prefix of it that ends before a dot. */
static int base_matches(const char *base, const char *want, int glob)
{
	char b[NAME_MAX + 1];
	size_t l = strlen(base);

	if (l >= sizeof(b))
		return 0;
	memcpy(b, base, l + 1);
	for (;;) {
		if (glob ? !fnmatch(want, b, 0) : !strcmp(want, b))
			return 1;
		char *dot = strrchr(b, '.');

		if (!dot || dot == b)
			return 0;
		*dot = 0;
	}
}

static int object_matches(const struct spec *sp, const char *path)
{
	const char *base = strrchr(path, '/');
	struct stat st;

	if (!sp->obj)
		return 1;
	if (sp->obj_path)
		return !sp->obj_stat && !stat(path, &st) && st.st_dev == sp->dev &&
		       st.st_ino == sp->ino;
	return base_matches(base ? base + 1 : path, sp->obj, sp->obj_glob);
}

struct loaded_ctx {
	const struct spec *sp;
	int found;
};

static int loaded_one(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct loaded_ctx *c = arg;
	char exe[PATH_MAX];
	const char *path = info->dlpi_name;

	(void)size;
	if (!path || !*path)
		path = exe_path(exe, sizeof(exe)) ? "" : exe;
	c->found = *path && object_matches(c->sp, path);
	return c->found;
}

int pk_sym_spec_loaded(const char *spec)
{
	struct spec *sp = malloc(sizeof(*sp));
	struct loaded_ctx c = { sp, 1 };

	if (!sp)
		return 1;
	if (!spec_parse(spec, sp) && sp->obj && !sp->obj_path) {
		c.found = 0;
		dl_iterate_phdr(loaded_one, &c);
	}
	free(sp);
	return c.found;
}

/* ---------------------------------------------------------- demangling */

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);

/* The C++ runtime's demangler if this process has one loaded, else NULL. */
static demangle_fn demangler(void)
{
	return (demangle_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "__cxa_demangle");
}

/* Where the parameter list of demangled @d starts, or its end if none. */
static size_t params_at(const char *d)
{
	size_t l = strlen(d);
	static const char *const tails[] = { " const", " volatile", " &&", " &" };
	int depth = 0, again = 1;

	while (again) {
		again = 0;
		for (size_t i = 0; i < PK_ARRAY_SIZE(tails); i++) {
			size_t tl = strlen(tails[i]);

			if (l > tl && !strncmp(d + l - tl, tails[i], tl)) {
				l -= tl;
				again = 1;
			}
		}
	}
	if (!l || d[l - 1] != ')')
		return strlen(d);
	for (size_t i = l; i-- > 0;) {
		if (d[i] == ')')
			depth++;
		else if (d[i] == '(' && !--depth)
			return i ? i : strlen(d);
	}
	return strlen(d);
}

/*
 * Where the name in demangled @d (cut before its parameters at @end)
 * starts: after a template function's return type ("int ns::f<int>").
 */
static size_t name_at(const char *d, size_t end)
{
	size_t at = 0;
	int depth = 0;

	for (size_t i = 0; i < end; i++) {
		if (d[i] == '<' || d[i] == '(')
			depth++;
		else if ((d[i] == '>' || d[i] == ')') && depth)
			depth--;
		else if (d[i] == ' ' && !depth)
			at = i + 1;
	}
	if (at && strstr(d, "operator") && strstr(d, "operator") < d + at)
		return 0;	/* "operator new", "operator delete[]" */
	return at;
}

/* ------------------------------------------------------------- matches */

struct cand {
	uintptr_t addr;
	size_t size;
	int table, type, bind, hidden;
	size_t obj;		/* index into the objects */
	char *name;		/* as matched: demangled for C++ */
	char *raw;		/* the symbol's own name */
	char *version;
	char *file;
};

struct scan {
	const struct spec *sp;
	demangle_fn dem;
	size_t obj;
	uintptr_t bias;
	struct cand *c;
	size_t n, cap;
};

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

static void cands_free(struct scan *sc)
{
	for (size_t i = 0; i < sc->n; i++) {
		free(sc->c[i].name);
		free(sc->c[i].raw);
		free(sc->c[i].version);
		free(sc->c[i].file);
	}
	free(sc->c);
	sc->c = NULL;
	sc->n = sc->cap = 0;
}

/*
 * Whether symbol @raw is the name @sp asks for; *@shown receives the name
 * to report (malloc()ed demangled name, or NULL for @raw itself).
 */
static int name_matches(struct scan *sc, const char *raw, char **shown)
{
	const struct spec *sp = sc->sp;
	char *d, *t, tbuf[1024];
	size_t cut, skip, dl;
	int st = 0, ok;

	*shown = NULL;
	if (!sp->cxx && (sp->name_glob ? !fnmatch(sp->name, raw, 0) :
					 !strcmp(sp->name, raw)))
		return 1;
	if (!sc->dem || strncmp(raw, "_Z", 2) ||
	    (sp->key[0] && !strstr(raw, sp->key)))
		return 0;
	d = sc->dem(raw, NULL, NULL, &st);
	if (!d || st)
		return 0;
	/* Compared without ABI tags, shown with them. */
	dl = strlen(d) + 1;
	t = dl <= sizeof(tbuf) ? tbuf : malloc(dl);
	if (!t) {
		free(d);
		return 0;
	}
	strip_abi(t, dl, d);
	if (sp->params) {
		char n[1024];

		squeeze(n, sizeof(n), t + name_at(t, params_at(t)));
		ok = sp->name_glob ? !fnmatch(sp->norm, n, 0) : !strcmp(sp->norm, n);
	} else {
		cut = params_at(t);
		t[cut] = 0;
		skip = name_at(t, cut);
		ok = sp->name_glob ? !fnmatch(sp->name, t + skip, 0) :
				     !strcmp(sp->name, t + skip);
	}
	if (t != tbuf)
		free(t);
	if (ok)
		*shown = d;
	else
		free(d);
	return ok;
}

static int scan_one(const struct pk_elf_sym *s, void *arg)
{
	struct scan *sc = arg;
	const struct spec *sp = sc->sp;
	struct cand *c;
	char *shown;

	if (sp->version && (!s->version || strcmp(sp->version, s->version) ||
			    (sp->ver_default && s->hidden)))
		return 0;
	if (sp->file) {
		const char *f = s->file ? strrchr(s->file, '/') : NULL;

		f = f ? f + 1 : s->file;
		if (!f || (fnmatch(sp->file, f, 0) && fnmatch(sp->file, s->file, 0)))
			return 0;
	}
	if (!name_matches(sc, s->name, &shown))
		return 0;
	if (PK_GROW(&sc->c, &sc->cap, sc->n + 1)) {
		free(shown);
		return -ENOMEM;
	}
	c = &sc->c[sc->n];
	*c = (struct cand){
		.addr = sc->bias + s->value, .size = s->size, .table = s->table,
		.type = s->type, .bind = s->bind, .hidden = s->hidden,
		.obj = sc->obj, .name = shown ? shown : strdup(s->name),
		.raw = strdup(s->name), .version = dup_or_null(s->version),
		.file = dup_or_null(s->file),
	};
	sc->n++;
	if (!c->name || !c->raw || (s->version && !c->version) ||
	    (s->file && !c->file))
		return -ENOMEM;
	return 0;
}

/* ---------------------------------------------------------------- index */

struct func_ent {
	uintptr_t start;
	size_t size;
	int table;
	uint32_t name;		/* offset into names, or UINT32_MAX */
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

/*
 * Keyed by path, load bias, size, modification time and the debug
 * directory (a library
 * unloaded and another loaded at the same place under the same path is
 * read again if either changed: good enough for a cache whose misses
 * cost one file read).
 */
static struct {			/* guarded by cache_lock */
	char path[PATH_MAX];
	uintptr_t bias;
	dev_t dev;			/* the file's identity: a file replaced */
	ino_t ino;			/* by one of its size within the clock's */
	off_t file_size;		/* tick has its mtime too */
	struct timespec mtime;
	char debug_dir[PATH_MAX];	/* pk_elf_debug_dir() then */
	struct func_ent *f;
	size_t n, cap;
	char *names;
	size_t names_len, names_cap;
	uintptr_t jump_table;
	size_t jump_table_size;
	/*
	 * The loaded object this index was last verified to be of (its path
	 * and load bias while dlpi_adds was seen_adds - 1): until another
	 * object is loaded, the object at that bias is that one, so
	 * pk_sym_func_at() answers from the index without stat(2)ing the
	 * file again (two per call, the most a call cost). 0: none.
	 */
	unsigned long long seen_adds;
	uintptr_t seen_bias;
	char seen_path[PATH_MAX];
} cache;

static int ent_cmp(const void *a, const void *b)
{
	const struct func_ent *x = a, *y = b;

	if (x->start != y->start)
		return (x->start > y->start) - (x->start < y->start);
	return x->table - y->table;	/* .dynsym first, FDEs last */
}

static int ent_less(const struct func_ent *x, const struct func_ent *y)
{
	return x->start < y->start || (x->start == y->start && x->table < y->table);
}

/*
 * Sort @n entries as qsort() with ent_cmp() would order them (stable, so
 * also among equal keys qsort's order is one of the allowed ones): a merge
 * sort with the comparison inlined, through @tmp (@n entries). glibc's
 * qsort() took 5 % of arming every function of libxml2, most of it in
 * calls to ent_cmp().
 */
static void ent_sort(struct func_ent *a, struct func_ent *tmp, size_t n)
{
	size_t h;

	if (n < 16) {
		for (size_t i = 1; i < n; i++) {
			struct func_ent e = a[i];
			size_t j = i;

			for (; j && ent_less(&e, &a[j - 1]); j--)
				a[j] = a[j - 1];
			a[j] = e;
		}
		return;
	}
	h = n / 2;
	ent_sort(a, tmp, h);
	ent_sort(a + h, tmp, n - h);
	if (!ent_less(&a[h], &a[h - 1]))
		return;		/* already in order (FDE runs are) */
	memcpy(tmp, a, h * sizeof(*a));
	for (size_t i = 0, j = h, k = 0; i < h;)
		a[k++] = j < n && ent_less(&a[j], &tmp[i]) ? a[j++] : tmp[i++];
}

static int index_add(const struct pk_elf_sym *s, void *arg)
{
	uintptr_t bias = *(uintptr_t *)arg;
	uint32_t name = UINT32_MAX;

	if (!s->size || s->type != STT_FUNC)
		return 0;
	if (s->name) {
		size_t l = strlen(s->name) + 1;

		if (cache.names_len + l > UINT32_MAX ||
		    PK_GROW(&cache.names, &cache.names_cap, cache.names_len + l))
			return -ENOMEM;
		memcpy(cache.names + cache.names_len, s->name, l);
		name = (uint32_t)cache.names_len;
		cache.names_len += l;
	}
	if (PK_GROW(&cache.f, &cache.cap, cache.n + 1))
		return -ENOMEM;
	cache.f[cache.n++] = (struct func_ent){ bias + s->value, s->size,
						s->table, name };
	return 0;
}

static void index_drop(void)
{
	free(cache.f);
	free(cache.names);
	memset(&cache, 0, sizeof(cache));
}

/* The index of @path loaded at @bias into the cache. Caller holds cache_lock. */
static int index_fill(const char *path, uintptr_t bias)
{
	struct pk_elf_info *info;
	struct stat st;
	int err;

	if (stat(path, &st))
		return -ENOENT;
	if (cache.f && !strcmp(cache.path, path) && cache.bias == bias &&
	    cache.dev == st.st_dev && cache.ino == st.st_ino &&
	    cache.file_size == st.st_size &&
	    cache.mtime.tv_sec == st.st_mtim.tv_sec &&
	    cache.mtime.tv_nsec == st.st_mtim.tv_nsec &&
	    !strcmp(cache.debug_dir, pk_elf_debug_dir()))
		return 0;
	index_drop();
	info = malloc(sizeof(*info));
	if (!info)
		return -ENOMEM;
	err = pk_elf_scan(path, PK_ELF_SYMS | PK_ELF_DEBUG | PK_ELF_FDES, NULL,
			  index_add, &bias, info);
	if (err) {
		free(info);
		index_drop();
		return err;
	}
	if (info->jump_table) {
		cache.jump_table = bias + info->jump_table;
		cache.jump_table_size = info->jump_table_size;
	}
	free(info);
	if (cache.n > 1) {
		struct func_ent *tmp = malloc((cache.n / 2 + 1) * sizeof(*tmp));

		if (tmp)
			ent_sort(cache.f, tmp, cache.n);
		else
			qsort(cache.f, cache.n, sizeof(*cache.f), ent_cmp);
		free(tmp);
	}
	if (!cache.f && PK_GROW(&cache.f, &cache.cap, 1)) {
		index_drop();
		return -ENOMEM;
	}
	snprintf(cache.path, sizeof(cache.path), "%s", path);
	cache.bias = bias;
	cache.dev = st.st_dev;
	cache.ino = st.st_ino;
	cache.file_size = st.st_size;
	cache.mtime = st.st_mtim;
	snprintf(cache.debug_dir, sizeof(cache.debug_dir), "%s",
		 pk_elf_debug_dir());
	return 0;
}

/*
 * The function covering @addr in the cached index: a symbol's extent,
 * else an FDE's. Caller holds cache_lock. Return: 0, or -ENOENT.
 */
static int index_find(uintptr_t addr, struct pk_func *out)
{
	size_t i = PK_LOWER_BOUND(cache.n, k, cache.f[k].start <= addr);
	const struct func_ent *fde = NULL, *hit = NULL;

	/* The last function starting at or before @addr, then back over
	   aliases and nested symbols until one covers it. */
	while (i-- > 0) {
		const struct func_ent *f = &cache.f[i];

		if (addr < f->start + f->size) {
			if (f->table != PK_SYM_EH_FRAME) {
				hit = f;
				break;
			}
			if (!fde)
				fde = f;
		}
		if (addr - f->start > (1u << 24))
			break;	/* nothing that large: stop looking */
	}
	if (!hit)
		hit = fde;
	if (!hit)
		return -ENOENT;
	out->start = hit->start;
	out->size = hit->size;
	out->table = hit->table;
	out->name[0] = 0;
	/* Every entry of the same start: .dynsym preferred, the largest
	   symbol size, a name where any has one. */
	i = PK_LOWER_BOUND(cache.n, k, cache.f[k].start < hit->start);
	for (; i < cache.n && cache.f[i].start == hit->start; i++) {
		const struct func_ent *f = &cache.f[i];

		if (f->table == PK_SYM_EH_FRAME && hit->table != PK_SYM_EH_FRAME)
			continue;
		if (f->table < out->table)
			out->table = f->table;
		if (f->size > out->size)
			out->size = f->size;
		if (!out->name[0] && f->name != UINT32_MAX)
			snprintf(out->name, sizeof(out->name), "%s",
				 cache.names + f->name);
	}
	return 0;
}

struct addr_lookup {
	uintptr_t addr;
	int found_obj;
	unsigned long long adds;	/* dlpi_adds then */
	struct object o;
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
		al->adds = info->dlpi_adds;
		al->o.bias = info->dlpi_addr;
		object_phdrs(&al->o, info);
		if (info->dlpi_name && *info->dlpi_name)
			snprintf(al->o.path, sizeof(al->o.path), "%s",
				 info->dlpi_name);
		else if (exe_path(al->o.path, sizeof(al->o.path)))
			al->o.path[0] = 0;
		return 1;
	}
	return 0;
}

/* The file @o's symbols are read from (@on_disk: its path, not loaded). */
static int read_path(const struct object *o, int on_disk, char *out,
		     size_t cap)
{
	if (on_disk) {
		snprintf(out, cap, "%s", o->path);
		return 0;
	}
	return object_file(o, out, cap);
}

/*
 * pk_func_at() on object @o (@on_disk: as its file lies), known already.
 * @adds: dlpi_adds when @o was found loaded (0: not known), for the index
 * verified since no object was loaded (cache.seen_adds).
 */
static int func_in_gen(const struct object *o, int on_disk,
		       unsigned long long adds, uintptr_t addr,
		       struct pk_func *out)
{
	uintptr_t bias = on_disk ? 0 : o->bias;
	char *path;
	int err;

	if (!on_disk && adds) {
		pthread_mutex_lock(&cache_lock);
		if (cache.f && cache.seen_adds == adds + 1 &&
		    cache.seen_bias == o->bias &&
		    !strcmp(cache.seen_path, o->path) &&
		    !strcmp(cache.debug_dir, pk_elf_debug_dir())) {
			err = index_find(addr, out);
			out->jump_table = cache.jump_table;
			out->jump_table_size = cache.jump_table_size;
			pthread_mutex_unlock(&cache_lock);
			snprintf(out->object, sizeof(out->object), "%s", o->path);
			return err;
		}
		pthread_mutex_unlock(&cache_lock);
	}
	path = malloc(PATH_MAX);
	err = path ? read_path(o, on_disk, path, PATH_MAX) : -ENOMEM;
	if (!err) {
		pthread_mutex_lock(&cache_lock);
		err = index_fill(path, bias);
		if (!err) {
			err = index_find(addr, out);
			out->jump_table = cache.jump_table;
			out->jump_table_size = cache.jump_table_size;
			if (!on_disk && adds) {
				cache.seen_adds = adds + 1;
				cache.seen_bias = o->bias;
				snprintf(cache.seen_path, sizeof(cache.seen_path),
					 "%s", o->path);
			}
		}
		pthread_mutex_unlock(&cache_lock);
	}
	free(path);
	snprintf(out->object, sizeof(out->object), "%s", o->path);
	return err;
}

static int func_in(const struct object *o, int on_disk, uintptr_t addr,
		   struct pk_func *out)
{
	return func_in_gen(o, on_disk, 0, addr, out);
}

int pk_sym_func_at(uintptr_t addr, struct pk_func *out)
{
	struct addr_lookup *al = calloc(1, sizeof(*al));
	int err = -ENOENT;

	memset(out, 0, sizeof(*out));
	if (!al)
		return -ENOMEM;
	al->addr = addr;
	dl_iterate_phdr(find_object, al);
	if (al->found_obj && al->o.path[0])
		err = func_in_gen(&al->o, 0, al->adds, addr, out);
	free(al);
	return err;
}

/* ------------------------------------------------------------- results */

static void copy_str(char *dst, size_t cap, const char *src)
{
	size_t l = src ? strlen(src) : 0;

	if (l >= cap)
		l = cap - 1;
	memcpy(dst, src ? src : "", l);
	dst[l] = 0;
}

/* Keep the tail of a long path: the base name is what matters. */
static void copy_path(char *dst, size_t cap, const char *src)
{
	size_t l = strlen(src);

	if (l >= cap)
		src += l - (cap - 1);
	copy_str(dst, cap, src);
}

int (*pk_sym_func_at_hook)(uintptr_t addr, struct pk_func *out);

/*
 * The implementation IFUNC @c resolves to in this process, from the
 * dynamic linker (the object's own handle: its definition, not an
 * interposer's), into @out. Return: 0, or -EINVAL.
 */
static int ifunc_resolve(const struct cand *c, const struct object *o,
			 struct pk_sym *out)
{
	void *h = o->exe ? dlopen(NULL, RTLD_LAZY) :
			   dlopen(o->path, RTLD_LAZY | RTLD_NOLOAD);
	struct pk_func *fn;
	void *t = NULL;

	if (h) {
		t = c->version ? dlvsym(h, c->raw, c->version) : dlsym(h, c->raw);
		dlclose(h);
	}
	if (!t || c->bind == STB_LOCAL) {
		/* Not exported (a local IFUNC, or one of an executable built
		   without -rdynamic): the slot its IRELATIVE relocation
		   filled holds what its calls reach. */
		uint64_t slot;

		t = NULL;
		char path[PATH_MAX];

		if (!object_file(o, path, sizeof(path)) &&
		    !pk_elf_irelative(path, c->addr - o->bias, &slot))
			t = *(void *const *)(o->bias + (uintptr_t)slot);
	}
	if (!t) {
		pk_err("sym: \"%s\" is an IFUNC the dynamic linker does not "
		       "resolve here (%s, and no IRELATIVE relocation of it)",
		       c->name, c->bind == STB_LOCAL ? "a local symbol" :
		       "no handle or no such symbol");
		return -EINVAL;
	}
	fn = malloc(sizeof(*fn));
	if (!fn)
		return -ENOMEM;
	out->addr = (uintptr_t)t;
	out->size = 0;
	out->table = 0;
	if (!(pk_sym_func_at_hook ? pk_sym_func_at_hook((uintptr_t)t, fn) :
				    func_in(o, 0, (uintptr_t)t, fn)) &&
	    fn->start == (uintptr_t)t) {
		out->size = fn->size;
		out->table = fn->table;
		if (fn->name[0] && fn->table != PK_SYM_EH_FRAME)
			copy_str(out->impl, sizeof(out->impl), fn->name);
	}
	free(fn);
	if (!out->impl[0])
		snprintf(out->impl, sizeof(out->impl),
			 "%s (ifunc target at %#" PRIxPTR ")", c->name,
			 (uintptr_t)t - o->bias);
	pk_info("sym: %s is an IFUNC: its implementation here is %s at %#"
		PRIxPTR " (size %zu)", c->name, out->impl, out->addr, out->size);
	return 0;
}

/* @c of object @o as a pk_sym; 0, or -EINVAL/-ENOMEM (IFUNC). */
static int fill(const struct cand *c, const struct object *o, int on_disk,
		struct pk_sym *out)
{
	memset(out, 0, sizeof(*out));
	out->addr = c->addr;
	out->size = c->size;
	out->table = c->table;
	out->base = on_disk ? 0 : o->bias;
	out->flags = (c->bind != STB_LOCAL ? PK_SYM_F_GLOBAL : 0) |
		     (c->hidden ? PK_SYM_F_COMPAT : 0) |
		     (on_disk ? PK_SYM_F_FILE : 0);
	copy_path(out->object, sizeof(out->object), o->path);
	copy_str(out->name, sizeof(out->name), c->name);
	copy_str(out->version, sizeof(out->version), c->version);
	copy_str(out->file, sizeof(out->file), c->file);
	if (c->type != STT_GNU_IFUNC && !out->size) {
		/* A symbol with no size (hand-written assembly): its FDE's. */
		struct pk_func *fn = malloc(sizeof(*fn));

		if (!fn)
			return -ENOMEM;
		if (!func_in(o, on_disk, out->addr, fn) &&
		    fn->start == out->addr) {
			out->size = fn->size;
			out->table = fn->table;
		}
		free(fn);
	}
	if (c->type != STT_GNU_IFUNC)
		return 0;
	out->flags |= PK_SYM_F_IFUNC;
	if (on_disk) {
		out->flags |= PK_SYM_F_UNRESOLVED;
		return 0;
	}
	return ifunc_resolve(c, o, out);
}

static void cand_swap(struct cand *a, struct cand *b)
{
	struct cand t = *a;

	*a = *b;
	*b = t;
}

/*
 * Merge candidates of the same address, object and symbol type (an IFUNC
 * and its resolver share an address, not a function): the first kept
 * (.dynsym before .symtab), unless a later one is a default version and
 * the kept one a compat version (dlopen@GLIBC_2.2.5 and dlopen@@GLIBC_2.34
 * are one function, named by its default version: a compat one is hidden
 * only if every name of that address is); the largest size. Keeps order.
 */
static int cand_same(const struct cand *a, const struct cand *b)
{
	return a->addr == b->addr && a->obj == b->obj && a->type == b->type;
}

static size_t cand_hash(const struct cand *c)
{
	uint64_t h = (uint64_t)c->addr * 0x9e3779b97f4a7c15ull;

	h ^= ((uint64_t)c->obj << 8 | (uint8_t)c->type) * 0xc2b2ae3d27d4eb4full;
	return (size_t)(h ^ h >> 29);
}

/*
 * The kept entries are found through an open-addressing table of their
 * indexes (0: empty), not by scanning them all: a glob over libstdc++'s
 * 4 000 functions spent 10 ms here. Without memory for the table, the
 * scan.
 */
static void cands_dedup(struct scan *sc)
{
	size_t w = 0, cap = 16, *ht;

	while (cap < 2 * sc->n)
		cap *= 2;
	ht = calloc(cap, sizeof(*ht));
	for (size_t i = 0; i < sc->n; i++) {
		struct cand *c = &sc->c[i];
		size_t j = w, slot = 0;

		if (ht) {
			for (slot = cand_hash(c) & (cap - 1); ht[slot];
			     slot = (slot + 1) & (cap - 1))
				if (cand_same(&sc->c[ht[slot] - 1], c)) {
					j = ht[slot] - 1;
					break;
				}
		} else {
			for (j = 0; j < w; j++)
				if (cand_same(&sc->c[j], c))
					break;
		}
		if (j < w) {
			if (sc->c[j].hidden && !c->hidden) {
				/* The default version's name, the kept
				   entry's place (and table). */
				int table = sc->c[j].table;

				cand_swap(&sc->c[j], c);
				if (table < sc->c[j].table)
					sc->c[j].table = table;
			}
			if (c->size > sc->c[j].size)
				sc->c[j].size = c->size;
			if (c->bind != STB_LOCAL)
				sc->c[j].bind = c->bind;
			if (!sc->c[j].file && c->file && !strcmp(c->raw, sc->c[j].raw)) {
				sc->c[j].file = c->file;
				c->file = NULL;
			}
			free(c->name);
			free(c->raw);
			free(c->version);
			free(c->file);
			continue;
		}
		if (ht)
			ht[slot] = w + 1;
		sc->c[w++] = *c;
	}
	sc->n = w;
	free(ht);
}

/* Drop compat versions (NAME@V) where a default one exists, or always. */
static void cands_default(struct scan *sc, int always)
{
	size_t w = 0, dflt = 0;

	for (size_t i = 0; i < sc->n; i++)
		dflt += !sc->c[i].hidden;
	if (!dflt && !always)
		return;
	for (size_t i = 0; i < sc->n; i++) {
		if (!sc->c[i].hidden) {
			sc->c[w++] = sc->c[i];
			continue;
		}
		free(sc->c[i].name);
		free(sc->c[i].raw);
		free(sc->c[i].version);
		free(sc->c[i].file);
	}
	sc->n = w;
}

/* ----------------------------------------------------------- resolving */

struct resolve {
	struct spec sp;
	struct objects os;
	struct scan sc;
	int on_disk;		/* obj is a file no loaded object is */
	int objects_seen;
	struct pk_func fn;
};

/* By offset: the function starting @offset bytes into object @oi. */
static int by_offset(struct resolve *r, size_t oi, uint64_t offset,
		     struct pk_sym *out)
{
	const struct object *o = &r->os.o[oi];
	uintptr_t a = (r->on_disk ? 0 : o->bias) + (uintptr_t)offset;
	int err = func_in(o, r->on_disk, a, &r->fn);

	if (err) {
		pk_err("sym: \"%s\": no function covers offset %#" PRIx64
		       " of %s (no symbol, no FDE)", r->sp.text, offset,
		       o->path);
		return -ENOENT;
	}
	if (r->fn.start != a) {
		pk_err("sym: \"%s\": offset %#" PRIx64 " is %zu bytes into the "
		       "function at %#" PRIxPTR " (%s): name its start",
		       r->sp.text, offset, (size_t)(a - r->fn.start),
		       r->fn.start - (r->on_disk ? 0 : o->bias),
		       r->fn.name[0] ? r->fn.name : "no name");
		return -EINVAL;
	}
	memset(out, 0, sizeof(*out));
	out->addr = a;
	out->size = r->fn.size;
	out->table = r->fn.table;
	out->base = r->on_disk ? 0 : o->bias;
	out->flags = r->on_disk ? PK_SYM_F_FILE : 0;
	copy_path(out->object, sizeof(out->object), o->path);
	if (r->fn.name[0] && r->fn.table != PK_SYM_EH_FRAME)
		copy_str(out->name, sizeof(out->name), r->fn.name);
	else
		snprintf(out->name, sizeof(out->name), "%.400s+%#" PRIx64,
			 strrchr(o->path, '/') ? strrchr(o->path, '/') + 1 : o->path,
			 offset);
	return 0;
}

/*
 * The start of every function of object @oi (its index: symbols and
 * FDEs), as offsets from its load base, into a malloc()ed *@out.
 */
static int index_starts(struct resolve *r, size_t oi, uint64_t **out,
			size_t *n)
{
	const struct object *o = &r->os.o[oi];
	uintptr_t bias = r->on_disk ? 0 : o->bias, sym_end = 0;
	char path[PATH_MAX];
	int err;

	*out = NULL;
	*n = 0;
	err = read_path(o, r->on_disk, path, sizeof(path));
	if (err)
		return err;
	pthread_mutex_lock(&cache_lock);
	err = index_fill(path, bias);
	if (!err && cache.n) {
		*out = malloc(cache.n * sizeof(**out));
		if (!*out)
			err = -ENOMEM;
	}
	for (size_t i = 0; !err && i < cache.n; i++) {
		const struct func_ent *f = &cache.f[i];

		if (f->table != PK_SYM_EH_FRAME && f->start + f->size > sym_end)
			sym_end = f->start + f->size;
		if (*n && (*out)[*n - 1] == f->start - bias)
			continue;
		/* An FDE inside any symbol's extent (setcontext's and
		   __clone's nested FDEs, a cold part) is not a function. */
		if (f->table == PK_SYM_EH_FRAME && f->start < sym_end)
			continue;
		(*out)[(*n)++] = f->start - bias;
	}
	pthread_mutex_unlock(&cache_lock);
	return err;
}

static int resolve_start(struct resolve *r, const char *spec)
{
	int err = spec_parse(spec, &r->sp);

	if (err) {
		pk_err("sym: \"%s\": not [OBJECT:]NAME[@VERSION], "
		       "[OBJECT:]FILE#NAME or OBJECT:0xOFFSET", spec ? spec : "");
		return err;
	}
	err = objects_get(&r->os);
	if (err)
		return err;
	r->sc.sp = &r->sp;
	r->sc.dem = demangler();
	if (r->sp.cxx && !r->sc.dem)
		pk_info("sym: \"%s\": no C++ runtime is loaded (no "
			"__cxa_demangle): only mangled names match", spec);
	for (size_t i = 0; i < r->os.n; i++)
		r->objects_seen += object_matches(&r->sp, r->os.o[i].path);
	if (!r->objects_seen && r->sp.obj_path && !r->sp.obj_stat) {
		/* A file no loaded object is: read it as it lies on disk. */
		struct object *o;

		if (PK_GROW(&r->os.o, &r->os.cap, 1))
			return -ENOMEM;
		o = &r->os.o[0];
		memset(o, 0, sizeof(*o));
		snprintf(o->path, sizeof(o->path), "%s", r->sp.obj);
		r->os.n = 1;
		r->on_disk = 1;
		r->objects_seen = 1;
	}
	if (r->sp.obj && !r->objects_seen) {
		pk_err("sym: \"%s\": no loaded object is %s%s", spec,
		       r->sp.obj_path ? "the file " : "called ", r->sp.obj);
		return -ENOENT;
	}
	return 0;
}

/*
 * The names cache: one file's function symbols (a table: its .dynsym and
 * .symtab, or its debug file's .symtab), read once and indexed, so that
 * each of thousands of specs costs a lookup per object rather than a
 * pass over every symbol of every object through libelf. Kept in file
 * order, with a hash by name (a name without glob characters: the only
 * entries that can match it, C++ ones aside), the list of mangled C++
 * names (_Z...: what a C++ name as written, or any name with a demangler
 * loaded, is compared with), and, made on the first glob with a literal
 * prefix, an order by name for the range with that prefix. Sorting libc's
 * names took 0.5 ms, most of a lookup by exact name (what every process
 * the agent starts in asks at least once: src/probe/noprobe.c).
 * Keyed by the file read (its device, inode, size, mtime; the debug
 * directory for the debug table): a file changed or replaced is read
 * again. Each symbol keeps its place in the file's order (seq): matches
 * are handed to scan_one() in that order, as a scan of the file would.
 */
struct nsym {
	uint64_t value, size;
	uint32_t name, version, file;	/* offsets into pool; UINT32_MAX: none */
	uint32_t seq;
	int8_t hidden, type, bind, table;
};

struct ntab {
	struct nsym *s;		/* in file order: s[i].seq == i */
	size_t n, cap;
	char *pool;
	size_t plen, pcap;
	uint32_t *hash;		/* by name: index + 1, 0 empty */
	size_t hmask;
	uint32_t *z;		/* the _Z... entries, in file order */
	size_t nz;
	uint32_t *by_name;	/* every entry by name, or NULL (not yet) */
};

static void ntab_free(struct ntab *t)
{
	free(t->s);
	free(t->pool);
	free(t->hash);
	free(t->z);
	free(t->by_name);
	memset(t, 0, sizeof(*t));
}

static size_t name_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;

	while (*s)
		h = (h ^ (uint8_t)*s++) * 1099511628211ull;
	return (size_t)(h ^ (h >> 32));
}

/* The hash and the _Z list of a table just read: 0, or -ENOMEM. */
static int ntab_index(struct ntab *t)
{
	size_t cap = 16;

	while (cap < 2 * t->n)
		cap *= 2;
	t->hash = calloc(cap, sizeof(*t->hash));
	t->z = malloc((t->n ? t->n : 1) * sizeof(*t->z));
	if (!t->hash || !t->z)
		return -ENOMEM;
	t->hmask = cap - 1;
	for (size_t i = 0; i < t->n; i++) {
		const char *nm = t->pool + t->s[i].name;
		size_t h = name_hash(nm) & t->hmask;

		while (t->hash[h])
			h = (h + 1) & t->hmask;
		t->hash[h] = (uint32_t)i + 1;
		if (nm[0] == '_' && nm[1] == 'Z')
			t->z[t->nz++] = (uint32_t)i;
	}
	return 0;
}

struct names {
	struct names *next;
	char path[PATH_MAX];
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	char debug_dir[PATH_MAX];	/* of t[1], when have[1] */
	char debug[PATH_MAX];		/* t[1]'s file, and its identity */
	struct stat debug_st;
	struct ntab t[2];		/* PK_ELF_SYMS, PK_ELF_DEBUG */
	int have[2];
};

#define NAMES_MAX 64
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
static struct names *names_cache;	/* guarded by names_lock; MRU first */

static uint32_t pool_add(struct ntab *t, const char *str, int *nomem)
{
	size_t l;
	uint32_t at;

	if (!str)
		return UINT32_MAX;
	l = strlen(str) + 1;
	if (t->plen + l >= UINT32_MAX || PK_GROW(&t->pool, &t->pcap, t->plen + l)) {
		*nomem = 1;
		return UINT32_MAX;
	}
	memcpy(t->pool + t->plen, str, l);
	at = (uint32_t)t->plen;
	t->plen += l;
	return at;
}

static int names_add(const struct pk_elf_sym *es, void *arg)
{
	struct ntab *t = arg;
	struct nsym *n;
	int nomem = 0;

	if (PK_GROW(&t->s, &t->cap, t->n + 1))
		return -ENOMEM;
	n = &t->s[t->n];
	n->value = es->value;
	n->size = es->size;
	n->name = pool_add(t, es->name, &nomem);
	n->version = pool_add(t, es->version, &nomem);
	n->file = pool_add(t, es->file, &nomem);
	n->seq = (uint32_t)t->n;
	n->hidden = (int8_t)es->hidden;
	n->type = (int8_t)es->type;
	n->bind = (int8_t)es->bind;
	n->table = (int8_t)es->table;
	t->n++;
	return nomem ? -ENOMEM : 0;
}

static int nsym_cmp(const void *a, const void *b, void *arg)
{
	const struct ntab *t = arg;
	const struct nsym *x = &t->s[*(const uint32_t *)a];
	const struct nsym *y = &t->s[*(const uint32_t *)b];
	int c = strcmp(t->pool + x->name, t->pool + y->name);

	return c ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

static int seq_cmp(const void *a, const void *b)
{
	const struct nsym *const *x = a, *const *y = b;

	return ((*x)->seq > (*y)->seq) - ((*x)->seq < (*y)->seq);
}

static void names_free(struct names *nm)
{
	for (int k = 0; k < 2; k++)
		ntab_free(&nm->t[k]);
	free(nm);
}

/* fork(): no list half-linked in a child. */
static void names_fork_prepare(void)
{
	pthread_mutex_lock(&verify_lock);
	pthread_mutex_lock(&names_lock);
}

static void names_fork_release(void)
{
	pthread_mutex_unlock(&names_lock);
	pthread_mutex_unlock(&verify_lock);
}

PK_ATFORK(sym_names, PK_RANK_SYM, names_fork_prepare, names_fork_release,
	  names_fork_release);

/*
 * Table @k (0: PK_ELF_SYMS, 1: PK_ELF_DEBUG) of file @path, read if not
 * cached. Caller holds names_lock. Return: 0 with *@out, or -ENOENT,
 * -ENOMEM.
 */
static int names_get(const char *path, int k, struct ntab **out)
{
	struct names **pp, *nm;
	struct pk_elf_info *info;
	struct stat st;
	size_t count = 0;
	int err;

	pk_assert_held(&names_lock);
	if (stat(path, &st))
		return -ENOENT;
	for (pp = &names_cache; (nm = *pp); pp = &nm->next)
		if (nm->dev == st.st_dev && nm->ino == st.st_ino &&
		    nm->size == st.st_size &&
		    nm->mtime.tv_sec == st.st_mtim.tv_sec &&
		    nm->mtime.tv_nsec == st.st_mtim.tv_nsec &&
		    !strcmp(nm->path, path))
			break;
	if (nm) {
		*pp = nm->next;		/* to the front */
	} else {
		nm = calloc(1, sizeof(*nm));
		if (!nm)
			return -ENOMEM;
		snprintf(nm->path, sizeof(nm->path), "%s", path);
		nm->dev = st.st_dev;
		nm->ino = st.st_ino;
		nm->size = st.st_size;
		nm->mtime = st.st_mtim;
	}
	nm->next = names_cache;
	names_cache = nm;
	for (pp = &nm->next; *pp;) {	/* the least recently used go */
		struct names *old = *pp;

		if (++count < NAMES_MAX) {
			pp = &old->next;
			continue;
		}
		*pp = old->next;
		names_free(old);
	}
	if (k && nm->have[1] &&
	    (strcmp(nm->debug_dir, pk_elf_debug_dir()) || stat(nm->debug, &st) ||
	     st.st_dev != nm->debug_st.st_dev || st.st_ino != nm->debug_st.st_ino ||
	     st.st_size != nm->debug_st.st_size ||
	     st.st_mtim.tv_sec != nm->debug_st.st_mtim.tv_sec ||
	     st.st_mtim.tv_nsec != nm->debug_st.st_mtim.tv_nsec)) {
		ntab_free(&nm->t[1]);
		nm->have[1] = 0;
	}
	if (!nm->have[k]) {
		struct ntab *t = &nm->t[k];

		ntab_free(t);
		info = malloc(sizeof(*info));
		if (!info)
			return -ENOMEM;
		err = pk_elf_scan(path, k ? PK_ELF_DEBUG : PK_ELF_SYMS, NULL,
				  names_add, t, info);
		if (!err && k) {
			/* No debug file: not kept (one may be installed). */
			snprintf(nm->debug, sizeof(nm->debug), "%s", info->debug);
			if (!info->debug[0] || stat(nm->debug, &nm->debug_st))
				err = 1;
		}
		free(info);
		if (err >= 0 && ntab_index(t))
			err = -ENOMEM;
		if (err < 0) {
			ntab_free(t);
			return err;
		}
		if (k)
			snprintf(nm->debug_dir, sizeof(nm->debug_dir), "%s",
				 pk_elf_debug_dir());
		nm->have[k] = !err;
	}
	*out = &nm->t[k];
	return 0;
}

static int names_push(const struct nsym ***v, size_t *n, size_t *cap,
		      const struct nsym *s)
{
	if (PK_GROW(v, cap, *n + 1))
		return -ENOMEM;
	(*v)[(*n)++] = s;
	return 0;
}

/*
 * The entries of @t named @name exactly (@exact), or whose name starts
 * with @name ("": all), into @v. Caller holds names_lock (the order by
 * name is made here, once).
 */
static int names_range(struct ntab *t, const char *name, int exact,
		       const struct nsym ***v, size_t *n, size_t *cap)
{
	size_t pl = strlen(name), i;

	if (exact) {
		for (size_t h = name_hash(name) & t->hmask; t->hash[h];
		     h = (h + 1) & t->hmask)
			if (!strcmp(t->pool + t->s[t->hash[h] - 1].name, name) &&
			    names_push(v, n, cap, &t->s[t->hash[h] - 1]))
				return -ENOMEM;
		return 0;
	}
	if (!pl || !strcmp(name, "_Z")) {
		for (i = 0; i < (pl ? t->nz : t->n); i++)
			if (names_push(v, n, cap, &t->s[pl ? t->z[i] : i]))
				return -ENOMEM;
		return 0;
	}
	if (!t->by_name) {
		t->by_name = malloc((t->n ? t->n : 1) * sizeof(*t->by_name));
		if (!t->by_name)
			return -ENOMEM;
		for (i = 0; i < t->n; i++)
			t->by_name[i] = (uint32_t)i;
		if (t->n > 1)
			qsort_r(t->by_name, t->n, sizeof(*t->by_name), nsym_cmp, t);
	}
	i = PK_LOWER_BOUND(t->n, k, strcmp(t->pool + t->s[t->by_name[k]].name,
					   name) < 0);
	for (; i < t->n && !strncmp(t->pool + t->s[t->by_name[i]].name, name, pl);
	     i++)
		if (names_push(v, n, cap, &t->s[t->by_name[i]]))
			return -ENOMEM;
	return 0;
}

/*
 * Every candidate of every matching object into r->sc, from the tables
 * @flags names (PK_ELF_SYMS, PK_ELF_DEBUG): the symbols pk_elf_scan()'s
 * prefix filter would pass (the spec's literal prefix, and C++ names
 * where a demangler is loaded), from the names cache, in file order.
 */
static int resolve_scan_tables(struct resolve *r, unsigned int flags)
{
	const char *prefix = r->sp.cxx ? "_Z" : r->sp.prefix;
	int mangled = r->sc.dem && !r->sp.cxx && prefix[0] &&
		      strncmp(prefix, "_Z", 2);
	/*
	 * A plain name: only entries of that very name can match it (C++
	 * ones come from the _Z list), not every name it begins.
	 */
	int exact = !r->sp.cxx && !r->sp.name_glob && r->sp.name &&
		    !strcmp(prefix, r->sp.name);
	const struct nsym **v = NULL;
	size_t nv, cap = 0;
	char *path = malloc(PATH_MAX);
	int err = 0;

	if (!path)
		return -ENOMEM;
	for (size_t i = 0; !err && i < r->os.n; i++) {
		const struct object *o = &r->os.o[i];
		struct ntab *t;

		if (!r->on_disk && !object_matches(&r->sp, o->path))
			continue;
		if (read_path(o, r->on_disk, path, PATH_MAX))
			continue;	/* the vDSO, a file replaced: logged */
		r->sc.obj = i;
		r->sc.bias = r->on_disk ? 0 : o->bias;
		pthread_mutex_lock(&names_lock);
		err = names_get(path, flags == PK_ELF_DEBUG, &t);
		nv = 0;
		if (!err)
			err = names_range(t, prefix, exact, &v, &nv, &cap);
		if (!err && mangled)
			err = names_range(t, "_Z", 0, &v, &nv, &cap);
		if (!err && nv > 1)
			qsort(v, nv, sizeof(*v), seq_cmp);
		for (size_t k = 0; !err && k < nv; k++) {
			const struct nsym *n = v[k];
			struct pk_elf_sym es = {
				.name = t->pool + n->name,
				.version = n->version == UINT32_MAX ? NULL : t->pool + n->version,
				.file = n->file == UINT32_MAX ? NULL : t->pool + n->file,
				.hidden = n->hidden, .value = n->value,
				.size = n->size, .type = n->type, .bind = n->bind,
				.table = n->table,
			};

			err = scan_one(&es, &r->sc);
		}
		pthread_mutex_unlock(&names_lock);
		if (err != -ENOMEM)
			err = 0;	/* an unreadable object: none */
	}
	free(v);
	free(path);
	if (err)
		return err;
	cands_dedup(&r->sc);
	return 0;
}

/*
 * Debug files (large) are read only where the object's own tables may
 * not be enough: for globs and source files, and for a name they lack.
 */
static int resolve_scan(struct resolve *r)
{
	int err = resolve_scan_tables(r, PK_ELF_SYMS);

	if (!err && (!r->sc.n || spec_many(&r->sp) || r->sp.file))
		err = resolve_scan_tables(r, PK_ELF_DEBUG);
	return err;
}

static void resolve_end(struct resolve *r)
{
	cands_free(&r->sc);
	free(r->os.o);
}

static int no_match(const struct resolve *r)
{
	const struct spec *sp = &r->sp;

	pk_err("sym: \"%s\": no function %s%s%s%s%s%s in %s%s", sp->text,
	       sp->name_glob ? "matches " : "of that name",
	       sp->name_glob ? sp->name : "",
	       sp->version ? " and version " : "", sp->version ? sp->version : "",
	       sp->file ? " in source file " : "", sp->file ? sp->file : "",
	       sp->obj ? sp->obj : "any loaded object",
	       sp->cxx && !r->sc.dem ? " (no C++ demangler loaded: only "
				       "mangled names match)" : "");
	return -ENOENT;
}

/* The one function a name without a glob means, into @out. */
static int resolve_one(struct resolve *r, struct pk_sym *out)
{
	struct scan *sc = &r->sc;
	int pick = -1;

	if (!r->sp.version) {
		cands_default(sc, 0);
		if (sc->n == 1 && sc->c[0].hidden)
			pk_info("sym: \"%s\": only a compat version exists: "
				"%s@%s", r->sp.text, sc->c[0].raw,
				sc->c[0].version);
		else if (sc->n > 1 && sc->c[0].hidden) {
			pk_err("sym: \"%s\" has no default version, %zu compat "
			       "ones (%s@%s, %s@%s...): name one", r->sp.text,
			       sc->n, sc->c[0].raw, sc->c[0].version,
			       sc->c[1].raw, sc->c[1].version);
			return -EINVAL;
		}
	}
	if (!sc->n)
		return no_match(r);
	for (size_t i = 1; i < sc->n; i++) {
		const struct cand *a = &sc->c[0], *b = &sc->c[i];

		if (strcmp(a->raw, b->raw)) {
			pk_err("sym: \"%s\" is overloaded: %s and %s (%zu in "
			       "all); give the parameter list", r->sp.text,
			       a->name, b->name, sc->n);
			return -EINVAL;
		}
	}
	for (size_t i = 0; i < sc->n && pick < 0; i++)
		if (sc->c[i].bind != STB_LOCAL)
			pick = (int)i;	/* load order: what the linker binds */
	if (pick < 0 && sc->n == 1)
		pick = 0;
	if (pick < 0) {
		const struct cand *a = &sc->c[0], *b = &sc->c[1];

		pk_err("sym: \"%s\" is ambiguous: %zu local functions carry "
		       "that name (first two in %s%s%s and %s%s%s); qualify it "
		       "as object:name or object:file.c#name, or name it by "
		       "object:0xOFFSET (%#" PRIxPTR ", %#" PRIxPTR ")",
		       r->sp.text, sc->n, r->os.o[a->obj].path,
		       a->file ? " " : "", a->file ? a->file : "",
		       r->os.o[b->obj].path, b->file ? " " : "",
		       b->file ? b->file : "", a->addr - r->os.o[a->obj].bias,
		       b->addr - r->os.o[b->obj].bias);
		return -EINVAL;
	}
	return fill(&sc->c[pick], &r->os.o[sc->c[pick].obj], r->on_disk, out);
}

int pk_sym_lookup(const char *spec, struct pk_sym *out)
{
	struct resolve *r;
	int err;

	if (!spec || !*spec || !out)
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	err = resolve_start(r, spec);
	if (!err && r->on_disk) {
		pk_err("sym: \"%s\": %s is not loaded in this process", spec,
		       r->sp.obj);
		err = -ENOENT;
	}
	if (!err && r->sp.has_offset) {
		size_t oi = r->os.n;

		for (size_t i = 0; i < r->os.n; i++)
			if (object_matches(&r->sp, r->os.o[i].path)) {
				if (oi < r->os.n) {
					pk_err("sym: \"%s\": %s names several "
					       "loaded objects", spec, r->sp.obj);
					err = -EINVAL;
					break;
				}
				oi = i;
			}
		if (!err && r->sp.has_offset == 2) {
			pk_err("sym: \"%s\": every function: one is needed here "
			       "(pk_sym_each() takes them all)", spec);
			err = -EINVAL;
		} else if (!err) {
			err = by_offset(r, oi, r->sp.offset, out);
		}
	} else if (!err) {
		err = resolve_scan(r);
		if (!err && spec_many(&r->sp)) {
			if (!r->sp.version)
				cands_default(&r->sc, 1);
			if (!r->sc.n)
				err = no_match(r);
			else if (r->sc.n > 1) {
				pk_err("sym: \"%s\" matches %zu functions (%s, "
				       "%s...): one is needed here "
				       "(pk_sym_each() takes them all)", spec,
				       r->sc.n, r->sc.c[0].name, r->sc.c[1].name);
				err = -EINVAL;
			}
		}
		if (!err)
			err = resolve_one(r, out);
	}
	if (!err)
		pk_dbg("sym: %s = %#" PRIxPTR " size %zu (table %d) %s%s%s of %s",
		       spec, out->addr, out->size, out->table, out->name,
		       out->version[0] ? "@" : "", out->version, out->object);
	resolve_end(r);
	free(r);
	return err;
}

int pk_sym_each(const char *spec, int (*fn)(const struct pk_sym *sym, void *ctx),
		void *ctx)
{
	struct resolve *r;
	struct pk_sym *s;
	uintptr_t *seen = NULL;
	size_t nseen = 0, cap = 0;
	int err, n = 0;

	if (!spec || !*spec || !fn)
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	s = malloc(sizeof(*s));
	if (!r || !s) {
		free(r);
		free(s);
		return -ENOMEM;
	}
	err = resolve_start(r, spec);
	if (err)
		goto out;
	if (r->sp.has_offset) {
		for (size_t i = 0; i < r->os.n; i++) {
			uint64_t one = r->sp.offset, *offs = &one;
			size_t noffs = 1;

			if (!r->on_disk && !object_matches(&r->sp, r->os.o[i].path))
				continue;
			if (r->sp.has_offset == 2) {
				err = index_starts(r, i, &offs, &noffs);
				if (err == -ENOMEM)
					goto out;
				err = 0;	/* an unreadable object: none */
			}
			for (size_t k = 0; k < noffs; k++) {
				if (by_offset(r, i, offs[k], s))
					continue;	/* logged */
				err = fn(s, ctx);
				if (err)
					break;
				n++;
			}
			if (offs != &one)
				free(offs);
			if (err)
				goto out;
		}
		err = n ? n : -ENOENT;
		goto out;
	}
	err = resolve_scan(r);
	if (err)
		goto out;
	if (!spec_many(&r->sp)) {
		err = resolve_one(r, s);
		if (!err)
			err = fn(s, ctx);
		err = err ? err : 1;
		goto out;
	}
	if (!r->sp.version)
		cands_default(&r->sc, 1);
	for (size_t i = 0; i < r->sc.n; i++) {
		const struct cand *c = &r->sc.c[i];
		uintptr_t key;
		size_t j;

		err = fill(c, &r->os.o[c->obj], r->on_disk, s);
		if (err == -ENOMEM)
			goto out;
		if (err)
			continue;	/* an IFUNC that does not resolve: logged */
		/* An unresolved IFUNC's address is its resolver's: a
		   function of its own too, not an alias of the IFUNC. */
		key = s->addr << 1 | !!(s->flags & PK_SYM_F_UNRESOLVED);
		for (j = 0; j < nseen && seen[j] != key; j++)
			;
		if (j < nseen)
			continue;	/* aliases, IFUNCs sharing a target */
		if (PK_GROW(&seen, &cap, nseen + 1)) {
			err = -ENOMEM;
			goto out;
		}
		seen[nseen++] = key;
		err = fn(s, ctx);
		if (err)
			goto out;
		n++;
	}
	err = n ? n : no_match(r);
out:
	free(seen);
	resolve_end(r);
	free(r);
	free(s);
	return err;
}
