// SPDX-License-Identifier: MIT
/* cmd_count.c - probekit count: how often each function was entered while COMMAND ran, in every process it started. */

/*
 * probekit count [-p SPEC]... [-P FILE]... [-I MS] [--json] [-o FILE]
 *                [--strict] [--wait-all] [-q] [--color[=WHEN]] -- COMMAND [ARG]...
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
#include "sym/spec.h"

/* What the interval reports need between two ticks. */
struct tick_ctx {
	struct pkc_run *run;
	void *rec;			/* room for one record */
	int json;
	FILE *out;
	int failed;			/* a report line could not be written */
	double prev;			/* seconds at the previous report */
	unsigned long long *last;	/* hits at the previous report */
	unsigned long long *hits;	/* and now: r->n of each */
	struct pkc_spec *t;
};

/*
 * The functions of each spec, by name, summed over every process (the
 * names of a record's probes: a glob's functions, an IFUNC's
 * implementation); an open-addressing table, memory proportional to them.
 */
struct fn_ent {
	char *name;		/* NULL: an empty entry */
	uint32_t spec;
	int int3;		/* an int3 probe in some process */
	unsigned long long hits;
};

struct fn_tab {
	struct fn_ent *e;
	size_t n, cap;		/* cap: a power of two, or 0 */
	size_t nspec;
	unsigned long long *unnamed;	/* per spec: hits of probes with no name */
	uint32_t *shared;	/* per spec: 1 + the earlier spec whose probes
				 * it reports (the agent arms a function once) */
	unsigned long long *unprobed;	/* per spec armed: functions not */
	char **unprobed_why;	/* and the first reason seen, or NULL */
	int oom;
};

/* What add_hits() sums into: per-spec hits, and the names if @fns. */
struct hits_ctx {
	unsigned long long *hits;
	struct fn_tab *fns;
};

static size_t fn_hash(uint32_t spec, const char *name)
{
	size_t h = 14695981039346656037ull ^ spec;

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 1099511628211ull;
	return h;
}

static struct fn_ent *fn_slot(struct fn_ent *e, size_t cap, uint32_t spec,
			      const char *name)
{
	size_t i = fn_hash(spec, name) & (cap - 1);

	while (e[i].name && (e[i].spec != spec || strcmp(e[i].name, name)))
		i = (i + 1) & (cap - 1);
	return &e[i];
}

static void fn_add(struct fn_tab *t, uint32_t spec, const char *name,
		   unsigned long long hits, int int3)
{
	struct fn_ent *f;

	if (t->oom)
		return;
	if (2 * (t->n + 1) > t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 256;
		struct fn_ent *e = calloc(cap, sizeof(*e));

		if (!e) {
			t->oom = 1;
			return;
		}
		for (size_t i = 0; i < t->cap; i++)
			if (t->e[i].name)
				*fn_slot(e, cap, t->e[i].spec, t->e[i].name) = t->e[i];
		free(t->e);
		t->e = e;
		t->cap = cap;
	}
	f = fn_slot(t->e, t->cap, spec, name);
	if (!f->name) {
		f->name = strdup(name);
		if (!f->name) {
			t->oom = 1;
			return;
		}
		f->spec = spec;
		t->n++;
	}
	f->hits += hits;
	f->int3 |= int3;
}

static void fn_free(struct fn_tab *t)
{
	for (size_t i = 0; i < t->cap; i++)
		free(t->e[i].name);
	free(t->e);
	free(t->unnamed);
	free(t->shared);
	for (size_t i = 0; t->unprobed_why && i < t->nspec; i++)
		free(t->unprobed_why[i]);
	free(t->unprobed_why);
	free(t->unprobed);
}

/*
 * Sum a record's hits into @ctx (a struct hits_ctx): each spec's are its
 * probes' (pkc_run_collect() checked the header; the slots a spec claims
 * are checked here), and each armed probe's under its function's name.
 */
static void add_hits(const struct pka_header *h, void *ctx)
{
	struct pka_header *w = (struct pka_header *)h;
	struct hits_ctx *c = ctx;

	for (uint32_t i = 0; i < h->n; i++) {
		const struct pka_spec *s = pka_record_spec(w, i);

		if (s->first > h->nprobe || s->nprobe > h->nprobe - s->first)
			continue;
		for (uint32_t k = s->first; k < s->first + s->nprobe; k++) {
			const struct pka_probe *p = pka_record_probe(w, k);
			unsigned long long n = ((const struct pka_count *)
						pka_record_slot(w, k))->n;

			c->hits[i] += n;
			if (!c->fns)
				continue;
			if (p->spec < i)
				c->fns->shared[i] = p->spec + 1;
			/* Armed, but not on all of its functions: say so. */
			if (p->status && p->status != PKA_PENDING && !s->status)
				pkc_note_unprobed(w, i, p, &c->fns->unprobed[i],
						  &c->fns->unprobed_why[i]);
			if (p->status)
				continue;
			/* The reader made the pool end with a NUL. */
			if (p->name && p->name <= h->why_len)
				fn_add(c->fns, i, (const char *)h + h->why_at +
				       p->name - 1, n, p->int3 != 0);
			else if (c->fns->unnamed)
				c->fns->unnamed[i] += n;
		}
	}
}

static int is_glob(const char *s)
{
	return strpbrk(s, "*?[") != NULL;
}

/* By spec, then most calls first, then by name. */
static int fn_cmp(const void *a, const void *b)
{
	const struct fn_ent *x = a, *y = b;

	if (x->spec != y->spec)
		return x->spec < y->spec ? -1 : 1;
	if (x->hits != y->hits)
		return x->hits > y->hits ? -1 : 1;
	return strcmp(x->name, y->name);
}

/*
 * Pack the table's entries at its start, sorted (fn_cmp). The probes of a
 * spec that came without a name (its address from the run's cache, in
 * another process of the same link map) are its one named function's,
 * when it has exactly one; they are added to it before sorting.
 */
static void fn_sort(struct fn_tab *t, int nspec)
{
	size_t w = 0;

	for (size_t i = 0; i < t->cap; i++)
		if (t->e[i].name)
			t->e[w++] = t->e[i];
	for (size_t i = w; i < t->cap; i++)
		t->e[i].name = NULL;
	t->n = w;
	if (w)
		qsort(t->e, w, sizeof(*t->e), fn_cmp);
	for (size_t i = 0; t->unnamed && i < w; i++) {
		uint32_t sp = t->e[i].spec;

		if ((!i || t->e[i - 1].spec != sp) &&
		    (i + 1 == w || t->e[i + 1].spec != sp) &&
		    (int)sp < nspec) {
			t->e[i].hits += t->unnamed[sp];
			t->unnamed[sp] = 0;
		}
	}
}

/* How many of the sorted entries from @at on are spec @i's. */
static size_t fn_count(const struct fn_tab *t, size_t at, int i)
{
	size_t cnt = 0;

	while (at + cnt < t->n && t->e[at + cnt].spec == (uint32_t)i)
		cnt++;
	return cnt;
}

/*
 * Whether a spec is reported function by function: it is a glob, it named
 * several functions, or one whose name says more than the spec does (an
 * IFUNC's implementation, "strlen -> __strlen_avx2").
 */
static int fn_lines(const struct fn_tab *t, size_t at, size_t cnt,
		    const char *spec)
{
	if (!cnt)
		return 0;
	return cnt > 1 || is_glob(spec) || strstr(t->e[at].name, " -> ");
}

static void report(FILE *o, int json, char **argv, int status, int procs,
		   const struct pkc_spec *t, const unsigned long long *hits,
		   const struct pkc_run *r, const struct fn_tab *fns)
{
	size_t at = 0, cnt;
	int n = r->n, col;
	const char *warn, *bad, *off;

	if (json) {
		fprintf(o, "{\"command\":[");
		for (int i = 0; argv[i]; i++) {
			if (i)
				fputc(',', o);
			pkc_json_str(o, argv[i]);
		}
		fprintf(o, "],\"exit_status\":%d,\"processes\":%d,"
			   "\"probes\":[", status, procs);
		for (int i = 0; i < n; i++, at += cnt) {
			cnt = fn_count(fns, at, i);
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
			if (fns->unprobed[i]) {
				fprintf(o, ",\"not_probed\":%llu,\"not_probed_error\":",
					fns->unprobed[i]);
				pkc_json_str(o, fns->unprobed_why[i] ?
					     fns->unprobed_why[i] : "");
			}
			if (fns->shared[i]) {
				fprintf(o, ",\"probes_of\":");
				pkc_json_str(o, t[fns->shared[i] - 1].spec);
			}
			/* Every function it was armed on, by name, most calls first. */
			if (cnt)
				fprintf(o, ",\"functions\":[");
			for (size_t k = 0; k < cnt; k++) {
				fprintf(o, "%s{\"name\":", k ? "," : "");
				pkc_json_str(o, fns->e[at + k].name);
				fprintf(o, ",\"hits\":%llu%s}", fns->e[at + k].hits,
					fns->e[at + k].int3 ? ",\"int3\":true" : "");
			}
			if (cnt)
				fputc(']', o);
			fputc('}', o);
		}
		fputc(']', o);
		pkc_run_json_procs(r, o);
		fprintf(o, "}\n");
		return;
	}
	col = pkc_color_for(o, 0);
	warn = pkc_sgr(col, PKC_SGR_WARN);
	bad = pkc_sgr(col, PKC_SGR_BAD);
	off = pkc_sgr(col, PKC_SGR_OFF);
	fprintf(o, "\n probekit count: %d process%s, exit status %d",
		procs, procs == 1 ? "" : "es", status);
	if (r->not_counted)
		fprintf(o, " %s(%d more not counted)%s",
			pkc_sgr(col, PKC_SGR_WARN), r->not_counted,
			pkc_sgr(col, PKC_SGR_OFF));
	fprintf(o, "\n\n");
	fprintf(o, " %s%16s  %s%s\n", pkc_sgr(col, PKC_SGR_HEAD), "calls",
		"function", pkc_sgr(col, PKC_SGR_OFF));
	for (int i = 0; i < n; i++, at += cnt) {
		cnt = fn_count(fns, at, i);
		if (t[i].armed)
			fprintf(o, " %16llu  %s", hits[i], t[i].spec);
		else
			fprintf(o, " %16s  %s", "-", t[i].spec);
		if (t[i].int3)
			fprintf(o, "  %s(int3 probe in %d of %d: ~1 us a call)%s",
				warn, t[i].int3, procs, off);
		if (t[i].failed)
			fprintf(o, "  %s(not probed in %d of %d: %s)%s", bad,
				t[i].failed, procs, t[i].why[0] ? t[i].why
						  : strerror(t[i].last_err), off);
		if (fns->unprobed[i])
			fprintf(o, "  %s(%llu of its functions not probed%s%s)%s",
				warn, fns->unprobed[i],
				fns->unprobed_why[i] ? ", first: " : "",
				fns->unprobed_why[i] ? fns->unprobed_why[i] : "",
				off);
		/* The same spec twice says nothing: the same count. */
		if (fns->shared[i] && strcmp(t[fns->shared[i] - 1].spec, t[i].spec))
			fprintf(o, "  (the probes of \"%s\": a function is "
				   "probed once)", t[fns->shared[i] - 1].spec);
		fputc('\n', o);
		/* A glob's functions, an IFUNC's implementation: indented. */
		if (!fn_lines(fns, at, cnt, t[i].spec))
			continue;
		for (size_t k = 0; k < cnt; k++)
			fprintf(o, " %16llu    %s%s%s%s%s\n", fns->e[at + k].hits,
				fns->e[at + k].name,
				fns->e[at + k].int3 ? "  " : "",
				fns->e[at + k].int3 ? warn : "",
				fns->e[at + k].int3 ? "(int3 probe)" : "",
				fns->e[at + k].int3 ? off : "");
		if (fns->unnamed[i])
			fprintf(o, " %16llu    (functions not named)\n",
				fns->unnamed[i]);
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
	unsigned long long *hits = c->hits;
	struct hits_ctx hc = { .hits = hits };

	/* The reader is gone (EPIPE) or the disk full: COMMAND runs on. */
	if (c->failed)
		return;
	/* The progress line, if shown, comes back at the next update. */
	pkc_progress_clear();
	memset(c->t, 0, (size_t)r->n * sizeof(*c->t));
	memset(hits, 0, (size_t)r->n * sizeof(*hits));
	pkc_run_collect(r, c->t, 0, add_hits, &hc);
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
 * OBJECT:NAME (split where the library splits it), neither part empty,
 * OBJECT under 256 bytes; NAME may be of any length.
 */
static const char *bad_spec(const char *spec)
{
	const char *colon = pk_spec_obj_colon(spec);

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
int pkc_report_done(FILE *out, const char *path, int err)
{
	if (fflush(out) || ferror(out))
		err = err ? err : errno ? errno : EIO;
	if (out != stderr && fclose(out) && !err)
		err = errno ? errno : EIO;
	if (!err)
		return 0;
	pkc_err("cannot write the report to %s: %s\n",
		path ? path : "standard error", strerror(err));
	return PKC_EXIT_OWN;
}

/* Add @spec (from @where, for the message). 0, or PKC_EXIT_OWN. */
int pkc_spec_add(struct pkc_spec_list *l, char *spec, const char *where)
{
	const char *why = bad_spec(spec);

	if (why) {
		pkc_err("%s '%s': %s\n", where, spec, why);
		return PKC_EXIT_OWN;
	}
	if (l->n == (int)PKA_SPECS_MAX) {
		pkc_err("too many probes (at most %u)\n",
			PKA_SPECS_MAX);
		return PKC_EXIT_OWN;
	}
	if (l->n == l->cap) {
		int cap = l->cap ? 2 * l->cap : 64;
		char **v = realloc(l->v, (size_t)cap * sizeof(*v));

		if (!v) {
			pkc_err("%s\n", strerror(ENOMEM));
			return PKC_EXIT_OWN;
		}
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = spec;
	return 0;
}

/*
 * -P FILE: one spec a line ("-" for standard input); blanks around a spec
 * and empty lines are ignored, and lines whose first non-blank is '#'.
 * 0, or PKC_EXIT_OWN after saying why.
 */
int pkc_spec_file(struct pkc_spec_list *l, const char *path)
{
	FILE *f = strcmp(path, "-") ? fopen(path, "re") : stdin;
	char *buf = NULL, *line, *next, where[4200], **b;
	size_t len = 0;
	FILE *m;
	int c, no = 0;

	if (!f) {
		pkc_err("-P %s: %s\n", path, strerror(errno));
		return PKC_EXIT_OWN;
	}
	m = open_memstream(&buf, &len);
	while (m && (c = getc(f)) != EOF)
		fputc(c, m);
	c = ferror(f);
	if (f != stdin)
		fclose(f);
	if (!m || fclose(m) || c) {
		pkc_err("-P %s: %s\n", path,
			c ? "read error" : strerror(ENOMEM));
		free(buf);
		return PKC_EXIT_OWN;
	}
	b = realloc(l->bufs, (size_t)(l->nbufs + 1) * sizeof(*b));
	if (!b) {
		free(buf);
		pkc_err("%s\n", strerror(ENOMEM));
		return PKC_EXIT_OWN;
	}
	l->bufs = b;
	l->bufs[l->nbufs++] = buf;
	if (strlen(buf) != len) {
		pkc_err("-P %s: a NUL byte in the file\n", path);
		return PKC_EXIT_OWN;
	}
	for (line = buf; line; line = next) {
		char *end;

		no++;
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		line += strspn(line, " \t\r");
		end = line + strlen(line);
		while (end > line && strchr(" \t\r", end[-1]))
			*--end = 0;
		if (!*line || *line == '#')
			continue;
		snprintf(where, sizeof(where), "-P %s:%d:", path, no);
		if (pkc_spec_add(l, line, where))
			return PKC_EXIT_OWN;
	}
	return 0;
}

void pkc_spec_list_free(struct pkc_spec_list *l)
{
	for (int i = 0; i < l->nbufs; i++)
		free(l->bufs[i]);
	free(l->bufs);
	free(l->v);
}

static int count_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "probe", required_argument, NULL, 'p' },
		{ "probes", required_argument, NULL, 'P' },
		{ "json", no_argument, NULL, 'j' },
		{ "output", required_argument, NULL, 'o' },
		{ "interval", required_argument, NULL, 'I' },
		{ "strict", no_argument, NULL, 's' },
		{ "wait-all", no_argument, NULL, 'w' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "color", optional_argument, NULL, 'C' },
		{ "colour", optional_argument, NULL, 'C' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct pkc_spec_list l = { 0 };
	struct pkc_run r = {
		.mode_name = "count",
		.mode = PKA_MODE_COUNT,
		.slot = sizeof(struct pka_count),
	};
	struct tick_ctx tc = { .run = &r };
	struct fn_tab fns = { 0 };
	struct hits_ctx hc = { 0 };
	const char *out_path = NULL;
	int json = 0, c, code = PKC_EXIT_OWN, procs, wrote, quiet = 0;
	long interval_ms = 0;
	FILE *out = stderr;

	while ((c = getopt_long(argc, argv, "+p:P:jo:hI:q", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (pkc_spec_add(&l, optarg, "-p"))
				goto out;
			break;
		case 'P':
			if (pkc_spec_file(&l, optarg))
				goto out;
			break;
		case 'j':
			json = 1;
			break;
		case 'o':
			out_path = optarg;
			break;
		case 's':
			r.strict = 1;
			break;
		case 'w':
			r.wait_all = 1;
			break;
		case 'q':
			quiet = 1;
			break;
		case 'C':
			if (pkc_color_opt(optarg))
				goto out;
			break;
		case 'I': {
			char *end;

			interval_ms = strtol(optarg, &end, 10);
			if (*end || interval_ms < 10 || interval_ms > 3600000) {
				pkc_err("-I wants milliseconds, "
						"10 to 3600000\n");
				goto out;
			}
			break;
		}
		case 'h':
			pkc_usage(stdout, &pkc_cmd_count);
			code = 0;
			goto out;
		default:
			pkc_usage(stderr, &pkc_cmd_count);
			goto out;
		}
	}
	if (!l.n || optind >= argc) {
		pkc_err("%s\n", !l.n ? "no probe given (-p NAME)"
						       : "no command given");
		pkc_usage(stderr, &pkc_cmd_count);
		goto out;
	}
	r.specs = l.v;
	r.n = l.n;
	if (pkc_run_find_agent(&r))
		goto out;
	/* Memory proportional to the specs: their sums, and the last tick's. */
	tc.t = calloc((size_t)r.n, sizeof(*tc.t));
	tc.hits = calloc((size_t)r.n, sizeof(*tc.hits));
	tc.last = calloc((size_t)r.n, sizeof(*tc.last));
	fns.unnamed = calloc((size_t)r.n, sizeof(*fns.unnamed));
	fns.shared = calloc((size_t)r.n, sizeof(*fns.shared));
	fns.unprobed = calloc((size_t)r.n, sizeof(*fns.unprobed));
	fns.unprobed_why = calloc((size_t)r.n, sizeof(*fns.unprobed_why));
	fns.nspec = (size_t)r.n;
	if (!tc.t || !tc.hits || !tc.last || !fns.unnamed || !fns.shared ||
	    !fns.unprobed || !fns.unprobed_why) {
		pkc_err("%s\n", strerror(ENOMEM));
		goto out;
	}
	if (out_path && !(out = fopen(out_path, "we"))) {
		pkc_err("%s: %s\n", out_path, strerror(errno));
		out = stderr;
		goto out;
	}
	pkc_progress_init(quiet);
	code = pkc_run_start(&r, &argv[optind]);
	if (code)
		goto out;
	tc.json = json;
	tc.out = out;
	code = pkc_run_wait(&r, interval_ms, interval_ms ? tick : NULL, &tc);

	memset(tc.t, 0, (size_t)r.n * sizeof(*tc.t));
	memset(tc.hits, 0, (size_t)r.n * sizeof(*tc.hits));
	for (int i = 0; i < r.n; i++)
		tc.t[i].spec = l.v[i];
	hc.hits = tc.hits;
	hc.fns = &fns;
	procs = pkc_run_collect(&r, tc.t, 1, add_hits, &hc);
	fn_sort(&fns, r.n);
	pkc_run_end(&r);
	pkc_run_check(&r, procs, tc.t);
	if (!tc.failed)
		report(out, json, &argv[optind], code, procs, tc.t, tc.hits, &r,
		       &fns);
	wrote = pkc_report_done(out, out_path, tc.failed);
	out = stderr;
	code = pkc_run_verdict(&r, code);
	if (wrote)
		code = wrote;
out:
	if (out != stderr)
		fclose(out);
	pkc_run_free(&r);
	free(tc.t);
	free(tc.hits);
	free(tc.last);
	fn_free(&fns);
	pkc_spec_list_free(&l);
	return code;
}

const struct pkc_cmd pkc_cmd_count = {
	.name = "count",
	.synopsis = "count [-p SPEC]... [-P FILE]... [-I MS] [--json] [-o FILE] [--strict]\n"
		    "         [--wait-all] [-q] [--color[=WHEN]] -- COMMAND [ARG]...",
	.help =
		"Counts calls of functions while COMMAND runs, in every process it starts.\n"
		"  -p, --probe SPEC  a function: NAME or OBJECT:NAME (e.g. malloc,\n"
		"                    libz.so.1:inflate, a static function of the program)\n"
		"  -P, --probes FILE the specs in FILE, one a line (- for stdin; # comments)\n"
		"  -I, --interval MS also report the counts so far every MS milliseconds\n"
		"  -j, --json        the report as one JSON object (a line per interval)\n"
		"  -o, --output FILE the report to FILE instead of stderr\n"
		"      --strict      exit 125 if anything is missing from the counts (no probe\n"
		"                    armed, processes not counted or outliving COMMAND);\n"
		"                    without it COMMAND's status is kept and this is only said\n"
		"      --wait-all    once COMMAND ended, wait for its descendants that outlive\n"
		"                    it (daemons) and count their calls too\n"
		"  -q, --quiet       no progress line on the terminal while probes are armed\n"
		"      --color[=WHEN] colour the text report: auto (a terminal, NO_COLOR\n"
		"                    unset), always, never\n",
	.main = count_main,
};
