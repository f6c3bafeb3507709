// SPDX-License-Identifier: MIT
/* bench_time.c - what probekit time costs a call: a timed call (the agent's time mode) against an untimed entry probe hit (count mode) and no probe, in the same run. */

/*
 * Each run starts this program three times as a child (--child N: N
 * calls of bench_time_fn(), a function that adds one to a
 * volatile, timed as a whole with
 * CLOCK_MONOTONIC; it prints ns per call), as the command would start
 * it: without the agent, with the agent counting bench_time_fn (an entry
 * probe), and with the agent timing it (a return probe, two clock
 * readings, a histogram record). Figures, medians over the runs:
 *   time/untimed_call  ns_per_call            the call alone
 *   time/entry_probe   ns_per_call            the call with count's probe
 *   time/timed_call    ns_per_call            the call with time's probe
 *   time/timed_call    ratio_vs_entry_probe   timed over entry, per run
 *                                             (issue 11's goal: <= 3)
 *   time/timed_call    overhead_ns_per_call   the agent's calibration (what
 *                                             it subtracts from durations)
 * Each run's record must say bench_time_fn was armed as a jump probe;
 * else every figure is skipped with the reason.
 */
#include <dirent.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "protocol.h"
#include "tsc.h"

extern char **environ;

#ifndef PKB_AGENT_PATH
#define PKB_AGENT_PATH "build/cli/libprobekit-agent.so"
#endif

static volatile unsigned long sink;

/* Long enough for a jump probe (a lone ret would take an int3 one). */
__attribute__((noinline, noipa)) void bench_time_fn(void)
{
	sink++;
}

static int child(long n)
{
	double t0;

	for (long i = 0; i < n / 10; i++)	/* warm up */
		bench_time_fn();
	t0 = bench_now_ns();
	for (long i = 0; i < n; i++)
		bench_time_fn();
	printf("%.4f\n", (bench_now_ns() - t0) / (double)n);
	return 0;
}

static char dir[] = "/tmp/pk-bench-time-XXXXXX";
/* PKA_ENV_CLOCK as the command hands it (else the agent falls back to clock_gettime()). */
static char clock_env[128];
static char armed_why[700];

/*
 * Whether record @h (@len bytes) armed bench_time_fn as a jump probe in
 * @mode: 1, or 0 with the reason in armed_why.
 */
static int armed(struct pka_header *h, size_t len, uint32_t mode)
{
	const struct pka_spec *s;
	const struct pka_probe *p;

	if (len < sizeof(*h) || h->magic != PKA_MAGIC ||
	    h->version != PKA_VERSION || h->size > len)
		snprintf(armed_why, sizeof(armed_why), "no usable record");
	else if (h->status || h->mode != mode)
		snprintf(armed_why, sizeof(armed_why), "the agent refused: %.500s",
			 h->why);
	else if (h->n < 1 || (s = pka_record_spec(h, 0))->status ||
		 s->nprobe < 1 || s->first >= h->nprobe)
		snprintf(armed_why, sizeof(armed_why),
			 "bench_time_fn not armed (%.500s)",
			 h->n ? (pka_spec_why(h, 0) ? pka_spec_why(h, 0) : "no reason")
			      : "spec not tried");
	else if ((p = pka_record_probe(h, s->first))->status || p->int3)
		snprintf(armed_why, sizeof(armed_why),
			 "bench_time_fn %s", p->int3 ? "took an int3 probe, not "
			 "a jump probe" : "not armed");
	else
		return 1;
	return 0;
}

/*
 * Remove the run's records; the overhead the last time record had, or
 * -1; *@ok: whether one record of @mode had the probe armed.
 */
static double empty_dir(uint32_t mode, int *ok)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	double ovh = -1;

	*ok = 0;
	snprintf(armed_why, sizeof(armed_why), "no record");
	if (!d)
		return ovh;
	while ((e = readdir(d))) {
		char path[600];
		struct stat st;
		void *m;
		int fd;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0 && !fstat(fd, &st) && st.st_size > 0 &&
		    (m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
			      MAP_PRIVATE, fd, 0)) != MAP_FAILED) {
			struct pka_header *h = m;

			if (armed(h, (size_t)st.st_size, mode)) {
				*ok = 1;
				if (mode == PKA_MODE_TIME &&
				    h->mode_len >= sizeof(struct pka_time_area)) {
					const struct pka_time_area *a = (const void *)
						((const char *)h + h->mode_at);

					if (!a->cal_status)
						ovh = (double)a->overhead_ns;
				}
			}
			munmap(m, (size_t)st.st_size);
		}
		if (fd >= 0)
			close(fd);
		unlinkat(dirfd(d), e->d_name, 0);
	}
	closedir(d);
	return ovh;
}

/* Run the child in @mode (NULL: no agent): its ns per call. */
static double run(const char *self, const char *mode, long n)
{
	char nbuf[32], modebuf[64], dirbuf[128], specbuf[160];
	char *argv[] = { (char *)self, "--child", nbuf, NULL };
	size_t k = 0, ne = 0;
	char **env, line[64];
	int fds[2], st;
	double v = -1;
	pid_t pid;
	FILE *f;

	snprintf(nbuf, sizeof(nbuf), "%ld", n);
	while (environ[ne])
		ne++;
	env = calloc(ne + 8, sizeof(*env));
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
		env[k++] = clock_env;
	}
	env[k] = NULL;
	if (pipe(fds)) {
		perror("pipe");
		exit(1);
	}
	{
		posix_spawn_file_actions_t fa;

		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
		posix_spawn_file_actions_addclose(&fa, fds[0]);
		if (posix_spawn(&pid, self, &fa, NULL, argv, env)) {
			perror("posix_spawn");
			exit(1);
		}
		posix_spawn_file_actions_destroy(&fa);
	}
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

int main(int argc, char **argv)
{
	struct bench_series un = { 0 }, en = { 0 }, ti = { 0 }, ratio = { 0 },
			    ovh = { 0 };
	const char *why = NULL;
	char self[4096], path[256];
	long n;
	FILE *f;

	if (argc == 3 && !strcmp(argv[1], "--child"))
		return child(atol(argv[2]));
	bench_init(argc, argv);
	n = bench_opts.quick ? 300000 : 2000000;
#ifdef PKB_SANITIZE
	why = "a sanitizer build: the agent cannot be preloaded into "
	      "uninstrumented programs";
#endif
	if (!why && access(PKB_AGENT_PATH, R_OK))
		why = "no agent at " PKB_AGENT_PATH;
	if (!why) {
		ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);

		if (len <= 0 || !mkdtemp(dir))
			why = "cannot set up a run directory";
		else
			self[len] = 0;
	}
	if (why) {
		bench_skip("time", "untimed_call", "ns_per_call", why);
		bench_skip("time", "entry_probe", "ns_per_call", why);
		bench_skip("time", "timed_call", "ns_per_call", why);
		bench_skip("time", "timed_call", "ratio_vs_entry_probe", why);
		bench_skip("time", "timed_call", "overhead_ns_per_call", why);
		return 0;
	}
	snprintf(path, sizeof(path), "%s/.specs", dir);
	f = fopen(path, "w");
	if (!f || fprintf(f, "bench_time_fn%c", 0) < 0 || fclose(f)) {
		perror(path);
		return 1;
	}
	{
		struct pk_tsc clk;

		pk_tsc_init(&clk, 0);
		snprintf(clock_env, sizeof(clock_env), PKA_ENV_CLOCK "=%u:%llu:%u",
			 clk.source, (unsigned long long)clk.mult, clk.shift);
	}
	printf("bench_time: %ld calls of a one-line function a child, %d runs\n",
	       n, bench_opts.runs);
	for (int r = 0; r < bench_opts.runs; r++) {
		double u = run(self, NULL, n), e, t, o;
		int ok_e, ok_t;

		e = run(self, "count", n);
		empty_dir(PKA_MODE_COUNT, &ok_e);
		if (!ok_e) {
			why = armed_why;
			break;
		}
		t = run(self, "time", n);
		o = empty_dir(PKA_MODE_TIME, &ok_t);
		if (!ok_t) {
			why = armed_why;
			break;
		}
		if (u < 0 || e <= 0 || t < 0) {
			fprintf(stderr, "bench_time: a child failed\n");
			return 1;
		}
		bench_add(&un, u);
		bench_add(&en, e);
		bench_add(&ti, t);
		bench_add(&ratio, t / e);
		if (o >= 0)
			bench_add(&ovh, o);
	}
	if (why) {
		bench_skip("time", "untimed_call", "ns_per_call", why);
		bench_skip("time", "entry_probe", "ns_per_call", why);
		bench_skip("time", "timed_call", "ns_per_call", why);
		bench_skip("time", "timed_call", "ratio_vs_entry_probe", why);
		bench_skip("time", "timed_call", "overhead_ns_per_call", why);
		unlink(path);
		rmdir(dir);
		return 0;
	}
	bench_report("time", "untimed_call", "ns_per_call", "ns", &un);
	bench_report("time", "entry_probe", "ns_per_call", "ns", &en);
	bench_report("time", "timed_call", "ns_per_call", "ns", &ti);
	bench_report("time", "timed_call", "ratio_vs_entry_probe", "x", &ratio);
	if (ovh.n)
		bench_report("time", "timed_call", "overhead_ns_per_call", "ns", &ovh);
	else
		bench_skip("time", "timed_call", "overhead_ns_per_call",
			   "the agent's calibration failed");
	unlink(path);
	rmdir(dir);
	return 0;
}
