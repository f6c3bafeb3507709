/* SPDX-License-Identifier: MIT */
/* internal.h - what every layer shares: logging, asserts, the lock-order table and fork entries, signal-path data, base-layer helpers. */
#ifndef PK_INTERNAL_H
#define PK_INTERNAL_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The library has no branch sites of its own: no module constructor. */
#define PK_NO_MODULE_CONSTRUCTOR
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

/* An object of probekit's: its address and size (PK_SIGNAL_DATA). */
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

/*
 * The PROBEKIT_* environment, read through secure_getenv(): in a
 * secure-execution process (AT_SECURE: set-user-ID, set-group-ID, file
 * capabilities) every variable reads as unset, so a user who runs such a
 * program cannot make the library log addresses or change how it works.
 */
PK_HIDDEN const char *pk_getenv(const char *name);
/* True when the PROBEKIT_<name> environment variable is set to "1". */
PK_HIDDEN int pk_env_flag(const char *name);

/*
 * pk_assert_held() - the mutex that guards some data is held by this thread.
 * Checked where NDEBUG is not defined (CMAKE_BUILD_TYPE=Debug; .ci/run runs
 * the tests in such a build): glibc records the owning thread's tid in
 * every mutex it locks, whatever its type.
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
 * if the caller's struct has it, else 0; and pk_opts_check(): -E2BIG for a
 * @sz past PK_OPTS_SZ_MAX (no options struct is that large: a wrong sz,
 * whose "unknown fields" must not be read), -EINVAL if a byte past @known
 * (a field this version does not know) is set, as libbpf's OPTS_VALID.
 */
#define PK_OPT(o, type, f)                                                     \
	((o)->sz >= offsetof(type, f) + sizeof((o)->f) ? (o)->f : 0)

#define PK_OPTS_SZ_MAX 4096

static inline int pk_opts_check(const void *o, size_t sz, size_t known)
{
	if (sz > PK_OPTS_SZ_MAX)
		return -E2BIG;
	for (size_t i = known; i < sz; i++)
		if (((const char *)o)[i])
			return -EINVAL;
	return 0;
}

/*
 * Lock order, outermost first: the nesting order of the code. A thread
 * holding a lock of one rank takes only locks of later ranks.
 *
 *   rank            lock(s)                  held around
 *   PK_RANK_RET     ret_lock (probe/ret.c)   probe registrations
 *   PK_RANK_PROBE   probe_lock (probe.c)     text commits, pk_text_fill(),
 *                                            trap-chain registrations
 *   PK_RANK_SYM     cache_lock (sym.c)       nothing of these
 *   PK_RANK_FAULT   pk_fault_lock (fault.c;  die-chain registrations,
 *                   watch.c's state too)     handler installs (sig)
 *   PK_RANK_CHAIN   chain locks, urcu-bp's   RCU grace periods
 *   PK_RANK_KEY     pk_key_lock (key.c)      text commits
 *   PK_RANK_TEXT    text_lock (text.c)       handler installs (sig)
 *   PK_RANK_SIG     sig_lock (sig.c)         nothing of these
 *   PK_RANK_LOG     log_lock (util.c)        nothing: any layer logs with
 *                                            its own lock held
 *
 * fork(): a layer whose locks or state must survive fork() declares a
 * PK_ATFORK entry with its rank. util.c's one pthread_atfork triple runs
 * the entries' @prepare in rank order before fork and @parent / @child in
 * the reverse order after it, so a child never inherits a lock held by a
 * thread it does not have, nor a commit half done. util.c knows no layer:
 * the entries are found in the pk_atfork section.
 */
enum pk_lock_rank {
	PK_RANK_RET,
	PK_RANK_PROBE,
	PK_RANK_SYM,
	PK_RANK_FAULT,
	PK_RANK_CHAIN,
	PK_RANK_KEY,
	PK_RANK_TEXT,
	PK_RANK_SIG,
	PK_RANK_LOG,
	PK_RANK_N
};

struct pk_atfork {
	enum pk_lock_rank rank;
	void (*prepare)(void);
	void (*parent)(void);
	void (*child)(void);
};

/* One atfork entry of a layer; any handler may be NULL. */
#define PK_ATFORK(name, rnk, prep, par, chld)                                  \
	static const struct pk_atfork pk_atfork_##name                         \
		__attribute__((used, section("pk_atfork"), aligned(8))) = {    \
			.rank = (rnk), .prepare = (prep), .parent = (par),     \
			.child = (chld) }

/*
 * Data that probekit's signal path reads or writes, so must never fault
 * (the fault layer refuses to watch or protect it). A layer declares each
 * such static object with PK_SIGNAL_DATA(obj) beside its definition, and
 * each such thread-local one with PK_SIGNAL_TLS(obj) (TLS has no link-time
 * address: a getter of it goes in the section instead);
 * pk_signal_data_overlaps() sees them all, the calling thread's copies of
 * the thread-local ones.
 */
#define PK_SIGNAL_DATA(obj)                                                    \
	static const struct pk_span pk_sigdata_##obj                           \
		__attribute__((used, section("pk_sigdata"), aligned(8))) = {   \
			&(obj), sizeof(obj) }

#define PK_SIGNAL_TLS(obj)                                                     \
	static struct pk_span pk_sigtls_get_##obj(void)                        \
	{                                                                      \
		return (struct pk_span){ &(obj), sizeof(obj) };                \
	}                                                                      \
	static struct pk_span (*const pk_sigtls_##obj)(void)                   \
		__attribute__((used, section("pk_sigtls"), aligned(8))) =      \
			pk_sigtls_get_##obj

/*
 * Whether [@lo, @hi) overlaps an object declared with PK_SIGNAL_DATA(), or
 * the calling thread's copy of one declared with PK_SIGNAL_TLS().
 */
PK_HIDDEN int pk_signal_data_overlaps(uintptr_t lo, uintptr_t hi);

PK_HIDDEN void pk_assert_fail(const char *what, const char *file, int line)
	__attribute__((noreturn));

/*
 * PK_LOWER_BOUND(n, i, before) - a binary search: the first index i in
 * [0, @n) for which @before, an expression of i, is false; @n if none.
 * @before must hold for a prefix of the indices and for none after it
 * ("a[i].end <= addr" over an array sorted by address). A statement
 * expression, not a call: usable in PK_NOPROBE code (the trap and fault
 * paths), where libc's bsearch() and an out-of-line comparator are not.
 * Context: any thread, async-signal-safe.
 */
#define PK_LOWER_BOUND(n, i, before)                                           \
	__extension__({                                                        \
		size_t pk_lo_ = 0, pk_hi_ = (n);                               \
		while (pk_lo_ < pk_hi_) {                                      \
			size_t i = pk_lo_ + (pk_hi_ - pk_lo_) / 2;             \
			if (before)                                            \
				pk_lo_ = i + 1;                                \
			else                                                   \
				pk_hi_ = i;                                    \
		}                                                              \
		pk_lo_;                                                        \
	})

/*
 * pk_grow() - room for @need elements of @size bytes in the array at *@pp,
 * which has room for *@cap: doubled (16 at least) until it is enough.
 * @pp: the address of the array's pointer (of any object type; NULL while
 *      nothing is allocated); PK_GROW() passes the element size itself.
 * On failure the array and *@cap are as they were. Inline while there is
 * room (an append per element costs a compare); pk_grow_alloc() otherwise.
 * Context: any thread, not async-signal-safe (realloc); the caller guards
 * the array. Never writes errno.
 * Return: 0, or -ENOMEM.
 */
PK_HIDDEN int pk_grow_alloc(void *pp, size_t *cap, size_t need, size_t size);

static inline int pk_grow(void *pp, size_t *cap, size_t need, size_t size)
{
	return need <= *cap ? 0 : pk_grow_alloc(pp, cap, need, size);
}

#define PK_GROW(pp, cap, need) pk_grow((pp), (cap), (need), sizeof(**(pp)))

/*
 * pk_tasks_list() - the threads of this process (/proc/self/task), sorted
 * by tid, leaving out @except (0: none). A snapshot: threads may start or
 * end meanwhile.
 * @out: receives a malloc()ed array for free(), NULL when *@n is 0
 * Context: any thread, not async-signal-safe (opendir, malloc). Never
 * writes errno.
 * Return: 0, or -ENOMEM, or the -errno of opening /proc/self/task.
 */
PK_HIDDEN int pk_tasks_list(pid_t except, pid_t **out, size_t *n);

/*
 * pk_tid_gone() - whether @tid is no longer a thread of this process
 * (tgkill(2) with signal 0 says ESRCH).
 * Context: any thread, async-signal-safe, PK_NOPROBE. Never writes errno.
 */
PK_HIDDEN int pk_tid_gone(int tid);

/*
 * pk_slot_claim() - a slot of a pool for thread @tid, taken by a
 * compare-and-swap on the slot's owner word: an int holding 0 while the
 * slot is free, else its owner's tid. The scan starts at slot @start % @n
 * and wraps. First pass: a free slot. Second pass, only with @reclaim: a
 * slot whose owner is no longer a thread of this process (tgkill(2) says
 * ESRCH) and for which @reclaim(i, @arg) says its state may be taken over
 * (no read side left open, say).
 * @owner0: slot 0's owner word; slot i's lies i * @stride bytes after it
 *          (&pool[0].owner, sizeof(pool[0]))
 * The successful CAS is an acquire: it pairs with the release store of 0
 * by which the previous owner freed the slot, so its writes are seen.
 * Context: any thread, async-signal-safe (loads and a CAS; raw getpid and
 * tgkill syscalls in the second pass only), PK_NOPROBE; so must @reclaim be. Never
 * writes errno.
 * Return: the slot's index, or -EBUSY (none to be had).
 */
PK_HIDDEN int pk_slot_claim(int *owner0, size_t stride, size_t n, int tid,
			    size_t start, int (*reclaim)(size_t i, void *arg),
			    void *arg);

#endif /* PK_INTERNAL_H */
