/* SPDX-License-Identifier: MIT */
/* probe_target.h - what tests/targets/libprobetarget.c exports. */
#ifndef PK_TEST_PROBE_TARGET_H
#define PK_TEST_PROBE_TARGET_H

#include <stdint.h>

long pt_sum6(long a, long b, long c, long d, long e, long f);
double pt_fmix(double a, double b, long n);
long (*pt_get_static_mul(void))(long, long);
long pt_asm_loop(long n);
long pt_asm_rip(long a);
long pt_asm_endbr(long a, long b);
void pt_asm_short(void);
long pt_asm_jcc(long a);
long pt_asm_call(long a);
long pt_asm_icall(long a, void (*f)(void));
long pt_asm_jrcxz(long a);
long pt_asm_post(long a, long b);
void pt_asm_live(void);
uint64_t *pt_live_out(void);	/* 20 words */
uint64_t pt_live_off(void);

static inline long pt_sum6_ref(long a, long b, long c, long d, long e, long f)
{
	return a + b * 2 + c * 3 + d * 4 + e * 5 + f * 6;
}

#endif
