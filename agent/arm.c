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
	char *why;

	(void)ctx;
	if (level != PK_LOG_ERROR || cur_spec < 0)
		return;
	why = pka_spec_why(log_rec, (uint32_t)cur_spec);
	/* Whole: pk_log() lines are shorter than PKA_WHY_LEN. */
	if (why && !why[0])
		snprintf(why, PKA_WHY_LEN, "%s", msg);
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
	struct pk_probe *probes[PKA_MAX];
	int idx[PKA_MAX], armed = 0, rc;
	char *list, *save = NULL, *s;
	uint32_t n = 0;

	list = strdup(specs);
	if (!list)
		return;
	for (s = strtok_r(list, sep, &save); s && n < PKA_MAX;
	     s = strtok_r(NULL, sep, &save), n++) {
		PK_OPTS(pk_probe_opts, o, .symbol = s);
		struct pk_probe_info info = { .sz = sizeof(info) };
		/* Named in another process of the run: no lookup (xcache.c). */
		void *at = pka_xcache_spec_get(s);

		if (at) {
			o.symbol = NULL;
			o.addr = at;
		}
		m->probe(h, n, &o);
		cur_spec = (int)n;
		h->spec[n].status = pk_probe_create(&o, &probes[armed]);
		if (h->spec[n].status)
			continue;
		pk_probe_get_info(probes[armed], &info);
		if (!at)
			pka_xcache_spec_put(s, (void *)info.func);
		h->spec[n].int3 = info.kind == PK_PROBE_INT3;
		idx[armed++] = (int)n;
	}
	h->n = n;
	cur_spec = -1;
	free(list);
	if (!armed)
		return;

	/* All in one text batch; if the batch fails, say so for each. */
	rc = pk_probe_register(probes, (size_t)armed);
	for (int i = 0; rc && i < armed; i++) {
		h->spec[idx[i]].status = rc;
		pk_probe_destroy(probes[i]);
	}
}
