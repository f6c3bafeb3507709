/* SPDX-License-Identifier: MIT */
/* vector_targets.h - test_probe_vector's probed functions, in vector_targets.c (built with -mavx2). */
#ifndef PK_TEST_VECTOR_TARGETS_H
#define PK_TEST_VECTOR_TARGETS_H

#include <stdint.h>

/* Plain-typed entry points, so the test itself needs no AVX. */
double vt_call_sum8(const double a[4], const double b[4]);
void vt_call_ret4(double x, double out[4]);
double vt_ret_double(double x);
long double vt_ret_ld(double x);
void vt_clobber_vector(void);
void *vt_addr_sum8(void);	/* double vt_sum8(__m256d, __m256d) */
void *vt_addr_ret4(void);	/* __m256d vt_ret4(double) */

/* The probed functions behind them, and the assembly ones. */
long vt_mid_xmm9(long x);
void vt_mid_ymm(long x, long out[12]);
void vt_mid_x87(const double *in, uint64_t out[2]);
long vt_leaf(long x);
long vt_ipa_caller(long x, long out[16]);
long vt_avx512_caller(long x, long out[10]);
long vt_mid_zmm(long x, long out[10]);
void vt_clobber_avx512(void);
extern const uint32_t vt_mid_zmm_off;
extern const uint32_t vt_mid_xmm9_off, vt_mid_ymm_off, vt_mid_x87_off;

#endif /* PK_TEST_VECTOR_TARGETS_H */
