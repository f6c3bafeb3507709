/* SPDX-License-Identifier: MIT */
/* cli.h - what the probekit command's files share: subcommands, exit statuses, running COMMAND with the agent. */
#ifndef PK_CLI_CLI_H
#define PK_CLI_CLI_H

#include <stdint.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <time.h>

#include "protocol.h"

/*
 * Exit statuses, as timeout(1) and env(1) have them: COMMAND's own, or
 * 128+N when signal N killed it; these when it could not come to that.
 */
#define PKC_EXIT_OWN 125	/* probekit failed: usage, agent, no room, report */
#define PKC_EXIT_CANNOT_RUN 126	/* COMMAND found but not executable */
#define PKC_EXIT_NOT_FOUND 127	/* COMMAND not found */

/* A subcommand: probekit NAME ARG... runs main(argc, argv) from NAME on. */
struct pkc_cmd {
	const char *name;
	const char *synopsis;	/* after "probekit ", one line */
	const char *help;	/* what it does and its options, lines */
	int (*main)(int argc, char **argv);
};

extern const struct pkc_cmd pkc_cmd_count;
extern const struct pkc_cmd pkc_cmd_list;
extern const struct pkc_cmd pkc_cmd_stat;
extern const struct pkc_cmd pkc_cmd_time;
extern const struct pkc_cmd pkc_cmd_trace;

/* The specs of a run: -p arguments and -P files' lines, in their order. */
struct pkc_spec_list {
	char **v;
	int n, cap;
	char **bufs;		/* the -P files read, split in place */
	int nbufs;
};

/*
 * pkc_spec_add() - add -p @spec (from @where, for the message);
 * pkc_spec_file() - add the specs of -P @path, one a line; 0, or
 * PKC_EXIT_OWN after saying why (cmd_count.c). pkc_spec_list_free().
 */
int pkc_spec_add(struct pkc_spec_list *l, char *spec, const char *where);
int pkc_spec_file(struct pkc_spec_list *l, const char *path);
void pkc_spec_list_free(struct pkc_spec_list *l);

/*
 * pkc_report_done() - whether the report went out: every write, the
 * flush and (of -o @path) the close; 0, or 125 after saying why.
 */
int pkc_report_done(FILE *out, const char *path, int err);

/* pkc_usage() - the usage of @cmd, or of every subcommand if NULL. */
void pkc_usage(FILE *f, const struct pkc_cmd *cmd);

/*
 * pkc_json_str() - @s as a JSON string, quoted and escaped; a byte that is
 * not part of valid UTF-8 is written as \ufffd, so the output is valid
 * UTF-8 whatever @s holds.
 */
void pkc_json_str(FILE *o, const char *s);

/*
 * The terminal (tty.c): colour and the progress line.
 *
 * pkc_color_parse() - --color=WHEN's WHEN (auto, always, never; NULL,
 * a bare --color: always) as enum pkc_color, or -1; pkc_color_set() - the subcommand's
 * choice, for everything after it; pkc_color_for() - whether to colour
 * what goes to @f: stderr or stdout only (never a -o FILE), never
 * @machine output (JSON, OpenMetrics); in auto mode only a terminal, with
 * NO_COLOR unset or empty and TERM not "dumb". PKC_SGR_*: the sequences.
 */
enum pkc_color { PKC_COLOR_AUTO, PKC_COLOR_ALWAYS, PKC_COLOR_NEVER };

#define PKC_SGR_OFF "\033[m"
#define PKC_SGR_HEAD "\033[1m"		/* a table's header line: bold */
#define PKC_SGR_WARN "\033[33m"	/* int3 probes, partial results */
#define PKC_SGR_BAD "\033[31m"		/* not probed */
#define PKC_SGR_ERR "\033[1;31m"	/* "probekit:" of an error */

int pkc_color_parse(const char *arg);
void pkc_color_set(int when);
int pkc_color_for(FILE *f, int machine);

/*
 * pkc_color_opt() - --color's @arg (getopt's optarg) into pkc_color_set();
 * 0, or PKC_EXIT_OWN after saying why.
 */
int pkc_color_opt(const char *arg);

/* pkc_sgr() - @seq if @on, else "" (for "%s" in a format). */
static inline const char *pkc_sgr(int on, const char *seq)
{
	return on ? seq : "";
}

/*
 * pkc_progress_init() - whether a progress line may be shown: stderr a
 * terminal, TERM not "dumb", not @quiet (the subcommand's --quiet).
 * pkc_progress_update() - the work going on now, as one line (NULL: none:
 * the line is erased); drawn once the work has lasted the delay (200 ms,
 * PROBEKIT_PROGRESS_DELAY_MS), at most ~10 times a second.
 * pkc_progress_clear() - erase the line if one is shown (before anything
 * else goes to stderr). pkc_progress_on() - pkc_progress_init()'s answer.
 */
void pkc_progress_init(int quiet);
int pkc_progress_on(void);
void pkc_progress_update(const char *text);
void pkc_progress_clear(void);

/* pkc_group() - @v with its digits in groups of three ("3 839"). */
char *pkc_group(char *buf, size_t len, unsigned long long v);

/*
 * pkc_msg() - "WHO: " and the message on stderr, WHO in colour where
 * stderr takes it, the progress line erased first; pkc_err() - the same
 * as "probekit: ...". The caller ends the line ("\n" in @fmt).
 */
void pkc_msg(const char *who, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
#define pkc_err(...) pkc_msg("probekit", __VA_ARGS__)

/*
 * A process of COMMAND probekit saw (run.c): it is a child subreaper, so
 * every descendant whose parent ends first becomes its child; while
 * COMMAND runs it walks the tree of its descendants every few
 * milliseconds and looks at each program image once (pid, exe).
 */
struct pkc_proc {
	pid_t pid, ppid;
	unsigned long long start; /* its start time: pids are used again */
	uint64_t dev, ino;	/* its exe, 0 if it could not be looked at */
	uint64_t env_start;	/* where its environment begins (stat field
				 * 50): new at every exec, the same in a
				 * fork()ed child; 0 if unknown */
	char *exe;		/* path, or "[comm]" */
	char comm[16];		/* its name, of one seen only once ended */
	const char *why;	/* why the agent cannot be in it, or NULL */
	int counted;		/* a record of it (or its forking parent's) */
	int alive;		/* still running when COMMAND ended */
	int unseen;		/* seen only once it had ended: no exe */
	int xw;			/* told by the kernel only (execwatch.c) */
};

/* One exec() of COMMAND's processes, as the kernel told it (execwatch.c). */
struct pkc_exec {
	pid_t pid;
	uint64_t time;		/* the kernel's clock */
	char comm[16];		/* the new program's name */
	char *exe;		/* its file, NULL if not told */
	uint64_t ino;		/* and its inode, as mapped */
};

struct pkc_xw_ring {
	int fd;
	void *map;
	size_t len, size;	/* the mapping; its ring after the first page */
};

struct xw_rec;

/*
 * The exec()s of COMMAND's processes from the kernel (execwatch.c):
 * pkc_xw_open() on COMMAND's pid before its exec (0, or -errno: not
 * permitted, no perf_event_open(); then nothing is told, on is 0 and err
 * says why), pkc_xw_drain() reads what the kernel wrote since (often
 * enough that its rings do not fill), pkc_xw_done() reads a last time,
 * pkc_xw_close() frees all but on, err, lost and full (for the report).
 * A zeroed one is closed.
 */
struct pkc_xw {
	int on;
	int err;
	struct pkc_xw_ring *ring;
	size_t nring;
	struct pkc_exec *v;	/* in time order */
	size_t n, cap;
	size_t *wait;		/* of v: exec()s whose file is not told yet */
	size_t nwait, capwait;
	struct xw_rec *rec;	/* one read's records */
	size_t nrec, caprec;
	uint64_t lost;		/* records the kernel or we could not keep */
	uint64_t full;		/* reads that found a ring nearly full */
};

int pkc_xw_open(struct pkc_xw *w, pid_t pid);
void pkc_xw_drain(struct pkc_xw *w);
void pkc_xw_done(struct pkc_xw *w);
void pkc_xw_close(struct pkc_xw *w);

/*
 * One run of COMMAND under the agent, in the agent mode of a subcommand:
 * the subcommand fills in the first part, the pkc_run_*() calls the rest.
 */
struct pkc_run {
	const char *mode_name;	/* its PROBEKIT_AGENT_MODE */
	uint32_t mode;		/* the enum pka_mode records must have */
	uint32_t slot;		/* and the size of its per-probe struct */
	uint64_t (*area)(uint32_t nprobe); /* its area's bytes, or NULL */
	char **specs;		/* -p arguments and -P lines */
	int n;			/* at most PKA_SPECS_MAX */
	int strict;		/* --strict: an incomplete measurement is 125 */
	int wait_all;		/* --wait-all: for descendants outliving COMMAND */
	uint64_t rec_size;	/* a record of one probe per spec */
	/* Optional, as pkc_spawn()'s @ready: called before COMMAND's exec. */
	void (*ready)(pid_t pid, void *ctx);
	void *ready_ctx;
	struct rusage ru;	/* COMMAND's wait4() rusage, by pkc_run_wait() */
	struct timespec end;	/* when pkc_run_wait() saw it ended (MONOTONIC) */

	char agent[4096];	/* the agent preloaded */
	char dir[4096];		/* the run's record directory */
	int dir_fd;		/* open on it from pkc_run_start() to pkc_run_end() */
	pid_t pid;		/* COMMAND */
	pid_t guard;		/* removes dir if probekit is killed */
	int guard_fd;		/* its pipe: EOF when probekit is gone */
	char *specs_path;	/* the specs file, as in the environment */
	int no_room;		/* processes whose record found no room */
	char refused[2 * PKA_WHY_LEN + 64]; /* first unusable record's why */

	void *buf;		/* a record read, buf_len bytes of room */
	size_t buf_len;
	struct pkc_proc *procs;	/* descendants seen, nprocs of them */
	int nprocs, procs_cap;
	pid_t *pre;		/* probekit's children before COMMAND (a shell's */
	int npre;		/* process substitution it inherited): not ours */
	int not_counted, outlived; /* among them, after pkc_run_check() */
	struct pkc_note *notes;	/* the names of the processes with a */
	int nnotes;		/* record, once each */
	pid_t *fsize;		/* processes over their file size limit */
	int nfsize;		/* (<pid>-XXXXXX.fsize) */
	int fatal;		/* probekit's own failure: 125 whatever */
	char **problems;	/* what the report lacks, a line each */
	int nproblems;
	struct pkc_xw xw;	/* every exec(), if the kernel tells */
	int xw_off;		/* PROBEKIT_EXEC_WATCH=0 */
};

/* The name (comm) of a process with a record. */
struct pkc_note {
	char comm[16];
};

/* What arming each spec gave, summed over the records of a run. */
struct pkc_spec {
	const char *spec;
	int armed;		/* processes that armed it */
	int failed;		/* processes that could not */
	int last_err;		/* the last -errno seen */
	char why[PKA_WHY_LEN];	/* and its log line */
	int int3;		/* processes that armed it as an int3 probe */
	unsigned long left_out;	/* a late glob's functions not probed (no
				 * room), summed over processes */
	int left_procs;		/* processes that left some out */
};

/*
 * pkc_run_find_agent() - find the agent into r->agent. 0, or
 * PKC_EXIT_OWN after saying why.
 */
int pkc_run_find_agent(struct pkc_run *r);

/*
 * pkc_run_start() - make the record directory, check a record fits in it,
 * write the specs file, become a child subreaper and start @argv with the
 * agent preloaded; from then on SIGINT, SIGTERM, SIGHUP and SIGQUIT sent
 * to probekit go to COMMAND and SIGPIPE is ignored (a report that cannot
 * be written is an error, not a death). 0, or the exit status to give
 * after saying why (the directory is gone then).
 */
int pkc_run_start(struct pkc_run *r, char **argv);

/*
 * pkc_run_wait() - wait for COMMAND, looking at its descendants and
 * reaping those that became probekit's meanwhile; with @tick, call it
 * every @interval_ms milliseconds with the seconds since the start.
 * Returns COMMAND's exit status mapped as above, or PKC_EXIT_OWN.
 */
int pkc_run_wait(struct pkc_run *r, long interval_ms,
		 void (*tick)(double elapsed, void *ctx), void *ctx);

/*
 * pkc_run_collect() - read every record of the run (into r->buf, grown to
 * each file's size), sum each spec's arming into @t (r->n of them, zeroed
 * by the caller), and hand each record to @add for the mode's figures.
 * Only regular files of ours named as the agent names records are opened,
 * never through a link, never blocking; unusable records are skipped, the
 * first one's reason kept in r->refused. @consume: the last read, once
 * COMMAND ended: mark the processes seen that have a record, remove the
 * records and count the empty ones (no room) in r->no_room; while COMMAND
 * runs they are read live. Returns the processes whose records were read.
 */
int pkc_run_collect(struct pkc_run *r, struct pkc_spec *t, int consume,
		    void (*add)(const struct pka_header *h, void *ctx),
		    void *ctx);

/*
 * pkc_run_end() - remove the record directory and everything in it,
 * whatever made it, never following a link; stop the guard.
 */
void pkc_run_end(struct pkc_run *r);

/*
 * pkc_run_check() - after the last pkc_run_collect(): what the report
 * lacks, into r->problems (an agent unusable or without room, which is
 * r->fatal; no process that loaded the agent, no spec armed anywhere,
 * processes not counted, processes that outlived COMMAND).
 */
void pkc_run_check(struct pkc_run *r, int procs, const struct pkc_spec *t);

/*
 * pkc_note_unprobed() - function @p of spec @i in record @h (a glob's) was
 * not armed where its spec was: one more in *@count, and the first such,
 * named, with the spec's first log line, in *@why (malloc()ed; NULL
 * without memory). The same words in count, time and stat.
 */
void pkc_note_unprobed(struct pka_header *h, uint32_t i,
		       const struct pka_probe *p, unsigned long long *count,
		       char **why);

/*
 * pkc_run_problem() - add @what (a line: a measurement the report lacks,
 * found by the subcommand after pkc_run_check()) to r->problems: said by
 * pkc_run_verdict(), in the JSON's problems (complete false), failing
 * --strict.
 */
void pkc_run_problem(struct pkc_run *r, const char *what);

/*
 * pkc_run_json_procs() - the run's problems, processes not counted and
 * processes that outlived COMMAND as JSON members (each ",\"NAME\":...").
 */
void pkc_run_json_procs(const struct pkc_run *r, FILE *o);

/*
 * pkc_run_verdict() - the exit status to give once the report is out:
 * @code (from pkc_run_wait()), or PKC_EXIT_OWN when the run was fatal, or
 * r->strict and anything is missing; each problem is said on stderr.
 */
int pkc_run_verdict(const struct pkc_run *r, int code);

/* pkc_run_free() - what the run allocated. */
void pkc_run_free(struct pkc_run *r);

/*
 * pkc_spawn() - start @argv without the agent (probekit stat): signals
 * caught and passed on, and probekit a child subreaper, as with
 * pkc_run_start(). The child waits before its exec until @ready(pid, @ctx)
 * has returned in the parent (a pipe: a byte written once it has), so
 * what @ready attaches to it (perf counters enabled on exec) is there
 * from COMMAND's first instruction on. 0 with *@pid, or the exit status
 * to give after saying why (exec failures: 126, 127).
 */
int pkc_spawn(char **argv, pid_t *pid, void (*ready)(pid_t pid, void *ctx),
	      void *ctx);

/*
 * pkc_spawn_wait() - block until COMMAND @pid (from pkc_spawn()) ends;
 * the time it was seen ended (CLOCK_MONOTONIC) in *@end, then reap it
 * with its rusage in *@ru (its own and its waited-for descendants'), and
 * reap the adopted orphans that have ended. COMMAND's status mapped as
 * pkc_run_wait() maps it, or PKC_EXIT_OWN.
 */
int pkc_spawn_wait(pid_t pid, struct rusage *ru, struct timespec *end);

#endif /* PK_CLI_CLI_H */
