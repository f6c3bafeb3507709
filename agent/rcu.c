// SPDX-License-Identifier: MIT
/* rcu.c - the urcu-bp calls libprobekit's chains make, implemented in the agent: Debian's liburcu-bp.a is not PIC for its TLS. */

/*
 * Debian's liburcu-bp.a reaches its thread-local reader pointer with the
 * local-exec TLS model, which no shared object may use (the linker
 * refuses it), and the agent must not load liburcu-bp.so into the
 * program's link map (issue 10). So the agent defines what
 * src/chain/chain.c uses of urcu-bp 0.13 itself: the grace period counter
 * and reader pointer that <urcu/static/urcu-bp.h>'s inline read side
 * works on (same layout, that header's structs), thread registration,
 * the fork hooks and urcu_bp_synchronize_rcu(). All of them are local to
 * the agent (its version script), so a program with its own liburcu-bp
 * never meets them.
 *
 * The algorithm is the classic two-flip one of the urcu-bp flavour. A
 * reader's ctr holds its nesting count and, while it is nonzero, the
 * phase bit of urcu_bp_gp.ctr it read on entering. A grace period:
 *   1. full barrier on every thread (membarrier, else the readers use a
 *      real fence and this is one);
 *   2. wait for readers that are inside a section of the other phase;
 *   3. flip the phase; wait again (a reader that read the counter before
 *      the flip but published it after is caught by this second wait);
 *   4. barrier again, so the caller's frees come after every such reader.
 * Readers are found in a registry (a list under gp_lock). A thread's
 * entry is freed by a thread-specific-data destructor when it exits; in
 * a fork child, every entry but the forking thread's.
 */
#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <urcu-bp.h>
#include <urcu/static/urcu-bp.h>

struct urcu_bp_gp urcu_bp_gp = { .ctr = URCU_BP_GP_COUNT };
int urcu_bp_has_sys_membarrier;
DEFINE_URCU_TLS(struct urcu_bp_reader *, urcu_bp_reader);

/* A registry entry: the reader urcu-bp's inline read side writes. */
struct rd {
	struct urcu_bp_reader r;	/* first: URCU_TLS points here */
	struct rd *next;
	void *mem;			/* what calloc() gave, for free() */
};

/* Serialises grace periods, registration and fork; guards rd_list. */
static pthread_mutex_t gp_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rd *rd_list;
static pthread_key_t rd_key;
static bool rd_key_ok;
static sigset_t fork_mask;	/* the forking thread's, under gp_lock */

/* The real signal mask (not the sig layer's virtual one): a raw call. */
static void mask_all(sigset_t *old)
{
	sigset_t all;

	sigfillset(&all);
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, old, _NSIG / 8);
}

static void mask_restore(const sigset_t *old)
{
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, old, NULL, _NSIG / 8);
}

static void rd_unlink(struct rd *d)
{
	for (struct rd **p = &rd_list; *p; p = &(*p)->next)
		if (*p == d) {
			*p = d->next;
			return;
		}
}

/*
 * The agent's busy flag (own.c): the registry's lock is the agent's own
 * work, never the program's pthread_mutex_lock. Weak: agent_rcu links this
 * file alone.
 */
void pk_own_enter(void) __attribute__((weak, visibility("hidden")));
void pk_own_leave(void) __attribute__((weak, visibility("hidden")));

static void own_enter(void)
{
	if (pk_own_enter)
		pk_own_enter();
}

static void own_leave(void)
{
	if (pk_own_leave)
		pk_own_leave();
}

/*
 * A thread that registered exits: out of the registry (never in a
 * section). Its reader pointer goes first, with every signal blocked: a
 * handler that runs on this thread after it (a probe hit in the rest of
 * the thread's exit) sees a thread urcu-bp does not know and takes
 * chain.c's unregistered path, never a reader the grace periods no longer
 * wait for.
 */
static void rd_gone(void *arg)
{
	struct rd *d = arg;
	sigset_t old;

	own_enter();
	mask_all(&old);
	__atomic_store_n(&URCU_TLS(urcu_bp_reader), NULL, __ATOMIC_RELAXED);
	pthread_mutex_lock(&gp_lock);
	rd_unlink(d);
	pthread_mutex_unlock(&gp_lock);
	mask_restore(&old);
	free(d->mem);
	own_leave();
}

__attribute__((constructor(101))) static void pka_rcu_init(void)
{
	/* Readers may then skip their fence: step 1 and 4 do it for them. */
	if (!syscall(SYS_membarrier,
		     MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0))
		urcu_bp_has_sys_membarrier = 1;
	rd_key_ok = !pthread_key_create(&rd_key, rd_gone);
}

void urcu_bp_register_thread(void)
{
	struct rd *d;
	sigset_t old;
	void *mem;

	if (URCU_TLS(urcu_bp_reader))
		return;
	/* Aligned as struct urcu_bp_reader claims (a cache line or two). */
	mem = calloc(1, sizeof(*d) + __alignof__(struct rd));
	if (!mem)
		abort();	/* urcu-bp's own answer to no memory here */
	d = (struct rd *)(((uintptr_t)mem + __alignof__(struct rd) - 1) &
			  ~(uintptr_t)(__alignof__(struct rd) - 1));
	d->mem = mem;
	d->r.tid = pthread_self();
	d->r.alloc = 1;
	own_enter();
	mask_all(&old);
	pthread_mutex_lock(&gp_lock);
	d->next = rd_list;
	rd_list = d;
	URCU_TLS(urcu_bp_reader) = &d->r;
	pthread_mutex_unlock(&gp_lock);
	mask_restore(&old);
	if (rd_key_ok)
		pthread_setspecific(rd_key, d);
	own_leave();
}

/* The inline read side calls this for a thread not yet registered. */
void urcu_bp_register(void)
{
	urcu_bp_register_thread();
}

static void mb_all(void)
{
	if (urcu_bp_has_sys_membarrier &&
	    !syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0))
		return;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* Inside a read-side section entered in the phase that is not current. */
static bool in_old_section(const struct urcu_bp_reader *r)
{
	unsigned long v = __atomic_load_n(&r->ctr, __ATOMIC_RELAXED);

	return (v & URCU_BP_GP_CTR_NEST_MASK) &&
	       ((v ^ urcu_bp_gp.ctr) & URCU_BP_GP_CTR_PHASE);
}

static void wait_readers(void)
{
	for (struct rd *d = rd_list; d; d = d->next)
		for (unsigned int spin = 0; in_old_section(&d->r); spin++) {
			struct timespec ts = { 0, 50 * 1000 };

			if (spin < 100)
				__builtin_ia32_pause();
			else
				nanosleep(&ts, NULL);
		}
}

void urcu_bp_synchronize_rcu(void)
{
	sigset_t old;

	mask_all(&old);
	pthread_mutex_lock(&gp_lock);
	mb_all();
	wait_readers();
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	__atomic_store_n(&urcu_bp_gp.ctr,
			 urcu_bp_gp.ctr ^ URCU_BP_GP_CTR_PHASE, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	wait_readers();
	mb_all();
	pthread_mutex_unlock(&gp_lock);
	mask_restore(&old);
}

void urcu_bp_before_fork(void)
{
	sigset_t old;

	mask_all(&old);
	pthread_mutex_lock(&gp_lock);
	fork_mask = old;
}

void urcu_bp_after_fork_parent(void)
{
	sigset_t old = fork_mask;

	pthread_mutex_unlock(&gp_lock);
	mask_restore(&old);
}

/* Only the forking thread goes on: the others' entries are dropped. */
void urcu_bp_after_fork_child(void)
{
	struct urcu_bp_reader *me = URCU_TLS(urcu_bp_reader);
	sigset_t old = fork_mask;
	struct rd *d, *next, *keep = NULL;

	for (d = rd_list; d; d = next) {
		next = d->next;
		if (&d->r == me) {
			keep = d;
			keep->next = NULL;
		} else {
			free(d->mem);
		}
	}
	rd_list = keep;
	pthread_mutex_init(&gp_lock, NULL);
	mask_restore(&old);
}
