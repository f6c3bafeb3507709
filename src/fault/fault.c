// SPDX-License-Identifier: MIT
/* fault.c - the fault layer's core: signal entry, trap chain by address, fault chain by address range, die chain, their readers. */

/*
 * Design
 * ======
 *
 * One hook in src/sig/sig.c's order (PK_SIG_FAULT, after text's in-flight
 * patch sites) serves SIGSEGV, SIGBUS, SIGILL and SIGTRAP, and sends each
 * signal down separate chains, never one overloaded chain (DESIGN.md,
 * the ia64 notify_die lesson):
 *
 *   SIGSEGV, SIGBUS  the fault chain: the one range that contains si_addr,
 *                    found by binary search; nobody else is called;
 *   SIGTRAP (int3),  the trap chain: the one entry at the trapping
 *   SIGILL           instruction's address;
 *   any of them,     the die chain, only when nothing above claimed the
 *   unclaimed        signal; after it sig.c calls the previous handler and
 *                    then takes the default action.
 *
 * The hook is installed for a signal only while something needs it: SIGSEGV
 * and SIGBUS while a range or a die handler is registered, SIGTRAP and
 * SIGILL while a trap entry or a die handler is, all four once a client
 * has joined.
 *
 * Clients
 * -------
 *
 * Watchpoints (watch.c) are a client of the fault chain, through fault.h
 * only: their pages are ranges like a user's, their handlers run in the
 * same read side, and the signals of theirs that no table can claim (a
 * hardware breakpoint's TRAP_PERF, a single step's TRAP_TRACE, a fault on a
 * page they just gave back) reach them through one hook, struct
 * pk_fault_client, NULL until the first watchpoint.
 *
 * Tables and their readers
 * ------------------------
 *
 * Ranges and trap entries are each an immutable array sorted by address,
 * replaced whole (copy, edit, publish) under pk_fault_lock. The signal path
 * reads them without a lock, SRCU style, as chain.c's path (b) does, but
 * with reader counts that each thread owns, so that a handled fault costs
 * no locked instruction and no cache line shared with other threads. A
 * writer publishes a new table, waits one grace period and frees the old
 * one: the protocol, steps R1-R4 for readers and W1-W5 for writers, is
 * numbered beside pk_fault_wait_readers(), and every barrier below names
 * its partner by those numbers. One grace period per change, not per
 * entry.
 *
 * Reader slots: a thread claims one on its first fault (pk_slot_claim():
 * a compare-and-swap on a free slot's owner, async-signal-safe), and keeps
 * it. A slot whose owner has died (tgkill says ESRCH) with no read side
 * left open in it is taken over by the next thread that finds none free.
 * When all RD_SLOTS are held by live threads, a thread uses the shared
 * counts (locked increments, as before), which are waited for too.
 * The counters of handled faults and traps live in the slot as well.
 *
 * Handlers run inside the read side. A handler (or a die handler) that calls
 * register/unregister would wait for itself: a per-thread depth makes those
 * calls fail with -EDEADLK.
 *
 * Nothing on the signal path allocates, locks, logs or changes errno (sig.c
 * keeps errno for the whole handler).
 */

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/ucontext.h>
#include <time.h>
#include <unistd.h>

#include "arch/arch.h"
#include "fault/fault.h"
#include "internal.h"
#include "sig/sig.h"

struct ent {
	uintptr_t start, end;	/* [start, end) */
	pk_fault_fn fn;
	void *ctx;
};

/*
 * Tables live in pages of their own (tab_alloc()), never in a malloc'd
 * block that could share a page with data a watchpoint protects: the
 * signal path reads them. A fault chain of up to SMALL_TAB ranges lives in
 * hot.small instead, next to the line a handled fault reads anyway.
 */
struct tab {
	size_t n;
	size_t maplen;		/* 0: one of hot.small */
	struct ent e[];
};

#define SMALL_TAB 3

/*
 * pk_fault_lock serialises the fault layer's writers, the core's and its
 * client's (fault.h). Of the core's data below it guards hot.ranges and
 * traps as pointers to replace (the tables themselves never change: the
 * signal path loads the pointers atomically, see pk_fault_wait_readers()),
 * the phase flips (W4), n_die and the die chain's registrations, client,
 * and the signal hooks' state (update_hooks()); watch.c marks what it
 * guards of the client's.
 */
pthread_mutex_t pk_fault_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * What a handled fault reads, in one page and few cache lines, with the
 * range table if it is small: after the kernel's round trip each distinct
 * line (and page) the signal path touches is likely a miss, and together
 * they showed in the cost per fault (bench_fault "userfault"). hot.small
 * holds two tables, the published one and the next (see tab_alloc()).
 */
static struct {
	struct tab *ranges;	/* atomic; fault chain; pk_fault_lock */
	unsigned int phase;	/* atomic; flipped under pk_fault_lock */
	int rd_fence;		/* no membarrier: barrier A is a full fence
				   (rd_setup(), or W2 once it failed) */
	int resume;		/* handled faults resume without rt_sigreturn
				   (rd_setup()) */
	struct {
		struct tab t;
		struct ent e[SMALL_TAB];
	} small[2];
} hot __attribute__((aligned(256)));	/* < 256 bytes: never across pages */
PK_SIGNAL_DATA(hot);
_Static_assert(offsetof(__typeof__(hot.small[0]), e) ==
	       offsetof(struct tab, e), "hot.small[i].t.e[] is hot.small[i].e");

static struct tab *traps;	/* atomic; trap chain (end = start + 1);
				   pk_fault_lock */
PK_SIGNAL_DATA(traps);

static size_t n_die;		/* pk_fault_lock; atomic for the signal path */
static PK_CHAIN_ATOMIC_DEFINE(die_chain);	/* registered under
						   pk_fault_lock */
PK_SIGNAL_DATA(n_die);
PK_SIGNAL_DATA(die_chain);

/* The one client (fault.h): set once, under pk_fault_lock; atomic. */
static const struct pk_fault_client *client;
PK_SIGNAL_DATA(client);

/*
 * A thread's read-side counts, on a cache line of its own (see "Tables and
 * their readers"). Written by its owner only, except by fork's child.
 */
struct rd_slot {
	unsigned long nest[2];	/* read sides open, per phase */
	unsigned long faults;	/* handled faults (stats) */
	unsigned long resumed;	/* of those, without rt_sigreturn (stats) */
	unsigned long traps;	/* handled traps (stats) */
	pid_t owner;		/* atomic: tid, 0 when free */
} __attribute__((aligned(64)));

/* No lock: a slot is claimed by compare-and-swap (rd_slot_claim()). */
#define RD_SLOTS 256
static struct rd_slot rd_slots[RD_SLOTS];
static unsigned int rd_nslots = RD_SLOTS;	/* fewer: PROBEKIT_FAULT_SLOTS
						   (rd_setup()) */
static struct rd_slot shared_rd;	/* threads without a slot: locked
					   operations */
PK_SIGNAL_DATA(rd_slots);
PK_SIGNAL_DATA(shared_rd);

/*
 * The calling thread's state for the signal path, in one block (see hot).
 * initial-exec: no lazy TLS allocation on the signal path.
 */
static __thread struct {
	struct rd_slot *slot;	/* NULL until the first read side */
	unsigned int depth;	/* inside one of our handlers: -EDEADLK */
} me __attribute__((tls_model("initial-exec")));
PK_SIGNAL_TLS(me);

static unsigned long die_claimed;	/* atomic (stats) */
PK_SIGNAL_DATA(die_claimed);

/* fault.h; set by fault_init(): sysconf() is not async-signal-safe. */
long pk_page_size = 4096;
PK_SIGNAL_DATA(pk_page_size);

/* ----------------------------------------------------- the read side */

/*
 * pk_slot_claim()'s test before it takes over a slot whose owner died: no
 * read side of the dead thread's is left counted in it (a grace period
 * would wait for it forever, and the new owner's counts would add to it).
 */
PK_NOPROBE static int rd_slot_idle(size_t i, void *arg)
{
	(void)arg;
	return !__atomic_load_n(&rd_slots[i].nest[0], __ATOMIC_RELAXED) &&
	       !__atomic_load_n(&rd_slots[i].nest[1], __ATOMIC_RELAXED);
}

/*
 * The calling thread's reader slot: a free one, else one whose owner is dead
 * and left no read side open (rd_slot_idle()), else the shared counts. Once
 * per thread, on its first read side (in a signal handler: pk_slot_claim()
 * is a compare-and-swap and syscalls, no lock, and keeps errno).
 */
PK_NOPROBE __attribute__((cold)) static struct rd_slot *rd_slot_claim(void)
{
	int i = pk_slot_claim(&rd_slots[0].owner, sizeof(rd_slots[0]),
			      rd_nslots, pk_gettid(), 0,
			      rd_slot_idle, NULL);

	return i < 0 ? &shared_rd : &rd_slots[i];
}

/* Open a read side; returns the count to pass to rd_unlock(). */
static PK_NOPROBE_INLINE unsigned long *rd_lock(struct rd_slot **sp)
{
	struct rd_slot *s = me.slot;
	unsigned long *c;

	if (__builtin_expect(!s, 0))
		s = me.slot = rd_slot_claim();
	*sp = s;
	c = &s->nest[__atomic_load_n(&hot.phase, __ATOMIC_RELAXED) & 1];
	if (__builtin_expect(s == &shared_rd, 0)) {
		/* R1 and R2 in one: a full barrier itself. */
		__atomic_add_fetch(c, 1, __ATOMIC_SEQ_CST);
		return c;
	}
	/* R1: a plain increment (see pk_fault_wait_readers()). */
	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + 1,
			 __ATOMIC_RELAXED);
	/* R2, barrier A: pairs with W2, barrier B. */
	if (__builtin_expect(hot.rd_fence, 0))
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	else
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
	return c;
}

/* R4: release, pairs with W3/W5's acquire loads in wait_zero(). */
static PK_NOPROBE_INLINE void rd_unlock(struct rd_slot *s, unsigned long *c)
{
	if (__builtin_expect(s == &shared_rd, 0))
		__atomic_sub_fetch(c, 1, __ATOMIC_RELEASE);
	else
		__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) - 1,
				 __ATOMIC_RELEASE);
}

/* One more on counter @c of the calling thread's slot @s. */
static PK_NOPROBE_INLINE void count(struct rd_slot *s, unsigned long *c)
{
	if (__builtin_expect(s == &shared_rd, 0))
		__atomic_add_fetch(c, 1, __ATOMIC_RELAXED);
	else
		__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + 1,
				 __ATOMIC_RELAXED);
}

/* fault.h: a client's read side, the same as dispatch()'s. */
PK_NOPROBE void pk_fault_read_enter(struct pk_fault_reader *r)
{
	r->nest = rd_lock(&r->slot);
}

PK_NOPROBE void pk_fault_read_leave(struct pk_fault_reader *r)
{
	rd_unlock(r->slot, r->nest);
}

/* ------------------------------------------------------------ signal path */

/* The entry containing @addr, or NULL. */
static PK_NOPROBE_INLINE const struct ent *tab_find(const struct tab *t,
					     uintptr_t addr)
{
	size_t lo;

	if (!t)
		return NULL;
	/* The first entry that starts above @addr; the one before may hold it. */
	lo = PK_LOWER_BOUND(t->n, i, t->e[i].start <= addr);
	if (lo == 0 || addr >= t->e[lo - 1].end)
		return NULL;
	return &t->e[lo - 1];
}

/*
 * Look @addr up in *@tabp and call its handler inside a read side; *@sp is
 * set to the calling thread's reader slot.
 */
static PK_NOPROBE_INLINE int dispatch(struct tab **tabp, uintptr_t addr,
				      struct pk_fault *f, struct rd_slot **sp)
{
	unsigned long *rc = rd_lock(sp);
	const struct ent *e;
	int ret = PK_FAULT_UNHANDLED;

	/* R3: acquire, pairs with W1 in tab_replace(): the entries too. */
	e = tab_find(__atomic_load_n(tabp, __ATOMIC_ACQUIRE), addr);
	if (e) {
		f->start = (void *)e->start;
		ret = e->fn(f, e->ctx);
	}
	rd_unlock(*sp, rc);
	return ret == PK_FAULT_HANDLED;
}

/*
 * The first 64 signals of @m, the kernel's whole mask, read as one word: a
 * load, where memcpy() or memcmp() would be a call in a -O0 build, to a
 * function a probe can be on (tests/check-noprobe.sh).
 */
static PK_NOPROBE_INLINE unsigned long mask_of(const sigset_t *m)
{
	return m->__val[0];
}

/*
 * The kernel's entry for SIGSEGV and SIGBUS (pk_sig_set_entry(), sig.h).
 * The hot path, a fault that a range claims (a GC barrier, a watched
 * page), is straight-line code that touches few cache lines (see hot and
 * me); everything else goes to pk_sig_handler(), which calls fault_hook()
 * in its turn. errno is kept here as sig.c keeps it there.
 */
PK_NOPROBE static void fault_entry(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	struct pk_fault f;
	struct rd_slot *rs;
	int *ep, saved_errno, ret;
	unsigned long mask;	/* the kernel's 64 signals */
	stack_t ss;

	if (__builtin_expect(si->si_code <= 0, 0))
		goto other;
	/* No memcpy()/memcmp() calls (a -O0 build makes them): see mask_of(). */
	mask = mask_of(&uc->uc_sigmask);
	ss = uc->uc_stack;
	/* Not &errno: __errno_location() may carry a probe (arch.h). */
	ep = pk_errno_ptr();
	saved_errno = *ep;
	me.depth++;
	__asm__ volatile("" ::: "memory");
	f.addr = si->si_addr;
	f.start = NULL;
	f.access = pk_arch_fault_access(uc);
	f.signo = sig;
	f.code = si->si_code;
	f.siginfo = si;
	f.ucontext = uc;
	ret = dispatch(&hot.ranges, (uintptr_t)si->si_addr, &f, &rs);
	__asm__ volatile("" ::: "memory");
	me.depth--;
	*ep = saved_errno;
	if (__builtin_expect(ret, 1)) {
		count(rs, &rs->faults);
		/*
		 * The kernel changed no signal mask (SA_NODEFER, empty
		 * sa_mask): unless the handler asked rt_sigreturn to set a
		 * mask or an alternate stack, resume here (resume.c).
		 */
		if (hot.resume && mask == mask_of(&uc->uc_sigmask) &&
		    ss.ss_sp == uc->uc_stack.ss_sp &&
		    ss.ss_size == uc->uc_stack.ss_size &&
		    ss.ss_flags == uc->uc_stack.ss_flags &&
		    pk_arch_resume_ok(uc)) {
			count(rs, &rs->resumed);
			pk_arch_resume(uc);
		}
		return;
	}
other:
	pk_sig_handler(sig, si, ctx);
}

/* The client's hook (fault.h), if a client has joined. */
static PK_NOPROBE_INLINE int client_hook(int sig, siginfo_t *si,
					 ucontext_t *uc)
{
	/* Acquire: pairs with pk_fault_client_join()'s release store. */
	const struct pk_fault_client *c = __atomic_load_n(&client,
							  __ATOMIC_ACQUIRE);

	return c && c->hook(sig, si, uc);
}

/*
 * Everything but a fault a range claims: fault_entry() has already asked
 * the ranges about every SIGSEGV/SIGBUS with si_code > 0.
 */
PK_NOPROBE static int fault_hook(int sig, siginfo_t *si, ucontext_t *uc)
{
	/* Members, not memset(): no call a probe can be on (check-noprobe.sh). */
	struct pk_fault f = {
		.signo = sig,
		.code = si->si_code,
		.siginfo = si,
		.ucontext = uc,
	};
	struct rd_slot *rs;
	int ret = 0, r;

	me.depth++;
	__asm__ volatile("" ::: "memory");
	switch (sig) {
	case SIGSEGV:
	case SIGBUS:
		f.addr = si->si_addr;
		f.access = pk_arch_fault_access(uc);
		/* No range's: maybe a page the client just gave back. */
		if (sig == SIGSEGV && si->si_code == SEGV_ACCERR &&
		    client_hook(sig, si, uc)) {
			ret = 1;
			goto out;
		}
		break;
	case SIGTRAP:
		/* A hardware breakpoint's or a single step's: the client's. */
		if ((si->si_code == TRAP_PERF || si->si_code == TRAP_TRACE) &&
		    client_hook(sig, si, uc)) {
			ret = 1;
			goto out;
		}
		if (!pk_arch_trap_hit(si))	/* not a trap instruction */
			break;
		f.addr = (void *)pk_arch_trap_addr(uc);
		f.access = PK_ACCESS_EXEC;
		goto trap;
	case SIGILL:
		if (si->si_code <= 0)
			break;
		f.addr = (void *)pk_arch_pc(uc);
		f.access = PK_ACCESS_EXEC;
	trap:
		if (dispatch(&traps, (uintptr_t)f.addr, &f, &rs)) {
			count(rs, &rs->traps);
			ret = 1;
			goto out;
		}
		break;
	}
	f.start = NULL;
	/*
	 * Not pk_notify(): a branch site inside the library would make every
	 * process that loads it patch code at start-up; a signal costs
	 * microseconds, a load of n_die nothing.
	 */
	if (!__atomic_load_n(&n_die, __ATOMIC_RELAXED))
		goto out;
	r = pk_chain_call(&die_chain, (unsigned long)sig, &f, NULL);
	if (r == PK_STOP) {
		__atomic_add_fetch(&die_claimed, 1, __ATOMIC_RELAXED);
		ret = 1;
	}
out:
	__asm__ volatile("" ::: "memory");
	me.depth--;
	return ret;
}

/* ------------------------------------------------------------- writers */

/*
 * W3/W5: wait until every thread's count of read sides of phase @idx was
 * 0. Acquire: pairs with R4 in rd_unlock().
 */
static void wait_zero(unsigned int idx)
{
	struct timespec ts = { 0, 20000 };
	int spins = 0;

	for (unsigned int i = 0; i <= RD_SLOTS; i++) {
		struct rd_slot *s = i < RD_SLOTS ? &rd_slots[i] : &shared_rd;

		while (__atomic_load_n(&s->nest[idx], __ATOMIC_ACQUIRE)) {
			if (++spins < 100)
				sched_yield();
			else
				nanosleep(&ts, NULL);
		}
	}
}

/*
 * pk_fault_wait_readers() - one grace period: every read side that was open
 * when it was called has closed when it returns, so nothing unpublished
 * before the call (a table tab_replace() swapped out, a watchpoint
 * switched off) is still in use.
 *
 * Protocol. A reader (rd_lock(), what it reads, rd_unlock()):
 *   R1. idx = phase & 1 (relaxed); my->nest[idx]++: a plain store, as only
 *       this thread writes its slot and a nested signal handler restores
 *       what it changed (the shared counts: a locked add, which is R2 too);
 *   R2. barrier A: a compiler barrier; a full fence instead where barrier
 *       B cannot be had (hot.rd_fence);
 *   R3. load what is published (a table in dispatch(), acquire; a watch's
 *       active flag in watch.c), use it, call the handler;
 *   R4. my->nest[idx]-- (release).
 * The writer, pk_fault_lock held:
 *   W1. unpublish, before the call: tab_replace()'s exchange, or watch.c's
 *       active = 0 (seq_cst);
 *   W2. barrier B: membarrier(PRIVATE_EXPEDITED), which runs a full
 *       barrier on every core that is running one of our threads; with
 *       fencing readers, a full fence here;
 *   W3. wait until every slot's nest[idle] == 0 (acquire), idle being the
 *       side R1 does not pick now: only readers that loaded the phase
 *       before the previous flip can count there, a bounded number;
 *   W4. flip the phase (seq_cst): readers from now on count on the side
 *       W3 emptied, so W5 ends even while threads keep faulting;
 *   W5. wait until every slot's nest[old] == 0 (acquire): only readers that
 *       loaded the phase before W4 can still add to it, a bounded number.
 * Then the caller frees what it unpublished.
 *
 * Why: A and B are an asymmetric pair. A reader whose R1 came before the
 * point where B's barrier hit its thread has its count seen by W3/W5
 * (which run after B) and is waited for; a reader whose R1 came after it
 * does R3 after it as well, and sees W1, not the old thing. W3/W5's
 * acquire loads pair with R4's release: the reader's last use of the old
 * thing happens before the caller frees it. W4 is for liveness only.
 */
void pk_fault_wait_readers(void)
{
	unsigned int p = __atomic_load_n(&hot.phase, __ATOMIC_RELAXED);

	pk_assert_held(&pk_fault_lock);
	/*
	 * W2, barrier B: pairs with R2, barrier A, in rd_lock(). Registered,
	 * membarrier does not fail; if it did, readers fence from now on, and
	 * this thread's fence is all that is left to give (ret.c fences there
	 * too). Fencing readers pair with this thread's fence: C11 orders a
	 * fence against a fence, not against W1's seq_cst store alone.
	 */
	if (hot.rd_fence) {
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	} else if (pk_membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)) {
		__atomic_store_n(&hot.rd_fence, 1, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	}
	wait_zero((p + 1) & 1);					/* W3 */
	__atomic_store_n(&hot.phase, p + 1, __ATOMIC_SEQ_CST);	/* W4 */
	wait_zero(p & 1);					/* W5 */
}

/*
 * A table of @n entries to replace *@tabp with. A small fault chain takes
 * the hot.small table that is not published: the other one was replaced
 * by a writer that then waited for its readers, so nobody reads it.
 */
static struct tab *tab_alloc(struct tab **tabp, size_t n)
{
	size_t len = sizeof(struct tab) + (n ? n : 1) * sizeof(struct ent);
	struct tab *t;

	if (tabp == &hot.ranges && n <= SMALL_TAB) {
		t = &hot.small[*tabp == &hot.small[0].t].t;
		t->n = n;
		t->maplen = 0;
		return t;
	}

	len = (len + (size_t)pk_page_size - 1) & ~((size_t)pk_page_size - 1);
	t = mmap(NULL, len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (t == MAP_FAILED)
		return NULL;
	/*
	 * Never one VMA with the program's memory next to it: a page the
	 * program protects and unprotects around each fault would split and
	 * merge that VMA every time (measured: +900 ns a fault). The name
	 * keeps the kernel from merging (Linux 5.17+); NORESERVE does as well
	 * where the name cannot be set, unless overcommit is strict.
	 */
	prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)t, len,
	      (unsigned long)"probekit");
	t->n = n;
	t->maplen = len;
	return t;
}

/*
 * Whether [@lo, @hi) overlaps a table in pages of its own, which the signal
 * path reads (by address: the name tab_alloc() gives them needs a kernel
 * with anonymous VMA names). pk_fault_lock held.
 */
static int tab_pages_overlap(uintptr_t lo, uintptr_t hi)
{
	const struct tab *ts[] = { hot.ranges, traps };

	pk_assert_held(&pk_fault_lock);
	for (size_t i = 0; i < PK_ARRAY_SIZE(ts); i++)
		if (ts[i] && ts[i]->maplen && (uintptr_t)ts[i] < hi &&
		    (uintptr_t)ts[i] + ts[i]->maplen > lo)
			return 1;
	return 0;
}

static void tab_free(struct tab *t)
{
	if (t && t->maplen)
		munmap(t, t->maplen);
}

/* Publish @t in place of *@tabp, wait one grace period, free the old one. */
static void tab_replace(struct tab **tabp, struct tab *t)
{
	struct tab *old;

	pk_assert_held(&pk_fault_lock);
	if (t && t->n == 0) {
		tab_free(t);
		t = NULL;
	}
	/*
	 * W1 (pk_fault_wait_readers()): its release half pairs with R3's
	 * acquire load in dispatch(), which then sees @t's entries.
	 */
	old = __atomic_exchange_n(tabp, t, __ATOMIC_SEQ_CST);
	pk_fault_wait_readers();
	tab_free(old);
}

/* Hook or unhook the signals as the registrations need them. */
static int update_hooks(void)
{
	/*
	 * Once a client has joined, all four stay hooked: a signal of its
	 * (a breakpoint's SIGTRAP, a fault on a page just unwatched) may
	 * still be on its way to a thread after its last user left.
	 */
	int need_fault = (hot.ranges && hot.ranges->n) || n_die || client;
	int need_trap = (traps && traps->n) || n_die || client;
	int err = 0, e;

	pk_assert_held(&pk_fault_lock);
	e = pk_sig_hook(SIGSEGV, PK_SIG_FAULT, need_fault ? fault_hook : NULL);
	err = err ? err : e;
	e = pk_sig_hook(SIGBUS, PK_SIG_FAULT, need_fault ? fault_hook : NULL);
	err = err ? err : e;
	e = pk_sig_hook(SIGTRAP, PK_SIG_FAULT, need_trap ? fault_hook : NULL);
	err = err ? err : e;
	e = pk_sig_hook(SIGILL, PK_SIG_FAULT, need_trap ? fault_hook : NULL);
	err = err ? err : e;
	return err;
}

/* Where an entry starting at @start is or would go in @t (sorted). */
static size_t tab_index(const struct tab *t, uintptr_t start)
{
	return t ? PK_LOWER_BOUND(t->n, i, t->e[i].start < start) : 0;
}

/* A copy of @t with room for one more entry, @e inserted in order. */
static int tab_insert(struct tab **tabp, const struct ent *e)
{
	const struct tab *t = *tabp;
	size_t n = t ? t->n : 0, i = tab_index(t, e->start);
	struct tab *nt;

	/* Overlap with the neighbour below or above. */
	if ((i > 0 && t->e[i - 1].end > e->start) ||
	    (i < n && t->e[i].start < e->end))
		return -EEXIST;
	nt = tab_alloc(tabp, n + 1);
	if (!nt)
		return -ENOMEM;
	if (i)
		memcpy(nt->e, t->e, i * sizeof(nt->e[0]));
	nt->e[i] = *e;
	if (n - i)
		memcpy(nt->e + i + 1, t->e + i, (n - i) * sizeof(nt->e[0]));
	tab_replace(tabp, nt);
	return 0;
}

static int tab_remove(struct tab **tabp, uintptr_t start)
{
	const struct tab *t = *tabp;
	size_t n = t ? t->n : 0, i = tab_index(t, start);
	struct tab *nt;

	if (i == n || t->e[i].start != start)
		return -ENOENT;
	nt = tab_alloc(tabp, n - 1);
	if (!nt)
		return -ENOMEM;
	memcpy(nt->e, t->e, i * sizeof(nt->e[0]));
	memcpy(nt->e + i, t->e + i + 1, (n - i - 1) * sizeof(nt->e[0]));
	tab_replace(tabp, nt);
	return 0;
}

/*
 * Insert @e into *@tabp and hook the signals as that needs; if they cannot
 * be hooked, take @e out again (a second grace period) and return why.
 */
static int tab_add(struct tab **tabp, const struct ent *e)
{
	int err = tab_insert(tabp, e);

	if (!err) {
		err = update_hooks();
		if (err) {
			tab_remove(tabp, e->start);
			update_hooks();
		}
	}
	return err;
}

/* Remove the entry at @start from *@tabp, then unhook what no one needs. */
static int tab_del(struct tab **tabp, uintptr_t start)
{
	int err = tab_remove(tabp, start);

	if (!err)
		update_hooks();
	return err;
}

/*
 * Barriers A and B (R2 and W2, pk_fault_wait_readers()), chosen before
 * the first read side can run: every read side follows a registration;
 * and whether handled faults may resume without rt_sigreturn. Tests force the
 * fallbacks: PROBEKIT_FAULT_FENCE=1 as if the kernel had no membarrier,
 * PROBEKIT_FAULT_SLOTS=N as if only N reader slots existed,
 * PROBEKIT_FAULT_SIGRETURN=1 as if resuming needed rt_sigreturn.
 */
static void rd_setup(void)
{
	const char *v = pk_getenv("PROBEKIT_FAULT_SLOTS");

	hot.rd_fence = pk_env_flag("FAULT_FENCE") || !pk_membarrier_expedited();
	if (v && atoi(v) >= 0 && atoi(v) < RD_SLOTS)
		rd_nslots = (unsigned int)atoi(v);
	hot.resume = !pk_env_flag("FAULT_SIGRETURN") && pk_arch_resume_usable();
	pk_dbg("fault: read sides %s, %u reader slots, resume %s",
	       hot.rd_fence ? "fence" : "barrier-free (membarrier)", rd_nslots,
	       hot.resume ? "in user space" : "by rt_sigreturn");
}

/*
 * The fault signals are probekit's from the moment the library loads, as
 * SIGTRAP and the sweep signal are (src/sig/interpose.c): not from the
 * fault layer's first use. A thread's real mask cannot be changed from
 * another thread, so a thread that blocked every signal before probekit
 * took SIGSEGV kept it really blocked, and the kernel killed it when it
 * wrote a watched page; and a handler the program installed before was the
 * kernel's, not chained behind probekit's (issue 9, item 1). Owning them
 * costs nothing while no range is registered: fault_entry() finds no
 * table and passes each signal to pk_sig_handler(), which calls the
 * program's handler or takes the default action, one extra function call
 * per fault the program handles itself. After interpose.c's resolve_all()
 * (priority 101), which finds libc's sigaction.
 */
__attribute__((constructor(102))) static void fault_own_signals(void)
{
	/* Before the handler is installed: only the fault layer enters these. */
	pk_sig_set_entry(SIGSEGV, fault_entry);
	pk_sig_set_entry(SIGBUS, fault_entry);
	/* One pass over the handlers' masks for the three. */
	pk_sig_pin_set((1UL << (SIGSEGV - 1)) | (1UL << (SIGBUS - 1)) |
		       (1UL << (SIGILL - 1)));
}

/* A locked section for writers; -EDEADLK from inside one of our handlers. */
int pk_fault_write_lock(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	if (me.depth)
		return -EDEADLK;
	pthread_once(&once, rd_setup);
	pthread_mutex_lock(&pk_fault_lock);
	return 0;
}

/*
 * fork(): util.c's atfork triple calls the entries in lock order (the
 * probe layer registers trap entries with its own lock held, so
 * pk_fault_lock comes after it). The core's entry and each client's hold
 * pk_fault_lock across fork through pk_fault_fork_hold() and
 * pk_fault_fork_release() (fault.h), in whichever order they run.
 * In a child only the forking thread exists: no other readers.
 */
static pid_t fork_holder;	/* atomic: the forking thread, while it holds
				   pk_fault_lock */
static unsigned int fork_holds;	/* pk_fault_lock: entries between hold and
				   release */

void pk_fault_fork_hold(void)
{
	pid_t tid = pk_gettid();

	/* Only this thread writes its own tid here, with the lock held. */
	if (__atomic_load_n(&fork_holder, __ATOMIC_RELAXED) != tid) {
		pthread_mutex_lock(&pk_fault_lock);
		__atomic_store_n(&fork_holder, tid, __ATOMIC_RELAXED);
	}
	fork_holds++;
}

void pk_fault_fork_release(int child)
{
	if (--fork_holds)
		return;
	__atomic_store_n(&fork_holder, 0, __ATOMIC_RELAXED);
	if (child)
		pthread_mutex_init(&pk_fault_lock, NULL);
	else
		pthread_mutex_unlock(&pk_fault_lock);
}

static void fault_fork_parent(void)
{
	pk_fault_fork_release(0);
}

static void fault_fork_child(void)
{
	/* Only this thread is left: its slot (new tid), no other reader. */
	for (unsigned int i = 0; i < RD_SLOTS; i++)
		if (&rd_slots[i] != me.slot) {
			rd_slots[i].nest[0] = rd_slots[i].nest[1] = 0;
			rd_slots[i].owner = 0;
		}
	if (me.slot && me.slot != &shared_rd)
		me.slot->owner = pk_gettid();
	shared_rd.nest[0] = shared_rd.nest[1] = 0;
	pk_fault_fork_release(1);
}

PK_ATFORK(fault, PK_RANK_FAULT, pk_fault_fork_hold, fault_fork_parent,
	  fault_fork_child);

__attribute__((constructor)) static void fault_init(void)
{
	pk_page_size = sysconf(_SC_PAGESIZE);
}

int pk_fault_range_add(uintptr_t start, uintptr_t end, pk_fault_fn fn,
		       void *ctx)
{
	struct ent e = { start, end, fn, ctx };

	pk_assert_held(&pk_fault_lock);
	if (tab_pages_overlap(start, end))
		return -EBUSY;
	return tab_add(&hot.ranges, &e);
}

int pk_fault_range_remove(uintptr_t start)
{
	pk_assert_held(&pk_fault_lock);
	return tab_del(&hot.ranges, start);
}

int pk_fault_client_join(const struct pk_fault_client *c)
{
	pk_assert_held(&pk_fault_lock);
	if (client && client != c)
		return -EBUSY;
	/* Release: pairs with client_hook()'s acquire load. */
	__atomic_store_n(&client, c, __ATOMIC_RELEASE);
	return update_hooks();
}

int pk_fault_register(void *addr, size_t len, pk_fault_fn fn, void *ctx)
{
	uintptr_t a = (uintptr_t)addr, page = (uintptr_t)pk_page_size;
	int err;

	if (!addr || !fn || !len || a + len < a || (a & (page - 1)) ||
	    (len & (page - 1)))
		return -EINVAL;
	/* msync fails with ENOMEM where any page of the range is unmapped. */
	if (msync(addr, len, MS_ASYNC))
		return -EINVAL;
	if (pk_fault_own_data(a, a + len))
		return -EBUSY;	/* probekit's signal path reads it */
	err = pk_fault_write_lock();
	if (err)
		return err;
	err = pk_fault_range_add(a, a + len, fn, ctx);
	pk_fault_write_unlock();
	if (err && err != -EEXIST)
		pk_err("fault: cannot register [%p, +%zu): %s", addr, len,
		       strerror(-err));
	return err;
}

/* The range at @start is the client's (a watched page), not the caller's. */
static int range_is_client(uintptr_t start)
{
	const struct tab *t = hot.ranges;
	size_t i = tab_index(t, start);

	pk_assert_held(&pk_fault_lock);
	return t && i < t->n && t->e[i].start == start && client &&
	       t->e[i].fn == client->range_fn;
}

int pk_fault_unregister(void *addr)
{
	int err = pk_fault_write_lock();

	if (err)
		return err;
	err = range_is_client((uintptr_t)addr) ? -EBUSY :
	      pk_fault_range_remove((uintptr_t)addr);
	pk_fault_write_unlock();
	return err;
}

int pk_trap_register(void *addr, pk_fault_fn fn, void *ctx)
{
	struct ent e = { (uintptr_t)addr, (uintptr_t)addr + 1, fn, ctx };
	int err;

	if (!addr || !fn)
		return -EINVAL;
	err = pk_fault_write_lock();
	if (err)
		return err;
	err = tab_add(&traps, &e);
	pk_fault_write_unlock();
	return err;
}

int pk_trap_unregister(void *addr)
{
	int err = pk_fault_write_lock();

	if (err)
		return err;
	err = tab_del(&traps, (uintptr_t)addr);
	pk_fault_write_unlock();
	return err;
}

int pk_die_register(struct pk_notifier *nb)
{
	int err = pk_fault_write_lock();

	if (err)
		return err;
	err = pk_chain_register(&die_chain, nb);
	if (!err) {
		__atomic_store_n(&n_die, n_die + 1, __ATOMIC_RELAXED);
		err = update_hooks();
		if (err) {
			__atomic_store_n(&n_die, n_die - 1, __ATOMIC_RELAXED);
			pk_chain_unregister(&die_chain, nb);
			update_hooks();
		}
	}
	pk_fault_write_unlock();
	return err;
}

int pk_die_unregister(struct pk_notifier *nb)
{
	int err = pk_fault_write_lock();

	if (err)
		return err;
	err = pk_chain_unregister(&die_chain, nb);
	if (!err) {
		__atomic_store_n(&n_die, n_die - 1, __ATOMIC_RELAXED);
		update_hooks();
	}
	pk_fault_write_unlock();
	return err;
}

int pk_fault_own_data(uintptr_t lo, uintptr_t hi)
{
	/* errno: fault_entry() and sig.c save and restore it. */
	struct pk_span err = { &errno, sizeof(errno) };

	return pk_overlaps(lo, hi, &err, 1) || pk_signal_data_overlaps(lo, hi);
}

int pk_fault_stats(struct pk_fault_stats *st)
{
	const struct pk_fault_client *c;
	struct pk_fault_stats cur;

	if (!st || st->sz < sizeof(size_t))
		return -EINVAL;
	memset(&cur, 0, sizeof(cur));
	cur.sz = st->sz < sizeof(cur) ? st->sz : sizeof(cur);
	cur.faults = __atomic_load_n(&shared_rd.faults, __ATOMIC_RELAXED);
	cur.resumed = __atomic_load_n(&shared_rd.resumed, __ATOMIC_RELAXED);
	cur.traps = __atomic_load_n(&shared_rd.traps, __ATOMIC_RELAXED);
	for (unsigned int i = 0; i < rd_nslots; i++) {
		cur.faults += __atomic_load_n(&rd_slots[i].faults, __ATOMIC_RELAXED);
		cur.resumed += __atomic_load_n(&rd_slots[i].resumed,
					       __ATOMIC_RELAXED);
		cur.traps += __atomic_load_n(&rd_slots[i].traps, __ATOMIC_RELAXED);
	}
	cur.die_claimed = __atomic_load_n(&die_claimed, __ATOMIC_RELAXED);
	c = __atomic_load_n(&client, __ATOMIC_ACQUIRE);
	if (c)
		c->stats(&cur);
	memcpy(st, &cur, cur.sz);
	return 0;
}
