// SPDX-License-Identifier: MIT
/* tramp.c - x86-64 trampoline code: a probe chunk's stubs and divert code, a probe point's slot, the return trampoline. */

/*
 * The layout is tramp.h's; this file writes its bytes. Everything here
 * runs before the code is reachable (the probe layer fills a free slot or a
 * new chunk, then patches a site to lead there). The return trampoline's
 * common code is ordinary PK_NOPROBE text, instantiated by the probe layer
 * from ret_common.h's PK_ARCH_RET_COMMON().
 *
 * The stubs save and restore every register a handler may see or change,
 * so handlers are plain C: a struct pk_regs on the stack (the stub's return
 * address is its last word, pk_private_ret), the stack aligned to 16 for
 * the call, xmm0-7 (the vector argument registers) around it, DF cleared.
 * The call and the stub's ret pair up, so the return stack buffer predicts
 * both. Skipping the saved flags (the fast stub) instead of popf saves more
 * than the rest of the stub costs.
 */
#include <errno.h>
#include <string.h>

#include "arch/arch.h"

/* The chunk head (tramp.h's picture). */
#define STUB_FAST 0
#define HEAD_DIVERT 192
#define STUB_FULL 256
#define HEAD_DISPATCH 496
#define HEAD_DISPATCH_FULL 504
#define DIVERT_LEN 37

#define SLOT_DIVERT 26	/* the je, or its NOP */
#define JCC32_LEN 6
_Static_assert(PK_TRAMP_SLOT_ENTRY + PK_TRAMP_CALL_LEN == SLOT_DIVERT,
	       "the stub call, then the je");
_Static_assert(SLOT_DIVERT + JCC32_LEN == PK_TRAMP_SLOT_COPY,
	       "the je, then the copy");
_Static_assert(PK_TRAMP_SLOT_RET == PK_TRAMP_SLOT_ENTRY + 10,
	       "the return address of call_seq()'s call");
_Static_assert(HEAD_DISPATCH_FULL + 8 <= PK_TRAMP_HEAD, "the head's words");
_Static_assert(DIVERT_LEN <= STUB_FULL - HEAD_DIVERT,
	       "the divert code fits before the full stub");
_Static_assert(PK_TRAMP_COPY_MAX ==
	       PK_TRAMP_SLOT_SIZE - PK_TRAMP_SLOT_COPY - PK_ARCH_JMP_LEN,
	       "the copy, then the jmp back");

/* The offset of initial-exec thread-local @tls from the thread pointer. */
static int32_t tp_off(const void *tls)
{
	uintptr_t tp;

	__asm__("mov %%fs:0, %0" : "=r"(tp));
	return (int32_t)(intptr_t)((uintptr_t)tls - tp);
}

static size_t put(uint8_t *b, const void *bytes, size_t len)
{
	memcpy(b, bytes, len);
	return len;
}

/* ------------------------------------------------------------ chunk head */

/* A stub, at @off in its chunk: the register save around a dispatcher. */
static size_t build_stub(uint8_t *b, size_t off, int full, int32_t dsp)
{
	static const uint8_t save[] = {
		0x9c, 0x50, 0x51, 0x52, 0x53,		/* pushf; rax rcx rdx rbx */
		0x48, 0x8d, 0x84, 0x24, 0xb0, 0, 0, 0,	/* lea rax,[rsp+176] */
		0x50, 0x55, 0x56, 0x57,			/* rsp rbp rsi rdi */
		0x41, 0x50, 0x41, 0x51, 0x41, 0x52, 0x41, 0x53, /* r8-r11 */
		0x41, 0x54, 0x41, 0x55, 0x41, 0x56, 0x41, 0x57, /* r12-r15 */
		0x48, 0x83, 0xec, 0x08,			/* sub rsp,8 (ip) */
		0x48, 0x89, 0xe7,			/* mov rdi,rsp */
		0x48, 0x89, 0xe3,			/* mov rbx,rsp */
		0x48, 0x83, 0xe4, 0xf0,			/* and rsp,-16 */
		0x48, 0x81, 0xec, 0x80, 0, 0, 0,	/* sub rsp,128 */
		0x0f, 0x29, 0x04, 0x24,			/* movaps [rsp],xmm0 */
		0x0f, 0x29, 0x4c, 0x24, 0x10, 0x0f, 0x29, 0x54, 0x24, 0x20,
		0x0f, 0x29, 0x5c, 0x24, 0x30, 0x0f, 0x29, 0x64, 0x24, 0x40,
		0x0f, 0x29, 0x6c, 0x24, 0x50, 0x0f, 0x29, 0x74, 0x24, 0x60,
		0x0f, 0x29, 0x7c, 0x24, 0x70,		/* xmm1-7 */
		0xfc,					/* cld */
	};
	static const uint8_t restore[] = {
		0x0f, 0x28, 0x04, 0x24,			/* movaps xmm0,[rsp] */
		0x0f, 0x28, 0x4c, 0x24, 0x10, 0x0f, 0x28, 0x54, 0x24, 0x20,
		0x0f, 0x28, 0x5c, 0x24, 0x30, 0x0f, 0x28, 0x64, 0x24, 0x40,
		0x0f, 0x28, 0x6c, 0x24, 0x50, 0x0f, 0x28, 0x74, 0x24, 0x60,
		0x0f, 0x28, 0x7c, 0x24, 0x70,		/* xmm1-7 */
		0x48, 0x89, 0xdc,			/* mov rsp,rbx */
		0x48, 0x83, 0xc4, 0x08,			/* add rsp,8 (ip) */
		0x41, 0x5f, 0x41, 0x5e, 0x41, 0x5d, 0x41, 0x5c, /* r15-r12 */
		0x41, 0x5b, 0x41, 0x5a, 0x41, 0x59, 0x41, 0x58, /* r11-r8 */
		0x5f, 0x5e, 0x5d,			/* rdi rsi rbp */
		0x48, 0x83, 0xc4, 0x08,			/* skip rsp */
		0x5b, 0x5a, 0x59, 0x58,			/* rbx rdx rcx rax */
	};
	/* The fast stub skips the saved flags; the full one restores them. */
	static const uint8_t skip_flags[] = {
		0x48, 0x8d, 0x64, 0x24, 0x08,		/* lea rsp,[rsp+8] */
	};
	static const uint8_t divert_test[] = {
		0x64, 0x48, 0x39, 0x24, 0x25,		/* cmp %rsp,%fs:disp32 */
	};
	static const uint8_t pop_flags[] = {
		0x9d,					/* popf */
	};
	size_t n = put(b, save, sizeof(save));

	n += put(b + n, "\xff\x15", 2);		/* call [rip+rel32] */
	n += pk_tramp_put32(b + n,
			    (int32_t)((full ? HEAD_DISPATCH_FULL : HEAD_DISPATCH) -
				      (off + n + 4)));
	n += put(b + n, restore, sizeof(restore));
	if (full) {
		n += put(b + n, pop_flags, sizeof(pop_flags));
	} else {
		n += put(b + n, skip_flags, sizeof(skip_flags));
		/*
		 * ZF: this call is to be diverted. Not in the full stub: its
		 * popf must come last, and its slots hold a NOP for the je.
		 */
		n += put(b + n, divert_test, sizeof(divert_test));
		n += pk_tramp_put32(b + n, dsp);
	}
	b[n++] = 0xc3;				/* ret into the slot */
	return n;
}

/*
 * The divert code (tramp.h), reached by the slot's je with the function's
 * stack: rsp at its return address.
 */
static size_t build_divert(uint8_t *b, const struct pk_tramp_env *env)
{
	size_t n = 0;

	n += put(b + n, "\x64\x4c\x8b\x1c\x25", 5);	/* mov %fs:to,%r11 */
	n += pk_tramp_put32(b + n, tp_off(env->divert_to));
	n += put(b + n, "\x64\xff\x34\x25", 4);		/* push %fs:cont */
	n += pk_tramp_put32(b + n, tp_off(env->divert_cont));
	n += put(b + n, "\x8f\x04\x24", 3);		/* popq (%rsp): over
							   the return address */
	n += put(b + n, "\x64\x80\x0c\x25", 4);		/* orb $1,%fs:sp */
	n += pk_tramp_put32(b + n, tp_off(env->divert_sp));
	b[n++] = 1;
	n += put(b + n, "\x48\x8d\x64\x24\x08", 5);	/* lea rsp,[rsp+8] */
	n += put(b + n, "\x41\xff\xe3", 3);		/* jmp *%r11 */
	return n;
}

int pk_arch_tramp_head(uint8_t *buf, const struct pk_tramp_env *env)
{
	int32_t dsp = tp_off(env->divert_sp);

	memset(buf, PK_ARCH_TRAP_BYTE, PK_TRAMP_HEAD);
	if (build_stub(buf + STUB_FAST, STUB_FAST, 0, dsp) > HEAD_DIVERT - STUB_FAST ||
	    build_stub(buf + STUB_FULL, STUB_FULL, 1, dsp) > HEAD_DISPATCH - STUB_FULL ||
	    build_divert(buf + HEAD_DIVERT, env) != DIVERT_LEN)
		return -E2BIG;
	memcpy(buf + HEAD_DISPATCH, &env->dispatch, sizeof(env->dispatch));
	memcpy(buf + HEAD_DISPATCH_FULL, &env->dispatch_full,
	       sizeof(env->dispatch_full));
	return 0;
}

/* ------------------------------------------------------------------ slot */

/*
 * lea rsp,[rsp-128]; call @stub; lea rsp,[rsp+128] (PK_TRAMP_CALL_LEN
 * bytes) at @b, which runs at @at.
 */
static void call_seq(uint8_t *b, uintptr_t at, uintptr_t stub)
{
	size_t n = put(b, "\x48\x8d\x64\x24\x80", 5);

	b[n++] = 0xe8;
	n += pk_tramp_put32(b + n, (int32_t)(stub - (at + n + 4)));
	put(b + n, "\x48\x8d\xa4\x24\x80\x00\x00\x00", 8);
}

int pk_arch_tramp_slot(uint8_t *slot, const struct pk_tramp_slot *s,
		       struct pk_reloc_map *map)
{
	const size_t cap = PK_TRAMP_SLOT_SIZE - PK_ARCH_JMP_LEN;
	uintptr_t full = s->head + STUB_FULL;
	struct pk_reloc_map rest;
	size_t at = PK_TRAMP_SLOT_COPY, first;
	int n, ft = 1;

	map->n = 0;
	memset(slot, PK_ARCH_TRAP_BYTE, PK_TRAMP_SLOT_SIZE);
	memcpy(slot, &s->owner, sizeof(s->owner));
	call_seq(slot + PK_TRAMP_SLOT_ENTRY, s->at + PK_TRAMP_SLOT_ENTRY,
		 s->full ? full : s->head + STUB_FAST);
	if (s->full) {
		/* nopw 0(%rax,%rax): no divert after popf */
		put(slot + SLOT_DIVERT, "\x66\x0f\x1f\x44\x00\x00", JCC32_LEN);
	} else {
		put(slot + SLOT_DIVERT, "\x0f\x84", 2);	/* je rel32 */
		pk_tramp_put32(slot + SLOT_DIVERT + 2,
			       (int32_t)(s->head + HEAD_DIVERT -
					 (s->at + SLOT_DIVERT + JCC32_LEN)));
	}
	first = s->int3 || s->post ? s->first_len : s->len;
	if (s->int3)
		n = pk_arch_relocate_one(s->code, s->len, s->addr, slot + at,
					 cap - at, s->at + at, &ft);
	else
		n = pk_arch_relocate(s->code, first, s->addr, slot + at,
				     cap - at, s->at + at, map);
	if (n < 0)
		return n;
	at += (size_t)n;
	if (s->post) {
		if (!ft || at + PK_TRAMP_CALL_LEN > cap)
			return -E2BIG;
		call_seq(slot + at, s->at + at, full);
		at += PK_TRAMP_CALL_LEN;
	}
	if (first < s->len) {
		/* A jump probe's other displaced instructions, after post. */
		n = pk_arch_relocate(s->code + first, s->len - first,
				     s->addr + first, slot + at, cap - at,
				     s->at + at, &rest);
		if (n < 0)
			return n;
		for (unsigned int i = 0; i < rest.n && map->n < PK_RELOC_MAX; i++) {
			map->src[map->n] = (uint8_t)(rest.src[i] + first);
			map->dst[map->n] = (uint8_t)(rest.dst[i] + at -
						     PK_TRAMP_SLOT_COPY);
			map->n++;
		}
		at += (size_t)n;
	}
	if (ft && pk_arch_encode_jmp(slot + at, s->at + at, s->addr + s->len))
		return -ERANGE;
	return 0;
}

size_t pk_arch_entry_skip(const uint8_t *code, size_t avail)
{
	static const uint8_t endbr64[] = { 0xf3, 0x0f, 0x1e, 0xfa };

	return avail >= sizeof(endbr64) &&
	       !memcmp(code, endbr64, sizeof(endbr64)) ? sizeof(endbr64) : 0;
}

/* ----------------------------------------------------- return trampoline */

void pk_arch_ret_code(uint8_t *buf, size_t len, size_t nent,
		      uintptr_t common)
{
	memset(buf, PK_ARCH_TRAP_BYTE, len);
	memcpy(buf, &common, sizeof(common));
	for (size_t k = 0; k < nent; k++) {
		size_t at = PK_RET_ENT0 + k * PK_RET_ENT_SIZE;
		uint8_t *e = buf + at;

		put(e, "\xff\x54\x24\xf8", 4);		/* call *-8(%rsp) */
		/* landing: jmp *[rip+rel32], to the word at +0 */
		put(e + PK_RET_ENT_LAND, "\xff\x25", 2);
		pk_tramp_put32(e + PK_RET_ENT_LAND + 2,
			       -(int32_t)(at + PK_RET_ENT_LAND + 6));
	}
}

