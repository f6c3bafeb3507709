/* SPDX-License-Identifier: MIT */
/* probekit.h - the one public header: live text patching, static keys, notifier chains, fault chains. */
#ifndef PROBEKIT_H
#define PROBEKIT_H

/*
 * probekit brings the kernel's event-hook machinery into ordinary processes.
 * A hook costs nothing until somebody listens, and next to nothing when
 * somebody does.
 *
 * Layers (each uses only those above it in this file):
 *
 *   text   - live patching of running, multi-threaded code in batches
 *            (pk_batch_*), following the kernel's int3 protocol.
 *   key    - static keys: a branch site is a 5-byte NOP or JMP that is
 *            patched when the key changes (pk_branch_unlikely/likely).
 *   chain  - notifier chains with the kernel's semantics; an empty chain's
 *            pk_notify() site is a NOP.
 *   fault  - SIGSEGV/SIGBUS/SIGILL/SIGTRAP split into a trap chain (by
 *            address), a fault chain (by address range) and a die chain.
 *
 * Conventions:
 *   - every int function returns 0 (or a count) on success and -errno on
 *     failure, and never writes errno;
 *   - details of a failure go to the log hook (pk_set_log(), or the
 *     PROBEKIT_LOG environment variable), never to stdout or stderr directly;
 *   - each declaration ends with a Context: line saying from where it may be
 *     called.
 */

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PK_VERSION_MAJOR 0
#define PK_VERSION_MINOR 1
#define PK_VERSION_PATCH 0

#ifndef PK_API
#define PK_API __attribute__((visibility("default")))
#endif

/**
 * pk_version() - the version of the library loaded at run time
 *
 * Context: any thread, async-signal-safe.
 * Return: a static string "MAJOR.MINOR.PATCH".
 */
PK_API const char *pk_version(void);

/* ------------------------------------------------------------------ log */

enum pk_log_level {
	PK_LOG_ERROR = 0,
	PK_LOG_WARN = 1,
	PK_LOG_INFO = 2,
	PK_LOG_DEBUG = 3,
};

typedef void (*pk_log_fn)(enum pk_log_level level, const char *msg, void *ctx);

/**
 * pk_set_log() - route probekit's messages to @fn
 * @fn: called with one formatted line (no trailing newline); NULL restores
 *      the default, which writes to stderr the levels up to
 *      PROBEKIT_LOG=error|warn|info|debug (warn when unset)
 * @ctx: passed back to @fn
 *
 * Messages are never produced on a signal path.
 *
 * Context: any thread, may block.
 */
PK_API void pk_set_log(pk_log_fn fn, void *ctx);

/* ----------------------------------------------------------------- text */

/*
 * Live code patching. A batch collects sites (address, new bytes); commit
 * writes them all with three cross-core synchronisations, whatever the
 * batch size:
 *
 *   1. int3 on the first byte of every site, sync;
 *   2. every site's tail bytes, sync;
 *   3. every site's first byte, sync.
 *
 * A thread that executes a site meanwhile traps and is sent on as if the
 * new bytes were already in place (or the old ones, while a failed batch is
 * rolled back). No thread is stopped; no mapping is ever writable and
 * executable at once (code is written through /proc/self/mem).
 *
 * Validation happens before any byte is written: the site lies in an
 * executable mapping, does not overlap another site of the batch, holds
 * @expect if given, the old bytes decode into whole instructions covering
 * exactly the site, the new bytes too, and every instruction boundary the
 * old code has inside the site is also one in the new code (a thread may be
 * stopped at such a boundary; PK_TEXT_F_MERGE waives this last check when the
 * caller knows no thread can be there). A batch is all or nothing.
 *
 * A thread trapping on a site mid-commit continues by emulation when the
 * new bytes are NOPs, a jmp or a call, or by executing the new bytes out of
 * line otherwise; bytes that can do neither (relative branches other than
 * jmp/call, RIP-relative operands) are refused with -ENOTSUP.
 */

#define PK_TEXT_MAX 15 /* bytes in one site: the longest x86-64 instruction */

/* pk_batch_add() flags */
#define PK_TEXT_F_MERGE 0x1u /* new bytes may span old instruction boundaries */

struct pk_batch;

/**
 * pk_batch_create() - start an empty batch of code patches
 * @out: receives the batch
 *
 * Context: any thread, may block; not from a signal handler.
 * Return: 0, or -ENOMEM, -EINVAL (@out is NULL).
 */
PK_API int pk_batch_create(struct pk_batch **out);

/**
 * pk_batch_add() - queue one site of a batch
 * @b: the batch
 * @addr: first byte of the site
 * @bytes: the new bytes
 * @len: their count, 1..PK_TEXT_MAX
 * @expect: the bytes that must be at @addr now, or NULL
 * @flags: 0 or PK_TEXT_F_MERGE
 *
 * Nothing is validated against memory until pk_batch_commit().
 *
 * Context: any thread, may block; not from a signal handler.
 * Return: 0, or -EINVAL (bad argument, batch already committed), -E2BIG
 * (@len > PK_TEXT_MAX), -ENOMEM.
 */
PK_API int pk_batch_add(struct pk_batch *b, void *addr, const void *bytes,
			size_t len, const void *expect, unsigned int flags);

/**
 * pk_batch_count() - number of sites queued in @b
 * @b: the batch
 *
 * Context: any thread.
 * Return: the count (0 for NULL).
 */
PK_API size_t pk_batch_count(const struct pk_batch *b);

/**
 * pk_batch_commit() - validate and write every site of @b
 * @b: the batch; it cannot be committed twice
 *
 * Commits are serialised process-wide, and fork() waits for one in progress.
 *
 * Context: any thread, may block; not from a signal handler.
 * Return: the number of sites written, or -EINVAL (a site outside executable
 * memory, overlapping another, splitting an instruction), -EBUSY (@expect did
 * not match), -ENOTSUP (bytes a trapping thread could not be sent through),
 * -EPERM (writing code refused by the system, e.g. /proc/self/mem closed by
 * policy). On failure nothing has changed.
 */
PK_API int pk_batch_commit(struct pk_batch *b);

/**
 * pk_batch_free() - release a batch (committed or not)
 * @b: the batch, or NULL
 *
 * Context: any thread, may block; not from a signal handler.
 */
PK_API void pk_batch_free(struct pk_batch *b);

/**
 * pk_text_poke() - patch a single site: a batch of one
 * @addr, @bytes, @len, @expect, @flags: as for pk_batch_add()
 *
 * Context: any thread, may block; not from a signal handler.
 * Return: 1, or a negative error as for pk_batch_add() and pk_batch_commit().
 */
PK_API int pk_text_poke(void *addr, const void *bytes, size_t len,
			const void *expect, unsigned int flags);

/* Process-wide counters of the text layer (monotonic). */
struct pk_text_stats {
	size_t sz;		/* sizeof(struct pk_text_stats) */
	uint64_t commits;	/* successful commits */
	uint64_t sites;		/* sites written by them */
	uint64_t syncs;		/* cross-core synchronisations issued */
	uint64_t writes;	/* write system calls to code */
	uint64_t traps;		/* threads sent on by the trap handler */
	const char *sync_method; /* "membarrier-sync-core", "membarrier-expedited", "mprotect-ipi" or NULL before first use */
};

/**
 * pk_text_stats() - read the text layer's counters
 * @st: filled up to @st->sz bytes; set @st->sz first
 *
 * Context: any thread.
 * Return: 0, or -EINVAL (NULL or @st->sz too small).
 */
PK_API int pk_text_stats(struct pk_text_stats *st);

/* ------------------------------------------------------------------ key */

/*
 * Static keys. A site compiled by pk_branch_unlikely()/pk_branch_likely() is
 * a 5-byte instruction recorded in the module's __pk_jump_table section:
 *
 *   as compiled          jmp to a load-and-branch on key->enabled (correct
 *                        before probekit has seen the module, and forever in
 *                        fallback mode);
 *   once the module is   a 5-byte NOP or a jmp straight to the branch target:
 *   registered           no load, no flag; patched whenever the key flips.
 *
 *                      key disabled     key enabled
 *   pk_branch_unlikely   NOP (false)      JMP -> true block
 *   pk_branch_likely     JMP -> false     NOP (true)
 *
 * Every module (executable, shared library, dlopen'ed library) registers its
 * table from a constructor emitted by this header, so sites of a library
 * loaded after a key was enabled come up in the key's state.
 *
 * Fallback mode (PROBEKIT_NOPATCH=1, or code patching refused by the system):
 * sites stay load-and-branch; behaviour is identical, only slower.
 */

struct pk_key {
	int enabled;			/* > 0: true. Read by fallback sites. */
	unsigned int pk_private_flags;
	void *pk_private[2];
};

#define PK_KEY_INIT_FALSE { 0, 0, { 0, 0 } }
#define PK_KEY_INIT_TRUE { 1, 0, { 0, 0 } }
#define PK_KEY_FALSE(name) struct pk_key name = PK_KEY_INIT_FALSE
#define PK_KEY_TRUE(name) struct pk_key name = PK_KEY_INIT_TRUE

/* One entry per branch site; layout shared with the asm below. */
struct pk_jump_entry {
	uintptr_t code;		/* the 5-byte site */
	uintptr_t target;	/* where the JMP form goes */
	uintptr_t check;	/* the load-and-branch block */
	uintptr_t key;		/* address of a pointer to the key; bit 0: likely */
};

/*
 * The key must be a constant address (a key with static storage): C refuses
 * anything else as a static initializer; C++ needs constexpr to do the same,
 * or it would initialize the pointer on first use, after the site was
 * registered.
 */
#ifdef __cplusplus
#define PK__KEY_TYPECHECK(k)                                                   \
	static_assert(__is_same(__typeof__(*(k)), struct pk_key),              \
		      "pk_branch_*() takes a struct pk_key *")
#define PK__KEY_PTR static constexpr struct pk_key *pk__kp
#else
#define PK__KEY_TYPECHECK(k)                                                   \
	_Static_assert(__builtin_types_compatible_p(__typeof__(*(k)),           \
						    struct pk_key),            \
		       "pk_branch_*() takes a struct pk_key *")
#define PK__KEY_PTR static struct pk_key *const pk__kp
#endif

/*
 * The key's address goes through a static pointer so that the asm operand is
 * a local symbol, which position-independent code accepts as "i".
 */
#define PK__BRANCH(k, likely, l_jmp, l_check)                                  \
	PK__KEY_TYPECHECK(k);                                                  \
	PK__KEY_PTR __attribute__((used)) = (k);                              \
	__asm__ goto("1: .byte 0xe9\n\t"                                       \
		     ".long %l[" #l_check "] - 2f\n"                           \
		     "2:\n\t"                                                  \
		     ".pushsection __pk_jump_table,\"aw\"\n\t"                 \
		     ".balign 8\n\t"                                           \
		     ".quad 1b, %l[" #l_jmp "], %l[" #l_check "], %c0 + %c1\n\t" \
		     ".popsection"                                             \
		     : : "i"(&pk__kp), "i"(likely) : : l_jmp, l_check)

/**
 * pk_branch_unlikely() - true while @k is enabled; the false path is inline
 * @k: a struct pk_key * (anything else does not compile)
 *
 * Context: any thread, async-signal-safe.
 */
#define pk_branch_unlikely(k)                                                  \
	(__extension__({                                                       \
		__label__ pk__jmp, pk__check, pk__out;                         \
		int pk__r = 0;                                                 \
		PK__BRANCH(k, 0, pk__jmp, pk__check);                          \
		goto pk__out;                                                  \
	pk__check:                                                             \
		if (__atomic_load_n(&(k)->enabled, __ATOMIC_RELAXED) <= 0)     \
			goto pk__out;                                          \
	pk__jmp:                                                               \
		pk__r = 1;                                                     \
	pk__out:                                                               \
		pk__r != 0;                                                    \
	}))

/**
 * pk_branch_likely() - true while @k is enabled; the true path is inline
 * @k: a struct pk_key *
 *
 * Context: any thread, async-signal-safe.
 */
#define pk_branch_likely(k)                                                    \
	(__extension__({                                                       \
		__label__ pk__jmp, pk__check, pk__out;                         \
		int pk__r = 1;                                                 \
		PK__BRANCH(k, 1, pk__jmp, pk__check);                          \
		goto pk__out;                                                  \
	pk__check:                                                             \
		if (__atomic_load_n(&(k)->enabled, __ATOMIC_RELAXED) > 0)      \
			goto pk__out;                                          \
	pk__jmp:                                                               \
		pk__r = 0;                                                     \
	pk__out:                                                               \
		pk__r != 0;                                                    \
	}))

/**
 * pk_key_enable() - make @k true (no-op if it already is)
 * @k: the key
 *
 * Context: any thread, may block; not from a chain callback or signal handler.
 * Return: 0, or -EINVAL (NULL), -EPERM/-ENOMEM (patching failed; @k unchanged).
 */
PK_API int pk_key_enable(struct pk_key *k);

/**
 * pk_key_disable() - make @k false, whatever its count
 * @k: the key
 *
 * Context: any thread, may block; not from a chain callback or signal handler.
 * Return: 0, or -EINVAL, -EPERM/-ENOMEM (@k unchanged).
 */
PK_API int pk_key_disable(struct pk_key *k);

/**
 * pk_key_inc() - take a reference on @k; the first makes it true
 * @k: the key
 *
 * Context: any thread, may block; not from a chain callback or signal handler.
 * Return: 0, or -EINVAL, -EOVERFLOW, -EPERM/-ENOMEM (@k unchanged).
 */
PK_API int pk_key_inc(struct pk_key *k);

/**
 * pk_key_dec() - drop a reference on @k; the last makes it false
 * @k: the key
 *
 * Context: any thread, may block; not from a chain callback or signal handler.
 * Return: 0, or -EINVAL (NULL, or count already 0), -EPERM/-ENOMEM.
 */
PK_API int pk_key_dec(struct pk_key *k);

/**
 * pk_key_set_many() - set several keys at once: one text batch for all sites
 * @keys: the keys
 * @values: true or false for each
 * @n: how many
 *
 * Context: any thread, may block; not from a chain callback or signal handler.
 * Return: 0, or -EINVAL, -EPERM/-ENOMEM (no key changed).
 */
PK_API int pk_key_set_many(struct pk_key *const *keys, const bool *values,
			   size_t n);

/**
 * pk_key_enabled() - whether @k is true now
 * @k: the key
 *
 * Context: any thread, async-signal-safe.
 */
PK_API bool pk_key_enabled(const struct pk_key *k);

/**
 * pk_key_patching() - whether branch sites are patched (false: fallback mode)
 *
 * Context: any thread, async-signal-safe.
 */
PK_API bool pk_key_patching(void);

/**
 * pk_jump_module_register() - register a module's branch sites
 * @start, @stop: its __pk_jump_table section
 *
 * Called by the constructor this header emits in every translation unit;
 * registering the same table again only counts a reference. Brings every
 * site to its key's state.
 *
 * Context: any thread, may block; not from a chain callback or signal handler.
 * Return: the number of sites, or -EINVAL, -ENOMEM.
 */
PK_API int pk_jump_module_register(struct pk_jump_entry *start,
				   struct pk_jump_entry *stop);

/**
 * pk_jump_module_unregister() - forget a module's sites (its destructor)
 * @start: as registered
 *
 * Context: any thread, may block; not from a chain callback or signal handler.
 */
PK_API void pk_jump_module_unregister(struct pk_jump_entry *start);

#ifndef PK_NO_MODULE_CONSTRUCTOR
extern struct pk_jump_entry __start___pk_jump_table
	__attribute__((weak, visibility("hidden")));
extern struct pk_jump_entry __stop___pk_jump_table
	__attribute__((weak, visibility("hidden")));

/* Runs before default-priority constructors, so no site runs unregistered. */
__attribute__((constructor(101), used)) static void pk__module_init(void)
{
	if (&__start___pk_jump_table != &__stop___pk_jump_table)
		pk_jump_module_register(&__start___pk_jump_table,
					&__stop___pk_jump_table);
}

__attribute__((destructor(101), used)) static void pk__module_fini(void)
{
	if (&__start___pk_jump_table != &__stop___pk_jump_table)
		pk_jump_module_unregister(&__start___pk_jump_table);
}
#endif

/*
 * Debug checks: assertions that stay compiled in and cost a NOP until turned
 * on at run time (by pk_key_enable(&pk_debug_key), or PROBEKIT_DEBUG=1).
 */
PK_API extern struct pk_key pk_debug_key;

/**
 * pk_debug_failed() - report a failed debug check and abort
 * @expr: the check's text
 * @file, @line: where it is
 *
 * Context: any thread.
 */
PK_API void pk_debug_failed(const char *expr, const char *file, int line)
	__attribute__((noreturn));

#define pk_debug_check(expr)                                                   \
	do {                                                                   \
		if (pk_branch_unlikely(&pk_debug_key) && !(expr))              \
			pk_debug_failed(#expr, __FILE__, __LINE__);            \
	} while (0)

/* ---------------------------------------------------------------- chain */

/*
 * Notifier chains, with the kernel's semantics: handlers run by priority
 * (higher first; equal priorities in registration order), each returns a
 * PK_* result, and a result with PK_STOP_MASK stops the walk. The value of
 * the last handler called is returned (PK_DONE if none).
 *
 *   atomic chain    readers take no lock; callable from signal handlers and
 *                   from threads that never called probekit; handlers must
 *                   not block.
 *   blocking chain  handlers may sleep (which delays unregister, never a
 *                   reader); not callable from signal handlers.
 *
 * Atomic chains read under urcu-bp on threads that called
 * pk_thread_register(), and under per-chain reader counts (SRCU style)
 * elsewhere; blocking chains always use the counts, so a sleeping handler
 * delays only its own chain's unregister.
 */

#define PK_DONE 0x0000		/* don't care */
#define PK_OK 0x0001		/* suits me */
#define PK_STOP_MASK 0x8000	/* don't call further */
#define PK_BAD (PK_STOP_MASK | 0x0002) /* bad/veto action */
#define PK_STOP (PK_OK | PK_STOP_MASK) /* clean way to return from the chain */

struct pk_notifier;
typedef int (*pk_notifier_fn)(struct pk_notifier *nb, unsigned long action,
			      void *data);

/* Embed in your own object; recover it with container_of-style arithmetic. */
struct pk_notifier {
	pk_notifier_fn call;
	int priority;
	struct pk_notifier *pk_private_next;
	void *pk_private[2];
};

enum pk_chain_type {
	PK_CHAIN_ATOMIC = 1,
	PK_CHAIN_BLOCKING = 2,
};

struct pk_chain {
	struct pk_key key;		/* enabled while the chain is not empty */
	int type;			/* enum pk_chain_type */
	struct pk_notifier *pk_private_head;
	pthread_mutex_t pk_private_lock;	/* serialises writers */
	unsigned long pk_private_readers[2];	/* unregistered threads' readers */
	unsigned int pk_private_phase;
	void *pk_private_reserved[4];
};

#define PK_CHAIN_INIT(t)                                                       \
	{ PK_KEY_INIT_FALSE, (t), 0, PTHREAD_MUTEX_INITIALIZER, { 0, 0 }, 0,   \
	  { 0, 0, 0, 0 } }
#define PK_CHAIN_ATOMIC_DEFINE(name)                                           \
	struct pk_chain name = PK_CHAIN_INIT(PK_CHAIN_ATOMIC)
#define PK_CHAIN_BLOCKING_DEFINE(name)                                         \
	struct pk_chain name = PK_CHAIN_INIT(PK_CHAIN_BLOCKING)

/**
 * pk_chain_init() - initialise a chain at run time
 * @c: the chain
 * @type: PK_CHAIN_ATOMIC or PK_CHAIN_BLOCKING
 *
 * Context: any thread; not while @c is in use.
 * Return: 0, or -EINVAL.
 */
PK_API int pk_chain_init(struct pk_chain *c, enum pk_chain_type type);

/**
 * pk_chain_register() - add @nb to @c by its priority
 * @c: the chain
 * @nb: the handler; @nb->call and @nb->priority set
 *
 * The first handler enables the chain's key.
 *
 * Context: any thread, may block; not from a chain callback or signal handler.
 * Return: 0, or -EINVAL, -EEXIST (@nb already on @c), -EDEADLK (called from a
 * handler this thread is running), -EPERM/-ENOMEM (the key could not be
 * switched; @nb not added).
 */
PK_API int pk_chain_register(struct pk_chain *c, struct pk_notifier *nb);

/**
 * pk_chain_unregister() - remove @nb from @c and wait until no thread runs it
 * @c: the chain
 * @nb: the handler
 *
 * Context: any thread, may block; not from a chain callback or signal handler.
 * Return: 0, or -EINVAL, -ENOENT (@nb not on @c), -EDEADLK (called from inside
 * a chain call on this thread, where waiting would never end).
 */
PK_API int pk_chain_unregister(struct pk_chain *c, struct pk_notifier *nb);

/**
 * pk_chain_call() - call @c's handlers in order
 * @c: the chain
 * @action, @data: passed to each handler
 * @nr_calls: if not NULL, receives the number of handlers called
 *
 * Context: atomic chains: any thread, async-signal-safe; blocking chains: any
 * thread, may block; not from a signal handler.
 * Return: the last handler's result without PK_STOP_MASK handling applied
 * (PK_DONE if none ran).
 */
PK_API int pk_chain_call(struct pk_chain *c, unsigned long action, void *data,
			 int *nr_calls);

/*
 * Call @c's handlers; a NOP while the chain is empty. @c must have static
 * storage (its key's address is recorded at the call site): call a chain
 * made at run time with pk_chain_call().
 */
#define pk_notify(c, action, data)                                             \
	(pk_branch_unlikely(&(c)->key)                                         \
		 ? pk_chain_call((c), (action), (data), (int *)0)              \
		 : PK_DONE)

/**
 * pk_thread_register() - give this thread the fastest atomic-chain readers
 *
 * Optional. A registered thread reads atomic chains under urcu-bp's read
 * lock (no atomic instruction); an unregistered one, and a signal handler on
 * it, under a per-chain reader count (two atomic operations). Registering
 * inside a signal handler is never done implicitly: urcu-bp registers under
 * a mutex.
 *
 * Context: any thread, may block; not from a signal handler.
 * Return: 0.
 */
PK_API int pk_thread_register(void);

static inline int pk_notifier_from_errno(int err)
{
	return err ? (PK_STOP_MASK | (PK_OK - err)) : PK_OK;
}

static inline int pk_notifier_to_errno(int ret)
{
	ret &= ~PK_STOP_MASK;
	return ret > PK_OK ? PK_OK - ret : 0;
}

/* ---------------------------------------------------------------- fault */

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
/*
 * Memory watchpoints, on the CPU's data breakpoints (perf_event_open with
 * sigtrap, Linux >= 5.13; 4 at a time on x86). Every thread of the process
 * is watched, including threads they create later; a child of fork() is
 * not. The handler runs on the thread that made the access, right after
 * it, inside a signal handler (async-signal-safe calls only).
 *
 * With two threads writing at once, each write is still reported exactly
 * once on the thread that made it, but new_value is what memory holds when
 * the handler runs (the other thread may have written since) and old_value
 * what the previous hit saw.
 *
 * Where hardware breakpoints are not available (or PROBEKIT_WATCH=page),
 * the watched page is protected instead, for every thread, all the time:
 * it becomes a shared memfd page with a writable second mapping (an alias;
 * /proc/self/maps shows it as shared while watched, private again after),
 * and the faulting instruction is single-stepped with its one memory
 * access moved to the alias (a base or index register shifted for that
 * instruction, or a RIP-relative instruction run from a copy placed so
 * that its operand lands on the alias). Steps over one page are taken one
 * at a time. So every access of the watched kind, by any thread, is
 * reported exactly once, on the thread that made it, with its old and new
 * value; a child of fork() gets a page of its own (through pthread_atfork;
 * a raw clone() without it would share the page) and stays watched.
 * fork() from inside a watch, fault, trap or die handler is not supported:
 * the child's count of threads inside those handlers restarts at zero.
 * The bytes must be in writable memory (see pk_watch_add() for which);
 * each access to other bytes of the page costs a fault and a step; a
 * system call that writes the page (read(2) into it) fails with EFAULT; a
 * page whose protection the program changes is no longer watched; the
 * page loses mlock() and madvise() settings while watched.
 *
 * An instruction whose access cannot be moved (a second memory operand, as
 * in rep movs/stos, push/pop; a branch through memory; FS/GS; RSP as the
 * base; the register used elsewhere in the instruction; a W^X policy that
 * refuses the executable copy) is stepped with the page open to all
 * threads for that one instruction, as is every step if the alias cannot
 * be made (or PROBEKIT_WATCH_NOALIAS=1). Each such step counts in
 * pk_fault_stats().watch_open_steps; while it stays put, the above holds.
 * During an open step:
 *   - steps over one page still never overlap (a thread that faults
 *     meanwhile waits), and every change of a watched value is reported by
 *     exactly one hit: never twice, never a value that was not written,
 *     and the last hit reports the value memory ends with;
 *   - but accesses other threads make while the page is open do not
 *     fault: several writes then show as one hit, reported on the stepping
 *     thread with its registers, and reads there are not reported;
 *   - a watch handler that writes a page watched by page protection (its
 *     own or another) opens that page until the handlers return (the same
 *     window); so does an instruction that touches two watched pages.
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
 * page lies in a range registered with pk_fault_register()), -EDEADLK,
 * -ENOMEM; on failure nothing changed.
 */
PK_API int pk_watch_add(void *addr, size_t len, unsigned int access,
			pk_watch_fn fn, void *ctx, struct pk_watch **out);

/**
 * pk_watch_remove() - stop watching; no handler of @w runs once it returns
 * @w: from pk_watch_add()
 *
 * Context: any thread, may block; not from a chain callback or signal handler.
 * Return: 0, or -EINVAL (not a handle pk_watch_add() gives), -ENOENT
 * (already removed), -EDEADLK; on failure nothing changed.
 */
PK_API int pk_watch_remove(struct pk_watch *w);

/* ---------------------------------------------------------------- probe */

/*
 * Probes: kprobes for user space.
 *
 *   - symbol lookup across the executable and every loaded library, from
 *     .dynsym and .symtab (static functions), pk_sym_lookup();
 *   - probes at a function's entry (after an endbr64, which stays in place)
 *     or at any instruction boundary inside it (pk_probe_opts.offset, checked
 *     by decoding the function from its start), with a pre-handler (before
 *     the probed instruction) and a post-handler (after it). Registering or
 *     removing a set of probes is one text batch. Return probes: pk_retprobe_*
 *     at the end of this section.
 *
 * Two kinds (pk_probe_info.kind):
 *   - PK_PROBE_JUMP: the instructions covering 5 bytes at the probe point
 *     become a jmp to a trampoline that calls the handlers and runs them
 *     relocated out of line. Only where that is safe; otherwise
 *   - PK_PROBE_INT3: int3 on the probed instruction's first byte; its
 *     SIGTRAP is looked up by address in the fault layer's trap chain (no
 *     other handler is walked), which sends the thread to the same kind of
 *     trampoline; the instruction runs out of line (a call is emulated as
 *     push + jmp, which a CET shadow stack, if the process enabled one,
 *     would reject at the callee's ret). No single-step. A hit costs a
 *     signal (microseconds, not nanoseconds). PK_PROBE_F_INT3 asks for one
 *     where a jump probe fits.
 *   An int3 probe is used where a jump probe is impossible:
 *   - the displaced instructions (the first >= 5 bytes) run past the
 *     function's end (functions shorter than a jmp);
 *   - a branch anywhere in the function lands inside them after their first
 *     byte, or the function has an indirect jmp (a jump table could);
 *   - one of them is a call (it would return into the trampoline, where a
 *     thread cannot be tracked), an int3, or a static key's site;
 *   - one of them cannot be relocated (loop, jrcxz, prefixed branches; see
 *     pk_arch_relocate()), or with a post-handler they do not fit a slot.
 *   -ENOTSUP only where neither fits: the probed instruction itself cannot
 *   move (loop, jrcxz, a call through rsp, an int3 already there).
 *
 * Several probes on one address share one trampoline, whose kind and whether
 * it calls post-handlers the first registered decides: a probe that needs an
 * int3 or a post-handler where an armed one has none gets -EBUSY (register
 * it first). A probe whose instruction overlaps another armed probe's
 * displaced bytes gets -EBUSY too.
 *
 * Handlers. A handler runs on the thread that reached the probe point, with
 * the registers in a struct pk_regs: a pre-handler before the probed
 * instruction (regs->ip is the probe point), a post-handler after it, with
 * the registers as that instruction left them (regs->ip is the address of
 * the next instruction in the original code). A post-handler needs an
 * instruction that falls through: not a branch, call, ret or trap
 * (-ENOTSUP). A handler may change the general-purpose registers (the
 * change is seen by the code) and the arithmetic flags and DF (CF PF AF ZF
 * SF DF OF) where flags are restored; changes to rsp, ip and other flags
 * are ignored. Saved and restored around handlers: all general-purpose
 * registers and xmm0-xmm7 (the vector argument registers); the flags inside
 * a function (an offset probe) and around post-handlers. At a function's
 * entry the flags are saved (regs->flags) but not restored: no flag is live
 * there (SysV ABI; DF is clear there and after any handler), and popf would
 * cost more than the rest of the trampoline. The 128-byte red zone below
 * the stack pointer is never touched. Not saved: ymm/zmm upper halves, x87
 * and MXCSR state, so a handler must not use AVX (compile it without -mavx)
 * nor change the FPU control words. A handler must be async-signal-safe if
 * the probed code can run in a signal handler. A probe hit while this thread
 * is already in a handler (a handler calling a probed function) skips the
 * handlers and counts a miss (pk_probe_info.missed), as kprobes does.
 *
 * Trampolines live in 64 KiB chunks mapped read+execute within +-2 GiB of
 * the probed code and written through /proc/self/mem; never writable.
 *
 * Arming and removing move threads. Arming a jump probe replaces several
 * instructions by one jmp; a thread stopped between two of them (preempted there) would
 * resume in the middle of the jmp. After the int3 step of the commit, every
 * other thread is sent a signal (SIGRTMAX - 2, or PROBEKIT_PROBE_SIGNAL=N);
 * one found between displaced instructions is moved to the same place in
 * the trampoline's copy. Removing waits, with the same signal, until every
 * thread has been seen outside the removed trampolines and outside any
 * handler. A thread that blocks the signal delays both; after 10 seconds
 * arming fails with -EBUSY (nothing changed) and removal gives up reusing
 * the trampolines (they leak; nothing breaks). A program that uses that
 * signal itself must pick another with PROBEKIT_PROBE_SIGNAL. Like any
 * signal, it cuts short the sleeps SA_RESTART does not restart (nanosleep,
 * poll, epoll_wait...: EINTR) in the threads it visits. A thread running
 * another probe's handler does not delay an unregister; a thread that is
 * inside a trampoline's register save, probekit's dispatcher or a SIGTRAP
 * handler does, until it is seen elsewhere: 16 threads calling probed
 * functions without pause on 2 cores (tests/stress_probe*.c) make one
 * removal take up to seconds.
 *
 * fork(): probekit's locks are taken around fork (pthread_atfork), so a
 * child never inherits one held; its probes stay armed, count its hits and
 * can be removed there.
 */

enum pk_sym_table {
	PK_SYM_DYNSYM = 1,	/* the dynamic symbol table */
	PK_SYM_SYMTAB = 2,	/* the full table (static functions); absent when stripped */
};

struct pk_sym {
	uintptr_t addr;		/* where the function is loaded */
	size_t size;		/* its size from the symbol table */
	int table;		/* enum pk_sym_table it came from */
	char object[256];	/* path of the executable or library */
};

/**
 * pk_sym_lookup() - find a function in the executable or a loaded library
 * @spec: "name", or "object:name" where object is a file's base name, whole
 *        or up to a dot ("libz.so.1:inflate", "libz:inflate")
 * @out: receives the address, size, table and object
 *
 * Global definitions win in load order (as the dynamic linker binds them);
 * a name carried only by local (static) functions must be unique.
 *
 * Context: any thread, may block; not from a signal handler.
 * Return: 0, or -ENOENT (no such function or object), -EINVAL (bad @spec,
 * ambiguous name, IFUNC), -ENOMEM. The log says which.
 */
PK_API int pk_sym_lookup(const char *spec, struct pk_sym *out);

/* Registers at a probe point. Layout fixed by the trampoline. */
struct pk_regs {
	uint64_t ip;	/* the probed address (read only) */
	uint64_t r15, r14, r13, r12, r11, r10, r9, r8;
	uint64_t rdi, rsi, rbp, rsp, rbx, rdx, rcx, rax;
	uint64_t flags;
	uint64_t pk_private_ret;
};

/* The n-th integer argument (0..5) of a function probed at its entry. */
static inline uint64_t pk_regs_arg(const struct pk_regs *r, unsigned int n)
{
	switch (n) {
	case 0: return r->rdi;
	case 1: return r->rsi;
	case 2: return r->rdx;
	case 3: return r->rcx;
	case 4: return r->r8;
	case 5: return r->r9;
	default: return 0;
	}
}

struct pk_probe;
typedef void (*pk_probe_handler_fn)(struct pk_probe *p, struct pk_regs *regs,
				    void *ctx);

/* pk_probe_opts.flags */
#define PK_PROBE_F_INT3 0x1u	/* an int3 probe even where a jump probe fits */

struct pk_probe_opts {
	size_t sz;		/* sizeof(struct pk_probe_opts) */
	const char *symbol;	/* "name" or "object:name"; or NULL and ... */
	void *addr;		/* ... the address of a function's first byte */
	pk_probe_handler_fn pre; /* called before the probed instruction */
	void *ctx;		/* passed to the handlers */
	size_t offset;		/* probe point: bytes from the function's first
				 * byte, on an instruction boundary; 0: its
				 * entry (after an endbr64) */
	pk_probe_handler_fn post; /* called after the probed instruction ran */
	unsigned int flags;	/* PK_PROBE_F_* */
};

#define PK_OPTS(type, name, ...)                                               \
	struct type name = { .sz = sizeof(struct type), __VA_ARGS__ }

/**
 * pk_probe_create() - prepare a probe (not armed yet)
 * @opts: where (@opts->symbol or @opts->addr, then @opts->offset) and what to
 *        call (@opts->pre, @opts->post, @opts->ctx); @opts->flags
 *        PK_PROBE_F_INT3 for an int3 probe
 * @out: receives the probe
 *
 * Decodes the whole function (its size from the symbol table), as it was
 * before any probe was armed in it, checks that @opts->offset is an
 * instruction boundary, and picks the kind: a jump probe where that is safe,
 * else an int3 probe (see the top of this section).
 *
 * Context: any thread, may block; not from a signal handler or probe handler.
 * Return: 0, or -EINVAL (bad @opts or an unknown flag; address not the start
 * of a known function; offset past its end or not on an instruction
 * boundary; probekit's own trap path, a key site or a trampoline), -ENOENT
 * (symbol not found), -ENOTSUP (the probed instruction can be neither moved
 * nor emulated; a post-handler after a branch, call, ret or trap), -ENOMEM.
 */
PK_API int pk_probe_create(const struct pk_probe_opts *opts,
			   struct pk_probe **out);

/**
 * pk_probe_register() - arm probes, all in one text batch
 * @probes: probes from pk_probe_create(), not armed
 * @n: how many
 *
 * Several probes on one address share one trampoline; handlers run in
 * registration order.
 *
 * Context: any thread, may block; not from a signal handler or probe handler.
 * Return: 0, or -EINVAL (NULL or @n 0, already armed, the same probe twice), -ENOMEM,
 * -ERANGE (no trampoline memory within +-2 GiB), -EBUSY (a thread could not
 * be moved out of the displaced bytes in time; the probe's instruction
 * overlaps another armed probe's displaced bytes; a probe of another kind,
 * or without post-handlers, is armed at the address; the trap chain has an
 * entry at an int3 probe's address), -ENOTSUP (the trampoline could not be
 * built), -EPERM (code writes refused).
 * On failure no probe of the set is armed.
 */
PK_API int pk_probe_register(struct pk_probe *const *probes, size_t n);

/**
 * pk_probe_unregister() - disarm probes, all in one text batch
 * @probes: armed probes
 * @n: how many
 *
 * Returns when no thread is in their handlers or trampolines any more.
 *
 * Context: any thread, may block; not from a signal handler or probe handler.
 * Return: 0, or -EINVAL (NULL or @n 0, not armed: nothing done), -EPERM/-ENOMEM
 * (the code could not be restored; the probes stay armed).
 */
PK_API int pk_probe_unregister(struct pk_probe *const *probes, size_t n);

/**
 * pk_probe_destroy() - unregister @p if armed, then free it
 * @p: the probe, or NULL
 *
 * Context: any thread, may block; not from a signal handler or probe handler.
 */
PK_API void pk_probe_destroy(struct pk_probe *p);

/* How a probe reaches its handlers (pk_probe_info.kind). */
enum pk_probe_kind {
	PK_PROBE_JUMP = 1,	/* a jmp to a trampoline */
	PK_PROBE_INT3 = 2,	/* an int3, through the fault layer's trap chain */
};

struct pk_probe_info {
	size_t sz;		/* sizeof(struct pk_probe_info) */
	uintptr_t addr;		/* the probed address (after any endbr64) */
	uintptr_t func;		/* the function's first byte */
	size_t displaced;	/* bytes replaced by the jmp; an int3 probe:
				   the probed instruction's length */
	int armed;
	unsigned long missed;	/* hits skipped: already inside a handler */
	size_t bytes;		/* memory this probe costs: its share of its
				   trampoline, the trampoline's and its own
				   metadata */
	int kind;		/* enum pk_probe_kind: what it is armed as
				   (several probes on one address share the
				   first one's kind), or would be */
};

/**
 * pk_probe_get_info() - describe @p
 * @p: the probe
 * @info: filled up to @info->sz bytes; set @info->sz first
 *
 * Context: any thread.
 * Return: 0, or -EINVAL.
 */
PK_API int pk_probe_get_info(const struct pk_probe *p,
			     struct pk_probe_info *info);

/* ---------------------------------------------------------- return probes */

/*
 * Return probes (kretprobes for user space): an entry handler when a function
 * is called, a return handler when that call returns, and a per-call data
 * area the two share. The entry side is an entry probe (above): its handler
 * saves the return address in a record on this thread's return-address
 * stack, and the trampoline then calls the function, so that it returns
 * into probekit (where it cannot, because the handler did not run from the
 * trampoline, the return address on the stack is replaced instead, as
 * kretprobes do; PROBEKIT_RETPROBE_HIJACK=1 forces that, slower, way). The
 * return handler runs there, and the call returns to the saved address.
 *
 * What is guaranteed:
 *   - recursion: every level's return is seen, innermost first, with its
 *     own data area, up to PK_RETPROBE_DEPTH calls in flight per thread
 *     (deeper calls run unprobed and count as missed);
 *   - longjmp out of a probed call, and C++ exceptions thrown through one:
 *     the skipped calls' return handlers are not called and their records
 *     are dropped; the next returns are correct. Unwinders that use libgcc
 *     (C++ exceptions, pthread_exit/pthread_cancel, backtrace()) walk through
 *     the trampoline: it has unwind info (registered with __register_frame)
 *     that names the real return address. A backtrace shows one extra frame
 *     in the trampoline for each probed call;
 *   - tail calls: a probed function that jumps to another probed function
 *     sees both return handlers (the callee's first), each with the value
 *     the caller receives;
 *   - thread exit (also pthread_exit inside a probed call): the thread's
 *     records go back to the pool;
 *   - several return probes on one function: entry handlers in registration
 *     order, return handlers in the reverse order;
 *   - unregister returns when no thread runs the probes' handlers; a thread
 *     still inside a probed call then returns normally without calling them
 *     (the trampoline and the records are never freed).
 *
 * Limits: PK_RETPROBE_DEPTH records per thread; a pool of 128 threads'
 * worth of records (PROBEKIT_RETPROBE_THREADS=N to change, read once) taken
 * by a thread on its first hit and given back when it exits: a thread that
 * finds the pool empty runs unprobed and counts misses. The pool costs 2 KiB
 * of code and 12 KiB of records per thread, mapped at the first
 * registration (records are touched only when used). Inside a probed call,
 * __builtin_return_address(0) and the stack slot it reads name probekit,
 * not the caller. Not supported: functions that return twice (setjmp,
 * vfork); code that switches stacks (coroutines, swapcontext) while inside
 * a probed call; signal handlers that longjmp out of probekit's trampolines;
 * CET shadow stacks.
 *
 * Handlers. Both run on the calling thread, like entry probe handlers (see
 * above for the registers they may use: no AVX, no x87). The entry handler
 * sees the registers at the function's first instruction; returning non-zero
 * skips this call's return handler. The return handler sees the registers
 * after the return: ip is the address returned to, rsp the stack pointer
 * there, rax and rdx the integer return value (pk_regs_ret()), and the
 * callee-saved registers; rcx, rsi, rdi, r8-r11 and flags, dead after a
 * return, are undefined. It may change rax and rdx and must leave the
 * other fields alone. xmm0 and xmm1 (floating-point return values) are
 * kept.
 * A handler must not throw or longjmp. A probe hit while this thread runs a
 * return handler calls no handler and counts a miss. Probed functions may
 * run in signal handlers: a hit takes no lock and allocates nothing (a
 * thread's first hit claims its records with one atomic operation and
 * registers their release with pthread_setspecific(), which glibc does
 * without allocating for the first 32 keys).
 */

#define PK_RETPROBE_DEPTH 128		/* calls in flight per thread */
#define PK_RETPROBE_DATA_MAX 64		/* bytes of per-call data */

/* The integer return value, in a return handler. */
static inline uint64_t pk_regs_ret(const struct pk_regs *r)
{
	return r->rax;
}

struct pk_retprobe;

/* Return non-zero to skip this call's return handler. */
typedef int (*pk_retprobe_entry_fn)(struct pk_retprobe *rp,
				    struct pk_regs *regs, void *data,
				    void *ctx);
typedef void (*pk_retprobe_ret_fn)(struct pk_retprobe *rp,
				   struct pk_regs *regs, void *data, void *ctx);

struct pk_retprobe_opts {
	size_t sz;		/* sizeof(struct pk_retprobe_opts) */
	const char *symbol;	/* "name" or "object:name"; or NULL and ... */
	void *addr;		/* ... the address of a function's first byte */
	pk_retprobe_entry_fn entry; /* called when the function is entered, or NULL */
	pk_retprobe_ret_fn ret;	/* called when it returns */
	void *ctx;		/* passed to both */
	size_t data_size;	/* per-call data bytes (<= PK_RETPROBE_DATA_MAX),
				   16-byte aligned, uninitialised at entry */
};

/**
 * pk_retprobe_create() - prepare a return probe (not armed yet)
 * @opts: where and what to call
 * @out: receives the probe
 *
 * The function must take an entry probe (see pk_probe_create()).
 *
 * Context: any thread, may block; not from a signal handler or probe handler.
 * Return: 0, or -EINVAL (bad @opts, no return handler; what
 * pk_probe_create() refuses), -E2BIG (@data_size too large), -ENOENT,
 * -ENOTSUP, -ENOMEM.
 */
PK_API int pk_retprobe_create(const struct pk_retprobe_opts *opts,
			      struct pk_retprobe **out);

/**
 * pk_retprobe_register() - arm return probes, all in one text batch
 * @rps: probes from pk_retprobe_create(), not armed
 * @n: how many
 *
 * The first call maps the return trampoline and the record pool (kept
 * until the process ends).
 *
 * Context: any thread, may block; not from a signal handler or probe handler.
 * Return: 0, or -EINVAL (NULL or @n 0), or what pk_probe_register()
 * returns; -ENOMEM or -EPERM when the trampoline cannot be made. On failure no probe of the set is armed.
 */
PK_API int pk_retprobe_register(struct pk_retprobe *const *rps, size_t n);

/**
 * pk_retprobe_unregister() - disarm return probes, all in one text batch
 * @rps: armed probes
 * @n: how many
 *
 * Returns when no thread runs their entry or return handlers; threads still
 * inside a probed call return normally, without calling them.
 *
 * Context: any thread, may block; not from a signal handler or probe handler.
 * Return: 0, or -EINVAL (NULL or @n 0, not armed: nothing done), or what
 * pk_probe_unregister() returns (the probes stay armed).
 */
PK_API int pk_retprobe_unregister(struct pk_retprobe *const *rps, size_t n);

/**
 * pk_retprobe_destroy() - unregister @rp if armed, then free it
 * @rp: the probe, or NULL
 *
 * Context: any thread, may block; not from a signal handler or probe handler.
 */
PK_API void pk_retprobe_destroy(struct pk_retprobe *rp);

struct pk_retprobe_info {
	size_t sz;		/* sizeof(struct pk_retprobe_info) */
	uintptr_t addr;		/* the probed address (after any endbr64) */
	uintptr_t func;		/* the function's first byte */
	int armed;
	unsigned long missed;	/* calls whose return was not probed: depth
				   or record pool exhausted, hit inside a
				   handler */
	size_t bytes;		/* memory this probe costs (its entry probe's
				   share, its own metadata); the shared
				   trampoline and record pool not counted */
};

/**
 * pk_retprobe_get_info() - describe @rp
 * @rp: the probe
 * @info: filled up to @info->sz bytes; set @info->sz first
 *
 * Context: any thread.
 * Return: 0, or -EINVAL (@rp or @info NULL, @info->sz too small).
 */
PK_API int pk_retprobe_get_info(const struct pk_retprobe *rp,
				struct pk_retprobe_info *info);

#ifdef __cplusplus
}
#endif

#endif /* PROBEKIT_H */
