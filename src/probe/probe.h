/* SPDX-License-Identifier: MIT */
/* probe.h - what the probe layer's files share: symbol lookups by address, placing a probe, diverting a call. */
#ifndef PK_PROBE_PROBE_H
#define PK_PROBE_PROBE_H

/*
 * The probe layer's files, each using only those before it (and the
 * layers below, arch for every instruction it writes or reads):
 *
 *   ../sym/   symbols of the loaded objects (pk_sym_lookup, pk_sym_each,
 *             pk_sym_func_at): src/sym/sym.h
 *   place.c   where a probe goes in its function and which kind it is
 *   sweep.c   the thread sweep (sweep.h)
 *   chunk.c   trampoline memory (chunk.h)
 *   probe.c   entry and int3 probes: the dispatcher, trampolines, arming
 *             and disarming in batches; and the divert request below
 *   ret.c     return probes: entry probes that post divert requests
 */

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "arch/arch.h"
#include "internal.h"

/* The function that holds an address, and its object's key-site table. */
struct pk_func {
	uintptr_t start;
	size_t size;
	int table;			/* PK_SYM_DYNSYM or PK_SYM_SYMTAB */
	uintptr_t jump_table;		/* __pk_jump_table in memory, or 0 */
	size_t jump_table_size;
	char object[PATH_MAX];
	char name[256];			/* a symbol's name there, or "" (an FDE) */
};

/*
 * pk_sym_func_at() - the function covering @addr: its symbol (.dynsym,
 * .symtab, the debug file's), else the .eh_frame FDE covering it
 * (table PK_SYM_EH_FRAME, no name); src/sym/sym.c.
 * Return: 0, or -ENOENT (no loaded object or no sized function there).
 */
PK_HIDDEN int pk_sym_func_at(uintptr_t addr, struct pk_func *out);

/* Where a probe goes and which kind it is. */
struct pk_probe_place {
	uintptr_t addr;		/* the probe point */
	uint8_t len;		/* displaced bytes (int3: the instruction's) */
	uint8_t first_len;	/* the probed instruction's length */
	uint8_t kind;		/* enum pk_probe_kind */
	uint8_t reason;		/* enum pk_probe_reason: why that kind */
	uint8_t full;		/* inside the function: flags live */
};

/*
 * pk_probe_tail() - how many bytes after @fn's end (up to PK_TEXT_MAX) lie
 * in the same executable segment of its object: what pk_probe_place() may
 * read of its padding.
 */
PK_HIDDEN size_t pk_probe_tail(const struct pk_func *fn);

/*
 * pk_probe_place() - place a probe @offset bytes into @fn (0: at its
 * entry), with post-handlers if @post, a jump probe where that is safe
 * unless @force_int3. @code: the function's original bytes, and after
 * them the next @avail - fn->size (pk_probe_tail()), as they were before
 * any probe was armed there too. @what names the probe in messages.
 * Return: 0, or -EINVAL (@offset not an instruction boundary, code that
 * does not decode, a static key's site there), -ENOTSUP (an int3 there
 * already, a post-handler after a branch, an instruction that cannot run
 * in a slot).
 */
PK_HIDDEN int pk_probe_place(const struct pk_func *fn, const uint8_t *code,
			     size_t avail, size_t offset, int post, int force_int3,
			     const char *what, struct pk_probe_place *out);

/*
 * Diverting a call (return probes, ret.c, are built on it).
 *
 * A pre-handler of a probe at a function's entry may post its thread's
 * divert request with pk_probe_divert(): when the handlers are done, the
 * thread leaves the trampoline by a jump to @to, with the function's
 * return address popped and, in its place (the word just below the stack
 * pointer), where the function continues (the slot's copy of the
 * displaced instructions, pk_probe_divert_cont()). Code at @to that calls
 * it has the function return there, by a ret the return stack buffer
 * predicts. @to must lie in code declared with pk_probe_divert_region():
 * the sweep waits for threads there, on their way into a slot.
 *
 * One request per thread. It names its hit by the stub's return-address
 * word, so only that hit's stub takes it (tramp.h's "divert"); until then
 * it is pending, also for a signal handler's probe hits that interrupt the
 * thread in between. Taken, it stays as it is until the next post. Only
 * this thread reads and writes it (the generated code through the thread
 * pointer): signal fences order it.
 */
struct pk_probe_divert {
	uintptr_t sp;	/* the hit's stub return-address word, | 1 once
			   taken; 0: never posted */
	uintptr_t to;
	uintptr_t cont;
};
PK_HIDDEN extern __thread struct pk_probe_divert pk_probe_divert_req
	__attribute__((tls_model("initial-exec")));

/*
 * Where the function probed by @r's hit continues: what the code at a
 * divert's @to calls. Only in a pre-handler at a function's entry.
 */
static PK_NOPROBE_INLINE uintptr_t
pk_probe_divert_cont(const struct pk_regs *r)
{
	return r->pk_private_ret + PK_TRAMP_SLOT_COPY - PK_TRAMP_SLOT_RET;
}

/* pk_probe_divert() - post this thread's request for @r's hit, to @to. */
static PK_NOPROBE_INLINE void
pk_probe_divert(const struct pk_regs *r, uintptr_t to)
{
	pk_probe_divert_req.cont = pk_probe_divert_cont(r);
	pk_probe_divert_req.to = to;
	/* The stub reads them on this thread: order against signals. */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	pk_probe_divert_req.sp = (uintptr_t)&r->pk_private_ret;
}

/*
 * The stack pointer at the probe point of the hit whose request is
 * pending on this thread (see pk_arch_regs_sp()), or 0: none pending.
 */
static PK_NOPROBE_INLINE uintptr_t pk_probe_divert_pending(void)
{
	uintptr_t sp = pk_probe_divert_req.sp;

	return sp && !(sp & 7) ? sp + PK_TRAMP_STUB_SP : 0;
}

/* The @to of the pending request. */
static PK_NOPROBE_INLINE uintptr_t pk_probe_divert_to(void)
{
	return pk_probe_divert_req.to;
}

/*
 * Whether [@addr, @addr + @len) overlaps probekit's PK_NOPROBE code
 * (section pk_noprobe_text): what no probe may go on, and where a thread
 * the sweep asks is busy.
 */
extern const char __start_pk_noprobe_text[] __attribute__((weak, visibility("hidden")));
extern const char __stop_pk_noprobe_text[] __attribute__((weak, visibility("hidden")));

static PK_NOPROBE_INLINE int pk_probe_in_noprobe(uintptr_t addr, size_t len)
{
	return (uintptr_t)__start_pk_noprobe_text < addr + len &&
	       addr < (uintptr_t)__stop_pk_noprobe_text;
}

/* Three-way comparison of two addresses, for qsort()'s comparators. */
static inline int pk_probe_addr_order(uintptr_t x, uintptr_t y)
{
	return (x > y) - (x < y);
}

/*
 * pk_probe_divert_region() - declare [@lo, @lo + @len) as code that
 * divert requests lead to, for good (it is never undeclared).
 * Context: not from a signal handler; takes probe_lock.
 * Return: 0, or -ENOMEM.
 */
PK_HIDDEN int pk_probe_divert_region(uintptr_t lo, size_t len);

/*
 * Re-entry (-EDEADLK). What this thread is in, for the probe API's test
 * on entry: @api, a pk_probe_* or pk_retprobe_* call (it may hold
 * probe_lock or ret_lock, and waits for handlers: a signal handler that
 * calls the API again would deadlock on them); @ret, ret.c's return
 * dispatcher (a return handler runs). Probe handlers (pre, post, a return
 * probe's entry handler) count in pk_sweep_self.depth. Only this thread
 * reads and writes it: signal fences order it.
 */
struct pk_probe_self {
	unsigned int api;
	unsigned int ret;
};
PK_HIDDEN extern __thread struct pk_probe_self pk_probe_self
	__attribute__((tls_model("initial-exec")));

/*
 * pk_probe_api_enter() - start a public probe API call on this thread
 * Return: 0 (then pk_probe_api_leave() when done), or -EDEADLK: the
 * thread is inside a probe API call (a signal handler interrupted it),
 * a probe handler or a return handler; nothing may be done.
 */
PK_HIDDEN int pk_probe_api_enter(void);
PK_HIDDEN void pk_probe_api_leave(void);

/*
 * The API's bodies, for ret.c, which calls them inside its own
 * pk_probe_api_enter(): pk_probe_create(), pk_probe_register() (@arming)
 * or pk_probe_unregister(), pk_probe_destroy().
 */
PK_HIDDEN int pk_probe_create_in(const struct pk_probe_opts *opts,
				 struct pk_probe **out);
PK_HIDDEN int pk_probe_change(struct pk_probe *const *probes, size_t n,
			      int arming);
PK_HIDDEN void pk_probe_destroy_in(struct pk_probe *p);

/*
 * pk_probe_stale() - whether @p was retired because the code it probed
 * went away (its object unloaded): it is not armed, and can only be
 * destroyed.
 */
PK_HIDDEN int pk_probe_stale(const struct pk_probe *p);

/*
 * pk_probe_set_ret_entry() - @p is a return probe's entry probe (its ctx
 * the struct pk_retprobe): each hit it misses (its handler not run: inside
 * another handler, or a probe that joined mid-hit) is told to
 * pk_ret_entry_missed(ctx), a call whose return is not probed either.
 * Before @p is registered.
 */
PK_HIDDEN void pk_probe_set_ret_entry(struct pk_probe *p);
PK_HIDDEN void pk_ret_entry_missed(void *rp);

#endif /* PK_PROBE_PROBE_H */
