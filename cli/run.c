// SPDX-License-Identifier: MIT
/* run.c - what every subcommand that runs COMMAND does: find the agent, start, wait, read the records, pick the exit status. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* Both set by cli/CMakeLists.txt from the install directories. */
#ifndef PKC_AGENT_PATH
#define PKC_AGENT_PATH "/usr/local/lib/probekit/libprobekit-agent.so"
#endif
#ifndef PKC_AGENT_REL
#define PKC_AGENT_REL "../lib/probekit/libprobekit-agent.so"
#endif
#define AGENT_NAME "libprobekit-agent.so"

/*
 * The agent: $PROBEKIT_AGENT; else next to this executable (the build
 * tree); else where an install put it relative to this executable (so a
 * prefix can be moved, or chosen at `cmake --install --prefix`); else the
 * configured install path.
 */
static int find_agent(char *out, size_t len)
{
	static const char *const rel[] = { AGENT_NAME, PKC_AGENT_REL };
	const char *env = getenv("PROBEKIT_AGENT");
	char self[4096];
	ssize_t n;

	if (env) {
		snprintf(out, len, "%s", env);
		return access(out, R_OK) ? -errno : 0;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0 && strrchr(self, '/')) {
		self[n] = 0;
		*strrchr(self, '/') = 0;
		for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++)
			if ((size_t)snprintf(out, len, "%s/%s", self, rel[i]) <
				    len &&
			    !access(out, R_OK))
				return 0;
	}
	snprintf(out, len, "%s", PKC_AGENT_PATH);
	return access(out, R_OK) ? -errno : 0;
}

int pkc_run_find_agent(struct pkc_run *r)
{
	int err = find_agent(r->agent, sizeof(r->agent));

	if (err) {
		fprintf(stderr, "probekit: cannot find the agent %s (set "
				"PROBEKIT_AGENT): %s\n", r->agent, strerror(-err));
		return PKC_EXIT_OWN;
	}
	return 0;
}

/* The agent first in LD_PRELOAD, and what it is to do (protocol.h). */
static int set_env(const struct pkc_run *r)
{
	const char *pre = getenv("LD_PRELOAD");
	char *list = NULL, *preload;
	size_t len;
	FILE *m = open_memstream(&list, &len);

	if (!m)
		return -ENOMEM;
	for (int i = 0; i < r->n; i++) {
		if (i)
			fputc(PKA_SEP, m);
		fputs(r->specs[i], m);
	}
	if (fclose(m)) {
		free(list);
		return -ENOMEM;
	}
	if (asprintf(&preload, "%s%s%s", r->agent, pre && *pre ? ":" : "",
		     pre ? pre : "") < 0) {
		free(list);
		return -ENOMEM;
	}
	if (setenv(PKA_ENV_DIR, r->dir, 1) ||
	    setenv(PKA_ENV_MODE, r->mode_name, 1) ||
	    setenv(PKA_ENV_SPECS, list, 1) ||
	    setenv("LD_PRELOAD", preload, 1)) {
		free(list);
		free(preload);
		return -errno;
	}
	free(list);
	free(preload);
	return 0;
}

/*
 * Fork and exec @argv, the terminal's ^C and ^\ left to it (as time(1)
 * does). 0 with *@pid, or the exit status to give: exec failures come back
 * through a close-on-exec pipe.
 */
static int start_command(char **argv, pid_t *pid)
{
	struct sigaction ign = { .sa_handler = SIG_IGN }, old_int, old_quit;
	int err[2], e;

	if (pipe2(err, O_CLOEXEC)) {
		fprintf(stderr, "probekit: pipe: %s\n", strerror(errno));
		return PKC_EXIT_OWN;
	}
	sigaction(SIGINT, &ign, &old_int);
	sigaction(SIGQUIT, &ign, &old_quit);
	*pid = fork();
	if (*pid == 0) {
		sigaction(SIGINT, &old_int, NULL);
		sigaction(SIGQUIT, &old_quit, NULL);
		execvp(argv[0], argv);
		/* The parent maps errno to the status; this one goes unseen. */
		e = errno;
		if (write(err[1], &e, sizeof(e)) < 0)
			_exit(PKC_EXIT_OWN);
		_exit(PKC_EXIT_CANNOT_RUN);
	}
	close(err[1]);
	if (*pid < 0) {
		fprintf(stderr, "probekit: fork: %s\n", strerror(errno));
		close(err[0]);
		return PKC_EXIT_OWN;
	}
	if (read(err[0], &e, sizeof(e)) == (ssize_t)sizeof(e)) {
		fprintf(stderr, "probekit: %s: %s\n", argv[0], strerror(e));
		close(err[0]);
		waitpid(*pid, NULL, 0);
		return e == ENOENT ? PKC_EXIT_NOT_FOUND : PKC_EXIT_CANNOT_RUN;
	}
	close(err[0]);
	return 0;
}

int pkc_run_start(struct pkc_run *r, char **argv)
{
	const char *tmp = getenv("TMPDIR");
	int err, code;

	snprintf(r->dir, sizeof(r->dir), "%s/probekit-%s.XXXXXX",
		 tmp && *tmp ? tmp : "/tmp", r->mode_name);
	if (!mkdtemp(r->dir)) {
		fprintf(stderr, "probekit: mkdtemp: %s\n", strerror(errno));
		return PKC_EXIT_OWN;
	}
	err = set_env(r);
	if (err) {
		fprintf(stderr, "probekit: environment: %s\n", strerror(-err));
		rmdir(r->dir);
		return PKC_EXIT_OWN;
	}
	code = start_command(argv, &r->pid);
	if (code)
		rmdir(r->dir);
	return code;
}

/* Wait for COMMAND, calling @tick every @ms milliseconds (as perf stat -I). */
static void wait_ticking(pid_t pid, int *status, long ms,
			 void (*tick)(double elapsed, void *ctx), void *ctx)
{
	struct timespec t0, now, nap = { 0, 10 * 1000 * 1000 };
	double next = ms / 1e3;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);
		double el;

		if (r == pid || (r < 0 && errno != EINTR))
			return;
		nanosleep(&nap, NULL);
		clock_gettime(CLOCK_MONOTONIC, &now);
		el = (double)(now.tv_sec - t0.tv_sec) +
		     (double)(now.tv_nsec - t0.tv_nsec) / 1e9;
		if (el < next)
			continue;
		tick(el, ctx);
		while (next <= el)
			next += ms / 1e3;
	}
}

int pkc_run_wait(struct pkc_run *r, long interval_ms,
		 void (*tick)(double elapsed, void *ctx), void *ctx)
{
	int status = -1;

	if (tick)
		wait_ticking(r->pid, &status, interval_ms, tick, ctx);
	else
		while (waitpid(r->pid, &status, 0) < 0 && errno == EINTR)
			;
	/* waitpid() failed (status untouched): probekit's failure, not COMMAND's. */
	if (status == -1) {
		fprintf(stderr, "probekit: waitpid: %s\n", strerror(errno));
		return PKC_EXIT_OWN;
	}
	return WIFSIGNALED(status) ? 128 + WTERMSIG(status)
				   : WEXITSTATUS(status);
}

/*
 * Whether record @h (@got bytes read) can be summed; if not and it came
 * from the agent (magic), the reason goes to r->refused: an agent of
 * another protocol version, one without the mode asked for (it refused,
 * saying why), or one that served another.
 */
static int usable(struct pkc_run *r, struct pka_header *h, ssize_t got)
{
	const char *why = NULL;
	char buf[64];

	if (got < (ssize_t)(2 * sizeof(uint32_t)) || h->magic != PKA_MAGIC)
		return 0;
	if (h->version != PKA_VERSION) {
		snprintf(buf, sizeof(buf), "protocol version %u, this "
			 "command's is %u", h->version, PKA_VERSION);
		why = buf;
	} else if (got < (ssize_t)sizeof(*h)) {
		return 0;
	} else if (h->status) {
		h->why[sizeof(h->why) - 1] = 0;
		why = h->why;
	} else if (h->mode != r->mode || h->size != r->size) {
		snprintf(buf, sizeof(buf), "it served mode %u, not %s",
			 h->mode, r->mode_name);
		why = buf;
	}
	if (why) {
		if (!r->refused[0])
			snprintf(r->refused, sizeof(r->refused), "%s", why);
		return 0;
	}
	return got == (ssize_t)r->size;
}

/* Add what arming each spec gave in record @h to @t. */
static void add_specs(struct pka_header *h, struct pkc_spec *t, int n)
{
	for (int i = 0; i < n && i < (int)h->n; i++) {
		struct pka_spec *s = &h->spec[i];

		if (s->status == 0) {
			t[i].armed++;
			t[i].int3 += s->int3 != 0;
		} else if (s->status != PKA_PENDING) {
			t[i].failed++;
			t[i].last_err = -s->status;
			s->why[sizeof(s->why) - 1] = 0;
			if (s->why[0])
				memcpy(t[i].why, s->why, sizeof(t[i].why));
		}
	}
}

int pkc_run_collect(struct pkc_run *r, void *rec, struct pkc_spec *t,
		    int consume, void (*add)(const void *rec, void *ctx),
		    void *ctx)
{
	DIR *d = opendir(r->dir);
	struct dirent *e;
	int procs = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		char path[sizeof(r->dir) + sizeof(e->d_name)];
		ssize_t got = -1;
		int fd;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", r->dir, e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			got = read(fd, rec, r->size);
			close(fd);
		}
		if (consume)
			unlink(path);
		if (!usable(r, rec, got))
			continue;
		procs++;
		add_specs(rec, t, r->n);
		add(rec, ctx);
	}
	closedir(d);
	return procs;
}

void pkc_run_end(struct pkc_run *r)
{
	rmdir(r->dir);
}

int pkc_run_verdict(const struct pkc_run *r, int procs,
		    const struct pkc_spec *t, int code)
{
	int armed = 0;

	for (int i = 0; i < r->n; i++)
		armed += t[i].armed;
	if (r->refused[0]) {
		fprintf(stderr, "probekit: cannot use the agent %s: %s\n",
			r->agent, r->refused);
		return PKC_EXIT_OWN;
	}
	if (!procs) {
		fprintf(stderr, "probekit: no process of the command loaded the "
				"agent (a static or setuid program?)\n");
		return PKC_EXIT_OWN;
	}
	if (!armed) {
		fprintf(stderr, "probekit: no probe could be armed in any "
				"process\n");
		return PKC_EXIT_OWN;
	}
	return code;
}
