/* SPDX-License-Identifier: MIT */
/* bench_real.h - the shared-memory layout between bench_real and its preload shim (bench_real_shim.c). */
#ifndef PK_BENCH_REAL_H
#define PK_BENCH_REAL_H

#include <stdint.h>

#define PKR_MAGIC 0x706b7231u	/* "pkr1" */

enum {
	PKR_ST_NONE = 0,	/* the shim never ran */
	PKR_ST_ARMED = 1,	/* probes created and registered */
	PKR_ST_BAD = 2,		/* the file is not what it should be */
	PKR_ST_NOLIB = 3,	/* the library is not loaded in the process */
};

struct pkr_hdr {
	uint32_t magic;
	uint32_t n;		/* functions that follow */
	int32_t status;		/* PKR_ST_* */
	int32_t batch_err;	/* the one-batch pk_probe_register(): 0 or -errno */
	uint32_t created;	/* probes pk_probe_create() made */
	uint32_t pad;
	double arm_ns;		/* create + register in the shim, summed over
				   the commands of a job */
	uint64_t base;		/* the library's load bias (shim) */
};

struct pkr_fn {
	uint64_t vaddr;		/* st_value in the library (bench_real) */
	uint64_t hits;		/* pre-handler calls (shim) */
	int32_t kind;		/* enum pk_probe_kind, 0 not armed (shim) */
	int32_t err;		/* pk_probe_create/register error (shim) */
	int32_t idx;		/* the shim's own */
	int32_t pad;
};

#endif /* PK_BENCH_REAL_H */
