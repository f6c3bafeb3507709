// SPDX-License-Identifier: MIT
/* noprobe.c - the functions outside probekit that its signal path calls where a probe hit would kill the process, refused as probe targets (the kernel's NOKPROBE_SYMBOL, for libc). */

/*
 * What probekit's signal path may call, and why this list is short
 * ================================================================
 *
 * The path that recognises a probe's int3 (pk_sig_handler(), text's
 * in-flight sites, the fault layer's trap chain, probe_trap()), the fault
 * entry up to its range lookup and the sweep handler call no function
 * outside probekit: raw syscalls, errno through the thread pointer, inline
 * helpers (arch.h; tests/check-noprobe.sh fails the build's tests on a new
 * call). So a probe hit anywhere else, even inside probekit's own signal
 * handler, is one more SIGTRAP (the handler is SA_NODEFER) that this path
 * recognises and sends to the probe's trampoline without calling anything:
 * it cannot recurse, and the handlers it then runs count a miss when they
 * are nested in another probe's (pk_sweep_self.depth). That covers what
 * the signal path calls once a signal has been classified: the default
 * action's sigaction() and raise(), a watched page's mprotect() and mmap(),
 * the die chain, a return probe's first-hit syscall() (check-noprobe.sh
 * lists each with its reason).
 *
 * It does not cover a call made while SIGTRAP is blocked, where an int3 is
 * fatal whatever the handler does. One such call exists: call_prev()
 * (sig.c) blocks the previous handler's sa_mask around it, which holds
 * SIGTRAP for a handler installed with signal() or without SA_NODEFER, and
 * restores the mask afterwards with pthread_sigmask(): an int3 probe there
 * (or a jump probe's transient int3) killed the process, exit 133. So
 * pthread_sigmask is refused as a probe target, -EPERM, by the extent of
 * every definition of it the path may reach: the one dlsym() binds (what
 * the library's PLT calls; a sanitizer's interceptor, say) and libc's. A
 * probe on sigprocmask, a separate function that call_prev() never calls,
 * is allowed.
 */

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "internal.h"
#include "probe/noprobe.h"
#include "probe/probe.h"

struct refused {
	const char *name;
	const char *why;
};

static const struct refused refused[] = {
	{ "pthread_sigmask", "to restore the mask after the program's own "
			     "handler, which may have SIGTRAP blocked" },
};

#define NREFUSED PK_ARRAY_SIZE(refused)
#define NDEFS 2		/* per name: dlsym's binding, libc's */

/* Extents, resolved once; size 0 where there is none. */
static struct {
	uintptr_t start;
	size_t size;
} extent[NREFUSED][NDEFS];
static pthread_once_t extent_once = PTHREAD_ONCE_INIT;

static void extent_of(uintptr_t addr, unsigned int i, unsigned int d)
{
	struct pk_func fn;

	if (addr && pk_sym_func_at(addr, &fn) == 0) {
		extent[i][d].start = fn.start;
		extent[i][d].size = fn.size;
	}
}

static void extent_init(void)
{
	for (unsigned int i = 0; i < NREFUSED; i++) {
		struct pk_sym s;
		char spec[64];

		/* IFUNC-resolved, and an interposer's if there is one. */
		extent_of((uintptr_t)dlsym(RTLD_DEFAULT, refused[i].name), i, 0);
		snprintf(spec, sizeof(spec), "libc.so.6:%s", refused[i].name);
		if (pk_sym_lookup(spec, &s) == 0)
			extent_of(s.addr, i, 1);
	}
}

int pk_probe_sigpath_check(uintptr_t start, size_t size, const char *what)
{
	pthread_once(&extent_once, extent_init);
	for (unsigned int i = 0; i < NREFUSED; i++)
		for (unsigned int d = 0; d < NDEFS; d++) {
			uintptr_t lo = extent[i][d].start;

			if (extent[i][d].size && lo < start + size &&
			    start < lo + extent[i][d].size) {
				pk_err("probe: %s: probekit's signal path calls "
				       "%s (at %#" PRIxPTR ") %s; not probed",
				       what, refused[i].name, lo,
				       refused[i].why);
				return -EPERM;
			}
		}
	return 0;
}
