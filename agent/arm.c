// SPDX-License-Identifier: MIT
/* arm.c - the agent arms a run's spec list as one batch, recording each spec's result and failure line. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"

/* Set once by pka_log_quiet(), before any probe is created. */
static struct pka_header *log_rec;
/* The spec whose failure a log line explains; -1: none (drop the line). */
static int cur_spec = -1;

/* Keep the first error line per spec; stay silent on the program's stderr. */
static void quiet_log(enum pk_log_level level, const char *msg, void *ctx)
{
	(void)ctx;
	if (level != PK_LOG_ERROR || cur_spec < 0)
		return;
	/* Whole: pk_log() lines are shorter than PKA_WHY_LEN. */
	pka_record_why(log_rec, (uint32_t)cur_spec, msg);
}

void pka_log_quiet(struct pka_header *h)
{
	log_rec = h;
	pk_set_log(quiet_log, NULL);
}

void pka_arm(struct pka_header *h, const char *specs,
	     const struct pka_mode_ops *m)
{
	const char sep[] = { PKA_SEP, 0 };
	/* As many as the record has room for: memory proportional to them. */
	struct pk_probe **probes = calloc(h->nspec, sizeof(*probes));
	uint32_t *idx = calloc(h->nspec, sizeof(*idx));
	char *list = strdup(specs), *save = NULL, *s;
	uint32_t n = 0, armed = 0;
	int rc;

	if (!probes || !idx || !list)
		goto out;
	for (s = strtok_r(list, sep, &save); s && n < h->nspec;
	     s = strtok_r(NULL, sep, &save), n++) {
		PK_OPTS(pk_probe_opts, o, .symbol = s);
		struct pk_probe_info info = { .sz = sizeof(info) };
		struct pka_spec *sp = pka_record_spec(h, n);
		/* Named in another process of the run: no lookup (xcache.c). */
		void *at = pka_xcache_spec_get(s);

		if (at) {
			o.symbol = NULL;
			o.addr = at;
		}
		m->probe(h, sp->first, &o);
		cur_spec = (int)n;
		sp->status = pk_probe_create(&o, &probes[armed]);
		pka_record_probe(h, sp->first)->status = sp->status;
		if (sp->status)
			continue;
		pk_probe_get_info(probes[armed], &info);
		if (!at)
			pka_xcache_spec_put(s, (void *)info.func);
		sp->int3 = info.kind == PK_PROBE_INT3;
		pka_record_probe(h, sp->first)->int3 = sp->int3;
		idx[armed++] = n;
	}
	h->n = n;
	cur_spec = -1;
	if (!armed)
		goto out;

	/* All in one text batch; if the batch fails, say so for each. */
	rc = pk_probe_register(probes, armed);
	for (uint32_t i = 0; rc && i < armed; i++) {
		pka_record_spec(h, idx[i])->status = rc;
		pka_record_probe(h, pka_record_spec(h, idx[i])->first)->status = rc;
		pk_probe_destroy(probes[i]);
	}
out:
	free(list);
	free(idx);
	free(probes);
}
