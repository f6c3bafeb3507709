// SPDX-License-Identifier: MIT
/* bench_prof.c - the profiler's parts (prof/): clock reads, histogram records, trace sizes for a million calls. */
#include <time.h>

#include "bench.h"
#include "hist.h"
#include "trace.h"
#include "tsc.h"

static uint64_t rng = 0x853c49e6748fea9bull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/*
 * This thread's CPU time in ns. The per-call loops are timed by it, not by
 * wall time: on a shared machine (load 40-60 on 2 cores here) wall time
 * mostly measures the other programs.
 */
static double cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* ns per iteration of @body over @iters, once per run. */
#define BENCH_LOOP(series, iters, body)                                        \
	do {                                                                   \
		for (int r_ = 0; r_ < bench_opts.runs; r_++) {                 \
			double t0_ = cpu_ns();                                 \
			for (long i_ = 0; i_ < (iters); i_++) {                \
				body;                                          \
			}                                                      \
			bench_add(&(series), (cpu_ns() - t0_) / (iters));      \
		}                                                              \
	} while (0)

static ssize_t count_write(void *c, const char *buf, size_t n)
{
	(void)buf;
	*(size_t *)c += n;
	return (ssize_t)n;
}

static size_t written(int (*w)(FILE *, const struct pk_trace_event *, size_t,
			       const struct pk_trace_meta *),
		      const struct pk_trace_event *ev, size_t n, const struct pk_trace_meta *m,
		      double *ns)
{
	cookie_io_functions_t io = { .write = count_write };
	size_t bytes = 0;
	FILE *f = fopencookie(&bytes, "w", io);
	double t0 = cpu_ns();

	setvbuf(f, NULL, _IOFBF, 1 << 20);
	if (w(f, ev, n, m))
		fprintf(stderr, "bench_prof: trace writer failed\n");
	fclose(f);
	*ns = cpu_ns() - t0;
	return bytes;
}

/* A million calls as a probed program makes them: 4 threads, calls nested 4 deep, 3 arguments. */
static struct pk_trace_event *make_calls(size_t n)
{
	struct pk_trace_event *ev = calloc(n, sizeof(*ev));
	uint64_t t[4] = { 1000000000000ull, 1000000000000ull, 1000000000000ull, 1000000000000ull };

	for (size_t i = 0; ev && i < n;) {
		unsigned int th = (unsigned int)(i / 4) % 4;
		uint64_t leaf = 40 + next() % 400, start = t[th];

		/* One outer call of three nested ones, written in return order. */
		for (int d = 3; d >= 0 && i < n; d--, i++) {
			struct pk_trace_event *e = &ev[i];

			*e = (struct pk_trace_event){ .ts_ns = start + 20 * (uint64_t)d,
						      .dur_ns = leaf + 40 * (uint64_t)(3 - d),
						      .pid = 4242, .tid = 4242 + th,
						      .func = (uint32_t)(next() % 100),
						      .nargs = 3, .has_ret = 1, .ret = next() % 64 };
			e->args[0] = 0x55d0c0a01000ull + (next() & 0xffff0);
			e->args[1] = next() % 65536;
			e->args[2] = next() % 8;
		}
		t[th] = start + leaf + 200 + next() % 2000;
	}
	return ev;
}

int main(int argc, char **argv)
{
	const long iters = 2000000;
	struct bench_series tsc = { 0 }, cgt = { 0 }, rec = { 0 }, timed = { 0 }, timed2 = { 0 }, rdp = { 0 };
	struct bench_series jb = { 0 }, pb = { 0 }, jt = { 0 }, pt = { 0 };
	static struct pk_hist h;
	static uint64_t vals[4096];
	static char names[100][32];
	const char *fn[100];
	struct pk_trace_process proc = { 4242, "xz" };
	struct pk_trace_thread thr[4];
	struct pk_trace_meta m = { .funcs = fn, .nfuncs = 100, .procs = &proc, .nprocs = 1, .threads = thr, .nthreads = 4 };
	const size_t ncalls = 1000000;
	struct pk_trace_event *ev;
	struct timespec ts;
	struct pk_tsc c;
	double ns;

	bench_init(argc, argv);
	if (pk_tsc_init(&c, 0) || c.source != PK_TSC_SRC_TSC)
		printf("  (clock: CLOCK_MONOTONIC_RAW fallback)\n");
	printf("  tsc: %llu Hz, invariant %d\n", (unsigned long long)c.hz,
	       !!(c.flags & PK_TSC_CPUID_INVARIANT));
	for (int i = 0; i < 4096; i++)
		vals[i] = 50 + next() % 100000;

	BENCH_LOOP(tsc, iters, bench_keep(pk_tsc_rdtsc()));
	bench_report("prof", "tsc_read", "ns_per_call", "ns", &tsc);
	BENCH_LOOP(cgt, iters, { clock_gettime(CLOCK_MONOTONIC, &ts); bench_keep(ts.tv_nsec); });
	bench_report("prof", "clock_gettime", "ns_per_call", "ns", &cgt);
	BENCH_LOOP(rec, iters, { pk_hist_record(&h, vals[i_ & 4095]); bench_keep(&h); });
	bench_report("prof", "hist_record", "ns_per_call", "ns", &rec);
	/* What a timed call adds around its body: two readings and a record. */
	BENCH_LOOP(timed, iters, {
		uint64_t t0 = pk_tsc_now(&c);

		pk_hist_record(&h, pk_tsc_rdtscp(NULL) - t0);
		bench_keep(&h);
	});
	bench_report("prof", "tsc_pair_hist_record", "ns_per_call", "ns", &timed);
	/* The same with rdtsc at both ends (no wait for earlier instructions). */
	BENCH_LOOP(timed2, iters, {
		uint64_t t0 = pk_tsc_rdtsc();

		pk_hist_record(&h, pk_tsc_rdtsc() - t0);
		bench_keep(&h);
	});
	bench_report("prof", "rdtsc_pair_hist_record", "ns_per_call", "ns", &timed2);
	BENCH_LOOP(rdp, iters, bench_keep(pk_tsc_rdtscp(NULL)));
	bench_report("prof", "rdtscp_read", "ns_per_call", "ns", &rdp);

	for (int i = 0; i < 100; i++) {
		snprintf(names[i], sizeof(names[i]), "lzma_fn_%02d_encode", i);
		fn[i] = names[i];
	}
	for (int i = 0; i < 4; i++)
		thr[i] = (struct pk_trace_thread){ 4242, 4242 + (uint32_t)i, i ? "xz worker" : "xz" };
	ev = make_calls(ncalls);
	if (!ev) {
		bench_skip("prof", "trace_json", "bytes_per_event", "out of memory");
		return 1;
	}
	bench_add(&jb, (double)written(pk_trace_write_json, ev, ncalls, &m, &ns) / ncalls);
	bench_add(&jt, ns / ncalls);
	bench_add(&pb, (double)written(pk_trace_write_proto, ev, ncalls, &m, &ns) / ncalls);
	bench_add(&pt, ns / ncalls);
	bench_report("prof", "trace_json", "bytes_per_event", "B", &jb);
	bench_report("prof", "trace_proto", "bytes_per_event", "B", &pb);
	bench_report("prof", "trace_json", "ns_per_event", "ns", &jt);
	bench_report("prof", "trace_proto", "ns_per_event", "ns", &pt);
	free(ev);
	return 0;
}
