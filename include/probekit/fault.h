/* SPDX-License-Identifier: MIT */
/* probekit/fault.h - SIGSEGV/SIGBUS/SIGILL/SIGTRAP as trap, fault and die chains (pk_fault_*, pk_trap_*, pk_die_*), pk_signal_action(). */
#ifndef PROBEKIT_FAULT_H
#define PROBEKIT_FAULT_H

#include <stddef.h>
#include <stdint.h>

#include <probekit/common.h>
#include <probekit/chain.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Fault handling. probekit owns SIGSEGV, SIGBUS, SIGILL and SIGTRAP while
 * something of its own needs them, and sends each signal down separate
 * chains, never one overloaded chain:
 *
 *   1. text's patch sites in flight (SIGTRAP);
 *   2. the trap chain: the entry registered at the int3 (SIGTRAP) or the
 *      faulting instruction (SIGILL), found by address;
 *   3. the fault chain: the one range that contains the faulting address
 *      (SIGSEGV, SIGBUS), found by binary search; nobody else is called;
 *   4. the die chain (crash reporters), only when nothing above claimed
 *      the signal;
 *   5. the handler that was installed before probekit (or set since with
 *      pk_signal_action()), called with its own flags;
 *   6. the default action: the process dies of the original signal, with a
 *      core where cores are enabled.
 *
 * Handlers run on the thread's alternate signal stack when it has one
 * (pk_thread_altstack() gives it one). They run inside a signal handler:
 * async-signal-safe calls only, no malloc, no locks.
 *
 * A handler the program installs with plain sigaction() after probekit
 * replaces probekit's (as it would replace anybody's); if it chains to the
 * old action sigaction() returned, probekit still runs first from inside
 * it. To install a handler behind probekit's chains, use
 * pk_signal_action().
 */

struct sigaction;

/* Access kinds, from the x86 page-fault error code of the signal context. */
#define PK_ACCESS_READ 0x1u
#define PK_ACCESS_WRITE 0x2u
#define PK_ACCESS_EXEC 0x4u

/* What a fault, trap or die handler is told. */
struct pk_fault {
	void *addr;		/* faulting data address (SIGSEGV/SIGBUS) or
				 * instruction (trap chain: the int3 itself) */
	void *start;		/* start of the range or trap entry that matched */
	unsigned int access;	/* PK_ACCESS_*, 0 when the kernel did not say */
	int signo;
	int code;		/* si_code */
	void *siginfo;		/* siginfo_t * */
	void *ucontext;		/* ucontext_t *: the registers, may be edited */
};

#define PK_FAULT_UNHANDLED 0	/* not mine: go on down the order */
#define PK_FAULT_HANDLED 1	/* resume with the (edited) registers */

/*
 * A fault or trap handler. HANDLED resumes the thread: after a fault the
 * access is tried again (so the handler must have made it succeed), after
 * an int3 the thread continues after it, at whatever RIP the handler left
 * in the ucontext.
 */
typedef int (*pk_fault_fn)(const struct pk_fault *f, void *ctx);

/**
 * pk_fault_register() - handle faults on the addresses [@addr, @addr + @len)
 * @addr: page-aligned start, mapped
 * @len: page-aligned length, > 0
 * @fn: called for SIGSEGV and SIGBUS at an address in the range
 * @ctx: passed to @fn
 *
 * Only @fn is called for a fault in the range: the lookup is a binary search
 * over the sorted ranges, without a lock.
 *
 * probekit does not change the range's protection: the caller protects it
 * and @fn makes the access succeed. A range that holds data probekit's own
 * signal handler uses (its tables and counters, the calling thread's errno
 * and TLS) would kill the process once protected, and is refused.
 *
 * After PK_FAULT_HANDLED the thread resumes with the registers, flags and
 * vector state of f->ucontext, as edited by @fn. Where it can, probekit
 * resumes it itself instead of through the rt_sigreturn system call (a
 * handled fault costs ~7 % less); it uses rt_sigreturn when @fn edited
 * uc_sigmask or uc_stack, set the trap flag, or ran on an alternate
 * signal stack, and under a shadow stack. What rt_sigreturn would undo
 * that is not in the ucontext
 * is then not undone: @fn must leave its thread's signal mask and
 * alternate stack as it found them (or set them in the ucontext).
 *
 * Context: any thread, may block; not from a chain callback or signal handler.
 * Return: 0, or -EINVAL (NULL, unaligned, empty, wrapping or unmapped range),
 * -EEXIST (overlaps a registered range or a page watched by page
 * protection), -EBUSY (probekit's own data), -EDEADLK (from inside a fault,
 * trap or die handler), -ENOMEM; on failure nothing changed.
 */
PK_API int pk_fault_register(void *addr, size_t len, pk_fault_fn fn,
			     void *ctx);

/**
 * pk_fault_unregister() - remove the range that starts at @addr
 * @addr: as registered
 *
 * Returns once no thread runs the range's handler any more.
 *
 * Context: any thread, may block; not from a chain callback or signal handler.
 * Return: 0, or -ENOENT (no range starts at @addr), -EBUSY (@addr is a page
 * that a watchpoint protects: pk_watch_remove() it), -EDEADLK, -ENOMEM; on
 * failure nothing changed.
 */
PK_API int pk_fault_unregister(void *addr);

/**
 * pk_trap_register() - handle the int3 (SIGTRAP) or faulting instruction
 * (SIGILL) at @addr
 * @addr: the instruction's address
 * @fn, @ctx: the handler and its argument
 *
 * Context: any thread, may block; not from a chain callback or signal handler.
 * Return: 0, or -EINVAL, -EEXIST (an entry at @addr already), -EDEADLK,
 * -ENOMEM; on failure nothing changed.
 */
PK_API int pk_trap_register(void *addr, pk_fault_fn fn, void *ctx);

/**
 * pk_trap_unregister() - remove the trap entry at @addr
 * @addr: as registered
 *
 * Context: any thread, may block; not from a chain callback or signal handler.
 * Return: 0, or -ENOENT, -EDEADLK, -ENOMEM.
 */
PK_API int pk_trap_unregister(void *addr);

/**
 * pk_die_register() - add a crash handler to the die chain
 * @nb: the notifier; it is called with action = the signal number and
 *      data = a struct pk_fault *
 *
 * Die handlers run only for a signal that nothing registered above claimed,
 * in priority order, before the previous handler and the default action.
 * A handler that returns PK_STOP claims the signal (the thread resumes with
 * the registers in the ucontext); any other result lets it go on.
 *
 * Context: any thread, may block; not from a chain callback or signal handler.
 * Return: 0, or the errors of pk_chain_register(), -EDEADLK.
 */
PK_API int pk_die_register(struct pk_notifier *nb);

/**
 * pk_die_unregister() - remove @nb from the die chain, waiting for its calls
 * @nb: as registered
 *
 * Context: any thread, may block; not from a chain callback or signal handler.
 * Return: 0, or -ENOENT, -EINVAL, -EDEADLK.
 */
PK_API int pk_die_unregister(struct pk_notifier *nb);

/**
 * pk_signal_action() - sigaction() behind probekit's chains
 * @sig: the signal
 * @act: the new action, or NULL
 * @oldact: receives the action it replaces, or NULL
 *
 * For SIGSEGV, SIGBUS, SIGILL and SIGTRAP while probekit's handler is
 * installed, sets (and reads) the action probekit passes unclaimed signals
 * to, leaving probekit's handler in place; probekit puts it back as the
 * signal's action when it no longer needs the signal. Otherwise the same as
 * sigaction().
 *
 * Context: any thread, may block; not from a signal handler.
 * Return: 0, or -EINVAL, or -errno of sigaction().
 */
PK_API int pk_signal_action(int sig, const struct sigaction *act,
			    struct sigaction *oldact);

/**
 * pk_thread_altstack() - give the calling thread an alternate signal stack
 * @size: its size in bytes (0: 64 KiB)
 *
 * So that a fault handler can run when the thread's own stack is what
 * overflowed. Keeps a stack the thread already has; the stack is freed at
 * thread exit.
 *
 * Context: any thread, may block; not from a signal handler.
 * Return: 0, or -EINVAL (@size too small or too large), -ENOMEM.
 */
PK_API int pk_thread_altstack(size_t size);

/* Process-wide counters of the fault layer (monotonic). */
struct pk_fault_stats {
	size_t sz;		/* sizeof(struct pk_fault_stats) */
	uint64_t faults;	/* faults a range handler claimed */
	uint64_t traps;		/* traps a trap entry claimed */
	uint64_t die_claimed;	/* signals a die handler claimed */
	uint64_t watch_hits;	/* watchpoint hits reported */
	uint64_t watch_open_steps; /* page mechanism: steps that had to open
				    * the page to all threads (an instruction
				    * whose access could not be moved to the
				    * page's alias); while 0, no access by any
				    * thread went unseen */
	uint64_t resumed;	/* of faults: the thread resumed without the
				 * rt_sigreturn system call (see
				 * pk_fault_register()) */
};

/**
 * pk_fault_stats() - read the fault layer's counters
 * @st: filled up to @st->sz bytes; set @st->sz first
 *
 * Context: any thread, async-signal-safe.
 * Return: 0, or -EINVAL.
 */
PK_API int pk_fault_stats(struct pk_fault_stats *st);

#ifdef __cplusplus
}
#endif

#endif /* PROBEKIT_FAULT_H */
