/* SPDX-License-Identifier: MIT */
/* codegen.h - generated functions with patchable 5-byte sites, for tests and benchmarks. */
#ifndef PK_TEST_CODEGEN_H
#define PK_TEST_CODEGEN_H

/*
 * Function i (at cg_fn(cg, i)) returns cg_val(i, 0) or cg_val(i, 1) depending
 * on the state of its 5-byte site, and nothing else:
 *
 *   CG_JMP:  +0  nop5 | jmp +11     +5 mov eax,A; ret    +11 mov eax,B; ret
 *   CG_MOV:  +0  mov eax,A | mov eax,B                   +5 ret
 *
 * CG_JMP sites are emulated by the trap handler (nop/jmp); CG_MOV sites run
 * out of line. The code is written while the mapping is RW, then it is RX.
 */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

enum cg_kind { CG_JMP, CG_MOV };

struct cg {
	uint8_t *map;
	size_t map_len;
	uint8_t *first;
	size_t n, stride;
	enum cg_kind kind;
};

static inline uint32_t cg_val(size_t i, int state)
{
	return (uint32_t)(i * 2 + (state ? 1 : 0) + 1000);
}

static inline void cg_site_bytes(const struct cg *cg, size_t i, int state,
				 uint8_t out[5])
{
	static const uint8_t nop5[5] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };

	if (cg->kind == CG_JMP) {
		if (!state) {
			memcpy(out, nop5, 5);
		} else {
			int32_t rel = 11 - 5;

			out[0] = 0xe9;
			memcpy(out + 1, &rel, 4);
		}
	} else {
		uint32_t v = cg_val(i, state);

		out[0] = 0xb8;
		memcpy(out + 1, &v, 4);
	}
}

static inline void *cg_fn(const struct cg *cg, size_t i)
{
	return cg->first + i * cg->stride;
}

static inline uint32_t cg_call(const struct cg *cg, size_t i)
{
	return ((uint32_t(*)(void))cg_fn(cg, i))();
}

/* @n functions @stride (>= 17) bytes apart, the first at @offset in the map. */
static inline int cg_create(struct cg *cg, enum cg_kind kind, size_t n,
			    size_t stride, size_t offset)
{
	size_t len = offset + n * stride;

	len = (len + 4095) & ~(size_t)4095;
	cg->map = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (cg->map == MAP_FAILED)
		return -1;
	memset(cg->map, 0xcc, len);
	cg->map_len = len;
	cg->first = cg->map + offset;
	cg->n = n;
	cg->stride = stride;
	cg->kind = kind;
	for (size_t i = 0; i < n; i++) {
		uint8_t *f = cg_fn(cg, i);
		uint32_t a = cg_val(i, 0), b = cg_val(i, 1);

		cg_site_bytes(cg, i, 0, f);
		if (kind == CG_JMP) {
			f[5] = 0xb8;
			memcpy(f + 6, &a, 4);
			f[10] = 0xc3;
			f[11] = 0xb8;
			memcpy(f + 12, &b, 4);
			f[16] = 0xc3;
		} else {
			f[5] = 0xc3;
		}
	}
	return mprotect(cg->map, len, PROT_READ | PROT_EXEC);
}

static inline void cg_destroy(struct cg *cg)
{
	munmap(cg->map, cg->map_len);
}

#endif /* PK_TEST_CODEGEN_H */
