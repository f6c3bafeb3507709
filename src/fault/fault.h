/* SPDX-License-Identifier: MIT */
/* fault.h - the fault layer's core (fault.c) as a client of its chains (watch.c) uses it. */
#ifndef PK_FAULT_H
#define PK_FAULT_H

/*
 * fault.c owns the signal entries, the three chains and the read side that
 * the signal path runs them in (its design comment). A client builds on
 * the fault chain with what this header gives, and with nothing else of
 * fault.c's:
 *
 *   writers    pk_fault_write_lock() / pk_fault_write_unlock() around every
 *              change, the client's own state included (pk_fault_lock
 *              guards it too);
 *   ranges     pk_fault_range_add() / pk_fault_range_remove(): the client's
 *              range handler runs inside the read side, like a user's;
 *   readers    pk_fault_read_enter() / pk_fault_read_leave() around what its
 *              signal hook reads of its state, and pk_fault_wait_readers()
 *              after unpublishing some: then no handler uses it;
 *   one hook   struct pk_fault_client: the signals that no table claims and
 *              that may be the client's (TRAP_PERF, TRAP_TRACE, SEGV_ACCERR
 *              outside every range). It joins the signal path at its first
 *              use and stays, so a signal on its way when the client's last
 *              user leaves is still recognised: before that the path tests
 *              nothing of it but one NULL pointer;
 *   fork       pk_fault_fork_hold() / pk_fault_fork_release() in its
 *              PK_ATFORK entries, which may then run in any order with the
 *              core's;
 *   own data   PK_SIGNAL_DATA() / PK_SIGNAL_TLS() (internal.h) beside
 *              each static / thread-local object its signal path uses, and
 *              pk_fault_own_data() to refuse ranges over any of them.
 */

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/ucontext.h>

#include "internal.h"

#ifndef TRAP_PERF
#define TRAP_PERF 6	/* <asm-generic/siginfo.h>; glibc 2.36 lacks it */
#endif

/*
 * The page size, for the signal path (sysconf() is not async-signal-safe
 * there): set by fault.c's constructor, 4096 until it has run. Read-only
 * after it.
 */
PK_HIDDEN extern long pk_page_size;

/*
 * Serialises the fault layer's writers, the core's and its clients'; see
 * fault.c for what it guards. A client's data that it guards says so.
 */
PK_HIDDEN extern pthread_mutex_t pk_fault_lock;

/*
 * pk_fault_write_lock() - take pk_fault_lock, setting the read side up at
 * the first call (see rd_setup()).
 * Return: 0, or -EDEADLK from inside a handler the fault layer runs (a
 * writer would wait for its own read side).
 * Context: not from a chain callback or signal handler; may block.
 */
PK_HIDDEN int pk_fault_write_lock(void);

static inline void pk_fault_write_unlock(void)
{
	pthread_mutex_unlock(&pk_fault_lock);
}

/*
 * pk_fault_range_add() - @fn(@ctx) serves faults in [@start, @end) (page
 * aligned, checked by the caller), from one grace period on.
 * Return: 0, or -EEXIST (overlaps a range), -EBUSY (overlaps a table the
 * signal path reads), -ENOMEM, or pk_sig_hook()'s error (then not added).
 * Context: pk_fault_lock held.
 */
PK_HIDDEN int pk_fault_range_add(uintptr_t start, uintptr_t end,
				 pk_fault_fn fn, void *ctx);

/*
 * pk_fault_range_remove() - the range at @start serves no fault once it
 * returns (one grace period).
 * Return: 0, or -ENOENT, -ENOMEM.
 * Context: pk_fault_lock held.
 */
PK_HIDDEN int pk_fault_range_remove(uintptr_t start);

/* A read side open on the calling thread (opaque: fault.c's). */
struct rd_slot;
struct pk_fault_reader {
	struct rd_slot *slot;
	unsigned long *nest;
};

/*
 * pk_fault_read_enter() - open a read side in @r: what the caller loads
 * after it that a writer unpublished before pk_fault_wait_readers() stays
 * valid until pk_fault_read_leave(@r). Nests. A range handler runs inside
 * one already.
 * Context: any thread, async-signal-safe (on the signal path).
 */
PK_HIDDEN void pk_fault_read_enter(struct pk_fault_reader *r);
PK_HIDDEN void pk_fault_read_leave(struct pk_fault_reader *r);

/*
 * pk_fault_wait_readers() - one grace period: every read side open when it
 * was called has closed (the protocol, R1-R4 and W1-W5: its comment
 * in fault.c, pk_fault_wait_readers()).
 * Context: pk_fault_lock held; may block.
 */
PK_HIDDEN void pk_fault_wait_readers(void);

/*
 * The client's signal hook: called, inside the fault layer's handler
 * depth (so the client's writers refuse -EDEADLK there), for
 *   SIGTRAP with si_code TRAP_PERF or TRAP_TRACE, before the trap chain;
 *   SIGSEGV with si_code SEGV_ACCERR that no range claimed.
 * Returns non-zero if the signal was the client's (the thread resumes with
 * @uc), else 0 (the signal goes on to the die chain and sig.c).
 */
typedef int (*pk_fault_hook_fn)(int sig, siginfo_t *si, ucontext_t *uc);

struct pk_fault_client {
	pk_fault_hook_fn hook;		/* PK_NOPROBE */
	pk_fault_fn range_fn;		/* handler of each range it adds:
					   pk_fault_unregister() refuses
					   those with -EBUSY */
	void (*stats)(struct pk_fault_stats *st);	/* adds its counters */
};

/*
 * pk_fault_client_join() - @c (static) joins the signal path for good, and
 * the signals are hooked as all registrations need. Called again, it
 * hooks them again (after a failure).
 * Return: 0, -EBUSY (another client joined: there is room for one), or
 * pk_sig_hook()'s error.
 * Context: pk_fault_lock held.
 */
PK_HIDDEN int pk_fault_client_join(const struct pk_fault_client *c);

/*
 * fork(): the fault layer's PK_ATFORK entries (the core's and its
 * clients', all PK_RANK_FAULT) each call pk_fault_fork_hold() first in
 * @prepare and pk_fault_fork_release() last in @parent and @child. The
 * first hold takes pk_fault_lock, the last release drops it (re-creates
 * it in the child): so each entry works with the lock held whichever
 * order util.c runs same-rank entries in (link order, which a static link
 * decides by what it pulls from the archive first).
 */
PK_HIDDEN void pk_fault_fork_hold(void);
PK_HIDDEN void pk_fault_fork_release(int child);

/*
 * pk_fault_own_data() - whether [@lo, @hi) holds memory that probekit's
 * signal path reads or writes (then it must never fault): every
 * PK_SIGNAL_DATA() object, the calling thread's PK_SIGNAL_TLS() objects
 * and its errno. Other threads' TLS cannot be found from here, as the public
 * contracts say (pk_fault_register() in include/probekit/fault.h,
 * pk_watch_add() in include/probekit/watch.h).
 */
PK_HIDDEN int pk_fault_own_data(uintptr_t lo, uintptr_t hi);

#endif /* PK_FAULT_H */
