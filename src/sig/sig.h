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

/* Whether probekit's handler is installed for @sig now. */
PK_HIDDEN int pk_sig_owned(int sig);

#endif /* PK_SIG_H */
