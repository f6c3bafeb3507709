/* SPDX-License-Identifier: MIT */
/* bench_agent_mode.h - what bench_time and bench_trace share: a child of this program run with the agent in a mode, as the command would start it. */
#ifndef PK_BENCH_AGENT_MODE_H
#define PK_BENCH_AGENT_MODE_H

#include <dirent.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "protocol.h"
#include "tsc.h"

#ifndef PKB_AGENT_PATH
#define PKB_AGENT_PATH "build/cli/libprobekit-agent.so"
#endif

extern char **environ;

/*
 * pkb_run_mode() - run @argv (argv[0] a path) with the agent preloaded in
 * @mode (NULL: no agent) on the run directory @dir (its specs in
 * @dir/.specs), and @extra's NAME=VALUE strings (NULL-terminated, or
 * NULL) in its environment; the first line of its stdout as a number, or
 * -1 if it failed. The caller's own LD_PRELOAD, LD_AUDIT and PROBEKIT_*
 * are not passed on.
 */
static inline double pkb_run_mode(char **argv, const char *mode,
				  const char *dir, const char *const *extra)
{
	char modebuf[64], dirbuf[128], specbuf[160], line[64];
	size_t k = 0, ne = 0, nx = 0;
	posix_spawn_file_actions_t fa;
	int fds[2], st;
	double v = -1;
	char **env;
	pid_t pid;
	FILE *f;

	while (environ[ne])
		ne++;
	while (extra && extra[nx])
		nx++;
	env = calloc(ne + nx + 6, sizeof(*env));
	if (!env)
		exit(1);
	for (size_t i = 0; i < ne; i++)
		if (strncmp(environ[i], "LD_PRELOAD=", 11) &&
		    strncmp(environ[i], "LD_AUDIT=", 9) &&
		    strncmp(environ[i], "PROBEKIT_", 9))
			env[k++] = environ[i];
	if (mode) {
		snprintf(modebuf, sizeof(modebuf), PKA_ENV_MODE "=%s", mode);
		snprintf(dirbuf, sizeof(dirbuf), PKA_ENV_DIR "=%s", dir);
		snprintf(specbuf, sizeof(specbuf), PKA_ENV_SPECS "=%s/.specs", dir);
		env[k++] = "LD_PRELOAD=" PKB_AGENT_PATH;
		env[k++] = modebuf;
		env[k++] = dirbuf;
		env[k++] = specbuf;
		for (size_t i = 0; i < nx; i++)
			env[k++] = (char *)extra[i];
	}
	env[k] = NULL;
	if (pipe(fds)) {
		perror("pipe");
		exit(1);
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
	posix_spawn_file_actions_addclose(&fa, fds[0]);
	if (posix_spawn(&pid, argv[0], &fa, NULL, argv, env)) {
		perror("posix_spawn");
		exit(1);
	}
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	f = fdopen(fds[0], "r");
	if (f && fgets(line, sizeof(line), f))
		v = strtod(line, NULL);
	if (f)
		fclose(f);
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
		v = -1;
	free(env);
	return v;
}

/*
 * pkb_mode_setup() - what a run needs, as the command prepares it: this
 * program's path into @self (@cap bytes), the run directory made from the
 * mkdtemp() template @dir, its specs file naming @fn alone, and the
 * calibrated clock as PKA_ENV_CLOCK=... in @clock_env (@ccap bytes).
 * Return: NULL, or why the run cannot be made.
 */
static inline const char *pkb_mode_setup(char *self, size_t cap, char *dir,
					 const char *fn, char *clock_env,
					 size_t ccap)
{
	ssize_t len = readlink("/proc/self/exe", self, cap - 1);
	struct pk_tsc clk;
	char path[256];
	FILE *f;

	if (len <= 0 || !mkdtemp(dir))
		return "cannot set up a run directory";
	self[len] = 0;
	snprintf(path, sizeof(path), "%s/.specs", dir);
	f = fopen(path, "w");
	if (!f || fprintf(f, "%s%c", fn, 0) < 0 || fclose(f))
		return "cannot write the run's specs file";
	pk_tsc_init(&clk, 0);
	snprintf(clock_env, ccap, PKA_ENV_CLOCK "=%u:%llu:%u", clk.source,
		 (unsigned long long)clk.mult, clk.shift);
	return NULL;
}

/*
 * pkb_mode_cleanup() - remove the run directory @dir and whatever is in it
 * (records, the specs file, the agent's .xref cache, ring files).
 */
static inline void pkb_mode_cleanup(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	while (d && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			unlinkat(dirfd(d), e->d_name, 0);
	if (d)
		closedir(d);
	rmdir(dir);
}

#endif /* PK_BENCH_AGENT_MODE_H */
