// SPDX-License-Identifier: MIT
/* chunk.c - trampoline memory: find a gap within reach, map a chunk, write its head, hand out its slots. */

/*
 * See chunk.h. A new chunk goes in the free gap (between the mappings a
 * pk_maps view lists, util/maps.h) nearest to the code it serves, at an
 * address aligned to its size, mapped with MAP_FIXED_NOREPLACE (a racing
 * mapping makes us look again), and is appended to the chunk list only
 * once its head is written: threads reach a chunk only through a slot
 * handed out after that.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "arch/arch.h"
#include "internal.h"
#include "probe/chunk.h"
#include "probe/sweep.h"
#include "text/text.h"
#include "util/maps.h"

/* Every slot of a chunk must reach the probe point and back with a rel32. */
#define REACH ((int64_t)INT32_MAX - 2 * PK_TRAMP_CHUNK_SIZE)

struct pk_chunk {
	uintptr_t base;
	unsigned int nfree;
	uint16_t free[PK_CHUNK_NSLOTS];	/* indexes of free slots */
	struct pk_chunk *next;
	struct pk_sweep_code stubs;	/* the head: threads there are busy */
};

/* Appended (caller's lock), each published with release; never shrinks. */
static struct pk_chunk *chunks;

/*
 * The place for a chunk in the gap [@lo, @hi) nearest to @near, if it is
 * nearer than *@best_d (then its distance there) and within REACH; else 0.
 */
static uintptr_t gap_best(uintptr_t lo, uintptr_t hi, uintptr_t near,
			  uint64_t *best_d)
{
	const uintptr_t mask = ~(uintptr_t)(PK_TRAMP_CHUNK_SIZE - 1);
	uintptr_t first, last, c;
	uint64_t d;

	if (hi <= lo || hi - lo < PK_TRAMP_CHUNK_SIZE)
		return 0;
	first = (lo + PK_TRAMP_CHUNK_SIZE - 1) & mask;
	last = (hi - PK_TRAMP_CHUNK_SIZE) & mask;
	c = near < first ? first : near > last ? last : near & mask;
	if (first > last || c < first || c > last)
		return 0;
	d = c > near ? c - near : near - c;
	if (d >= *best_d || (int64_t)d >= REACH)
		return 0;
	*best_d = d;
	return c;
}

/*
 * A free gap of PK_TRAMP_CHUNK_SIZE within REACH of @near, aligned to its
 * size, in [PK_ARCH_MMAP_MIN, PK_ARCH_USER_TOP): nearest to @near, or 0
 * (none, or the mappings could not be read).
 */
static uintptr_t find_gap(uintptr_t near)
{
	struct pk_maps ms = PK_MAPS_INIT;
	struct pk_mapinfo mi;
	uintptr_t prev_end = PK_ARCH_MMAP_MIN, best = 0, c;
	uint64_t best_d = UINT64_MAX;
	int err = pk_maps_open(&ms, 0);

	/* The gaps below each mapping, then the one up to the top. */
	for (uintptr_t a = 0; !err; a = mi.hi) {
		err = pk_maps_next(&ms, a, &mi);
		if (err || mi.lo >= PK_ARCH_USER_TOP)
			break;
		c = gap_best(prev_end, mi.lo, near, &best_d);
		best = c ? c : best;
		if (mi.hi > prev_end)
			prev_end = mi.hi;
	}
	pk_maps_close(&ms);
	if (err && err != -ENOENT)
		return 0;
	c = gap_best(prev_end, PK_ARCH_USER_TOP, near, &best_d);
	return c ? c : best;
}

static struct pk_chunk *chunk_new(uintptr_t near, const struct pk_tramp_env *env)
{
	uint8_t head[PK_TRAMP_HEAD];
	struct pk_chunk *c;
	void *p = MAP_FAILED;

	for (int tries = 0; tries < 4 && p == MAP_FAILED; tries++) {
		uintptr_t at = find_gap(near);

		if (!at)
			break;
		/* Read+execute only, from birth; filled via /proc/self/mem. */
		p = mmap((void *)at, PK_TRAMP_CHUNK_SIZE, PROT_READ | PROT_EXEC,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		if (p != MAP_FAILED && (uintptr_t)p != at) {
			munmap(p, PK_TRAMP_CHUNK_SIZE);	/* old kernel: hint only */
			p = MAP_FAILED;
		}
	}
	if (p == MAP_FAILED) {
		pk_err("probe: no room for trampolines within 2 GiB of %#" PRIxPTR,
		       near);
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		munmap(p, PK_TRAMP_CHUNK_SIZE);
		return NULL;
	}
	c->base = (uintptr_t)p;
	c->stubs.lo = c->base;
	c->stubs.hi = c->base + PK_TRAMP_HEAD;
	if (pk_arch_tramp_head(head, env))
		abort();	/* arch's layout is wrong */
	if (pk_text_fill((void *)c->base, head, sizeof(head))) {
		munmap(p, PK_TRAMP_CHUNK_SIZE);
		free(c);
		return NULL;
	}
	for (unsigned int i = 0; i < PK_CHUNK_NSLOTS; i++)
		c->free[i] = (uint16_t)(PK_CHUNK_NSLOTS - 1 - i);
	c->nfree = PK_CHUNK_NSLOTS;
	pk_sweep_busy_code(&c->stubs);
	/* Publish last: pk_chunk_contains() reads this list without the lock. */
	{
		struct pk_chunk **pp = &chunks;

		while (*pp)
			pp = &(*pp)->next;
		__atomic_store_n(pp, c, __ATOMIC_RELEASE);
	}
	return c;
}

static int in_reach(uintptr_t a, uintptr_t b)
{
	int64_t d = (int64_t)(a - b);

	return d < REACH && d > -REACH;
}

int pk_chunk_slot_alloc(uintptr_t near, const struct pk_tramp_env *env,
			struct pk_chunk **cp, uintptr_t *slot)
{
	struct pk_chunk *c;

	for (c = chunks; c; c = c->next)
		if (c->nfree && in_reach(c->base, near))
			break;
	if (!c)
		c = chunk_new(near, env);
	if (!c)
		return -ERANGE;
	*cp = c;
	*slot = c->base + PK_TRAMP_HEAD + (uintptr_t)c->free[--c->nfree] * PK_TRAMP_SLOT_SIZE;
	return 0;
}

void pk_chunk_slot_free(struct pk_chunk *c, uintptr_t slot)
{
	c->free[c->nfree++] = (uint16_t)((slot - c->base - PK_TRAMP_HEAD) / PK_TRAMP_SLOT_SIZE);
}

uintptr_t pk_chunk_head(const struct pk_chunk *c)
{
	return c->base;
}

int pk_chunk_contains(uintptr_t a)
{
	/* Pairs with the release store in chunk_new(). */
	for (const struct pk_chunk *c = __atomic_load_n(&chunks, __ATOMIC_ACQUIRE);
	     c; c = __atomic_load_n(&c->next, __ATOMIC_ACQUIRE))
		if (c->base <= a && a < c->base + PK_TRAMP_CHUNK_SIZE)
			return 1;
	return 0;
}

size_t pk_chunk_share(void)
{
	return (PK_TRAMP_HEAD + sizeof(struct pk_chunk) + PK_CHUNK_NSLOTS - 1) /
	       PK_CHUNK_NSLOTS;
}
