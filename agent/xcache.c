// SPDX-License-Identifier: MIT
/* xcache.c - the symbol layer's and branch index's answers shared by the processes of a run: each exec'd program would otherwise read and index libc again (~5 ms). */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <fcntl.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "probe/probe.h"
#include "probe/xref.h"
#include "sym/sym.h"

/*
 * A jump probe is placed only where no direct branch of the object lands
 * in its displaced bytes (src/probe/xref.h): the first such check in an
 * object builds an index of the whole object's branches, 4 ms of CPU for
 * libc, and a process does that for every object it probes. Every
 * process of a run probes the same libc, so the agent keeps the answers,
 * not the index, in the run's directory (.xref: the command ignores
 * names starting with a dot, and removes it at the end), and a process
 * that finds its answer there never builds an index at all.
 *
 * An answer depends on the object's bytes and on the window asked about,
 * nothing else: it is keyed by the object's GNU build id (read from its
 * loaded notes, not its file, so a file replaced on disk since cannot be
 * mistaken for it) and the window's offset from the load bias and
 * length. Objects without a build id, and answers other than "none lands
 * there" and "one does, here" (errors are about this process: an
 * unreadable file, no memory), are never cached.
 *
 * The file is a sequence of fixed-size entries, appended with O_APPEND
 * (one write each: processes of a run append at once); each carries a
 * check word, and reading stops at the first entry that fails it (a
 * short write on a full file system, or anything a program put there).
 * A wrong entry can only come from a program of the run writing into
 * the run's private directory: it could as well write into its own
 * memory. The file is open only while the agent arms (pka_xcache_open()
 * to pka_xcache_close()): the program sees no descriptor of ours.
 * Reached through --wrap=pk_xref_lands_in (agent/CMakeLists.txt), in
 * the agent only: the library itself caches indexes per process.
 *
 * The same holds for pk_sym_func_at() (--wrap too): the extent of the
 * function covering an address is read from the object's symbol tables,
 * which the symbol layer loads and sorts whole on its first question
 * about an object (0.7 ms for libc's). Its answer (start, size, table, name,
 * the __pk_jump_table section) is kept the same way, relative to the
 * bias; the object's name is this process's, found as the symbol layer
 * finds it. Only found functions are kept.
 */
#define XC_MAGIC 0x70786333u	/* "pxc3" */
#define XC_ID_MAX 40

enum { XC_XREF = 1, XC_FUNC = 2, XC_SPEC = 3, XC_PLACE = 4, XC_LOOKUP = 5 };

struct xc_ent {
	uint32_t magic;
	uint16_t kind;		/* XC_XREF, XC_FUNC */
	uint16_t id_len;
	uint8_t id[XC_ID_MAX];
	uint64_t off, len;	/* the question: offsets from the load bias */
	int64_t ret;		/* the answer: 0 or 1 (XREF), 0 (FUNC) */
	uint64_t v[5];		/* and its figures, from the bias */
	char name[256];		/* XC_FUNC: the symbol's name, or "" */
	uint64_t check;
};

static int xc_fd = -1;
/* This program's path, as the symbol layer names the main object. */
static char xc_exe[4096];
/*
 * The link map's signature (lm_each()'s hash and ok) as of its last
 * dlpi_adds and dlpi_subs: the same for every spec of a plan, so it is
 * computed once (20 objects' build ids and names, for each of a
 * thousand specs, was a millisecond of start-up).
 */
static struct {
	unsigned long long adds, subs;
	uint64_t h;
	int ok, valid;
} lm_last;

static struct xc_ent *xc;
static size_t xc_n, xc_cap;
/* xc's entries by key (open addressing: index + 1, 0 empty), 2x xc_cap. */
static uint32_t *xc_tab;
static size_t xc_mask;

/* A word at a time (FNV-1a's scheme on 64-bit words): 46 steps an entry. */
static uint64_t xc_sum(const struct xc_ent *e)
{
	const uint64_t *w = (const uint64_t *)e;
	uint64_t h = 1469598103934665603ull;

	_Static_assert(offsetof(struct xc_ent, check) % 8 == 0,
		       "the check word follows whole words");
	for (size_t i = 0; i < offsetof(struct xc_ent, check) / 8; i++) {
		h = (h ^ w[i]) * 1099511628211ull;
		h ^= h >> 29;
	}
	return h;
}

/* The hash of what an entry answers: its kind and question. */
static size_t xc_hash(const struct xc_ent *e)
{
	uint64_t h = 1469598103934665603ull;
	const uint8_t *p = (const uint8_t *)&e->kind;

	for (size_t i = 0; i < offsetof(struct xc_ent, ret) -
				offsetof(struct xc_ent, kind); i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return (size_t)(h ^ (h >> 29));
}

static int xc_same(const struct xc_ent *a, const struct xc_ent *b)
{
	return a->kind == b->kind && a->off == b->off && a->len == b->len &&
	       a->id_len == b->id_len && !memcmp(a->id, b->id, a->id_len);
}

static void xc_index(size_t i)
{
	size_t h = xc_hash(&xc[i]) & xc_mask;

	while (xc_tab[h])
		h = (h + 1) & xc_mask;
	xc_tab[h] = (uint32_t)i + 1;
}

static const struct xc_ent *xc_find(const struct xc_ent *k)
{
	if (!xc_tab)
		return NULL;
	for (size_t h = xc_hash(k) & xc_mask; xc_tab[h]; h = (h + 1) & xc_mask)
		if (xc_same(&xc[xc_tab[h] - 1], k))
			return &xc[xc_tab[h] - 1];
	return NULL;
}

/* Room for @n entries, and the index rebuilt for them if it grew. */
static int xc_reserve(size_t n)
{
	size_t cap = xc_cap ? xc_cap : 64;
	struct xc_ent *ne;
	uint32_t *t;

	if (n <= xc_cap && xc_tab)
		return 0;
	while (cap < n)
		cap *= 2;
	ne = realloc(xc, cap * sizeof(*ne));
	if (!ne)
		return -ENOMEM;
	xc = ne;
	t = calloc(2 * cap, sizeof(*t));
	if (!t)
		return -ENOMEM;
	free(xc_tab);
	xc_tab = t;
	xc_mask = 2 * cap - 1;
	xc_cap = cap;
	for (size_t i = 0; i < xc_n; i++)
		xc_index(i);
	return 0;
}

static int xc_add(const struct xc_ent *e)
{
	if (xc_reserve(xc_n + 1))
		return -ENOMEM;
	xc[xc_n] = *e;
	xc_index(xc_n++);
	return 0;
}

int __wrap_pk_sym_func_at(uintptr_t addr, struct pk_func *out);

void pka_xcache_open(const char *dir)
{
	char path[4096];
	struct stat st;
	size_t n = 0;
	ssize_t got;

	if (xc_fd >= 0 || (size_t)snprintf(path, sizeof(path), "%s/.xref",
					   dir) >= sizeof(path))
		return;
	xc_fd = open(path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC |
			   O_NOFOLLOW, 0600);
	if (xc_fd < 0)
		return;
	/* An IFUNC's implementation: its extent from here too (sym.h). */
	pk_sym_func_at_hook = __wrap_pk_sym_func_at;
	/* The measured program may write the run directory: ours, or none. */
	if (fstat(xc_fd, &st) || !S_ISREG(st.st_mode) ||
	    st.st_uid != geteuid()) {
		close(xc_fd);
		xc_fd = -1;
		return;
	}
	got = readlink("/proc/self/exe", xc_exe, sizeof(xc_exe) - 1);
	xc_exe[got > 0 ? got : 0] = 0;
	lm_last.valid = 0;
	/* One read of the whole file, then as many entries as check out. */
	if (st.st_size < (off_t)sizeof(*xc) ||
	    st.st_size > (off_t)(1u << 26))
		return;
	if (xc_reserve((size_t)st.st_size / sizeof(*xc) + 1))
		return;
	got = pread(xc_fd, xc, (size_t)st.st_size / sizeof(*xc) * sizeof(*xc),
		    0);
	while (got > 0 && n < (size_t)got / sizeof(*xc)) {
		const struct xc_ent *e = &xc[n];

		if (e->magic != XC_MAGIC || e->id_len > XC_ID_MAX ||
		    e->kind < XC_XREF || e->kind > XC_LOOKUP ||
		    e->check != xc_sum(e))
			break;
		n++;
	}
	/* A question answered twice (two processes at once): the first. */
	for (size_t i = 0; i < n; i++)
		if (!xc_find(&xc[i])) {
			xc[xc_n] = xc[i];
			xc_index(xc_n++);
		}
}

void pka_xcache_close(void)
{
	pk_sym_func_at_hook = NULL;
	if (xc_fd >= 0)
		close(xc_fd);
	xc_fd = -1;
	free(xc);
	free(xc_tab);
	xc = NULL;
	xc_tab = NULL;
	xc_n = xc_cap = 0;
}

struct xc_find {
	uintptr_t addr;
	uintptr_t bias;
	const uint8_t *id;
	uint32_t id_len;
	int found;
};

/* The build id among @ph's notes, if it has one. */
static void note_id(struct dl_phdr_info *info, const ElfW(Phdr) *ph,
		    struct xc_find *f)
{
	const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
	const uint8_t *end = p + ph->p_memsz;

	while (p + sizeof(ElfW(Nhdr)) <= end) {
		const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
		const uint8_t *name = p + sizeof(*n);
		const uint8_t *desc = name + ((n->n_namesz + 3) & ~3u);

		if (desc + n->n_descsz > end)
			return;
		if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 &&
		    !memcmp(name, "GNU", 4) && n->n_descsz &&
		    n->n_descsz <= XC_ID_MAX) {
			f->id = desc;
			f->id_len = n->n_descsz;
			return;
		}
		p = desc + ((n->n_descsz + 3) & ~3u);
	}
}

static int find_obj(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct xc_find *f = arg;
	int in = 0;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum && !in; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;

		in = ph->p_type == PT_LOAD && (ph->p_flags & PF_X) &&
		     f->addr >= lo && f->addr - lo < ph->p_memsz;
	}
	if (!in)
		return 0;
	f->found = 1;
	f->bias = info->dlpi_addr;
	for (int i = 0; i < info->dlpi_phnum && !f->id; i++)
		if (info->dlpi_phdr[i].p_type == PT_NOTE)
			note_id(info, &info->dlpi_phdr[i], f);
	return 1;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ ((const uint8_t *)p)[i]) * 1099511628211ull;
	return h;
}

/* The object holding @addr and its build id into @e; 0 if uncacheable. */
static int xc_key(struct xc_ent *e, uint16_t kind, uintptr_t addr,
		  uint64_t len, uintptr_t *bias)
{
	struct xc_find f = { .addr = addr };

	if (xc_fd < 0)
		return 0;
	dl_iterate_phdr(find_obj, &f);
	if (!f.found || !f.id)
		return 0;
	memset(e, 0, sizeof(*e));
	e->magic = XC_MAGIC;
	e->kind = kind;
	e->id_len = (uint16_t)f.id_len;
	memcpy(e->id, f.id, f.id_len);
	e->off = addr - f.bias;
	e->len = len;
	*bias = f.bias;
	return 1;
}


/* Append @e (one write: entries of several processes never interleave). */
static void xc_put(struct xc_ent *e)
{
	e->check = xc_sum(e);
	if (write(xc_fd, e, sizeof(*e)) != (ssize_t)sizeof(*e)) {
		/* No room: the next process asks the library again. */
	}
	xc_add(e);
}

int __real_pk_xref_lands_in(uintptr_t lo, size_t len, uintptr_t *at);
int __wrap_pk_xref_lands_in(uintptr_t lo, size_t len, uintptr_t *at);

int __wrap_pk_xref_lands_in(uintptr_t lo, size_t len, uintptr_t *at)
{
	const struct xc_ent *c;
	struct xc_ent e;
	uintptr_t bias;
	int ret;

	if (!xc_key(&e, XC_XREF, lo, len, &bias))
		return __real_pk_xref_lands_in(lo, len, at);
	c = xc_find(&e);
	/* Any program of the run may write the file: a hit is checked. */
	if (c && (c->ret == 0 ||
		  (c->ret == 1 && bias + (uintptr_t)c->v[0] >= lo &&
		   bias + (uintptr_t)c->v[0] - lo < len))) {
		if (c->ret == 1)
			*at = bias + (uintptr_t)c->v[0];
		return (int)c->ret;
	}
	if (c)
		return __real_pk_xref_lands_in(lo, len, at);
	ret = __real_pk_xref_lands_in(lo, len, at);
	if (ret != 0 && ret != 1)
		return ret;
	e.ret = ret;
	e.v[0] = ret == 1 ? *at - bias : 0;
	xc_put(&e);
	return ret;
}

int __real_pk_sym_func_at(uintptr_t addr, struct pk_func *out);
int __wrap_pk_sym_func_at(uintptr_t addr, struct pk_func *out);

/* out->object as the symbol layer names it (src/probe/sym.c, find_object). */
static int object_name(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct pk_func *out = arg;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t s = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type != PT_LOAD || out->start < s ||
		    out->start >= s + ph->p_memsz)
			continue;
		if (info->dlpi_name && *info->dlpi_name) {
			snprintf(out->object, sizeof(out->object), "%s",
				 info->dlpi_name);
		} else {
			ssize_t l = readlink("/proc/self/exe", out->object,
					     sizeof(out->object) - 1);

			out->object[l > 0 ? l : 0] = 0;
		}
		return 1;
	}
	return 0;
}

int __wrap_pk_sym_func_at(uintptr_t addr, struct pk_func *out)
{
	const struct xc_ent *c;
	struct xc_ent e;
	uintptr_t bias;
	int ret;

	if (!xc_key(&e, XC_FUNC, addr, 0, &bias))
		return __real_pk_sym_func_at(addr, out);
	c = xc_find(&e);
	/* Checked: the function found holds @addr. */
	if (c && (bias + (uintptr_t)c->v[0] > addr || !c->v[1] ||
		  addr - (bias + (uintptr_t)c->v[0]) >= c->v[1]))
		return __real_pk_sym_func_at(addr, out);
	if (c) {
		memset(out, 0, sizeof(*out));
		out->start = bias + (uintptr_t)c->v[0];
		out->size = (size_t)c->v[1];
		out->table = (int)c->v[2];
		out->jump_table = c->v[3] ? bias + (uintptr_t)c->v[3] : 0;
		out->jump_table_size = (size_t)c->v[4];
		snprintf(out->name, sizeof(out->name), "%s", c->name);
		dl_iterate_phdr(object_name, out);
		return 0;
	}
	ret = __real_pk_sym_func_at(addr, out);
	if (ret)
		return ret;
	e.v[0] = out->start - bias;
	e.v[1] = out->size;
	e.v[2] = (uint64_t)out->table;
	e.v[3] = out->jump_table ? out->jump_table - bias : 0;
	e.v[4] = out->jump_table_size;
	snprintf(e.name, sizeof(e.name), "%s", out->name);
	xc_put(&e);
	return 0;
}

/*
 * Specs: what a spec names depends on every object of the link map (the
 * lookup order) and nothing else, so its answer (the function's object,
 * by its place in the link map, and its offset there) is keyed by the
 * spec and the build ids and names (the main program's: its path) of
 * all objects in order: a spec's OBJECT is matched by name, so the same
 * bytes under another name or path are not the object the spec names
 * (a byte copy of libz, libz.so for libz.so.1). Any object without a
 * build id: not cached. A hit saves the symbol lookup (~100 us a spec, most of
 * it a name search through every object's symbol table); the probe is
 * then created at the address, and checked as any other.
 */
struct lm_sig {
	uint64_t h;
	int ok;
	int n;
	/* pka_xcache_spec_get(): object @want's bias */
	int want;
	uintptr_t bias;
	/* pka_xcache_spec_put(): which object holds @addr */
	uintptr_t addr;
	int found;
};

static int lm_each(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct lm_sig *g = arg;
	struct xc_find f = { 0 };
	const char *name;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum && !f.id; i++)
		if (info->dlpi_phdr[i].p_type == PT_NOTE)
			note_id(info, &info->dlpi_phdr[i], &f);
	if (!f.id)
		g->ok = 0;
	else
		g->h = fnv(g->h, f.id, f.id_len);
	/*
	 * And its name: the symbol layer matches a spec's OBJECT by it
	 * (object_matches()), so a copy of a library under another name,
	 * or the same file by another path, is another question.
	 */
	name = info->dlpi_name && *info->dlpi_name ? info->dlpi_name :
	       xc_exe;
	g->h = fnv(g->h, name, strlen(name) + 1);
	if (g->n == g->want)
		g->bias = info->dlpi_addr;
	if (g->addr && !g->found) {
		f.addr = g->addr;
		if (find_obj(info, sizeof(*info), &f)) {
			g->found = 1;
			g->want = g->n;
			g->bias = info->dlpi_addr;
		}
	}
	g->n++;
	return 0;
}

static int lm_gen(struct dl_phdr_info *info, size_t size, void *arg)
{
	unsigned long long *gen = arg;

	(void)size;
	gen[0] = info->dlpi_adds;
	gen[1] = info->dlpi_subs;
	return 1;
}

static int spec_key(struct xc_ent *e, uint16_t kind, const char *spec,
		    struct lm_sig *g)
{
	unsigned long long gen[2] = { 0, 0 };
	uint64_t k[4];
	size_t len = strlen(spec);

	if (xc_fd < 0)
		return 0;
	dl_iterate_phdr(lm_gen, gen);
	if (!g->addr && lm_last.valid && lm_last.adds == gen[0] &&
	    lm_last.subs == gen[1]) {
		g->h = lm_last.h;
		g->ok = lm_last.ok;
	} else {
		g->h = 1469598103934665603ull;
		g->ok = 1;
		dl_iterate_phdr(lm_each, g);
		lm_last.adds = gen[0];
		lm_last.subs = gen[1];
		lm_last.h = g->h;
		lm_last.ok = g->ok;
		lm_last.valid = 1;
	}
	if (!g->ok || (g->addr && !g->found))
		return 0;
	k[0] = g->h;
	k[1] = fnv(1469598103934665603ull, spec, len);
	k[2] = fnv(0x9e3779b97f4a7c15ull, spec, len);
	k[3] = len;
	memset(e, 0, sizeof(*e));
	e->magic = XC_MAGIC;
	e->kind = kind;
	e->id_len = sizeof(k);
	memcpy(e->id, k, sizeof(k));
	return 1;
}

void *pka_xcache_spec_get(const char *spec)
{
	struct lm_sig g = { .want = -1 };
	const struct xc_ent *c;
	struct xc_ent e;

	if (!spec_key(&e, XC_SPEC, spec, &g) || !(c = xc_find(&e)))
		return NULL;
	g = (struct lm_sig){ .want = (int)c->v[0] };
	dl_iterate_phdr(lm_each, &g);
	if (g.want >= g.n)
		return NULL;
	return (void *)(g.bias + (uintptr_t)c->v[1]);
}

void pka_xcache_spec_put(const char *spec, void *addr)
{
	struct lm_sig g = { .want = -1, .addr = (uintptr_t)addr };
	struct xc_ent e;

	if (!addr || !spec_key(&e, XC_SPEC, spec, &g) || xc_find(&e))
		return;
	e.v[0] = (uint64_t)g.want;
	e.v[1] = (uintptr_t)addr - g.bias;
	xc_put(&e);
}

/*
 * pk_sym_lookup() (--wrap too), for the library's own lookups by name:
 * the probe layer's refused functions (src/probe/noprobe.c asks for
 * "libc.so.6:pthread_sigmask" once per process, 0.8 ms of reading and
 * sorting libc's symbols), a late spec by name (late.c). Keyed as specs
 * are (the spec and every object's build id and name, in link-map order); the
 * answer is the object's place in the link map, the offset from its
 * bias, size, table, flags, name and version. Only plain answers are
 * kept: no IFUNC (this process's resolver chose it), no file on disk,
 * no source file. A hit is checked: the object is there and the
 * address lies in one of its executable segments, else the library is
 * asked.
 */
struct lk_obj {
	int want, n;
	uintptr_t bias, addr;
	int exec;			/* addr in an executable PT_LOAD */
	char name[256];
	int exe;
};

/* The tail of a long path, as sym.c's copy_path() keeps it. */
static void lk_path(char *dst, size_t cap, const char *src)
{
	size_t l = strlen(src);

	if (l >= cap) {
		src += l - (cap - 1);
		l = cap - 1;
	}
	memcpy(dst, src, l);
	dst[l] = 0;
}

static int lk_each(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct lk_obj *g = arg;

	(void)size;
	if (g->n++ != g->want)
		return 0;
	g->bias = info->dlpi_addr;
	g->exe = !info->dlpi_name || !*info->dlpi_name;
	lk_path(g->name, sizeof(g->name), g->exe ? "" : info->dlpi_name);
	g->addr += info->dlpi_addr;
	for (int i = 0; i < info->dlpi_phnum && !g->exec; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;

		g->exec = ph->p_type == PT_LOAD && (ph->p_flags & PF_X) &&
			  g->addr >= lo && g->addr - lo < ph->p_memsz;
	}
	return 1;
}

int __real_pk_sym_lookup(const char *spec, struct pk_sym *out);
int __wrap_pk_sym_lookup(const char *spec, struct pk_sym *out);

int __wrap_pk_sym_lookup(const char *spec, struct pk_sym *out)
{
	struct lm_sig g = { .want = -1 };
	const struct xc_ent *c;
	struct xc_ent e;
	size_t nl, vl;
	int ret;

	if (!spec || !out || !spec_key(&e, XC_LOOKUP, spec, &g))
		return __real_pk_sym_lookup(spec, out);
	c = xc_find(&e);
	if (c) {
		struct lk_obj o = { .want = (int)c->v[0], .addr = c->v[1] };

		nl = strnlen(c->name, sizeof(c->name));
		vl = nl < sizeof(c->name) ?
		     strnlen(c->name + nl + 1, sizeof(c->name) - nl - 1) : 0;
		dl_iterate_phdr(lk_each, &o);
		if (o.exec && c->v[2] && nl && nl < sizeof(out->name) &&
		    nl + 1 + vl < sizeof(c->name) && vl < sizeof(out->version) &&
		    !(c->v[4] & ~(uint64_t)(PK_SYM_F_GLOBAL | PK_SYM_F_COMPAT)) &&
		    c->v[3] <= PK_SYM_EH_FRAME) {
			memset(out, 0, sizeof(*out));
			out->addr = o.addr;
			out->size = (size_t)c->v[2];
			out->table = (int)c->v[3];
			out->flags = (unsigned int)c->v[4];
			out->base = o.bias;
			if (o.exe) {
				char exe[4096];
				ssize_t l = readlink("/proc/self/exe", exe,
						     sizeof(exe) - 1);

				exe[l > 0 ? l : 0] = 0;
				lk_path(out->object, sizeof(out->object), exe);
			} else {
				lk_path(out->object, sizeof(out->object), o.name);
			}
			memcpy(out->name, c->name, nl);
			memcpy(out->version, c->name + nl + 1, vl);
			return 0;
		}
		return __real_pk_sym_lookup(spec, out);
	}
	ret = __real_pk_sym_lookup(spec, out);
	/* A failed lookup's @out is not written: nothing to read there. */
	if (ret)
		return ret;
	nl = strlen(out->name);
	vl = strlen(out->version);
	if ((out->flags & ~(unsigned int)(PK_SYM_F_GLOBAL |
						 PK_SYM_F_COMPAT)) ||
	    out->impl[0] || out->file[0] || !out->size ||
	    nl + 1 + vl + 1 > sizeof(e.name))
		return ret;
	/* Which object holds it, by place in the link map. */
	g = (struct lm_sig){ .want = -1, .addr = out->addr };
	if (!spec_key(&e, XC_LOOKUP, spec, &g) || g.bias != out->base ||
	    xc_find(&e))
		return ret;
	e.v[0] = (uint64_t)g.want;
	e.v[1] = out->addr - g.bias;
	e.v[2] = out->size;
	e.v[3] = (uint64_t)out->table;
	e.v[4] = out->flags;
	memcpy(e.name, out->name, nl + 1);
	memcpy(e.name + nl + 1, out->version, vl + 1);
	xc_put(&e);
	return ret;
}

/*
 * Placement: where in a function a probe goes and whether it can be a
 * jump (pk_probe_place(), --wrap too) is decided from the function's
 * original bytes, its extent and static-key table, and the branch index,
 * all of the object: decoding the whole function is most of what
 * creating a probe costs (~80 us for malloc). Keyed by the object's build
 * id, the function's offset and size, a hash of the bytes it was given,
 * and of the bytes after it it was given (avail), the probe's offset
 * and flags; only placements that succeeded are kept
 * (a refusal's message is the process's own).
 */
int __real_pk_probe_place(const struct pk_func *fn, const uint8_t *code,
			  size_t avail, size_t offset, int post,
			  int force_int3, const char *what,
			  struct pk_probe_place *out);
int __wrap_pk_probe_place(const struct pk_func *fn, const uint8_t *code,
			  size_t avail, size_t offset, int post,
			  int force_int3, const char *what,
			  struct pk_probe_place *out);

/*
 * A placement read back is what the agent patches: checked to lie in @fn,
 * its bytes within what was read of it, its kind and reason known ones.
 */
static int place_ok(const struct xc_ent *c, const struct pk_func *fn,
		    uintptr_t bias, size_t avail)
{
	uintptr_t addr = bias + (uintptr_t)c->v[0];
	uint64_t len = c->v[1], first = c->v[2], kind = c->v[3];
	uint64_t full = c->v[4] & 0xff, why = c->v[4] >> 8;

	if (addr < fn->start || addr - fn->start >= fn->size ||
	    addr - fn->start >= avail)
		return 0;
	if (!len || len > avail - (addr - fn->start) || len > 32 || !first ||
	    first > len || first > 15 || full > 1)
		return 0;
	if (kind == PK_PROBE_JUMP && len < 5)
		return 0;
	if (kind != PK_PROBE_JUMP && kind != PK_PROBE_INT3)
		return 0;
	return (why >= PK_PROBE_WHY_PLAIN && why <= PK_PROBE_WHY_PADDING) ||
	       (why >= PK_PROBE_WHY_FORCED && why <= PK_PROBE_WHY_RSEQ) ||
	       why == PK_PROBE_WHY_JOINED;
}

int __wrap_pk_probe_place(const struct pk_func *fn, const uint8_t *code,
			  size_t avail, size_t offset, int post,
			  int force_int3, const char *what,
			  struct pk_probe_place *out)
{
	const struct xc_ent *c;
	struct xc_ent e;
	uintptr_t bias;
	uint64_t h, o = offset;
	uint32_t flags = (post ? 1u : 0) | (force_int3 ? 2u : 0);
	int ret;

	if (!xc_key(&e, XC_PLACE, fn->start, fn->size, &bias) ||
	    e.id_len + sizeof(h) + sizeof(o) + sizeof(flags) > XC_ID_MAX)
		return __real_pk_probe_place(fn, code, avail, offset, post,
					     force_int3, what, out);
	h = fnv(1469598103934665603ull, code, avail);
	h = fnv(h, &avail, sizeof(avail));
	h = fnv(h, &fn->jump_table_size, sizeof(fn->jump_table_size));
	memcpy(e.id + e.id_len, &h, sizeof(h));
	memcpy(e.id + e.id_len + sizeof(h), &o, sizeof(o));
	memcpy(e.id + e.id_len + sizeof(h) + sizeof(o), &flags, sizeof(flags));
	e.id_len = (uint16_t)(e.id_len + sizeof(h) + sizeof(o) + sizeof(flags));
	c = xc_find(&e);
	if (c && !place_ok(c, fn, bias, avail))
		return __real_pk_probe_place(fn, code, avail, offset, post,
					     force_int3, what, out);
	if (c) {
		memset(out, 0, sizeof(*out));
		out->addr = bias + (uintptr_t)c->v[0];
		out->len = (uint8_t)c->v[1];
		out->first_len = (uint8_t)c->v[2];
		out->kind = (uint8_t)c->v[3];
		out->full = (uint8_t)c->v[4];
		out->reason = (uint8_t)(c->v[4] >> 8);
		return 0;
	}
	ret = __real_pk_probe_place(fn, code, avail, offset, post, force_int3,
				    what, out);
	if (ret)
		return ret;
	e.v[0] = out->addr - bias;
	e.v[1] = out->len;
	e.v[2] = out->first_len;
	e.v[3] = out->kind;
	e.v[4] = out->full | (uint64_t)out->reason << 8;
	xc_put(&e);
	return 0;
}

/* Each wrapper has its function's type: a changed signature fails here. */
static __typeof__(pk_probe_place) *const chk_place
	__attribute__((unused)) = __wrap_pk_probe_place;
static __typeof__(pk_sym_func_at) *const chk_func
	__attribute__((unused)) = __wrap_pk_sym_func_at;
static __typeof__(pk_sym_lookup) *const chk_lookup
	__attribute__((unused)) = __wrap_pk_sym_lookup;
static __typeof__(pk_xref_lands_in) *const chk_xref
	__attribute__((unused)) = __wrap_pk_xref_lands_in;
