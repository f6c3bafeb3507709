/* SPDX-License-Identifier: MIT */
/* probekit/chain.h - notifier chains with the kernel's semantics (pk_chain_*, pk_notify); an empty chain's call site is a NOP. */
#ifndef PROBEKIT_CHAIN_H
#define PROBEKIT_CHAIN_H

#include <pthread.h>

#include <probekit/common.h>
#include <probekit/key.h>

#ifdef __cplusplus
extern "C" {
#endif

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
	struct pk_notifier *pk_private_next; /* written under the chain's
					      * pk_private_lock, followed by
					      * readers without it */
	void *pk_private[2];
};

enum pk_chain_type {
	PK_CHAIN_ATOMIC = 1,
	PK_CHAIN_BLOCKING = 2,
};

/*
 * Locking of struct pk_chain (the code is src/chain/chain.c):
 *
 *   - pk_private_lock, the chain's writer lock, serialises
 *     pk_chain_register() and pk_chain_unregister() on this chain. It
 *     guards the list as written: pk_private_head and the pk_private_next
 *     of every notifier on the chain (published with release stores;
 *     readers follow both without any lock). It also guards
 *     pk_private_phase (flipped by an unregister's grace period; readers
 *     load it without the lock), pk_private_reserved[0] (whether the chain
 *     holds its reference on key) and every pk_key_inc()/pk_key_dec() on
 *     key.
 *   - pk_private_readers[] take no lock: readers that do not use urcu-bp
 *     (every reader of a blocking chain; readers of an atomic chain on a
 *     thread that has not called pk_thread_register(), its signal handlers
 *     included) increment and decrement the count of the phase they loaded,
 *     atomically. The counts are reset only while the chain is empty, under
 *     the library's chain-list lock with pk_private_lock held, and in a
 *     fork() child.
 *   - pk_private_reserved[1..3] (the link in the library's list of chains
 *     that have handlers, the fork generation of the counts, the listed
 *     flag) are guarded by that chain-list lock, which nests inside
 *     pk_private_lock.
 *   - type is set by the definition or pk_chain_init() and read-only after;
 *     key's own state is the key layer's (under its lock).
 *
 * Lock order: the library's fork lock (held shared by every writer, so
 * that no pk_private_lock is held across fork()), then pk_private_lock,
 * then the chain-list lock or the key layer's lock.
 */
struct pk_chain {
	struct pk_key key;		/* enabled while the chain is not empty */
	int type;			/* enum pk_chain_type */
	struct pk_notifier *pk_private_head;	/* pk_private_lock (writes) */
	pthread_mutex_t pk_private_lock;	/* serialises writers */
	unsigned long pk_private_readers[2];	/* reader counts, atomic */
	unsigned int pk_private_phase;		/* pk_private_lock (writes) */
	void *pk_private_reserved[4];	/* [0] pk_private_lock; [1..3] the
					 * chain-list lock */
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

#ifdef __cplusplus
}
#endif

#endif /* PROBEKIT_CHAIN_H */
