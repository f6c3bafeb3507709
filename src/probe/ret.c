// SPDX-License-Identifier: MIT
/* ret.c - return probes: per-thread return-address stacks, one return trampoline that unwinders can walk through. */

/*
 * A return probe is an entry probe (probe.c) whose pre-handler, ret_entry(),
 * pushes a record { real return address, stack word, probe, data } on this
 * thread's return-address stack and makes the function return to the
 * record's landing in a code region of ours (two ways, see "divert" and
 * "hijack"); from there pk_ret_common and pk_ret_dispatch() call the
 * return handler and go on to the real return address. The stack word is
 * the one that holds the call's return address (the stack pointer at the
 * function's entry).
 *
 * Records are per thread, so a hit writes nothing shared: the region holds
 * `nblk` blocks of PK_RETPROBE_DEPTH records, and a thread claims a block
 * on its first hit (pk_slot_claim(): a compare-and-swap on the block's
 * owner; no malloc, so hits may happen in signal handlers) and gives it
 * back in a pthread key destructor when it exits. Records are never freed: a thread still inside a probed call after
 * the probe went away returns through them.
 *
 *   code region (read+execute, never writable; filled via /proc/self/mem)
 *	one entry per record, PK_RET_ENT_SIZE bytes each from PK_RET_ENT0
 *	(the layout: src/arch/x86_64/tramp.h): "call *-8(%rsp)", then the
 *	record's landing, which jumps to pk_ret_common
 *   record region (read+write, mapped with the code)
 *	struct rec [nblk * PK_RETPROBE_DEPTH]
 *
 * Two ways into a record (enum mode), both ending at its landing:
 *
 *   divert  The function is called from the record's entry, so that its ret
 *	     is predicted. Replacing a return address on the stack costs a
 *	     mispredicted ret (about 14 ns here, more than all the rest). So
 *	     ret_entry() leaves the stack alone (the return address is saved
 *	     in the record) and posts a divert request to the record's entry
 *	     (probe.h's pk_probe_divert()): the trampoline's ret stays paired
 *	     with its call, the function's return address is replaced by where
 *	     it continues, and the entry's call *-8(%rsp) runs it with the
 *	     landing as its return address. The return stack buffer then holds
 *	     the landing above the caller's return address: the function's ret
 *	     and our final ret (after the handler) are both predicted. Only the
 *	     hit that posted the request takes it; a signal handler's probe
 *	     hits in between neither post another (they hijack) nor drop the
 *	     call's records, which look stale until the entry's call writes the
 *	     landing (rec_live()).
 *   hijack  Anything else (a divert request is pending, or the entry
 *	     handler did not run from the stub): the landing's address
 *	     replaces the return address on the stack, as kretprobes do; the
 *	     function's ret mispredicts, and we leave by jmp, not ret, so as
 *	     not to misalign the return stack buffer for the returns further
 *	     up.
 *
 * One landing per stack word. Several return probes on one function, or a
 * return-probed function tail-called by another: the first record takes
 * the call (or the hijack), the others ride along (mode piggy: same word,
 * handled first on the way back, newest first). Chaining landings through
 * one word instead would make unwinders, which find the record from the
 * word, go round in a circle.
 *
 * Why one entry per record, not one shared address. An unwinder (C++
 * exceptions, pthread_exit's forced unwind, backtrace()) reads return
 * addresses from the stack. Meeting our landing, it must find the real
 * caller, which is only in our record; the only thing the stack tells it is
 * the landing's address in the word. So that address names the record, and
 * one FDE (unwind info registered with libgcc's __register_frame) covers
 * every entry with the rule
 *
 *	caller's rsp = rsp;  return address = recs[(*(rsp - 8) - landing 0) /
 *					      PK_RET_ENT_SIZE].ret
 *
 * (the word, rsp - 8, still holds the landing's address while the unwinder
 * looks: it runs below it; src/arch/x86_64/eh.c has the details). No
 * unwinder needs a special case if it uses libgcc's registered frames
 * (glibc's and libstdc++'s do), and there is no hook on __cxa_throw or
 * _Unwind_RaiseException, which would see neither pthread_cancel nor a
 * second copy of the unwinder. The kernel solves the same problem by
 * teaching its own unwinders about kretprobe_trampoline; we cannot edit the
 * process's unwinder, but we can describe ourselves to it.
 *
 * pk_ret_common (arch's PK_ARCH_RET_COMMON(), instantiated below:
 * probekit's text with ordinary CFI) saves what is live after a return
 * (rax, rdx, xmm0, xmm1, the callee-saved registers) as a struct pk_regs
 * whose last word is the stack word itself, calls pk_ret_dispatch(),
 * restores rax and rdx (the handler may change them) and returns through
 * the word, where the dispatcher put the real return address back: by ret
 * in divert mode, by jmp *-8(%rsp) in hijack mode ([rsp-8] is safe from
 * signal frames: the kernel skips the 128-byte red zone). rcx, rsi, rdi
 * and r8-r11 are dead after a return (SysV ABI): not saved, so their
 * struct fields are undefined.
 *
 * Stale records. Calls skipped by longjmp or an exception leave records
 * behind. Returning through landing k drops every record above k of the
 * block but k's riders (their calls cannot still be running); a new push
 * first drops top records whose word no longer holds their landing's
 * address (the stack there was reused). That test never drops a live
 * record, also when the push happens on another stack (a signal handler on
 * a sigaltstack); an extra "word below the new call's" test would. Stale
 * records whose word happens to be intact stay until a return below them
 * drops them; they cost depth, never correctness.
 *
 * Unregister vs a thread in a return handler (asymmetric Dekker):
 *   thread:      cur = rp;  barrier A;  reload rec->rp;  call if still rp
 *   unregister:  rec->rp = NULL (all records);  barrier B;  wait cur != rp
 * Either the thread's reload sees NULL or unregister sees cur == rp. A is a
 * compiler barrier and B membarrier(PRIVATE_EXPEDITED) where the kernel has
 * it (no fence on the hit path); otherwise both are full fences.
 *
 * Handlers that touch general registers only (PK_PROBE_F_GPR_ONLY in the
 * options' flags): the entry probe has the flag too, and each record says
 * whether its probe had it (REC_GPR in its word). pk_ret_common is
 * PK_ARCH_RET_COMMON_GPR's: it first calls pk_ret_dispatch() with no
 * vector or x87 state saved, which goes on only if the record and every
 * rider on its call are flagged, else returns before any change to be
 * called again after the full save. Both dispatchers run with the probed
 * code's vector registers live, so this file is compiled for general
 * registers only, and what the hit path calls outside it (libc, on a
 * thread's first hit: claim()) goes through pk_arch_vsave_call().
 */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("general-regs-only")
#elif defined(__clang__)
#pragma clang attribute push(__attribute__((target("general-regs-only"))), apply_to = function)
#endif

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "arch/arch.h"
#include "internal.h"
#include "probe/probe.h"
#include "text/text.h"

#define ENT_SIZE PK_RET_ENT_SIZE
#define ENT_LAND PK_RET_ENT_LAND	/* landing: after the entry's call */
#define RET_THREADS 128		/* blocks, unless PROBEKIT_RETPROBE_THREADS */

enum mode { M_HIJACK, M_DIVERT, M_PIGGY };
#define REC_MODE 3ull		/* struct rec's word: enum mode */
#define REC_GPR 4ull		/* its probe has PK_PROBE_F_GPR_ONLY */

struct rec {
	uint64_t ret;		/* the real return address: first, the FDE reads it */
	uint64_t word;		/* the stack word, | enum mode | REC_GPR:
				   rec_word(), rec_mode() */
	struct pk_retprobe *rp;	/* atomic; NULL once the probe is unregistered */
	uint64_t cont;		/* divert: what the entry calls (the trampoline
				   slot's copy); piggy: the landing the word
				   holds */
	unsigned char data[PK_RETPROBE_DATA_MAX] __attribute__((aligned(16)));
};
_Static_assert(offsetof(struct rec, ret) == 0, "the FDE reads rec.ret");
_Static_assert(sizeof(struct rec) % PK_RET_ENT_SIZE == 0,
	       "the FDE finds record k at k * its size / PK_RET_ENT_SIZE");

static PK_NOPROBE_INLINE uint64_t rec_word(const struct rec *r)
{
	return r->word & ~(uint64_t)7;
}

static PK_NOPROBE_INLINE enum mode rec_mode(const struct rec *r)
{
	return (enum mode)(r->word & REC_MODE);
}

/* Whether @r's stack word is @word and its mode @m. */
static PK_NOPROBE_INLINE int rec_is(const struct rec *r, uint64_t word,
				    enum mode m)
{
	return (r->word & ~REC_GPR) == (word | m);
}

/* One thread's records: the owner and unregister read and write these. */
struct blk {
	int owner;			/* atomic: tid, or 0 when free (the
					   owner word of pk_slot_claim()) */
	unsigned int hw;		/* atomic: records ever used (high water) */
	struct pk_retprobe *cur;	/* atomic: whose return handler runs */
} __attribute__((aligned(64)));

struct pk_retprobe {
	struct pk_probe *probe;		/* the entry probe that pushes records */
	pk_retprobe_entry_fn entry;
	pk_retprobe_ret_fn ret;
	void *ctx;
	unsigned long missed;		/* atomic */
	uint64_t *missed_to;		/* opts->missed: atomic, or NULL */
	unsigned long pool_empty;	/* atomic: misses for want of a block */
	uint8_t armed;
	uint8_t going;			/* unregister in progress */
	uint8_t gpr;			/* PK_PROBE_F_GPR_ONLY */
};

/*
 * ret_lock guards every return probe's ->armed and ->going, each
 * (un)register call as a whole, and creating the region: the variables
 * below are set once, under it, before any return probe is armed, and only
 * read after (by hit paths too, without it: the entry probes that lead
 * there are armed by a later text commit). It is taken outside probe.c's
 * probe_lock (internal.h's lock order). Hit paths take no lock: a block's
 * records are its owner thread's, which unregister only clears ->rp of,
 * by compare-and-swap (see "Unregister vs a thread in a return handler").
 */
static pthread_mutex_t ret_lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t ret_code, ret_ents;	/* code region, entry 0 */
static size_t ret_nblk;
static struct rec *ret_recs;
static struct blk *ret_blks;
static pthread_key_t ret_key;
static int ret_asym;			/* membarrier plays barrier B */
static int ret_hijack_only;		/* PROBEKIT_RETPROBE_HIJACK=1 */
static int ret_dry;			/* atomic: a thread found no free
					   block (logged once, off the hit
					   path: ret_dry_log()) */

/*
 * This thread's block (or NULL), its stack top, and its failed claims
 * since the last reclaim scan. "In the dispatcher" is pk_probe_self.ret
 * (probe.h), which the API's re-entry test reads too.
 */
static __thread struct blk *ret_self __attribute__((tls_model("initial-exec")));
static __thread unsigned int ret_top __attribute__((tls_model("initial-exec")));
static __thread unsigned int ret_fails __attribute__((tls_model("initial-exec")));
/* ret_self's records and the index of its first. */
static __thread struct rec *ret_myrecs __attribute__((tls_model("initial-exec")));
static __thread size_t ret_mybase __attribute__((tls_model("initial-exec")));
/*
 * Whether this thread's newest record is a flagged probe's (REC_GPR): where
 * pk_ret_common tries pk_ret_dispatch_gpr() first. A hint only (a return
 * through an older record may find it either way); by name from
 * pk_ret_common's code, so not static.
 */
PK_HIDDEN extern __thread uint8_t pk_ret_gpr_hint __attribute__((tls_model("initial-exec")));
__thread uint8_t pk_ret_gpr_hint __attribute__((tls_model("initial-exec")));
/* ---------------------------------------------------------- hit paths */

static PK_NOPROBE_INLINE uintptr_t land_addr(size_t k)
{
	return ret_ents + k * ENT_SIZE + ENT_LAND;
}

/* The record whose landing is @land (huge for addresses not a landing). */
static PK_NOPROBE_INLINE size_t land_index(uintptr_t land)
{
	return (size_t)(land - ENT_LAND - ret_ents) / ENT_SIZE;
}

static PK_NOPROBE_INLINE void barrier_a(void)
{
	if (ret_asym)
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
	else
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/*
 * The key destructor, at thread exit. @arg may not be this thread's block:
 * glibc hands a new thread the descriptor of one that ended by a raw
 * SYS_exit without clearing its key values, so a thread that never
 * claimed runs the dead one's destructor, with a block that claim() may
 * have given to a live thread since. Only the owner gives a block back.
 */
static void ret_release(void *arg)
{
	struct blk *b = arg;
	int tid = (int)syscall(SYS_gettid);

	if (ret_self == b) {
		ret_self = NULL;
		ret_top = 0;
	}
	/* Pairs with pk_slot_claim()'s acquire CAS: our record writes are done. */
	__atomic_compare_exchange_n(&b->owner, &tid, 0, 0, __ATOMIC_RELEASE,
				    __ATOMIC_RELAXED);
}

/* pk_slot_claim()'s reclaim test: any block whose owner is gone. */
PK_NOPROBE static int reclaimable(size_t i, void *arg)
{
	(void)i;
	(void)arg;
	return 1;
}

/*
 * This thread's first hit: a free block, or NULL (pool empty). Taken by
 * pk_slot_claim(), the scan starting at the tid's block so that threads
 * spread. A block is free again once ret_release() ran for its thread;
 * a thread that ended without its key destructors (a raw SYS_exit) never
 * gives its block back, so when none is free the scan takes one over from
 * an owner whose tid is gone (pk_tid_gone(): one tgkill each). That costs
 * a system call per block: done on the first failure, then on every 64th
 * of this thread's hits that find the pool still empty, not on each. (A
 * tid the kernel reuses between that test and the compare-and-swap could
 * fool it; the pid space would have to wrap within that window.)
 */
PK_NOPROBE static void *claim(void *unused)
{
	int tid = (int)syscall(SYS_gettid);
	int i = pk_slot_claim(&ret_blks[0].owner, sizeof(ret_blks[0]), ret_nblk,
			      tid, (size_t)tid, NULL, NULL);
	struct blk *b;

	(void)unused;
	if (i < 0 && !(ret_fails++ & 63))
		i = pk_slot_claim(&ret_blks[0].owner, sizeof(ret_blks[0]),
				  ret_nblk, tid, (size_t)tid, reclaimable, NULL);
	if (i < 0)
		return NULL;
	ret_fails = 0;
	b = &ret_blks[i];
	/* Its dead owner may have ended inside a return handler. */
	__atomic_store_n(&b->cur, NULL, __ATOMIC_RELEASE);
	if (pthread_setspecific(ret_key, b)) {
		__atomic_store_n(&b->owner, 0, __ATOMIC_RELEASE);
		return NULL;
	}
	ret_top = 0;
	ret_mybase = (size_t)i * PK_RETPROBE_DEPTH;
	ret_myrecs = ret_recs + ret_mybase;
	ret_self = b;
	return b;
}

/*
 * Its entry probe's hit was missed (probe.c): the call is one not counted
 * for the caller's counter; pk_retprobe_info's missed has it already (the
 * entry probe's own misses are in it).
 */
PK_NOPROBE void pk_ret_entry_missed(void *ctx)
{
	struct pk_retprobe *rp = ctx;

	if (rp->missed_to)
		__atomic_add_fetch(rp->missed_to, 1, __ATOMIC_RELAXED);
}

PK_NOPROBE static void miss(struct pk_retprobe *rp)
{
	__atomic_add_fetch(&rp->missed, 1, __ATOMIC_RELAXED);
	if (rp->missed_to)
		__atomic_add_fetch(rp->missed_to, 1, __ATOMIC_RELAXED);
}

/*
 * Whether record @j of the block at @base (recs) may still be returned
 * through: its word holds its landing, or its call is being diverted (the
 * request is pending: @psp, or taken and the word holds what the entry
 * will call; we may be a signal handler that interrupted that). Piggy
 * records live as long as the record whose call they ride.
 */
static PK_NOPROBE_INLINE __attribute__((no_sanitize_address)) int
rec_live(const struct rec *recs, size_t base, unsigned int j, uintptr_t psp)
{
	const struct rec *t = &recs[j];
	uint64_t word = rec_word(t), v;

	if (rec_mode(t) == M_PIGGY) {
		size_t k = land_index(t->cont);

		if (k < base || k >= base + j)
			return 0;
		j = (unsigned int)(k - base);
		t = &recs[j];
		if (rec_word(t) != word || rec_mode(t) == M_PIGGY)
			return 0;
	}
	if (word == psp)
		return 1;	/* pending */
	v = *(const volatile uint64_t *)(uintptr_t)word;
	return v == land_addr(base + j) ||
	       (rec_mode(t) == M_DIVERT && v == t->cont);
}

/*
 * The entry probe's pre-handler: push a record, arrange the return.
 * Reads stack words of calls that may be gone: not instrumented by ASan,
 * which may have poisoned that memory for a newer frame.
 */
PK_NOPROBE __attribute__((no_sanitize_address))
static void ret_entry(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	struct pk_retprobe *rp = ctx;
	struct blk *b = ret_self;
	uint64_t *word = (uint64_t *)pk_arch_regs_sp(r);
	uintptr_t psp = pk_probe_divert_pending();
	struct rec *recs, *rec;
	unsigned int top;
	uint64_t cont;
	enum mode m;
	size_t base;

	(void)p;
	if (pk_probe_self.ret) {
		miss(rp);
		return;
	}
	/* libc's pthread_setspecific(): not for general registers only. */
	if (!b && !(b = pk_arch_vsave_call(claim, NULL))) {
		miss(rp);
		__atomic_add_fetch(&rp->pool_empty, 1, __ATOMIC_RELAXED);
		if (!__atomic_load_n(&ret_dry, __ATOMIC_RELAXED))
			__atomic_store_n(&ret_dry, 1, __ATOMIC_RELAXED);
		return;
	}
	/*
	 * A pending request is the dispatch a signal handler running us
	 * interrupted, wherever it is: above us, or on the thread's stack
	 * while we run on a sigaltstack (at any address). It is never
	 * dropped here: its thread may be past the stub's cmp already, on its
	 * way to the divert code, which reads the request's @to and @cont
	 * and pushes into the record it names; dropping it would let our hits
	 * post a divert of their own over those, and reuse that record. So hits
	 * while a request is pending hijack, and its record stays live. (A
	 * request is dead only if a handler left probekit's trampoline by
	 * longjmp, which the header forbids.)
	 */
	base = ret_mybase;
	recs = ret_myrecs;
	top = ret_top;
	/* Drop top records whose call is gone (see "Stale records"). */
	while (top && !rec_live(recs, base, top - 1, psp))
		top--;
	if (top == PK_RETPROBE_DEPTH) {
		ret_top = top;
		miss(rp);
		return;
	}
	/*
	 * One landing per stack word: a call that returns through a word
	 * which already leads to a record (another return probe on this
	 * function, or a probed function tail-called by one) rides along on
	 * that record instead of taking the word over. Unwinders find a
	 * record by the landing in the word, so two landings chained through
	 * one word would send them round in a circle.
	 */
	if (psp == (uintptr_t)word) {
		m = M_PIGGY;	/* another return probe diverts this call */
		cont = pk_probe_divert_to() + ENT_LAND;
	} else if (top && rec_word(&recs[top - 1]) == (uintptr_t)word) {
		const struct rec *t = &recs[top - 1];

		m = M_PIGGY;	/* live (above), so *word is its landing */
		cont = rec_mode(t) == M_PIGGY ? t->cont : land_addr(base + top - 1);
	} else if (!psp && !ret_hijack_only) {
		/* We run at a function's entry: a return probe's entry probe. */
		m = M_DIVERT;
		cont = pk_probe_divert_cont(r);
	} else {
		m = M_HIJACK;
		cont = 0;
	}
	rec = &recs[top];
	rec->ret = *word;
	rec->word = (uint64_t)(uintptr_t)word | m | (rp->gpr ? REC_GPR : 0);
	rec->cont = cont;
	if (rp->entry && rp->entry(rp, r, rec->data, rp->ctx)) {
		ret_top = top;
		return;
	}
	/* unregister reads it (after this handler is over: probe.c waits). */
	__atomic_store_n(&rec->rp, rp, __ATOMIC_RELAXED);
	if (top + 1 > __atomic_load_n(&b->hw, __ATOMIC_RELAXED))
		__atomic_store_n(&b->hw, top + 1, __ATOMIC_RELAXED);
	ret_top = top + 1;
	pk_ret_gpr_hint = rp->gpr;
	switch (m) {
	case M_DIVERT:
		pk_probe_divert(r, land_addr(base + top) - ENT_LAND);
		break;
	case M_PIGGY:
		break;
	case M_HIJACK:
		*word = land_addr(base + top);
		break;
	}
}

/* Cold: out of line, but in the caller's section. */
PK_NOPROBE static void die(const char *msg)
{
	ssize_t n = write(2, msg, strlen(msg));

	(void)n;
	abort();
}

/*
 * One record's return handler, unless unregister got there first. Inlined
 * into pk_ret_dispatch() (PK_NOPROBE code would not be).
 */
static PK_NOPROBE_INLINE void
call_ret(struct blk *b, struct rec *rec, struct pk_regs *r)
{
	struct pk_retprobe *rp = __atomic_load_n(&rec->rp, __ATOMIC_RELAXED);

	if (!rp)
		return;
	__atomic_store_n(&b->cur, rp, __ATOMIC_RELAXED);
	barrier_a();
	if (__atomic_load_n(&rec->rp, __ATOMIC_RELAXED) == rp)
		rp->ret(rp, r, rec->data, rp->ctx);
	__atomic_store_n(&b->cur, NULL, __ATOMIC_RELEASE);
}

/*
 * Called by pk_ret_common with the registers after a landing; by name from
 * its code, so not static.
 */
/*
 * Whether @rec's call (@word, through @land) has flagged handlers only:
 * its own and its riders' (those are this thread's, above it, @top).
 */
static PK_NOPROBE_INLINE int
call_gpr(const struct rec *recs, unsigned int i, unsigned int top,
	 uint64_t word, uintptr_t land)
{
	if (!(recs[i].word & REC_GPR))
		return 0;
	for (unsigned int j = top; j-- > i + 1;)
		if (rec_is(&recs[j], word, M_PIGGY) && recs[j].cont == land &&
		    !(recs[j].word & REC_GPR))
			return 0;
	return 1;
}

/*
 * The return dispatcher, for pk_ret_dispatch() (@gpr 0: the vector state
 * is saved) and pk_ret_dispatch_gpr() (1: it is not): 0 when done, 1 (only
 * with @gpr, nothing done) to be called again with the state saved.
 */
static PK_NOPROBE_INLINE uint64_t ret_dispatch(struct pk_regs *r, int gpr)
{
	uintptr_t land = r->pk_private_ret, word = pk_arch_regs_sp(r) - 8;
	size_t k = land_index(land);
	unsigned int i = (unsigned int)(k % PK_RETPROBE_DEPTH);
	struct blk *b;
	struct rec *rec;
	enum mode m;

	if (k >= ret_nblk * PK_RETPROBE_DEPTH)
		die("probekit: return trampoline entered from nowhere\n");
	b = &ret_blks[k / PK_RETPROBE_DEPTH];
	rec = &ret_recs[k];
	m = rec_mode(rec);
	if (rec_word(rec) != word || m == M_PIGGY)
		die("probekit: return trampoline entered through a record that "
		    "is not this call's (stack switched inside a return-probed "
		    "call?)\n");
	/* Without the vector save: only if every handler here is flagged. */
	if (gpr && (b != ret_self ? !(rec->word & REC_GPR) :
		    !call_gpr(ret_recs + (k - i), i, ret_top, word, land)))
		return 1;
	pk_probe_self.ret = 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	r->pk_private_ret = rec->ret;	/* the word: the stack is as it was */
	r->ip = rec->ret;
	if (b == ret_self) {
		struct rec *recs = ret_recs + (k - i);

		/* Riders on this call first, newest first; the rest is stale. */
		for (unsigned int j = ret_top; j-- > i + 1;)
			if (rec_is(&recs[j], word, M_PIGGY) && recs[j].cont == land)
				call_ret(b, &recs[j], r);
		ret_top = i;
		pk_ret_gpr_hint = i && (recs[i - 1].word & REC_GPR);
	}
	call_ret(b, rec, r);
	r->flags = m == M_DIVERT;	/* how pk_ret_common leaves */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	pk_probe_self.ret = 0;
	return 0;
}

/* Called by pk_ret_common (by name from its code, so not static). */
PK_HIDDEN uint64_t pk_ret_dispatch(struct pk_regs *r, uint64_t zero);
PK_NOPROBE uint64_t pk_ret_dispatch(struct pk_regs *r, uint64_t zero)
{
	(void)zero;
	return ret_dispatch(r, 0);
}

PK_HIDDEN uint64_t pk_ret_dispatch_gpr(struct pk_regs *r, uint64_t one);
PK_NOPROBE uint64_t pk_ret_dispatch_gpr(struct pk_regs *r, uint64_t one)
{
	(void)one;
	return ret_dispatch(r, 1);
}

/* Where every landing jumps: see PK_ARCH_RET_COMMON_GPR() in arch.h. */
PK_HIDDEN void pk_ret_common(void);
PK_ARCH_RET_COMMON_GPR(pk_ret_common, pk_ret_dispatch, pk_ret_dispatch_gpr,
		       pk_ret_gpr_hint);

/* -------------------------------------------------------------- region */

extern void __register_frame(void *begin);

/* fork(): ret_lock first of all (internal.h's lock order). */
static void ret_fork_prepare(void)
{
	pthread_mutex_lock(&ret_lock);
}

static void ret_fork_parent(void)
{
	pthread_mutex_unlock(&ret_lock);
}

static void ret_fork_child(void)
{
	/*
	 * Only this thread survives: the other blocks are free again. Its own
	 * is under its new tid, or the reclaim in claim() would take it.
	 */
	for (size_t i = 0; i < ret_nblk; i++)
		if (&ret_blks[i] != ret_self) {
			ret_blks[i].owner = 0;
			ret_blks[i].cur = NULL;
		}
	if (ret_self)
		ret_self->owner = (int)syscall(SYS_gettid);
	pthread_mutex_unlock(&ret_lock);
}

PK_ATFORK(ret, PK_RANK_RET, ret_fork_prepare, ret_fork_parent, ret_fork_child);

/* The trampoline and the record pool, once per process. ret_lock held. */
static int region_init(void)
{
	const char *v = pk_getenv("PROBEKIT_RETPROBE_THREADS");
	size_t nblk = RET_THREADS, nent, code_len, rec_len;
	uint8_t *code = NULL, *eh = NULL;
	struct blk *blks = NULL;
	uintptr_t recs;
	void *c = MAP_FAILED;
	int err = -ENOMEM;

	pk_assert_held(&ret_lock);
	if (ret_code)
		return 0;
	if (v && atol(v) > 0)
		nblk = (size_t)atol(v);
	ret_hijack_only = pk_env_flag("RETPROBE_HIJACK");
	if (nblk > 4096)
		nblk = 4096;	/* a bound on the pool: 48 MiB of records */
	nent = nblk * PK_RETPROBE_DEPTH;
	code_len = (PK_RET_ENT0 + nent * ENT_SIZE + 4095) & ~(size_t)4095;
	rec_len = (nent * sizeof(struct rec) + 4095) & ~(size_t)4095;
	code = malloc(code_len);
	eh = malloc(PK_ARCH_RET_EH_MAX);
	blks = aligned_alloc(64, nblk * sizeof(*blks));
	/* One mapping, so entries reach their records; code never writable. */
	c = mmap(NULL, code_len + rec_len, PROT_READ | PROT_EXEC,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!code || !eh || !blks || c == MAP_FAILED)
		goto fail;
	recs = (uintptr_t)c + code_len;
	if (mprotect((void *)recs, rec_len, PROT_READ | PROT_WRITE)) {
		err = -errno;
		goto fail;
	}
	memset(blks, 0, nblk * sizeof(*blks));
	pk_arch_ret_code(code, code_len, nent, (uintptr_t)pk_ret_common);
	if (!pk_arch_ret_eh(eh, (uintptr_t)c, nent, recs, sizeof(struct rec)))
		abort();	/* struct rec does not suit the unwind info */
	err = pk_text_fill(c, code, code_len);
	if (err)
		goto fail;
	err = pthread_key_create(&ret_key, ret_release);
	if (err) {
		err = -err;
		goto fail;
	}
	/* Threads at an entry are on their way into a trampoline slot. */
	err = pk_probe_divert_region((uintptr_t)c, code_len);
	if (err) {
		pthread_key_delete(ret_key);
		goto fail;
	}
	__register_frame(eh);	/* kept registered: the region lives on */
	ret_asym = pk_membarrier_expedited();
	free(code);
	ret_nblk = nblk;
	ret_blks = blks;
	ret_recs = (struct rec *)recs;
	ret_ents = (uintptr_t)c + PK_RET_ENT0;
	/* Last: the probes that read all this are armed after (text commit). */
	__atomic_store_n(&ret_code, (uintptr_t)c, __ATOMIC_RELEASE);
	pk_dbg("probe: return trampoline %p (%zu threads x %d records), "
	       "membarrier %s", c, nblk, PK_RETPROBE_DEPTH,
	       ret_asym ? "yes" : "no (fences on the hit path)");
	return 0;
fail:
	pk_err("probe: cannot make the return trampoline (%d)", err);
	if (c != MAP_FAILED)
		munmap(c, code_len + rec_len);
	free(code);
	free(eh);
	free(blks);
	return err;
}

/* ------------------------------------------------------------ the API */

/*
 * Hits found the record pool empty (ret_dry): said once, here, off the
 * hit path (which may be a signal handler's). Each probe counts its own
 * misses for it (pk_retprobe_info.pool_empty).
 */
static void ret_dry_log(void)
{
	static int logged;

	if (__atomic_load_n(&ret_dry, __ATOMIC_RELAXED) &&
	    !__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED))
		pk_warn("probe: the return probes' record pool (%zu threads) "
			"ran dry: calls of threads without a block are not "
			"return-probed (pk_retprobe_info.pool_empty; "
			"PROBEKIT_RETPROBE_THREADS)", ret_nblk);
}

static int create(const struct pk_retprobe_opts *opts,
		  struct pk_retprobe **out)
{
	struct pk_retprobe *rp;
	int err;

	if (!opts || !out || opts->sz < offsetof(struct pk_retprobe_opts, ctx))
		return -EINVAL;
	err = pk_opts_check(opts, opts->sz, sizeof(*opts));
	if (err)
		return err;
	if (!opts->ret ||
	    (PK_OPT(opts, struct pk_retprobe_opts, flags) & ~PK_PROBE_F_GPR_ONLY))
		return -EINVAL;
	if (PK_OPT(opts, struct pk_retprobe_opts, data_size) >
	    PK_RETPROBE_DATA_MAX)
		return -E2BIG;
	rp = calloc(1, sizeof(*rp));
	if (!rp)
		return -ENOMEM;
	rp->entry = opts->entry;
	rp->ret = opts->ret;
	rp->ctx = PK_OPT(opts, struct pk_retprobe_opts, ctx);
	rp->gpr = !!(PK_OPT(opts, struct pk_retprobe_opts, flags) &
		     PK_PROBE_F_GPR_ONLY);
	rp->missed_to = PK_OPT(opts, struct pk_retprobe_opts, missed);
	{
		PK_OPTS(pk_probe_opts, po, .symbol = opts->symbol,
			.addr = opts->addr, .pre = ret_entry, .ctx = rp,
			.flags = rp->gpr ? PK_PROBE_F_GPR_ONLY : 0);

		err = pk_probe_create_in(&po, &rp->probe);
	}
	if (!err)
		pk_probe_set_ret_entry(rp->probe);
	if (err) {
		free(rp);
		return err;
	}
	*out = rp;
	return 0;
}

/*
 * The entry probes of @rps[@n] into *@out (free() it): 0, or -EINVAL (one is
 * NULL or armed != @armed), -ESTALE (one's entry probe was retired: its
 * code went away), -ENOMEM.
 */
static int entry_probes(struct pk_retprobe *const *rps, size_t n, int armed,
			struct pk_probe ***out)
{
	struct pk_probe **ps = calloc(n, sizeof(*ps));
	int err = 0;

	if (!ps)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		if (!rps[i]) {
			err = -EINVAL;
			break;
		}
		if (pk_probe_stale(rps[i]->probe))
			err = -ESTALE;
		else if (!rps[i]->armed != !armed && !err)
			err = -EINVAL;
		ps[i] = rps[i]->probe;
	}
	if (err && err != -ESTALE) {
		free(ps);
		return err;
	}
	*out = ps;
	return err;
}

/*
 * After @rps' entry probes are unregistered (no thread runs ret_entry()
 * for them now, so no new record names them): clear their records, and
 * wait for the threads in their return handlers.
 */
static void forget(struct pk_retprobe *const *rps, size_t n)
{
	for (size_t i = 0; i < n; i++)
		rps[i]->going = 1;
	for (size_t b = 0; b < ret_nblk; b++) {
		struct rec *recs = ret_recs + b * PK_RETPROBE_DEPTH;
		unsigned int hw = __atomic_load_n(&ret_blks[b].hw, __ATOMIC_RELAXED);

		for (unsigned int i = 0; i < hw; i++) {
			struct pk_retprobe *p = __atomic_load_n(&recs[i].rp,
								__ATOMIC_RELAXED);

			/* Every record's probe is alive: each unregister clears its own. */
			if (p && p->going)
				__atomic_compare_exchange_n(&recs[i].rp, &p, NULL, 0,
							    __ATOMIC_RELAXED,
							    __ATOMIC_RELAXED);
		}
	}
	/* Barrier B; pairs with barrier_a() in pk_ret_dispatch(). */
	if (!ret_asym || pk_membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED))
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	/*
	 * Wait for blocks whose thread is in a return handler of ours. Not
	 * p->going: a thread may publish a cur it loaded before an earlier
	 * unregister returned, a probe that may be freed by now; compare
	 * pointers, never follow one.
	 */
	for (size_t b = 0; b < ret_nblk; b++) {
		struct pk_retprobe *p;
		size_t i;

		while ((p = __atomic_load_n(&ret_blks[b].cur, __ATOMIC_ACQUIRE))) {
			int owner = __atomic_load_n(&ret_blks[b].owner,
						    __ATOMIC_RELAXED);

			for (i = 0; i < n && rps[i] != p; i++)
				;
			/* A thread that ended inside the handler (SYS_exit). */
			if (i == n || (owner > 0 && pk_tid_gone(owner)))
				break;
			sched_yield();
		}
	}
	for (size_t i = 0; i < n; i++)
		rps[i]->going = 0;
}

/*
 * The armed ones of @rps whose entry probes were retired (probe.c: their
 * code went away) are disarmed here: their records forgotten, so that no
 * return handler of theirs runs once this returns. ret_lock held.
 */
static void forget_stale(struct pk_retprobe *const *rps, size_t n)
{
	struct pk_retprobe **st = calloc(n, sizeof(*st));
	size_t k = 0;

	pk_assert_held(&ret_lock);
	for (size_t i = 0; i < n; i++)
		if (rps[i] && rps[i]->armed && pk_probe_stale(rps[i]->probe)) {
			if (st)
				st[k++] = rps[i];
			else
				forget(&rps[i], 1);
			rps[i]->armed = 0;
		}
	if (k)
		forget(st, k);
	free(st);
}

/* pk_retprobe_register() (@arming) or pk_retprobe_unregister(). */
static int change(struct pk_retprobe *const *rps, size_t n, int arming)
{
	struct pk_probe **ps = NULL;
	int err;

	if (!rps || !n)
		return -EINVAL;
	pthread_mutex_lock(&ret_lock);
	ret_dry_log();
	err = entry_probes(rps, n, !arming, &ps);
	if (!err && arming)
		err = region_init();
	if (!err)	/* pk_probe_change() refuses duplicates */
		err = pk_probe_change(ps, n, arming);
	if (!err && !arming)
		forget(rps, n);
	for (size_t i = 0; !err && i < n; i++)
		rps[i]->armed = (uint8_t)arming;
	if (err == -ESTALE)
		forget_stale(rps, n);
	pthread_mutex_unlock(&ret_lock);
	free(ps);
	return err;
}

int pk_retprobe_create(const struct pk_retprobe_opts *opts,
		       struct pk_retprobe **out)
{
	int err = pk_probe_api_enter();

	if (err)
		return err;
	err = create(opts, out);
	pk_probe_api_leave();
	return err;
}

int pk_retprobe_register(struct pk_retprobe *const *rps, size_t n)
{
	int err = pk_probe_api_enter();

	if (err)
		return err;
	err = change(rps, n, 1);
	pk_probe_api_leave();
	return err;
}

int pk_retprobe_unregister(struct pk_retprobe *const *rps, size_t n)
{
	int err = pk_probe_api_enter();

	if (err)
		return err;
	err = change(rps, n, 0);
	pk_probe_api_leave();
	return err;
}

/* From a handler or a signal handler inside the API: nothing done. */
void pk_retprobe_destroy(struct pk_retprobe *rp)
{
	if (!rp || pk_probe_api_enter())
		return;	/* no log: the interrupted call may hold log_lock */
	/* Retired meanwhile (-ESTALE): disarmed already, freed. */
	if (rp->armed && change(&rp, 1, 0) && rp->armed) {
		pk_err("probe: cannot disarm a return probe; leaking it");
	} else {
		pk_probe_destroy_in(rp->probe);
		free(rp);
	}
	pk_probe_api_leave();
}

int pk_retprobe_get_info(const struct pk_retprobe *rp,
			 struct pk_retprobe_info *info)
{
	struct pk_probe_info pi = { .sz = sizeof(pi) };
	struct pk_retprobe_info cur;

	if (!rp || !info || info->sz < offsetof(struct pk_retprobe_info, armed) ||
	    pk_probe_get_info(rp->probe, &pi))
		return -EINVAL;
	memset(&cur, 0, sizeof(cur));
	cur.addr = pi.addr;
	cur.func = pi.func;
	/* Not armed once its entry probe was retired (code unloaded). */
	cur.armed = __atomic_load_n(&rp->armed, __ATOMIC_RELAXED) && pi.armed;
	/* Hits on the entry probe inside a handler are misses too. */
	cur.missed = __atomic_load_n(&rp->missed, __ATOMIC_RELAXED) + pi.missed;
	cur.bytes = pi.bytes + sizeof(*rp);
	cur.pool_empty = __atomic_load_n(&rp->pool_empty, __ATOMIC_RELAXED);
	cur.sz = info->sz < sizeof(cur) ? info->sz : sizeof(cur);
	memcpy(info, &cur, cur.sz);
	return 0;
}
#if defined(__clang__)
#pragma clang attribute pop
#endif
