// SPDX-License-Identifier: MIT
/* agent.c - libprobekit-agent.so: preloaded by the probekit command, serves the mode it names in every process of COMMAND. */

/*
 * Runs from a constructor, before the program's main(), in every process
 * of the command (LD_PRELOAD and the PROBEKIT_AGENT_* variables are
 * inherited; see protocol.h). It must never break the program: whatever
 * goes wrong is written into the process's record for the command to
 * report, and nothing is printed.
 *
 * Functions of libraries the program dlopen()s after start-up are not
 * loaded yet when the constructor runs: those specs fail with -ENOENT
 * then, and are armed when such a library is loaded, before its code
 * runs, if the command put the audit module in LD_AUDIT (late.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"

/* Every mode this agent serves. */
static const struct pka_mode_ops *const modes[] = {
	&pka_mode_count,
};

#define N_MODES (sizeof(modes) / sizeof(modes[0]))

static const struct pka_mode_ops *find_mode(const char *name)
{
	for (size_t i = 0; name && i < N_MODES; i++)
		if (!strcmp(modes[i]->name, name))
			return modes[i];
	return NULL;
}

/* Say in the record why this process serves nothing, and which modes exist. */
static void refuse(struct pka_header *h, const char *name)
{
	size_t len = sizeof(h->why);
	int at;

	at = snprintf(h->why, len, "no mode '%s' (modes:", name);
	for (size_t i = 0; i < N_MODES && at > 0 && (size_t)at < len; i++)
		at += snprintf(h->why + at, len - (size_t)at, " %s",
			       modes[i]->name);
	if (at > 0 && (size_t)at < len)
		snprintf(h->why + at, len - (size_t)at, ")");
	h->mode = PKA_MODE_NONE;
	h->status = -EINVAL;
}

__attribute__((constructor)) static void pka_init(void)
{
	const char *dir = secure_getenv(PKA_ENV_DIR);
	const char *name = secure_getenv(PKA_ENV_MODE);
	const char *specs_file = secure_getenv(PKA_ENV_SPECS);
	const struct pka_mode_ops *m = find_mode(name);
	const char *specs;
	struct pka_header *h;

	/* Not started by probekit: nothing at all, not even a lookup. */
	if (!dir || !name || !specs_file)
		return;
	pka_busy++;	/* all of what follows is the agent's own work */
	/*
	 * Started by a program that passed on only part of probekit's
	 * environment (or no room for a record): do nothing, as if not
	 * preloaded. Only a mode named but unknown is refused.
	 */
	specs = pka_specs_map(specs_file);
	if (!specs || !(h = pka_record_open(dir, m ? m->size : 0, specs)))
		goto out;
	h->version = PKA_VERSION;
	pka_log_quiet(h);
	if (m)
		h->mode = m->mode;
	else
		refuse(h, name);
	pka_record_publish(h);
	if (m) {
		pka_zydis_load();
		pka_xcache_open(dir);
		pka_arm(h, specs, m);
		pka_xcache_close();
		pka_late_init(h, dir, specs, m);
	}
out:
	pka_busy--;
}
