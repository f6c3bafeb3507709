// SPDX-License-Identifier: MIT
/* cmd_stat.c - probekit stat: perf-stat counters (task clock, faults, switches, migrations, cycles, instructions, syscalls) of COMMAND and every process it starts. */

/*
 * probekit stat [-p SPEC]... [-P FILE]... [--json] [-o FILE] [--strict] [-q]
 *               -- COMMAND [ARG]...
 *
 * The counters are perf_event_open(2) events opened on COMMAND's first
 * process before it execs, one event each (no group: an inherited group
 * cannot be read as one on older kernels), each with:
 *   - pid = the child, cpu = -1: the task wherever it runs;
 *   - inherit: every thread and process it creates from then on gets a
 *     child event whose count is added to ours when it ends, and read()
 *     adds those still running, so the figures are the whole command's;
 *   - disabled + enable_on_exec: counting starts at the exec, so the
 *     child's own work between fork() and exec (and probekit's) is not
 *     in them;
 *   - read_format TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING: an event the
 *     PMU multiplexed (running < enabled) is scaled to the time enabled,
 *     and said to be, as perf stat does.
 *
 * The handshake (pkc_spawn(), run.c): the child blocks reading a pipe
 * before its execvp(); the parent opens the events on its pid, takes the
 * start time, then writes the byte that lets it exec. This is perf stat's
 * own order (its workload waits on a pipe too); the events cannot miss
 * the exec because they exist before the child can reach it.
 *
 * Events that cannot be opened with the kernel's side counted
 * (perf_event_paranoid > 1, not root nor CAP_PERFMON: EACCES) are opened
 * again for user space only (exclude_kernel, exclude_hv), named NAME:u as
 * perf stat names them. The syscalls tracepoint fires in the kernel and
 * would read 0 so: it is not counted then, and said why. Hardware events
 * that do not exist (a VM without a PMU: ENOENT, EOPNOTSUPP, ENODEV) read
 * "<not supported>"; anything else that is not counted "<not counted>",
 * with the reason, in the text and in the JSON.
 *
 * Test hooks (documented in probekit(1)): PROBEKIT_STAT_FAIL=all or a
 * comma-separated list of counter names makes their perf_event_open()
 * fail with EACCES, as a container without perf does;
 * PROBEKIT_STAT_HALVE=NAME,... reads those counters as if the PMU had
 * run them half the time they were enabled (the scaling, where no
 * software event is ever multiplexed).
 *
 * Wall time is CLOCK_MONOTONIC from the byte written to COMMAND's end
 * (seen by waitid(), before it is reaped); user and sys are the wait4()
 * rusage of COMMAND (its own and its waited-for descendants').
 *
 * With -p: COMMAND runs with the agent in its "stat" mode (agent/stat.c,
 * PKA_MODE_STAT) as well, the counters opened the same way before its
 * exec (pkc_run's ready hook), so they also count the agent's start-up
 * (planning, arming) and its readings. Per probed function the agent
 * reads the thread's getrusage(RUSAGE_THREAD) at each call's entry and
 * return (agent/stat.c says why that), and keeps the differences per
 * thread; they are summed here over threads and processes and printed
 * after the counters: calls, minor and major faults, voluntary and
 * involuntary context switches inside the calls, inclusive of nested
 * probed calls, and per call. Wall time then is seen ended by the
 * runner's poll (every 10 ms), not a blocking wait.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cli.h"

enum {
	EV_TASK_CLOCK,
	EV_FAULTS,
	EV_MINOR,
	EV_MAJOR,
	EV_CS,
	EV_MIGR,
	EV_CYCLES,
	EV_INSN,
	EV_SYSCALLS,
	N_EV
};

struct ev_def {
	const char *name;
	uint32_t type;
	uint64_t config;	/* the tracepoint's is read from tracefs */
};

static const struct ev_def ev_defs[N_EV] = {
	[EV_TASK_CLOCK] = { "task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK },
	[EV_FAULTS] = { "page-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS },
	[EV_MINOR] = { "minor-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MIN },
	[EV_MAJOR] = { "major-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MAJ },
	[EV_CS] = { "context-switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES },
	[EV_MIGR] = { "cpu-migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS },
	[EV_CYCLES] = { "cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES },
	[EV_INSN] = { "instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS },
	[EV_SYSCALLS] = { "syscalls", PERF_TYPE_TRACEPOINT, 0 },
};

/* Where the raw_syscalls:sys_enter tracepoint's id is, first found wins. */
static const char *const tp_id_paths[] = {
	"/sys/kernel/tracing/events/raw_syscalls/sys_enter/id",
	"/sys/kernel/debug/tracing/events/raw_syscalls/sys_enter/id",
};

enum ev_state { EV_COUNTED, EV_NOT_SUPPORTED, EV_NOT_COUNTED };

struct ev {
	int fd;			/* -1: not opened */
	int user_only;		/* opened again with exclude_kernel */
	int halve;		/* PROBEKIT_STAT_HALVE names it */
	enum ev_state state;
	char why[256];		/* when not counted */
	uint64_t raw, enabled, running;
	double value;		/* raw, scaled to enabled if multiplexed */
	int scaled;
};

struct stat_ctx {
	struct ev ev[N_EV];
	struct timespec t0;
	const char *fail;	/* PROBEKIT_STAT_FAIL */
	char detach[320];	/* why COMMAND's exec detaches them, or "" */
};

/* Whether comma-separated @list names @name, or is "all". */
static int listed(const char *list, const char *name)
{
	size_t nl = strlen(name);

	if (!list)
		return 0;
	for (const char *s = list; *s; ) {
		size_t n = strcspn(s, ",");

		if ((n == nl && !strncmp(s, name, nl)) ||
		    (n == 3 && !strncmp(s, "all", 3)))
			return 1;
		s += n;
		s += strspn(s, ",");
	}
	return 0;
}

static long perf_open(struct perf_event_attr *a, pid_t pid)
{
	return syscall(SYS_perf_event_open, a, pid, -1, -1,
		       PERF_FLAG_FD_CLOEXEC);
}

/* /proc/sys/kernel/perf_event_paranoid, or -99 if it cannot be read. */
static int paranoid(void)
{
	FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "re");
	int v = -99;

	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = -99;
		fclose(f);
	}
	return v;
}

/*
 * The tracepoint's id into *@id. 0, or -errno with why in @why: tracefs
 * is root's (mode 0700) on most systems.
 */
static int tp_id(uint64_t *id, char *why, size_t len)
{
	int err = 0;

	for (size_t i = 0; i < sizeof(tp_id_paths) / sizeof(tp_id_paths[0]); i++) {
		FILE *f = fopen(tp_id_paths[i], "re");
		unsigned long long v;
		int e;

		if (!f) {
			e = errno;
			/* The first path's reason, unless it is merely absent. */
			if (!err || (err == ENOENT && e != ENOENT)) {
				err = e;
				snprintf(why, len, "cannot read the raw_syscalls:"
					 "sys_enter tracepoint's id (%s: %s)%s",
					 tp_id_paths[i], strerror(e),
					 e == EACCES ? "; tracefs needs root" : "");
			}
			continue;
		}
		e = fscanf(f, "%llu", &v);
		fclose(f);
		if (e == 1) {
			*id = v;
			return 0;
		}
		if (!err) {
			err = EINVAL;
			snprintf(why, len, "%s holds no id", tp_id_paths[i]);
		}
	}
	if (err == ENOENT)
		snprintf(why, len, "no raw_syscalls:sys_enter tracepoint (tracefs "
			 "not mounted at /sys/kernel/tracing or "
			 "/sys/kernel/debug/tracing)");
	return -err;
}

/* Why @err from perf_event_open() of event @i, in words, into e->why. */
static void open_failed(struct ev *e, int i, int err, int forced)
{
	const char *tail = forced ? " (forced by PROBEKIT_STAT_FAIL, a test hook)" : "";
	int p;

	if (ev_defs[i].type == PERF_TYPE_HARDWARE && !forced &&
	    (err == ENOENT || err == EOPNOTSUPP || err == ENODEV)) {
		e->state = EV_NOT_SUPPORTED;
		snprintf(e->why, sizeof(e->why), "no such hardware counter "
			 "here (perf_event_open: %s)", strerror(err));
		return;
	}
	e->state = EV_NOT_COUNTED;
	if (forced) {
		snprintf(e->why, sizeof(e->why), "perf_event_open: %s%s",
			 strerror(err), tail);
	} else if (err == EACCES || err == EPERM) {
		p = paranoid();
		snprintf(e->why, sizeof(e->why), "perf_event_open: %s "
			 "(perf_event_paranoid is %d; root or CAP_PERFMON "
			 "counts more)", strerror(err), p);
	} else if (err == ENOSYS) {
		snprintf(e->why, sizeof(e->why), "no perf_event_open(2) on this "
			 "kernel or in this container (%s)", strerror(err));
	} else {
		snprintf(e->why, sizeof(e->why), "perf_event_open: %s",
			 strerror(err));
	}
}

/* Open counter @i on @pid into c->ev[i]; what went wrong is kept there. */
static void open_one(struct stat_ctx *c, int i, pid_t pid)
{
	struct ev *e = &c->ev[i];
	struct perf_event_attr a;
	int forced = listed(c->fail, ev_defs[i].name);
	int no_kernel = listed(c->fail, "kernel");
	long fd = -1;

	e->fd = -1;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = ev_defs[i].type;
	a.config = ev_defs[i].config;
	a.disabled = 1;
	a.enable_on_exec = 1;
	a.inherit = 1;
	a.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED |
			PERF_FORMAT_TOTAL_TIME_RUNNING;
	if (forced) {
		open_failed(e, i, EACCES, 1);
		return;
	}
	if (a.type == PERF_TYPE_TRACEPOINT) {
		uint64_t id = 0;

		if (tp_id(&id, e->why, sizeof(e->why))) {
			e->state = EV_NOT_COUNTED;
			return;
		}
		a.config = id;
	}
	if (no_kernel)
		errno = EACCES;
	else
		fd = perf_open(&a, pid);
	if (fd < 0 && (errno == EACCES || errno == EPERM) &&
	    a.type != PERF_TYPE_TRACEPOINT) {
		a.exclude_kernel = 1;
		a.exclude_hv = 1;
		fd = perf_open(&a, pid);
		e->user_only = fd >= 0;
	}
	if (fd < 0) {
		open_failed(e, i, errno, no_kernel && errno == EACCES);
		return;
	}
	e->fd = (int)fd;
	/*
	 * The scheduler counts switches and migrations in the kernel's
	 * context, which exclude_kernel leaves out: they would read 0.
	 * (task-clock is the task's whole CPU time whatever it excludes.)
	 */
	if (e->user_only && (i == EV_CS || i == EV_MIGR)) {
		close(e->fd);
		e->fd = -1;
		e->state = EV_NOT_COUNTED;
		snprintf(e->why, sizeof(e->why), "user space only here "
			 "(perf_event_paranoid %d, not root nor CAP_PERFMON), "
			 "where the scheduler's counts read 0%s", paranoid(),
			 no_kernel ? " (forced by PROBEKIT_STAT_FAIL=kernel, a "
			 "test hook)" : "");
	}
	if (i == EV_TASK_CLOCK)
		e->user_only = 0;
}

/*
 * Privileged execs. The kernel detaches a task's perf events at an exec
 * that leaves it not dumpable (begin_new_exec(): perf_event_exit_task()):
 * a set-user-ID program whose owner is not the real user, a set-group-ID
 * one whose group is not the real group, one with file capabilities (not
 * root), and a file the user may run but not read. A script's set-ID bits
 * and no_new_privs make the exec a plain one. What they count until then
 * stays in the counters, nothing after: near zero, for a counter that
 * would read as counted.
 */

/* @cmd as execvp() finds it, into @out: 0, or -errno. */
static int find_cmd(const char *cmd, char *out, size_t len)
{
	const char *pathv = getenv("PATH");
	char *copy, *save = NULL;

	if (strchr(cmd, '/')) {
		snprintf(out, len, "%s", cmd);
		return 0;
	}
	copy = strdup(pathv ? pathv : "/bin:/usr/bin");
	if (!copy)
		return -ENOMEM;
	for (char *d = strtok_r(copy, ":", &save); d;
	     d = strtok_r(NULL, ":", &save)) {
		struct stat st;

		snprintf(out, len, "%s/%s", *d ? d : ".", cmd);
		if (!stat(out, &st) && S_ISREG(st.st_mode) && !access(out, X_OK)) {
			free(copy);
			return 0;
		}
	}
	free(copy);
	return -ENOENT;
}

/* Whether @path starts with "#!" (unreadable: not known, so no). */
static int script(const char *path)
{
	char hb[2];
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK), is;

	if (fd < 0)
		return 0;
	is = read(fd, hb, 2) == 2 && hb[0] == '#' && hb[1] == '!';
	close(fd);
	return is;
}

/* Why COMMAND's own exec leaves it not dumpable, into c->detach, or "". */
static void check_detach(struct stat_ctx *c, const char *cmd)
{
	char path[4096];
	struct stat st;
	int nnp = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1;

	c->detach[0] = 0;
	if (find_cmd(cmd, path, sizeof(path)) || stat(path, &st) ||
	    !S_ISREG(st.st_mode))
		return;		/* execvp() says so, as it would anyway */
	/* A script's set-ID bits are not honoured (its interpreter runs). */
	if (script(path))
		nnp = 1;
	if (!nnp && (st.st_mode & S_ISUID) && st.st_uid != getuid())
		snprintf(c->detach, sizeof(c->detach), "%.200s is set-user-ID "
			 "(owner uid %u)", path, (unsigned int)st.st_uid);
	else if (!nnp && (st.st_mode & S_ISGID) && st.st_gid != getgid())
		snprintf(c->detach, sizeof(c->detach), "%.200s is set-group-ID "
			 "(group gid %u)", path, (unsigned int)st.st_gid);
	else if (!nnp && getuid() &&
		 getxattr(path, "security.capability", NULL, 0) > 0)
		snprintf(c->detach, sizeof(c->detach), "%.200s has file "
			 "capabilities", path);
	else if (faccessat(AT_FDCWD, path, R_OK, AT_EACCESS))
		snprintf(c->detach, sizeof(c->detach), "%.200s may be run but "
			 "not read", path);
	else
		return;
	snprintf(c->detach + strlen(c->detach),
		 sizeof(c->detach) - strlen(c->detach), ": the kernel "
		 "detaches perf counters at its exec (the process stops being "
		 "dumpable)");
}

/*
 * After the run: task-clock far below the CPU time COMMAND's rusage says
 * it used is a counter detached on the way (a privileged program exec'd
 * later in COMMAND, as check_detach() says of COMMAND itself). Every
 * counter is then not counted: each stopped there.
 */
static void check_detached(struct stat_ctx *c, const struct rusage *ru)
{
	const struct ev *t = &c->ev[EV_TASK_CLOCK];
	double cpu = ((double)ru->ru_utime.tv_sec + ru->ru_stime.tv_sec) * 1e9 +
		     ((double)ru->ru_utime.tv_usec + ru->ru_stime.tv_usec) * 1e3;

	if (c->detach[0] || t->state != EV_COUNTED || cpu < 1e6 ||
	    t->value >= cpu / 2)
		return;
	snprintf(c->detach, sizeof(c->detach), "detached while COMMAND ran: "
		 "task-clock %.3f ms, but COMMAND's rusage %.3f ms of CPU (a "
		 "set-user-ID, set-group-ID or unreadable program exec'd in "
		 "COMMAND; the kernel detaches perf counters there)",
		 t->value / 1e6, cpu / 1e6);
}

/* Every counter not counted, because of c->detach. */
static void mark_detached(struct stat_ctx *c)
{
	for (int i = 0; i < N_EV; i++) {
		struct ev *e = &c->ev[i];

		if (e->state == EV_NOT_SUPPORTED)
			continue;
		if (e->state == EV_COUNTED)
			snprintf(e->why, sizeof(e->why), "detached at an "
				 "exec that made it not dumpable (read %.0f "
				 "until then)", e->value);
		else if (!e->why[0])
			snprintf(e->why, sizeof(e->why), "detached at an "
				 "exec that made it not dumpable");
		e->state = EV_NOT_COUNTED;
		e->scaled = 0;
	}
}

/* pkc_spawn()'s @ready: the child waits before its exec meanwhile. */
static void open_all(pid_t pid, void *arg)
{
	struct stat_ctx *c = arg;

	for (int i = 0; i < N_EV; i++)
		open_one(c, i, pid);
	clock_gettime(CLOCK_MONOTONIC, &c->t0);
}

/* Read every counter opened, scaling the multiplexed ones; close them. */
static void read_all(struct stat_ctx *c, const char *halve)
{
	for (int i = 0; i < N_EV; i++) {
		struct ev *e = &c->ev[i];
		uint64_t v[3];
		ssize_t got;

		if (e->fd < 0)
			continue;
		got = read(e->fd, v, sizeof(v));
		close(e->fd);
		e->fd = -1;
		if (got != (ssize_t)sizeof(v)) {
			e->state = EV_NOT_COUNTED;
			snprintf(e->why, sizeof(e->why), "read: %s",
				 got < 0 ? strerror(errno) : "short read");
			continue;
		}
		e->raw = v[0];
		e->enabled = v[1];
		e->running = v[2];
		if (listed(halve, ev_defs[i].name)) {
			e->halve = 1;
			e->running /= 2;
			e->raw /= 2;
		}
		if (e->enabled && !e->running) {
			e->state = EV_NOT_COUNTED;
			snprintf(e->why, sizeof(e->why), "enabled %.3f ms but "
				 "never on the PMU (other events took it)",
				 (double)e->enabled / 1e6);
			continue;
		}
		e->state = EV_COUNTED;
		e->value = (double)e->raw;
		if (e->running < e->enabled) {
			e->scaled = 1;
			e->value = (double)e->raw * ((double)e->enabled /
						     (double)e->running);
		}
	}
}

static int have(const struct stat_ctx *c, int i)
{
	return c->ev[i].state == EV_COUNTED;
}

static double val(const struct stat_ctx *c, int i)
{
	return c->ev[i].value;
}

/* The derived figures; each NAN-free: @ok says whether it exists. */
struct ratios {
	int cpus_ok, ghz_ok, ipc_ok, ipf_ok, fps_ok;
	double cpus, ghz, ipc, ipf, fps;
};

static void ratios(const struct stat_ctx *c, double wall_ns, struct ratios *r)
{
	memset(r, 0, sizeof(*r));
	if (have(c, EV_TASK_CLOCK) && wall_ns > 0) {
		r->cpus_ok = 1;
		r->cpus = val(c, EV_TASK_CLOCK) / wall_ns;
	}
	if (have(c, EV_CYCLES) && have(c, EV_TASK_CLOCK) && val(c, EV_TASK_CLOCK) > 0) {
		r->ghz_ok = 1;
		r->ghz = val(c, EV_CYCLES) / val(c, EV_TASK_CLOCK);
	}
	if (have(c, EV_INSN) && have(c, EV_CYCLES) && val(c, EV_CYCLES) > 0) {
		r->ipc_ok = 1;
		r->ipc = val(c, EV_INSN) / val(c, EV_CYCLES);
	}
	if (have(c, EV_INSN) && have(c, EV_FAULTS) && val(c, EV_FAULTS) > 0) {
		r->ipf_ok = 1;
		r->ipf = val(c, EV_INSN) / val(c, EV_FAULTS);
	}
	if (have(c, EV_FAULTS) && have(c, EV_SYSCALLS) && val(c, EV_SYSCALLS) > 0) {
		r->fps_ok = 1;
		r->fps = val(c, EV_FAULTS) / val(c, EV_SYSCALLS);
	}
}

static double tv_s(const struct timeval *tv)
{
	return (double)tv->tv_sec + (double)tv->tv_usec / 1e6;
}

static unsigned long long tv_us(const struct timeval *tv)
{
	return (unsigned long long)tv->tv_sec * 1000000ull +
	       (unsigned long long)tv->tv_usec;
}

/* A JSON number or null. */
static void json_num(FILE *o, int ok, double v)
{
	if (ok)
		fprintf(o, "%.6g", v);
	else
		fputs("null", o);
}

static const char *state_name(enum ev_state s)
{
	return s == EV_COUNTED ? "counted" :
	       s == EV_NOT_SUPPORTED ? "not supported" : "not counted";
}

/* -p's figures, for the report (NULL without -p). */
struct fnrep;
static void fn_json_rep(FILE *o, const struct fnrep *x);

static void report_json(FILE *o, const struct stat_ctx *c, char **argv,
			int status, double wall_ns, const struct rusage *ru,
			const struct fnrep *fx)
{
	struct ratios r;

	ratios(c, wall_ns, &r);
	fprintf(o, "{\"command\":[");
	for (int i = 0; argv[i]; i++) {
		if (i)
			fputc(',', o);
		pkc_json_str(o, argv[i]);
	}
	fprintf(o, "],\"exit_status\":%d,\"wall_ns\":%.0f,"
		   "\"user_s\":%.6f,\"sys_s\":%.6f,\"counters\":{",
		status, wall_ns, tv_s(&ru->ru_utime), tv_s(&ru->ru_stime));
	for (int i = 0; i < N_EV; i++) {
		const struct ev *e = &c->ev[i];

		fprintf(o, "%s\"%s\":{\"value\":", i ? "," : "", ev_defs[i].name);
		if (e->state == EV_COUNTED)
			fprintf(o, "%.0f", e->value);
		else
			fputs("null", o);
		fprintf(o, ",\"unit\":\"%s\",\"status\":\"%s\"",
			i == EV_TASK_CLOCK ? "ns" : "count", state_name(e->state));
		if (e->state == EV_COUNTED)
			fprintf(o, ",\"raw\":%llu,\"enabled_ns\":%llu,"
				   "\"running_ns\":%llu,\"scaled\":%s,"
				   "\"user_only\":%s",
				(unsigned long long)e->raw,
				(unsigned long long)e->enabled,
				(unsigned long long)e->running,
				e->scaled ? "true" : "false",
				e->user_only ? "true" : "false");
		fprintf(o, ",\"reason\":");
		if (e->state == EV_COUNTED)
			fputs("null", o);
		else
			pkc_json_str(o, e->why);
		fputc('}', o);
	}
	fprintf(o, "},\"ratios\":{\"cpus_utilized\":");
	json_num(o, r.cpus_ok, r.cpus);
	fprintf(o, ",\"ghz\":");
	json_num(o, r.ghz_ok, r.ghz);
	fprintf(o, ",\"insn_per_cycle\":");
	json_num(o, r.ipc_ok, r.ipc);
	fprintf(o, ",\"insn_per_fault\":");
	json_num(o, r.ipf_ok, r.ipf);
	fprintf(o, ",\"faults_per_syscall\":");
	json_num(o, r.fps_ok, r.fps);
	fprintf(o, "},\"detached\":");
	if (c->detach[0])
		pkc_json_str(o, c->detach);
	else
		fputs("null", o);
	fprintf(o, ",\"rusage\":{\"utime_us\":%llu,\"stime_us\":%llu,"
		   "\"minflt\":%ld,\"majflt\":%ld,\"nvcsw\":%ld,\"nivcsw\":%ld,"
		   "\"maxrss_kb\":%ld}",
		tv_us(&ru->ru_utime), tv_us(&ru->ru_stime), ru->ru_minflt,
		ru->ru_majflt, ru->ru_nvcsw, ru->ru_nivcsw, ru->ru_maxrss);
	if (fx)
		fn_json_rep(o, fx);
	fputs("}\n", o);
}

/* "%8.3f K/sec" as perf stat scales a rate of @n per task-clock second. */
static void rate(char *buf, size_t len, double n, double task_ns)
{
	double per_s = n / (task_ns / 1e9);

	if (per_s >= 1e6)
		snprintf(buf, len, "%8.3f M/sec", per_s / 1e6);
	else if (per_s >= 1e3)
		snprintf(buf, len, "%8.3f K/sec", per_s / 1e3);
	else
		snprintf(buf, len, "%8.3f /sec", per_s);
}

/* One counter's line: value, unit, name, then the comment column. */
static void line(FILE *o, const struct stat_ctx *c, int i, const char *unit,
		 const char *comment, int col)
{
	const struct ev *e = &c->ev[i];
	char v[32], name[40];

	snprintf(name, sizeof(name), "%s%s", ev_defs[i].name,
		 e->user_only ? ":u" : "");
	if (e->state == EV_NOT_SUPPORTED)
		snprintf(v, sizeof(v), "<not supported>");
	else if (e->state == EV_NOT_COUNTED)
		snprintf(v, sizeof(v), "<not counted>");
	else if (i == EV_TASK_CLOCK)
		snprintf(v, sizeof(v), "%.2f", e->value / 1e6);
	else
		snprintf(v, sizeof(v), "%.0f", e->value);
	/* Not counted: the line in colour (the widths without the SGRs). */
	col = col && e->state != EV_COUNTED;
	fprintf(o, "%s%18s %-4s %-28s", pkc_sgr(col, PKC_SGR_WARN), v,
		e->state == EV_COUNTED ? unit : "", name);
	if (e->state != EV_COUNTED)
		fprintf(o, " # %s%s", e->why, pkc_sgr(col, PKC_SGR_OFF));
	else if (comment && *comment)
		fprintf(o, " # %s", comment);
	if (e->scaled)
		fprintf(o, "  (scaled: on the PMU %.2f%% of the time)",
			100.0 * (double)e->running / (double)e->enabled);
	fputc('\n', o);
}

static void report_text(FILE *o, const struct stat_ctx *c, char **argv,
			double wall_ns, const struct rusage *ru)
{
	double task = have(c, EV_TASK_CLOCK) ? val(c, EV_TASK_CLOCK) : 0;
	struct ratios r;
	char buf[80];
	int user_only = 0, scaled = 0, col = pkc_color_for(o, 0);

	ratios(c, wall_ns, &r);
	fprintf(o, "\n %sPerformance counter stats for '",
		pkc_sgr(col, PKC_SGR_HEAD));
	for (int i = 0; argv[i]; i++)
		fprintf(o, "%s%s", i ? " " : "", argv[i]);
	fprintf(o, "':%s\n\n", pkc_sgr(col, PKC_SGR_OFF));
	for (int i = 0; i < N_EV; i++) {
		buf[0] = 0;
		user_only |= c->ev[i].user_only && c->ev[i].state == EV_COUNTED;
		scaled |= c->ev[i].scaled;
		switch (i) {
		case EV_TASK_CLOCK:
			if (r.cpus_ok)
				snprintf(buf, sizeof(buf), "%8.3f CPUs utilized",
					 r.cpus);
			line(o, c, i, "msec", buf, col);
			continue;
		case EV_CYCLES:
			if (r.ghz_ok)
				snprintf(buf, sizeof(buf), "%8.3f GHz", r.ghz);
			break;
		case EV_INSN:
			if (r.ipc_ok)
				snprintf(buf, sizeof(buf), "%8.2f insn per cycle",
					 r.ipc);
			break;
		case EV_SYSCALLS:
			if (r.fps_ok)
				snprintf(buf, sizeof(buf), "%8.3f faults per syscall",
					 r.fps);
			break;
		default:
			if (have(c, i) && task > 0)
				rate(buf, sizeof(buf), val(c, i), task);
		}
		line(o, c, i, "", buf, col);
		/* The second ratio of instructions, on a line of its own. */
		if (i == EV_INSN && r.ipf_ok)
			fprintf(o, "%18s %-4s %-28s # %8.1f insn per fault\n",
				"", "", "", r.ipf);
	}
	fprintf(o, "\n %17.9f seconds time elapsed\n\n", wall_ns / 1e9);
	fprintf(o, " %17.9f seconds user\n", tv_s(&ru->ru_utime));
	fprintf(o, " %17.9f seconds sys\n", tv_s(&ru->ru_stime));
	if (user_only)
		fprintf(o, "\n NAME:u counts user space only (perf_event_paranoid "
			   "%d; root or CAP_PERFMON counts the kernel's side too)\n",
			paranoid());
	if (c->detach[0])
		fprintf(o, "\n Counters not counted: %s\n", c->detach);
	if (scaled)
		fprintf(o, "\n Scaled counters were multiplexed: their values "
			   "are estimates from the time they were counted\n");
	fputc('\n', o);
}

/* As count's: every write, the flush and the close. 0, or 125. */
static int report_done(FILE *out, const char *path)
{
	int err = 0;

	if (fflush(out) || ferror(out))
		err = errno ? errno : EIO;
	if (out != stderr && fclose(out) && !err)
		err = errno ? errno : EIO;
	if (!err)
		return 0;
	pkc_err("cannot write the report to %s: %s\n",
		path ? path : "standard error", strerror(err));
	return PKC_EXIT_OWN;
}

/* ------------------------------------------- -p: per probed function */

/* One function of one spec, summed over threads and processes. */
struct sfn {
	char *name;		/* NULL: an empty entry */
	uint32_t spec;
	int int3;
	uint64_t calls, minflt, majflt, nvcsw, nivcsw;
	uint64_t missed;	/* calls not counted (the return-probe library's) */
	uint32_t cells;		/* thread cells summed */
};

struct stab {
	struct sfn *e;
	size_t n, cap;
	int oom;
	struct pkc_run *run;
	int failed_ru;		/* records whose getrusage() failed at start */
	int32_t ru_err;		/* and its -errno */
	/* Per spec armed: its functions not probed, the first reason. */
	unsigned long long *unprobed;
	char **unprobed_why;
};

static size_t sfn_hash(uint32_t spec, const char *name)
{
	size_t h = 14695981039346656037ull ^ spec;

	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 1099511628211ull;
	return h;
}

static struct sfn *sfn_slot(struct sfn *e, size_t cap, uint32_t spec,
			    const char *name)
{
	size_t i = sfn_hash(spec, name) & (cap - 1);

	while (e[i].name && (e[i].spec != spec || strcmp(e[i].name, name)))
		i = (i + 1) & (cap - 1);
	return &e[i];
}

static struct sfn *sfn_get(struct stab *t, uint32_t spec, const char *name)
{
	struct sfn *f;

	if (t->oom)
		return NULL;
	if (2 * (t->n + 1) > t->cap) {
		size_t cap = t->cap ? 2 * t->cap : 64;
		struct sfn *e = calloc(cap, sizeof(*e));

		if (!e) {
			t->oom = 1;
			return NULL;
		}
		for (size_t i = 0; i < t->cap; i++)
			if (t->e[i].name)
				*sfn_slot(e, cap, t->e[i].spec, t->e[i].name) =
					t->e[i];
		free(t->e);
		t->e = e;
		t->cap = cap;
	}
	f = sfn_slot(t->e, t->cap, spec, name);
	if (!f->name) {
		f->name = strdup(name);
		if (!f->name) {
			t->oom = 1;
			return NULL;
		}
		f->spec = spec;
		t->n++;
	}
	return f;
}

static void stab_free(struct stab *t)
{
	for (size_t i = 0; i < t->cap; i++)
		free(t->e[i].name);
	free(t->e);
	for (int i = 0; t->unprobed_why && t->run && i < t->run->n; i++)
		free(t->unprobed_why[i]);
	free(t->unprobed_why);
	free(t->unprobed);
}

/* The stat area of @h, checked against the record's size, or NULL. */
static const struct pka_stat_area *stat_area_of(const struct pka_header *h)
{
	const struct pka_stat_area *a;

	if (h->mode_len < sizeof(*a))
		return NULL;
	a = (const void *)((const char *)h + h->mode_at);
	if (a->thr_size < pka_stat_thr_size(h->nprobe) ||
	    a->thr_at < h->mode_at + sizeof(*a) ||
	    (uint64_t)a->thr_at + (uint64_t)a->nthr * a->thr_size > a->cell_at ||
	    (uint64_t)a->cell_at + (uint64_t)a->ncell *
	    sizeof(struct pka_stat_cell) > h->size)
		return NULL;
	return a;
}

static void sfn_add(struct sfn *f, uint64_t calls, uint64_t mi, uint64_t ma,
		    uint64_t vc, uint64_t ic)
{
	f->calls += calls;
	f->minflt += mi;
	f->majflt += ma;
	f->nvcsw += vc;
	f->nivcsw += ic;
}

/*
 * A record into the table: per probe its slot (calls that found no
 * cell) and the cells its thread blocks name (a cell is read only
 * through its block, which names it once its probe is set).
 */
static void stat_add_rec(const struct pka_header *h, void *arg)
{
	struct stab *t = arg;
	struct pka_header *w = (struct pka_header *)h;
	const struct pka_stat_area *a = stat_area_of(h);

	if (!a)
		return;
	if (a->status) {
		t->failed_ru++;
		t->ru_err = a->status;
	}
	for (uint32_t i = 0; i < h->n; i++) {
		const struct pka_spec *s = pka_record_spec(w, i);

		if (s->first > h->nprobe || s->nprobe > h->nprobe - s->first)
			continue;
		for (uint32_t k = s->first; k < s->first + s->nprobe; k++) {
			const struct pka_probe *p = pka_record_probe(w, k);
			const struct pka_stat *sl = pka_record_slot(w, k);
			const char *name = t->run->specs[i];
			struct sfn *f;

			if (p->status && p->status != PKA_PENDING && !s->status &&
			    (int)i < t->run->n)
				pkc_note_unprobed(w, i, p, &t->unprobed[i],
						  &t->unprobed_why[i]);
			if (p->status || p->spec != i)
				continue;
			if (p->name && p->name <= h->why_len)
				name = (const char *)h + h->why_at + p->name - 1;
			f = sfn_get(t, i, name);
			if (!f)
				return;
			f->int3 |= p->int3 != 0;
			sfn_add(f, sl->calls, sl->minflt, sl->majflt, sl->nvcsw,
				sl->nivcsw);
			f->missed += sl->missed;
			for (uint32_t b = 0; b < a->nthr; b++) {
				const struct pka_stat_thread *th = (const void *)
					((const char *)h + a->thr_at +
					 (uint64_t)b * a->thr_size);
				uint32_t at = th->cell[k];
				const struct pka_stat_cell *cl;

				if (!at || at > a->ncell)
					continue;
				cl = (const struct pka_stat_cell *)
				     ((const char *)h + a->cell_at) + (at - 1);
				if (cl->probe != k)
					continue;
				sfn_add(f, cl->calls, cl->minflt, cl->majflt,
					cl->nvcsw, cl->nivcsw);
				f->cells++;
			}
		}
	}
}

static int by_faults(const void *x, const void *y)
{
	const struct sfn *a = *(const struct sfn *const *)x;
	const struct sfn *b = *(const struct sfn *const *)y;
	uint64_t fa = a->minflt + a->majflt, fb = b->minflt + b->majflt;
	uint64_t ca = a->nvcsw + a->nivcsw, cb = b->nvcsw + b->nivcsw;

	if (fa != fb)
		return fa > fb ? -1 : 1;
	if (ca != cb)
		return ca > cb ? -1 : 1;
	if (a->calls != b->calls)
		return a->calls > b->calls ? -1 : 1;
	if (a->spec != b->spec)
		return a->spec < b->spec ? -1 : 1;
	return strcmp(a->name, b->name);
}

/* The functions, most faults first; NULL without memory. */
static struct sfn **stab_sorted(const struct stab *t)
{
	struct sfn **v = calloc(t->n ? t->n : 1, sizeof(*v));
	size_t k = 0;

	if (!v)
		return NULL;
	for (size_t i = 0; i < t->cap; i++)
		if (t->e[i].name)
			v[k++] = &t->e[i];
	qsort(v, k, sizeof(*v), by_faults);
	return v;
}

static double per_call(uint64_t n, uint64_t calls)
{
	return calls ? (double)n / (double)calls : 0;
}

/* -p's part of the JSON: members after the counters' (",\"NAME\":..."). */
static void fn_json(FILE *o, const struct stab *t, struct sfn **v,
		    const struct pkc_spec *sp, int procs)
{
	const struct pkc_run *r = t->run;

	fprintf(o, ",\"processes\":%d,\"probe_read\":\"getrusage(RUSAGE_THREAD)"
		   " at entry and return\",\"inclusive\":true", procs);
	if (t->failed_ru) {
		fprintf(o, ",\"probe_read_error\":");
		pkc_json_str(o, strerror(-t->ru_err));
	}
	fprintf(o, ",\"functions\":[");
	for (size_t k = 0; k < t->n; k++) {
		const struct sfn *f = v[k];

		fprintf(o, "%s{\"spec\":", k ? "," : "");
		pkc_json_str(o, r->specs[f->spec]);
		fprintf(o, ",\"name\":");
		pkc_json_str(o, f->name);
		fprintf(o, ",\"calls\":%llu,\"minor_faults\":%llu,"
			   "\"major_faults\":%llu,\"voluntary_csw\":%llu,"
			   "\"involuntary_csw\":%llu,\"csw\":%llu,"
			   "\"faults_per_call\":%.6g,\"csw_per_call\":%.6g,"
			   "\"threads\":%u,\"calls_not_counted\":%llu,\"int3\":%s}",
			(unsigned long long)f->calls,
			(unsigned long long)f->minflt,
			(unsigned long long)f->majflt,
			(unsigned long long)f->nvcsw,
			(unsigned long long)f->nivcsw,
			(unsigned long long)(f->nvcsw + f->nivcsw),
			per_call(f->minflt + f->majflt, f->calls),
			per_call(f->nvcsw + f->nivcsw, f->calls), f->cells,
			(unsigned long long)f->missed, f->int3 ? "true" : "false");
	}
	fprintf(o, "],\"probes\":[");
	for (int i = 0; i < r->n; i++) {
		fprintf(o, "%s{\"spec\":", i ? "," : "");
		pkc_json_str(o, r->specs[i]);
		fprintf(o, ",\"armed_in\":%d,\"int3_in\":%d,\"failed_in\":%d",
			sp[i].armed, sp[i].int3, sp[i].failed);
		if (sp[i].failed) {
			fprintf(o, ",\"error\":");
			pkc_json_str(o, sp[i].why[0] ? sp[i].why
						     : strerror(sp[i].last_err));
		}
		if (t->unprobed[i]) {
			fprintf(o, ",\"not_probed\":%llu,\"not_probed_error\":",
				t->unprobed[i]);
			pkc_json_str(o, t->unprobed_why[i] ? t->unprobed_why[i] : "");
		}
		fputc('}', o);
	}
	fputc(']', o);
	pkc_run_json_procs(r, o);
}

struct fnrep {
	const struct stab *t;
	struct sfn **v;
	const struct pkc_spec *sp;
	int procs;
};

static void fn_json_rep(FILE *o, const struct fnrep *x)
{
	fn_json(o, x->t, x->v, x->sp, x->procs);
}

/* -p's table, after the counters. */
static void fn_text(FILE *o, const struct stab *t, struct sfn **v,
		    const struct pkc_spec *sp, int procs)
{
	const struct pkc_run *r = t->run;
	int col = pkc_color_for(o, 0);
	const char *warn = pkc_sgr(col, PKC_SGR_WARN);
	const char *bad = pkc_sgr(col, PKC_SGR_BAD);
	const char *off = pkc_sgr(col, PKC_SGR_OFF);
	uint64_t missed = 0;
	size_t idle = 0;

	fprintf(o, " %sInside the probed functions' calls%s (%d process%s; "
		   "inclusive of nested probed calls; getrusage(RUSAGE_THREAD) "
		   "read at each call's entry and return):\n\n",
		pkc_sgr(col, PKC_SGR_HEAD), off, procs, procs == 1 ? "" : "es");
	fprintf(o, " %s%12s %13s %13s %11s %11s %12s %10s  %s%s\n",
		pkc_sgr(col, PKC_SGR_HEAD), "calls", "minor-faults",
		"major-faults", "vol-csw", "invol-csw", "faults/call",
		"csw/call", "function", off);
	for (size_t k = 0; k < t->n; k++) {
		const struct sfn *f = v[k];

		missed += f->missed;
		if (!f->calls && !f->missed) {
			idle++;
			continue;
		}
		fprintf(o, " %12llu %13llu %13llu %11llu %11llu %12.2f %10.2f  %s",
			(unsigned long long)f->calls,
			(unsigned long long)f->minflt,
			(unsigned long long)f->majflt,
			(unsigned long long)f->nvcsw,
			(unsigned long long)f->nivcsw,
			per_call(f->minflt + f->majflt, f->calls),
			per_call(f->nvcsw + f->nivcsw, f->calls), f->name);
		if (r->n > 1 && strpbrk(r->specs[f->spec], "*?["))
			fprintf(o, "  [%s]", r->specs[f->spec]);
		if (f->int3)
			fprintf(o, "  %s(int3 probe: ~1 us a call to the program)%s",
				warn, off);
		if (f->missed)
			fprintf(o, "  %s(%llu calls not counted: return-probe "
				   "depth/threads)%s", warn,
				(unsigned long long)f->missed, off);
		fputc('\n', o);
	}
	if (idle)
		fprintf(o, " %12s  (%zu more function%s probed, no call returned)\n",
			"", idle, idle == 1 ? "" : "s");
	for (int i = 0; i < r->n; i++) {
		if (sp[i].failed)
			fprintf(o, " %s%s: not probed in %d of %d: %s%s\n", bad,
				r->specs[i], sp[i].failed, procs,
				sp[i].why[0] ? sp[i].why : strerror(sp[i].last_err),
				off);
		else if (!sp[i].armed)
			fprintf(o, " %s%s: not probed%s\n", bad, r->specs[i], off);
		if (t->unprobed[i])
			fprintf(o, " %s%s: %llu of its functions not probed%s%s%s\n",
				bad, r->specs[i], t->unprobed[i],
				t->unprobed_why[i] ? ", first: " : "",
				t->unprobed_why[i] ? t->unprobed_why[i] : "", off);
	}
	if (t->failed_ru)
		fprintf(o, " %snothing counted in %d process%s: "
			   "getrusage(RUSAGE_THREAD): %s%s\n", bad, t->failed_ru,
			t->failed_ru == 1 ? "" : "es", strerror(-t->ru_err), off);
	fprintf(o, "\n The counters above include the agent's start-up and these "
		   "readings (two system calls a probed call).\n\n");
	(void)missed;
}

static int stat_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "probe", required_argument, NULL, 'p' },
		{ "probes", required_argument, NULL, 'P' },
		{ "json", no_argument, NULL, 'j' },
		{ "output", required_argument, NULL, 'o' },
		{ "strict", no_argument, NULL, 's' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "color", optional_argument, NULL, 'C' },
		{ "colour", optional_argument, NULL, 'C' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct stat_ctx c = { .fail = getenv("PROBEKIT_STAT_FAIL") };
	struct pkc_spec_list l = { 0 };
	struct pkc_run r = {
		.mode_name = "stat",
		.mode = PKA_MODE_STAT,
		.slot = sizeof(struct pka_stat),
		.area = pka_stat_area_size,
		.ready = open_all,
		.ready_ctx = &c,
	};
	struct stab tab = { .run = &r };
	struct pkc_spec *sp = NULL;
	struct sfn **v = NULL;
	struct fnrep fx;
	const char *out_path = NULL;
	struct timespec t1;
	struct rusage ru;
	double wall_ns;
	int json = 0, ch, code = PKC_EXIT_OWN, wrote, quiet = 0, procs = 0;
	FILE *out = stderr;
	pid_t pid;

	while ((ch = getopt_long(argc, argv, "+p:P:jo:qh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'p':
			if (pkc_spec_add(&l, optarg, "-p"))
				goto out;
			break;
		case 'P':
			if (pkc_spec_file(&l, optarg))
				goto out;
			break;
		case 'j':
			json = 1;
			break;
		case 'o':
			out_path = optarg;
			break;
		case 's':
			r.strict = 1;
			break;
		case 'q':
			quiet = 1;
			break;
		case 'C':
			if (pkc_color_opt(optarg))
				goto out;
			break;
		case 'h':
			pkc_usage(stdout, &pkc_cmd_stat);
			code = 0;
			goto out;
		default:
			pkc_usage(stderr, &pkc_cmd_stat);
			goto out;
		}
	}
	if (optind >= argc) {
		pkc_err("no command given\n");
		pkc_usage(stderr, &pkc_cmd_stat);
		goto out;
	}
	for (int i = 0; i < N_EV; i++)
		c.ev[i].fd = -1;
	if (l.n) {
		r.specs = l.v;
		r.n = l.n;
		if (pkc_run_find_agent(&r))
			goto out;
		sp = calloc((size_t)r.n, sizeof(*sp));
		tab.unprobed = calloc((size_t)r.n, sizeof(*tab.unprobed));
		tab.unprobed_why = calloc((size_t)r.n, sizeof(*tab.unprobed_why));
		if (!sp || !tab.unprobed || !tab.unprobed_why) {
			pkc_err("%s\n", strerror(ENOMEM));
			goto out;
		}
	}
	if (out_path && !(out = fopen(out_path, "we"))) {
		pkc_err("%s: %s\n", out_path, strerror(errno));
		out = stderr;
		goto out;
	}
	check_detach(&c, argv[optind]);
	if (l.n) {
		pkc_progress_init(quiet);
		code = pkc_run_start(&r, &argv[optind]);
	} else {
		code = pkc_spawn(&argv[optind], &pid, open_all, &c);
	}
	if (code) {
		for (int i = 0; i < N_EV; i++)
			if (c.ev[i].fd >= 0)
				close(c.ev[i].fd);
		goto out;
	}
	memset(&ru, 0, sizeof(ru));
	if (l.n) {
		code = pkc_run_wait(&r, 0, NULL, NULL);
		ru = r.ru;
		t1 = r.end;
	} else {
		code = pkc_spawn_wait(pid, &ru, &t1);
	}
	read_all(&c, getenv("PROBEKIT_STAT_HALVE"));
	check_detached(&c, &ru);
	if (c.detach[0])
		mark_detached(&c);
	/* What the kernel does count of them without perf: said beside. */
	if (c.ev[EV_CS].user_only && c.ev[EV_CS].state == EV_NOT_COUNTED) {
		size_t n = strlen(c.ev[EV_CS].why);

		snprintf(c.ev[EV_CS].why + n, sizeof(c.ev[EV_CS].why) - n,
			 "; COMMAND's rusage: %ld voluntary + %ld involuntary",
			 ru.ru_nvcsw, ru.ru_nivcsw);
	}
	wall_ns = (double)(t1.tv_sec - c.t0.tv_sec) * 1e9 +
		  (double)(t1.tv_nsec - c.t0.tv_nsec);
	if (l.n) {
		for (int i = 0; i < r.n; i++)
			sp[i].spec = l.v[i];
		procs = pkc_run_collect(&r, sp, 1, stat_add_rec, &tab);
		pkc_run_end(&r);
		pkc_run_check(&r, procs, sp);
		v = tab.oom ? NULL : stab_sorted(&tab);
		if (!v) {
			pkc_err("%s\n", strerror(ENOMEM));
			code = PKC_EXIT_OWN;
			goto out;
		}
		{
			/* Calls the return probes could not take: figures missing. */
			uint64_t missed = 0;
			char line[160];

			for (size_t k = 0; k < tab.n; k++)
				missed += v[k]->missed;
			if (missed) {
				snprintf(line, sizeof(line), "%llu calls not "
					 "counted (return-probe depth/threads)",
					 (unsigned long long)missed);
				pkc_run_problem(&r, line);
			}
			if (tab.failed_ru)
				pkc_run_problem(&r, "getrusage() failed in "
						"some calls: their figures are "
						"missing");
		}
		fx = (struct fnrep){ .t = &tab, .v = v, .sp = sp, .procs = procs };
	}
	if (json) {
		report_json(out, &c, &argv[optind], code, wall_ns, &ru,
			    l.n ? &fx : NULL);
	} else {
		report_text(out, &c, &argv[optind], wall_ns, &ru);
		if (l.n)
			fn_text(out, &tab, v, sp, procs);
	}
	wrote = report_done(out, out_path);
	out = stderr;
	if (l.n)
		code = pkc_run_verdict(&r, code);
	if (wrote)
		code = wrote;
out:
	if (out != stderr)
		fclose(out);
	free(v);
	free(sp);
	stab_free(&tab);
	pkc_run_free(&r);
	pkc_spec_list_free(&l);
	return code;
}

const struct pkc_cmd pkc_cmd_stat = {
	.name = "stat",
	.synopsis = "stat [-p SPEC]... [-P FILE]... [--json] [-o FILE] [--strict] [-q]\n"
		    "         [--color[=WHEN]] -- COMMAND [ARG]...",
	.help =
		"Counts what COMMAND cost, as perf stat does, summed over every thread and\n"
		"process it starts: task clock, wall time, page faults (minor, major),\n"
		"context switches, CPU migrations, cycles and instructions where the CPU\n"
		"has counters, syscalls where the raw_syscalls tracepoint may be used\n"
		"(root); what is not counted is said, with why.\n"
		"  -j, --json        the report as one JSON object\n"
		"  -o, --output FILE the report to FILE instead of stderr\n"
		"      --color[=WHEN] colour the text report: auto (a terminal, NO_COLOR\n"
		"                    unset), always, never\n"
		"  -p, --probe SPEC  also, per function (NAME, OBJECT:NAME or a glob): the\n"
		"                    page faults and context switches inside its calls\n"
		"                    (getrusage(RUSAGE_THREAD) at entry and return: two\n"
		"                    system calls a call; nested probed calls included)\n"
		"  -P, --probes FILE the specs in FILE, one a line (- for stdin; # comments)\n"
		"      --strict      with -p: exit 125 if anything is missing from the figures\n"
		"  -q, --quiet       no progress line on the terminal while probes are armed\n",
	.main = stat_main,
};
