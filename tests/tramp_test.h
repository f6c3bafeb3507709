/* SPDX-License-Identifier: MIT */
/* tramp_test.h - for the trampoline tests: the asm a handler uses to clobber every ymm register, and a trampoline head mapped executable. */
#ifndef PK_TESTS_TRAMP_TEST_H
#define PK_TESTS_TRAMP_TEST_H

#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "harness.h"
#include "arch/arch.h"

/* All 16 ymm registers set to ones (and the clobber list that goes with it). */
#define TT_SET_YMM0_15						\
	"vpcmpeqd %%ymm0, %%ymm0, %%ymm0\n\t"			\
	"vpcmpeqd %%ymm1, %%ymm1, %%ymm1\n\t"			\
	"vpcmpeqd %%ymm2, %%ymm2, %%ymm2\n\t"			\
	"vpcmpeqd %%ymm3, %%ymm3, %%ymm3\n\t"			\
	"vpcmpeqd %%ymm4, %%ymm4, %%ymm4\n\t"			\
	"vpcmpeqd %%ymm5, %%ymm5, %%ymm5\n\t"			\
	"vpcmpeqd %%ymm6, %%ymm6, %%ymm6\n\t"			\
	"vpcmpeqd %%ymm7, %%ymm7, %%ymm7\n\t"			\
	"vpcmpeqd %%ymm8, %%ymm8, %%ymm8\n\t"			\
	"vpcmpeqd %%ymm9, %%ymm9, %%ymm9\n\t"			\
	"vpcmpeqd %%ymm10, %%ymm10, %%ymm10\n\t"		\
	"vpcmpeqd %%ymm11, %%ymm11, %%ymm11\n\t"		\
	"vpcmpeqd %%ymm12, %%ymm12, %%ymm12\n\t"		\
	"vpcmpeqd %%ymm13, %%ymm13, %%ymm13\n\t"		\
	"vpcmpeqd %%ymm14, %%ymm14, %%ymm14\n\t"		\
	"vpcmpeqd %%ymm15, %%ymm15, %%ymm15\n\t"
#define TT_XMM0_15 "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", \
	"xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", \
	"xmm15"

static __thread uintptr_t tt_dv_sp, tt_dv_to, tt_dv_cont;

/* A trampoline head whose handler calls go to @dispatch, mapped read+exec. */
static inline uint8_t *tt_map_head(uintptr_t dispatch)
{
	struct pk_tramp_env env = {
		.dispatch = dispatch,
		.dispatch_full = dispatch,
		.divert_sp = &tt_dv_sp, .divert_to = &tt_dv_to,
		.divert_cont = &tt_dv_cont,
	};
	static uint8_t buf[PK_TRAMP_HEAD];
	uint8_t *m;

	if (!ASSERT_OK(pk_arch_tramp_head(buf, &env), "pk_arch_tramp_head"))
		return NULL;
	m = mmap(NULL, PK_TRAMP_HEAD, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!ASSERT_TRUE(m != MAP_FAILED, "mmap"))
		return NULL;
	memcpy(m, buf, sizeof(buf));
	if (!ASSERT_OK(mprotect(m, PK_TRAMP_HEAD, PROT_READ | PROT_EXEC),
		       "mprotect")) {
		munmap(m, PK_TRAMP_HEAD);
		return NULL;
	}
	return m;
}

#endif /* PK_TESTS_TRAMP_TEST_H */
