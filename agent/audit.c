// SPDX-License-Identifier: MIT
/* audit.c - libprobekit-audit.so, the command's rtld-audit module (LD_AUDIT): tells the agent when libraries are loaded, before they run, and when they are unloaded. */
#define _GNU_SOURCE
#include <link.h>
#include <stdint.h>

/*
 * Why rtld-audit (issue 10, "libraries loaded later"): the agent must arm
 * a library's probes before any of its code runs, constructors included.
 *   - Interposing dlopen() sees the library only when the real dlopen()
 *     returns: its constructors have run by then (and a library that
 *     another library's constructor dlopen()s, or that a program loads by
 *     dlmopen(), is seen late or not at all).
 *   - The debugger's breakpoint, _dl_debug_state() (r_brk), is called at
 *     the right moments, but it is a one-byte `ret` here: only an int3
 *     probe fits, whose handler runs as a SIGTRAP handler, where arming
 *     (allocation, locks, text commits) is not allowed.
 *   - la_activity(LA_ACT_CONSISTENT) is called by the dynamic linker once
 *     a dlopen()'s objects are mapped and listed (dl_iterate_phdr() sees
 *     them), before they are relocated and before any constructor, on the
 *     thread that called dlopen(), in an ordinary call with the loader's
 *     (recursive) lock held; la_objclose() once an object's destructors
 *     ran, before it is unmapped. Both are exactly the moments needed.
 *
 * An audit module lives in a link-map namespace of its own, so it cannot
 * call the agent by name: it exports pka_audit_hook, which the agent's
 * constructor finds through glibc's namespace list (_r_debug_extended's
 * r_next) and sets to its own function. Until then (the program's own
 * start-up, and every process not started by probekit) it does nothing.
 *
 * An object loaded into another namespace (dlmopen()) is not armed: the
 * agent and the symbol layer see the program's namespace only (its
 * dl_iterate_phdr()). la_objopen() tells the agent of each such object
 * (its namespace and path, mapped, before it runs) so that a spec it
 * would have matched says why it is not probed (late.c), never silently.
 *
 * It is built without libc (-nostdlib): its namespace then holds only
 * itself, so it costs a process one small mapping, and nothing here can
 * call anything a probe could be on. la_objopen() asks for no symbol
 * binding callbacks (returns 0), so binding stays on glibc's fast path.
 */
#define PKA_AUDIT_EXPORT __attribute__((visibility("default")))

#ifdef PKA_AUDIT_LIST
/*
 * libprobekit-listaudit.so (this file, built with PKA_AUDIT_LIST): what
 * `probekit list` runs COMMAND under, with the agent preloaded, to learn
 * each function's probe kind without running any of COMMAND's code.
 * glibc calls la_activity(LA_ACT_CONSISTENT) for the program's namespace
 * at start-up once every object is mapped and relocated and before any
 * constructor (checked on Debian 12's glibc 2.36: a preloaded library's
 * data relocations done, its constructor and its neighbours' not run).
 * There the agent's pka_list_early() (agent/list.c) is called: it answers
 * the command's questions and _exit()s, so the process never reaches a
 * constructor. The agent is found by its link map (la_objopen()), the
 * function in its .dynsym by name: no libc here to dlsym() with.
 */
#include <elf.h>

static struct link_map *list_agent;

static int str_eq(const char *a, const char *b)
{
	while (*a && *a == *b)
		a++, b++;
	return *a == *b;
}

static int ends_with(const char *s, const char *tail)
{
	const char *e = s, *t = tail;

	while (*e)
		e++;
	while (*t)
		t++;
	while (t > tail && e > s && e[-1] == t[-1])
		e--, t--;
	return t == tail && (e == s || e[-1] == '/');
}

/* Symbols in .dynsym: DT_GNU_HASH's last chain (as agent/dladdr.c). */
static unsigned long gnu_count(const uint32_t *gnu)
{
	uint32_t nb = gnu[0], base = gnu[1], words = gnu[2], last = 0;
	const uint32_t *bucket = gnu + 4 + words * (sizeof(ElfW(Addr)) / 4);
	const uint32_t *chain = bucket + nb;

	for (uint32_t i = 0; i < nb; i++)
		if (bucket[i] > last)
			last = bucket[i];
	if (last < base)
		return base;
	while (!(chain[last - base] & 1))
		last++;
	return last + 1;
}

/* The address of the function @name defined in @m's .dynsym, or 0. */
static uintptr_t dynsym_find(const struct link_map *m, const char *name)
{
	const ElfW(Sym) *tab = 0;
	const uint32_t *gnu = 0;
	const char *str = 0;
	unsigned long n;

	for (const ElfW(Dyn) *d = m->l_ld; d->d_tag != DT_NULL; d++) {
		/* ld.so relocated these in place. */
		uintptr_t p = d->d_un.d_ptr < m->l_addr ? d->d_un.d_ptr + m->l_addr
							: d->d_un.d_ptr;

		if (d->d_tag == DT_SYMTAB)
			tab = (const ElfW(Sym) *)p;
		else if (d->d_tag == DT_STRTAB)
			str = (const char *)p;
		else if (d->d_tag == DT_GNU_HASH)
			gnu = (const uint32_t *)p;
	}
	if (!tab || !str || !gnu)
		return 0;
	n = gnu_count(gnu);
	for (unsigned long i = 0; i < n; i++)
		if (tab[i].st_shndx != SHN_UNDEF && tab[i].st_value &&
		    ELF64_ST_TYPE(tab[i].st_info) == STT_FUNC &&
		    str_eq(str + tab[i].st_name, name))
			return m->l_addr + tab[i].st_value;
	return 0;
}
#endif

/* enum pka_audit_event, see agent.h. */
PKA_AUDIT_EXPORT void (*volatile pka_audit_hook)(int event, uintptr_t base,
						 const char *name);

PKA_AUDIT_EXPORT unsigned int la_version(unsigned int version)
{
	return version < LAV_CURRENT ? version : LAV_CURRENT;
}

PKA_AUDIT_EXPORT unsigned int la_objopen(struct link_map *map, Lmid_t lmid,
					 uintptr_t *cookie)
{
	void (*hook)(int, uintptr_t, const char *) = pka_audit_hook;

	/* Only the program's namespace is armed: the agent sees no other. */
	*cookie = lmid == LM_ID_BASE ? (uintptr_t)map : 0;
#ifdef PKA_AUDIT_LIST
	if (lmid == LM_ID_BASE && map->l_name &&
	    ends_with(map->l_name, "libprobekit-agent.so"))
		list_agent = map;
#endif
	if (hook && lmid != LM_ID_BASE && map->l_name && map->l_name[0])
		hook(3, (uintptr_t)lmid, map->l_name);
	return 0;
}

PKA_AUDIT_EXPORT void la_activity(uintptr_t *cookie, unsigned int flag)
{
	void (*hook)(int, uintptr_t, const char *) = pka_audit_hook;
#ifdef PKA_AUDIT_LIST
	static int listed;

	/*
	 * The first: the program's start-up. pka_list_early() does not
	 * return; if it does, or the agent is not there (not preloaded, too
	 * old), the process ends here all the same (status 4): nothing of
	 * COMMAND may run.
	 */
	if (flag == LA_ACT_CONSISTENT && *cookie && !listed++) {
		uintptr_t fn = list_agent ? dynsym_find(list_agent, "pka_list_early") : 0;
		long ret;

		if (fn)
			((void (*)(void))fn)();
		__asm__ volatile("syscall" : "=a"(ret) : "0"(231L /* exit_group */),
				 "D"(4L) : "rcx", "r11", "memory");
		(void)ret;
	}
#endif
	if (hook && flag == LA_ACT_CONSISTENT && *cookie)
		hook(1, 0, 0);
}

PKA_AUDIT_EXPORT unsigned int la_objclose(uintptr_t *cookie)
{
	void (*hook)(int, uintptr_t, const char *) = pka_audit_hook;
	struct link_map *map = (struct link_map *)*cookie;

	if (hook && map)
		hook(2, map->l_addr, map->l_name);
	return 0;
}
