// SPDX-License-Identifier: MIT
/* agent.c - libprobekit-agent.so, preloaded by `probekit count`: arms a counting probe on each requested function. */

/*
 * Runs from a constructor, before the program's main(), in every process of
 * the command (LD_PRELOAD is inherited). It must never break the program:
 * any failure is written into the counts file for the CLI to report, and
 * nothing is printed. Probes stay armed until the process ends; disarming
 * them in a destructor could race with threads still running.
 *
 * Functions of libraries the program dlopen()s after start-up are not
 * loaded yet when the constructor runs: those specs fail with -ENOENT in
 * that process and the CLI says so.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "protocol.h"
#include "probekit.h"

static struct pkc_file *file;
static int cur_spec = -1;	/* the spec whose failure a log line explains */

static void count_hit(struct pk_probe *p, struct pk_regs *regs, void *ctx)
{
	(void)p;
	(void)regs;
	__atomic_fetch_add((uint64_t *)ctx, 1, __ATOMIC_RELAXED);
}

/* Keep the first error line per spec; stay silent on the program's stderr. */
static void quiet_log(enum pk_log_level level, const char *msg, void *ctx)
{
	(void)ctx;
	if (level != PK_LOG_ERROR || cur_spec < 0 || file->why[cur_spec][0])
		return;
	snprintf(file->why[cur_spec], sizeof(file->why[0]), "%s", msg);
}

static struct pkc_file *open_file(const char *dir)
{
	char path[4096];
	struct pkc_file *f;
	int fd;

	/*
	 * Unique, not <pid>: a program that exec()s in place (env prog,
	 * sh -c "exec prog") keeps the pid and must get a file of its own.
	 */
	if (snprintf(path, sizeof(path), "%s/%d-XXXXXX", dir, (int)getpid()) >=
	    (int)sizeof(path))
		return NULL;
	fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (ftruncate(fd, sizeof(*f))) {
		close(fd);
		return NULL;
	}
	f = mmap(NULL, sizeof(*f), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	return f == MAP_FAILED ? NULL : f;
}

__attribute__((constructor)) static void pkc_init(void)
{
	const char *dir = getenv("PROBEKIT_COUNT_DIR");
	const char *specs = getenv("PROBEKIT_COUNT_PROBES");
	const char sep[] = { PKC_SEP, 0 };
	struct pk_probe *probes[PKC_MAX];
	int idx[PKC_MAX], armed = 0, rc;
	char *list, *save = NULL, *s;
	uint32_t n = 0;

	if (!dir || !specs || !(file = open_file(dir)))
		return;
	list = strdup(specs);
	if (!list)
		return;
	file->version = PKC_VERSION;
	for (int i = 0; i < PKC_MAX; i++)
		file->status[i] = PKC_PENDING;
	__atomic_store_n(&file->magic, PKC_MAGIC, __ATOMIC_RELEASE);
	pk_set_log(quiet_log, NULL);

	for (s = strtok_r(list, sep, &save); s && n < PKC_MAX;
	     s = strtok_r(NULL, sep, &save), n++) {
		PK_OPTS(pk_probe_opts, o, .symbol = s, .pre = count_hit,
			.ctx = &file->count[n].n);
		struct pk_probe_info info = { .sz = sizeof(info) };

		cur_spec = (int)n;
		file->status[n] = pk_probe_create(&o, &probes[armed]);
		if (file->status[n])
			continue;
		pk_probe_get_info(probes[armed], &info);
		file->int3[n] = info.kind == PK_PROBE_INT3;
		idx[armed++] = (int)n;
	}
	file->n = n;
	cur_spec = -1;
	free(list);
	if (!armed)
		return;

	/* All in one text batch; if the batch fails, say so for each. */
	rc = pk_probe_register(probes, (size_t)armed);
	for (int i = 0; rc && i < armed; i++) {
		file->status[idx[i]] = rc;
		pk_probe_destroy(probes[i]);
	}
	/* quiet_log stays set: the program's stderr is the program's. */
}
