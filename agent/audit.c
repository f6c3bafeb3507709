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
	if (hook && lmid != LM_ID_BASE && map->l_name && map->l_name[0])
		hook(3, (uintptr_t)lmid, map->l_name);
	return 0;
}

PKA_AUDIT_EXPORT void la_activity(uintptr_t *cookie, unsigned int flag)
{
	void (*hook)(int, uintptr_t, const char *) = pka_audit_hook;

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
