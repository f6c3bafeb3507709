// SPDX-License-Identifier: MIT
/* bench_stat.c - what probekit stat -p costs a call: a stat-probed call (the agent's stat mode: getrusage(RUSAGE_THREAD) at entry and return) against an entry probe hit (count mode) and no probe, in the same run. */

/*
 * Each run starts this program as a child (--child N: N calls of
 * bench_stat_fn(), a function that adds one to a volatile, timed as a
 * whole with CLOCK_MONOTONIC; it prints ns per call), as the command
 * would start it: without the agent, with the agent counting
 * bench_stat_fn (an entry probe), and with the agent in stat mode (a
 * return probe, two getrusage(RUSAGE_THREAD) system calls, a cell
 * update). And once more (--rusage N) for what one raw
 * getrusage(RUSAGE_THREAD) costs here, the floor of the probed call's
 * cost (two of them). Figures, medians over the runs:
 *   stat/unprobed_call  ns_per_call            the call alone
 *   stat/entry_probe    ns_per_call            the call with count's probe
 *   stat/probed_call    ns_per_call            the call with stat's probe
 *   stat/probed_call    ratio_vs_entry_probe   stat over entry, per run
 *   stat/getrusage      ns_per_call            one getrusage(RUSAGE_THREAD)
 * Each run's record must say bench_stat_fn was armed as a jump probe;
 * else every figure is skipped with the reason.
 */
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "bench_agent_mode.h"
#include "protocol.h"

static volatile unsigned long sink;

/* Long enough for a jump probe (a lone ret would take an int3 one). */
__attribute__((noinline, noipa)) void bench_stat_fn(void)
{
	sink++;
}

static int child(long n)
{
	double t0;

	for (long i = 0; i < n / 10; i++)	/* warm up */
		bench_stat_fn();
	t0 = bench_now_ns();
	for (long i = 0; i < n; i++)
		bench_stat_fn();
	printf("%.4f\n", (bench_now_ns() - t0) / (double)n);
	return 0;
}

/* One raw getrusage(RUSAGE_THREAD), as the agent makes it. */
static int child_rusage(long n)
{
	struct rusage ru;
	double t0;

	t0 = bench_now_ns();
	for (long i = 0; i < n; i++)
		syscall(SYS_getrusage, RUSAGE_THREAD, &ru);
	printf("%.4f\n", (bench_now_ns() - t0) / (double)n);
	return 0;
}

static char dir[] = "/tmp/pk-bench-stat-XXXXXX";
static char clock_env[128];
static char armed_why[700];

/*
 * Whether record @h (@len bytes) armed bench_stat_fn as a jump probe in
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
			 "bench_stat_fn not armed (%.500s)",
			 h->n ? (pka_spec_why(h, 0) ? pka_spec_why(h, 0) : "no reason")
			      : "spec not tried");
	else if ((p = pka_record_probe(h, s->first))->status || p->int3)
		snprintf(armed_why, sizeof(armed_why),
			 "bench_stat_fn %s", p->int3 ? "took an int3 probe, not "
			 "a jump probe" : "not armed");
	else if (mode == PKA_MODE_STAT &&
		 (h->mode_len < sizeof(struct pka_stat_area) ||
		  ((const struct pka_stat_area *)((const char *)h +
						  h->mode_at))->status))
		snprintf(armed_why, sizeof(armed_why), "the agent could not "
			 "read getrusage(RUSAGE_THREAD)");
	else
		return 1;
	return 0;
}

/* Remove the run's records; whether one of @mode had the probe armed. */
static int empty_dir(uint32_t mode)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int ok = 0;

	snprintf(armed_why, sizeof(armed_why), "no record");
	if (!d)
		return 0;
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
			ok |= armed(m, (size_t)st.st_size, mode);
			munmap(m, (size_t)st.st_size);
		}
		if (fd >= 0)
			close(fd);
		unlinkat(dirfd(d), e->d_name, 0);
	}
	closedir(d);
	return ok;
}

/* Run the child in @mode (NULL: no agent): its ns per call. */
static double run(const char *self, const char *how, const char *mode, long n)
{
	char nbuf[32];
	char *argv[] = { (char *)self, (char *)how, nbuf, NULL };
	const char *extra[] = { clock_env, NULL };

	snprintf(nbuf, sizeof(nbuf), "%ld", n);
	return pkb_run_mode(argv, mode, dir, extra);
}

static void skip_all(const char *why)
{
	bench_skip("stat", "unprobed_call", "ns_per_call", why);
	bench_skip("stat", "entry_probe", "ns_per_call", why);
	bench_skip("stat", "probed_call", "ns_per_call", why);
	bench_skip("stat", "probed_call", "ratio_vs_entry_probe", why);
	bench_skip("stat", "getrusage", "ns_per_call", why);
}

int main(int argc, char **argv)
{
	struct bench_series un = { 0 }, en = { 0 }, st = { 0 }, ratio = { 0 },
			    ru = { 0 };
	const char *why = NULL;
	char self[4096];
	long n;

	if (argc == 3 && !strcmp(argv[1], "--child"))
		return child(atol(argv[2]));
	if (argc == 3 && !strcmp(argv[1], "--rusage"))
		return child_rusage(atol(argv[2]));
	bench_init(argc, argv);
	n = bench_opts.quick ? 50000 : 300000;
#ifdef PKB_SANITIZE
	why = "a sanitizer build: the agent cannot be preloaded into "
	      "uninstrumented programs";
#endif
	if (!why && access(PKB_AGENT_PATH, R_OK))
		why = "no agent at " PKB_AGENT_PATH;
	if (!why)
		why = pkb_mode_setup(self, sizeof(self), dir, "bench_stat_fn",
				     clock_env, sizeof(clock_env));
	if (why) {
		skip_all(why);
		return 0;
	}
	printf("bench_stat: %ld calls of a one-line function a child, %d runs\n",
	       n, bench_opts.runs);
	for (int r = 0; r < bench_opts.runs; r++) {
		double u = run(self, "--child", NULL, n), e, s, g;

		e = run(self, "--child", "count", n);
		if (!empty_dir(PKA_MODE_COUNT)) {
			why = armed_why;
			break;
		}
		s = run(self, "--child", "stat", n);
		if (!empty_dir(PKA_MODE_STAT)) {
			why = armed_why;
			break;
		}
		g = run(self, "--rusage", NULL, n);
		if (u < 0 || e <= 0 || s < 0 || g < 0) {
			fprintf(stderr, "bench_stat: a child failed\n");
			pkb_mode_cleanup(dir);
			return 1;
		}
		bench_add(&un, u);
		bench_add(&en, e);
		bench_add(&st, s);
		bench_add(&ratio, s / e);
		bench_add(&ru, g);
	}
	if (why) {
		skip_all(why);
		pkb_mode_cleanup(dir);
		return 0;
	}
	bench_report("stat", "unprobed_call", "ns_per_call", "ns", &un);
	bench_report("stat", "entry_probe", "ns_per_call", "ns", &en);
	bench_report("stat", "probed_call", "ns_per_call", "ns", &st);
	bench_report("stat", "probed_call", "ratio_vs_entry_probe", "x", &ratio);
	bench_report("stat", "getrusage", "ns_per_call", "ns", &ru);
	pkb_mode_cleanup(dir);
	return 0;
}
