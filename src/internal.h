/* SPDX-License-Identifier: MIT */
/* internal.h - helpers shared by every layer: logging, asserts, containers. */
#ifndef PK_INTERNAL_H
#define PK_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "probekit.h"

#define PK_HIDDEN __attribute__((visibility("hidden")))

/*
 * Code that runs on the trap path (signal handlers and what they call) lives
 * in its own section, so that probes (a later layer) can refuse it, as the
 * kernel's NOKPROBE_SYMBOL does.
 */
#define PK_NOPROBE __attribute__((section("pk_noprobe_text"), noinline))
/*
 * A helper of PK_NOPROBE code that is always inlined into it (so it lives in
 * the caller's section): for the hot fault path, where each call costs.
 */
#define PK_NOPROBE_INLINE inline __attribute__((always_inline))

#define pk_container_of(ptr, type, member)                                     \
	((type *)((char *)(ptr) - offsetof(type, member)))

#define PK_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* An object of probekit's: see own_data() in fault.c, pk_sig_data_overlaps(). */
struct pk_span {
	const void *p;
	size_t len;
};

/* Whether [@lo, @hi) overlaps any of the @n spans at @s. */
static inline int pk_overlaps(uintptr_t lo, uintptr_t hi,
			      const struct pk_span *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((uintptr_t)s[i].p < hi && (uintptr_t)s[i].p + s[i].len > lo)
			return 1;
	return 0;
}

/* Format one message and hand it to the log hook. Never on a signal path. */
PK_HIDDEN void pk_log(enum pk_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define pk_err(...) pk_log(PK_LOG_ERROR, __VA_ARGS__)
#define pk_warn(...) pk_log(PK_LOG_WARN, __VA_ARGS__)
#define pk_info(...) pk_log(PK_LOG_INFO, __VA_ARGS__)
#define pk_dbg(...) pk_log(PK_LOG_DEBUG, __VA_ARGS__)

/* True when the PROBEKIT_<name> environment variable is set to "1". */
PK_HIDDEN int pk_env_flag(const char *name);

/*
 * pk_assert_held() - the mutex that guards some data is held by this thread.
 * Checked in debug builds through an error-checking trylock probe: a mutex
 * held by us makes pthread_mutex_trylock fail with EBUSY (held by someone)
 * which is all a plain mutex can tell; the owner field says whether it's us.
 */
#ifndef NDEBUG
#define pk_assert_held(m)                                                      \
	do {                                                                   \
		if ((m)->__data.__owner != pk_gettid())                        \
			pk_assert_fail("lock not held: " #m, __FILE__,         \
				       __LINE__);                              \
	} while (0)
#else
#define pk_assert_held(m) do { } while (0)
#endif

PK_HIDDEN int pk_gettid(void);

/* membarrier(2), no flags: its result, or -1 with errno set. */
static inline long pk_membarrier(int cmd)
{
	return syscall(SYS_membarrier, cmd, 0, 0);
}

/*
 * Whether this process may use membarrier(PRIVATE_EXPEDITED): registered
 * on the first call (the registration is the process's, and survives
 * fork), for the asymmetric barrier pairs of ret.c and fault.c.
 */
PK_HIDDEN int pk_membarrier_expedited(void);

/*
 * Options structs (`size_t sz` first, STYLE.md "Growth"): field @f of *@o
 * if the caller's struct has it, else 0; and whether the bytes past @known
 * (fields this version does not know) are all zero, as libbpf's
 * OPTS_VALID.
 */
#define PK_OPT(o, type, f)                                                     \
	((o)->sz >= offsetof(type, f) + sizeof((o)->f) ? (o)->f : 0)

static inline int pk_opts_tail_zero(const void *o, size_t sz, size_t known)
{
	for (size_t i = known; i < sz; i++)
		if (((const char *)o)[i])
			return 0;
	return 1;
}

/*
 * fork(): util.c registers one pthread_atfork triple that takes every
 * layer's locks in lock order (ret, probe, sym, fault, chain, urcu-bp, key,
 * text, sig, and util.c's log lock, which any of them may hold while
 * logging) before fork and releases them after, so a child never inherits a
 * lock held by a thread it does not have, nor a commit half done. The
 * order is the nesting order of the code: ret_lock (return probes) is held
 * around probe registrations; probe_lock is held around text
 * commits, pk_text_fill() and trap-chain (fault) registrations; fault_lock
 * around die-chain (chain) registrations; key's lock around text commits;
 * text and fault install their signal handlers (sig_lock) with their own
 * lock held. sym's cache lock nests nothing of these.
 */
PK_HIDDEN void pk_ret_fork_prepare(void);
PK_HIDDEN void pk_ret_fork_parent(void);
PK_HIDDEN void pk_ret_fork_child(void);
PK_HIDDEN void pk_probe_fork_prepare(void);
PK_HIDDEN void pk_probe_fork_parent(void);
PK_HIDDEN void pk_probe_fork_child(void);
PK_HIDDEN void pk_sym_fork_prepare(void);
PK_HIDDEN void pk_sym_fork_release(void);
PK_HIDDEN void pk_fault_fork_prepare(void);
PK_HIDDEN void pk_fault_fork_parent(void);
PK_HIDDEN void pk_fault_fork_child(void);
PK_HIDDEN void pk_chain_fork_prepare(void);
PK_HIDDEN void pk_chain_fork_parent(void);
PK_HIDDEN void pk_chain_fork_child(void);
PK_HIDDEN void pk_key_fork_prepare(void);
PK_HIDDEN void pk_key_fork_release(void);
PK_HIDDEN void pk_text_fork_prepare(void);
PK_HIDDEN void pk_text_fork_parent(void);
PK_HIDDEN void pk_text_fork_child(void);
PK_HIDDEN void pk_sig_fork_prepare(void);
PK_HIDDEN void pk_sig_fork_release(void);
PK_HIDDEN void pk_assert_fail(const char *what, const char *file, int line)
	__attribute__((noreturn));

#endif /* PK_INTERNAL_H */
