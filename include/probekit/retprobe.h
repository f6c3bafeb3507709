/* SPDX-License-Identifier: MIT */
/* probekit/retprobe.h - return probes: entry and return handlers with per-call data (pk_retprobe_*). */
#ifndef PROBEKIT_RETPROBE_H
#define PROBEKIT_RETPROBE_H

#include <stddef.h>
#include <stdint.h>

#include <probekit/common.h>
#include <probekit/probe.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Return probes (kretprobes for user space): an entry handler when a
 * function is called, a return handler when that call returns, and a
 * per-call data area the two share. The entry side is an entry probe
 * (probekit/probe.h); the trampoline then calls the function so that it
 * returns into probekit, or, where it cannot, the return address on the
 * stack is replaced (PROBEKIT_RETPROBE_HIJACK=1 forces that, slower, way).
 *
 * What is guaranteed for recursion, longjmp and C++ exceptions, tail calls,
 * thread exit and several probes on one function; the limits (per-thread
 * depth, the record pool) and what is not supported; and which registers
 * each handler sees and may change: probekit(7), section RETURN PROBES.
 */

#define PK_RETPROBE_DEPTH 128		/* calls in flight per thread */
#define PK_RETPROBE_DATA_MAX 64		/* bytes of per-call data */

/* The integer return value, in a return handler. */
static inline PK_GPR_ONLY uint64_t pk_regs_ret(const struct pk_regs *r)
{
	return r->rax;
}

struct pk_retprobe;

/*
 * The entry handler returns non-zero to skip this call's return handler.
 * The return handler may change rax and rdx only (see pk_regs_ret()).
 * Neither may throw or longjmp, nor change the x87/MXCSR control words;
 * vector and x87 registers are saved around both (unless the probe has
 * PK_PROBE_F_GPR_ONLY: then neither may use them). The details:
 * probekit(7), RETURN PROBES, "Handlers".
 */
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
	unsigned int flags;	/* PK_PROBE_F_GPR_ONLY: the entry and return
				   handlers touch general registers only, as
				   that flag's comment in probekit/probe.h
				   says; then neither side saves vector or x87
				   state (the return values in xmm0/xmm1 and
				   st0/st1 are left where they are). Other
				   flags: -EINVAL */
	uint64_t *missed;	/* or NULL: the library also adds 1 here
				   (relaxed atomic) for each call whose return
				   is not probed (too deep, no record block,
				   inside a handler, its entry hit missed: as
				   pk_retprobe_info's missed counts them);
				   must stay valid while @rp exists */
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
 * pk_probe_create() refuses), -E2BIG (@data_size too large, or @opts->sz
 * over 4096), -ENOENT,
 * -ENOTSUP, -EPERM (as pk_probe_create()), -ENOMEM, -EDEADLK (called from
 * a handler, or a signal handler inside a probe call).
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
 * returns (-ESTALE, -EDEADLK included); -ENOMEM or -EPERM when the
 * trampoline cannot be made. On failure no probe of the set is armed.
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
 * pk_probe_unregister() returns (the probes stay armed); -ESTALE: a probe
 * of the set whose function was unloaded is disarmed (no return handler of
 * it runs after this returns; destroy it), the others are left armed;
 * -EDEADLK from a handler (its own entry or return handler too) or a
 * signal handler inside a probe call: nothing done.
 */
PK_API int pk_retprobe_unregister(struct pk_retprobe *const *rps, size_t n);

/**
 * pk_retprobe_destroy() - unregister @rp if armed, then free it
 * @rp: the probe, or NULL
 *
 * A stale one (its function unloaded) is freed; from a handler, or a
 * signal handler inside a probe call, nothing is done.
 *
 * Context: any thread, may block; not from a signal handler or probe handler.
 */
PK_API void pk_retprobe_destroy(struct pk_retprobe *rp);

struct pk_retprobe_info {
	size_t sz;		/* sizeof(struct pk_retprobe_info) */
	uintptr_t addr;		/* the probed address (after any endbr64) */
	uintptr_t func;		/* the function's first byte */
	int armed;		/* 0 too once its function was unloaded */
	unsigned long missed;	/* calls whose return was not probed: depth
				   or record pool exhausted, hit inside a
				   handler */
	size_t bytes;		/* memory this probe costs (its entry probe's
				   share, its own metadata); the shared
				   trampoline and record pool not counted */
	unsigned long pool_empty; /* of @missed: calls on a thread that found
				   no free block in the record pool
				   (PROBEKIT_RETPROBE_THREADS threads' worth;
				   blocks of threads gone without their
				   destructors are taken back first) */
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

#endif /* PROBEKIT_RETPROBE_H */
