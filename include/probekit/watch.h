/* SPDX-License-Identifier: MIT */
/* probekit/watch.h - memory watchpoints on data breakpoints or page protection (pk_watch_add, pk_watch_remove). */
#ifndef PROBEKIT_WATCH_H
#define PROBEKIT_WATCH_H

#include <stddef.h>
#include <stdint.h>

#include <probekit/common.h>
#include <probekit/fault.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Memory watchpoints: a handler called after every access of the chosen
 * kind to 1, 2, 4 or 8 watched bytes, by any thread, on the thread that
 * made the access, right after it and inside a signal handler
 * (async-signal-safe calls only). The CPU's data breakpoints are used where
 * perf allows them (4 at a time on x86); elsewhere, or with
 * PROBEKIT_WATCH=page, the page is protected and the faulting instruction
 * single-stepped with its access moved to an alias of the page.
 *
 * What each mechanism guarantees with threads writing at once, across
 * fork(), for system calls that write the page, and during an "open step"
 * (counted in pk_fault_stats().watch_open_steps): probekit(7), section
 * WATCHPOINTS. Which memory may be watched: pk_watch_add() below.
 */

#define PK_WATCH_WRITE 0x2u	/* writes */
#define PK_WATCH_READ 0x1u	/* reads; on x86 also writes (no read-only
				 * breakpoints) */

struct pk_watch_hit {
	void *addr;		/* the watched address */
	size_t len;
	unsigned int access;	/* PK_ACCESS_WRITE if the value changed, else 0 */
	uint64_t old_value;	/* the value before (as of the previous hit) */
	uint64_t new_value;	/* the value now */
	void *ucontext;		/* ucontext_t *: registers after the access */
};

typedef void (*pk_watch_fn)(const struct pk_watch_hit *hit, void *ctx);

struct pk_watch;

/**
 * pk_watch_add() - call @fn after every access of kind @access to @addr
 * @addr: the watched bytes, aligned to @len
 * @len: 1, 2, 4 or 8
 * @access: PK_WATCH_WRITE, PK_WATCH_READ or both
 * @fn, @ctx: the handler and its argument
 * @out: receives the watchpoint
 *
 * What may be watched. Any mechanism: mapped, readable memory (the handler
 * gets the old value from a copy taken now), not data that probekit's signal
 * handler itself uses (its tables, the calling thread's errno and TLS).
 * The page mechanism changes the page's protection, so it also takes only a
 * page whose protection probekit alone then controls:
 *   - private (not MAP_SHARED: writes through another mapping of the same
 *     object, or by another process, would go unseen), writable (nothing
 *     to watch otherwise) and not executable (code, JIT buffers);
 *   - not the calling thread's stack mapping, nor its alternate signal
 *     stack, nor a kernel-named mapping other than [heap] ([stack], [vvar],
 *     [vdso]...): the kernel writes signal frames there;
 *   - not a page inside a range of pk_fault_register() (-EEXIST).
 * Other threads' stacks and TLS cannot be recognised: watching them with the
 * page mechanism is the caller's responsibility (a thread whose signal
 * frame cannot be written dies).
 *
 * Context: any thread, may block; not from a chain callback or signal handler.
 * Return: 0, or -EINVAL (bad argument, unmapped or unreadable memory; page
 * mechanism: not writable), -ENOTSUP (page mechanism: shared or executable
 * mapping), -EBUSY (16 watchpoints already; probekit's own data; page
 * mechanism: a stack or kernel-named mapping), -EEXIST (page mechanism: the
 * page lies in a range registered with pk_fault_register()), -ESTALE (page
 * mechanism: the page is watched already and the program has since
 * unmapped it or mapped something else there; remove its watches first),
 * -EDEADLK, -ENOMEM; on failure nothing changed.
 */
PK_API int pk_watch_add(void *addr, size_t len, unsigned int access,
			pk_watch_fn fn, void *ctx, struct pk_watch **out);

/**
 * pk_watch_remove() - stop watching; no handler of @w runs once it returns
 * @w: from pk_watch_add()
 *
 * A handle is stale once removed: no later pk_watch_add() gives the same
 * value, so removing it again never removes another watch.
 *
 * Context: any thread, may block; not from a chain callback or signal handler.
 * Return: 0, or -EINVAL (no value pk_watch_add() gives), -ENOENT (already
 * removed: a stale handle), -EDEADLK; on failure nothing changed.
 */
PK_API int pk_watch_remove(struct pk_watch *w);

#ifdef __cplusplus
}
#endif

#endif /* PROBEKIT_WATCH_H */
