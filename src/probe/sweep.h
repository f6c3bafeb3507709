/* SPDX-License-Identifier: MIT */
/* sweep.h - the thread sweep: where every other thread is, moved out of changed sites, waited out of changed trampoline slots. */
#ifndef PK_PROBE_SWEEP_H
#define PK_PROBE_SWEEP_H

/*
 * The kernel waits for threads to leave changed code with
 * synchronize_rcu_tasks; user space has no such thing, so the sweep asks
 * each other thread with a signal (SIGRTMAX - 2, or PROBEKIT_PROBE_SIGNAL),
 * whose handler looks at where the thread was interrupted:
 *
 *   move  (pk_sweep_move(), from a text commit's hook, once int3 is on
 *         every site's first byte so no thread enters a site any more) a
 *         thread strictly inside a site is sent to where its instruction
 *         runs in the site's trampoline slot: arming, to the same
 *         instruction in the slot's copy; disarming, from between the NOPs
 *         and the jmp to the slot's entry, where the jmp would have taken
 *         it.
 *   wait  (pk_sweep_wait(), after a disarming commit) each thread is asked
 *         again until it has been seen once not busy: outside the changed
 *         slots, outside code that leads into slots (the chunks' stubs,
 *         divert targets: pk_sweep_busy_code()) and probekit's PK_NOPROBE
 *         code, and not running the handlers of a changed trampoline (by
 *         pk_sweep_self, so a thread busy in other probes' handlers does
 *         not hold an unregister up). Seen so once after the commit, it
 *         can never enter those slots again.
 *
 * A thread that does not answer within 10 s makes the sweep fail with
 * -EBUSY (logged, with where each silent or busy thread was last seen).
 * Sweeps are serialised by the caller (probe.c holds probe_lock around
 * every call here). Not from a signal handler.
 */

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/* Where each displaced instruction of a site starts, in the site and in its
   slot's copy (from PK_TRAMP_SLOT_COPY). */
#define PK_SWEEP_MAP 6	/* displaced instructions: 5 bytes need at most 5 */
struct pk_sweep_map {
	uint8_t n;
	uint8_t src[PK_SWEEP_MAP], dst[PK_SWEEP_MAP];
};

/* A site a commit changes, and its trampoline slot. */
struct pk_sweep_site {
	uintptr_t addr;			/* first byte */
	uintptr_t slot;
	const struct pk_sweep_map *map;	/* arming: where threads go */
	uint8_t len;			/* bytes that change */
	uint8_t arming;			/* else disarming */
};

/*
 * What the sweep handler needs to know of its own thread, kept by the
 * probe dispatcher: @depth > 0 while the thread runs probe handlers;
 * @slot points to the trampoline slot address of those it runs at depth 1
 * (NULL until set). One thread writes and reads it (the handler runs on
 * the thread it interrupts): signal fences order them.
 */
struct pk_sweep_self {
	unsigned long depth;
	const uintptr_t *slot;
};
PK_HIDDEN extern __thread struct pk_sweep_self pk_sweep_self
	__attribute__((tls_model("initial-exec")));

/*
 * Code a thread is busy in: the caller's node, linked for good (it must
 * stay alive and unchanged).
 */
struct pk_sweep_code {
	uintptr_t lo, hi;
	const struct pk_sweep_code *next;
};

/* pk_sweep_init() - install the signal's handler, once. 0, -EINVAL, -EBUSY. */
PK_HIDDEN int pk_sweep_init(void);

/* pk_sweep_busy_code() - threads in [@c->lo, @c->hi) are busy from now on. */
PK_HIDDEN void pk_sweep_busy_code(struct pk_sweep_code *c);

/*
 * pk_sweep_move() - move the threads inside @sites (not overlapping;
 * sorted here). Return: 0, or -EBUSY (a thread did not answer), -ENOMEM.
 */
PK_HIDDEN int pk_sweep_move(struct pk_sweep_site *sites, size_t n);

/*
 * pk_sweep_wait() - wait until no thread can be in the slots at @slots
 * (sorted here) nor in their handlers. Return: 0, or -EBUSY, -ENOMEM.
 */
PK_HIDDEN int pk_sweep_wait(uintptr_t *slots, size_t n);

#endif /* PK_PROBE_SWEEP_H */
