/* SPDX-License-Identifier: MIT */
/* probekit/text.h - live patching of running code in batches (pk_batch_*, pk_text_poke), the kernel's int3 protocol. */
#ifndef PROBEKIT_TEXT_H
#define PROBEKIT_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include <probekit/common.h>

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
}
#endif

#endif /* PROBEKIT_TEXT_H */
