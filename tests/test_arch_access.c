// SPDX-License-Identifier: MIT
/* test_arch_access.c - pk_arch_access(): the range an instruction accesses, and whether the access can move to a page's alias. */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/ucontext.h>

#include "arch/arch.h"
#include "harness.h"

struct access_case {
	const char *what;
	uint8_t code[15];
	size_t len;
	int ret;		/* 0 or -ENOTSUP */
	int how;		/* enum pk_access_move, or 0: cannot move */
	int reg;		/* PK_ACCESS_MOVE_REG: the gregs index */
	uint64_t addr;
	uint32_t size;
};

#define RAX 0x10000ull
#define RDI 0x20000ull
#define RSP 0x30000ull
#define RIP 0x40000ull

static const struct access_case cases[] = {
	{ "mov 8(%rdi),%eax", { 0x8b, 0x47, 0x08 }, 3, 0,
	  PK_ACCESS_MOVE_REG, REG_RDI, RDI + 8, 4 },
	{ "mov (%rax),%rax: the address register is the destination",
	  { 0x48, 0x8b, 0x00 }, 3, 0, 0, 0, RAX, 8 },
	{ "mov %rax,(%rax): the address register is the source",
	  { 0x48, 0x89, 0x00 }, 3, 0, 0, 0, RAX, 8 },
	{ "mov 0x10(%rsp),%rax: explicit rsp, read where it says",
	  { 0x48, 0x8b, 0x44, 0x24, 0x10 }, 5, 0, 0, 0, RSP + 0x10, 8 },
	{ "mov 0x100(%rip),%eax", { 0x8b, 0x05, 0x00, 0x01, 0x00, 0x00 }, 6,
	  0, PK_ACCESS_MOVE_RIP, 0, RIP + 6 + 0x100, 4 },
	{ "push %rax: a stack operation", { 0x50 }, 1, -ENOTSUP, 0, 0, 0, 0 },
	{ "pop %rax: a stack operation", { 0x58 }, 1, -ENOTSUP, 0, 0, 0, 0 },
	{ "nop: no memory operand", { 0x90 }, 1, -ENOTSUP, 0, 0, 0, 0 },
	{ "jmp *(%rax): a branch", { 0xff, 0x20 }, 2, -ENOTSUP, 0, 0, 0, 0 },
};

int main(void)
{
	long long gregs[NGREG];

	memset(gregs, 0, sizeof(gregs));
	gregs[REG_RAX] = (long long)RAX;
	gregs[REG_RDI] = (long long)RDI;
	gregs[REG_RSP] = (long long)RSP;
	gregs[REG_RIP] = (long long)RIP;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct access_case *c = &cases[i];
		struct pk_access a;
		int ret = pk_arch_access(c->code, c->len, gregs, &a);

		if (!ASSERT_EQ(ret, c->ret, c->what) || ret)
			continue;
		ASSERT_EQ(a.len, c->len, c->what);
		ASSERT_EQ(a.how, c->how, c->what);
		ASSERT_EQ(a.addr, c->addr, c->what);
		ASSERT_EQ(a.size, c->size, c->what);
		if (c->how == PK_ACCESS_MOVE_REG)
			ASSERT_EQ(a.reg, c->reg, c->what);
	}
	return t_exit();
}
