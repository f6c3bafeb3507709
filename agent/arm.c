// SPDX-License-Identifier: MIT
/* arm.c - the agent expands a run's specs into functions (globs, IFUNCs), then arms them all as one batch, recording each probe's result and name. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "sym/spec.h"
#include "sym/sym.h"

/*
 * Two passes, so that the record can be sized for what the specs expand
 * to in this process (protocol.h: nprobe is known only here):
 *   pka_plan()  every spec through pk_sym_each() (or the run's xcache, for
 *               a spec without glob characters that another process of
 *               the run resolved), each function once by address: a
 *               function that several specs match belongs to the first
 *               of them (in spec order); the others do not count it;
 *   pka_arm()   a probe by address (.addr) per function, all registered
 *               as one batch; each probe's function name (demangled, and
 *               "NAME -> IMPL" for an IFUNC) goes into the record's pool.
 * A spec that matches nothing keeps one probe slot, for its status.
 */
struct plan_fn {
	uintptr_t addr;
	uint32_t spec;
	uint32_t seq;		/* order found: probes keep table order */
	char *name;		/* NULL: the spec names it (xcache) */
	char *obj;		/* while planning: its object's file name */
	int ifunc;		/* an IFUNC's target: this process's choice */
};

struct pka_plan {
	uint32_t nspec;
	struct plan_fn *fn;
	size_t nfn, cap;
	int32_t *status;	/* per spec: 0, or -errno of its expansion */
	char **why;		/* per spec: its first log line, or NULL */
	uint32_t *first, *count;	/* per spec, after dedup */
	uint32_t nprobe;
	size_t names;		/* pool bytes the names take */
	char *list;		/* the specs, split in place */
	char **spec;		/* per spec: its text */
	uint32_t *owner;	/* per spec: 1 + a spec that took one of its
				 * functions, or 0 */
	char **owned;		/* and that function's name, or NULL */
	struct plan_dup {	/* a function a later spec matched too */
		uint32_t spec;
		uintptr_t addr;
	} *dup;
	size_t ndup;
	/*
	 * Per spec all of whose functions other specs own: the owner's
	 * probes it shares, when they are consecutive ones (a spec given
	 * twice, a name a glob before it matched): it reports them too.
	 */
	uint32_t *alias_first, *alias_n;
	/*
	 * Per spec: probes reserved for libraries loaded later (a glob that
	 * matched nothing here: PKA_LATE_SLOTS), or 0.
	 */
	uint32_t *late;
};

/* Set once by pka_log_quiet(); NULL while planning (lines go to plan). */
static struct pka_header *log_rec;
static struct pka_plan *log_plan;
/* The spec whose failure a log line explains; -1: none (drop the line). */
static int cur_spec = -1;

/* Keep the first error line per spec; stay silent on the program's stderr. */
static void quiet_log(enum pk_log_level level, const char *msg, void *ctx)
{
	(void)ctx;
	if (level != PK_LOG_ERROR || cur_spec < 0)
		return;
	if (log_plan) {
		/* Whole: pk_log() lines are shorter than PKA_WHY_LEN. */
		if (!log_plan->why[cur_spec])
			log_plan->why[cur_spec] = strdup(msg);
		return;
	}
	if (log_rec)
		pka_record_why(log_rec, (uint32_t)cur_spec, msg);
}

void pka_log_spec(int i)
{
	cur_spec = i;
}

void pka_log_quiet(struct pka_header *h)
{
	log_rec = h;
	pk_set_log(quiet_log, NULL);
}

static int is_glob(const char *s)
{
	return strpbrk(s, "*?[") != NULL;
}

static int plan_add(struct pka_plan *pl, uint32_t spec, uintptr_t addr,
		    const char *name)
{
	struct plan_fn *f;

	if (pl->nfn == pl->cap) {
		size_t cap = pl->cap ? 2 * pl->cap : 64;

		f = realloc(pl->fn, cap * sizeof(*f));
		if (!f)
			return -ENOMEM;
		pl->fn = f;
		pl->cap = cap;
	}
	f = &pl->fn[pl->nfn];
	f->addr = addr;
	f->spec = spec;
	f->seq = (uint32_t)pl->nfn;
	f->name = NULL;
	f->ifunc = 0;
	f->obj = NULL;
	if (name && !(f->name = strdup(name)))
		return -ENOMEM;
	pl->nfn++;
	return 0;
}

/*
 * The functions of one spec from @at on came from several objects (a glob
 * over every object, 'str*'): name each OBJECT:NAME, as a spec would.
 */
static int plan_objects(struct pka_plan *pl, size_t at)
{
	int several = 0;

	for (size_t k = at + 1; k < pl->nfn && !several; k++)
		several = strcmp(pl->fn[k].obj ? pl->fn[k].obj : "",
				 pl->fn[at].obj ? pl->fn[at].obj : "") != 0;
	for (size_t k = at; k < pl->nfn; k++) {
		struct plan_fn *f = &pl->fn[k];
		char *name;

		if (several && f->obj && f->name) {
			if (asprintf(&name, "%s:%s", f->obj, f->name) < 0)
				return -ENOMEM;
			free(f->name);
			f->name = name;
		}
		free(f->obj);
		f->obj = NULL;
	}
	return 0;
}

/*
 * The agent's own object (and the library's, were it loaded) is never a
 * spec's: its functions are the agent's (its signal interposers are the
 * program's sigaction on the way to libc's, which is what is counted).
 */
extern const char __ehdr_start __attribute__((visibility("hidden")));

static int own_object(const struct pk_sym *s)
{
	const char *b = strrchr(s->object, '/');

	b = b ? b + 1 : s->object;
	return s->base == (uintptr_t)&__ehdr_start ||
	       !strncmp(b, "libprobekit-agent.so", 20) ||
	       !strncmp(b, "libprobekit.so", 14);
}

static size_t own_skipped;	/* functions own_object() left out */
static size_t first_only;	/* nonzero: keep one function, the first */

/* pk_sym_each() callback: one function of spec cur_spec. */
static int plan_sym(const struct pk_sym *s, void *ctx)
{
	struct pka_plan *pl = ctx;
	/* Whole: name, @version, " -> ", impl. */
	char name[sizeof(s->name) + sizeof(s->version) + sizeof(s->impl) + 8];

	/* A file not loaded, or an IFUNC left unresolved: nothing to probe. */
	if (s->flags & (PK_SYM_F_FILE | PK_SYM_F_UNRESOLVED))
		return 0;
	if (own_object(s)) {
		own_skipped++;
		return 0;
	}
	if (first_only && pl->nfn >= first_only)
		return 0;
	snprintf(name, sizeof(name), "%s%s%s%s%s", s->name,
		 (s->flags & PK_SYM_F_COMPAT) && s->version[0] ? "@" : "",
		 (s->flags & PK_SYM_F_COMPAT) ? s->version : "",
		 (s->flags & PK_SYM_F_IFUNC) && s->impl[0] ? " -> " : "",
		 (s->flags & PK_SYM_F_IFUNC) ? s->impl : "");
	const char *obj = strrchr(s->object, '/');
	int err = plan_add(pl, (uint32_t)cur_spec, s->addr, name);

	if (err)
		return err;
	pl->fn[pl->nfn - 1].ifunc = !!(s->flags & PK_SYM_F_IFUNC);
	obj = obj ? obj + 1 : s->object;
	/* The executable's path may be empty in its link map entry. */
	if (*obj && !(pl->fn[pl->nfn - 1].obj = strdup(obj)))
		return -ENOMEM;
	return 0;
}

static int by_addr(const void *a, const void *b)
{
	const struct plan_fn *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	if (x->spec != y->spec)
		return x->spec < y->spec ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int by_spec(const void *a, const void *b)
{
	const struct plan_fn *x = a, *y = b;

	if (x->spec != y->spec)
		return x->spec < y->spec ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int plan_dup(struct pka_plan *pl, uint32_t spec, uintptr_t addr)
{
	if (!(pl->ndup & (pl->ndup + 1)) || !pl->dup) {
		struct plan_dup *d = realloc(pl->dup, 2 * (pl->ndup + 1) *
					     sizeof(*d));

		if (!d)
			return -ENOMEM;
		pl->dup = d;
	}
	pl->dup[pl->ndup].spec = spec;
	pl->dup[pl->ndup++].addr = addr;
	return 0;
}

static int dup_cmp(const void *a, const void *b)
{
	const struct plan_dup *x = a, *y = b;

	if (x->spec != y->spec)
		return x->spec < y->spec ? -1 : 1;
	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Where an owned function's probe is: plan_alias()'s index. */
struct fn_at {
	uintptr_t addr;
	uint32_t probe;
};

static int at_cmp(const void *a, const void *b)
{
	const struct fn_at *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Fill alias_first/alias_n (after first[] and the sort by spec). */
static void plan_alias(struct pka_plan *pl)
{
	struct fn_at *at;
	size_t k, j;

	if (!pl->ndup || !(at = malloc(pl->nfn * sizeof(*at))))
		return;
	for (k = 0, j = 0; k < pl->nfn; k++) {
		uint32_t rank = k && pl->fn[k - 1].spec == pl->fn[k].spec ?
				(uint32_t)j + 1 : 0;

		j = rank;
		at[k].addr = pl->fn[k].addr;
		at[k].probe = pl->first[pl->fn[k].spec] + rank;
	}
	qsort(at, pl->nfn, sizeof(*at), at_cmp);
	qsort(pl->dup, pl->ndup, sizeof(*pl->dup), dup_cmp);
	for (k = 0; k < pl->ndup; k = j) {
		uint32_t sp = pl->dup[k].spec, lo = UINT32_MAX, hi = 0;

		for (j = k; j < pl->ndup && pl->dup[j].spec == sp; j++) {
			struct fn_at key = { .addr = pl->dup[j].addr }, *f;

			f = bsearch(&key, at, pl->nfn, sizeof(*at), at_cmp);
			if (!f)
				continue;
			lo = f->probe < lo ? f->probe : lo;
			hi = f->probe > hi ? f->probe : hi;
		}
		if (pl->count[sp] || pl->status[sp] || lo > hi ||
		    hi - lo + 1 != j - k)
			continue;
		pl->alias_first[sp] = lo;
		pl->alias_n[sp] = hi - lo + 1;
	}
	free(at);
}

void pka_plan_free(struct pka_plan *pl)
{
	if (!pl)
		return;
	for (size_t i = 0; i < pl->nfn; i++) {
		free(pl->fn[i].name);
		free(pl->fn[i].obj);
	}
	for (uint32_t i = 0; pl->why && i < pl->nspec; i++)
		free(pl->why[i]);
	for (uint32_t i = 0; pl->owned && i < pl->nspec; i++)
		free(pl->owned[i]);
	free(pl->owned);
	free(pl->owner);
	free(pl->dup);
	free(pl->alias_first);
	free(pl->alias_n);
	free(pl->late);
	free(pl->spec);
	free(pl->list);
	free(pl->why);
	free(pl->fn);
	free(pl->status);
	free(pl->first);
	free(pl->count);
	free(pl);
}

struct pka_plan *pka_plan(const char *specs)
{
	const char sep[] = { PKA_SEP, 0 };
	struct pka_plan *pl = calloc(1, sizeof(*pl));
	char *list = strdup(specs), *save = NULL, *s;
	uint32_t n = 1, i = 0;
	size_t k, w;
	int late = 0;
	/* Room for late globs in all: records stay small however many. */
	uint32_t late_left = PKA_LATE_BUDGET;
	int late_any = 0;

	for (const char *c = specs; *c; c++)
		n += *c == PKA_SEP;
	if (!pl || !list || n > PKA_SPECS_MAX)
		goto fail;
	pl->nspec = n;
	pl->status = calloc(n, sizeof(*pl->status));
	pl->why = calloc(n, sizeof(*pl->why));
	pl->first = calloc(n, sizeof(*pl->first));
	pl->count = calloc(n, sizeof(*pl->count));
	pl->spec = calloc(n, sizeof(*pl->spec));
	pl->owner = calloc(n, sizeof(*pl->owner));
	pl->owned = calloc(n, sizeof(*pl->owned));
	pl->alias_first = calloc(n, sizeof(*pl->alias_first));
	pl->alias_n = calloc(n, sizeof(*pl->alias_n));
	pl->late = calloc(n, sizeof(*pl->late));
	if (!pl->status || !pl->why || !pl->first || !pl->count ||
	    !pl->spec || !pl->owner || !pl->owned || !pl->alias_first ||
	    !pl->alias_n || !pl->late)
		goto fail;
	late = pka_late_possible();
	pl->list = list;
	log_plan = pl;
	pk_set_log(quiet_log, NULL);
	for (s = strtok_r(list, sep, &save); s && i < n;
	     s = strtok_r(NULL, sep, &save), i++) {
		/* Named in another process of the run: no lookup (xcache.c). */
		void *at = is_glob(s) ? NULL : pka_xcache_spec_get(s);
		size_t before = pl->nfn;
		int rc;

		cur_spec = (int)i;
		pl->spec[i] = s;
		if (at) {
			if (plan_add(pl, i, (uintptr_t)at, NULL))
				goto fail;
			continue;
		}
		own_skipped = 0;
		rc = pk_sym_each(s, plan_sym, pl);
		if (rc > 0 && pl->nfn == before && own_skipped &&
		    !strchr(s, ':')) {
			/*
			 * The name's first definition is the agent's (an
			 * interposer, "sigaction"): the program's calls go on
			 * to the next one in load order, which is the spec's.
			 */
			char *any;

			if (asprintf(&any, "*:%s", s) < 0)
				goto fail;
			first_only = before + 1;
			rc = pk_sym_each(any, plan_sym, pl);
			first_only = 0;
			free(any);
		}
		if (plan_objects(pl, before) || rc == -ENOMEM)
			goto fail;
		if (rc >= 0 && pl->nfn == before) {
			rc = -ENOENT;
			quiet_log(PK_LOG_ERROR, "every function it matches is in a "
				  "file not loaded in this process", NULL);
		}
		if (rc == -ENOENT && !pk_sym_spec_loaded(s)) {
			/*
			 * Its object is not in this process (yet): that, not
			 * the symbol layer's line, is what the report says.
			 */
			char msg[PKA_WHY_LEN];

			snprintf(msg, sizeof(msg), "%.*s not loaded", (int)
				 (pk_spec_obj_colon(s) - s), s);
			free(pl->why[i]);
			pl->why[i] = NULL;
			quiet_log(PK_LOG_ERROR, msg, NULL);
		}
		if (rc == -ENOENT && is_glob(s) && !pl->why[i]) {
			char msg[PKA_WHY_LEN];

			snprintf(msg, sizeof(msg), "no function matches \"%.400s\"",
				 s);
			quiet_log(PK_LOG_ERROR, msg, NULL);
		}
		pl->status[i] = rc < 0 ? rc : 0;
		/*
		 * A glob that matched nothing here may match a library the
		 * program loads later: room for its functions (late.c).
		 */
		if (late && rc == -ENOENT && is_glob(s) && pl->nfn == before &&
		    late_left > 1) {
			pl->late[i] = late_left < PKA_LATE_SLOTS ? late_left :
				      PKA_LATE_SLOTS;
			late_left -= pl->late[i];
		}
		/*
		 * An IFUNC's target is what this process's resolver chose
		 * (CPU, GLIBC_TUNABLES): another process of the same link
		 * map may choose another, so it is never cached.
		 */
		if (!is_glob(s) && pl->nfn == before + 1 &&
		    !pl->fn[before].ifunc)
			pka_xcache_spec_put(s, (void *)pl->fn[before].addr);
	}
	cur_spec = -1;
	log_plan = NULL;

	/* One probe per function: the first spec (in spec order) owns it. */
	if (pl->nfn)
		qsort(pl->fn, pl->nfn, sizeof(*pl->fn), by_addr);
	for (k = 0, w = 0; k < pl->nfn; k++) {
		if (w && pl->fn[w - 1].addr == pl->fn[k].addr) {
			/* Keep a name if the owner's came from the cache. */
			if (!pl->fn[w - 1].name && pl->fn[k].name &&
			    pl->fn[w - 1].spec == pl->fn[k].spec) {
				pl->fn[w - 1].name = pl->fn[k].name;
				pl->fn[k].name = NULL;
			}
			if (pl->fn[w - 1].spec != pl->fn[k].spec &&
			    plan_dup(pl, pl->fn[k].spec, pl->fn[k].addr))
				goto fail;
			/* Say which spec counts it, in the one that does not. */
			if (pl->fn[w - 1].spec != pl->fn[k].spec &&
			    !pl->owner[pl->fn[k].spec]) {
				pl->owner[pl->fn[k].spec] = pl->fn[w - 1].spec + 1;
				pl->owned[pl->fn[k].spec] = pl->fn[k].name;
				pl->fn[k].name = NULL;
			}
			free(pl->fn[k].name);
			continue;
		}
		pl->fn[w++] = pl->fn[k];
	}
	pl->nfn = w;
	if (pl->nfn)
		qsort(pl->fn, pl->nfn, sizeof(*pl->fn), by_spec);
	for (k = 0; k < pl->nfn; k++) {
		pl->count[pl->fn[k].spec]++;
		if (pl->fn[k].name)
			pl->names += strlen(pl->fn[k].name) + 1;
	}
	for (i = 0; i < n; i++) {
		pl->first[i] = pl->nprobe;
		/* A spec none of whose functions it owns keeps a slot. */
		pl->nprobe += pl->count[i] ? pl->count[i] :
			      pl->late[i] ? pl->late[i] : 1;
		pl->names += (size_t)pl->late[i] * PKA_LATE_NAME;
		late_any |= pl->late[i] != 0;
		if (pl->nprobe > PKA_SPECS_MAX * 4u)
			goto fail;
	}
	/*
	 * PKA_LATE_NAME is a C library's name (libcrypto's: 36 bytes on
	 * average); C++ names are twice that (libstdc++'s: 71): room for
	 * them whoever's slots they are in, once a record.
	 */
	if (late_any)
		pl->names += PKA_LATE_NAMES_EXTRA;
	plan_alias(pl);
	return pl;
fail:
	cur_spec = -1;
	log_plan = NULL;
	if (!pl || pl->list != list)
		free(list);
	pka_plan_free(pl);
	return NULL;
}

uint32_t pka_plan_nprobe(const struct pka_plan *pl)
{
	return pl ? pl->nprobe : 0;
}

uint32_t pka_plan_names(const struct pka_plan *pl)
{
	return pl && pl->names < UINT32_MAX / 2 ? (uint32_t)pl->names : 0;
}

void pka_record_name(struct pka_header *h, uint32_t i, const char *name)
{
	uint32_t len = (uint32_t)strlen(name) + 1, at;

	at = __atomic_fetch_add(&h->why_used, len, __ATOMIC_RELAXED);
	if (at > h->why_len || len > h->why_len - at)
		return;
	memcpy((char *)h + h->why_at + at, name, len);
	__atomic_store_n(&pka_record_probe(h, i)->name, at + 1,
			 __ATOMIC_RELEASE);
}

/* Set up spec @i's slots from the plan; the record made one per spec. */
static void plan_layout(struct pka_header *h, const struct pka_plan *pl)
{
	for (uint32_t i = 0; i < pl->nspec && i < h->nspec; i++) {
		struct pka_spec *sp = pka_record_spec(h, i);
		uint32_t c = pl->count[i] ? pl->count[i] :
			     pl->late[i] ? pl->late[i] : 1;

		sp->first = pl->first[i];
		sp->nprobe = c;
		for (uint32_t k = sp->first; k < sp->first + c; k++) {
			pka_record_probe(h, k)->spec = i;
			pka_record_probe(h, k)->status = PKA_PENDING;
		}
	}
	/*
	 * The names first: the pool was sized for them exactly, on top of
	 * the log lines' share, which many failures could use up.
	 */
	for (size_t k = 0, rank = 0; k < pl->nfn; k++) {
		rank = k && pl->fn[k - 1].spec == pl->fn[k].spec ? rank + 1 : 0;
		if (pl->fn[k].name)
			pka_record_name(h, pl->first[pl->fn[k].spec] + (uint32_t)rank,
				    pl->fn[k].name);
	}
	for (uint32_t i = 0; i < pl->nspec && i < h->nspec; i++)
		if (pl->why[i])
			pka_record_why(h, i, pl->why[i]);
}

/*
 * Arming's progress for the command's status line (protocol.h, version
 * 8): relaxed stores, a reader only shows them. A 4 000-function glob
 * stores 4 000 times into a line no handler writes; the cost is nil
 * beside pk_probe_create()'s ~40 us each.
 */
enum { ARM_PLANNED, ARM_DONE, ARM_STATE };

static void arm_progress(struct pka_header *h, int what, uint32_t v)
{
	uint32_t *f = what == ARM_PLANNED ? &h->arm_planned :
		      what == ARM_DONE ? &h->arm_done : &h->arm_state;

	__atomic_store_n(f, v, __ATOMIC_RELAXED);
}

void pka_arm(struct pka_header *h, const struct pka_plan *pl,
	     const struct pka_mode_ops *m)
{
	void **probes = NULL;
	uint32_t *idx = NULL, armed = 0;
	int rc;

	if (!pl || pl->nspec != h->nspec || pl->nprobe > h->nprobe)
		goto out;
	plan_layout(h, pl);
	arm_progress(h, ARM_PLANNED, (uint32_t)pl->nfn);
	arm_progress(h, ARM_STATE, PKA_ARM_CREATE);
	/* As many as the record has room for: memory proportional to them. */
	probes = calloc(pl->nfn ? pl->nfn : 1, sizeof(*probes));
	idx = calloc(pl->nfn ? pl->nfn : 1, sizeof(*idx));
	if (!probes || !idx)
		goto out;
	for (uint32_t i = 0; i < pl->nspec; i++) {
		struct pka_spec *sp = pka_record_spec(h, i);

		sp->status = pl->count[i] ? -ENOENT : pl->status[i];
		/*
		 * Matched, but every function is counted under an earlier
		 * spec: one probe per function, so not here; say where.
		 */
		if (!pl->count[i] && !pl->status[i] && pl->alias_n[i]) {
			/* Its own slot stays unused: it reports the owner's. */
			pka_record_probe(h, sp->first)->status = -EEXIST;
			sp->first = pl->alias_first[i];
			sp->nprobe = pl->alias_n[i];
			sp->status = -EEXIST;
		} else if (!pl->count[i] && !pl->status[i]) {
			char msg[PKA_WHY_LEN];
			uint32_t o = pl->owner[i] ? pl->owner[i] - 1 : i;

			snprintf(msg, sizeof(msg), "%.200s%scounted under the "
				 "earlier spec \"%.200s\" (one probe a function)",
				 pl->owned[i] ? pl->owned[i] : "",
				 pl->owned[i] ? " is " : "", pl->spec[o]);
			pka_record_why(h, i, msg);
			sp->status = -EEXIST;
			pka_record_probe(h, sp->first)->status = -EEXIST;
		} else if (!pl->count[i]) {
			pka_record_probe(h, sp->first)->status = sp->status;
		}
	}
	for (size_t k = 0, rank = 0; k < pl->nfn; k++) {
		const struct plan_fn *f = &pl->fn[k];
		struct pka_spec *sp = pka_record_spec(h, f->spec);
		PK_OPTS(pk_probe_opts, o, .addr = (void *)f->addr);
		struct pk_probe_info info = { .sz = sizeof(info) };
		struct pka_probe *pp;
		uint32_t pi;
		int err, one;

		/* Sorted by spec: probe first + its rank among its spec's. */
		rank = k && pl->fn[k - 1].spec == f->spec ? rank + 1 : 0;
		pi = pl->first[f->spec] + (uint32_t)rank;
		pp = pka_record_probe(h, pi);
		m->probe(h, pi, &o);
		/*
		 * A spec naming one function (no glob): on failure, again by
		 * name, for today's line ("\"strlen\" (IFUNC: ...): ..."), not
		 * one naming an address. A glob's lines name addresses.
		 */
		one = pl->count[f->spec] == 1 && !is_glob(pl->spec[f->spec]);
		cur_spec = one ? -1 : (int)f->spec;
		err = pka_hook_create(m, &o, &probes[armed]);
		if (err && one) {
			o.addr = NULL;
			o.symbol = pl->spec[f->spec];
			cur_spec = (int)f->spec;
			err = pka_hook_create(m, &o, &probes[armed]);
		}
		pp->status = err;
		arm_progress(h, ARM_DONE, (uint32_t)k + 1);
		if (err)
			continue;
		pka_hook_info(m, probes[armed], &info);
		pp->int3 = info.kind == PK_PROBE_INT3;
		if (pp->int3)
			sp->int3 = 1;
		sp->status = 0;
		idx[armed++] = pi;
	}
	cur_spec = -1;
	/*
	 * A spec none of whose probes could be created: the last error; one
	 * sharing another's probes: armed where one of them is.
	 */
	for (uint32_t i = 0; i < pl->nspec; i++) {
		struct pka_spec *sp = pka_record_spec(h, i);
		uint32_t c = pl->count[i] ? pl->count[i] : pl->alias_n[i];

		for (uint32_t k = 0; sp->status && k < c; k++)
			sp->status = pka_record_probe(h, sp->first + k)->status;
		for (uint32_t k = 0; pl->alias_n[i] && k < c; k++)
			sp->int3 |= pka_record_probe(h, sp->first + k)->int3;
	}
	h->n = pl->nspec;
	if (!armed)
		goto out;

	/* All in one text batch; if the batch fails, say so for each. */
	arm_progress(h, ARM_STATE, PKA_ARM_REGISTER);
	rc = pka_hook_register(m, probes, armed);
	for (uint32_t i = 0; rc && i < armed; i++) {
		struct pka_probe *pp = pka_record_probe(h, idx[i]);

		pp->status = rc;
		pka_record_spec(h, pp->spec)->status = rc;
		pka_hook_destroy(m, probes[i]);
	}
	for (uint32_t i = 0; rc && i < pl->nspec; i++)
		if (pl->alias_n[i])
			pka_record_spec(h, i)->status = rc;
out:
	arm_progress(h, ARM_STATE, PKA_ARM_DONE);
	free(idx);
	free(probes);
}
