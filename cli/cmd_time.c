// SPDX-License-Identifier: MIT
/* cmd_time.c - probekit time: per-function latency (calls, total, mean, min, max, percentiles, histograms) while COMMAND ran, in every process it started. */

/*
 * probekit time [-p SPEC]... [-P FILE]... [--hist] [--json] [-d SECONDS]
 *               [-I MS] [--format text|json|openmetrics] [-o FILE]
 *               [--strict] [--wait-all] [-q] [--color[=WHEN]] -- COMMAND [ARG]...
 *
 * A subcommand of its own rather than count growing it: count's probes are
 * entry probes that cost one relaxed add; timing needs return probes
 * (twice the trampoline work and a record per call in flight), so count
 * keeps its cost and its output, and time says what it measures.
 *
 * Runs COMMAND with the agent in its "time" mode (agent/protocol.h,
 * PKA_MODE_TIME; agent/time.c), calibrates the TSC once here (prof/tsc.h)
 * and hands the agent the rate (PKA_ENV_CLOCK), so that no process of the
 * command calibrates. Each record holds, per thread and function, a cell
 * with a log-linear histogram (prof/hist.h buckets); they are merged per
 * function over every thread and process. The report goes to stderr (or
 * FILE), as count's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "hist.h"
#include "openmetrics.h"
#include "sym/spec.h"
#include "tsc.h"

enum fmt { F_TEXT, F_JSON, F_OM };

/* One function (of one spec; of one process name for OpenMetrics). */
struct fn {
	char *name;		/* NULL: an empty entry */
	char *comm;		/* "" unless OpenMetrics */
	uint32_t spec;
	int int3;
	struct pk_hist *h;	/* the cells' durations (allocated on first) */
	uint64_t calls, total, min_inv, max; /* everything, cells and slots */
	uint64_t nohist;	/* calls in slots: no histogram */
	uint64_t missed;	/* calls not timed (the return-probe library's) */
	uint32_t cells;		/* thread cells merged (threads that called it) */
	/* at the previous interval: */
	struct pk_hist *prev;
	uint64_t prev_calls, prev_total;
};

struct tab {
	struct fn *e;
	size_t n, cap;
	int by_comm;
	int oom;
	uint64_t ovh_min, ovh_max;	/* overhead_ns over the records */
	int ovh_n, cal_failed, fallback;
	/* Per spec armed: its functions not probed, the first reason or NULL. */
	unsigned long long *unprobed;
	char **unprobed_why;
	int nspec;
};

struct ctx {
	struct pkc_run *run;
	struct tab *tab;
	struct pkc_spec *t;
	FILE *out;
	const char *out_path;
	enum fmt fmt;
	int hist;
	int col;		/* colour the text (pkc_color_for()) */
	int failed;
	double prev_el, dur_s;
	int timed_out;
	long hist_interval_ms;	/* -I: interval reports */
	long tick_ms;		/* tick()'s period: -I's, or less with -d */
	double next_iv;		/* when the next interval report is due (s) */
	char **argv;
};

static size_t fn_hash(uint32_t spec, const char *name, const char *comm)
{
	size_t h = 14695981039346656037ull ^ spec;

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 1099511628211ull;
	for (; *comm; comm++)
		h = (h ^ (unsigned char)*comm) * 1099511628211ull;
	return h;
}

static struct fn *fn_slot(struct fn *e, size_t cap, uint32_t spec,
			  const char *name, const char *comm)
{
	size_t i = fn_hash(spec, name, comm) & (cap - 1);

	while (e[i].name && (e[i].spec != spec || strcmp(e[i].name, name) ||
			     strcmp(e[i].comm, comm)))
		i = (i + 1) & (cap - 1);
	return &e[i];
}

static struct fn *fn_get(struct tab *t, uint32_t spec, const char *name,
			 const char *comm)
{
	struct fn *f;

	if (t->oom)
		return NULL;
	if (2 * (t->n + 1) > t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 256;
		struct fn *e = calloc(cap, sizeof(*e));

		if (!e) {
			t->oom = 1;
			return NULL;
		}
		for (size_t i = 0; i < t->cap; i++)
			if (t->e[i].name)
				*fn_slot(e, cap, t->e[i].spec, t->e[i].name,
					 t->e[i].comm) = t->e[i];
		free(t->e);
		t->e = e;
		t->cap = cap;
	}
	f = fn_slot(t->e, t->cap, spec, name, comm);
	if (!f->name) {
		f->name = strdup(name);
		f->comm = strdup(comm);
		if (!f->name || !f->comm) {
			free(f->name);
			free(f->comm);
			f->name = NULL;
			t->oom = 1;
			return NULL;
		}
		f->spec = spec;
		t->n++;
	}
	return f;
}

/* Forget the figures (not the entries): before each reading. */
static void tab_zero(struct tab *t)
{
	for (size_t i = 0; i < t->cap; i++) {
		struct fn *f = &t->e[i];

		if (!f->name)
			continue;
		if (f->h)
			pk_hist_reset(f->h);
		f->calls = f->total = f->min_inv = f->max = f->nohist = 0;
		f->missed = 0;
		f->cells = 0;
		f->int3 = 0;
	}
	for (int i = 0; t->unprobed && i < t->nspec; i++)
		t->unprobed[i] = 0;
	t->ovh_n = 0;
	t->ovh_min = t->ovh_max = 0;
	t->cal_failed = 0;
	t->fallback = 0;
}

static uint64_t tab_missed(const struct tab *t)
{
	uint64_t n = 0;

	for (size_t i = 0; i < t->cap; i++)
		if (t->e[i].name)
			n += t->e[i].missed;
	return n;
}

static void tab_free(struct tab *t)
{
	for (size_t i = 0; i < t->cap; i++) {
		free(t->e[i].name);
		free(t->e[i].comm);
		free(t->e[i].h);
		free(t->e[i].prev);
	}
	free(t->e);
	for (int i = 0; t->unprobed_why && i < t->nspec; i++)
		free(t->unprobed_why[i]);
	free(t->unprobed_why);
	free(t->unprobed);
}

static void add_figures(struct fn *f, uint64_t calls, uint64_t total,
			uint64_t min_inv, uint64_t max)
{
	f->calls += calls;
	f->total += total;
	if (min_inv > f->min_inv)
		f->min_inv = min_inv;
	if (max > f->max)
		f->max = max;
}

/*
 * A cell's histogram into @f's (prof/hist.h's first PKA_TIME_BUCKETS
 * buckets). A live process's cell is read while its thread writes it, so
 * its fields are of different moments; its calls are taken as the sum of
 * the buckets read, not as its calls field: each bucket only grows, so
 * that sum grows from one reading to the next, and an interval's calls
 * (this sum's growth plus the slot's) are never fewer than its
 * histogram's (the buckets' growth). The calls field read after the
 * buckets could be ahead of them, and the next interval's buckets then
 * ahead of its calls (the difference wrapped: "18446744073709551615 calls
 * without histogram").
 */
static int add_cell(struct tab *t, struct fn *f, const struct pka_time_cell *c)
{
	uint64_t n = 0;

	if (!f->h && !(f->h = calloc(1, sizeof(*f->h)))) {
		t->oom = 1;
		return -1;
	}
	for (unsigned int j = 0; j < PKA_TIME_BUCKETS; j++) {
		uint32_t b = __atomic_load_n(&c->bucket[j], __ATOMIC_RELAXED);

		f->h->bucket[j] += b;
		n += b;
	}
	f->cells++;
	f->h->count += n;
	f->h->sum += c->total_ns;
	if (c->min_inv > f->h->min_inv)
		f->h->min_inv = c->min_inv;
	if (c->max_ns > f->h->max)
		f->h->max = c->max_ns;
	add_figures(f, n, c->total_ns, c->min_inv, c->max_ns);
	return 0;
}

/* The time area of @h, checked against the record's size, or NULL. */
static const struct pka_time_area *area_of(const struct pka_header *h)
{
	const struct pka_time_area *a;

	if (h->mode_len < sizeof(*a))
		return NULL;
	a = (const void *)((const char *)h + h->mode_at);
	if (a->thr_size < pka_time_thr_size(h->nprobe) ||
	    a->thr_at < h->mode_at + sizeof(*a) ||
	    (uint64_t)a->thr_at + (uint64_t)a->nthr * a->thr_size > a->cell_at ||
	    (uint64_t)a->cell_at + (uint64_t)a->ncell *
	    sizeof(struct pka_time_cell) > h->size)
		return NULL;
	return a;
}

/*
 * Sum a record into the table: per probe, its slot and the cells the
 * thread blocks name (a cell is read only through its block, which names
 * it after its probe was set).
 */
static void add_rec(const struct pka_header *h, void *arg)
{
	struct ctx *c = arg;
	struct tab *t = c->tab;
	struct pka_header *w = (struct pka_header *)h;
	const struct pka_time_area *a = area_of(h);
	const char *comm = "";
	char cbuf[sizeof(h->comm) + 1];

	if (!a)
		return;
	if (t->by_comm) {
		memcpy(cbuf, h->comm, sizeof(h->comm));
		cbuf[sizeof(h->comm)] = 0;
		comm = cbuf;
	}
	if (a->cal_status)
		t->cal_failed++;
	else {
		if (!t->ovh_n || a->overhead_ns < t->ovh_min)
			t->ovh_min = a->overhead_ns;
		if (!t->ovh_n || a->overhead_ns > t->ovh_max)
			t->ovh_max = a->overhead_ns;
		t->ovh_n++;
	}
	if (a->source != PK_TSC_SRC_TSC)
		t->fallback++;
	for (uint32_t i = 0; i < h->n; i++) {
		const struct pka_spec *s = pka_record_spec(w, i);

		if (s->first > h->nprobe || s->nprobe > h->nprobe - s->first)
			continue;
		for (uint32_t k = s->first; k < s->first + s->nprobe; k++) {
			const struct pka_probe *p = pka_record_probe(w, k);
			const struct pka_time *sl = pka_record_slot(w, k);
			const char *name = c->run->specs[i];
			struct fn *f;

			/* Armed, but not on all of its functions (as count). */
			if (p->status && p->status != PKA_PENDING && !s->status &&
			    (int)i < t->nspec)
				pkc_note_unprobed(w, i, p, &t->unprobed[i],
						  &t->unprobed_why[i]);
			/* Another spec's probes (a function is probed once). */
			if (p->status || p->spec != i)
				continue;
			if (p->name && p->name <= h->why_len)
				name = (const char *)h + h->why_at + p->name - 1;
			f = fn_get(t, i, name, comm);
			if (!f)
				return;
			f->int3 |= p->int3 != 0;
			add_figures(f, sl->calls, sl->total_ns, sl->min_inv,
				    sl->max_ns);
			f->nohist += sl->calls;
			f->missed += sl->missed;
			for (uint32_t b = 0; b < a->nthr; b++) {
				const struct pka_time_thread *th = (const void *)
					((const char *)h + a->thr_at +
					 (uint64_t)b * a->thr_size);
				uint32_t at = th->cell[k];
				const struct pka_time_cell *cl;

				if (!at || at > a->ncell)
					continue;
				cl = (const struct pka_time_cell *)
				     ((const char *)h + a->cell_at) + (at - 1);
				if (cl->probe == k && add_cell(t, f, cl))
					return;
			}
		}
	}
}

/* ------------------------------------------------------------ output */

/* @ns in the unit that shows it best, into @buf. */
static const char *dur(char *buf, size_t len, uint64_t ns)
{
	struct pk_hist_unit u = pk_hist_unit(ns);

	double v = (double)ns / (double)u.ns;

	/* Four or five significant digits, whatever the unit. */
	if (u.ns == 1)
		snprintf(buf, len, "%llu ns", (unsigned long long)ns);
	else
		snprintf(buf, len, "%.*f %s", v < 100 ? 2 : v < 1000 ? 1 : 0, v,
			 u.name);
	return buf;
}

/* The figures of one function over what @h holds (an interval or all). */
struct figs {
	uint64_t calls, total, min, max, p50, p90, p99, p999, nohist;
	uint64_t missed;	/* all of the run only */
	double mean;
};

static void figs_of(const struct fn *f, const struct pk_hist *h, int interval,
		    struct figs *g)
{
	memset(g, 0, sizeof(*g));
	if (interval) {
		/* An interval: the histogram's only (slots are not in it). */
		g->calls = f->calls > f->prev_calls ? f->calls - f->prev_calls : 0;
		g->total = f->total > f->prev_total ? f->total - f->prev_total : 0;
		/* Never wraps (add_cell()): clamped all the same. */
		g->nohist = h && h->count >= g->calls ? 0 :
			    g->calls - (h ? h->count : 0);
		g->min = h && h->count ? pk_hist_min(h) : 0;
		g->max = h ? h->max : 0;
	} else {
		g->calls = f->calls;
		g->total = f->total;
		g->nohist = f->nohist;
		g->missed = f->missed;
		g->min = f->calls ? ~f->min_inv : 0;
		g->max = f->max;
	}
	g->mean = g->calls ? (double)g->total / (double)g->calls : 0;
	if (h && h->count) {
		g->p50 = pk_hist_value_at(h, 0.5);
		g->p90 = pk_hist_value_at(h, 0.9);
		g->p99 = pk_hist_value_at(h, 0.99);
		g->p999 = pk_hist_value_at(h, 0.999);
	}
}

static int by_total(const void *a, const void *b)
{
	const struct fn *x = *(const struct fn *const *)a;
	const struct fn *y = *(const struct fn *const *)b;

	if (x->total != y->total)
		return x->total > y->total ? -1 : 1;
	if (x->spec != y->spec)
		return x->spec < y->spec ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* The entries, most total time first; NULL without memory. */
static struct fn **sorted(const struct tab *t)
{
	struct fn **v = calloc(t->n ? t->n : 1, sizeof(*v));
	size_t k = 0;

	if (!v)
		return NULL;
	for (size_t i = 0; i < t->cap; i++)
		if (t->e[i].name)
			v[k++] = &t->e[i];
	qsort(v, k, sizeof(*v), by_total);
	return v;
}

static void json_figs(FILE *o, const struct figs *g)
{
	fprintf(o, "\"calls\":%llu,\"total_ns\":%llu,\"mean_ns\":%.1f,"
		   "\"min_ns\":%llu,\"max_ns\":%llu,\"p50_ns\":%llu,"
		   "\"p90_ns\":%llu,\"p99_ns\":%llu,\"p99.9_ns\":%llu",
		(unsigned long long)g->calls, (unsigned long long)g->total,
		g->mean, (unsigned long long)g->min, (unsigned long long)g->max,
		(unsigned long long)g->p50, (unsigned long long)g->p90,
		(unsigned long long)g->p99, (unsigned long long)g->p999);
	if (g->nohist)
		fprintf(o, ",\"calls_without_histogram\":%llu",
			(unsigned long long)g->nohist);
	if (g->missed)
		fprintf(o, ",\"calls_not_timed\":%llu",
			(unsigned long long)g->missed);
}

/* The non-empty buckets, as [low_ns, high_ns, count] triples. */
static void json_hist(FILE *o, const struct pk_hist *h)
{
	int first = 1;

	fprintf(o, ",\"hist\":[");
	for (unsigned int j = 0; h && j < PK_HIST_BUCKETS; j++) {
		if (!h->bucket[j])
			continue;
		fprintf(o, "%s[%llu,%llu,%llu]", first ? "" : ",",
			(unsigned long long)pk_hist_bucket_low(j),
			(unsigned long long)pk_hist_bucket_high(j),
			(unsigned long long)h->bucket[j]);
		first = 0;
	}
	fputc(']', o);
}

/* The histogram to report for @f: all of it, or the interval's in @tmp. */
static const struct pk_hist *hist_for(const struct fn *f, int interval,
				      struct pk_hist *tmp)
{
	if (!f->h)
		return NULL;
	if (!interval)
		return f->h;
	if (f->prev)
		pk_hist_sub(tmp, f->h, f->prev);
	else
		memcpy(tmp, f->h, sizeof(*tmp));
	return tmp;
}

static void text_table(FILE *o, struct ctx *c, struct fn **v, size_t n,
		       int interval)
{
	static struct pk_hist tmp;
	char b[9][32];
	size_t idle = 0;

	const char *warn = pkc_sgr(c->col, PKC_SGR_WARN);
	const char *off = pkc_sgr(c->col, PKC_SGR_OFF);

	fprintf(o, " %s%12s %11s %11s %11s %11s %11s %11s %11s %11s  %s%s\n",
		pkc_sgr(c->col, PKC_SGR_HEAD), "calls", "total", "mean", "min",
		"max", "p50", "p90", "p99", "p99.9", "function", off);
	for (size_t k = 0; k < n; k++) {
		const struct fn *f = v[k];
		const struct pk_hist *h = hist_for(f, interval, &tmp);
		struct figs g;

		figs_of(f, h, interval, &g);
		if (!g.calls && !g.missed) {
			idle++;
			continue;
		}
		fprintf(o, " %12llu %11s %11s %11s %11s %11s %11s %11s %11s  %s",
			(unsigned long long)g.calls, dur(b[0], 32, g.total),
			dur(b[1], 32, (uint64_t)(g.mean + 0.5)), dur(b[2], 32, g.min),
			dur(b[3], 32, g.max), dur(b[4], 32, g.p50),
			dur(b[5], 32, g.p90), dur(b[6], 32, g.p99),
			dur(b[7], 32, g.p999), f->name);
		/* Which spec, where several could have named it. */
		if (c->run->n > 1 && strpbrk(c->run->specs[f->spec], "*?["))
			fprintf(o, "  [%s]", c->run->specs[f->spec]);
		if (f->int3)
			fprintf(o, "  %s(int3 probe: ~1 us a call to the program)%s",
				warn, off);
		if (g.nohist)
			fprintf(o, "  %s(%llu calls without histogram: percentiles "
				   "of the others)%s", warn,
				(unsigned long long)g.nohist, off);
		if (g.missed)
			fprintf(o, "  %s(%llu calls not timed: return-probe "
				   "depth/threads)%s", warn,
				(unsigned long long)g.missed, off);
		fputc('\n', o);
	}
	if (idle && !interval)
		fprintf(o, " %12s  (%zu more function%s probed, no call returned)\n",
			"", idle, idle == 1 ? "" : "s");
	if (!c->hist)
		return;
	for (size_t k = 0; k < n; k++) {
		const struct pk_hist *h = hist_for(v[k], interval, &tmp);
		char title[4200];

		if (!h || !h->count)
			continue;
		snprintf(title, sizeof(title), "\n@%s", v[k]->name);
		pk_hist_print(o, h, title);
	}
}

static void ovh_text(FILE *o, const struct tab *t)
{
	if (t->ovh_n && t->ovh_min == t->ovh_max)
		fprintf(o, "; timing overhead %llu ns a call, subtracted",
			(unsigned long long)t->ovh_min);
	else if (t->ovh_n)
		fprintf(o, "; timing overhead %llu-%llu ns a call, subtracted",
			(unsigned long long)t->ovh_min,
			(unsigned long long)t->ovh_max);
	if (t->cal_failed)
		fprintf(o, "; overhead unknown in %d process%s", t->cal_failed,
			t->cal_failed == 1 ? "" : "es");
	if (t->fallback)
		fprintf(o, "; CLOCK_MONOTONIC_RAW (no invariant TSC)");
}

/* The object of a function's name or spec: "OBJECT:NAME"'s OBJECT, or NULL. */
static const char *object_of(const char *s, char *buf, size_t len)
{
	const char *colon = pk_spec_obj_colon(s);

	if (!colon || (size_t)(colon - s) >= len)
		return NULL;
	memcpy(buf, s, (size_t)(colon - s));
	buf[colon - s] = 0;
	return buf;
}

static int write_om(struct ctx *c)
{
	struct tab *t = c->tab;
	struct pk_om_series *s = calloc(t->n ? t->n : 1, sizeof(*s));
	char (*objs)[256] = calloc(t->n ? t->n : 1, sizeof(*objs));
	struct fn **v = sorted(t);
	int err = -ENOMEM;

	if (s && objs && v) {
		for (size_t k = 0; k < t->n; k++) {
			const struct fn *f = v[k];
			const char *colon = pk_spec_obj_colon(f->name);

			s[k].function = colon ? colon + 1 : f->name;
			s[k].object = object_of(f->name, objs[k], sizeof(objs[k]));
			if (!s[k].object)
				s[k].object = object_of(c->run->specs[f->spec],
							objs[k], sizeof(objs[k]));
			s[k].process = f->comm[0] ? f->comm : NULL;
			s[k].calls = f->calls;
			s[k].hist = f->h;
		}
		err = c->out_path ? pk_om_write_file(c->out_path, s, t->n, NULL)
				  : pk_om_write(c->out, s, t->n, NULL);
	}
	free(v);
	free(objs);
	free(s);
	return err;
}

static void report(struct ctx *c, int status, int procs)
{
	struct tab *t = c->tab;
	struct pkc_run *r = c->run;
	FILE *o = c->out;
	struct fn **v = sorted(t);

	if (!v) {
		c->failed = ENOMEM;
		return;
	}
	if (c->fmt == F_JSON) {
		fprintf(o, "{\"command\":[");
		for (int i = 0; c->argv[i]; i++) {
			if (i)
				fputc(',', o);
			pkc_json_str(o, c->argv[i]);
		}
		fprintf(o, "],\"exit_status\":%d,\"processes\":%d", status,
			procs);
		if (c->timed_out)
			fprintf(o, ",\"duration_s\":%g", c->dur_s);
		if (t->ovh_n)
			fprintf(o, ",\"overhead_ns_per_call\":%llu,"
				   "\"overhead_ns_per_call_max\":%llu",
				(unsigned long long)t->ovh_min,
				(unsigned long long)t->ovh_max);
		else
			fprintf(o, ",\"overhead_ns_per_call\":null");
		fprintf(o, ",\"clock\":\"%s\",\"probes\":[",
			t->fallback ? "CLOCK_MONOTONIC_RAW" : "tsc");
		for (int i = 0; i < r->n; i++) {
			uint64_t calls = 0, total = 0;
			int first = 1;

			for (size_t k = 0; k < t->n; k++)
				if (v[k]->spec == (uint32_t)i) {
					calls += v[k]->calls;
					total += v[k]->total;
				}
			fprintf(o, "%s{\"spec\":", i ? "," : "");
			pkc_json_str(o, c->t[i].spec);
			fprintf(o, ",\"calls\":%llu,\"total_ns\":%llu,"
				   "\"armed_in\":%d,\"int3_in\":%d,\"failed_in\":%d",
				(unsigned long long)calls, (unsigned long long)total,
				c->t[i].armed, c->t[i].int3, c->t[i].failed);
			if (c->t[i].failed) {
				fprintf(o, ",\"error\":");
				pkc_json_str(o, c->t[i].why[0] ? c->t[i].why :
					     strerror(c->t[i].last_err));
			}
			if (t->unprobed[i]) {
				fprintf(o, ",\"not_probed\":%llu,\"not_probed_error\":",
					t->unprobed[i]);
				pkc_json_str(o, t->unprobed_why[i] ?
					     t->unprobed_why[i] : "");
			}
			fprintf(o, ",\"functions\":[");
			for (size_t k = 0; k < t->n; k++) {
				struct figs g;

				if (v[k]->spec != (uint32_t)i)
					continue;
				figs_of(v[k], v[k]->h, 0, &g);
				fprintf(o, "%s{\"name\":", first ? "" : ",");
				pkc_json_str(o, v[k]->name);
				fputc(',', o);
				json_figs(o, &g);
				/* Thread blocks: a thread taking over a gone one's is one. */
				fprintf(o, ",\"threads\":%u", v[k]->cells);
				if (v[k]->int3)
					fprintf(o, ",\"int3\":true");
				if (c->hist)
					json_hist(o, v[k]->h);
				fputc('}', o);
				first = 0;
			}
			fprintf(o, "]}");
		}
		fputc(']', o);
		pkc_run_json_procs(r, o);
		fprintf(o, "}\n");
		free(v);
		return;
	}
	c->col = pkc_color_for(o, 0);
	fprintf(o, "\n probekit time: %d process%s, exit status %d", procs,
		procs == 1 ? "" : "es", status);
	if (r->not_counted)
		fprintf(o, " %s(%d more not timed)%s",
			pkc_sgr(c->col, PKC_SGR_WARN), r->not_counted,
			pkc_sgr(c->col, PKC_SGR_OFF));
	if (c->timed_out)
		fprintf(o, "; stopped after %g s", c->dur_s);
	ovh_text(o, t);
	fprintf(o, "\n\n");
	text_table(o, c, v, t->n, 0);
	for (int i = 0; i < r->n; i++) {
		const char *bad = pkc_sgr(c->col, PKC_SGR_BAD);
		const char *off = pkc_sgr(c->col, PKC_SGR_OFF);

		if (c->t[i].failed)
			fprintf(o, " %s%s: not probed in %d of %d: %s%s\n", bad,
				c->t[i].spec, c->t[i].failed, procs,
				c->t[i].why[0] ? c->t[i].why
					       : strerror(c->t[i].last_err), off);
		else if (!c->t[i].armed)
			fprintf(o, " %s%s: not probed%s\n", bad, c->t[i].spec,
				off);
		if (t->unprobed[i])
			fprintf(o, " %s%s: %llu of its functions not probed%s%s%s\n",
				bad, c->t[i].spec, t->unprobed[i],
				t->unprobed_why[i] ? ", first: " : "",
				t->unprobed_why[i] ? t->unprobed_why[i] : "", off);
	}
	free(v);
}

/* Save each entry's figures as the previous interval's. */
static void remember(struct tab *t)
{
	for (size_t i = 0; i < t->cap; i++) {
		struct fn *f = &t->e[i];

		if (!f->name)
			continue;
		f->prev_calls = f->calls;
		f->prev_total = f->total;
		if (!f->h)
			continue;
		if (!f->prev && !(f->prev = malloc(sizeof(*f->prev)))) {
			t->oom = 1;
			continue;
		}
		memcpy(f->prev, f->h, sizeof(*f->prev));
	}
}

static void tick(double el, void *arg)
{
	struct ctx *c = arg;
	struct pkc_run *r = c->run;

	if (c->dur_s > 0 && el >= c->dur_s && !c->timed_out) {
		c->timed_out = 1;
		kill(r->pid, SIGTERM);
	}
	if (c->failed || !c->hist_interval_ms)
		return;
	/* Ticking faster than -I for -d: report only once an interval is up. */
	if (el + (double)c->tick_ms / 2000 < c->next_iv)
		return;
	c->next_iv += (double)c->hist_interval_ms / 1000;
	if (c->next_iv < el)
		c->next_iv = el + (double)c->hist_interval_ms / 1000;
	/* The progress line, if shown, comes back at the next update. */
	pkc_progress_clear();
	c->col = pkc_color_for(c->out, c->fmt != F_TEXT);
	memset(c->t, 0, (size_t)r->n * sizeof(*c->t));
	tab_zero(c->tab);
	pkc_run_collect(r, c->t, 0, add_rec, c);
	if (c->fmt == F_OM) {
		int err = write_om(c);

		if (err)
			c->failed = -err;
	} else if (c->fmt == F_JSON) {
		struct fn **v = sorted(c->tab);
		static struct pk_hist tmp;
		int first = 1;

		fprintf(c->out, "{\"interval_s\":%.3f,\"functions\":[", el);
		for (size_t k = 0; v && k < c->tab->n; k++) {
			const struct pk_hist *h = hist_for(v[k], 1, &tmp);
			struct figs g;

			figs_of(v[k], h, 1, &g);
			if (!g.calls)
				continue;
			fprintf(c->out, "%s{\"name\":", first ? "" : ",");
			pkc_json_str(c->out, v[k]->name);
			fputc(',', c->out);
			json_figs(c->out, &g);
			if (c->hist)
				json_hist(c->out, h);
			fputc('}', c->out);
			first = 0;
		}
		fprintf(c->out, "]}\n");
		free(v);
	} else {
		struct fn **v = sorted(c->tab);

		size_t busy = 0;

		for (size_t k = 0; v && k < c->tab->n; k++)
			busy += v[k]->calls != v[k]->prev_calls;
		fprintf(c->out, "\n %.3f s:%s\n", el,
			busy ? "" : " no call returned");
		if (v && busy)
			text_table(c->out, c, v, c->tab->n, 1);
		free(v);
	}
	remember(c->tab);
	if (c->fmt != F_OM && (fflush(c->out) || ferror(c->out)))
		c->failed = errno ? errno : EIO;
	c->prev_el = el;
}

/* The clock for the agent: calibrated here once (prof/tsc.h). */
static void set_clock(void)
{
	struct pk_tsc clk;
	char buf[96];

	pk_tsc_init(&clk, 0);
	snprintf(buf, sizeof(buf), "%u:%llu:%u", clk.source,
		 (unsigned long long)clk.mult, clk.shift);
	setenv(PKA_ENV_CLOCK, buf, 1);
}

static int usage_error(const char *msg)
{
	pkc_err("%s\n", msg);
	pkc_usage(stderr, &pkc_cmd_time);
	return PKC_EXIT_OWN;
}

static int time_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "probe", required_argument, NULL, 'p' },
		{ "probes", required_argument, NULL, 'P' },
		{ "json", no_argument, NULL, 'j' },
		{ "hist", no_argument, NULL, 'H' },
		{ "format", required_argument, NULL, 'f' },
		{ "output", required_argument, NULL, 'o' },
		{ "interval", required_argument, NULL, 'I' },
		{ "duration", required_argument, NULL, 'd' },
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
		.mode_name = "time",
		.mode = PKA_MODE_TIME,
		.slot = sizeof(struct pka_time),
		.area = pka_time_area_size,
	};
	struct tab tab = { 0 };
	struct ctx c = { .run = &r, .tab = &tab, .fmt = F_TEXT };
	int code = PKC_EXIT_OWN, ch, procs, wrote, om_err = 0, quiet = 0;
	long interval_ms = 0, tick_ms;
	FILE *out = stderr;

	while ((ch = getopt_long(argc, argv, "+p:P:jo:hI:d:q", longopts, NULL)) != -1) {
		char *end;

		switch (ch) {
		case 'p':
			if (pkc_spec_add(&l, optarg, "-p"))
				goto out;
			break;
		case 'P':
			if (pkc_spec_file(&l, optarg))
				goto out;
			break;
		case 'j':
			c.fmt = F_JSON;
			break;
		case 'H':
			c.hist = 1;
			break;
		case 'f':
			if (!strcmp(optarg, "text"))
				c.fmt = F_TEXT;
			else if (!strcmp(optarg, "json"))
				c.fmt = F_JSON;
			else if (!strcmp(optarg, "openmetrics"))
				c.fmt = F_OM;
			else {
				pkc_err("--format %s: unknown "
					"(text, json or openmetrics)\n", optarg);
				goto out;
			}
			break;
		case 'o':
			c.out_path = optarg;
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
		case 'I':
			errno = 0;
			interval_ms = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || interval_ms < 10 ||
			    interval_ms > 3600000) {
				pkc_err("-I wants milliseconds, "
						"10 to 3600000\n");
				goto out;
			}
			break;
		case 'd':
			errno = 0;
			c.dur_s = strtod(optarg, &end);
			if (errno || end == optarg || *end || !(c.dur_s >= 0.01) ||
			    c.dur_s > 31536000) {
				pkc_err("-d wants seconds, "
						"0.01 to 31536000\n");
				goto out;
			}
			break;
		case 'h':
			pkc_usage(stdout, &pkc_cmd_time);
			code = 0;
			goto out;
		default:
			pkc_usage(stderr, &pkc_cmd_time);
			goto out;
		}
	}
	if (!l.n || optind >= argc) {
		code = usage_error(!l.n ? "no probe given (-p NAME)"
					: "no command given");
		goto out;
	}
	tab.by_comm = c.fmt == F_OM;
	r.specs = l.v;
	r.n = l.n;
	if (pkc_run_find_agent(&r))
		goto out;
	c.t = calloc((size_t)r.n, sizeof(*c.t));
	tab.nspec = r.n;
	tab.unprobed = calloc((size_t)r.n, sizeof(*tab.unprobed));
	tab.unprobed_why = calloc((size_t)r.n, sizeof(*tab.unprobed_why));
	if (!c.t || !tab.unprobed || !tab.unprobed_why) {
		pkc_err("%s\n", strerror(ENOMEM));
		goto out;
	}
	/* OpenMetrics to a file is written whole, by rename (prof/openmetrics.h). */
	if (c.out_path && c.fmt != F_OM && !(out = fopen(c.out_path, "we"))) {
		pkc_err("%s: %s\n", c.out_path, strerror(errno));
		out = stderr;
		goto out;
	}
	/* Where FILE.tmp will be made, before COMMAND runs, as count does -o. */
	if (c.out_path && c.fmt == F_OM) {
		char tmp[4200];
		FILE *t;

		snprintf(tmp, sizeof(tmp), "%s.tmp", c.out_path);
		t = fopen(tmp, "we");
		if (!t) {
			pkc_err("%s: %s\n", tmp, strerror(errno));
			goto out;
		}
		fclose(t);
		unlink(tmp);
	}
	set_clock();
	pkc_progress_init(quiet);
	code = pkc_run_start(&r, &argv[optind]);
	if (code)
		goto out;
	c.out = out;
	c.argv = &argv[optind];
	c.hist_interval_ms = interval_ms;
	/* -d is looked at every 50 ms at least, whatever -I is. */
	tick_ms = interval_ms;
	if (c.dur_s > 0 && (!tick_ms || tick_ms > 50))
		tick_ms = 50;
	c.tick_ms = tick_ms;
	c.next_iv = (double)interval_ms / 1000;
	code = pkc_run_wait(&r, tick_ms, tick_ms ? tick : NULL, &c);

	memset(c.t, 0, (size_t)r.n * sizeof(*c.t));
	for (int i = 0; i < r.n; i++)
		c.t[i].spec = l.v[i];
	tab_zero(&tab);
	procs = pkc_run_collect(&r, c.t, 1, add_rec, &c);
	pkc_run_end(&r);
	pkc_run_check(&r, procs, c.t);
	/* Calls the return probes could not time are missing figures too. */
	if (tab_missed(&tab)) {
		char line[160];

		snprintf(line, sizeof(line), "%llu calls not timed "
			 "(return-probe depth/threads)",
			 (unsigned long long)tab_missed(&tab));
		pkc_run_problem(&r, line);
	}
	if (tab.oom)
		c.failed = ENOMEM;
	if (!c.failed && c.fmt == F_OM)
		om_err = write_om(&c);
	else if (!c.failed)
		report(&c, code, procs);
	if (om_err) {
		pkc_err("cannot write %s: %s\n",
			c.out_path ? c.out_path : "standard error",
			strerror(-om_err));
		wrote = PKC_EXIT_OWN;
	} else {
		wrote = pkc_report_done(out, c.fmt == F_OM ? NULL : c.out_path,
					c.failed);
	}
	out = stderr;
	/* -d ran out: timeout(1)'s status. */
	if (c.timed_out)
		code = 124;
	code = pkc_run_verdict(&r, code);
	if (wrote)
		code = wrote;
out:
	if (out != stderr)
		fclose(out);
	pkc_run_free(&r);
	free(c.t);
	tab_free(&tab);
	pkc_spec_list_free(&l);
	return code;
}

const struct pkc_cmd pkc_cmd_time = {
	.name = "time",
	.synopsis = "time [-p SPEC]... [-P FILE]... [--hist] [-I MS] [-d SECONDS]\n"
		    "         [--json | --format text|json|openmetrics] [-o FILE] [--strict]\n"
		    "         [--wait-all] [-q] [--color[=WHEN]] -- COMMAND [ARG]...",
	.help =
		"Times calls of functions while COMMAND runs, in every process it starts:\n"
		"calls, total, mean, min, max, p50/p90/p99/p99.9 (within 1.6 %), by total.\n"
		"  -p, --probe SPEC  a function: NAME or OBJECT:NAME, or a glob ('lzma_*')\n"
		"  -P, --probes FILE the specs in FILE, one a line (- for stdin; # comments)\n"
		"      --hist        also print each function's histogram (power-of-2 rows)\n"
		"  -I, --interval MS also report each interval's figures every MS ms\n"
		"                    (openmetrics: rewrite the file, totals so far)\n"
		"  -d, --duration S  stop COMMAND (SIGTERM) after S seconds; exit status 124\n"
		"  -j, --json        the report as one JSON object (a line per interval)\n"
		"      --format F    text (default), json, or openmetrics (OpenMetrics text;\n"
		"                    with -o written to FILE.tmp and renamed over FILE)\n"
		"  -o, --output FILE the report to FILE instead of stderr\n"
		"      --strict      exit 125 if anything is missing from the figures\n"
		"      --wait-all    once COMMAND ended, wait for its descendants too\n"
		"  -q, --quiet       no progress line on the terminal while probes are armed\n"
		"      --color[=WHEN] colour the text report: auto (a terminal, NO_COLOR\n"
		"                    unset), always, never\n",
	.main = time_main,
};
