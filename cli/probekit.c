// SPDX-License-Identifier: MIT
/* probekit.c - the probekit command: count calls of functions in a program run. */

/*
 * probekit count [-p SPEC]... [-I MS] [--json] [-o FILE] -- COMMAND [ARG]...
 *
 * Runs COMMAND with the counting agent preloaded (see protocol.h), waits for
 * it, and reports how often each function was entered, summed over every
 * process of the command. Like perf stat and strace -c, the report goes to
 * stderr (or FILE), so COMMAND's own output stays as it was.
 *
 * Exit status, as timeout(1) and env(1) have it: COMMAND's own status, or
 * 128+N when a signal N killed it; 125 when probekit itself failed (bad
 * usage, no agent, no probe armed anywhere), 126 when COMMAND could not be
 * run, 127 when it was not found.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "protocol.h"

/* Both set by cli/CMakeLists.txt from the install directories. */
#ifndef PKC_AGENT_PATH
#define PKC_AGENT_PATH "/usr/local/lib/probekit/libprobekit-agent.so"
#endif
#ifndef PKC_AGENT_REL
#define PKC_AGENT_REL "../lib/probekit/libprobekit-agent.so"
#endif
#define AGENT_NAME "libprobekit-agent.so"

#define EXIT_OWN 125
#define EXIT_CANNOT_RUN 126
#define EXIT_NOT_FOUND 127

struct spec_total {
	const char *spec;
	unsigned long long hits;
	int armed;		/* processes that armed it */
	int failed;		/* processes that could not */
	int last_err;		/* the last -errno seen */
	char why[PKA_WHY_LEN];	/* and its log line */
	int int3;		/* processes that armed it as an int3 probe */
};

/* The first refusal seen in a record (protocol.h), or "". */
static char refused[2 * PKA_WHY_LEN + 64];

static void usage(FILE *f)
{
	fprintf(f,
		"usage: probekit count [-p SPEC]... [-I MS] [--json] [-o FILE] -- COMMAND [ARG]...\n"
		"       probekit --help | --version\n"
		"\n"
		"Counts calls of functions while COMMAND runs, in every process it starts.\n"
		"  -p, --probe SPEC  a function: NAME or OBJECT:NAME (e.g. malloc,\n"
		"                    libz.so.1:inflate, a static function of the program)\n"
		"  -I, --interval MS also report the counts so far every MS milliseconds\n"
		"  -j, --json        the report as one JSON object (a line per interval)\n"
		"  -o, --output FILE the report to FILE instead of stderr\n"
		"Exit status: COMMAND's; 128+N if killed by signal N; 125 probekit failed;\n"
		"126 COMMAND could not run; 127 COMMAND not found.\n");
}

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

static int set_env(const char *dir, const char *agent, char **specs, int n)
{
	const char *pre = getenv("LD_PRELOAD");
	char *list = NULL, *preload;
	size_t len;
	FILE *m = open_memstream(&list, &len);

	if (!m)
		return -ENOMEM;
	for (int i = 0; i < n; i++) {
		if (i)
			fputc(PKA_SEP, m);
		fputs(specs[i], m);
	}
	if (fclose(m)) {
		free(list);
		return -ENOMEM;
	}
	if (asprintf(&preload, "%s%s%s", agent, pre && *pre ? ":" : "",
		     pre ? pre : "") < 0) {
		free(list);
		return -ENOMEM;
	}
	if (setenv(PKA_ENV_DIR, dir, 1) || setenv(PKA_ENV_MODE, "count", 1) ||
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
 * Sum every process's counts file in @dir into @t; @consume: remove the
 * files (at the end; while the command runs they are read live: the
 * agents count straight into them).
 */
static int collect(const char *dir, struct spec_total *t, int n, int consume)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int procs = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		struct pka_count_record f;
		char path[4096];
		ssize_t got = -1;
		int fd;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			got = read(fd, &f, sizeof(f));
			close(fd);
		}
		if (consume)
			unlink(path);
		if (got < (ssize_t)(2 * sizeof(uint32_t)) ||
		    f.h.magic != PKA_MAGIC)
			continue;
		if (f.h.version != PKA_VERSION) {
			if (!refused[0])
				snprintf(refused, sizeof(refused),
					 "protocol version %u, this command's "
					 "is %u", f.h.version, PKA_VERSION);
			continue;
		}
		if (got < (ssize_t)sizeof(f.h))
			continue;
		if (f.h.status || f.h.mode != PKA_MODE_COUNT ||
		    f.h.size != sizeof(f)) {
			f.h.why[sizeof(f.h.why) - 1] = 0;
			if (!refused[0] && f.h.status)
				snprintf(refused, sizeof(refused), "%s", f.h.why);
			else if (!refused[0])
				snprintf(refused, sizeof(refused),
					 "it served mode %u, not count",
					 f.h.mode);
			continue;
		}
		if (got != (ssize_t)sizeof(f))
			continue;
		procs++;
		for (int i = 0; i < n && i < (int)f.h.n; i++) {
			struct pka_spec *s = &f.h.spec[i];

			t[i].hits += f.count[i].n;
			if (s->status == 0) {
				t[i].armed++;
				t[i].int3 += s->int3 != 0;
			} else if (s->status != PKA_PENDING) {
				t[i].failed++;
				t[i].last_err = -s->status;
				s->why[sizeof(s->why) - 1] = 0;
				if (s->why[0])
					memcpy(t[i].why, s->why,
					       sizeof(t[i].why));
			}
		}
	}
	closedir(d);
	return procs;
}

static void json_str(FILE *o, const char *s)
{
	fputc('"', o);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(o, "\\%c", c);
		else if (c < 0x20)
			fprintf(o, "\\u%04x", c);
		else
			fputc(c, o);
	}
	fputc('"', o);
}

static void report(FILE *o, int json, char **argv, int status, int procs,
		   struct spec_total *t, int n)
{
	if (json) {
		fprintf(o, "{\"command\":[");
		for (int i = 0; argv[i]; i++) {
			if (i)
				fputc(',', o);
			json_str(o, argv[i]);
		}
		fprintf(o, "],\"exit_status\":%d,\"processes\":%d,"
			   "\"probes\":[", status, procs);
		for (int i = 0; i < n; i++) {
			fprintf(o, "%s{\"spec\":", i ? "," : "");
			json_str(o, t[i].spec);
			fprintf(o, ",\"hits\":%llu,\"armed_in\":%d,"
				   "\"int3_in\":%d,\"failed_in\":%d", t[i].hits,
				t[i].armed, t[i].int3, t[i].failed);
			if (t[i].failed) {
				fprintf(o, ",\"error\":");
				json_str(o, t[i].why[0] ? t[i].why
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
			fprintf(o, " %16llu  %s", t[i].hits, t[i].spec);
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
 * Wait for @pid, and every @ms milliseconds report the counts so far (as
 * perf stat -I does): one line per function, or one JSON object per
 * interval, with the time since the start and the calls per second.
 */
static void wait_reporting(pid_t pid, int *status, long ms, const char *dir,
			   char **specs, int n, int json, FILE *out)
{
	unsigned long long last[PKA_MAX] = { 0 };
	struct timespec t0, now, nap = { 0, 10 * 1000 * 1000 };
	double next = ms / 1e3, prev = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct spec_total t[PKA_MAX];
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
		memset(t, 0, sizeof(t));
		collect(dir, t, n, 0);
		if (json)
			fprintf(out, "{\"interval_s\":%.3f,\"probes\":[", el);
		for (int i = 0; i < n; i++) {
			double rate = (double)(t[i].hits - last[i]) / (el - prev);

			if (json) {
				fprintf(out, "%s{\"spec\":", i ? "," : "");
				json_str(out, specs[i]);
				fprintf(out, ",\"hits\":%llu,\"per_s\":%.0f}",
					t[i].hits, rate);
			} else {
				fprintf(out, " %10.3f s %16llu  %s  (%.0f/s)\n", el,
					t[i].hits, specs[i], rate);
			}
			last[i] = t[i].hits;
		}
		if (json)
			fprintf(out, "]}\n");
		fflush(out);
		prev = el;
		while (next <= el)
			next += ms / 1e3;
	}
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
		return EXIT_OWN;
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
			_exit(EXIT_OWN);
		_exit(EXIT_CANNOT_RUN);
	}
	close(err[1]);
	if (*pid < 0) {
		fprintf(stderr, "probekit: fork: %s\n", strerror(errno));
		close(err[0]);
		return EXIT_OWN;
	}
	if (read(err[0], &e, sizeof(e)) == (ssize_t)sizeof(e)) {
		fprintf(stderr, "probekit: %s: %s\n", argv[0], strerror(e));
		close(err[0]);
		waitpid(*pid, NULL, 0);
		return e == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_RUN;
	}
	close(err[0]);
	return 0;
}

static int cmd_count(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "probe", required_argument, NULL, 'p' },
		{ "json", no_argument, NULL, 'j' },
		{ "output", required_argument, NULL, 'o' },
		{ "interval", required_argument, NULL, 'I' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	char *specs[PKA_MAX], agent[4096], dir[4096];
	const char *tmp = getenv("TMPDIR");
	struct spec_total t[PKA_MAX];
	const char *out_path = NULL;
	int n = 0, json = 0, c, status = -1, code, procs, armed = 0, err;
	long interval_ms = 0;
	FILE *out = stderr;
	pid_t pid;

	while ((c = getopt_long(argc, argv, "+p:jo:hI:", longopts, NULL)) != -1) {
		switch (c) {
		case 'p':
			if (n == PKA_MAX || !*optarg || strchr(optarg, PKA_SEP)) {
				fprintf(stderr, "probekit: %s\n", n == PKA_MAX
					? "too many probes (at most 64)"
					: "empty or multi-line probe spec");
				return EXIT_OWN;
			}
			specs[n++] = optarg;
			break;
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
				return EXIT_OWN;
			}
			break;
		}
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return EXIT_OWN;
		}
	}
	if (!n || optind >= argc) {
		fprintf(stderr, "probekit: %s\n", !n ? "no probe given (-p NAME)"
						     : "no command given");
		usage(stderr);
		return EXIT_OWN;
	}
	if (find_agent(agent, sizeof(agent))) {
		fprintf(stderr, "probekit: cannot find the agent %s (set "
				"PROBEKIT_AGENT): %s\n", agent, strerror(errno));
		return EXIT_OWN;
	}
	if (out_path && !(out = fopen(out_path, "we"))) {
		fprintf(stderr, "probekit: %s: %s\n", out_path, strerror(errno));
		return EXIT_OWN;
	}
	snprintf(dir, sizeof(dir), "%s/probekit-count.XXXXXX",
		 tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir)) {
		fprintf(stderr, "probekit: mkdtemp: %s\n", strerror(errno));
		return EXIT_OWN;
	}
	err = set_env(dir, agent, specs, n);
	if (err) {
		fprintf(stderr, "probekit: environment: %s\n", strerror(-err));
		rmdir(dir);
		return EXIT_OWN;
	}

	code = start_command(&argv[optind], &pid);
	if (code) {
		rmdir(dir);
		return code;
	}
	if (interval_ms)
		wait_reporting(pid, &status, interval_ms, dir, specs, n, json, out);
	else
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
	/* waitpid() failed (status untouched): probekit's failure, not COMMAND's. */
	if (status == -1) {
		fprintf(stderr, "probekit: waitpid: %s\n", strerror(errno));
		code = EXIT_OWN;
	} else {
		code = WIFSIGNALED(status) ? 128 + WTERMSIG(status)
					   : WEXITSTATUS(status);
	}

	memset(t, 0, sizeof(t));
	for (int i = 0; i < n; i++)
		t[i].spec = specs[i];
	procs = collect(dir, t, n, 1);
	rmdir(dir);
	report(out, json, &argv[optind], code, procs, t, n);
	if (out != stderr)
		fclose(out);
	for (int i = 0; i < n; i++)
		armed += t[i].armed;
	if (refused[0]) {
		fprintf(stderr, "probekit: cannot use the agent %s: %s\n", agent,
			refused);
		return EXIT_OWN;
	}
	if (!procs) {
		fprintf(stderr, "probekit: no process of the command loaded the "
				"agent (a static or setuid program?)\n");
		return EXIT_OWN;
	}
	if (!armed) {
		fprintf(stderr, "probekit: no probe could be armed in any "
				"process\n");
		return EXIT_OWN;
	}
	return code;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "count"))
		return cmd_count(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "--version")) {
		printf("probekit %s\n", PKC_VERSION_STRING);
		return 0;
	}
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		usage(stdout);
		return 0;
	}
	if (argc >= 2)
		fprintf(stderr, "probekit: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return EXIT_OWN;
}
