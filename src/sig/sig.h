/* SPDX-License-Identifier: MIT */
/* sig.h - signal ownership: who handles SIGSEGV/SIGBUS/SIGILL/SIGTRAP in which order. */
#ifndef PK_SIG_H
#define PK_SIG_H

/*
 * One process-wide handler per signal, installed while at least one layer
 * has a hook on it, dispatching in a fixed order:
 *
 *   1. PK_SIG_TEXT   text's in-flight patch sites (SIGTRAP only);
 *   2. PK_SIG_FAULT  the fault layer: trap chain, fault chain, die chain;
 *   3. the handler that was there before probekit (or that the program set
 *      since with pk_signal_action()), called with its own flags: SA_SIGINFO
 *      or not, its sa_mask blocked for the call, SA_RESETHAND honoured;
 *   4. the default action: for a fault the kernel raised, SIG_DFL is set and
 *      the faulting instruction runs again, so the process dies of the
 *      original signal with a core, at the right place; for a signal sent
 *      with kill/raise, SIG_DFL and the signal sent again.
 *
 * This lives below text (text hooks SIGTRAP on its first commit) so that
 * text and fault share one handler without text knowing about fault.
 *
 * One exception, for speed: a layer may give a signal an entry of its own
 * (pk_sig_set_entry()), which the kernel calls instead and which calls
 * pk_sig_handler() for whatever it does not handle itself. The fault layer
 * enters SIGSEGV and SIGBUS so, asking its ranges first; no PK_SIG_TEXT
 * hook exists for those signals, so the order is the same. A handled
 * fault is the one path where probekit's handler is the program's hot loop
 * (a GC's barrier, a watchpoint): there each cache line that the handler
 * touches costs (bench_fault "userfault"), and one function with one
 * thread-local block touches the fewest.
 *
 * The signal path takes no lock, allocates nothing, logs nothing and keeps
 * errno. A hook returns non-zero when it claimed the signal; the thread then
 * resumes with the (possibly edited) register context.
 */

#include <signal.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/ucontext.h>

#include "internal.h"

enum pk_sig_slot {
	PK_SIG_TEXT = 0,
	PK_SIG_FAULT = 1,
	PK_SIG_NSLOTS
};

typedef int (*pk_sig_hook_fn)(int sig, siginfo_t *si, ucontext_t *uc);

/*
 * pk_sig_hook() - put @fn in @slot for @sig (SIGSEGV, SIGBUS, SIGILL,
 * SIGTRAP), installing probekit's handler if it is not installed yet.
 * @fn NULL removes the hook; the last hook of a signal gone, the handler
 * before probekit is put back (unless the program replaced ours meanwhile).
 * Not from a signal handler.
 * Return: 0, or -EINVAL, or -errno of sigaction.
 */
PK_HIDDEN int pk_sig_hook(int sig, enum pk_sig_slot slot, pk_sig_hook_fn fn);

/* The handler: steps 1-4 above. */
PK_HIDDEN void pk_sig_handler(int sig, siginfo_t *si, void *ctx);

typedef void (*pk_sig_entry_fn)(int sig, siginfo_t *si, void *ctx);

/*
 * pk_sig_set_entry() - have the kernel call @fn for @sig instead of
 * pk_sig_handler(), which @fn calls for what it does not handle (NULL:
 * pk_sig_handler() again). Before probekit's handler is installed for @sig.
 * Return: 0, or -EINVAL, -EBUSY (installed already).
 */
PK_HIDDEN int pk_sig_set_entry(int sig, pk_sig_entry_fn fn);

/*
 * pk_sig_pin() - install probekit's handler for @sig now, and keep it
 * installed when the last hook goes (interpose.c does so for SIGTRAP when
 * the library loads). Return: 0, or -EINVAL, or -errno of sigaction.
 */
PK_HIDDEN int pk_sig_pin(int sig);

/*
 * pk_sig_pin_set() - pk_sig_pin() for each signal of @bits (bit s - 1 for
 * signal s), the handlers' masks stripped of them all in one pass (and of
 * any other signal owned and not stripped yet: interpose.c's sweep
 * signal). Return: 0, or the first error (the others are pinned).
 */
PK_HIDDEN int pk_sig_pin_set(unsigned long bits);

/* Whether probekit's handler is installed for @sig now. */
PK_HIDDEN int pk_sig_owned(int sig);

/* ---- interpose.c: the program's view of the owned signals ---- */

/* Bits (1 << (sig - 1)) of the signals probekit's handler is installed for. */
PK_HIDDEN extern unsigned long pk_sig_owned_bits;

/* Whether the program has @sig blocked in this thread (its virtual mask). */
PK_HIDDEN int pk_sig_vblocked(int sig);

/*
 * Around a program's handler of @sig (its @flags and @sa_mask; @ctx the
 * ucontext_t or NULL): the virtual mask as the kernel would set it, the
 * program's view in @ctx's uc_sigmask; _leave() puts back what _enter()
 * returned (or what the handler wrote in uc_sigmask) and sends the
 * deferred signals that lets through.
 */
PK_HIDDEN unsigned long pk_sig_prog_enter(int sig, int flags,
					  const sigset_t *sa_mask, void *ctx);
PK_HIDDEN void pk_sig_prog_leave(unsigned long was, void *ctx);

/*
 * Bumped by probekit's handlers that stand for no handler of the
 * program's (the sweep's): a wait they alone interrupted is restarted.
 */
PK_HIDDEN extern __thread unsigned long pk_sig_own_runs
	__attribute__((tls_model("initial-exec")));

/* Keep asynchronous @sig pending for this thread until the program unblocks it. */
PK_HIDDEN void pk_sig_defer(int sig, const siginfo_t *si);

/* libc's sigaction (-1 and errno), and pthread_sigmask (0 or an error number). */
PK_HIDDEN int pk_sig_real_sigaction(int sig, const struct sigaction *act,
				    struct sigaction *old);
PK_HIDDEN int pk_sig_real_sigmask(int how, const sigset_t *set, sigset_t *old);

/*
 * The signals of @bits (bit s - 1 for signal s) now owned: out of every
 * handler's sa_mask and this thread's real mask, in one pass over the
 * handlers for all of them (a pass is 62 sigaction() calls).
 */
PK_HIDDEN void pk_sig_strip_masks(unsigned long bits);
/* pk_sig_strip_masks()'s pass over the handlers alone. */
PK_HIDDEN void pk_sig_strip_handlers(unsigned long bits);

/*
 * pk_sig_check_blocked() - 0, or when a thread has @sig really blocked:
 * with PK_SIG_CHECK_WAIT (no probekit lock held; sleeps up to ~2 s to wait
 * out glibc's transient blocking) -EDEADLK, logged, naming the thread and
 * @what; without it (one pass, no sleep, for a caller holding its lock)
 * -EAGAIN, not logged: drop the lock, check with the wait, try again.
 * A waiting check that found nothing lets this thread's checks in the
 * next 2 ms skip their pass. Not from a signal handler.
 */
#define PK_SIG_CHECK_WAIT	1u
PK_HIDDEN int pk_sig_check_blocked(int sig, const char *what, unsigned int flags);

/*
 * pk_sig_other_threads() - whether this process has a thread besides the
 * caller now (/proc/self/task, raw system calls, no malloc): 0 or 1 (1
 * too when /proc cannot be read). Only the caller can add one while it
 * is 0. Not from a signal handler.
 */
PK_HIDDEN int pk_sig_other_threads(void);

/*
 * What /proc/self/task/TID says of a thread: its real mask, state letter,
 * context switches, and, asleep in a system call, which and where (its
 * user sp and pc); @nr -1 when not in a call, -2 unknown (running, or no
 * syscall file). pk_sig_task_look(): 0, -ESRCH (gone), -errno.
 */
struct pk_sig_task {
	unsigned long sigblk;
	char state;
	unsigned long long ctxt;
	long nr;
	uintptr_t sp, pc;
};
PK_HIDDEN int pk_sig_task_look(pid_t tid, struct pk_sig_task *t);

/*
 * Whether @tid is still asleep in the system call @prev saw, at the same
 * place, and has not run since (same context switch count).
 */
PK_HIDDEN int pk_sig_task_still(pid_t tid, const struct pk_sig_task *prev);

/* The glibc posix_spawn child function [@addr, +@len) overlaps, or NULL. */
PK_HIDDEN const char *pk_sig_spawn_child_fn(uintptr_t addr, size_t len);

#endif /* PK_SIG_H */
