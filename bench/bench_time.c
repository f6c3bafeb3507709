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
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "bench_agent_mode.h"
#include "protocol.h"
#include "tsc.h"


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
	char nbuf[32];
	char *argv[] = { (char *)self, "--child", nbuf, NULL };
	const char *extra[] = { clock_env, NULL };

	snprintf(nbuf, sizeof(nbuf), "%ld", n);
	return pkb_run_mode(argv, mode, dir, extra);
}

int main(int argc, char **argv)
{
	struct bench_series un = { 0 }, en = { 0 }, ti = { 0 }, ratio = { 0 },
			    ovh = { 0 };
	const char *why = NULL;
	char self[4096];
	long n;

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
	if (!why)
		why = pkb_mode_setup(self, sizeof(self), dir, "bench_time_fn",
				     clock_env, sizeof(clock_env));
	if (why) {
		bench_skip("time", "untimed_call", "ns_per_call", why);
		bench_skip("time", "entry_probe", "ns_per_call", why);
		bench_skip("time", "timed_call", "ns_per_call", why);
		bench_skip("time", "timed_call", "ratio_vs_entry_probe", why);
		bench_skip("time", "timed_call", "overhead_ns_per_call", why);
		return 0;
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
		pkb_mode_cleanup(dir);
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
	pkb_mode_cleanup(dir);
	return 0;
}
