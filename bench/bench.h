/* SPDX-License-Identifier: MIT */
/* bench.h - shared by bench_*.c: repeated runs, medians, human table, JSON lines. */
#ifndef PK_BENCH_H
#define PK_BENCH_H

/*
 * Contract (DESIGN.md "Benchmarks"): every figure is one JSON object per line,
 * appended to the file named by $BENCH_JSON (default build/bench.jsonl):
 *
 *   {"bench":"chain","case":"handlers=4","metric":"ns_per_call",
 *    "value":1.9,"min":1.8,"max":2.3,"runs":7,"unit":"ns"}
 *
 * value is the median of runs. A ratio is its own line, computed within each
 * run and then reduced to its median. A case that cannot run writes
 * "skipped":"reason" instead of value/min/max.
 *
 * Each bench program takes --quick (fewer, shorter runs) and --json (write the
 * JSON lines; the human table is always printed).
 */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_MAX_RUNS 64

struct bench_opts {
	int quick;
	int json;
	int runs;		/* runs per case: 7, or 5 with --quick */
	const char *json_path;
};

static struct bench_opts bench_opts;

static inline void bench_init(int argc, char **argv)
{
	bench_opts.runs = 7;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--quick"))
			bench_opts.quick = 1;
		else if (!strcmp(argv[i], "--json"))
			bench_opts.json = 1;
		else if (!strncmp(argv[i], "--runs=", 7))
			bench_opts.runs = atoi(argv[i] + 7);
		else {
			fprintf(stderr, "usage: %s [--quick] [--json] [--runs=N]\n", argv[0]);
			exit(2);
		}
	}
	if (bench_opts.quick && bench_opts.runs > 5)
		bench_opts.runs = 5;
	if (bench_opts.runs < 1 || bench_opts.runs > BENCH_MAX_RUNS)
		bench_opts.runs = 7;
	bench_opts.json_path = getenv("BENCH_JSON");
	if (!bench_opts.json_path || !*bench_opts.json_path)
		bench_opts.json_path = "build/bench.jsonl";
}

static inline double bench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static int bench_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* A figure's samples, one per run. */
struct bench_series {
	double v[BENCH_MAX_RUNS];
	int n;
};

static inline void bench_add(struct bench_series *s, double v)
{
	if (s->n < BENCH_MAX_RUNS)
		s->v[s->n++] = v;
}

static inline double bench_median(const struct bench_series *s)
{
	double tmp[BENCH_MAX_RUNS];

	if (!s->n)
		return 0;
	memcpy(tmp, s->v, sizeof(double) * s->n);
	qsort(tmp, s->n, sizeof(double), bench_cmp_double);
	return s->n % 2 ? tmp[s->n / 2] : (tmp[s->n / 2 - 1] + tmp[s->n / 2]) / 2;
}

static inline double bench_min(const struct bench_series *s)
{
	double m = s->n ? s->v[0] : 0;

	for (int i = 1; i < s->n; i++)
		if (s->v[i] < m)
			m = s->v[i];
	return m;
}

static inline double bench_max(const struct bench_series *s)
{
	double m = s->n ? s->v[0] : 0;

	for (int i = 1; i < s->n; i++)
		if (s->v[i] > m)
			m = s->v[i];
	return m;
}

static inline FILE *bench_json_file(void)
{
	FILE *f;

	if (!bench_opts.json)
		return NULL;
	f = fopen(bench_opts.json_path, "a");
	if (!f)
		perror(bench_opts.json_path);
	return f;
}

/* Print one row of the human table and, with --json, one JSON line. */
static inline void bench_report(const char *bench, const char *cas,
				const char *metric, const char *unit,
				const struct bench_series *s)
{
	FILE *f = bench_json_file();
	double med = bench_median(s);

	printf("  %-8s %-28s %-26s %12.3f %-3s (min %.3f max %.3f, %d runs)\n",
	       bench, cas, metric, med, unit, bench_min(s), bench_max(s), s->n);
	if (f) {
		fprintf(f,
			"{\"bench\":\"%s\",\"case\":\"%s\",\"metric\":\"%s\","
			"\"value\":%.6g,\"min\":%.6g,\"max\":%.6g,\"runs\":%d,"
			"\"unit\":\"%s\"}\n",
			bench, cas, metric, med, bench_min(s), bench_max(s),
			s->n, unit);
		fclose(f);
	}
}

/* A case that cannot run here: one line saying why, and a "skipped" figure. */
static inline void bench_skip(const char *bench, const char *cas,
			      const char *metric, const char *reason)
{
	FILE *f = bench_json_file();

	printf("  %-8s %-28s %-26s skipped: %s\n", bench, cas, metric, reason);
	if (f) {
		fprintf(f,
			"{\"bench\":\"%s\",\"case\":\"%s\",\"metric\":\"%s\","
			"\"skipped\":\"%s\"}\n",
			bench, cas, metric, reason);
		fclose(f);
	}
}

/* Keep the compiler from deleting a computation. */
#define bench_keep(x) __asm__ volatile("" : : "r"(x) : "memory")

#endif /* PK_BENCH_H */
