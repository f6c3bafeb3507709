/* SPDX-License-Identifier: MIT */
/* chunk.h - trampoline memory: chunks of trampoline slots, mapped within rel32 reach of the code they serve. */
#ifndef PK_PROBE_CHUNK_H
#define PK_PROBE_CHUNK_H

/*
 * A chunk is PK_TRAMP_CHUNK_SIZE bytes, aligned to its size, mapped
 * read+execute from birth (written through the text layer, never
 * writable) in a free gap near the code it serves, so that every slot in
 * it reaches that code and back with a rel32. Its head (the stubs,
 * arch's pk_arch_tramp_head()) is written once; its slots are handed out
 * and back one at a time. Chunks are never unmapped.
 *
 * Locking: the caller's lock (probe_lock) around pk_chunk_slot_alloc()
 * and pk_chunk_slot_free(); pk_chunk_contains() runs without it.
 */

#include <stddef.h>
#include <stdint.h>

#include "arch/arch.h"
#include "internal.h"

struct pk_chunk;

/* Slots per chunk. */
#define PK_CHUNK_NSLOTS ((PK_TRAMP_CHUNK_SIZE - PK_TRAMP_HEAD) / PK_TRAMP_SLOT_SIZE)

/*
 * pk_chunk_slot_alloc() - a free slot within reach of @near, in a chunk
 * that has one or a new one (whose head is built from @env); its code is
 * the caller's to write (pk_text_fill()).
 * Return: 0, or -ERANGE (no chunk can be mapped within reach).
 */
PK_HIDDEN int pk_chunk_slot_alloc(uintptr_t near, const struct pk_tramp_env *env,
				  struct pk_chunk **chunk, uintptr_t *slot);

/* pk_chunk_slot_free() - give @slot back: no thread can be in it any more. */
PK_HIDDEN void pk_chunk_slot_free(struct pk_chunk *chunk, uintptr_t slot);

/* The address of @chunk's head (its first byte). */
PK_HIDDEN uintptr_t pk_chunk_head(const struct pk_chunk *chunk);

/* Whether @a lies in a chunk. Without the caller's lock. */
PK_HIDDEN int pk_chunk_contains(uintptr_t a);

/* A slot's share of its chunk: the head and the chunk's bookkeeping. */
PK_HIDDEN size_t pk_chunk_share(void);

#endif /* PK_PROBE_CHUNK_H */
