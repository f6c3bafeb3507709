// SPDX-License-Identifier: MIT
/* late.c - specs armed in libraries loaded after start-up, before their code runs, and retired when they are unloaded (through libprobekit-audit.so). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"

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
 * Not covered: libraries loaded into another namespace (dlmopen()), which
 * the symbol layer does not see; specs that were armed at start-up are
 * never armed again in a library loaded later (one function per spec).
 */
struct late {
	struct late *next;
	void *p;		/* pka_hook_*() */
	uint32_t spec;
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

/* Spec @i armed now: in the record, its spec and its (first) probe. */
static void late_spec_armed(uint32_t i, int int3)
{
	struct pka_spec *sp = pka_record_spec(late_h, i);
	struct pka_probe *pp = pka_record_probe(late_h, sp->first);

	sp->int3 = (uint32_t)int3;
	pp->int3 = (uint32_t)int3;
	__atomic_store_n(&pp->status, 0, __ATOMIC_RELEASE);
	__atomic_store_n(&sp->status, 0, __ATOMIC_RELEASE);
}

/* A dlopen()'s objects are mapped: arm what matches in them. */
static void late_load(void)
{
	void **p = NULL;
	uint32_t *idx = NULL;
	unsigned long long adds = 0;
	size_t k = 0;
	int rc;

	/* Nothing loaded since (the end of a dlclose(), say): nothing new. */
	dl_iterate_phdr(get_adds, &adds);
	if (adds == late_adds)
		return;
	late_adds = adds;
	p = calloc(late_n ? late_n : 1, sizeof(*p));
	idx = calloc(late_n ? late_n : 1, sizeof(*idx));
	if (!p || !idx)
		goto out;
	for (uint32_t i = 0; i < late_n; i++) {
		PK_OPTS(pk_probe_opts, o, .symbol = late_spec[i]);

		if (late_armed[i])
			continue;
		late_m->probe(late_h, pka_record_spec(late_h, i)->first, &o);
		if (!pka_hook_create(late_m, &o, &p[k]))
			idx[k++] = i;
	}
	if (!k)
		goto out;
	rc = pka_hook_register(late_m, p, k);
	for (size_t j = 0; j < k; j++) {
		struct pk_probe_info info = { .sz = sizeof(info) };
		struct holder o = { 0 };
		struct late *l;

		if (rc || pka_hook_info(late_m, p[j], &info) ||
		    !(l = calloc(1, sizeof(*l)))) {
			if (!rc)
				pka_hook_unregister(late_m, &p[j], 1);
			pka_hook_destroy(late_m, p[j]);
			continue;
		}
		o.addr = info.func;
		dl_iterate_phdr(find_holder, &o);
		l->p = p[j];
		l->spec = idx[j];
		l->bias = o.bias;
		l->name = strdup(o.name ? o.name : "");
		l->next = late_list;
		late_list = l;
		late_armed[idx[j]] = 1;
		late_spec_armed(idx[j], info.kind == PK_PROBE_INT3);
	}
out:
	free(p);
	free(idx);
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
		free(l->name);
		free(l);
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
	if (event == PKA_AUDIT_LOADED) {
		/* What other processes of the run found: xcache.c. */
		pka_xcache_open(late_dir);
		late_load();
		pka_xcache_close();
	}
	else if (event == PKA_AUDIT_CLOSING)
		late_close(base, name);
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
	if (!late_spec || !late_armed)
		return;
	for (s = strtok_r(list, sep, &save); s && n < h->n;
	     s = strtok_r(NULL, sep, &save), n++) {
		late_spec[n] = s;
		late_armed[n] = pka_record_spec(h, n)->status == 0;
	}
	late_h = h;
	late_m = m;
	late_n = n;
	dl_iterate_phdr(get_adds, &late_adds);
	__atomic_store_n(hook, late_hook, __ATOMIC_RELEASE);
}
