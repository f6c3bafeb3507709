// SPDX-License-Identifier: MIT
/* count.c - the agent's "count" mode: a pre-handler that counts entries into each spec's function. */
#include "agent.h"

/*
 * Any thread, any time the function is entered: one relaxed add, unless
 * the call is the agent's own (pka_busy, own.c). General registers only
 * (this file is compiled with -mgeneral-regs-only, agent/CMakeLists.txt),
 * so the probes carry PK_PROBE_F_GPR_ONLY: no vector save per hit.
 */
static void count_hit(struct pk_probe *p, struct pk_regs *regs, void *ctx)
{
	(void)p;
	(void)regs;
	if (pka_busy)
		return;
	__atomic_fetch_add((uint64_t *)ctx, 1, __ATOMIC_RELAXED);
}

static void count_probe(struct pka_header *h, unsigned int i,
			struct pk_probe_opts *o)
{
	struct pka_count *c = pka_record_slot(h, i);

	o->pre = count_hit;
	o->ctx = &c->n;
	o->flags |= PK_PROBE_F_GPR_ONLY;
}

const struct pka_mode_ops pka_mode_count = {
	.name = "count",
	.mode = PKA_MODE_COUNT,
	.size = sizeof(struct pka_count),
	.probe = count_probe,
};
