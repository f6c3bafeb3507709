// SPDX-License-Identifier: MIT
/* late.c - specs armed in libraries loaded after start-up, before their code runs, and retired when they are unloaded (through libprobekit-audit.so). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "sym/spec.h"

/*
 * The run's specs that pka_arm() could not arm in this process (not found
 * at start-up, any reason) are tried again each time the dynamic linker
 * says a dlopen()'s objects are mapped and not yet run (audit.c,
 * LA_ACT_CONSISTENT): the new ones are created and registered as one
 * batch, and the spec's status in the record becomes 0. A probe armed
 * so sits in late_list with the bias and name of the object holding it;
 * when that object is unloaded (la_objclose(), after its destructors,
 * before it is unmapped) the probe is unregistered and destroyed, and the
 * spec is tried again at the next load, so a library closed and opened
 * again is counted again, into the same count. Its status stays 0: it
 * was armed in this process.
 *
 * Everything here runs inside dlopen()/dlclose(), with the loader's lock
 * held (recursive: the library's dl_iterate_phdr() and dlsym() calls are
 * fine), on the thread that called them, as the agent's own work
 * (pka_busy). late_lock serialises it; two threads' dlopen()s are already
 * serialised by the loader's lock.
 *
 * A glob that matched nothing at start-up has up to PKA_LATE_SLOTS probes
 * of the record to itself (pka_plan()): at each load it is expanded again
 * (pk_sym_each()) and every function it matches that has no probe of it
 * armed takes one, all in the same batch as the names. A function that
 * had a slot before (its library closed and opened again) takes that
 * one, found by its object's basename and its name, so its counts add up
 * under one name; a new one the next free slot, its name written into
 * the record's pool (OBJECT:NAME for both where two objects have a
 * function of that name, as start-up names them). A slot is taken from
 * the moment it is handed out until its object is closed: two functions
 * of one name in the same batch never share one. Functions past the
 * reserved slots are left out, and the spec's left_out says how many
 * (the most left out at one load: every load expands the glob again
 * over every object loaded, so those are counted at each).
 *
 * One probe a function, as at start-up (arm.c, pka_plan()): at a load,
 * the specs are expanded in command-line order and a function goes to the
 * first that matches it; a later spec that matches it too does not count
 * it (late_dup). A spec all of whose functions are so taken reports the
 * owner's probes when they are consecutive ones (a spec given twice, a
 * name a glob before it matched: its first and nprobe point at them, its
 * own slots kept in late_first/late_np), else says which spec counts
 * them; one left with functions of its own just does not list those. A
 * function probed already, by a probe of an object loaded before, stays
 * with that probe's spec. A library closed and opened again is decided
 * again the same way, into the same slots.
 *
 * Libraries loaded into another namespace (dlmopen()) are not armed: the
 * symbol layer sees the program's namespace only (dl_iterate_phdr()), and
 * the probe layer places probes by it. The audit module tells us of each
 * object opened there (PKA_AUDIT_OTHER_NS, from la_objopen(): mapped, not
 * run); every spec not armed in this process that would match a function
 * of that file (read as a file: pk_sym_each() on PATH:NAME) says so, in
 * its line: "... loaded in link-map namespace N (dlmopen()): not probed".
 *
 * Not covered: a spec armed in the program's namespace that matches a
 * copy in another namespace too counts the program's copy only, said
 * nowhere (its line reports an armed spec); specs that were armed at
 * start-up are never armed again in a library loaded later (one function
 * per spec, or for a glob, the functions it matched at start-up); a
 * function a later spec took at an earlier load (its earlier spec matching
 * nothing then) stays that spec's, as probes are never moved.
 */
struct late {
	struct late *next;
	void *p;		/* pka_hook_*() */
	uint32_t spec;
	uint32_t probe;		/* its slot in the record */
	uintptr_t addr;		/* the function */
	uintptr_t bias;		/* the object holding it */
	char *name;
};

static pthread_mutex_t late_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pka_header *late_h;
static const struct pka_mode_ops *late_m;
static char **late_spec;	/* the run's specs, by index */
static unsigned char *late_armed; /* 1: a probe of this spec is armed */
static uint32_t late_n;
static struct late *late_list;
static unsigned long long late_adds;	/* dlpi_adds when last armed */
static char *late_dir;		/* the run's directory, for its cache */
static unsigned char *late_glob;	/* per spec: 1, it owns reserved slots */
static uint32_t *late_used;	/* per glob spec: slots given out */
static uint32_t *late_over;	/* per glob spec: functions left out */
static char **slot_name;	/* per probe slot: its function, or NULL */
static char **slot_obj;		/* per probe slot: its object's basename */
/* Per probe slot: taken by a function (from glob_slot() to late_close()). */
static unsigned char *slot_live;
/* Per spec: its own slots (the record's first/nprobe may alias another's). */
static uint32_t *late_first, *late_np;
/* Per spec: a function of its own was armed once (it is never an alias). */
static unsigned char *late_own;

/* Per spec, during one load: the functions an earlier spec takes. */
struct late_dup {
	uint32_t n, lo, hi;	/* how many; the owners' probes' range */
	uint32_t owner;		/* the owner of the lowest-addressed one */
	uintptr_t addr;		/* that one (start-up names it) */
	int own;		/* functions of its own at this load */
	char *name;		/* its name, or NULL */
};
static struct late_dup *late_dup;

/* What one load arms, as one batch. */
struct batch {
	void **p;
	uint32_t *spec, *probe;
	uintptr_t *addr;
	size_t n, cap;
};

static int batch_add(struct batch *b, void *p, uint32_t spec,
		     uint32_t probe, uintptr_t addr)
{
	if (b->n == b->cap) {
		size_t cap = b->cap ? 2 * b->cap : 64;
		void **np = realloc(b->p, cap * sizeof(*np));
		uint32_t *ns, *npr;
		uintptr_t *na;

		if (!np)
			return -ENOMEM;
		b->p = np;
		ns = realloc(b->spec, cap * sizeof(*ns));
		if (!ns)
			return -ENOMEM;
		b->spec = ns;
		npr = realloc(b->probe, cap * sizeof(*npr));
		if (!npr)
			return -ENOMEM;
		b->probe = npr;
		na = realloc(b->addr, cap * sizeof(*na));
		if (!na)
			return -ENOMEM;
		b->addr = na;
		b->cap = cap;
	}
	b->p[b->n] = p;
	b->spec[b->n] = spec;
	b->addr[b->n] = addr;
	b->probe[b->n++] = probe;
	return 0;
}

/*
 * Whether function @addr has a probe of another spec than @spec already:
 * one of this load's batch, or one armed at an earlier load. Return: its
 * probe slot (and its spec into *@owner), -1, or -2 if @spec itself has
 * one in this batch (two names of one function: one probe, as start-up).
 */
static int64_t late_taken(const struct batch *b, uintptr_t addr,
			  uint32_t spec, uint32_t *owner)
{
	for (size_t j = 0; j < b->n; j++)
		if (b->addr[j] == addr) {
			if (b->spec[j] == spec)
				return -2;
			*owner = b->spec[j];
			return b->probe[j];
		}
	for (struct late *l = late_list; l; l = l->next)
		if (l->addr == addr && l->spec != spec) {
			*owner = l->spec;
			return l->probe;
		}
	return -1;
}

/* Spec @i matched function @addr, which probe @k of spec @owner has. */
static void dup_add(uint32_t i, uint32_t owner, uint32_t k, uintptr_t addr,
		    const char *name)
{
	struct late_dup *d = &late_dup[i];

	if (!d->n || addr < d->addr) {
		free(d->name);
		d->name = name ? strdup(name) : NULL;
		d->owner = owner;
		d->addr = addr;
	}
	if (!d->n++) {
		d->lo = d->hi = k;
		return;
	}
	d->lo = k < d->lo ? k : d->lo;
	d->hi = k > d->hi ? k : d->hi;
}

static int get_adds(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	*(unsigned long long *)arg = info->dlpi_adds;
	return 1;
}

/* Which object holds @addr: its bias and name. */
struct holder {
	uintptr_t addr, bias;
	const char *name;
	int found;
};

static int find_holder(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct holder *o = arg;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && o->addr >= lo &&
		    o->addr - lo < ph->p_memsz) {
			o->bias = info->dlpi_addr;
			o->name = info->dlpi_name;
			o->found = 1;
			return 1;
		}
	}
	return 0;
}

/* Spec @i armed now, on probe @k: in the record, the spec and the probe. */
static void late_probe_armed(uint32_t i, uint32_t k, int int3)
{
	struct pka_spec *sp = pka_record_spec(late_h, i);
	struct pka_probe *pp = pka_record_probe(late_h, k);

	/*
	 * Its first function of its own, after a load where every function
	 * it matched was an earlier spec's (late_dups() pointed it at that
	 * spec's probes, or said so): its own slots again, from now on.
	 */
	if (sp->first != late_first[i] || sp->nprobe != late_np[i]) {
		sp->first = late_first[i];
		sp->nprobe = late_np[i];
		sp->int3 = 0;
		__atomic_store_n(&sp->why, 0, __ATOMIC_RELAXED);
	}
	sp->int3 |= (uint32_t)int3;
	pp->int3 = (uint32_t)int3;
	__atomic_store_n(&pp->status, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&sp->status, 0, __ATOMIC_RELEASE);
}

extern const char __ehdr_start __attribute__((visibility("hidden")));

/* pk_sym_each() callback of a glob's expansion at a load. */
struct glob_ctx {
	struct batch *b;
	uint32_t spec;
	uint32_t rank;		/* functions seen so far: the likely slot */
	uint32_t over;		/* functions given no slot at this load */
	int err;
};

static int slot_is(uint32_t k, const char *obj, const char *name)
{
	return slot_name[k] && !strcmp(slot_name[k], name) &&
	       !strcmp(slot_obj[k], obj);
}

/*
 * Another function of spec @i named @name, from another object than @obj,
 * has a slot: both are named OBJECT:NAME, as start-up names the functions
 * of one spec found in several objects (arm.c, plan_objects()).
 */
static void glob_collide(uint32_t i, uint32_t k, const char *obj,
			 const char *name)
{
	char *q;
	int other = 0;

	for (uint32_t j = late_first[i]; j < late_first[i] + late_used[i]; j++) {
		if (j == k || !slot_name[j] || strcmp(slot_name[j], name) ||
		    !strcmp(slot_obj[j], obj))
			continue;
		other = 1;
		if (*slot_obj[j] && asprintf(&q, "%s:%s", slot_obj[j], name) >= 0) {
			pka_record_name(late_h, j, q);
			free(q);
		}
	}
	if (other && *obj && asprintf(&q, "%s:%s", obj, name) >= 0) {
		pka_record_name(late_h, k, q);
		free(q);
	}
}

/*
 * The slot of spec @i for function @name of object @obj (a basename):
 * its old one, or a new one; taken (slot_live) from now on.
 */
static int glob_slot(uint32_t i, uint32_t rank, const char *obj,
		     const char *name)
{
	uint32_t first = late_first[i], k;

	if (rank < late_used[i] && !slot_live[first + rank] &&
	    slot_is(first + rank, obj, name))
		k = first + rank;
	else
		for (k = first; k < first + late_used[i]; k++)
			if (!slot_live[k] && slot_is(k, obj, name))
				break;
	if (k < first + late_used[i]) {
		slot_live[k] = 1;
		return (int)k;
	}
	if (late_used[i] >= late_np[i])
		return -1;
	k = first + late_used[i]++;
	slot_name[k] = strdup(name);
	slot_obj[k] = strdup(obj);
	if (!slot_name[k] || !slot_obj[k]) {
		free(slot_name[k]);
		free(slot_obj[k]);
		slot_name[k] = slot_obj[k] = NULL;
		late_used[i]--;
		return -1;
	}
	slot_live[k] = 1;
	pka_record_name(late_h, k, name);
	glob_collide(i, k, obj, name);
	return (int)k;
}

static int glob_sym(const struct pk_sym *s, void *arg)
{
	struct glob_ctx *g = arg;
	/* Whole: name, @version, " -> ", impl (as arm.c's plan_sym()). */
	char name[sizeof(s->name) + sizeof(s->version) + sizeof(s->impl) + 8];
	const char *obj;
	uint32_t owner;
	int64_t taken;
	void *p;
	int k;

	if (s->flags & (PK_SYM_F_FILE | PK_SYM_F_UNRESOLVED) ||
	    s->base == (uintptr_t)&__ehdr_start)
		return 0;
	/* It matches here: start-up's line ("not loaded") explains nothing. */
	if (!g->rank && !late_dup[g->spec].n && !late_dup[g->spec].own &&
	    pka_record_spec(late_h, g->spec)->status &&
	    pka_record_spec(late_h, g->spec)->status != -EEXIST)
		__atomic_store_n(&pka_record_spec(late_h, g->spec)->why, 0,
				 __ATOMIC_RELEASE);
	/* Armed already (in an object loaded before this one). */
	for (struct late *l = late_list; l; l = l->next)
		if (l->spec == g->spec && l->addr == s->addr) {
			late_dup[g->spec].own = 1;
			return 0;
		}
	snprintf(name, sizeof(name), "%s%s%s%s%s", s->name,
		 (s->flags & PK_SYM_F_COMPAT) && s->version[0] ? "@" : "",
		 (s->flags & PK_SYM_F_COMPAT) ? s->version : "",
		 (s->flags & PK_SYM_F_IFUNC) && s->impl[0] ? " -> " : "",
		 (s->flags & PK_SYM_F_IFUNC) ? s->impl : "");
	/* An earlier spec's (or an earlier load's): one probe a function. */
	taken = late_taken(g->b, s->addr, g->spec, &owner);
	if (taken == -2)
		return 0;
	if (taken >= 0) {
		dup_add(g->spec, owner, (uint32_t)taken, s->addr, name);
		return 0;
	}
	late_dup[g->spec].own = 1;
	obj = strrchr(s->object, '/');
	obj = obj ? obj + 1 : s->object;
	k = glob_slot(g->spec, g->rank++, obj, name);
	if (k < 0) {
		g->over++;
		return 0;
	}
	PK_OPTS(pk_probe_opts, o, .addr = (void *)s->addr);
	late_m->probe(late_h, (unsigned int)k, &o);
	pka_log_spec((int)g->spec);	/* its first failure line, in the record */
	g->err = pka_hook_create(late_m, &o, &p);
	pka_log_spec(-1);
	if (g->err) {
		__atomic_store_n(&pka_record_probe(late_h, (uint32_t)k)->status,
				 g->err, __ATOMIC_RELEASE);
		slot_live[k] = 0;
		return 0;
	}
	if (batch_add(g->b, p, g->spec, (uint32_t)k, s->addr)) {
		pka_hook_destroy(late_m, p);
		slot_live[k] = 0;
		return -ENOMEM;
	}
	return 0;
}

/*
 * Whether objects were loaded since the last look. Nothing new (the end
 * of a dlclose(), the dynamic linker's own activity): the run's cache is
 * not even opened.
 */
static int late_new(void)
{
	unsigned long long adds = 0;

	dl_iterate_phdr(get_adds, &adds);
	if (adds == late_adds)
		return 0;
	late_adds = adds;
	return 1;
}

/*
 * After a load's batch: the specs whose every function this load matched
 * is an earlier spec's report as start-up's do (arm.c, pka_arm()): the
 * owner's probes if consecutive, else which spec counts them.
 */
static void late_dups(void)
{
	for (uint32_t i = 0; i < late_n; i++) {
		const struct late_dup *d = &late_dup[i];
		struct pka_spec *sp = pka_record_spec(late_h, i);
		int32_t st = -EEXIST;
		uint32_t i3 = 0;

		if (!d->n || d->own || late_own[i])
			continue;
		if (d->hi - d->lo + 1 != d->n) {
			char msg[PKA_WHY_LEN];

			/* Said at an earlier load: the pool is not refilled. */
			if (sp->status == -EEXIST)
				continue;

			snprintf(msg, sizeof(msg), "%.200s%scounted under the "
				 "earlier spec \"%.200s\" (one probe a function)",
				 d->name ? d->name : "", d->name ? " is " : "",
				 late_spec[d->owner]);
			__atomic_store_n(&sp->why, 0, __ATOMIC_RELAXED);
			pka_record_why(late_h, i, msg);
			pka_record_probe(late_h, late_first[i])->status = -EEXIST;
			__atomic_store_n(&sp->status, -EEXIST, __ATOMIC_RELEASE);
			continue;
		}
		/* Its own slot stays unused: it reports the owner's. */
		pka_record_probe(late_h, late_first[i])->status = -EEXIST;
		for (uint32_t k = d->lo; k <= d->hi; k++) {
			const struct pka_probe *pp = pka_record_probe(late_h, k);

			if (!pp->status)
				st = 0;
			i3 |= pp->int3;
		}
		if (!st)
			__atomic_store_n(&sp->why, 0, __ATOMIC_RELAXED);
		sp->first = d->lo;
		sp->nprobe = d->n;
		sp->int3 = i3;
		__atomic_store_n(&sp->status, st, __ATOMIC_RELEASE);
	}
	for (uint32_t i = 0; i < late_n; i++) {
		free(late_dup[i].name);
		late_dup[i].name = NULL;
	}
}

/* A dlopen()'s objects are mapped: arm what matches in them. */
static void late_load(void)
{
	struct batch b = { 0 };
	int rc;

	for (uint32_t i = 0; i < late_n; i++) {
		free(late_dup[i].name);
		memset(&late_dup[i], 0, sizeof(late_dup[i]));
	}
	for (uint32_t i = 0; i < late_n; i++) {
		PK_OPTS(pk_probe_opts, o, .symbol = late_spec[i]);
		struct pk_probe_info info = { .sz = sizeof(info) };
		uint32_t owner;
		int64_t taken = -1;
		void *p;

		if (late_glob[i]) {
			struct glob_ctx g = { .b = &b, .spec = i };

			rc = pk_sym_each(late_spec[i], glob_sym, &g);
			/*
			 * Every loaded object it matches was expanded again:
			 * g.over is what is left out now (the most seen, in
			 * the record; functions armed before are not in it).
			 */
			if (g.over > late_over[i]) {
				late_over[i] = g.over;
				__atomic_store_n(&pka_record_spec(late_h, i)->left_out,
						 g.over, __ATOMIC_RELEASE);
			}
			if (rc == -ENOMEM)
				goto drop;
			continue;
		}
		if (late_armed[i])
			continue;
		late_m->probe(late_h, late_first[i], &o);
		if (pka_hook_create(late_m, &o, &p))
			continue;
		/* Its function is an earlier spec's: its probe reports it. */
		if (pka_hook_info(late_m, p, &info) ||
		    (taken = late_taken(&b, info.func, i, &owner)) >= 0) {
			pka_hook_destroy(late_m, p);
			if (taken >= 0)
				dup_add(i, owner, (uint32_t)taken, info.func,
					NULL);
			continue;
		}
		late_dup[i].own = 1;
		if (batch_add(&b, p, i, late_first[i], info.func)) {
			pka_hook_destroy(late_m, p);
			goto drop;
		}
	}
	if (!b.n)
		goto dups;
	rc = pka_hook_register(late_m, b.p, b.n);
	for (size_t j = 0; j < b.n; j++) {
		struct pk_probe_info info = { .sz = sizeof(info) };
		struct holder o = { 0 };
		struct late *l;

		if (rc || pka_hook_info(late_m, b.p[j], &info) ||
		    !(l = calloc(1, sizeof(*l)))) {
			if (!rc)
				pka_hook_unregister(late_m, &b.p[j], 1);
			pka_hook_destroy(late_m, b.p[j]);
			slot_live[b.probe[j]] = 0;
			continue;
		}
		o.addr = info.func;
		dl_iterate_phdr(find_holder, &o);
		l->p = b.p[j];
		l->spec = b.spec[j];
		l->probe = b.probe[j];
		l->addr = info.func;
		l->bias = o.bias;
		l->name = strdup(o.name ? o.name : "");
		l->next = late_list;
		late_list = l;
		slot_live[l->probe] = 1;
		late_armed[l->spec] = 1;
		late_own[l->spec] = 1;
		late_probe_armed(l->spec, l->probe, info.kind == PK_PROBE_INT3);
	}
dups:
	late_dups();
	goto out;
drop:
	/* No memory: nothing of this load armed, its slots free again. */
	for (size_t j = 0; j < b.n; j++) {
		pka_hook_destroy(late_m, b.p[j]);
		slot_live[b.probe[j]] = 0;
	}
out:
	free(b.p);
	free(b.spec);
	free(b.probe);
	free(b.addr);
}

/* An object is about to be unmapped: retire the probes in it. */
static void late_close(uintptr_t bias, const char *name)
{
	for (struct late **pp = &late_list, *l; (l = *pp);) {
		if (l->bias != bias || strcmp(l->name, name ? name : "")) {
			pp = &l->next;
			continue;
		}
		*pp = l->next;
		pka_hook_unregister(late_m, &l->p, 1);
		pka_hook_destroy(late_m, l->p);
		late_armed[l->spec] = 0;
		slot_live[l->probe] = 0;
		free(l->name);
		free(l);
	}
}

/* Whether @path's file name is @want, whole or up to a dot, or matches it as a glob. */
static int obj_matches(const char *path, const char *want, size_t len)
{
	const char *base = strrchr(path, '/');
	char b[NAME_MAX + 1], w[PATH_MAX];

	if (len >= sizeof(w))
		return 0;
	memcpy(w, want, len);
	w[len] = 0;
	if (strchr(w, '/'))
		return !strcmp(w, path);
	base = base ? base + 1 : path;
	if (strlen(base) >= sizeof(b))
		return 0;
	strcpy(b, base);
	for (;;) {
		char *dot;

		if (!fnmatch(w, b, 0))
			return 1;
		dot = strrchr(b, '.');
		if (!dot || dot == b)
			return 0;
		*dot = 0;
	}
}

static int ns_count(const struct pk_sym *s, void *arg)
{
	(void)s;
	++*(int *)arg;
	return 1;	/* one is enough */
}

/*
 * Object @path was opened in namespace @lmid, not the program's: each spec
 * not armed here that matches a function of it says why it is not probed.
 */
static void late_other_ns(uintptr_t lmid, const char *path)
{
	static unsigned char *said;	/* per spec: its line says it already */
	char full[PATH_MAX + 1024], msg[PKA_WHY_LEN];

	if (!said && !(said = calloc(late_n ? late_n : 1, 1)))
		return;
	for (uint32_t i = 0; i < late_n; i++) {
		struct pka_spec *sp = pka_record_spec(late_h, i);
		const char *spec = late_spec[i], *colon = pk_spec_obj_colon(spec);
		const char *name = colon ? colon + 1 : spec;
		int n = 0;

		if (said[i] || !sp->status || sp->status == PKA_PENDING ||
		    (colon && !obj_matches(path, spec, (size_t)(colon - spec))))
			continue;
		if (snprintf(full, sizeof(full), "%s:%s", path, name) >=
		    (int)sizeof(full))
			continue;
		pka_log_spec(-1);	/* the file's own lines explain nothing */
		pk_sym_each(full, ns_count, &n);
		if (!n)
			continue;
		said[i] = 1;
		snprintf(msg, sizeof(msg), "%.200s (matching \"%.150s\") is loaded "
			 "in link-map namespace %lu (dlmopen()): not probed, the "
			 "agent arms the program's namespace only", path, spec,
			 (unsigned long)lmid);
		__atomic_store_n(&sp->why, 0, __ATOMIC_RELAXED);
		pka_record_why(late_h, i, msg);
		__atomic_store_n(&sp->status, -ENOTSUP, __ATOMIC_RELEASE);
	}
}

static void late_hook(int event, uintptr_t base, const char *name)
{
	static __thread int in_hook __attribute__((tls_model("initial-exec")));

	/* A dlopen() the library itself makes while arming: nothing new. */
	if (in_hook)
		return;
	in_hook = 1;
	pka_busy++;
	pthread_mutex_lock(&late_lock);
	if (event == PKA_AUDIT_LOADED && late_new()) {
		/* What other processes of the run found: xcache.c. */
		pka_xcache_open(late_dir);
		late_load();
		pka_xcache_close();
	}
	else if (event == PKA_AUDIT_CLOSING)
		late_close(base, name);
	else if (event == PKA_AUDIT_OTHER_NS)
		late_other_ns(base, name);
	pthread_mutex_unlock(&late_lock);
	pka_busy--;
	in_hook = 0;
}

/* The audit module's hook variable, in whichever namespace holds it. */
static void *(*find_hook(void))
{
	struct r_debug_extended *r;

	/* glibc's _r_debug is an r_debug_extended since 2.35 (r_version 2). */
	__asm__("" : "=r"(r) : "0"(&_r_debug));
	if (r->base.r_version < 2)
		return NULL;
	for (; r; r = r->r_next)
		for (struct link_map *m = r->base.r_map; m; m = m->l_next) {
			const char *slash = m->l_name ? strrchr(m->l_name, '/') : NULL;

			if (slash && !strcmp(slash + 1, PKA_AUDIT_NAME))
				/* A glibc handle is its link map. */
				return dlsym(m, "pka_audit_hook");
		}
	return NULL;
}

int pka_late_possible(void)
{
	return find_hook() != NULL;
}

void pka_late_init(struct pka_header *h, const char *dir, const char *specs,
		   const struct pka_mode_ops *m)
{
	const char sep[] = { PKA_SEP, 0 };
	void (**hook)(int, uintptr_t, const char *) = (void *)find_hook();
	char *list, *save = NULL, *s;
	uint32_t n = 0;

	if (!hook || !(list = strdup(specs)) || !(late_dir = strdup(dir)))
		return;
	late_spec = calloc(h->n ? h->n : 1, sizeof(*late_spec));
	late_armed = calloc(h->n ? h->n : 1, 1);
	late_glob = calloc(h->n ? h->n : 1, 1);
	late_used = calloc(h->n ? h->n : 1, sizeof(*late_used));
	late_over = calloc(h->n ? h->n : 1, sizeof(*late_over));
	slot_name = calloc(h->nprobe ? h->nprobe : 1, sizeof(*slot_name));
	slot_obj = calloc(h->nprobe ? h->nprobe : 1, sizeof(*slot_obj));
	slot_live = calloc(h->nprobe ? h->nprobe : 1, 1);
	late_first = calloc(h->n ? h->n : 1, sizeof(*late_first));
	late_np = calloc(h->n ? h->n : 1, sizeof(*late_np));
	late_own = calloc(h->n ? h->n : 1, 1);
	late_dup = calloc(h->n ? h->n : 1, sizeof(*late_dup));
	if (!late_spec || !late_armed || !late_glob || !late_used ||
	    !late_over || !slot_name || !slot_obj || !slot_live ||
	    !late_first || !late_np || !late_own || !late_dup)
		return;
	for (s = strtok_r(list, sep, &save); s && n < h->n;
	     s = strtok_r(NULL, sep, &save), n++) {
		const struct pka_spec *sp = pka_record_spec(h, n);

		late_spec[n] = s;
		late_armed[n] = sp->status == 0;
		late_own[n] = sp->status == 0;
		late_first[n] = sp->first;
		late_np[n] = sp->nprobe;
		/*
		 * Its reserved slots (pka_plan()): a glob that matched
		 * nothing, all but its first slot untouched (a glob whose
		 * functions all failed has tried every one of its own).
		 */
		late_glob[n] = sp->status && sp->nprobe > 1 &&
			       strpbrk(s, "*?[") &&
			       sp->first + sp->nprobe <= h->nprobe &&
			       pka_record_probe(h, sp->first + 1)->status ==
			       PKA_PENDING;
	}
	late_h = h;
	late_m = m;
	late_n = n;
	dl_iterate_phdr(get_adds, &late_adds);
	__atomic_store_n(hook, late_hook, __ATOMIC_RELEASE);
}
