/* SPDX-License-Identifier: MIT */
/* openmetrics.h - per-function calls and latency histograms as OpenMetrics / Prometheus text, rewritten atomically. */
#ifndef PK_PROF_OPENMETRICS_H
#define PK_PROF_OPENMETRICS_H

/*
 * What is written (prefix "probekit", OpenMetrics 1.0 text):
 *
 *	# TYPE probekit_calls counter
 *	# HELP probekit_calls Calls of a probed function.
 *	probekit_calls_total{function="lzma_code",object="/usr/lib/x86_64-linux-gnu/liblzma.so.5",process="xz",pid="4242"} 1402
 *	# TYPE probekit_call_duration_seconds histogram
 *	# UNIT probekit_call_duration_seconds seconds
 *	# HELP probekit_call_duration_seconds Inclusive duration of a probed function's calls.
 *	probekit_call_duration_seconds_bucket{function=...,le="0.0"} 0
 *	probekit_call_duration_seconds_bucket{function=...,le="0.000000001"} 0
 *	probekit_call_duration_seconds_bucket{function=...,le="0.000000003"} 0
 *	...
 *	probekit_call_duration_seconds_bucket{function=...,le="+Inf"} 1402
 *	probekit_call_duration_seconds_count{function=...} 1402
 *	probekit_call_duration_seconds_sum{function=...} 0.012345678
 *	# EOF
 *
 * Buckets are classic cumulative ones, taken from the log-linear
 * histogram's octave boundaries, which are bucket boundaries of it, so
 * every count is exact: le = (2^n - 1) ns for n = 0 .. le_max_shift (durations
 * are whole ns: "<= 2^n - 1 ns" is "< 2^n ns"), written as exact decimal
 * seconds. The ladder is the same for every series and every rewrite, as
 * histogram_quantile() over rate() needs. _sum is exact too (ns as
 * decimal seconds).
 *
 * PK_OM_PROMETHEUS writes the classic text format (0.0.4) instead: the
 * counter's TYPE names probekit_calls_total, no UNIT line, no "# EOF".
 * Prometheus scrapes either (by Content-Type); node_exporter's textfile
 * collector reads the classic one.
 *
 * Label values are escaped (\\, \", \n) and made valid UTF-8 (esc.h).
 * A label whose value is NULL is left out; pid 0 means no pid label.
 */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hist.h"

enum pk_om_format {
	PK_OM_OPENMETRICS = 0,	/* application/openmetrics-text; version=1.0.0 */
	PK_OM_PROMETHEUS = 1,	/* text/plain; version=0.0.4 */
};

struct pk_om_series {
	const char *function;	/* labels; NULL: label left out */
	const char *object;
	const char *process;
	int pid;		/* 0: no pid label */
	uint64_t calls;		/* <prefix>_calls_total */
	const struct pk_hist *hist;	/* durations in ns; NULL: no histogram series */
};

struct pk_om_opts {
	enum pk_om_format format;
	const char *prefix;		/* metric name prefix; NULL: "probekit" */
	unsigned int le_max_shift;	/* last finite le = 2^this - 1 ns; 0: 34 (17.2 s) */
};

/**
 * pk_om_write() - write the exposition of @n series to @f.
 * @f: the stream.
 * @s: the series (one per function and process).
 * @n: how many.
 * @o: options, or NULL for the defaults.
 *
 * Context: any thread, may block.
 * Return: 0; -EINVAL for a prefix that is no metric name or le_max_shift
 * above 63; -EIO if writing failed.
 */
int pk_om_write(FILE *f, const struct pk_om_series *s, size_t n, const struct pk_om_opts *o);

/**
 * pk_om_write_file() - replace file @path with the exposition, atomically.
 * @path: the file (e.g. a node_exporter textfile directory's probekit.prom).
 * @s: the series.
 * @n: how many.
 * @o: options, or NULL.
 *
 * Writes @path.tmp (which a textfile collector, reading *.prom, ignores)
 * and rename(2)s it over @path: a reader sees the old file or the new one,
 * never a part. No fsync: after a crash the file may be lost, never torn,
 * and the next interval rewrites it.
 *
 * Context: any thread, may block.
 * Return: 0, or -errno (open, write, rename); @path.tmp is removed on failure.
 */
int pk_om_write_file(const char *path, const struct pk_om_series *s, size_t n,
		     const struct pk_om_opts *o);

#endif /* PK_PROF_OPENMETRICS_H */
