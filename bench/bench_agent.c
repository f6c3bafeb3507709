// SPDX-License-Identifier: MIT
/* bench_agent.c - what the command's agent costs each process it is preloaded into: start-up of /usr/bin/true, by number of specs. */

/*
 * Each run starts /usr/bin/true N times (posix_spawn, waitpid), one after
 * the other, as `probekit count` would have them started: the agent in
 * LD_PRELOAD and the PROBEKIT_AGENT_* variables of agent/protocol.h, a
 * record directory of the bench's own (emptied after every run). Cases:
 *   unprobed      no agent: what an exec costs here
 *   agent_idle    the agent (and its audit module, as the command has it)
 *                 without the variables: it does nothing
 *   specs=K       K libc functions to count (K of the names below)
 * Figures: ms_per_exec (wall, per process), cpu_ms_per_exec (the
 * children's user + system time, less sensitive to a loaded machine) and
 * ratio_vs_unprobed (the case's wall time over the unprobed one's,
 * within each run), medians over the runs.
 */
#include <dirent.h>
#include <errno.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "protocol.h"

extern char **environ;

#ifndef PKB_AGENT_PATH
#define PKB_AGENT_PATH "build/cli/libprobekit-agent.so"
#endif
#ifndef PKB_AUDIT_PATH
#define PKB_AUDIT_PATH "build/cli/libprobekit-audit.so"
#endif

/* Functions every /usr/bin/true has in its libc, for the spec lists. */
static const char *const fns[] = {
	"malloc", "free", "calloc", "realloc", "fopen", "fclose", "fread",
	"fwrite", "fflush", "fputs", "puts", "printf", "fprintf", "sprintf",
	"snprintf", "vfprintf", "open", "close", "read", "write", "lseek",
	"mmap", "munmap", "mprotect", "getenv", "setenv", "unsetenv", "atoi",
	"strtol", "strtoul", "qsort", "bsearch", "abort", "exit", "atexit",
	"getpid", "getppid", "kill", "raise", "sleep", "usleep", "nanosleep",
	"time", "gettimeofday", "localtime", "gmtime", "mktime", "strftime",
	"setlocale", "fork", "execve", "waitpid", "pipe", "dup", "dup2",
	"fcntl", "ioctl", "opendir", "readdir", "closedir", "stat", "fstat",
	"unlink", "rename",
};

#define N_FNS (sizeof(fns) / sizeof(fns[0]))
#define N_CASES 5
#define SPECS_LEN 16384

struct bcase {
	const char *name;
	int agent;		/* preload the agent */
	int nspecs;		/* -1: without the PROBEKIT_AGENT_* variables */
	struct bench_series wall, cpu, ratio;
};

static char dir[] = "/tmp/pk-bench-agent-XXXXXX";

static void empty_dir(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
}

/* envp for @c: environ, less ours, plus the case's. */
static char **case_env(const struct bcase *c, char *specs, size_t len)
{
	size_t n = 0, k = 0;
	char **env;

	while (environ[n])
		n++;
	env = calloc(n + 8, sizeof(*env));
	if (!env)
		exit(1);
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "LD_PRELOAD=", 11) &&
		    strncmp(environ[i], "LD_AUDIT=", 9) &&
		    strncmp(environ[i], "PROBEKIT_", 9))
			env[k++] = environ[i];
	/* As the command starts COMMAND: its audit module too (cli/run.c). */
	if (c->agent) {
		env[k++] = "LD_PRELOAD=" PKB_AGENT_PATH;
		env[k++] = "LD_AUDIT=" PKB_AUDIT_PATH;
	}
	if (c->nspecs >= 0) {
		static char d[64];
		size_t at = 0;

		snprintf(d, sizeof(d), PKA_ENV_DIR "=%s", dir);
		env[k++] = d;
		env[k++] = PKA_ENV_MODE "=count";
		at = (size_t)snprintf(specs, len, PKA_ENV_SPECS "=");
		for (int i = 0; i < c->nspecs && at < len; i++)
			at += (size_t)snprintf(specs + at, len - at, "%s%c",
					       fns[i % N_FNS],
					       i + 1 < c->nspecs ? PKA_SEP : 0);
		env[k++] = specs;
	}
	env[k] = NULL;
	return env;
}

static double tv_ms(struct timeval t)
{
	return t.tv_sec * 1e3 + t.tv_usec / 1e3;
}

/* @n execs of true under @env: wall ms per exec; *cpu: CPU ms per exec. */
static double run(char **env, int n, double *cpu)
{
	char *argv[] = { "/usr/bin/true", NULL };
	struct rusage r0, r1;
	double t0;

	getrusage(RUSAGE_CHILDREN, &r0);
	t0 = bench_now_ns();
	for (int i = 0; i < n; i++) {
		pid_t pid;
		int st;

		if (posix_spawn(&pid, argv[0], NULL, NULL, argv, env)) {
			perror("posix_spawn");
			exit(1);
		}
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) ||
		    WEXITSTATUS(st)) {
			fprintf(stderr, "bench_agent: true failed (%#x)\n", st);
			exit(1);
		}
	}
	t0 = (bench_now_ns() - t0) / 1e6 / n;
	getrusage(RUSAGE_CHILDREN, &r1);
	*cpu = (tv_ms(r1.ru_utime) - tv_ms(r0.ru_utime) +
		tv_ms(r1.ru_stime) - tv_ms(r0.ru_stime)) / n;
	empty_dir();
	return t0;
}

int main(int argc, char **argv)
{
	struct bcase cases[N_CASES] = {
		{ .name = "startup,unprobed", .agent = 0, .nspecs = -1 },
		{ .name = "startup,agent_idle", .agent = 1, .nspecs = -1 },
		{ .name = "startup,specs=1", .agent = 1, .nspecs = 1 },
		{ .name = "startup,specs=4", .agent = 1, .nspecs = 4 },
		{ .name = "startup,specs=64", .agent = 1,
		  .nspecs = PKA_MAX < 64 ? PKA_MAX : 64 },
	};
	const size_t nc = N_CASES;
	static char specs[N_CASES][SPECS_LEN];
	char **envs[N_CASES];
	int n;

	bench_init(argc, argv);
	n = bench_opts.quick ? 20 : 100;
	if (access(PKB_AGENT_PATH, R_OK) || access("/usr/bin/true", X_OK)) {
		for (size_t c = 0; c < nc; c++)
			bench_skip("agent", cases[c].name, "ms_per_exec",
				   "no agent or no /usr/bin/true");
		return 0;
	}
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	for (size_t c = 0; c < nc; c++)
		envs[c] = case_env(&cases[c], specs[c], sizeof(specs[c]));
	/* Warm the page cache and the agent's file. */
	for (size_t c = 0; c < nc; c++) {
		double cpu;

		run(envs[c], 3, &cpu);
	}
	/* Cases interleaved within each run: a load change hits them all. */
	for (int r = 0; r < bench_opts.runs; r++) {
		double base = 0;

		for (size_t c = 0; c < nc; c++) {
			double cpu, wall = run(envs[c], n, &cpu);

			if (!c)
				base = wall;
			bench_add(&cases[c].wall, wall);
			bench_add(&cases[c].cpu, cpu);
			bench_add(&cases[c].ratio, base > 0 ? wall / base : 0);
		}
	}
	printf("agent start-up: %d execs of /usr/bin/true per run\n", n);
	for (size_t c = 0; c < nc; c++) {
		bench_report("agent", cases[c].name, "ms_per_exec", "ms",
			     &cases[c].wall);
		bench_report("agent", cases[c].name, "cpu_ms_per_exec", "ms",
			     &cases[c].cpu);
		if (c)
			bench_report("agent", cases[c].name,
				     "ratio_vs_unprobed", "x", &cases[c].ratio);
	}
	rmdir(dir);
	return 0;
}
