// SPDX-License-Identifier: MIT
/* test_text_errors.c - every failure path of the text API leaves memory as it was. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "probekit.h"
#include "harness.h"
#include "codegen.h"

static uint8_t *code;	/* one RX page of hand-made code */
static uint8_t snap[4096];

/* Lay out hand-written instructions at known offsets. */
static void make_code(void)
{
	uint8_t *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	memset(p, 0xc3, 4096);
	memcpy(p + 0, "\x90\x90\x90\x90\x90", 5);		/* five 1-byte nops */
	memcpy(p + 16, "\x0f\x1f\x44\x00\x00", 5);		/* one nop5 */
	memcpy(p + 32, "\x66\x90", 2);				/* 2-byte nop */
	memcpy(p + 48, "\x0f\x1f\x44\x00\x00", 5);		/* nop5 */
	mprotect(p, 4096, PROT_READ | PROT_EXEC);
	code = p;
	memcpy(snap, code, sizeof(snap));
}

static void unchanged(const char *what)
{
	ASSERT_MEM_EQ(code, snap, sizeof(snap), what);
}

static const uint8_t jmp0[5] = { 0xe9, 0, 0, 0, 0 };

static void bad_arguments(void)
{
	struct pk_batch *b;
	uint8_t nine[16] = { 0 };

	ASSERT_EQ(pk_batch_create(NULL), -EINVAL, "create(NULL)");
	ASSERT_OK(pk_batch_create(&b), "create");
	ASSERT_EQ(pk_batch_add(NULL, code, jmp0, 5, NULL, 0), -EINVAL, "add NULL batch");
	ASSERT_EQ(pk_batch_add(b, NULL, jmp0, 5, NULL, 0), -EINVAL, "add NULL addr");
	ASSERT_EQ(pk_batch_add(b, code, NULL, 5, NULL, 0), -EINVAL, "add NULL bytes");
	ASSERT_EQ(pk_batch_add(b, code, jmp0, 0, NULL, 0), -EINVAL, "add len 0");
	ASSERT_EQ(pk_batch_add(b, code, nine, 16, NULL, 0), -E2BIG, "add len 16");
	ASSERT_EQ(pk_batch_add(b, code, jmp0, 5, NULL, 0x80), -EINVAL, "bad flags");
	ASSERT_EQ(pk_batch_count(b), 0, "nothing queued");
	ASSERT_EQ(pk_batch_commit(b), 0, "empty commit");
	ASSERT_EQ(pk_batch_commit(b), -EINVAL, "commit twice");
	ASSERT_EQ(pk_batch_add(b, code + 16, jmp0, 5, NULL, 0), -EINVAL, "add after commit");
	ASSERT_EQ(pk_batch_commit(NULL), -EINVAL, "commit(NULL)");
	ASSERT_EQ(pk_batch_count(NULL), 0, "count(NULL)");
	pk_batch_free(b);
	pk_batch_free(NULL);
	ASSERT_EQ(pk_text_stats(NULL), -EINVAL, "stats(NULL)");
	unchanged("bad arguments");
}

static int poke(void *addr, const void *bytes, size_t len, const void *expect,
		unsigned flags)
{
	return pk_text_poke(addr, bytes, len, expect, flags);
}

static void bad_sites(void)
{
	static uint8_t data[64];		/* not executable */
	void *hole = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	static const uint8_t jcc[2] = { 0x74, 0x00 };

	munmap(hole, 4096);
	ASSERT_EQ(poke(data, jmp0, 5, NULL, 0), -EINVAL, "non-executable data");
	ASSERT_EQ(poke(hole, jmp0, 5, NULL, 0), -EINVAL, "unmapped address");
	ASSERT_EQ(poke(code + 4094, jmp0, 5, NULL, 0), -EINVAL, "runs off the mapping");
	ASSERT_EQ(poke((void *)-4, jmp0, 5, NULL, 0), -EINVAL,
		  "wraps past the end of the address space");
	ASSERT_EQ(poke(code + 16, jmp0, 5, "\x90\x90\x90\x90\x90", 0), -EBUSY,
		  "expected bytes differ");
	ASSERT_EQ(poke(code + 0, jmp0, 5, NULL, 0), -EINVAL,
		  "jmp splits five 1-byte nops");
	ASSERT_EQ(poke(code + 16, jmp0, 3, NULL, 0), -EINVAL,
		  "site ends inside an old instruction");
	ASSERT_EQ(poke(code + 16, "\xe9\x00\x00\x00\x00", 2, NULL, 0), -EINVAL,
		  "new bytes are not a whole instruction");
	ASSERT_EQ(poke(code + 32, jcc, 2, NULL, 0), -ENOTSUP,
		  "jcc cannot be emulated by a trapping thread");
	unchanged("bad sites");
}

static void all_or_nothing(void)
{
	struct pk_batch *b;

	/* Overlapping sites. */
	ASSERT_OK(pk_batch_create(&b), "create");
	ASSERT_OK(pk_batch_add(b, code + 16, jmp0, 5, NULL, 0), "add");
	ASSERT_OK(pk_batch_add(b, code + 18, "\x90", 1, NULL, 0), "add overlap");
	ASSERT_EQ(pk_batch_commit(b), -EINVAL, "overlap refused");
	pk_batch_free(b);
	unchanged("overlap");

	/* One good site and one bad one: neither is written. */
	ASSERT_OK(pk_batch_create(&b), "create");
	ASSERT_OK(pk_batch_add(b, code + 48, jmp0, 5, NULL, 0), "good site");
	ASSERT_OK(pk_batch_add(b, code + 0, jmp0, 5, NULL, 0), "bad site");
	ASSERT_EQ(pk_batch_commit(b), -EINVAL, "batch refused");
	pk_batch_free(b);
	unchanged("good site not written either");

	/* The waiver: merging five nops into one jmp is the caller's call. */
	ASSERT_EQ(poke(code + 0, jmp0, 5, NULL, PK_TEXT_F_MERGE), 1, "merge allowed");
	ASSERT_MEM_EQ(code, jmp0, 5, "merged jmp written");
}

int main(void)
{
	make_code();
	bad_arguments();
	bad_sites();
	all_or_nothing();
	return t_exit();
}
