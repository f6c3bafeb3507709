// SPDX-License-Identifier: MIT
/* probe.c - probes: jump-optimized and int3, at entry or any instruction; trampolines, arming in batches, moving threads. */

/*
 * A probe point P (a function's first instruction, after any endbr64, or
 * any instruction boundary inside it) has a trampoline slot in a chunk of
 * trampolines within +-2 GiB of P (the layout: src/arch/x86_64/tramp.h):
 * its first word points to the struct tramp, the code at
 * PK_TRAMP_SLOT_ENTRY calls a stub of the chunk, which calls the
 * dispatcher, then the displaced instructions run, relocated, at
 * PK_TRAMP_SLOT_COPY (with post-handlers, a second stub call after the
 * first of them), and a jmp leads back to P + len.
 *
 * A jump probe displaces the whole instructions in [P, P+len), len >= 5.
 * Armed, those bytes are NOPs then "jmp slot entry". Only where that is safe:
 * the bytes lie inside the function (or its padding), nothing lands
 * inside them after P, and they relocate (place.c's header comment).
 *
 * Elsewhere (or with PK_PROBE_F_INT3) an int3 probe: P's instruction keeps
 * its bytes but the first, which becomes int3 (one text batch arms them
 * all). Its SIGTRAP reaches probe_trap() through the fault layer's trap
 * chain, found by address (no walk over other handlers; lock-free), which
 * only sends the thread to the slot's entry: the handlers then run in the
 * trampoline as for a jump probe, out of the signal handler, and the
 * instruction runs out of line from the slot's copy. No single-step. A call
 * there is copied as "push the return address; jmp callee"
 * (pk_arch_relocate_one()), so nothing ever returns into a slot.
 *
 * The stubs (three per chunk) save every register a handler may see into a
 * struct pk_regs, call pk_probe_dispatch() (the fast stub) or
 * pk_probe_dispatch_full() (the post and full stubs), restore them (so
 * handlers may change registers) and return into the slot: call and ret
 * pair up, so the return stack buffer predicts them. The dispatcher finds
 * the tramp from the return address, and from its offset in the slot
 * whether pre- or post-handlers are due. The fast stub does not restore the
 * flags: at a function's entry no flag is live (SysV ABI; DF is clear
 * there and after the handler). The others do: the post stub after a
 * function's first instruction (the entry's vector save, where that
 * instruction leaves the x87/MMX state alone), the full one inside a
 * function (all the vector, x87 and MXCSR state).
 *
 * Which thread may be where: the thread sweep, whose move and wait are
 * described in sweep.h. Here, arming and disarming jump probes (an int3
 * probe changes no instruction boundary) move threads from the text
 * commit's hook (pk_batch_set_hook()); a slot is reused, and a probe freed,
 * only after the wait that follows the disarming commit.
 *
 * An int3 probe's trap entry goes only after the retiring sweep: a thread
 * that hit the int3 before the disarming commit may still be in the signal
 * handler (PK_NOPROBE code, so the sweep waits for it) on its way to the
 * trap chain.
 *
 * Handlers that touch general registers only (PK_PROBE_F_GPR_ONLY): a
 * trampoline built for such a probe has its slot call the stubs'
 * general-registers-only twins (tramp.h), which skip the vector save while
 * the tramp's gpr byte (its first, PK_TRAMP_OWNER_GPR) says that every
 * probe linked there has the flag. A probe without it clears the byte
 * before it is linked, and the last such probe's unregister sets it
 * again. A hit that read the byte set calls its dispatcher with gpr 1,
 * which runs flagged handlers only: one that raced the link of an
 * unflagged probe skips that probe (counted as missed). So the dispatcher
 * runs with the probed code's vector registers live: this whole file is
 * compiled for general registers only (below), and the hit path calls
 * nothing outside it but the handlers.
 */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC target("general-regs-only")
#elif defined(__clang__)
#pragma clang attribute push(__attribute__((target("general-regs-only"))), apply_to = function)
#endif

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "arch/arch.h"
#include "internal.h"
#include "probe/chunk.h"
#include "probe/noprobe.h"
#include "probe/probe.h"
#include "probe/sweep.h"
#include "sig/sig.h"
#include "text/text.h"
#include "util/maps.h"

/* A probe point's trampoline: its slot and the probes that share it. */
struct tramp {
	uint8_t gpr;		/* atomic; first (the slot's owner byte,
				   PK_TRAMP_OWNER_GPR): every probe linked
				   has PK_PROBE_F_GPR_ONLY */
	uint8_t twin;		/* the slot calls the stubs' twins */
	uint8_t fast;		/* atomic: one probe linked, no post-handlers
				   (pk_probe_dispatch()) */
	uint8_t kind;			/* enum pk_probe_kind */
	uint8_t post;			/* the slot calls post-handlers */
	uint8_t full;			/* pre-handlers through the full stub */
	uint8_t first_len;		/* the probed instruction's length */
	uint8_t len;			/* displaced bytes (int3: the insn) */
	uintptr_t addr;		/* probe point */
	uintptr_t slot;		/* its trampoline slot */
	struct pk_chunk *chunk;
	struct pk_probe *probes;	/* linked in registration order */
	struct tramp *next;		/* hash chain */
	uint8_t old[PK_TEXT_MAX];
	struct pk_sweep_map map;	/* instruction starts: site, copy */
	uint8_t trapped;		/* on the trap chain (int3 probes) */
};

/* Set at creation, and read only then on: the handlers, ctx, func, addr
   and the placement (len, kind, full, first_len). */
struct pk_probe {
	pk_probe_handler_fn pre, post;
	void *ctx;
	uintptr_t func, addr;
	struct tramp *t;		/* while armed */
	struct pk_probe *next;		/* on t->probes */
	unsigned long missed;		/* atomic */
	unsigned long seq;		/* when linked: link_seq's value */
	uint8_t len;			/* displaced bytes as placed */
	uint8_t armed;			/* atomic */
	uint8_t kind;			/* as placed */
	uint8_t reason;			/* enum pk_probe_reason, as placed */
	uint8_t full;			/* inside a function: flags live */
	uint8_t first_len;		/* the probed instruction's length */
	uint8_t armed_kind, armed_len;	/* its trampoline's, while armed */
	uint8_t stale;			/* retired: its code went away */
	uint8_t gpr;			/* PK_PROBE_F_GPR_ONLY */
	uint8_t ret_entry;		/* a return probe's: misses told to it */
	uint8_t code[PK_TEXT_MAX];	/* the displaced bytes, as placed */
};

/*
 * @p's handler did not run in a hit: counted, and told to its return probe
 * if it is one's entry probe. Inlined into the PK_NOPROBE dispatcher.
 */
static inline __attribute__((always_inline)) void probe_miss(struct pk_probe *p)
{
	__atomic_add_fetch(&p->missed, 1, __ATOMIC_RELAXED);
	if (p->ret_entry)
		pk_ret_entry_missed(p->ctx);
}

_Static_assert(offsetof(struct tramp, gpr) == 0, "the stubs' owner byte");

/*
 * probe_lock guards:
 *   - the trampolines' index (thash, each tramp's ->next) and the chunks
 *     (chunk.c's slots and list);
 *   - every probe's ->t, ->next, ->seq and writes of ->armed, link_seq,
 *     and every change to a trampoline's probe list (the dispatcher walks
 *     it without the lock: links are published with release, and nothing
 *     unlinked is freed before a sweep; see apply_unregister());
 *   - the code bytes of every probe site: only this file patches them,
 *     always under the lock;
 *   - the sweeps (sweep.c's callers must serialise them) and the list of
 *     code they count as busy.
 * It is held across pk_batch_commit(), pk_text_fill() and
 * pk_trap_register()/pk_trap_unregister(): the text and fault layers'
 * locks are taken inside it, never the reverse; ret.c's ret_lock is taken
 * outside it (internal.h's lock order). No hit path takes it.
 */
static pthread_mutex_t probe_lock = PTHREAD_MUTEX_INITIALIZER;
#define THASH 4096
static struct tramp *thash[THASH];	/* by address */
static unsigned long link_seq;		/* 0 = never linked */
static void probes_lock(void);
static void sites_check(struct pk_probe *const *probes, size_t n,
			uintptr_t lo, uintptr_t hi);

/* What this thread is in, for the API's re-entry test (probe.h). */
__thread struct pk_probe_self pk_probe_self
	__attribute__((tls_model("initial-exec")));

/* This thread's divert request (probe.h); read by the chunks' code. */
__thread struct pk_probe_divert pk_probe_divert_req
	__attribute__((tls_model("initial-exec")));

/*
 * This thread's handler depth and the slot whose handlers it runs are in
 * pk_sweep_self (sweep.h): thread-local, so no shared cache line is written
 * on a hit, which a per-probe in-flight counter would do (the hit cost must
 * not grow with threads), and unlike urcu-bp nothing registers a thread
 * under a mutex on its first hit (a hit may come from a signal handler).
 *
 * Pre- and post-handlers pair up: a slot with post-handlers runs the
 * post-handler only of the probes whose pre-handler pass it ran, though
 * probes are linked and unlinked in between. The pre-handler pass leaves
 * its trampoline and the newest link it saw here; the post-handler pass
 * calls probes linked no later. A signal handler that runs such a slot
 * between the two (it overwrites them) costs the outer post-handlers:
 * counted as missed.
 */
static __thread const struct tramp *pre_tramp
	__attribute__((tls_model("initial-exec")));
static __thread unsigned long pre_seq
	__attribute__((tls_model("initial-exec")));

/* ---------------------------------------------------------- dispatcher */

PK_NOPROBE void pk_probe_dispatch(struct pk_regs *r, uintptr_t gpr);
PK_NOPROBE void pk_probe_dispatch_full(struct pk_regs *r, uintptr_t gpr);

/*
 * The handlers of the trampoline whose slot @r's return address is in:
 * pre-handlers, or (@post) post-handlers; with @gpr (the stub saved no
 * vector state) only those of probes with PK_PROBE_F_GPR_ONLY.
 */
static inline __attribute__((always_inline)) void
dispatch(struct pk_regs *r, const struct tramp *t, int post, uintptr_t gpr)
{
	unsigned long d = pk_sweep_self.depth, seen = 0, upto = ULONG_MAX;
	int lost = 0, late = 0;
	struct pk_probe *p;

	pk_sweep_self.depth = d + 1;
	/* The sweep handler runs on this thread: order against it only. */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (!d) {
		pk_sweep_self.slot = &t->slot;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
	}
	r->ip = post ? t->addr + t->first_len : t->addr;
	if (post && !d) {
		/* Only probes our pre-handler pass saw (see pre_tramp). */
		lost = pre_tramp != t;
		upto = lost ? 0 : pre_seq;
	}
	/*
	 * Pairs with the release stores in link_probe() and unlink_probe().
	 */
	for (p = __atomic_load_n(&t->probes, __ATOMIC_ACQUIRE); p;
	     p = __atomic_load_n(&p->next, __ATOMIC_ACQUIRE)) {
		pk_probe_handler_fn fn = post ? p->post : p->pre;

		if (d) {
			if (!post)
				probe_miss(p);
		} else if (p->seq > upto) {
			if (fn && lost)
				probe_miss(p);
		} else if (late || (gpr && !post && !p->gpr)) {
			/*
			 * An unflagged probe in a hit without the vector save
			 * was linked after the hit read the slot's byte, and so
			 * was every probe after it (appended): the hit is one
			 * from before they came, for their post-handlers too
			 * (pre_seq stays before them).
			 */
			late = 1;
			if (fn)
				probe_miss(p);
		} else {
			seen = p->seq;
			if (fn && gpr && !p->gpr)
				probe_miss(p);
			else if (fn)
				fn(p, r, p->ctx);
		}
	}
	if (!d && t->post) {
		pre_tramp = post ? NULL : t;
		pre_seq = seen;
	}
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (!d) {
		pk_sweep_self.slot = NULL;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
	}
	pk_sweep_self.depth = d;
}

static PK_NOPROBE_INLINE const struct tramp *tramp_of(uintptr_t ret)
{
	return *(struct tramp *const *)(ret & ~(uintptr_t)(PK_TRAMP_SLOT_SIZE - 1));
}

/* dispatch(), out of line: pk_probe_dispatch()'s general case. */
PK_NOPROBE static __attribute__((noinline)) void
dispatch_pre(struct pk_regs *r, const struct tramp *t, uintptr_t gpr)
{
	dispatch(r, t, 0, gpr);
}

/*
 * The fast stub's (and its twin's, which passes the tramp as @gpr):
 * pre-handlers at a function's entry; flags are not restored. The usual
 * hit (t->fast: one probe, no post-handler; not inside another handler)
 * is dispatch() with nothing live across the handler's call but what it
 * reloads: no callee-saved register to save and restore, where dispatch()
 * keeps six. Which probes a hit calls is the same: those linked when it
 * reads the list. t->fast is cleared before a second probe is linked
 * (appended: the head stays) and before an unlink, and set after either
 * leaves one; a hit that read it set calls the list's head only, which is
 * the list then, or was a moment before (a probe linked while the handler
 * runs waits for the next hit, as one linked just after would).
 */
PK_NOPROBE void pk_probe_dispatch(struct pk_regs *r, uintptr_t gpr)
{
	const struct tramp *t = gpr ? (const struct tramp *)gpr :
				tramp_of(r->pk_private_ret);
	struct pk_probe *p = NULL;
	pk_probe_handler_fn fn;

	/* Pairs with the release stores in link_probe() and unlink_probe(). */
	/* Acquire: the list as it was when fast was set (tramp_fast()). */
	if (__atomic_load_n(&t->fast, __ATOMIC_ACQUIRE))
		p = __atomic_load_n(&t->probes, __ATOMIC_ACQUIRE);
	if (!p || pk_sweep_self.depth || (gpr && !p->gpr)) {
		dispatch_pre(r, t, gpr);
		return;
	}
	/* dispatch()'s steps for d == 0, in its order. */
	pk_sweep_self.depth = 1;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	pk_sweep_self.slot = &t->slot;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	r->ip = t->addr;
	fn = p->pre;
	if (fn)
		fn(p, r, p->ctx);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	pk_sweep_self.slot = NULL;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	pk_sweep_self.depth = 0;
}

/*
 * The full stub's: pre-handlers inside a function, or post-handlers (called
 * from further into the slot than PK_TRAMP_SLOT_RET); the flags are
 * restored, of which handlers may change PK_ARCH_USER_FLAGS only.
 */
PK_NOPROBE void pk_probe_dispatch_full(struct pk_regs *r, uintptr_t gpr)
{
	uintptr_t ret = r->pk_private_ret;
	uint64_t flags = r->flags;

	dispatch(r, tramp_of(ret), (ret & (PK_TRAMP_SLOT_SIZE - 1)) != PK_TRAMP_SLOT_RET,
		 gpr);
	r->flags = (r->flags & PK_ARCH_USER_FLAGS) | (flags & ~PK_ARCH_USER_FLAGS);
}

/*
 * An int3 probe's SIGTRAP (the fault layer's trap chain, by address): on to
 * the trampoline, which calls the handlers and runs the instruction.
 */
PK_NOPROBE static int probe_trap(const struct pk_fault *f, void *ctx)
{
	const struct tramp *t = ctx;

	pk_arch_set_pc(f->ucontext, t->slot + PK_TRAMP_SLOT_ENTRY);
	return PK_FAULT_HANDLED;
}

/* ----------------------------------------------------------------- fork */

/*
 * fork(): probe_lock first (it is held around text commits and trap-chain
 * registrations, and sweeps).
 */
static void probe_fork_prepare(void)
{
	pthread_mutex_lock(&probe_lock);
}

static void probe_fork_parent(void)
{
	pthread_mutex_unlock(&probe_lock);
}

PK_ATFORK(probe, PK_RANK_PROBE, probe_fork_prepare, probe_fork_parent,
	  probe_fork_parent);

/* ------------------------------------------------------------ re-entry */

/*
 * A probe API call on a thread already inside one (a signal handler
 * interrupted it: it may hold probe_lock or ret_lock, or be in malloc), or
 * inside a probe handler or a return handler (unregister would wait for
 * that handler, that is for itself, or free the trampoline it runs in) is
 * refused before any lock is taken: -EDEADLK, nothing changed. Like the
 * chain and fault layers' tests, by this thread's own state only.
 */
int pk_probe_api_enter(void)
{
	if (pk_probe_self.api || pk_probe_self.ret || pk_sweep_self.depth)
		return -EDEADLK;
	pk_probe_self.api = 1;
	/* A signal handler on this thread reads it: order against it only. */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	return 0;
}

void pk_probe_api_leave(void)
{
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	pk_probe_self.api = 0;
}

/* ----------------------------------------------------------- divert */

int pk_probe_divert_region(uintptr_t lo, size_t len)
{
	struct pk_sweep_code *c = malloc(sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->lo = lo;
	c->hi = lo + len;
	pthread_mutex_lock(&probe_lock);
	pk_sweep_busy_code(c);
	pthread_mutex_unlock(&probe_lock);
	return 0;
}

/* ------------------------------------------------------------- placing */

static size_t thash_of(uintptr_t addr)
{
	return (addr ^ addr >> 12 ^ addr >> 24) & (THASH - 1);
}

static struct tramp *tramp_find(uintptr_t addr)
{
	for (struct tramp *t = thash[thash_of(addr)]; t; t = t->next)
		if (t->addr == addr)
			return t;
	return NULL;
}

/*
 * The indexed trampolines whose sites overlap [@lo, @hi), in address
 * order: the first after @prev (NULL: the first of all), or NULL: no more.
 */
static struct tramp *tramp_over(const struct tramp *prev, uintptr_t lo,
				uintptr_t hi)
{
	/* No site is longer than PK_TEXT_MAX. */
	uintptr_t a = prev ? prev->addr + 1 : lo - PK_TEXT_MAX + 1;

	pk_assert_held(&probe_lock);
	for (; a < hi; a++) {
		struct tramp *t = tramp_find(a);

		if (t && a + t->len > lo)
			return t;
	}
	return NULL;
}

/* The @size bytes at @start as they were before any probe was armed there. */
static void orig_code(uintptr_t start, size_t size, uint8_t *buf)
{
	const struct tramp *t = NULL;

	memcpy(buf, (const void *)start, size);
	while ((t = tramp_over(t, start, start + size)))
		for (size_t i = 0; i < t->len; i++)
			if (t->addr + i >= start && t->addr + i < start + size)
				buf[t->addr + i - start] = t->old[i];
}

/*
 * Where @p goes and which kind it is (place.c), from the original bytes
 * of the function that starts at p->func.
 */
static int place(struct pk_probe *p, const char *what, size_t offset,
		 int force_int3)
{
	struct pk_probe_place pl;
	struct pk_func fn;
	uint8_t *code;
	size_t avail;
	int err = pk_sym_func_at(p->func, &fn);

	if (err || fn.start != p->func) {
		pk_err("probe: %s (%#" PRIxPTR ") is not the start of a function "
		       "with a size in a symbol table", what, p->func);
		return -EINVAL;
	}
	if (pk_probe_in_noprobe(fn.start, fn.size) || pk_chunk_contains(fn.start)) {
		pk_err("probe: %s is probekit's own trap path or a trampoline", what);
		return -EINVAL;
	}
	err = pk_probe_sigpath_check(fn.start, fn.size, what);
	if (err)
		return err;	/* -EPERM: src/probe/noprobe.c */
	if (offset >= fn.size) {
		pk_err("probe: %s: offset %zu is past the function's end (%zu "
		       "bytes)", what, offset, fn.size);
		return -EINVAL;
	}
	/* With the padding after it, where a jump may reach (place.c). */
	avail = fn.size + pk_probe_tail(&fn);
	code = malloc(avail);
	if (!code)
		return -ENOMEM;
	probes_lock();	/* no stale trampoline's bytes in orig_code() */
	sites_check(NULL, 0, fn.start, fn.start + fn.size);
	orig_code(fn.start, avail, code);
	pthread_mutex_unlock(&probe_lock);
	err = pk_probe_place(&fn, code, avail, offset, p->post != NULL,
			     force_int3, what, &pl);
	if (!err)
		memcpy(p->code, code + (pl.addr - fn.start), pl.len);
	free(code);
	if (err)
		return err;
	p->addr = pl.addr;
	p->len = pl.len;
	p->first_len = pl.first_len;
	p->kind = pl.kind;
	p->reason = pl.reason;
	p->full = pl.full;
	return 0;
}

/* An option, or 0 when @o is too short to hold it. */
#define OPT(o, f) PK_OPT(o, struct pk_probe_opts, f)

int pk_probe_create_in(const struct pk_probe_opts *opts, struct pk_probe **out)
{
	struct pk_probe *p;
	char what[300];
	int err;

	if (!opts || !out || opts->sz < offsetof(struct pk_probe_opts, ctx))
		return -EINVAL;
	err = pk_opts_check(opts, opts->sz, sizeof(*opts));
	if (err)
		return err;
	if (!opts->symbol == !opts->addr ||
	    (OPT(opts, flags) & ~(PK_PROBE_F_INT3 | PK_PROBE_F_GPR_ONLY)))
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->pre = opts->pre;
	p->ctx = OPT(opts, ctx);
	p->post = OPT(opts, post);
	p->gpr = !!(OPT(opts, flags) & PK_PROBE_F_GPR_ONLY);
	if (opts->symbol) {
		struct pk_sym s;

		err = pk_sym_lookup(opts->symbol, &s);
		if (err) {
			free(p);
			return err;
		}
		p->func = s.addr;
		snprintf(what, sizeof(what), "\"%s\"%s%.200s%s", opts->symbol,
			 s.impl[0] ? " (IFUNC: " : "", s.impl,
			 s.impl[0] ? ")" : "");
	} else {
		p->func = (uintptr_t)opts->addr;
		snprintf(what, sizeof(what), "%p", opts->addr);
	}
	if (OPT(opts, offset))
		snprintf(what + strlen(what), sizeof(what) - strlen(what),
			 "+%zu", OPT(opts, offset));
	err = place(p, what, OPT(opts, offset), !!(OPT(opts, flags) & PK_PROBE_F_INT3));
	if (err) {
		free(p);
		return err;
	}
	*out = p;
	return 0;
}

/* ------------------------------------------------------- register/remove */

static void tramp_hash(struct tramp *t)
{
	t->next = thash[thash_of(t->addr)];
	thash[thash_of(t->addr)] = t;
}

static void tramp_unhash(struct tramp *t)
{
	struct tramp **tp = &thash[thash_of(t->addr)];

	while (*tp != t)
		tp = &(*tp)->next;
	*tp = t->next;
}

/* What the site holds armed: the jmp, or int3 on the instruction. */
static void site_bytes(const struct tramp *t, uint8_t *b)
{
	if (t->kind == PK_PROBE_INT3) {
		memcpy(b, t->old, t->len);
		b[0] = PK_ARCH_TRAP_BYTE;
	} else {
		/* A thread between the NOPs and the jmp runs on into the jmp. */
		pk_arch_encode_jmp_site(b, t->len, t->addr,
					t->slot + PK_TRAMP_SLOT_ENTRY);
	}
}

/*
 * Where a thread that traps on @t's site while the original bytes come back
 * (disarming, or a failed arming rolled back) runs them: the slot's copy;
 * with post-handlers, whose call sits inside that copy, the whole slot, so
 * that a post-handler never runs without its pre-handler.
 */
static uintptr_t slot_orig(const struct tramp *t)
{
	return t->slot + (t->post ? PK_TRAMP_SLOT_ENTRY : PK_TRAMP_SLOT_COPY);
}

/* Fill @t's slot (see the top of this file) in @slot. */
static int slot_code(struct tramp *t, uint8_t *slot)
{
	struct pk_tramp_slot s = {
		.at = t->slot, .head = pk_chunk_head(t->chunk), .owner = t,
		.addr = t->addr, .code = t->old, .len = t->len,
		.first_len = t->first_len, .int3 = t->kind == PK_PROBE_INT3,
		.post = t->post, .full = t->full, .gpr = t->twin,
	};
	struct pk_reloc_map map;
	int err = pk_arch_tramp_slot(slot, &s, &map);

	if (err)
		return err;
	if (map.n > PK_SWEEP_MAP)
		return -E2BIG;
	t->map.n = (uint8_t)map.n;
	memcpy(t->map.src, map.src, map.n);
	memcpy(t->map.dst, map.dst, map.n);
	return 0;
}

/*
 * A new trampoline for @p's address, where the original code still is;
 * its slot's code in @code, which fill_slots() writes (unreachable until
 * the commit, so any time before it).
 */
static int tramp_build(struct pk_probe *p, struct tramp **out, uint8_t *code)
{
	const struct pk_tramp_env env = {
		.dispatch = (uintptr_t)pk_probe_dispatch,
		.dispatch_full = (uintptr_t)pk_probe_dispatch_full,
		.divert_sp = &pk_probe_divert_req.sp,
		.divert_to = &pk_probe_divert_req.to,
		.divert_cont = &pk_probe_divert_req.cont,
	};
	struct tramp *t = calloc(1, sizeof(*t));
	int err;

	if (!t)
		return -ENOMEM;
	t->addr = p->addr;
	t->len = p->len;
	t->kind = p->kind;
	t->post = p->post != NULL;
	t->full = p->full;
	t->first_len = p->first_len;
	t->twin = p->gpr;
	t->gpr = p->gpr;	/* link_probe() clears it for each probe without */
	memcpy(t->old, (const void *)p->addr, p->len);
	err = pk_chunk_slot_alloc(p->addr, &env, &t->chunk, &t->slot);
	if (err) {
		free(t);
		return err;
	}
	if (slot_code(t, code)) {
		pk_chunk_slot_free(t->chunk, t->slot);
		free(t);
		return -ENOTSUP;
	}
	*out = t;
	return 0;
}

/* An int3 trampoline's entry on the trap chain, which its SIGTRAP finds. */
static int tramp_trap(struct tramp *t)
{
	int err;

	if (t->kind != PK_PROBE_INT3)
		return 0;
	err = pk_trap_register((void *)t->addr, probe_trap, t);
	if (err) {
		pk_err("probe: %#" PRIxPTR ": cannot add the int3 probe to "
		       "the trap chain (%d)", t->addr, err);
		return err == -EEXIST ? -EBUSY : err;
	}
	t->trapped = 1;
	return 0;
}

/* Free a trampoline no thread can be in any more. */
static void tramp_free(struct tramp *t)
{
	if (t->trapped)
		pk_trap_unregister((void *)t->addr);
	pk_chunk_slot_free(t->chunk, t->slot);
	free(t);
}

/* An indexed trampoline overlapping [addr, addr+len) but not at @addr. */
static struct tramp *tramp_overlap(uintptr_t addr, size_t len)
{
	struct tramp *t = NULL;

	while ((t = tramp_over(t, addr, addr + len)))
		if (t->addr != addr)
			return t;
	return NULL;
}

/*
 * Wait until no thread is in the slots at @slots (trampolines going, or
 * whose probe lists changed; sorted in place) or in their handlers, then
 * free the trampolines @ts.
 */
static void retire(struct tramp **ts, size_t n, uintptr_t *slots,
		   size_t nslots)
{
	if (pk_sweep_wait(slots, nslots)) {
		pk_warn("probe: %zu trampoline(s) kept forever: a thread may "
			"still be inside", n);
		return;
	}
	for (size_t i = 0; i < n; i++)
		tramp_free(ts[i]);
}

/* ------------------------------------------------------------- unloads */

/*
 * Code that goes away (dlclose() unloading an object, or munmap()) takes
 * its probe sites with it: a trampoline whose site is gone must not be
 * restored (the range may be unmapped, or hold a new copy of the object
 * or another one), nor shared by a probe on new code at its address.
 *
 * dlclose(): every API call that takes probe_lock looks first
 * (probes_lock()): when the dynamic linker's count of unloads
 * (dl_iterate_phdr()'s dlpi_subs, read before the lock:
 * dl_iterate_phdr() takes the loader's lock) moved since the last look,
 * each trampoline whose site is no longer mapped readable and
 * executable, or no longer holds the bytes arming wrote, is retired:
 * unindexed, its probes marked stale (not armed; register and unregister
 * say -ESTALE, destroy frees them), freed after a sweep wait since a
 * thread may still run its handlers. No code is written.
 *
 * A plain munmap() (or mmap(MAP_FIXED) over the code) does not move
 * dlpi_subs and is not noticed then: as kprobes wants a module's probes
 * unregistered before it goes, so here the caller's. What is checked is
 * each trampoline a call is about to use (sites_check(): the sites an
 * unregister restores, those a register joins or overlaps, those in a
 * function pk_probe_create() reads), by the same test: a probe whose
 * code was unmapped is retired then, -ESTALE, nothing written. Until
 * then it still says armed. Registering checks a site against the bytes
 * the probe was created on (site_check()) either way.
 *
 * Why dlpi_subs and not interposing dlclose(): no symbol outside the ABI
 * (scripts/check-abi.sh), and whoever calls dlclose() (a library bound to
 * libc's directly) is seen; one dl_iterate_phdr() per call costs about 40
 * ns here (it stops at the first object). The price: pk_probe_get_info()
 * says armed until the next API call notices.
 */
static unsigned long long unload_seen;	/* under probe_lock */

static int subs_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	if (size >= offsetof(struct dl_phdr_info, dlpi_subs) +
		    sizeof(info->dlpi_subs))
		*(unsigned long long *)arg = info->dlpi_subs;
	return 1;	/* the first object says it */
}

/*
 * Whether [@addr, @addr + @len) is all mapped readable and executable: 1;
 * 0 if a byte of it is not mapped executable (the code went away);
 * -EACCES if it is, but not readable (execute-only: memcmp() there would
 * fault); another -errno if the mappings cannot be read (cannot tell).
 */
static int code_mapped(struct pk_maps *ms, uintptr_t addr, size_t len)
{
	struct pk_mapinfo mi;

	for (uintptr_t a = addr; a < addr + len; a = mi.hi) {
		int err = pk_maps_find(ms, a, &mi);

		if (err == -ENOENT)
			return 0;
		if (err)
			return err;
		if (!(mi.prot & PROT_EXEC))
			return 0;
		if (!(mi.prot & PROT_READ))
			return -EACCES;
	}
	return 1;
}

/* Whether @t's site still holds what arming wrote, in mapped code. */
static int tramp_site_ok(const struct tramp *t, struct pk_maps *ms)
{
	uint8_t armed[PK_TEXT_MAX];
	int ok = code_mapped(ms, t->addr, t->len);

	if (ok <= 0)
		return ok != 0;	/* gone; or cannot tell: look again next time */
	site_bytes(t, armed);
	return !memcmp((const void *)t->addr, armed, t->len);
}

/* Trampolines whose code went away, to retire. */
struct gone {
	struct tramp **ts;
	uintptr_t *slots;
	size_t n, cap;
};

static int gone_add(struct gone *g, struct tramp *t)
{
	if (g->n == g->cap) {
		size_t c2 = g->cap ? 2 * g->cap : 8;
		struct tramp **t2 = realloc(g->ts, c2 * sizeof(*t2));
		uintptr_t *s2 = t2 ? realloc(g->slots, c2 * sizeof(*s2)) : NULL;

		if (t2)
			g->ts = t2;
		if (!s2)
			return -ENOMEM;
		g->slots = s2;
		g->cap = c2;
	}
	g->ts[g->n] = t;
	g->slots[g->n++] = t->slot;
	return 0;
}

/*
 * Retire what @g holds: unindexed, its probes stale, freed after a wait.
 * No code is written. probe_lock held.
 */
static void gone_retire(struct gone *g)
{
	for (size_t i = 0; i < g->n; i++) {
		size_t k = 0;

		tramp_unhash(g->ts[i]);
		/*
		 * ->next stays as it is: threads still in the handlers walk
		 * it until the wait. A stale probe is never linked again.
		 */
		for (struct pk_probe *p = g->ts[i]->probes; p; p = p->next, k++) {
			p->t = NULL;
			__atomic_store_n(&p->stale, 1, __ATOMIC_RELAXED);
			__atomic_store_n(&p->armed, 0, __ATOMIC_RELEASE);
		}
		pk_warn("probe: %#" PRIxPTR ": the probed code went away "
			"(object unloaded or unmapped?); %zu probe(s) retired",
			g->ts[i]->addr, k);
	}
	if (g->n)
		retire(g->ts, g->n, g->slots, g->n);
}

static void gone_free(struct gone *g)
{
	free(g->ts);
	free(g->slots);
}

/* Retire the trampolines whose code went away. probe_lock held. */
static void unload_check(unsigned long long subs)
{
	struct pk_maps ms = PK_MAPS_INIT;
	struct gone g = { 0 };
	struct tramp *t;
	int err;

	pk_assert_held(&probe_lock);
	if (subs == unload_seen)
		return;
	err = pk_maps_open(&ms, 0);
	for (size_t h = 0; h < THASH && !err; h++)
		for (t = thash[h]; t && !err; t = t->next)
			if (!tramp_site_ok(t, &ms))
				err = gone_add(&g, t);
	pk_maps_close(&ms);
	if (!err) {
		unload_seen = subs;
		gone_retire(&g);
	}			/* else look again on the next call */
	gone_free(&g);
}

/* Add to @g each trampoline over [@lo, @hi) whose site went away. */
static int range_gone(struct gone *g, struct pk_maps *ms, int *open,
		      uintptr_t lo, uintptr_t hi)
{
	struct tramp *t = NULL;
	int err = 0;

	while (!err && (t = tramp_over(t, lo, hi))) {
		size_t j;

		for (j = 0; j < g->n && g->ts[j] != t; j++)
			;
		if (j < g->n)
			continue;
		if (!*open) {
			err = pk_maps_open(ms, 0);
			if (err)
				break;
			*open = 1;
		}
		if (!tramp_site_ok(t, ms))
			err = gone_add(g, t);
	}
	return err;
}

/*
 * Whatever the dynamic linker says, the trampolines a call is about to
 * use are looked at: those over the sites of @probes (@n of them; each
 * armed one's, each other's as placed), else over [@lo, @hi) (creating:
 * the function read). Code munmap()ed or mapped over behind the linker's
 * back is then neither written to, nor joined, nor read as if our bytes
 * were still there; what is retired makes check_set() say -ESTALE.
 * probe_lock held.
 */
static void sites_check(struct pk_probe *const *probes, size_t n,
			uintptr_t lo, uintptr_t hi)
{
	struct pk_maps ms = PK_MAPS_INIT;
	struct gone g = { 0 };
	int err = 0, open = 0;

	pk_assert_held(&probe_lock);
	if (!probes)
		err = range_gone(&g, &ms, &open, lo, hi);
	for (size_t i = 0; probes && i < n && !err; i++) {
		const struct pk_probe *p = probes[i];

		if (!p || __atomic_load_n(&p->stale, __ATOMIC_RELAXED))
			continue;
		if (p->armed && p->t)
			err = range_gone(&g, &ms, &open, p->t->addr,
					 p->t->addr + p->t->len);
		else if (!p->armed)
			err = range_gone(&g, &ms, &open, p->addr,
					 p->addr + p->len);
	}
	pk_maps_close(&ms);
	if (!err)
		gone_retire(&g);	/* else: as before the check */
	gone_free(&g);
}

/* Take probe_lock, after retiring what unloads left behind. */
static void probes_lock(void)
{
	unsigned long long subs = 0;

	dl_iterate_phdr(subs_cb, &subs);
	pthread_mutex_lock(&probe_lock);
	unload_check(subs);
}

/*
 * One pk_probe_register() or pk_probe_unregister() call, with probe_lock
 * held from the plan to the end:
 *
 *   plan   check every probe and work out every change, changing nothing
 *          another thread can see: the trampolines that come (built in
 *          free slots and indexed, unreachable until the commit) or go,
 *          their sites' bytes (one text batch), the jump sites whose
 *          threads the commit moves, the slots to wait out afterwards.
 *   apply  trap entries for new int3 probes, the one commit, then link or
 *          unlink the probes and retire what goes. Nothing fails after
 *          the commit.
 *   undo   on any failure, in one place: what the plan built goes, after a
 *          wait for threads if a commit (failed, rolled back) let them in.
 *          An unregister has nothing to undo: its commit failed whole.
 */
struct change {
	struct pk_probe *const *probes;
	size_t n;
	int arming;
	struct pk_probe **sorted;	/* @probes, to check the set */
	struct tramp **at;		/* arming: each probe's trampoline */
	struct tramp **tramps;		/* built (arming) or going */
	size_t ntramps;
	uint8_t *code;			/* arming: tramps[i]'s slot code at
					   i * PK_TRAMP_SLOT_SIZE */
	struct pk_sweep_site *sites;	/* jump sites the commit changes */
	size_t nsites;
	uintptr_t *slots;		/* slots to wait out (arming: the new
					   ones, if the commit fails) */
	size_t nslots;
	struct pk_batch *batch;
	int committed;			/* the commit ran, and failed */
	struct pk_maps maps;		/* arming: where new sites are */
	int maps_open;			/* 1: open, -1: could not be */
};

static int change_init(struct change *c, struct pk_probe *const *probes,
		       size_t n, int arming)
{
	memset(c, 0, sizeof(*c));
	c->maps = (struct pk_maps)PK_MAPS_INIT;
	c->probes = probes;
	c->n = n;
	c->arming = arming;
	c->sorted = calloc(n, sizeof(*c->sorted));
	c->at = arming ? calloc(n, sizeof(*c->at)) : NULL;
	c->code = arming ? malloc(n * PK_TRAMP_SLOT_SIZE) : NULL;
	c->tramps = calloc(n, sizeof(*c->tramps));
	c->sites = calloc(n, sizeof(*c->sites));
	c->slots = calloc(n, sizeof(*c->slots));
	if (!c->sorted || (arming && (!c->at || !c->code)) || !c->tramps ||
	    !c->sites ||
	    !c->slots || pk_batch_create(&c->batch))
		return -ENOMEM;
	return 0;
}

static void change_fini(struct change *c)
{
	pk_maps_close(&c->maps);
	pk_batch_free(c->batch);
	free(c->sorted);
	free(c->at);
	free(c->code);
	free(c->tramps);
	free(c->sites);
	free(c->slots);
}

static int addr_order(const void *a, const void *b)
{
	return pk_probe_addr_order((uintptr_t)a, (uintptr_t)b);
}

static int by_addr_cmp(const void *a, const void *b)
{
	return addr_order(*(void *const *)a, *(void *const *)b);
}

/* By trampoline, then by address: a trampoline's probes are adjacent. */
static int by_tramp_cmp(const void *a, const void *b)
{
	const struct pk_probe *x = *(struct pk_probe *const *)a,
			      *y = *(struct pk_probe *const *)b;
	int d = addr_order(x->t, y->t);

	return d ? d : addr_order(x, y);
}

/*
 * Every probe of the call there, not armed (arming) or armed, and listed
 * once. Leaves them in c->sorted: by address, or (disarming) grouped by
 * trampoline.
 */
static int check_set(struct change *c)
{
	for (size_t i = 0; i < c->n; i++) {
		struct pk_probe *p = c->probes[i];

		if (!p)
			return -EINVAL;
		if (__atomic_load_n(&p->stale, __ATOMIC_RELAXED))
			return -ESTALE;
		if (!p->armed != !!c->arming)
			return -EINVAL;
		c->sorted[i] = p;
	}
	qsort(c->sorted, c->n, sizeof(*c->sorted),
	      c->arming ? by_addr_cmp : by_tramp_cmp);
	for (size_t i = 1; i < c->n; i++)
		if (c->sorted[i] == c->sorted[i - 1])
			return -EINVAL;
	return 0;
}

/* Add @t's site to the batch, armed (@arming) or restored. */
static int plan_site(struct change *c, struct tramp *t)
{
	uint8_t armed[PK_TEXT_MAX];
	uintptr_t via_armed = t->kind == PK_PROBE_INT3 ?
		t->slot + PK_TRAMP_SLOT_ENTRY : 0;
	int err;

	site_bytes(t, armed);
	/*
	 * A thread that traps on the site while the old bytes are back (a
	 * failed arming rolled back, or disarming) runs the slot's copy (see
	 * slot_orig()); an int3 (which need not decode) is run as when armed.
	 */
	if (c->arming)
		err = pk_batch_add_via(c->batch, (void *)t->addr, armed, t->len,
				       t->old, PK_TEXT_F_MERGE, via_armed,
				       slot_orig(t));
	else
		err = pk_batch_add_via(c->batch, (void *)t->addr, t->old, t->len,
				       armed, PK_TEXT_F_MERGE, slot_orig(t),
				       via_armed);
	if (err)
		return err;
	/* An int3 replaces no boundary: no thread to move. */
	if (t->kind == PK_PROBE_JUMP)
		c->sites[c->nsites++] = (struct pk_sweep_site){
			t->addr, t->slot, &t->map, t->len, (uint8_t)c->arming };
	return 0;
}

/*
 * @p's site still holds the code it was placed on: mapped readable and
 * executable, with (under any armed trampoline's bytes) the bytes it had
 * at pk_probe_create(). Checked for a new trampoline and for one @p joins
 * (armed by another probe, maybe on another object loaded where @p's
 * was). Else the object was unloaded since (or the code changed under
 * us): @p goes stale, -ESTALE, and nothing is written there. -EACCES if
 * the code is mapped execute-only (it cannot be compared).
 */
static int site_check(struct change *c, struct pk_probe *p)
{
	uint8_t now[PK_TEXT_MAX];
	int ok;

	if (!c->maps_open)
		c->maps_open = pk_maps_open(&c->maps, 0) ? -1 : 1;
	if (c->maps_open < 0)
		return 0;	/* cannot tell: as before the check */
	ok = code_mapped(&c->maps, p->addr, p->len);
	if (ok == -EACCES) {
		pk_err("probe: %#" PRIxPTR ": the code is not readable "
		       "(execute-only)", p->addr);
		return -EACCES;
	}
	if (ok < 0)
		return 0;
	if (ok)
		orig_code(p->addr, p->len, now);
	if (!ok || memcmp(now, p->code, p->len)) {
		pk_err("probe: %#" PRIxPTR ": the code it was created on went "
		       "away (object unloaded?)", p->addr);
		__atomic_store_n(&p->stale, 1, __ATOMIC_RELAXED);
		return -ESTALE;
	}
	return 0;
}

/*
 * Arming: each probe joins the trampoline at its address (one this plan
 * built, too) or gets a new one.
 */
static int plan_register(struct change *c)
{
	int err = pk_sweep_init();	/* once per process; never undone */

	for (size_t i = 0; i < c->n && !err; i++) {
		struct pk_probe *p = c->probes[i];
		struct tramp *t = tramp_find(p->addr);

		if (t) {
			/* Several probes on one address share the first's kind. */
			if ((p->kind == PK_PROBE_INT3 && t->kind != PK_PROBE_INT3) ||
			    (p->post && !t->post)) {
				pk_err("probe: %#" PRIxPTR ": the probe there is %s; "
				       "register the one that needs %s first",
				       p->addr, p->post && !t->post ?
				       "without post-handlers" : "a jump probe",
				       p->post && !t->post ? "them" : "an int3");
				return -EBUSY;
			}
			err = site_check(c, p);
			if (err)
				return err;
			c->at[i] = t;
			continue;
		}
		t = tramp_overlap(p->addr, p->len);
		if (t) {
			pk_err("probe: %#" PRIxPTR ": overlaps the probe at %#"
			       PRIxPTR, p->addr, t->addr);
			return -EBUSY;
		}
		err = site_check(c, p);
		if (err)
			return err;
		err = tramp_build(p, &t, c->code + c->ntramps * PK_TRAMP_SLOT_SIZE);
		if (err)
			return err;
		tramp_hash(t);
		c->tramps[c->ntramps++] = t;
		c->slots[c->nslots++] = t->slot;
		c->at[i] = t;
		err = plan_site(c, t);
	}
	return err;
}

/*
 * Disarming: the trampolines whose probes all go, go (their sites are
 * restored); every trampoline that loses a probe is waited out.
 */
static int plan_unregister(struct change *c)
{
	for (size_t i = 0, j; i < c->n; i = j) {
		struct tramp *t = c->sorted[i]->t;
		size_t left = 0;
		int err;

		for (j = i; j < c->n && c->sorted[j]->t == t; j++)
			;
		c->slots[c->nslots++] = t->slot;
		for (const struct pk_probe *q = t->probes; q; q = q->next)
			left++;
		if (left > j - i)
			continue;
		c->tramps[c->ntramps++] = t;
		err = plan_site(c, t);
		if (err)
			return err;
	}
	return 0;
}

/*
 * pk_batch_set_hook(): int3 is on every first byte; move stopped threads.
 * The sweep signals every thread but this one: with none listed now (a
 * process before main(), most of all), no thread is inside a site, and no
 * thread can be made but by this one, which is here; the sweep would list
 * none, after a listing through opendir() whose malloc traps on every
 * probed malloc (an int3 each, 4 us).
 */
static int move_hook(void *arg)
{
	struct change *c = arg;

	if (!pk_sig_other_threads())
		return 0;
	return pk_sweep_move(c->sites, c->nsites);
}

/* The one text batch: 0 or its error (then nothing changed). */
static int commit(struct change *c)
{
	int err;

	if (!c->ntramps)
		return 0;	/* only probes joining or leaving trampolines */
	if (c->nsites)
		pk_batch_set_hook(c->batch, move_hook, c);
	err = pk_batch_commit(c->batch);
	/* -EDEADLK: refused before anything was written (text.c). */
	c->committed = err < 0 && err != -EDEADLK;
	return err < 0 ? err : 0;
}

/* Link at the tail: handlers run in registration order. */
static void link_probe(struct pk_probe *p, struct tramp *t)
{
	struct pk_probe **pp = &t->probes;

	while (*pp)
		pp = &(*pp)->next;
	p->t = t;
	p->next = NULL;
	p->seq = ++link_seq;	/* after every probe linked before */
	/* Hits from now on save the vector state (see the top of this file). */
	if (!p->gpr)
		__atomic_store_n(&t->gpr, 0, __ATOMIC_RELAXED);
	/* Hits from now on walk the list (tramp_fast() after). */
	__atomic_store_n(&t->fast, 0, __ATOMIC_RELAXED);
	/* Pairs with the acquire loads in dispatch(). */
	__atomic_store_n(pp, p, __ATOMIC_RELEASE);
	p->armed_kind = t->kind;
	p->armed_len = t->len;
	/* Pairs with the acquire load in pk_probe_get_info(). */
	__atomic_store_n(&p->armed, 1, __ATOMIC_RELEASE);
}

/* Readers may still walk past @p until the wait that follows. */
static void unlink_probe(struct pk_probe *p)
{
	struct pk_probe **pp = &p->t->probes;

	/* Hits from now on walk the list (tramp_fast() after). */
	__atomic_store_n(&p->t->fast, 0, __ATOMIC_RELAXED);
	while (*pp != p)
		pp = &(*pp)->next;
	/* Pairs with the acquire loads in dispatch(). */
	__atomic_store_n(pp, p->next, __ATOMIC_RELEASE);
}

/* After linking or unlinking: t->fast, one probe linked and no post-handlers. */
static void tramp_fast(struct tramp *t)
{
	const struct pk_probe *p = t->probes;

	__atomic_store_n(&t->fast, !t->post && p && !p->next, __ATOMIC_RELEASE);
}

/*
 * After unlinking: a twin slot whose probes left all have the flag saves
 * no vector state again (a hit that still walks an unlinked probe without
 * it skips that one: the dispatcher's test).
 */
static void tramp_regpr(struct tramp *t)
{
	const struct pk_probe *q;

	if (!t->twin || !t->probes)
		return;
	for (q = t->probes; q && q->gpr; q = q->next)
		;
	if (!q)
		__atomic_store_n(&t->gpr, 1, __ATOMIC_RELAXED);
}

/* A new slot and where its code is in change.code. */
struct slot_at {
	uintptr_t slot;
	size_t i;
};

static int by_slot_cmp(const void *a, const void *b)
{
	const struct slot_at *x = a, *y = b;

	return x->slot < y->slot ? -1 : x->slot > y->slot;
}

/*
 * Write the new trampolines' slots (their code in c->code): one
 * pk_text_fill() per run of adjacent slots (a batch's slots are mostly
 * consecutive in one chunk), not one pwrite() of /proc/self/mem per slot
 * (1.5 us each: 1.5 ms of a 1 000-probe start-up). 0, -ENOMEM or -EPERM.
 */
static int fill_slots(struct change *c)
{
	struct slot_at *order = malloc(c->ntramps * sizeof(*order));
	uint8_t *run = malloc(c->ntramps * PK_TRAMP_SLOT_SIZE);
	int err = 0;

	if (!order || !run) {
		free(order);
		free(run);
		return -ENOMEM;
	}
	for (size_t i = 0; i < c->ntramps; i++)
		order[i] = (struct slot_at){ c->tramps[i]->slot, i };
	qsort(order, c->ntramps, sizeof(*order), by_slot_cmp);
	for (size_t i = 0, j; i < c->ntramps && !err; i = j) {
		for (j = i; j < c->ntramps; j++) {
			if (j > i && order[j].slot != order[j - 1].slot +
						       PK_TRAMP_SLOT_SIZE)
				break;
			memcpy(run + (j - i) * PK_TRAMP_SLOT_SIZE,
			       c->code + order[j].i * PK_TRAMP_SLOT_SIZE,
			       PK_TRAMP_SLOT_SIZE);
		}
		if (pk_text_fill((void *)order[i].slot, run,
				 (j - i) * PK_TRAMP_SLOT_SIZE))
			err = -EPERM;
	}
	free(order);
	free(run);
	return err;
}

static int apply_register(struct change *c)
{
	int err;

	/* The slots' code first: nothing reaches a slot before the commit. */
	if (c->ntramps && (err = fill_slots(c)))
		return err;

	/* Before the int3 exists: its SIGTRAP must find the entry. */
	for (size_t i = 0; i < c->ntramps; i++) {
		err = tramp_trap(c->tramps[i]);
		if (err)
			return err;
	}
	err = commit(c);
	if (err)
		return err;
	for (size_t i = 0; i < c->n; i++)
		link_probe(c->probes[i], c->at[i]);
	for (size_t i = 0; i < c->n; i++)
		tramp_fast(c->at[i]);
	return 0;
}

static int apply_unregister(struct change *c)
{
	int err = commit(c);

	if (err)
		return err;	/* still armed, probes still linked */
	for (size_t i = 0; i < c->n; i++)
		unlink_probe(c->probes[i]);
	for (size_t i = 0; i < c->n; i++) {
		tramp_regpr(c->probes[i]->t);
		tramp_fast(c->probes[i]->t);
	}
	for (size_t i = 0; i < c->ntramps; i++)
		tramp_unhash(c->tramps[i]);
	/* One wait for the whole set: no thread in a handler or a dead slot. */
	retire(c->tramps, c->ntramps, c->slots, c->nslots);
	for (size_t i = 0; i < c->n; i++) {
		c->probes[i]->armed = 0;
		c->probes[i]->t = NULL;
		c->probes[i]->next = NULL;
	}
	return 0;
}

static void undo_register(struct change *c)
{
	for (size_t i = 0; i < c->ntramps; i++)
		tramp_unhash(c->tramps[i]);
	if (c->committed) {
		/* A thread may have trapped into a new slot meanwhile. */
		retire(c->tramps, c->ntramps, c->slots, c->nslots);
		return;
	}
	for (size_t i = 0; i < c->ntramps; i++)
		tramp_free(c->tramps[i]);	/* never reachable */
}

/*
 * Whether the planned commit writes an int3 (src/text/text.c,
 * check_signals()): every new site does (an int3 probe's, or a jump
 * probe's transient one); a restored int3 site does not (its one byte goes
 * back over the int3), a restored jump site does (transient).
 */
static int change_writes_int3(const struct change *c)
{
	if (c->arming)
		return c->ntramps != 0;
	for (size_t i = 0; i < c->ntramps; i++)
		if (c->tramps[i]->kind != PK_PROBE_INT3)
			return 1;
	return 0;
}

/*
 * Before probe_lock, a guess at the same (the probes' kinds, as the caller
 * armed them): whether to wait out a thread that blocks SIGTRAP now.
 */
static int change_may_write_int3(struct pk_probe *const *probes, size_t n,
				 int arming)
{
	if (arming)
		return 1;
	for (size_t i = 0; i < n; i++)
		if (probes[i] && __atomic_load_n(&probes[i]->armed_kind,
						 __ATOMIC_RELAXED) != PK_PROBE_INT3)
			return 1;
	return 0;
}

/* The shape both calls share: plan, apply, undo. */
int pk_probe_change(struct pk_probe *const *probes, size_t n, int arming)
{
	struct change c;
	int err, blocked = 0;

	if (!probes || !n)
		return -EINVAL;
	/*
	 * A thread with SIGTRAP blocked for real (src/sig/): waited out here,
	 * before probe_lock, so that no other call stalls behind the wait
	 * (up to ~2 s); refused after the plan, and before any sweep or
	 * commit, only if the commit writes an int3. The commit checks again,
	 * without sleeping (or with text_lock dropped).
	 */
	if (change_may_write_int3(probes, n, arming))
		blocked = pk_sig_check_blocked(SIGTRAP, "probe",
					       PK_SIG_CHECK_WAIT);
	err = change_init(&c, probes, n, arming);
	if (err) {
		change_fini(&c);
		return err;
	}
	probes_lock();
	sites_check(probes, n, 0, 0);
	err = check_set(&c);
	if (!err)
		err = arming ? plan_register(&c) : plan_unregister(&c);
	if (!err && blocked && change_writes_int3(&c))
		err = blocked;
	if (!err)
		err = arming ? apply_register(&c) : apply_unregister(&c);
	if (err && arming)
		undo_register(&c);
	pthread_mutex_unlock(&probe_lock);
	change_fini(&c);
	return err;
}

int pk_probe_create(const struct pk_probe_opts *opts, struct pk_probe **out)
{
	int err = pk_probe_api_enter();

	if (err)
		return err;
	err = pk_probe_create_in(opts, out);
	pk_probe_api_leave();
	return err;
}

int pk_probe_register(struct pk_probe *const *probes, size_t n)
{
	int err = pk_probe_api_enter();

	if (err)
		return err;
	err = pk_probe_change(probes, n, 1);
	pk_probe_api_leave();
	return err;
}

int pk_probe_unregister(struct pk_probe *const *probes, size_t n)
{
	int err = pk_probe_api_enter();

	if (err)
		return err;
	err = pk_probe_change(probes, n, 0);
	pk_probe_api_leave();
	return err;
}

void pk_probe_destroy_in(struct pk_probe *p)
{
	if (!p)
		return;
	/* A probe found stale meanwhile is disarmed already: freed. */
	if (p->armed && pk_probe_change(&p, 1, 0) && !pk_probe_stale(p)) {
		pk_err("probe: cannot disarm %#" PRIxPTR "; leaking the probe",
		       p->addr);
		return;
	}
	free(p);
}

/* From a handler or a signal handler inside the API: nothing done. */
void pk_probe_destroy(struct pk_probe *p)
{
	if (pk_probe_api_enter())
		return;	/* no log: the interrupted call may hold log_lock */
	pk_probe_destroy_in(p);
	pk_probe_api_leave();
}

int pk_probe_stale(const struct pk_probe *p)
{
	return __atomic_load_n(&p->stale, __ATOMIC_RELAXED);
}

int pk_probe_get_info(const struct pk_probe *p, struct pk_probe_info *info)
{
	struct pk_probe_info cur;

	if (!p || !info || info->sz < offsetof(struct pk_probe_info, armed))
		return -EINVAL;
	memset(&cur, 0, sizeof(cur));
	cur.addr = p->addr;
	cur.func = p->func;
	cur.armed = __atomic_load_n(&p->armed, __ATOMIC_ACQUIRE);
	/* Pairs with the release store of armed in link_probe(). */
	cur.displaced = cur.armed ? p->armed_len : p->len;
	cur.kind = cur.armed ? p->armed_kind : p->kind;
	cur.reason = cur.kind == p->kind ? p->reason : PK_PROBE_WHY_JOINED;
	cur.missed = __atomic_load_n(&p->missed, __ATOMIC_RELAXED);
	/* A slot, its tramp, the probe, and a share of its chunk's stub. */
	cur.bytes = PK_TRAMP_SLOT_SIZE + sizeof(struct tramp) +
		    sizeof(struct pk_probe) + pk_chunk_share();
	cur.sz = info->sz < sizeof(cur) ? info->sz : sizeof(cur);
	memcpy(info, &cur, cur.sz);
	return 0;
}
#if defined(__clang__)
#pragma clang attribute pop
#endif

void pk_probe_set_ret_entry(struct pk_probe *p)
{
	p->ret_entry = 1;
}
