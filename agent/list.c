// SPDX-License-Identifier: MIT
/* list.c - probekit list's probe kinds, answered inside COMMAND's process after the dynamic linker relocated it and before any constructor runs; then the process ends. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"

/*
 * Why here (issue 10, "probekit list ... without running anything but the
 * dynamic linker"): the kind (jump or int3, and why) is what
 * pk_probe_create() decides from the code as loaded (the function's
 * bytes, the object's branches into them, its jump tables and landing
 * pads), and the probe layer finds an object by dl_iterate_phdr(). The
 * list command cannot load COMMAND's libraries into itself without running
 * their constructors (dlopen() and dlmopen() run them), and a copy of
 * their segments mapped by hand would be in no link map. So list runs
 * COMMAND with the agent preloaded and libprobekit-listaudit.so in
 * LD_AUDIT, which calls pka_list_early() at the program's start-up
 * LA_ACT_CONSISTENT: every object mapped and relocated, not one
 * constructor run (not even the agent's: nothing here needs one but
 * Zydis, loaded first). The questions come from the file named by
 * PROBEKIT_LIST_REQ, "PATH\tOFFSET\n" each, the answers go to the file
 * named by PROBEKIT_LIST_OUT, "KIND\tREASON\n" each in the same order
 * (KIND: jump, int3, refused, unknown), and the process _exit()s 0.
 *
 * libc's constructors have not run either: environ is not set yet, so the
 * two names are read from /proc/self/environ; stdio is not used.
 */

#define LIST_REQ "PROBEKIT_LIST_REQ="
#define LIST_OUT "PROBEKIT_LIST_OUT="

/* The whole file at @path, NUL-terminated (its length in *@len), or NULL. */
static char *slurp(const char *path, size_t *len)
{
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap), *nb;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t r;

	if (fd < 0 || !buf)
		goto fail;
	while ((r = read(fd, buf + n, cap - n - 1)) > 0) {
		n += (size_t)r;
		if (n + 1 == cap) {
			if (!(nb = realloc(buf, cap *= 2)))
				goto fail;
			buf = nb;
		}
	}
	if (r < 0)
		goto fail;
	close(fd);
	buf[n] = 0;
	*len = n;
	return buf;
fail:
	if (fd >= 0)
		close(fd);
	free(buf);
	return NULL;
}

struct find {
	const char *want;	/* a real path */
	char exe[PATH_MAX];	/* the program's */
	uintptr_t bias;
	int found;
};

static int find_obj(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct find *f = arg;
	char real[PATH_MAX];
	const char *name = info->dlpi_name;

	(void)size;
	if (!name || !*name)
		name = f->exe;	/* the program */
	if (!*name || !realpath(name, real) || strcmp(real, f->want))
		return 0;
	f->bias = info->dlpi_addr;
	f->found = 1;
	return 1;
}

static char list_reason[512];

static void list_log(enum pk_log_level level, const char *msg, void *ctx)
{
	const char *why = msg;

	(void)ctx;
	if (level > PK_LOG_DEBUG || !strncmp(msg, "sym:", 4))
		return;
	/* "probe: WHAT: why": WHAT is the address, which list shows. */
	if (!strncmp(why, "probe: ", 7) && strstr(why + 7, ": "))
		why = strstr(why + 7, ": ") + 2;
	snprintf(list_reason, sizeof(list_reason), "%s", why);
}

/* One question: the kind of a probe at @off in the object at @path. */
static void answer(int out, const char *path, uintptr_t off, struct find *f)
{
	char real[PATH_MAX], line[1024];
	const char *kind = "unknown";
	int n;

	list_reason[0] = 0;
	f->found = 0;
	if (realpath(path, real)) {
		f->want = real;
		dl_iterate_phdr(find_obj, f);
	}
	if (!f->found) {
		snprintf(list_reason, sizeof(list_reason), "not loaded by the command");
	} else {
		PK_OPTS(pk_probe_opts, o, .addr = (void *)(f->bias + off));
		struct pk_probe_info info = { .sz = sizeof(info) };
		struct pk_probe *p;
		int err = pk_probe_create(&o, &p);

		if (!err) {
			pk_probe_get_info(p, &info);
			pk_probe_destroy(p);
			kind = info.kind == PK_PROBE_INT3 ? "int3" : "jump";
			if (info.kind != PK_PROBE_INT3)
				list_reason[0] = 0;
			else if (!list_reason[0])
				snprintf(list_reason, sizeof(list_reason), "int3");
		} else {
			kind = "refused";
			if (!list_reason[0])
				snprintf(list_reason, sizeof(list_reason), "%s",
					 strerror(-err));
		}
	}
	/* One line each: a reason's own newlines and tabs would end it. */
	for (char *c = list_reason; *c; c++)
		if (*c == '\n' || *c == '\t')
			*c = ' ';
	n = snprintf(line, sizeof(line), "%s\t%s\n", kind, list_reason);
	if (n > 0 && write(out, line, (size_t)n < sizeof(line) ?
			   (size_t)n : sizeof(line) - 1) < 0)
		_exit(3);
}

__attribute__((visibility("default"))) void pka_list_early(void)
{
	const char *req = NULL, *outp = NULL;
	char *env, *reqs, *line, *save = NULL;
	size_t len, rlen;
	struct find f = { 0 };
	ssize_t l;
	int out;

	env = slurp("/proc/self/environ", &len);
	for (size_t i = 0; env && i < len; i += strlen(env + i) + 1) {
		if (!strncmp(env + i, LIST_REQ, sizeof(LIST_REQ) - 1))
			req = env + i + sizeof(LIST_REQ) - 1;
		else if (!strncmp(env + i, LIST_OUT, sizeof(LIST_OUT) - 1))
			outp = env + i + sizeof(LIST_OUT) - 1;
	}
	/* Not a list run: the module ends the process (audit.c). */
	if (!req || !outp) {
		free(env);
		return;
	}
	pka_busy++;
	out = open(outp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	reqs = slurp(req, &rlen);
	if (out < 0 || !reqs)
		_exit(2);
	l = readlink("/proc/self/exe", f.exe, sizeof(f.exe) - 1);
	f.exe[l > 0 ? l : 0] = 0;
	pka_zydis_load();
	pk_set_log(list_log, NULL);
	for (line = strtok_r(reqs, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *tab = strrchr(line, '\t');

		if (!tab) {
			if (write(out, "unknown\tbad question\n", 21) < 0)
				_exit(3);
			continue;
		}
		*tab = 0;
		answer(out, line, (uintptr_t)strtoull(tab + 1, NULL, 16), &f);
	}
	_exit(close(out) ? 3 : 0);
}
