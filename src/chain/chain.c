// SPDX-License-Identifier: MIT
/* chain.c - notifier chains: priority-ordered handlers, lock-free readers, a static key per chain. */

/*
 * Design
 * ======
 *
 * A chain is a singly linked list of struct pk_notifier through
 * nb->pk_private_next, sorted by priority, highest first; a new handler goes
 * after the last one whose priority is >= its own, so equal priorities run in
 * registration order. Writers (register, unregister) serialise on
 * c->pk_private_lock and publish with release stores; readers (pk_chain_call)
 * take no lock and follow the list with consume loads (rcu_dereference).
 *
 * Readers: two paths
 * ------------------
 *
 * (a) urcu-bp read side. Used for atomic chains by threads that called
 *     pk_thread_register() (and are still registered with urcu-bp). The read
 *     lock is a thread-local store, no atomic instruction.
 *
 * (b) per-chain reader counts, SRCU style. Used by every other thread, by
 *     signal handlers on such threads, and always for blocking chains. The
 *     reader loads the phase idx = c->pk_private_phase & 1, increments
 *     c->pk_private_readers[idx] (a locked RMW: a full barrier), walks the
 *     list, and decrements the same counter.
 *
 * Why not urcu-bp everywhere: urcu-bp registers a thread lazily on its first
 * read-side lock, taking a mutex (with signals blocked) and possibly
 * allocating. That first lock is not async-signal-safe, so a chain call must
 * never be a thread's first urcu-bp reader; atomic chains promise to be
 * callable from signal handlers on threads that never called probekit.
 * Path (a) is therefore taken only when pk_thread_register() has run on this
 * thread (a flag in our own initial-exec TLS) and urcu-bp's TLS reader
 * pointer is still set (urcu-bp clears it at thread exit). Reading urcu-bp's
 * pointer after our flag is set is safe: registration touched that TLS
 * already, so no lazy TLS allocation can happen on the signal path.
 *
 * Why blocking chains always use path (b): a blocking handler may sleep, and
 * an urcu-bp read side held across a sleep stalls every urcu-bp grace period
 * in the process (other chains' unregister, and the host program's own
 * urcu-bp users, who may be what the handler is waiting for: a deadlock).
 * Per-chain counts confine a sleeping handler's effect to its own chain.
 *
 * Writers: grace period (chain_wait_readers)
 * ------------------------------------------
 *
 * After unlinking, unregister waits until no reader can hold the node. What
 * correctness needs: both counts seen at zero after the unlink, plus an
 * urcu-bp grace period (atomic chains). A path (b) reader whose increment
 * the writer did not see comes after the writer's barrier W1 in the global
 * order, and its barrier B1 then makes it see the unlink (Dekker, W1/B1);
 * a reader whose increment the writer did see is waited for.
 *
 * What progress needs: a count that new readers keep entering may never
 * read zero (64 busy readers keep one count above zero forever). Hence the
 * phase, as in the kernel's classic SRCU (__synchronize_srcu): first wait
 * for the idle count (the phase readers are not using; only stale readers
 * that loaded the phase before the previous flip can be there), then flip,
 * so new readers go to the idle side, then wait for the old count to drain
 * (only readers that loaded the phase before this flip can still add to
 * it). Every wait is on a count that only a bounded number of readers can
 * enter. This is the "double flip" idea with the first flip replaced by a
 * wait on the side nobody enters: the same guarantee, one drain fewer. The
 * urcu-bp grace period runs while the old count drains, so under CPU
 * oversubscription an unregister costs about one scheduling round of the
 * preempted readers rather than three.
 *
 * Static key
 * ----------
 *
 * c->key is enabled while the chain is non-empty; pk_notify() tests it with a
 * patched branch. Register: take the key reference before publishing the
 * first handler (an enabled key over an empty list is harmless; the reverse
 * would hide a handler). Unregister: unlink, wait, then drop the reference.
 * Whether the chain holds its key reference is recorded in
 * c->pk_private_reserved[0] (non-NULL: held), so that a failed pk_key_dec()
 * is retried on the next transition instead of leaking a reference.
 *
 * Re-entrancy
 * -----------
 *
 * A per-thread count of chain calls in progress (signal handlers included)
 * makes register and unregister return -EDEADLK on a thread that is inside
 * any chain call: unregister would wait for its own read side forever, and
 * register takes locks (the chain's, the key layer's) that the interrupted
 * code may hold.
 *
 * Nothing on the call path allocates, locks, logs or touches errno.
 */

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <time.h>

/*
 * urcu-bp's read side is used through the static inline functions of
 * <urcu/static/urcu-bp.h> (meant for direct use; this file must be rebuilt
 * against the liburcu it runs with, 0.13 here). Their lazy registration
 * branch is never taken: path (a) runs only on a thread urcu-bp knows.
 * (The exported urcu_bp_read_lock() costs ~6 ns more per call here, more
 * than the whole walk of a short chain.) struct urcu_bp_reader claims a
 * 128-byte alignment that urcu-bp's allocator does not give it, so sanitizer
 * builds compile this file without UBSan's alignment check (CMakeLists.txt).
 */
#include <urcu-bp.h>
#include <urcu/static/urcu-bp.h>
#include <urcu/uatomic.h>

/* List pointers: published with release, followed with consume (RCU). */
#define chain_deref(p) __atomic_load_n(&(p), __ATOMIC_CONSUME)
#define chain_publish(p, v) __atomic_store_n(&(p), (v), __ATOMIC_RELEASE)

#include "internal.h"

#define CHAIN_KEY_HELD ((void *)1)

/*
 * Per-thread state. initial-exec: a plain %fs-relative access, never the lazy
 * __tls_get_addr allocation that a dynamic-TLS access may do (not
 * async-signal-safe).
 */
#define CHAIN_INFLIGHT_MAX 8

struct chain_tls {
	unsigned int depth;	/* chain calls in progress on this thread */
	bool urcu;		/* pk_thread_register() ran here */
	/* Path (b) counts this thread holds, innermost last (see fork). */
	unsigned int n_inflight;
	struct {
		struct pk_chain *c;
		unsigned int idx;
	} inflight[CHAIN_INFLIGHT_MAX];
};
static __thread struct chain_tls chain_tls
	__attribute__((tls_model("initial-exec")));

static bool chain_type_valid(int type)
{
	return type == PK_CHAIN_ATOMIC || type == PK_CHAIN_BLOCKING;
}

/* Whether urcu-bp knows this thread (it forgets it at thread exit). */
static PK_NOPROBE_INLINE bool chain_urcu_known(void)
{
	return URCU_TLS(urcu_bp_reader) != NULL;
}

/**
 * chain_walk() - call handlers from @nb on, by list order
 *
 * Always inlined, so it lives in pk_chain_call()'s PK_NOPROBE section.
 *
 * Context: inside a read side (path (a) or (b)); async-signal-safe.
 */
static inline __attribute__((always_inline)) int
chain_walk(struct pk_notifier *nb, unsigned long action, void *data,
	   int *nr_calls)
{
	int ret = PK_DONE, nr = 0;

	while (nb) {
		/* Read before the call, as the kernel does. */
		struct pk_notifier *next = chain_deref(nb->pk_private_next);

		ret = nb->call(nb, action, data);
		nr++;
		if (ret & PK_STOP_MASK)
			break;
		nb = next;
	}
	if (nr_calls)
		*nr_calls = nr;
	return ret;
}

/*
 * pk_chain_call() - see probekit/chain.h.
 * Context: atomic chains: any thread, async-signal-safe; blocking chains: any
 * thread, may block, not from a signal handler.
 */
PK_NOPROBE int pk_chain_call(struct pk_chain *c, unsigned long action,
			     void *data, int *nr_calls)
{
	struct chain_tls *t = &chain_tls;
	int ret;

	if (!c) {
		if (nr_calls)
			*nr_calls = 0;
		return PK_DONE;
	}

	t->depth++;
	cmm_barrier(); /* depth is seen by a signal handler on this thread */

	if (c->type == PK_CHAIN_ATOMIC && t->urcu && chain_urcu_known()) {
		/* Path (a); urcu_bp_synchronize_rcu() waits for us. */
		_urcu_bp_read_lock();
		ret = chain_walk(chain_deref(c->pk_private_head), action,
				 data, nr_calls);
		_urcu_bp_read_unlock();
	} else {
		/* Path (b). */
		unsigned int idx = CMM_LOAD_SHARED(c->pk_private_phase) & 1;
		unsigned int slot = t->n_inflight;

		/*
		 * An empty chain is not counted on: a reader only counts while
		 * the chain is on chain_list, which fork relies on (below).
		 */
		if (!chain_deref(c->pk_private_head)) {
			if (nr_calls)
				*nr_calls = 0;
			cmm_barrier();
			t->depth--;
			return PK_DONE;
		}
		if (slot < CHAIN_INFLIGHT_MAX) {
			t->inflight[slot].c = c;
			t->inflight[slot].idx = idx;
		}
		t->n_inflight = slot + 1;
		cmm_barrier(); /* recorded before counted: fork reads it */
		uatomic_inc(&c->pk_private_readers[idx]);
		/*
		 * B1: the count is visible before we load the list. Pairs with
		 * W1 in chain_wait_readers(): either the writer sees our count,
		 * or we see its unlink. (A locked RMW on x86-64: no fence.)
		 */
		cmm_smp_mb__after_uatomic_inc();
		ret = chain_walk(chain_deref(c->pk_private_head), action,
				 data, nr_calls);
		/*
		 * B2: our last access to any handler happens before the
		 * count drops. Pairs with W3 in chain_wait_readers().
		 */
		cmm_smp_mb__before_uatomic_dec();
		uatomic_dec(&c->pk_private_readers[idx]);
		cmm_barrier();
		t->n_inflight = slot;
	}

	cmm_barrier();
	t->depth--;
	return ret;
}

/* Wait until *@ctr reads 0: yield first, then sleep with a growing backoff. */
static void chain_wait_zero(unsigned long *ctr)
{
	long ns = 10000;

	for (unsigned int n = 0; CMM_LOAD_SHARED(*ctr) != 0; n++) {
		if (n < 100) {
			sched_yield();
		} else {
			struct timespec ts = { 0, ns };

			nanosleep(&ts, NULL); /* errno restored by the caller */
			if (ns < 1000000)
				ns *= 2;
		}
	}
}

/**
 * chain_wait_readers() - wait until no reader can hold a handler unlinked
 * before this call
 * @c: the chain, its lock held
 *
 * Protocol (see "Writers: grace period" at the top of this file):
 *   1. W1: full barrier; the unlink is visible before any count is read.
 *   2. Wait until readers[idle] == 0, idle being the phase readers are not
 *      using now: only stale readers (who loaded the phase before the last
 *      flip) can be counted there, a bounded number.
 *   3. Flip the phase: new readers count on the idle side from now on.
 *   4. Atomic chains: urcu_bp_synchronize_rcu() for path (a) readers; the
 *      old side drains meanwhile.
 *   5. Wait until readers[old] == 0: only readers that loaded the phase
 *      before step 3 can still add to it, a bounded number.
 *   6. W3: full barrier; the readers' last accesses (before B2) happen
 *      before the caller frees the handler.
 *
 * Context: not from a chain callback or signal handler; may block.
 */
static void chain_wait_readers(struct pk_chain *c)
{
	unsigned int old = c->pk_private_phase & 1;

	pk_assert_held(&c->pk_private_lock);

	cmm_smp_mb(); /* W1: pairs with B1 in pk_chain_call() */
	chain_wait_zero(&c->pk_private_readers[old ^ 1]);
	CMM_STORE_SHARED(c->pk_private_phase, old ^ 1);
	cmm_smp_mb(); /* progress only: new readers see the flip soon */
	if (c->type == PK_CHAIN_ATOMIC)
		urcu_bp_synchronize_rcu();
	chain_wait_zero(&c->pk_private_readers[old]);
	cmm_smp_mb(); /* W3: pairs with B2 in pk_chain_call() */
}

/*
 * pk_chain_init() - see probekit/chain.h.
 * Context: any thread; not while @c is in use.
 */
int pk_chain_init(struct pk_chain *c, enum pk_chain_type type)
{
	const struct pk_key off = PK_KEY_INIT_FALSE;

	if (!c || !chain_type_valid((int)type))
		return -EINVAL;
	memset(c, 0, sizeof(*c));
	c->key = off;
	c->type = (int)type;
	/* Default attributes: cannot fail (and does not touch errno). */
	pthread_mutex_init(&c->pk_private_lock, NULL);
	return 0;
}

/*
 * fork()
 * ------
 *
 * A child has one thread, so two things must not cross fork: a chain lock
 * held by another thread, and reader counts held by other threads (an
 * unregister in the child would wait for them forever).
 *
 * chain_fork_lock: register and unregister hold it shared for their whole
 * length; chain_fork_prepare() holds it exclusive, so no chain lock is
 * held at fork. (Writer-preferring, so a stream of registrations cannot
 * starve fork.) Limitation: fork() from inside a chain handler while another
 * thread unregisters from that chain deadlocks, as that unregister waits for
 * the forking thread.
 *
 * chain_list, guarded by chain_list_lock, links the chains that have
 * handlers (c->pk_private_reserved[1] is the link, [3] the membership
 * flag). Readers count only on such chains (pk_chain_call() skips an empty
 * one), so in the child every count of a listed chain is reset to what the
 * forking thread itself holds (its chain_tls.inflight). An unlisted chain
 * may still carry a stale count from a reader that raced the last unregister;
 * chain_fork_gen tells: c->pk_private_reserved[2] is the generation whose
 * counts it has, and a chain that gets its first handler in a later
 * generation starts from zero (no live reader can count on it before it has
 * a handler).
 */
static pthread_rwlock_t chain_fork_lock =
	PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
static pthread_mutex_t chain_list_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pk_chain *chain_list;	/* guarded by chain_list_lock */
static uintptr_t chain_fork_gen;	/* written in the child only */

#define CHAIN_NEXT(c) ((c)->pk_private_reserved[1])
#define CHAIN_GEN(c) ((c)->pk_private_reserved[2])
#define CHAIN_LISTED(c) ((c)->pk_private_reserved[3])

/* @c gets its first handler: list it; its counts are stale if from before a fork. */
static void chain_list_add(struct pk_chain *c)
{
	pk_assert_held(&c->pk_private_lock);
	pthread_mutex_lock(&chain_list_lock);
	if ((uintptr_t)CHAIN_GEN(c) != chain_fork_gen) {
		c->pk_private_readers[0] = c->pk_private_readers[1] = 0;
		CHAIN_GEN(c) = (void *)chain_fork_gen;
	}
	if (!CHAIN_LISTED(c)) {
		CHAIN_NEXT(c) = chain_list;
		chain_list = c;
		CHAIN_LISTED(c) = (void *)1;
	}
	pthread_mutex_unlock(&chain_list_lock);
}

/* @c lost its last handler (readers waited for): unlist it. */
static void chain_list_del(struct pk_chain *c)
{
	struct pk_chain **pp;

	pk_assert_held(&c->pk_private_lock);
	pthread_mutex_lock(&chain_list_lock);
	for (pp = &chain_list; *pp; pp = (struct pk_chain **)&CHAIN_NEXT(*pp))
		if (*pp == c) {
			*pp = CHAIN_NEXT(c);
			CHAIN_NEXT(c) = NULL;
			CHAIN_LISTED(c) = NULL;
			break;
		}
	pthread_mutex_unlock(&chain_list_lock);
}

static void chain_fork_prepare(void)
{
	pthread_rwlock_wrlock(&chain_fork_lock);
	pthread_mutex_lock(&chain_list_lock);
	urcu_bp_before_fork();
}

static void chain_fork_parent(void)
{
	urcu_bp_after_fork_parent();
	pthread_mutex_unlock(&chain_list_lock);
	pthread_rwlock_unlock(&chain_fork_lock);
}

static void chain_fork_child(void)
{
	struct chain_tls *t = &chain_tls;
	unsigned int n = t->n_inflight < CHAIN_INFLIGHT_MAX ? t->n_inflight
							     : CHAIN_INFLIGHT_MAX;

	urcu_bp_after_fork_child();
	chain_fork_gen++;
	for (struct pk_chain *c = chain_list; c; c = CHAIN_NEXT(c)) {
		c->pk_private_readers[0] = c->pk_private_readers[1] = 0;
		CHAIN_GEN(c) = (void *)chain_fork_gen;
	}
	for (unsigned int i = 0; i < n; i++)
		if (CHAIN_LISTED(t->inflight[i].c))
			t->inflight[i].c->pk_private_readers[t->inflight[i].idx]++;
	pthread_mutex_unlock(&chain_list_lock);
	/*
	 * Not unlocked but made anew: the parent's readers that queued on it
	 * are not in the child, and their waiter bits would stay behind.
	 */
	chain_fork_lock = (pthread_rwlock_t)
		PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
}

PK_ATFORK(chain, PK_RANK_CHAIN, chain_fork_prepare, chain_fork_parent,
	  chain_fork_child);

/* A writer section on @c: fork excluded (shared), then the chain's lock. */
static void chain_writer_lock(struct pk_chain *c)
{
	pthread_rwlock_rdlock(&chain_fork_lock);
	pthread_mutex_lock(&c->pk_private_lock);
}

static void chain_writer_unlock(struct pk_chain *c)
{
	pthread_mutex_unlock(&c->pk_private_lock);
	pthread_rwlock_unlock(&chain_fork_lock);
}

/* Locking: beside struct pk_chain's private fields, in probekit/chain.h. */

/*
 * pk_chain_register() - see probekit/chain.h.
 * Context: any thread, may block; not from a chain callback or signal handler.
 */
int pk_chain_register(struct pk_chain *c, struct pk_notifier *nb)
{
	struct pk_notifier **pos = NULL, **pp, *p;
	int saved = errno, ret = 0;

	if (!c || !nb || !nb->call || !chain_type_valid(c->type))
		return -EINVAL;
	if (chain_tls.depth)
		return -EDEADLK;

	chain_writer_lock(c);
	for (pp = &c->pk_private_head; (p = *pp); pp = &p->pk_private_next) {
		if (p == nb) {
			ret = -EEXIST;
			goto out;
		}
		if (!pos && p->priority < nb->priority)
			pos = pp;
	}
	if (!pos)
		pos = pp; /* the tail */

	if (!c->pk_private_reserved[0]) {
		ret = pk_key_inc(&c->key);
		if (ret) {
			pk_dbg("chain %p: key on failed (%d), handler %p not added",
			       (void *)c, ret, (void *)nb);
			goto out;
		}
		c->pk_private_reserved[0] = CHAIN_KEY_HELD;
	}

	if (!c->pk_private_head)
		chain_list_add(c);
	nb->pk_private_next = *pos;
	/* Publishes nb's fields (call, priority, next) to readers. */
	chain_publish(*pos, nb);
out:
	chain_writer_unlock(c);
	errno = saved;
	return ret;
}

/*
 * pk_chain_unregister() - see probekit/chain.h.
 * Context: any thread, may block; not from a chain callback or signal handler.
 */
int pk_chain_unregister(struct pk_chain *c, struct pk_notifier *nb)
{
	struct pk_notifier **pp, *p;
	int saved = errno, ret = -ENOENT;

	if (!c || !nb || !chain_type_valid(c->type))
		return -EINVAL;
	if (chain_tls.depth)
		return -EDEADLK;

	chain_writer_lock(c);
	for (pp = &c->pk_private_head; (p = *pp); pp = &p->pk_private_next) {
		if (p != nb)
			continue;
		/* nb->pk_private_next stays valid for readers still on nb. */
		chain_publish(*pp, nb->pk_private_next);
		chain_wait_readers(c);
		nb->pk_private_next = NULL;
		ret = 0;
		if (!c->pk_private_head)
			chain_list_del(c);
		break;
	}

	if (!ret && !c->pk_private_head && c->pk_private_reserved[0]) {
		int r = pk_key_dec(&c->key);

		if (r)
			pk_warn("chain %p: key off failed (%d); will retry",
				(void *)c, r);
		else
			c->pk_private_reserved[0] = NULL;
	}
	chain_writer_unlock(c);
	errno = saved;
	return ret;
}

/*
 * pk_thread_register() - see probekit/chain.h.
 * Context: any thread, may block; not from a signal handler.
 */
int pk_thread_register(void)
{
	int saved = errno;

	urcu_bp_register_thread(); /* under urcu-bp's mutex, signals blocked */
	chain_tls.urcu = true;
	errno = saved;
	return 0;
}
