// SPDX-License-Identifier: MIT
/* cmd_count.c - probekit count: how often each function was entered while COMMAND ran, in every process it started. */

/*
 * probekit count [-p SPEC]... [-I MS] [--json] [-o FILE] -- COMMAND [ARG]...
 *
 * Runs COMMAND with the agent in its "count" mode (see agent/protocol.h),
 * waits for it, and reports how often each function was entered, summed
 * over every process of the command. Like perf stat and strace -c, the
 * report goes to stderr (or FILE), so COMMAND's own output stays as it was.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* What the interval reports need between two ticks. */
struct tick_ctx {
	struct pkc_run *run;
	void *rec;			/* room for one record */
	int json;
	FILE *out;
	int failed;			/* a report line could not be written */
	double prev;			/* seconds at the previous report */
	unsigned long long last[PKA_MAX]; /* hits at the previous report */
};

/* Sum a record's hits into @ctx, an array of r->n counts. */
static void add_hits(const void *rec, void *ctx)
{
	const struct pka_count_record *c = rec;
	unsigned long long *hits = ctx;

	for (uint32_t i = 0; i < PKA_MAX && i < c->h.n; i++)
		hits[i] += c->count[i].n;
}

static void report(FILE *o, int json, char **argv, int status, int procs,
		   const struct pkc_spec *t, const unsigned long long *hits,
		   int n)
{
	if (json) {
		fprintf(o, "{\"command\":[");
		for (int i = 0; argv[i]; i++) {
			if (i)
				fputc(',', o);
			pkc_json_str(o, argv[i]);
		}
		fprintf(o, "],\"exit_status\":%d,\"processes\":%d,"
			   "\"probes\":[", status, procs);
		for (int i = 0; i < n; i++) {
			fprintf(o, "%s{\"spec\":", i ? "," : "");
			pkc_json_str(o, t[i].spec);
			fprintf(o, ",\"hits\":%llu,\"armed_in\":%d,"
				   "\"int3_in\":%d,\"failed_in\":%d", hits[i],
				t[i].armed, t[i].int3, t[i].failed);
			if (t[i].failed) {
				fprintf(o, ",\"error\":");
				pkc_json_str(o, t[i].why[0] ? t[i].why
							  : strerror(t[i].last_err));
			}
			fputc('}', o);
		}
		fprintf(o, "]}\n");
		return;
	}
	fprintf(o, "\n probekit count: %d process%s, exit status %d\n\n",
		procs, procs == 1 ? "" : "es", status);
	fprintf(o, " %16s  %s\n", "calls", "function");
	for (int i = 0; i < n; i++) {
		if (t[i].armed)
			fprintf(o, " %16llu  %s", hits[i], t[i].spec);
		else
			fprintf(o, " %16s  %s", "-", t[i].spec);
		if (t[i].int3)
			fprintf(o, "  (int3 probe in %d of %d: ~1 us a call)",
				t[i].int3, procs);
		if (t[i].failed)
			fprintf(o, "  (not probed in %d of %d: %s)", t[i].failed,
				procs, t[i].why[0] ? t[i].why
						  : strerror(t[i].last_err));
		fputc('\n', o);
	}
}

/*
 * Every -I interval while COMMAND runs, the counts so far (as perf stat
 * -I does): one line per function, or one JSON object per interval, with
 * the time since the start and the calls per second since the last one.
 */
static void tick(double el, void *arg)
{
	struct tick_ctx *c = arg;
	struct pkc_run *r = c->run;
	struct pkc_spec t[PKA_MAX];
	unsigned long long hits[PKA_MAX] = { 0 };

	/* The reader is gone (EPIPE) or the disk full: COMMAND runs on. */
	if (c->failed)
		return;
	memset(t, 0, sizeof(t));
	pkc_run_collect(r, c->rec, t, 0, add_hits, hits);
	if (c->json)
		fprintf(c->out, "{\"interval_s\":%.3f,\"probes\":[", el);
	for (int i = 0; i < r->n; i++) {
		double rate = (double)(hits[i] - c->last[i]) / (el - c->prev);

		if (c->json) {
			fprintf(c->out, "%s{\"spec\":", i ? "," : "");
			pkc_json_str(c->out, r->specs[i]);
			fprintf(c->out, ",\"hits\":%llu,\"per_s\":%.0f}",
				hits[i], rate);
		} else {
			fprintf(c->out, " %10.3f s %16llu  %s  (%.0f/s)\n", el,
				hits[i], r->specs[i], rate);
		}
		c->last[i] = hits[i];
	}
	if (c->json)
		fprintf(c->out, "]}\n");
	if (fflush(c->out) || ferror(c->out))
		c->failed = errno ? errno : EIO;
	c->prev = el;
}

/*
 * Why @spec can name no function in any process, or NULL: NAME or
 * OBJECT:NAME (split at the last ':', as the library does), neither part
 * empty, OBJECT under 256 bytes.
 */
static const char *bad_spec(const char *spec)
{
	const char *colon = strrchr(spec, ':');

	if (!*spec || strchr(spec, PKA_SEP))
		return "empty or multi-line probe spec";
	if (!colon)
		return NULL;
	if (colon == spec)
		return "no object before the ':' (a spec is NAME or OBJECT:NAME)";
	if (!colon[1])
		return "no function after the ':' (a spec is NAME or OBJECT:NAME)";
	if (colon - spec >= 256)
		return "object name too long (at most 255 bytes)";
	return NULL;
}

/*
 * Whether the report went out: every write, the flush and (of -o FILE)
 * the close. 0, or 125 after saying why.
 */
static int report_done(FILE *out, const char *path, int err)
{
	if (fflush(out) || ferror(out))
		err = err ? err : errno ? errno : EIO;
	if (out != stderr && fclose(out) && !err)
		err = errno ? errno : EIO;
	if (!err)
		return 0;
	fprintf(stderr, "probekit: cannot write the report to %s: %s\n",
		path ? path : "standard error", strerror(err));
	return PKC_EXIT_OWN;
}

static int count_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "probe", required_argument, NULL, 'p' },
		{ "json", no_argument, NULL, 'j' },
		{ "output", required_argument, NULL, 'o' },
		{ "interval", required_argument, NULL, 'I' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	char *specs[PKA_MAX];
	struct pkc_run r = {
		.mode_name = "count",
		.mode = PKA_MODE_COUNT,
		.size = sizeof(struct pka_count_record),
		.specs = specs,
	};
	struct pkc_spec t[PKA_MAX];
	unsigned long long hits[PKA_MAX] = { 0 };
	struct tick_ctx tc = { .run = &r };
	const char *out_path = NULL;
	int n = 0, json = 0, c, code, procs, wrote;
	long interval_ms = 0;
	FILE *out = stderr;

	while ((c = getopt_long(argc, argv, "+p:jo:hI:", longopts, NULL)) != -1) {
		switch (c) {
		case 'p': {
			const char *why = bad_spec(optarg);

			if (n == PKA_MAX) {
				fprintf(stderr, "probekit: too many probes (at most 64)\n");
				return PKC_EXIT_OWN;
			}
			if (why) {
				fprintf(stderr, "probekit: -p '%s': %s\n", optarg,
					why);
				return PKC_EXIT_OWN;
			}
			specs[n++] = optarg;
			break;
		}
		case 'j':
			json = 1;
			break;
		case 'o':
			out_path = optarg;
			break;
		case 'I': {
			char *end;

			interval_ms = strtol(optarg, &end, 10);
			if (*end || interval_ms < 10 || interval_ms > 3600000) {
				fprintf(stderr, "probekit: -I wants milliseconds, "
						"10 to 3600000\n");
				return PKC_EXIT_OWN;
			}
			break;
		}
		case 'h':
			pkc_usage(stdout, &pkc_cmd_count);
			return 0;
		default:
			pkc_usage(stderr, &pkc_cmd_count);
			return PKC_EXIT_OWN;
		}
	}
	if (!n || optind >= argc) {
		fprintf(stderr, "probekit: %s\n", !n ? "no probe given (-p NAME)"
						     : "no command given");
		pkc_usage(stderr, &pkc_cmd_count);
		return PKC_EXIT_OWN;
	}
	r.n = n;
	if (pkc_run_find_agent(&r))
		return PKC_EXIT_OWN;
	if (out_path && !(out = fopen(out_path, "we"))) {
		fprintf(stderr, "probekit: %s: %s\n", out_path, strerror(errno));
		return PKC_EXIT_OWN;
	}
	/* Any record a reader gets, whatever its size claims, fits in this. */
	tc.rec = calloc(1, PKA_RECORD_SIZE(r.size, n));
	if (!tc.rec) {
		fprintf(stderr, "probekit: %s\n", strerror(ENOMEM));
		return PKC_EXIT_OWN;
	}
	code = pkc_run_start(&r, &argv[optind]);
	if (code) {
		free(tc.rec);
		return code;
	}
	tc.json = json;
	tc.out = out;
	code = pkc_run_wait(&r, interval_ms, interval_ms ? tick : NULL, &tc);

	memset(t, 0, sizeof(t));
	for (int i = 0; i < n; i++)
		t[i].spec = specs[i];
	procs = pkc_run_collect(&r, tc.rec, t, 1, add_hits, hits);
	pkc_run_end(&r);
	free(tc.rec);
	if (!tc.failed)
		report(out, json, &argv[optind], code, procs, t, hits, n);
	wrote = report_done(out, out_path, tc.failed);
	code = pkc_run_verdict(&r, procs, t, code);
	return wrote ? wrote : code;
}

const struct pkc_cmd pkc_cmd_count = {
	.name = "count",
	.synopsis = "count [-p SPEC]... [-I MS] [--json] [-o FILE] -- COMMAND [ARG]...",
	.help =
		"Counts calls of functions while COMMAND runs, in every process it starts.\n"
		"  -p, --probe SPEC  a function: NAME or OBJECT:NAME (e.g. malloc,\n"
		"                    libz.so.1:inflate, a static function of the program)\n"
		"  -I, --interval MS also report the counts so far every MS milliseconds\n"
		"  -j, --json        the report as one JSON object (a line per interval)\n"
		"  -o, --output FILE the report to FILE instead of stderr\n",
	.main = count_main,
};
