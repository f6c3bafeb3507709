// SPDX-License-Identifier: MIT
/* bench_trace.c - what probekit trace costs a call (the agent's trace mode against count's entry probe, in the same run) and what an event costs in each trace format. */

/*
 * As bench_time: this program is started as a child (--child N: N calls
 * of bench_trace_fn(), timed as a whole), without the agent, with the
 * agent counting bench_trace_fn (an entry probe) and with the agent
 * tracing it (a return probe, two clock readings, one 40-byte event into
 * the thread's ring). The ring is sized for every call (nothing drains it
 * here: a full ring would time the cheaper drop path instead), and the
 * ring file is checked afterwards: every call has its event. The clock is
 * calibrated here and handed over as the command does (PKA_ENV_CLOCK).
 * Then the probekit command itself traces 200 000 calls of the child into
 * each format, and the file's bytes over the events written give:
 *   trace/untraced_call  ns_per_call
 *   trace/entry_probe    ns_per_call
 *   trace/traced_call    ns_per_call
 *   trace/traced_call    ratio_vs_entry_probe   traced over entry, per run
 *   trace/json           bytes_per_event        --args 0: name, pid, tid,
 *   trace/perfetto       bytes_per_event        ts, dur, ret
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

#ifndef PKB_CLI_PATH
#define PKB_CLI_PATH "build/cli/probekit"
#endif

static volatile unsigned long sink;

/* Long enough for a jump probe (a lone ret would take an int3 one). */
__attribute__((noinline, noipa)) void bench_trace_fn(void)
{
	sink++;
}

static int child(long n)
{
	double t0;

	for (long i = 0; i < n / 10; i++)	/* warm up */
		bench_trace_fn();
	t0 = bench_now_ns();
	for (long i = 0; i < n; i++)
		bench_trace_fn();
	printf("%.4f\n", (bench_now_ns() - t0) / (double)n);
	return 0;
}

static char dir[] = "/tmp/pk-bench-trace-XXXXXX";

/*
 * Remove the run's records and ring files; the events and drops of the
 * ring file found into *@events, *@drops.
 */
static void empty_dir(uint64_t *events, uint64_t *drops)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	*events = *drops = 0;
	if (!d)
		return;
	while ((e = readdir(d))) {
		char path[600];
		struct stat st;
		void *p;
		int fd;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    !strcmp(e->d_name, ".specs"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		if (!strncmp(e->d_name, PKA_TRACE_PREFIX, strlen(PKA_TRACE_PREFIX)) &&
		    (fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
			if (!fstat(fd, &st) && st.st_size >= PKA_TRACE_HDR &&
			    (p = mmap(NULL, (size_t)st.st_size, PROT_READ,
				      MAP_SHARED, fd, 0)) != MAP_FAILED) {
				const struct pka_trace_file *f = p;

				for (uint32_t b = 0; f->magic == PKA_TRACE_MAGIC &&
				     b < f->nthr; b++) {
					const struct pka_trace_thread *t =
						(const struct pka_trace_thread *)
						((const char *)p + 4096) + b;

					*events += t->head;
					*drops += t->drops;
				}
				munmap(p, (size_t)st.st_size);
			}
			close(fd);
		}
		unlink(path);
	}
	closedir(d);
}

/* probekit trace --format @fmt of @n calls: the file's bytes per event, or -1. */
static double bytes_per_event(const char *self, const char *fmt, long n)
{
	char out[200], nbuf[32], cmd[9000];
	char err[200];
	unsigned long long ev = 0, dr = 0, lost = 0, bytes = 0;
	char line[512];
	FILE *f;

	snprintf(out, sizeof(out), "%s/t.%s", dir, fmt);
	snprintf(err, sizeof(err), "%s/err", dir);
	snprintf(nbuf, sizeof(nbuf), "%ld", n);
	snprintf(cmd, sizeof(cmd), "env -u LD_PRELOAD '%s' trace --buffer-size 64M "
		 "--format %s -p bench_trace_fn -o '%s' -- '%s' --child %s "
		 ">/dev/null 2>'%s'", PKB_CLI_PATH, fmt, out, self, nbuf, err);
	if (system(cmd))
		return -1;
	f = fopen(err, "r");
	while (f && fgets(line, sizeof(line), f))
		sscanf(line, "probekit trace: %llu events written, %llu dropped "
		       "(ring full), %llu lost (no ring), %llu bytes", &ev, &dr,
		       &lost, &bytes);
	if (f)
		fclose(f);
	unlink(out);
	unlink(err);
	return ev ? (double)bytes / (double)ev : -1;
}

int main(int argc, char **argv)
{
	struct bench_series un = { 0 }, en = { 0 }, tr = { 0 }, ratio = { 0 },
			    bj = { 0 }, bp = { 0 };
	char self[4096], nbuf[32], trace_env[128], clock_env[128];
	char *cargv[] = { self, "--child", nbuf, NULL };
	const char *extra[] = { trace_env, clock_env, NULL };
	const char *why = NULL;
	long n;

	if (argc == 3 && !strcmp(argv[1], "--child"))
		return child(atol(argv[2]));
	bench_init(argc, argv);
	n = bench_opts.quick ? 300000 : 2000000;
#ifdef PKB_SANITIZE
	why = "a sanitizer build: the agent cannot be preloaded into "
	      "uninstrumented programs";
#endif
	if (!why && (access(PKB_AGENT_PATH, R_OK) || access(PKB_CLI_PATH, X_OK)))
		why = "no agent at " PKB_AGENT_PATH " or no " PKB_CLI_PATH;
	if (!why)
		why = pkb_mode_setup(self, sizeof(self), dir, "bench_trace_fn",
				     clock_env, sizeof(clock_env));
	if (why) {
		bench_skip("trace", "untraced_call", "ns_per_call", why);
		bench_skip("trace", "entry_probe", "ns_per_call", why);
		bench_skip("trace", "traced_call", "ns_per_call", why);
		bench_skip("trace", "traced_call", "ratio_vs_entry_probe", why);
		bench_skip("trace", "json", "bytes_per_event", why);
		bench_skip("trace", "perfetto", "bytes_per_event", why);
		return 0;
	}
	/* A ring for every call and the warm-up: 40 bytes an event. */
	snprintf(trace_env, sizeof(trace_env), PKA_ENV_TRACE "=0:%llu:0:0:0:0",
		 (unsigned long long)(n + n / 10 + 64) * pka_trace_ev_size(0));
	snprintf(nbuf, sizeof(nbuf), "%ld", n);
	printf("bench_trace: %ld calls of a one-line function a child, %d runs\n",
	       n, bench_opts.runs);
	for (int r = 0; r < bench_opts.runs; r++) {
		double u = pkb_run_mode(cargv, NULL, dir, NULL), e, t;
		uint64_t events, drops;

		e = pkb_run_mode(cargv, "count", dir, extra);
		empty_dir(&events, &drops);
		t = pkb_run_mode(cargv, "trace", dir, extra);
		empty_dir(&events, &drops);
		if (u < 0 || e <= 0 || t < 0) {
			fprintf(stderr, "bench_trace: a child failed\n");
			return 1;
		}
		if (events != (uint64_t)(n + n / 10) || drops) {
			fprintf(stderr, "bench_trace: %llu events, %llu drops "
				"for %ld calls: not every call traced\n",
				(unsigned long long)events,
				(unsigned long long)drops, n + n / 10);
			return 1;
		}
		bench_add(&un, u);
		bench_add(&en, e);
		bench_add(&tr, t);
		bench_add(&ratio, t / e);
	}
	for (int r = 0; r < (bench_opts.quick ? 1 : 3); r++) {
		double j = bytes_per_event(self, "json", 200000);
		double p = bytes_per_event(self, "perfetto", 200000);

		if (j > 0)
			bench_add(&bj, j);
		if (p > 0)
			bench_add(&bp, p);
	}
	bench_report("trace", "untraced_call", "ns_per_call", "ns", &un);
	bench_report("trace", "entry_probe", "ns_per_call", "ns", &en);
	bench_report("trace", "traced_call", "ns_per_call", "ns", &tr);
	bench_report("trace", "traced_call", "ratio_vs_entry_probe", "x", &ratio);
	if (bj.n)
		bench_report("trace", "json", "bytes_per_event", "B", &bj);
	else
		bench_skip("trace", "json", "bytes_per_event", "probekit trace failed");
	if (bp.n)
		bench_report("trace", "perfetto", "bytes_per_event", "B", &bp);
	else
		bench_skip("trace", "perfetto", "bytes_per_event",
			   "probekit trace failed");
	pkb_mode_cleanup(dir);
	return 0;
}
