// SPDX-License-Identifier: MIT
/* bench_real_shim.c - LD_PRELOAD shim for bench_real: probes a list of functions of one library as one batch, counts hits in shared memory. */

/*
 * Environment (set by bench_real):
 *   PKR_SHM   a file holding struct pkr_hdr and hdr.n struct pkr_fn, made
 *             by bench_real with each function's address in its library
 *             (vaddr); this shim fills in kind, err and hits, and mapped
 *             MAP_SHARED the counts are there until the process's very end
 *   PKR_LIB   the library's path (dlopen RTLD_NOLOAD finds its base)
 *   PKR_MODE  "jump" (probekit picks each probe's kind) or "int3"
 *             (PK_PROBE_F_INT3 for every probe)
 *
 * libprobekit.so must come before this shim in LD_PRELOAD: only then do
 * its signal-mask interposers come before libc's (a library's dependencies
 * are searched after the program's), so a thread that blocks every signal
 * (liblzma's worker threads do) still takes SIGTRAP at an int3 probe;
 * otherwise the kernel kills the process at the first such hit.
 *
 * A constructor creates one probe per function and arms them all with one
 * pk_probe_register(); if that batch is refused it arms them one by one and
 * says so (hdr.batch_err). The probes stay armed until the process ends.
 * probekit's messages are appended to PKR_SHM.log (bench_real reads
 * why a probe is an int3 probe there), never to the program's output.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench_real.h"
#include "probekit.h"

static FILE *pkr_log;

static void shim_log(enum pk_log_level l, const char *msg, void *ctx)
{
	(void)l, (void)ctx;
	if (pkr_log)
		fprintf(pkr_log, "%s\n", msg);
}

/*
 * General registers only, as the agent's count handler: its probes take
 * PK_PROBE_F_GPR_ONLY (no vector save), as `probekit count`'s do.
 */
__attribute__((target("general-regs-only")))
static void hit(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	struct pkr_fn *f = ctx;

	(void)p, (void)r;
	__atomic_fetch_add(&f->hits, 1, __ATOMIC_RELAXED);
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

__attribute__((constructor)) static void shim_init(void)
{
	const char *shm = getenv("PKR_SHM"), *lib = getenv("PKR_LIB");
	const char *mode = getenv("PKR_MODE");
	struct pkr_hdr *h;
	struct pkr_fn *fn;
	struct pk_probe **ps;
	struct link_map *lm = NULL;
	struct stat st;
	char logp[4096];
	size_t m = 0;
	void *dl, *map;
	double t0;
	int fd, int3;

	if (!shm || !lib || !mode)
		return;
	snprintf(logp, sizeof(logp), "%s.log", shm);
	pkr_log = fopen(logp, "a");
	if (pkr_log)
		setvbuf(pkr_log, NULL, _IOLBF, 0);
	pk_set_log(shim_log, NULL);
	int3 = !strcmp(mode, "int3");
	fd = open(shm, O_RDWR);
	if (fd < 0 || fstat(fd, &st) || (size_t)st.st_size < sizeof(*h))
		return;
	map = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return;
	h = map;
	fn = (struct pkr_fn *)(h + 1);
	if (h->magic != PKR_MAGIC ||
	    sizeof(*h) + h->n * sizeof(*fn) > (size_t)st.st_size) {
		h->status = PKR_ST_BAD;
		return;
	}
	dl = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD);
	if (!dl || dlinfo(dl, RTLD_DI_LINKMAP, &lm) || !lm) {
		h->status = PKR_ST_NOLIB;
		return;
	}
	h->base = lm->l_addr;
	ps = calloc(h->n ? h->n : 1, sizeof(*ps));
	if (!ps) {
		h->status = PKR_ST_BAD;
		return;
	}
	t0 = now_ns();
	for (uint32_t i = 0; i < h->n; i++) {
		PK_OPTS(pk_probe_opts, o, .addr = (void *)(lm->l_addr + fn[i].vaddr),
			.pre = hit, .ctx = &fn[i],
			.flags = PK_PROBE_F_GPR_ONLY |
				 (int3 ? PK_PROBE_F_INT3 : 0));
		struct pk_probe_info info = { .sz = sizeof(info) };
		struct pk_probe *p = NULL;

		fn[i].err = pk_probe_create(&o, &p);
		if (fn[i].err)
			continue;
		if (!pk_probe_get_info(p, &info))
			fn[i].kind = info.kind;
		fn[i].idx = (int32_t)m;
		ps[m++] = p;
	}
	h->created = (uint32_t)m;
	h->batch_err = m ? pk_probe_register(ps, m) : 0;
	if (h->batch_err) {
		/* One by one: which of them refuses, and the rest armed. */
		for (uint32_t i = 0; i < h->n; i++) {
			if (fn[i].err)
				continue;
			fn[i].err = pk_probe_register(&ps[fn[i].idx], 1);
			if (fn[i].err)
				fn[i].kind = 0;
		}
	}
	for (uint32_t i = 0; i < h->n; i++) {
		struct pk_probe_info info = { .sz = sizeof(info) };

		if (fn[i].err)
			continue;
		if (!pk_probe_get_info(ps[fn[i].idx], &info)) {
			fn[i].kind = info.kind;
			if (!info.armed)
				fn[i].err = -1;
		}
	}
	h->arm_ns += now_ns() - t0;	/* summed over a job's commands */
	h->status = PKR_ST_ARMED;
	/* The probes and ps stay until the process ends. */
}
