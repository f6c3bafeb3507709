/* SPDX-License-Identifier: MIT */
/* probekit/probe.h - probes at a function's entry or any instruction inside it, jump-optimised or int3 (pk_probe_*). */
#ifndef PROBEKIT_PROBE_H
#define PROBEKIT_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include <probekit/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Probes: kprobes for user space. A probe calls a pre-handler before, and a
 * post-handler after, the instruction at a function's entry (after an
 * endbr64, which stays in place) or at any instruction boundary inside it
 * (pk_probe_opts.offset), on the thread that reached it, with the registers
 * in a struct pk_regs. Registering or removing a set of probes is one text
 * batch.
 *
 * A probe is a jump probe (PK_PROBE_JUMP: the instructions covering 5 bytes
 * become a jmp to a trampoline) where that is safe, else an int3 probe
 * (PK_PROBE_INT3: SIGTRAP through the fault layer's trap chain, no
 * single-step). When each kind is used, sharing one address, what handlers
 * may do with the registers, flags and FPU state, how threads are moved
 * while probes are armed and removed, and fork(): probekit(7), section
 * PROBES. Functions are found by name with pk_sym_lookup()
 * (probekit/sym.h); return probes are in probekit/retprobe.h.
 *
 * Re-entry: pk_probe_create(), pk_probe_register() and pk_probe_unregister()
 * called from a probe handler (or a return probe's handler), or from a
 * signal handler that interrupted one of them on its thread, return
 * -EDEADLK and change nothing; pk_probe_destroy() does nothing there.
 *
 * Unloaded code: when the object holding a probed function is unloaded
 * (dlclose(), munmap()), the next probe API call retires its probes: not
 * armed any more (pk_probe_get_info() says armed until that call), their
 * trampolines freed once no thread can be in them; register and unregister
 * of such a stale probe return -ESTALE, pk_probe_destroy() frees it. A new
 * probe on code loaded again at the same address is independent of it.
 * See pk_probe_register(3), "Unloaded code".
 */

/* Registers at a probe point. Layout fixed by the trampoline. */
struct pk_regs {
	uint64_t ip;	/* the probed address (read only) */
	uint64_t r15, r14, r13, r12, r11, r10, r9, r8;
	uint64_t rdi, rsi, rbp, rsp, rbx, rdx, rcx, rax;
	uint64_t flags;
	uint64_t pk_private_ret;
};

/*
 * PK_GPR_ONLY: a function for handlers with PK_PROBE_F_GPR_ONLY (GCC will
 * not inline an ordinary function into one built with the attribute, and
 * the copy it calls then may use SSE); still inlined into ordinary code.
 */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define PK_GPR_ONLY __attribute__((target("general-regs-only")))
#else
#define PK_GPR_ONLY
#endif

/* The n-th integer argument (0..5) of a function probed at its entry. */
static inline PK_GPR_ONLY uint64_t pk_regs_arg(const struct pk_regs *r,
					      unsigned int n)
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
/*
 * A pre- or post-handler. It may change the general-purpose registers in
 * regs (and, where flags are restored, the arithmetic flags and DF); it
 * may use any vector or x87 register (saved around it, unless the probe
 * has PK_PROBE_F_GPR_ONLY: then it must use none), must not change
 * the x87/MXCSR control words, and must be async-signal-safe if the probed
 * code can run in a signal handler.
 * The details: probekit(7), PROBES, "Handlers".
 */
typedef void (*pk_probe_handler_fn)(struct pk_probe *p, struct pk_regs *regs,
				    void *ctx);

/* pk_probe_opts.flags */
#define PK_PROBE_F_INT3 0x1u	/* an int3 probe even where a jump probe fits */
/*
 * PK_PROBE_F_GPR_ONLY: the handlers touch general registers only, as the
 * kernel's own kprobe handlers do (they never use the FPU without
 * kernel_fpu_begin()). Then the trampoline saves no vector, mask or x87
 * state around them, which is most of a hit's cost; at a function's entry
 * regs->flags reads 0x202 (DF clear) instead of the flags (none is live
 * there), for every probe on an address whose first probe had the flag.
 *
 * The promise, for the pre- and post-handler and everything they call:
 * no SSE, AVX, AVX-512 or x87 instruction, and no MXCSR or x87 control
 * word change. Compile their file with -mgeneral-regs-only; with
 * __attribute__((target("general-regs-only"))) on GCC instead, every
 * function they call needs it too, static inline ones in the same file
 * included (GCC calls an out-of-line copy built for SSE rather than
 * inline it; probekit's own helpers have it: PK_GPR_ONLY), and call nothing
 * compiled otherwise: glibc's memcpy, memset, strlen and printf use
 * vector registers (so do calls the compiler makes for large struct
 * copies). A handler that breaks the promise corrupts the probed code's
 * vector registers: a function's double, float or __m256 arguments, and
 * any value its caller keeps in a vector register across the call.
 *
 * Several probes on one address: the cheap path is taken only while every
 * probe armed there has the flag, and only if the first one armed there
 * had it; while one without it is armed, every hit saves the vector state
 * as for a probe without the flag (a hit racing its pk_probe_register()
 * may skip it: counted in pk_probe_info.missed). With PK_PROBE_F_INT3 the
 * trap is taken as usual and the handlers then run as above.
 */
#define PK_PROBE_F_GPR_ONLY 0x2u

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

/**
 * pk_probe_create() - prepare a probe (not armed yet)
 * @opts: where (@opts->symbol or @opts->addr, then @opts->offset) and what to
 *        call (@opts->pre, @opts->post, @opts->ctx); @opts->flags
 *        PK_PROBE_F_INT3 for an int3 probe, PK_PROBE_F_GPR_ONLY for handlers
 *        that touch general registers only (see its comment)
 * @out: receives the probe
 *
 * Decodes the whole function (its size from the symbol table), as it was
 * before any probe was armed in it, checks that @opts->offset is an
 * instruction boundary, and picks the kind: a jump probe where that is safe,
 * else an int3 probe (see probekit(7), PROBES).
 *
 * Context: any thread, may block; not from a signal handler or probe handler.
 * Return: 0, or -EINVAL (bad @opts or an unknown flag; address not the start
 * of a known function; offset past its end or not on an instruction
 * boundary; probekit's own trap path, a key site or a trampoline), -ENOENT
 * (symbol not found), -ENOTSUP (the probed instruction can be neither moved
 * nor emulated; a post-handler after a branch, call, ret or trap), -E2BIG
 * (@opts->sz over 4096: no options struct is that large), -EPERM (a
 * function probekit's own signal path calls where a hit would be fatal:
 * pthread_sigmask; probekit(7), PROBES; or a point inside a restartable
 * sequence, an rseq(2) critical section), -ENOMEM, -EDEADLK (called from a
 * handler, or a signal handler inside a probe call).
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
 * built), -EPERM (code writes refused), -ESTALE (a probe whose code was
 * unloaded, also since pk_probe_create() while not armed: only
 * pk_probe_destroy() is left for it), -EDEADLK (called from
 * a handler, or a signal handler inside a probe call).
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
 * (the code could not be restored; the probes stay armed), -ESTALE (a probe
 * of the set was retired, its code unloaded; nothing done: destroy it),
 * -EDEADLK (called from a handler, e.g. the probe's own, or a signal
 * handler inside a probe call; nothing done).
 */
PK_API int pk_probe_unregister(struct pk_probe *const *probes, size_t n);

/**
 * pk_probe_destroy() - unregister @p if armed, then free it
 * @p: the probe, or NULL
 *
 * A stale probe (its code unloaded) is freed. From a handler, or a signal
 * handler inside a probe call, nothing is done.
 *
 * Context: any thread, may block; not from a signal handler or probe handler.
 */
PK_API void pk_probe_destroy(struct pk_probe *p);

/* How a probe reaches its handlers (pk_probe_info.kind). */
enum pk_probe_kind {
	PK_PROBE_JUMP = 1,	/* a jmp to a trampoline */
	PK_PROBE_INT3 = 2,	/* an int3, through the fault layer's trap chain */
};

/*
 * Why a probe is of its kind (pk_probe_info.reason). A jump probe's
 * tactic, what made it possible:
 */
enum pk_probe_reason {
	PK_PROBE_WHY_PLAIN = 1,	/* nothing in the way */
	PK_PROBE_WHY_IJMP_PROVEN = 2, /* the function's indirect jmps proven
				   not to land in the displaced bytes (jump
				   tables read, tail calls through pointers) */
	PK_PROBE_WHY_CALL_MOVED = 3, /* a call among the displaced bytes, moved
				   as push of its return address + jmp */
	PK_PROBE_WHY_PADDING = 4, /* a short function: the padding after its
				   last instruction (a ret or jmp) displaced
				   too */
	/* An int3 probe's reason, why no jump probe: */
	PK_PROBE_WHY_FORCED = 16, /* PK_PROBE_F_INT3 */
	PK_PROBE_WHY_SHORT = 17, /* the function ends within 5 bytes */
	PK_PROBE_WHY_KEY_SITE = 18, /* a static key's site follows */
	PK_PROBE_WHY_TRAP = 19,	/* an int3 among the displaced bytes */
	PK_PROBE_WHY_CALL = 20,	/* a call that cannot be moved: it returns
				   inside the displaced bytes, or a shadow
				   stack is active */
	PK_PROBE_WHY_UNDECODABLE = 21, /* the function does not decode */
	PK_PROBE_WHY_BRANCH_IN = 22, /* a branch of the function lands inside */
	PK_PROBE_WHY_IJMP = 23,	/* an indirect jmp not proven harmless */
	PK_PROBE_WHY_IJMP_MADE = 24, /* the function makes an address inside
				   the displaced bytes (computed goto) */
	PK_PROBE_WHY_XREF = 25,	/* a branch elsewhere in the object lands
				   inside */
	PK_PROBE_WHY_NO_XREF = 26, /* no branch index of the object */
	PK_PROBE_WHY_RELOC = 27, /* the displaced bytes do not relocate */
	PK_PROBE_WHY_RSEQ = 28,	/* they hold part of a restartable sequence
				   (rseq(2) critical section) */
	PK_PROBE_WHY_JOINED = 32, /* armed as the kind of another probe on
				   the same address */
};

struct pk_probe_info {
	size_t sz;		/* sizeof(struct pk_probe_info) */
	uintptr_t addr;		/* the probed address (after any endbr64) */
	uintptr_t func;		/* the function's first byte */
	size_t displaced;	/* bytes replaced by the jmp; an int3 probe:
				   the probed instruction's length */
	int armed;		/* 0 too once retired (its code unloaded) */
	unsigned long missed;	/* hits skipped: already inside a handler */
	size_t bytes;		/* memory this probe costs: its share of its
				   trampoline, the trampoline's and its own
				   metadata */
	int kind;		/* enum pk_probe_kind: what it is armed as
				   (several probes on one address share the
				   first one's kind), or would be */
	int reason;		/* enum pk_probe_reason: why that kind */
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

#ifdef __cplusplus
}
#endif

#endif /* PROBEKIT_PROBE_H */
