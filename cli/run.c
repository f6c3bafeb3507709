// SPDX-License-Identifier: MIT
/* run.c - what every subcommand that runs COMMAND does: find the agent, start, wait, read the records, pick the exit status. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
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
		pkc_err("cannot find the agent %s (set "
				"PROBEKIT_AGENT): %s\n", r->agent, strerror(-err));
		return PKC_EXIT_OWN;
	}
	return 0;
}

/*
 * The agent's rtld-audit module (agent/audit.c: libraries loaded later
 * are armed through it) first in LD_AUDIT, if it is beside the agent.
 */
static int set_audit(const struct pkc_run *r)
{
	const char *old = getenv("LD_AUDIT");
	const char *slash = strrchr(r->agent, '/');
	char path[sizeof(r->agent) + 32], *audit;
	int err = 0;

	if (!slash || (size_t)snprintf(path, sizeof(path),
				       "%.*s/libprobekit-audit.so",
				       (int)(slash - r->agent),
				       r->agent) >= sizeof(path) ||
	    access(path, R_OK))
		return 0;
	if (asprintf(&audit, "%s%s%s", path, old && *old ? ":" : "",
		     old ? old : "") < 0)
		return -ENOMEM;
	if (setenv("LD_AUDIT", audit, 1))
		err = -errno;
	free(audit);
	return err;
}

/*
 * The specs, PKA_SEP-separated and NUL-terminated, into PKA_SPECS_FILE in
 * the run's directory (read-only: the agent maps it). Thousands of specs
 * do not fit in one environment string (MAX_ARG_STRLEN, 128 KiB). Its
 * path in *@path. 0, or -errno.
 */
static int write_specs(const struct pkc_run *r, char **path)
{
	int fd = openat(r->dir_fd, PKA_SPECS_FILE, O_WRONLY | O_CREAT | O_EXCL |
			O_NOFOLLOW | O_CLOEXEC, 0400);
	FILE *f;
	int err = 0;

	if (fd < 0)
		return -errno;
	f = fdopen(fd, "w");
	if (!f) {
		err = -errno;
		close(fd);
		return err;
	}
	for (int i = 0; i < r->n; i++) {
		if (i)
			fputc(PKA_SEP, f);
		fputs(r->specs[i], f);
	}
	fputc(0, f);
	if (fflush(f) || ferror(f))
		err = errno ? -errno : -EIO;
	if (fclose(f) && !err)
		err = errno ? -errno : -EIO;
	if (!err && asprintf(path, "%s/%s", r->dir, PKA_SPECS_FILE) < 0)
		err = -ENOMEM;
	return err;
}

/* The agent first in LD_PRELOAD, and what it is to do (protocol.h). */
static int set_env(struct pkc_run *r)
{
	const char *pre = getenv("LD_PRELOAD");
	char *list = NULL, *preload;
	int err = write_specs(r, &list);

	if (err)
		return err;
	if (asprintf(&preload, "%s%s%s", r->agent, pre && *pre ? ":" : "",
		     pre ? pre : "") < 0) {
		free(list);
		return -ENOMEM;
	}
	if (setenv(PKA_ENV_DIR, r->dir, 1) ||
	    setenv(PKA_ENV_MODE, r->mode_name, 1) ||
	    setenv(PKA_ENV_SPECS, list, 1) ||
	    setenv("LD_PRELOAD", preload, 1))
		err = -errno;
	/* Kept: a process's environment must name this very file. */
	r->specs_path = list;
	free(preload);
	return err ? err : set_audit(r);
}

/*
 * Signals. COMMAND runs in probekit's own process group, as under perf
 * stat or timeout --foreground, so that it stays in the terminal's
 * foreground and can read it: the terminal's ^C, ^\ and hangup reach
 * COMMAND by themselves (si_code SI_KERNEL) and are not sent again.
 * SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to probekit by a process
 * (kill(1), a supervisor) are passed on to COMMAND, its first process
 * only; probekit itself waits on, reports and exits with COMMAND's status.
 * SIGPIPE is ignored: a report that cannot be written fails the write;
 * SIGXFSZ too (a file size limit, ulimit -f, makes a write fail with
 * EFBIG instead of killing probekit).
 * COMMAND gets the dispositions and mask probekit was started with (a
 * signal ignored then, as under nohup, stays ignored).
 *
 * fwd_pid is COMMAND's pid from fork() until it has ended, and 0 before
 * and once it is reaped-to-be (set before waitpid() reaps it, so a pid
 * the kernel hands out again is never signalled).
 */
static const int fwd_sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
#define N_FWD (sizeof(fwd_sigs) / sizeof(fwd_sigs[0]))
static volatile sig_atomic_t fwd_pid, fwd_stop;
static struct sigaction old_act[N_FWD], old_pipe, old_xfsz, old_chld;
static sigset_t old_mask;

static void forward(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;

	(void)uc;
	if (si->si_code != SI_KERNEL && fwd_pid > 0)
		kill((pid_t)fwd_pid, sig);
	/* COMMAND has ended: stop waiting for what outlives it. */
	if (fwd_pid <= 0)
		fwd_stop = 1;
	errno = saved;
}

/* Catch the forwarded signals (blocked until COMMAND's pid is known). */
static void catch_signals(void)
{
	struct sigaction fwd = { .sa_sigaction = forward,
				 .sa_flags = SA_SIGINFO | SA_RESTART };
	struct sigaction ign = { .sa_handler = SIG_IGN };
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	sigset_t block;

	sigemptyset(&block);
	for (size_t i = 0; i < N_FWD; i++)
		sigaddset(&block, fwd_sigs[i]);
	fwd.sa_mask = block;
	sigprocmask(SIG_BLOCK, &block, &old_mask);
	for (size_t i = 0; i < N_FWD; i++)
		sigaction(fwd_sigs[i], &fwd, &old_act[i]);
	sigaction(SIGPIPE, &ign, &old_pipe);
	sigaction(SIGXFSZ, &ign, &old_xfsz);
	/* SIGCHLD ignored (inherited) would reap COMMAND before we wait. */
	sigaction(SIGCHLD, &dfl, &old_chld);
}

/* In a child: the dispositions and mask probekit was started with. */
static void restore_signals(void)
{
	for (size_t i = 0; i < N_FWD; i++)
		sigaction(fwd_sigs[i], &old_act[i], NULL);
	sigaction(SIGPIPE, &old_pipe, NULL);
	sigaction(SIGXFSZ, &old_xfsz, NULL);
	sigaction(SIGCHLD, &old_chld, NULL);
	sigprocmask(SIG_SETMASK, &old_mask, NULL);
}

/* Let the blocked signals in: they go to fwd_pid, if set by then. */
static void unblock_signals(void)
{
	sigset_t set;

	sigemptyset(&set);
	for (size_t i = 0; i < N_FWD; i++)
		sigaddset(&set, fwd_sigs[i]);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
}

/*
 * Remove everything in directory @fd (closed here), @depth levels down at
 * most: what a program of COMMAND put there may be anything. unlinkat()
 * never follows a link; a subdirectory is opened O_NOFOLLOW. Passes until
 * one removes nothing, since readdir() need not return what is removed
 * behind it.
 */
static void empty_dir(int fd, int depth)
{
	DIR *d = fdopendir(fd);
	struct dirent *e;

	if (!d) {
		close(fd);
		return;
	}
	for (int pass = 0, gone = 1; gone && pass < 8; pass++) {
		gone = 0;
		rewinddir(d);
		while ((e = readdir(d))) {
			int sub;

			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			if (!unlinkat(dirfd(d), e->d_name, 0)) {
				gone++;
				continue;
			}
			if (errno != EISDIR || !depth)
				continue;
			sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY |
				     O_NOFOLLOW | O_CLOEXEC);
			if (sub < 0)
				continue;
			fchmod(sub, 0700);	/* a program may have made it 0 */
			empty_dir(sub, depth - 1);
			gone += !unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR);
		}
	}
	closedir(d);
}

/*
 * Remove the run's directory: its contents through r->dir_fd, then the
 * name, if it still names that directory.
 */
static void remove_dir(struct pkc_run *r)
{
	struct stat a, b;
	int fd;

	if (r->dir_fd < 0)
		return;
	fchmod(r->dir_fd, 0700);
	fd = openat(r->dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0)
		empty_dir(fd, 16);
	if (!fstat(r->dir_fd, &a) &&
	    !fstatat(AT_FDCWD, r->dir, &b, AT_SYMLINK_NOFOLLOW) &&
	    a.st_dev == b.st_dev && a.st_ino == b.st_ino)
		rmdir(r->dir);
}

/*
 * The guard: a process of its own session (no terminal signal, no kill of
 * probekit's process group reaches it) that waits for EOF on a pipe whose
 * only writer is probekit, then removes the directory. So a probekit
 * killed by SIGKILL (or the OOM killer) leaves nothing behind; after a
 * normal end it finds nothing left to remove.
 */
static int start_guard(struct pkc_run *r)
{
	int p[2], lo, hi, null;
	char c;

	if (pipe2(p, O_CLOEXEC))
		return -errno;
	r->guard = fork();
	if (r->guard < 0) {
		close(p[0]);
		close(p[1]);
		return -errno;
	}
	if (r->guard == 0) {
		struct sigaction ign = { .sa_handler = SIG_IGN };

		for (size_t i = 0; i < N_FWD; i++)
			sigaction(fwd_sigs[i], &ign, NULL);
		unblock_signals();
		setsid();
		/* Hold nothing of probekit's: no pipe a shell waits on. */
		null = open("/dev/null", O_RDWR | O_CLOEXEC);
		for (int fd = 0; null >= 0 && fd < 3; fd++)
			dup2(null, fd);
		lo = p[0] < r->dir_fd ? p[0] : r->dir_fd;
		hi = p[0] < r->dir_fd ? r->dir_fd : p[0];
		if (lo > 3)
			close_range(3, (unsigned int)lo - 1, 0);
		if (hi > lo + 1)
			close_range((unsigned int)lo + 1, (unsigned int)hi - 1, 0);
		close_range((unsigned int)hi + 1, ~0U, 0);
		while (read(p[0], &c, 1) < 0 && errno == EINTR)
			;
		remove_dir(r);
		_exit(0);
	}
	close(p[0]);
	r->guard_fd = p[1];
	return 0;
}

/*
 * Fork and exec @argv. 0 with *@pid, or the exit status to give: exec
 * failures come back through a close-on-exec pipe. COMMAND gets SIGTERM
 * if probekit dies before it (PR_SET_PDEATHSIG), rather than running on
 * unwatched. With @ready (pkc_spawn()), the child waits on a pipe before
 * its exec until @ready(pid, @ctx) has returned in the parent: it execs
 * on the byte the parent writes then, and ends (125) on EOF without it.
 */
static int start_command(char **argv, pid_t *pid,
			 void (*ready)(pid_t pid, void *ctx), void *ctx)
{
	pid_t parent = getpid();
	int err[2], go[2] = { -1, -1 }, e;
	char c;

	if (pipe2(err, O_CLOEXEC)) {
		pkc_err("pipe: %s\n", strerror(errno));
		return PKC_EXIT_OWN;
	}
	if (ready && pipe2(go, O_CLOEXEC)) {
		pkc_err("pipe: %s\n", strerror(errno));
		close(err[0]);
		close(err[1]);
		return PKC_EXIT_OWN;
	}
	*pid = fork();
	if (*pid == 0) {
		restore_signals();
		if (prctl(PR_SET_PDEATHSIG, SIGTERM) || getppid() != parent)
			_exit(PKC_EXIT_OWN);
		if (ready) {
			ssize_t got;

			close(go[1]);
			while ((got = read(go[0], &c, 1)) < 0 && errno == EINTR)
				;
			if (got != 1)
				_exit(PKC_EXIT_OWN);
		}
		execvp(argv[0], argv);
		/* The parent maps errno to the status; this one goes unseen. */
		e = errno;
		if (write(err[1], &e, sizeof(e)) < 0)
			_exit(PKC_EXIT_OWN);
		_exit(PKC_EXIT_CANNOT_RUN);
	}
	close(err[1]);
	if (ready)
		close(go[0]);
	if (*pid < 0) {
		pkc_err("fork: %s\n", strerror(errno));
		close(err[0]);
		if (ready)
			close(go[1]);
		return PKC_EXIT_OWN;
	}
	fwd_pid = *pid;
	unblock_signals();
	if (ready) {
		ready(*pid, ctx);
		c = 1;
		while (write(go[1], &c, 1) < 0 && errno == EINTR)
			;
		close(go[1]);
	}
	if (read(err[0], &e, sizeof(e)) == (ssize_t)sizeof(e)) {
		pkc_err("%s: %s\n", argv[0], strerror(e));
		close(err[0]);
		fwd_pid = 0;
		waitpid(*pid, NULL, 0);
		return e == ENOENT ? PKC_EXIT_NOT_FOUND : PKC_EXIT_CANNOT_RUN;
	}
	close(err[0]);
	return 0;
}

/*
 * Whether a record fits in the directory: reserve one record's blocks in
 * a file of our own (a dot name, never read as a record) and let it go.
 * 0, or the error.
 */
static int check_room(struct pkc_run *r)
{
	struct rlimit rl;
	int fd, err;

	/* Every process of COMMAND inherits it: none could make a record. */
	if (!getrlimit(RLIMIT_FSIZE, &rl) && rl.rlim_cur != RLIM_INFINITY &&
	    r->rec_size > rl.rlim_cur)
		return EFBIG;
	fd = openat(r->dir_fd, ".room", O_RDWR | O_CREAT | O_EXCL |
		    O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return errno;
	err = r->rec_size > UINT32_MAX ? EFBIG :
	      posix_fallocate(fd, 0, (off_t)r->rec_size);
	close(fd);
	unlinkat(r->dir_fd, ".room", 0);
	return err;
}

static int no_room(int err)
{
	return err == ENOSPC || err == EDQUOT;
}

static void note_pre_children(struct pkc_run *r);

/*
 * Where the run's directory goes without $TMPDIR: /dev/shm if it is a
 * tmpfs we may write with room to spare (RUN_SHM_FREE: trace's rings are
 * files there too), else /tmp. Every process of COMMAND makes its record
 * file there before its main(): on tmpfs that costs it ~10 us of CPU, on
 * a disk file system 50-400 us (inode and block allocation, and writing
 * the pages back), per process.
 */
#define RUN_SHM_FREE (1ull << 30)
static const char *run_dir_default(const struct pkc_run *r)
{
	struct statfs fs;

	/*
	 * Not trace's: its rings (--buffer-size a thread) would take the
	 * tmpfs's memory from the program's own shm_open()s as it runs.
	 */
	if (r->mode == PKA_MODE_TRACE)
		return "/tmp";
	if (!statfs("/dev/shm", &fs) && fs.f_type == TMPFS_MAGIC &&
	    (uint64_t)fs.f_bavail * (uint64_t)fs.f_bsize >= RUN_SHM_FREE &&
	    !access("/dev/shm", W_OK | X_OK))
		return "/dev/shm";
	return "/tmp";
}

/*
 * start_command()'s @ready: COMMAND's exec()s told from before its first,
 * then r->ready's (a subcommand's), if any.
 */
static void xw_ready(pid_t pid, void *ctx)
{
	const char *on = getenv("PROBEKIT_EXEC_WATCH");
	struct pkc_run *r = ctx;

	r->xw_off = on && !strcmp(on, "0");
	if (!r->xw_off)
		pkc_xw_open(&r->xw, pid);
	/* The subcommand's own (probekit stat -p: its counters). */
	if (r->ready)
		r->ready(pid, r->ready_ctx);
}

int pkc_run_start(struct pkc_run *r, char **argv)
{
	const char *tmp = getenv("TMPDIR");
	int err, code;

	r->dir_fd = -1;
	r->guard_fd = -1;
	r->guard = 0;
	memset(&r->xw, 0, sizeof(r->xw));
	r->rec_size = pka_record_size(r->slot, (uint32_t)r->n, (uint32_t)r->n);
	if (r->area)	/* the mode's own area (protocol.h) */
		r->rec_size = pka_mode_at(r->rec_size) + r->area((uint32_t)r->n);
	if (!(tmp && *tmp))
		tmp = run_dir_default(r);
	/* list's, which would end COMMAND's processes (agent.c). */
	unsetenv("PROBEKIT_LIST_REQ");
	unsetenv("PROBEKIT_LIST_OUT");
	catch_signals();
	snprintf(r->dir, sizeof(r->dir), "%s/probekit-%s.XXXXXX", tmp,
		 r->mode_name);
	if (!mkdtemp(r->dir)) {
		err = errno;
		if (no_room(err))
			pkc_err("no room for the counts in "
					"%s: %s\n", tmp, strerror(err));
		else
			pkc_err("cannot make the counts "
					"directory in %s (mkdtemp): %s\n", tmp,
				strerror(err));
		unblock_signals();
		return PKC_EXIT_OWN;
	}
	r->dir_fd = open(r->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			 O_CLOEXEC);
	if (r->dir_fd < 0) {
		pkc_err("%s: %s\n", r->dir, strerror(errno));
		rmdir(r->dir);
		unblock_signals();
		return PKC_EXIT_OWN;
	}
	/* From here on the directory goes if probekit does. */
	err = start_guard(r);
	if (!err) {
		err = check_room(r);
		if (err) {
			if (no_room(err))
				pkc_err("no room for the counts "
						"in %s (a record is %llu bytes)\n",
					tmp, (unsigned long long)r->rec_size);
			else if (err == EFBIG)
				pkc_err("the file size limit "
						"(ulimit -f) is below a record's "
						"%llu bytes: no process of the "
						"command could be counted\n",
					(unsigned long long)r->rec_size);
			else
				pkc_err("%s: %s\n", r->dir,
					strerror(err));
			code = PKC_EXIT_OWN;
			goto fail;
		}
		err = set_env(r);
	}
	if (err) {
		pkc_err("cannot start: %s\n", strerror(-err));
		code = PKC_EXIT_OWN;
		goto fail;
	}
	/*
	 * A child subreaper: a descendant whose parent ends first (a daemon
	 * that double-forked) becomes probekit's child, so it is seen, and
	 * reaped, here rather than by init. Without it (a kernel before 3.4)
	 * such processes are looked at only while their parents live.
	 */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	note_pre_children(r);
	code = start_command(argv, &r->pid, xw_ready, r);
	if (!code)
		return 0;
fail:
	unblock_signals();
	pkc_run_end(r);
	return code;
}

/*
 * Wait until COMMAND has ended without reaping it (WNOWAIT): its pid is
 * still ours until fwd_pid is cleared. 0, or -errno.
 */
static int wait_end(pid_t pid, int hang)
{
	siginfo_t si;

	for (;;) {
		si.si_pid = 0;
		if (!waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT |
			    (hang ? 0 : WNOHANG)))
			return si.si_pid == pid ? 0 : -EAGAIN;
		if (errno != EINTR)
			return -errno;
	}
}

/*
 * The processes of COMMAND. probekit cannot be told of every fork and
 * exec without tracing them (ptrace would take setuid programs their
 * privileges, and so change what they do), so it looks: every
 * SCAN_MS milliseconds it walks the tree of its descendants
 * (/proc/PID/task/TID/children, from its own) and, once per program image
 * (pid and exe), notes the exe and whether the agent can be in it:
 *   - set-user-ID or set-group-ID: real and effective ids differ
 *     (/proc/PID/status); the dynamic linker ignores LD_PRELOAD there;
 *   - static: the exe has no PT_INTERP, nothing loads the agent;
 *   - no LD_PRELOAD, or one without the agent, or no PROBEKIT_AGENT_*
 *     variables in the environment it was exec()ed with (env -i, a
 *     program that cleans its children's environment): /proc/PID/environ.
 * Once COMMAND has ended each is matched with the records (pid, exe); a
 * fork()ed child that did not exec counts in its parent's record. The
 * kernel also tells every exec() (execwatch.c, where perf_event_open() is
 * permitted): an image no scan saw is added at the end (add_execs()), so
 * one that neither loaded the agent nor lived one scan long is said too.
 * Without that permission, such a process can go unseen; so can the
 * grandchildren of a process probekit may not look at (another user's).
 */
#define SCAN_MS 10

/*
 * The entry for image (@dev, @ino) of process (@pid, @start: its start
 * time, so that a pid used again is another process), or NULL.
 */
static struct pkc_proc *proc_find(struct pkc_run *r, pid_t pid,
				  unsigned long long start, uint64_t dev,
				  uint64_t ino, uint64_t env_start)
{
	for (int i = r->nprocs - 1; i >= 0; i--)
		if (r->procs[i].pid == pid && r->procs[i].start == start &&
		    r->procs[i].dev == dev && r->procs[i].ino == ino &&
		    r->procs[i].env_start == env_start)
			return &r->procs[i];
	return NULL;
}

static int proc_seen_pid(const struct pkc_run *r, pid_t pid)
{
	for (int i = r->nprocs - 1; i >= 0; i--)
		if (r->procs[i].pid == pid)
			return 1;
	return 0;
}

/*
 * Read all of /proc/@pid/@what into *@buf (NUL-terminated), grown as it
 * needs (*@cap bytes of room): a children file has no bound. Bytes read,
 * or -1.
 */
static ssize_t proc_read_all(pid_t pid, const char *what, char **buf,
			     size_t *cap)
{
	char path[320];
	ssize_t got, all = 0;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, what);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	for (;;) {
		if ((size_t)all + 1 >= *cap) {
			size_t n = *cap ? 2 * *cap : 4096;
			char *p = realloc(*buf, n);

			if (!p)
				break;
			*buf = p;
			*cap = n;
		}
		got = read(fd, *buf + all, *cap - 1 - (size_t)all);
		if (got <= 0)
			break;
		all += got;
	}
	close(fd);
	if (!*buf)
		return -1;
	(*buf)[all] = 0;
	return all;
}

/* Read /proc/@pid/@what into @buf (NUL-terminated). Bytes read, or -1. */
static ssize_t proc_read(pid_t pid, const char *what, char *buf, size_t len)
{
	char path[320];
	ssize_t got, all = 0;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, what);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	while ((size_t)all < len - 1 &&
	       (got = read(fd, buf + all, len - 1 - (size_t)all)) > 0)
		all += got;
	close(fd);
	buf[all] = 0;
	return all;
}

/* Whether the ELF file at @path has no PT_INTERP: 1, 0, or -1 unknown. */
static int elf_static(const char *path)
{
	unsigned char eh[64];
	int fd = open(path, O_RDONLY | O_CLOEXEC), st = -1;
	uint64_t phoff;
	uint16_t phnum, phentsize;

	if (fd < 0)
		return -1;
	if (pread(fd, eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) ||
	    memcmp(eh, "\177ELF\2\1", 6))
		goto out;
	memcpy(&phoff, eh + 32, 8);
	memcpy(&phentsize, eh + 54, 2);
	memcpy(&phnum, eh + 56, 2);
	if (phentsize < 4 || phnum > 4096)
		goto out;
	st = 1;
	for (unsigned int i = 0; i < phnum; i++) {
		uint32_t type;

		if (pread(fd, &type, 4, (off_t)(phoff + (uint64_t)i * phentsize)) != 4) {
			st = -1;
			break;
		}
		if (type == 3) {	/* PT_INTERP */
			st = 0;
			break;
		}
	}
out:
	close(fd);
	return st;
}

/*
 * The value of @name in NUL-separated @env (@len bytes, NUL-terminated),
 * or NULL: the first definition (getenv()'s), or with @last the last one
 * (the dynamic linker's, for LD_PRELOAD).
 */
static const char *env_get(const char *env, size_t len, const char *name,
			   int last)
{
	size_t nl = strlen(name);
	const char *val = NULL;

	for (const char *e = env; e < env + len; e += strlen(e) + 1)
		if (!strncmp(e, name, nl) && e[nl] == '=') {
			val = e + nl + 1;
			if (!last)
				break;
		}
	return val;
}

/* Whether LD_PRELOAD list @list (':' or ' ' between) has @want, whole. */
static int preload_has(const char *list, const char *want)
{
	size_t wl = strlen(want);

	for (const char *s = list; *s; ) {
		size_t n = strcspn(s, ": ");

		if (n == wl && !strncmp(s, want, wl))
			return 1;
		s += n;
		s += strspn(s, ": ");
	}
	return 0;
}

/* Why the agent cannot be in process @pid (exe at @exe), or NULL. */
static const char *why_no_agent(const struct pkc_run *r, pid_t pid,
				const char *exe, int exe_ok)
{
	static char env[1 << 20];
	struct timespec ms = { 0, 1000 * 1000 };
	char status[4096], *u, *g;
	const char *pre, *dir, *mode, *specs;
	unsigned int ru, eu, rg, eg;
	ssize_t len;

	/*
	 * In the middle of an exec the new image's exe shows before its
	 * credentials and environment do (an empty environ): wait for them
	 * a little. An environment that stays empty is one (env -i).
	 */
	len = proc_read(pid, "environ", env, sizeof(env));
	for (int i = 0; len == 0 && i < 5; i++) {
		nanosleep(&ms, NULL);
		len = proc_read(pid, "environ", env, sizeof(env));
	}
	if (proc_read(pid, "status", status, sizeof(status)) > 0 &&
	    (u = strstr(status, "\nUid:")) && (g = strstr(status, "\nGid:")) &&
	    sscanf(u, "\nUid: %u %u", &ru, &eu) == 2 &&
	    sscanf(g, "\nGid: %u %u", &rg, &eg) == 2) {
		if (ru != eu)
			return "setuid";
		if (rg != eg)
			return "setgid";
	}
	if (!exe_ok)
		return "could not be looked at";
	if (elf_static(exe) == 1)
		return "static";
	/* Not ours to read; or gone meanwhile: then nothing more is known. */
	if (len < 0)
		return kill(pid, 0) && errno == ESRCH ?
		       "ended before probekit could look at it" : NULL;
	/* Exactly what probekit set: anything else is another run's, or none. */
	pre = env_get(env, (size_t)len, "LD_PRELOAD", 1);
	if (!pre)
		return "no LD_PRELOAD at exec";
	if (!preload_has(pre, r->agent))
		return "LD_PRELOAD without the agent at exec";
	dir = env_get(env, (size_t)len, PKA_ENV_DIR, 0);
	mode = env_get(env, (size_t)len, PKA_ENV_MODE, 0);
	specs = env_get(env, (size_t)len, PKA_ENV_SPECS, 0);
	if (!dir || !mode || !specs)
		return "no PROBEKIT_AGENT_* variables at exec";
	if (strcmp(dir, r->dir) || strcmp(mode, r->mode_name) ||
	    (r->specs_path && strcmp(specs, r->specs_path)))
		return "PROBEKIT_AGENT_* variables not probekit's at exec";
	return NULL;
}

static struct pkc_proc *proc_add(struct pkc_run *r)
{
	if (r->nprocs == r->procs_cap) {
		int cap = r->procs_cap ? 2 * r->procs_cap : 64;
		struct pkc_proc *p = realloc(r->procs, (size_t)cap * sizeof(*p));

		if (!p)
			return NULL;
		r->procs = p;
		r->procs_cap = cap;
	}
	memset(&r->procs[r->nprocs], 0, sizeof(r->procs[0]));
	return &r->procs[r->nprocs++];
}

/*
 * Process @pid's /proc/PID/stat into @buf: fields 3, 4, 22 and 50
 * (proc_pid_stat(5)) after the name, which *@rp points at the end of;
 * 50, env_start, reads 0 when we may not look (another user's program, a
 * set-user-ID one), the memory is gone, or an exec has not laid out the
 * new one yet. 0, or -1.
 */
static int read_stat(pid_t pid, char *buf, size_t len, char **rp,
		     char *state, int *ppid, unsigned long long *start,
		     unsigned long long *env_start)
{
	char *f;

	*env_start = 0;
	if (proc_read(pid, "stat", buf, len) <= 0 || !(*rp = strrchr(buf, ')')) ||
	    sscanf(*rp + 1, " %c %d %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
		   "%*s %*s %*s %*s %*s %*s %llu", state, ppid, start) != 3)
		return -1;
	f = *rp + 1;
	for (int k = 3; f && k < 50; k++)
		f = strchr(f + 1, ' ');
	if (f)
		*env_start = strtoull(f + 1, NULL, 10);
	return 0;
}

/*
 * Look at process @pid: a new program image is noted; with @end, one
 * still running is marked alive. Whether it is a zombie in *@zombie.
 */
static void look_at(struct pkc_run *r, pid_t pid, int end, int *zombie)
{
	unsigned long long start = 0, env_start = 0, start2, env2;
	char stat_buf[1024], path[64], exe[4096], *rp, state2;
	struct pkc_proc *p;
	struct stat st;
	int ppid = 0, ok;
	char state = '?';
	ssize_t n;

	*zombie = 0;
	if (read_stat(pid, stat_buf, sizeof(stat_buf), &rp, &state, &ppid,
		      &start, &env_start))
		return;
	if (state == 'Z' || state == 'X') {
		char *lp = strchr(stat_buf, '(');

		/*
		 * Ended unseen: only its name is left. One named as a
		 * process with a record is taken for a fork()ed child of it
		 * (mark_names(), once every record was read: its parent may
		 * have ended first and made it probekit's); anything else
		 * is not counted.
		 */
		*zombie = 1;
		if (end || proc_seen_pid(r, pid) || !lp)
			return;
		*rp = 0;
		p = proc_add(r);
		if (!p)
			return;
		p->pid = pid;
		p->ppid = ppid;
		p->start = start;
		snprintf(p->comm, sizeof(p->comm), "%s", lp + 1);
		if (asprintf(&p->exe, "[%s]", lp + 1) < 0)
			p->exe = NULL;
		p->why = "ended before probekit could look at it";
		p->unseen = 1;
		return;
	}
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	ok = !stat(path, &st);
	/* Ending (its memory gone, not yet a zombie): the next scan tells. */
	if (!ok && errno != EACCES && errno != EPERM)
		return;
	/*
	 * One we may look at with no env_start yet is in the middle of an
	 * exec (the new exe shows first): the next scan looks again.
	 */
	if (ok && !env_start && !end)
		return;
	p = proc_find(r, pid, start, ok ? st.st_dev : 0, ok ? st.st_ino : 0,
		      env_start);
	if (p) {
		p->alive |= end;
		return;
	}
	if (end)
		return;
	/*
	 * A new image: its exe and its env_start must be of one memory.
	 * An exec that completed between the two reads (the old image's
	 * env_start, the new exe) shows as another env_start now: the next
	 * scan looks again.
	 */
	if (read_stat(pid, exe, sizeof(exe), &rp, &state2, &ppid, &start2,
		      &env2) || env2 != env_start || start2 != start)
		return;
	n = ok ? readlink(path, exe, sizeof(exe) - 1) : -1;
	/*
	 * Not ours to look at (setuid): its argv[0]; none yet (in the
	 * middle of an exec): the next scan looks again.
	 */
	if (n < 0 && proc_read(pid, "cmdline", exe, sizeof(exe)) <= 0)
		return;
	if (n >= 0)
		exe[n] = 0;
	p = proc_add(r);
	if (!p)
		return;
	p->pid = pid;
	p->ppid = ppid;
	p->start = start;
	p->dev = ok ? st.st_dev : 0;
	p->ino = ok ? st.st_ino : 0;
	p->env_start = env_start;
	p->exe = strdup(exe);
	p->why = why_no_agent(r, pid, path, ok);
}

static int pre_child(const struct pkc_run *r, pid_t pid)
{
	for (int i = 0; i < r->npre; i++)
		if (r->pre[i] == pid)
			return 1;
	return 0;
}

/* Note the children probekit has before it starts COMMAND. */
static void note_pre_children(struct pkc_run *r)
{
	char path[64], *buf = NULL;
	size_t cap = 0;
	pid_t *p;

	snprintf(path, sizeof(path), "task/%d/children", (int)getpid());
	if (proc_read_all(getpid(), path, &buf, &cap) <= 0) {
		free(buf);
		return;
	}
	for (char *s = buf, *next; *s; s = next) {
		long c = strtol(s, &next, 10);

		if (next == s)
			break;
		if (c <= 0 || c == r->guard)
			continue;
		p = realloc(r->pre, (size_t)(r->npre + 1) * sizeof(*p));
		if (!p)
			break;
		r->pre = p;
		r->pre[r->npre++] = (pid_t)c;
	}
	free(buf);
}

/*
 * Walk the descendants of @pid, @depth levels at most; reap probekit's
 * own children that ended (orphans it adopted), but never COMMAND (its
 * status is taken by pkc_run_wait()) or the guard.
 */
static void walk(struct pkc_run *r, pid_t pid, int depth, int end)
{
	char path[300], *buf = NULL;
	struct dirent *e;
	size_t cap = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return;
	while ((e = readdir(d))) {
		char *s, *next;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "task/%s/children", e->d_name);
		/* All of them: thousands of children are thousands of pids. */
		if (proc_read_all(pid, path, &buf, &cap) <= 0)
			continue;
		for (s = buf; *s; s = next) {
			long c = strtol(s, &next, 10);
			int zombie;

			if (next == s)
				break;
			if (c <= 0 || c == r->guard || (pid == getpid() &&
							 pre_child(r, (pid_t)c)))
				continue;
			look_at(r, (pid_t)c, end, &zombie);
			if (!zombie && depth > 0)
				walk(r, (pid_t)c, depth - 1, end);
			if (zombie && pid == getpid() && c != r->pid)
				waitpid((pid_t)c, NULL, WNOHANG);
		}
	}
	closedir(d);
	free(buf);
}

static int open_record(int dfd, const char *name, off_t *size);
static int record_name(const char *name);

/*
 * Arming's progress (protocol.h, version 8), for the progress line while
 * stderr is a terminal: the records' headers only, read every SCAN_MS
 * while some process is arming or about to (a record without magic yet,
 * or not yet creating probes), else only when the directory changed (a
 * new record) or every RESCAN_MS (a change within the file system's
 * timestamp granularity). Returns the line to show, or NULL with *@looked
 * 0 when nothing was read (nothing changed), 1 when no process is arming.
 */
#define RESCAN_MS 250

static struct {
	struct timespec mtime;	/* the directory's at the last read */
	struct timespec last;	/* when it was read, CLOCK_MONOTONIC */
	int pending;		/* a record not yet past arming */
	char line[256];
} arming;

static const char *arming_scan(struct pkc_run *r, int *looked)
{
	struct pka_header h;
	struct timespec now;
	struct stat st;
	struct dirent *e;
	DIR *d;
	int dfd, busy = 0, pending = 0;
	char a[32], b[32], comm[sizeof(h.comm)];
	long ms;

	*looked = 0;
	if (r->dir_fd < 0 || fstat(r->dir_fd, &st))
		return NULL;
	clock_gettime(CLOCK_MONOTONIC, &now);
	ms = (now.tv_sec - arming.last.tv_sec) * 1000 +
	     (now.tv_nsec - arming.last.tv_nsec) / 1000000;
	if (!arming.pending && ms < RESCAN_MS &&
	    st.st_mtim.tv_sec == arming.mtime.tv_sec &&
	    st.st_mtim.tv_nsec == arming.mtime.tv_nsec)
		return NULL;
	arming.mtime = st.st_mtim;
	arming.last = now;
	*looked = 1;
	dfd = openat(r->dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	d = dfd < 0 ? NULL : fdopendir(dfd);
	if (!d) {
		if (dfd >= 0)
			close(dfd);
		return NULL;
	}
	while ((e = readdir(d))) {
		off_t size;
		ssize_t got;
		int fd;

		if (record_name(e->d_name) != 1)
			continue;
		fd = open_record(dirfd(d), e->d_name, &size);
		if (fd < 0)
			continue;
		got = pread(fd, &h, sizeof(h), 0);
		close(fd);
		/* Made, not yet filled in: look again at the next scan. */
		if (size > 0 && (got < (ssize_t)sizeof(h) ||
				 h.magic != PKA_MAGIC)) {
			pending++;
			continue;
		}
		if (got < (ssize_t)sizeof(h) || h.version != PKA_VERSION ||
		    h.status || h.mode != r->mode)
			continue;
		/* Killed while arming (SIGINT passed on): arming no more. */
		if (h.arm_state > PKA_ARM_REGISTER ||
		    (kill((pid_t)h.pid, 0) && errno == ESRCH))
			continue;
		if (h.arm_state == PKA_ARM_START) {
			pending++;
			continue;
		}
		/* The first one arming is named; the others counted. */
		if (busy++)
			continue;
		memcpy(comm, h.comm, sizeof(comm));
		comm[sizeof(comm) - 1] = 0;
		for (char *c = comm; *c; c++)
			if ((unsigned char)*c < ' ' || *c == 0x7f)
				*c = '?';
		pkc_group(b, sizeof(b), h.arm_planned);
		if (h.arm_state == PKA_ARM_CREATE)
			snprintf(arming.line, sizeof(arming.line),
				 "probekit: arming %s of %s functions in %s "
				 "(pid %d)", pkc_group(a, sizeof(a),
				 h.arm_done < h.arm_planned ? h.arm_done :
				 h.arm_planned), b, comm, (int)h.pid);
		else
			snprintf(arming.line, sizeof(arming.line),
				 "probekit: registering %s probes in %s (pid %d)",
				 b, comm, (int)h.pid);
	}
	closedir(d);
	arming.pending = pending + busy;
	if (!busy)
		return NULL;
	if (busy > 1) {
		size_t n = strlen(arming.line);

		snprintf(arming.line + n, sizeof(arming.line) - n,
			 " and %d more process%s", busy - 1,
			 busy == 2 ? "" : "es");
	}
	strncat(arming.line, "...", sizeof(arming.line) -
		strlen(arming.line) - 1);
	return arming.line;
}

/*
 * Wait for COMMAND, looking at its processes every SCAN_MS and calling
 * @tick (if any) every @ms milliseconds (as perf stat -I).
 */
static int wait_watching(struct pkc_run *r, long ms,
			 void (*tick)(double elapsed, void *ctx), void *ctx)
{
	struct timespec t0, now, nap = { 0, SCAN_MS * 1000 * 1000 };
	double next = ms / 1e3;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int err;
		double el;

		walk(r, getpid(), 64, 0);
		pkc_xw_drain(&r->xw);
		err = wait_end(r->pid, 0);
		if (err != -EAGAIN) {
			pkc_progress_clear();
			return err;
		}
		if (pkc_progress_on()) {
			int looked;
			const char *line = arming_scan(r, &looked);

			/* Unchanged when nothing was read. */
			if (looked)
				pkc_progress_update(line);
		}
		nanosleep(&nap, NULL);
		if (!tick)
			continue;
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

/*
 * Why a program image the kernel told of (execwatch.c) but no scan saw
 * alive could not have been counted, from its file: @exe NULL when the
 * kernel told no file (it takes its event off an exec() that raises
 * privileges or of an unreadable file before the file is mapped).
 */
static const char *why_exec(const char *exe)
{
	struct stat st;

	if (!exe)
		return "setuid or unreadable, ended before probekit could "
		       "look at it";
	if (elf_static(exe) == 1)
		return "static";
	if (!stat(exe, &st)) {
		if ((st.st_mode & S_ISUID) && st.st_uid != getuid())
			return "setuid";
		if ((st.st_mode & S_ISGID) && st.st_gid != getgid())
			return "setgid";
	}
	return "ended before probekit could look at it";
}

/*
 * Every exec() the kernel told of is a program image of COMMAND: one no
 * scan saw (it ended within one, 10 ms) is added as a process, so that
 * if no record counts it, it is said, never missing. An image is the
 * scans' if one saw that pid run that file; one seen only as a zombie
 * (a name) gets its file and why here: an exec() is known, so only a
 * record of that image counts it (mark_counted()), not its pid's earlier
 * image's.
 */
/*
 * Whether the program at @exe is named @comm (an exec()'s name: the file's
 * base name, cut to 15 bytes). An exec() whose file record was lost is an
 * image the scans saw when that pid ran a program of its name.
 */
static int same_name(const char *exe, const char *comm)
{
	const char *b = exe ? strrchr(exe, '/') : NULL;

	b = b ? b + 1 : exe;
	return b && *comm && !strncmp(b, comm, 15) &&
	       (strlen(comm) >= 15 || !b[strlen(comm)]);
}

static int by_pid(const void *a, const void *b, void *arg)
{
	const struct pkc_proc *v = arg;
	pid_t x = v[*(const int *)a].pid, y = v[*(const int *)b].pid;

	return x < y ? -1 : x > y;
}

static void add_execs(struct pkc_run *r)
{
	int n0 = r->nprocs, *idx = malloc(((size_t)n0 + 1) * sizeof(*idx));

	if (!idx)
		return;
	for (int k = 0; k < n0; k++)
		idx[k] = k;
	qsort_r(idx, (size_t)n0, sizeof(*idx), by_pid, r->procs);
	for (size_t i = 0; i < r->xw.n; i++) {
		const struct pkc_exec *e = &r->xw.v[i];
		struct pkc_proc *p = NULL;
		int lo = 0, hi = n0, seen = 0, z = -1;

		/* The scans' images of that pid. */
		while (lo < hi) {
			int mid = lo + (hi - lo) / 2;

			if (r->procs[idx[mid]].pid < e->pid)
				lo = mid + 1;
			else
				hi = mid;
		}
		for (int k = lo; k < n0 && !seen &&
				 r->procs[idx[k]].pid == e->pid; k++) {
			struct pkc_proc *q = &r->procs[idx[k]];

			/*
			 * No file told (setuid): an image of that pid the
			 * scans found privileged or could not look at (not
			 * the image it was fork()ed as: that is its parent's).
			 */
			if (q->unseen || q->xw)
				;
			else if (!e->exe)
				seen = !q->dev || (q->why &&
				       (!strcmp(q->why, "setuid") ||
					!strcmp(q->why, "setgid"))) ||
				       same_name(q->exe, e->comm);
			else
				seen = (q->exe && !strcmp(q->exe, e->exe)) ||
				       (q->ino && q->ino == e->ino);
			if (!seen && q->unseen && z < 0 &&
			    !strcmp(q->comm, e->comm))
				z = idx[k];
		}
		if (seen)
			continue;
		p = z >= 0 ? &r->procs[z] : proc_add(r);
		if (!p)
			break;
		if (z < 0) {
			p->pid = e->pid;
			snprintf(p->comm, sizeof(p->comm), "%s", e->comm);
		}
		free(p->exe);
		if (e->exe)
			p->exe = strdup(e->exe);
		else if (asprintf(&p->exe, "[%s]", e->comm) < 0)
			p->exe = NULL;
		p->dev = 0;
		p->ino = e->ino;
		p->why = why_exec(e->exe);
		p->unseen = 0;
		p->xw = 1;
	}
	free(idx);
}

/*
 * COMMAND has ended: descendants still running outlive it. Those ending
 * within a few scans (a child its last moment) are not counted as such;
 * the others are marked alive and left running, not waited for, unless
 * r->wait_all: then until none is left, or probekit is sent one of the
 * signals it forwards.
 */
static void mark_outliving(struct pkc_run *r)
{
	struct timespec nap = { 0, SCAN_MS * 1000 * 1000 };

	for (int i = 0; i < 10 || (r->wait_all && !fwd_stop); i++) {
		int alive = 0;

		walk(r, getpid(), 64, 0);
		for (int k = 0; k < r->nprocs; k++)
			r->procs[k].alive = 0;
		walk(r, getpid(), 64, 1);
		for (int k = 0; k < r->nprocs; k++)
			alive += r->procs[k].alive;
		if (!alive)
			return;
		nanosleep(&nap, NULL);
	}
}

int pkc_run_wait(struct pkc_run *r, long interval_ms,
		 void (*tick)(double elapsed, void *ctx), void *ctx)
{
	int status = -1, err;

	err = wait_watching(r, interval_ms, tick, ctx);
	clock_gettime(CLOCK_MONOTONIC, &r->end);
	fwd_pid = 0;
	if (!err)
		while (wait4(r->pid, &status, 0, &r->ru) < 0 && errno == EINTR)
			;
	/* waitpid() failed (status untouched): probekit's failure, not COMMAND's. */
	if (status == -1) {
		pkc_err("waitpid: %s\n",
			strerror(err ? -err : errno));
		return PKC_EXIT_OWN;
	}
	mark_outliving(r);
	pkc_xw_done(&r->xw);
	add_execs(r);
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
	uint64_t slots;

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
	} else if (h->mode != r->mode || h->slot_size != r->slot) {
		snprintf(buf, sizeof(buf), "it served mode %u, not %s",
			 h->mode, r->mode_name);
		why = buf;
	}
	if (why) {
		if (!r->refused[0])
			snprintf(r->refused, sizeof(r->refused), "%s", why);
		return 0;
	}
	/*
	 * The layout the agent chose, checked whole before anything in it
	 * is used: the specs of this run, every part where it must be.
	 */
	slots = (uint64_t)h->nprobe * h->slot_size;
	if (h->size != (uint64_t)got || h->nspec != (uint32_t)r->n ||
	    h->n > h->nspec || h->spec_at != pka_spec_at() ||
	    h->probe_at != pka_probe_at(h->nspec) ||
	    h->slot_at != pka_slot_at(h->nspec, h->nprobe) ||
	    (uint64_t)h->why_at != h->slot_at + slots ||
	    h->why_len < pka_why_len(h->nspec) ||
	    (!h->mode_len && (uint64_t)h->why_at + h->why_len != h->size) ||
	    (h->mode_len && (h->mode_at != pka_mode_at((uint64_t)h->why_at +
							h->why_len) ||
			     (uint64_t)h->mode_at + h->mode_len != h->size)))
		return 0;
	if (h->why_len)
		((char *)h + h->why_at)[h->why_len - 1] = 0;
	return 1;
}

/* Add what arming each spec gave in record @h to @t. */
static void add_specs(struct pka_header *h, struct pkc_spec *t, int n)
{
	for (uint32_t i = 0; i < (uint32_t)n && i < h->n; i++) {
		struct pka_spec *s = pka_record_spec(h, i);

		if (s->left_out) {
			t[i].left_out += s->left_out;
			t[i].left_procs++;
		}
		if (s->status == 0) {
			t[i].armed++;
			t[i].int3 += s->int3 != 0;
		} else if (s->status != PKA_PENDING) {
			const char *why = pka_spec_why(h, i);

			t[i].failed++;
			t[i].last_err = -s->status;
			if (why && why[0])
				snprintf(t[i].why, sizeof(t[i].why), "%s", why);
		}
	}
}

/*
 * The processes seen that record @name (@h, if usable) stands for: its
 * own, and the fork()ed (or vfork()ed) children of its image that have
 * not exec()ed, which add to it. Those share its exe and its env_start
 * (the same memory layout); an exec, even of the same program, lays out
 * a new one, and that image must have a record of its own (in its own
 * pid, the same image is taken for the record's: an ASan runtime, for
 * one, may exec its program again before any constructor of the agent's
 * has run). Where env_start is unknown on either side, a process of the
 * image with nothing against the agent is taken for such a child.
 */
/* Whether exec-watch image @p could have loaded the agent (why_exec()). */
static int xw_may_load(const struct pkc_proc *p)
{
	return !p->why || (strcmp(p->why, "static") && strcmp(p->why, "setuid") &&
			   strcmp(p->why, "setgid") &&
			   strncmp(p->why, "setuid or unreadable", 20));
}

/*
 * A record whose pid no process seen has: made in another pid namespace
 * (unshare -p, a container), which names its processes otherwise. It
 * counts the first exec-watch image not yet counted that could have made
 * it: of its name, or of the inode it mapped.
 */
static void mark_other_ns(struct pkc_run *r, pid_t pid,
			  const struct pka_header *h)
{
	for (int i = 0; i < r->nprocs; i++)
		if (r->procs[i].pid == pid)
			return;
	for (int i = 0; h && i < r->nprocs; i++) {
		struct pkc_proc *p = &r->procs[i];

		if (p->xw && !p->counted && xw_may_load(p) &&
		    (!strncmp(p->comm, h->comm, sizeof(p->comm) - 1) ||
		     (p->ino && p->ino == h->exe_ino))) {
			p->counted = 1;
			return;
		}
	}
}

static void mark_counted(struct pkc_run *r, const char *name,
			 const struct pka_header *h)
{
	pid_t pid = (pid_t)atoi(name);

	mark_other_ns(r, pid, h);

	for (int i = 0; i < r->nprocs; i++) {
		struct pkc_proc *p = &r->procs[i];
		int image = h && h->exe_ino && p->dev == h->exe_dev &&
			    p->ino == h->exe_ino;

		/*
		 * An image the kernel told of (add_execs()): a record of
		 * its pid made by that program (its name, or the inode it
		 * mapped), whatever became of its file since (removed,
		 * rebuilt, in another mount namespace).
		 */
		if (p->xw) {
			/*
			 * Never one that cannot load the agent (a wrapper
			 * script of its name exec()ing it leaves a record of
			 * that name in that pid).
			 */
			if (p->pid == pid && xw_may_load(p) && (!h ||
			    !strncmp(p->comm, h->comm, sizeof(p->comm) - 1) ||
			    (p->ino && p->ino == h->exe_ino)))
				p->counted = 1;
			continue;
		}

		if (image && h->env_start && p->env_start) {
			if (p->env_start == h->env_start || p->pid == pid)
				p->counted = 1;
			continue;
		}
		if ((p->pid == pid && (!h || !h->exe_ino || p->unseen || image)) ||
		    (image && !p->why))
			p->counted = 1;
	}
}

/*
 * What @name is as the agent names files (protocol.h): 1 a record,
 * <pid>-XXXXXX; 2 <pid>-XXXXXX.fsize; 0 neither.
 */
static int record_name(const char *name)
{
	const char *dash = name + strspn(name, "0123456789");

	if (dash == name)
		return 0;
	if (*dash != '-')
		return 0;
	if (strlen(dash + 1) == 6)
		return 1;
	if (strlen(dash + 1) == 6 + strlen(PKA_FSIZE_SUFFIX) &&
	    !strcmp(dash + 7, PKA_FSIZE_SUFFIX))
		return 2;
	return 0;
}

/*
 * Process @pid made no record: its file size limit is below a record's
 * size (protocol.h). Said of its images not counted by a record (once
 * every record was read); if there is none (the image that found the
 * limit ended unseen, its pid seen only as a fork()ed child before its
 * exec), of a process of its own.
 */
static void mark_fsize(struct pkc_run *r, pid_t pid)
{
	static const char why[] = "its file size limit (ulimit -f) is below "
				  "a record's size";
	struct pkc_proc *p;
	int said = 0;

	for (int i = 0; i < r->nprocs; i++)
		if (r->procs[i].pid == pid && !r->procs[i].counted) {
			r->procs[i].why = why;
			said = 1;
		}
	if (said || !(p = proc_add(r)))
		return;
	p->pid = pid;
	p->exe = strdup("?");
	p->why = why;
}

/* Keep @pid of a <pid>-XXXXXX.fsize for mark_fsize() after the records. */
static void add_fsize(struct pkc_run *r, pid_t pid)
{
	pid_t *p = realloc(r->fsize, (size_t)(r->nfsize + 1) * sizeof(*p));

	if (!p)
		return;
	r->fsize = p;
	r->fsize[r->nfsize++] = pid;
}

/* Keep the name (comm) of record @h's process, once per name. */
static void add_name(struct pkc_run *r, const struct pka_header *h)
{
	char comm[sizeof(h->comm)];
	struct pkc_note *n;

	memcpy(comm, h->comm, sizeof(comm));
	comm[sizeof(comm) - 1] = 0;
	for (int k = 0; k < r->nnotes; k++)
		if (!strcmp(r->notes[k].comm, comm))
			return;
	n = realloc(r->notes, (size_t)(r->nnotes + 1) * sizeof(*n));
	if (!n)
		return;
	r->notes = n;
	memcpy(n[r->nnotes].comm, comm, sizeof(comm));
	r->nnotes++;
}

/*
 * The processes seen only once they had ended (only their name is left)
 * that are taken for fork()ed children of a process with a record: those
 * named as one. One that ran another program of the same name, loading
 * no agent, and ended within a scan is taken for one too.
 */
static void mark_names(struct pkc_run *r)
{
	for (int i = 0; i < r->nprocs; i++) {
		struct pkc_proc *p = &r->procs[i];

		if (!p->unseen || p->counted)
			continue;
		for (int k = 0; k < r->nnotes; k++)
			if (!strcmp(r->notes[k].comm, p->comm)) {
				p->counted = 1;
				break;
			}
	}
}

/*
 * Open record @name of directory @dfd: only a regular file of our own
 * user with one link, never through a link, never blocking (a FIFO a
 * program put there opens at once and is refused). Its size in *@size.
 */
static int open_record(int dfd, const char *name, off_t *size)
{
	struct stat st;
	int fd;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
		return -1;
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
		    O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	/* Again on what was opened: the name may have changed meanwhile. */
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    st.st_nlink != 1) {
		close(fd);
		return -1;
	}
	*size = st.st_size;
	return fd;
}

/*
 * Room for a record of @size bytes in r->buf. 0, or -ENOMEM. A record
 * holds this run's specs and what they expand to in one process, far
 * below 64 MiB more than one probe a spec: a larger file (a program of
 * COMMAND may put anything in the directory) is not read.
 */
static int buf_room(struct pkc_run *r, off_t size)
{
	void *p;

	if ((uint64_t)size <= r->buf_len)
		return 0;
	if ((uint64_t)size > UINT32_MAX ||
	    (uint64_t)size > r->rec_size + (64u << 20))
		return -ENOMEM;
	p = realloc(r->buf, (size_t)size);
	if (!p)
		return -ENOMEM;
	r->buf = p;
	r->buf_len = (size_t)size;
	return 0;
}

int pkc_run_collect(struct pkc_run *r, struct pkc_spec *t, int consume,
		    void (*add)(const struct pka_header *h, void *ctx),
		    void *ctx)
{
	int dfd = r->dir_fd < 0 ? -1 : openat(r->dir_fd, ".", O_RDONLY |
					     O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd < 0 ? NULL : fdopendir(dfd);
	struct dirent *e;
	int procs = 0;

	if (!d) {
		if (dfd >= 0)
			close(dfd);
		return 0;
	}
	while ((e = readdir(d))) {
		ssize_t got = -1;
		off_t size = -1;
		int fd, kind = record_name(e->d_name);

		/* Anything else is left for pkc_run_end() to remove. */
		if (!kind || (kind > 1 && !consume))
			continue;
		if (kind == 2) {
			add_fsize(r, (pid_t)atoi(e->d_name));
			continue;
		}
		fd = open_record(dirfd(d), e->d_name, &size);
		if (fd < 0)
			continue;
		/* The agent sized it: read it at the size it has. */
		if (!buf_room(r, size ? size : 1))
			got = pread(fd, r->buf, (size_t)size, 0);
		close(fd);
		if (consume) {
			unlinkat(dirfd(d), e->d_name, 0);
			/* The agent found no room and left it empty. */
			if (size == 0) {
				r->no_room++;
				mark_counted(r, e->d_name, NULL);
				continue;
			}
		}
		if (!usable(r, r->buf, got))
			continue;
		procs++;
		if (consume) {
			mark_counted(r, e->d_name, r->buf);
			add_name(r, r->buf);
		}
		add_specs(r->buf, t, r->n);
		add(r->buf, ctx);
	}
	closedir(d);
	if (consume) {
		mark_names(r);
		for (int i = 0; i < r->nfsize; i++)
			mark_fsize(r, r->fsize[i]);
	}
	return procs;
}

void pkc_run_end(struct pkc_run *r)
{
	pkc_xw_close(&r->xw);
	remove_dir(r);
	if (r->dir_fd >= 0)
		close(r->dir_fd);
	r->dir_fd = -1;
	if (r->guard_fd >= 0)
		close(r->guard_fd);
	r->guard_fd = -1;
	if (r->guard > 0)
		while (waitpid(r->guard, NULL, 0) < 0 && errno == EINTR)
			;
	r->guard = 0;
}

/* Add problem @fmt to r->problems (dropped if there is no memory). */
__attribute__((format(printf, 2, 3)))
static void problem(struct pkc_run *r, const char *fmt, ...)
{
	char **p = realloc(r->problems, (size_t)(r->nproblems + 1) * sizeof(*p));
	va_list ap;

	if (!p)
		return;
	r->problems = p;
	va_start(ap, fmt);
	if (vasprintf(&p[r->nproblems], fmt, ap) >= 0)
		r->nproblems++;
	va_end(ap);
}

void pkc_note_unprobed(struct pka_header *h, uint32_t i,
		       const struct pka_probe *p, unsigned long long *count,
		       char **why)
{
	const char *line = pka_spec_why(h, i);
	const char *name = p->name && p->name <= h->why_len ?
			   (const char *)h + h->why_at + p->name - 1 : NULL;

	(*count)++;
	/* The first one, named (a glob's log line has its address). */
	if (line && line[0] && !*why &&
	    asprintf(why, "%s%s%s", name ? name : "",
		     name ? "; first error: " : "", line) < 0)
		*why = NULL;
}

void pkc_run_problem(struct pkc_run *r, const char *what)
{
	problem(r, "%s", what);
}

static int pick_uncounted(const struct pkc_proc *p)
{
	return !p->counted;
}

/* "N process(es) WHAT: exe (detail), ..." for the processes @pick takes. */
static void proc_problem(struct pkc_run *r, int n, const char *what,
			 int (*pick)(const struct pkc_proc *p))
{
	char *list = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&list, &len);
	int shown = 0;

	if (!m)
		return;
	for (int i = 0; i < r->nprocs; i++) {
		const struct pkc_proc *p = &r->procs[i];

		if (!pick(p))
			continue;
		if (shown++ == 8) {
			fprintf(m, ", and %d more", n - 8);
			break;
		}
		fprintf(m, "%s%s (", shown > 1 ? ", " : "", p->exe ? p->exe : "?");
		if (pick == pick_uncounted)
			fprintf(m, "%s, ", p->why ? p->why : "no record");
		fprintf(m, "pid %d)", (int)p->pid);
	}
	if (fclose(m)) {
		free(list);
		return;
	}
	problem(r, "%d process%s %s: %s", n, n == 1 ? "" : "es", what, list);
	free(list);
}

static int pick_alive(const struct pkc_proc *p)
{
	return p->alive;
}

void pkc_run_check(struct pkc_run *r, int procs, const struct pkc_spec *t)
{
	int armed = 0;

	for (int i = 0; i < r->n; i++)
		armed += t[i].armed;
	/* Fork()ed children of counted images: see mark_counted(). */
	r->not_counted = r->outlived = 0;
	for (int i = 0; i < r->nprocs; i++) {
		r->not_counted += !r->procs[i].counted;
		r->outlived += r->procs[i].alive;
	}
	if (r->refused[0]) {
		r->fatal = 1;
		problem(r, "cannot use the agent %s: %s", r->agent, r->refused);
	}
	if (r->no_room) {
		r->fatal = 1;
		problem(r, "no room for the counts in %.*s: %d process%s of the "
			   "command not counted",
			(int)(strrchr(r->dir, '/') - r->dir), r->dir, r->no_room,
			r->no_room == 1 ? "" : "es");
	}
	if (!procs && !r->refused[0] && !r->no_room)
		problem(r, "no process of the command loaded the agent");
	else if (procs && !armed)
		problem(r, "no probe could be armed in any process");
	/* A late glob's functions past its reserved slots (agent/late.c). */
	for (int i = 0; i < r->n; i++)
		if (t[i].left_out)
			problem(r, "%s: %lu function%s of libraries loaded later "
				   "not probed (no room left in the slots the "
				   "glob had reserved), in %d process%s",
				t[i].spec, t[i].left_out,
				t[i].left_out == 1 ? "" : "s", t[i].left_procs,
				t[i].left_procs == 1 ? "" : "es");
	if (r->xw.lost || r->xw.full)
		problem(r, "the kernel's exec() records %s (its rings were "
			   "full): processes that ended within 10 ms may be "
			   "missing from this report",
			r->xw.lost ? "were lost" : "may have been lost");
	if (r->not_counted)
		proc_problem(r, r->not_counted, "not counted", pick_uncounted);
	if (r->outlived)
		proc_problem(r, r->outlived, "outlived the command (their calls "
			     "after it ended are not counted; left running)",
			     pick_alive);
}

void pkc_run_json_procs(const struct pkc_run *r, FILE *o)
{
	int first = 1;

	fprintf(o, ",\"complete\":%s,\"problems\":[",
		r->nproblems ? "false" : "true");
	for (int i = 0; i < r->nproblems; i++) {
		if (i)
			fputc(',', o);
		pkc_json_str(o, r->problems[i]);
	}
	fprintf(o, "],\"not_counted\":[");
	for (int i = 0; i < r->nprocs; i++) {
		const struct pkc_proc *p = &r->procs[i];

		if (p->counted)
			continue;
		fprintf(o, "%s{\"pid\":%d,\"exe\":", first ? "" : ",", (int)p->pid);
		pkc_json_str(o, p->exe ? p->exe : "?");
		fprintf(o, ",\"reason\":");
		pkc_json_str(o, p->why ? p->why : "no record");
		fputc('}', o);
		first = 0;
	}
	fprintf(o, "],\"outlived\":[");
	first = 1;
	for (int i = 0; i < r->nprocs; i++) {
		const struct pkc_proc *p = &r->procs[i];

		if (!p->alive)
			continue;
		fprintf(o, "%s{\"pid\":%d,\"exe\":", first ? "" : ",", (int)p->pid);
		pkc_json_str(o, p->exe ? p->exe : "?");
		fputc('}', o);
		first = 0;
	}
	/* Whether exec()s were told by the kernel (execwatch.c), else why not. */
	fprintf(o, "],\"exec_watch\":{\"on\":%s", r->xw.on ? "true" : "false");
	if (!r->xw.on) {
		fprintf(o, ",\"why\":");
		pkc_json_str(o, r->xw_off ? "PROBEKIT_EXEC_WATCH=0" :
			     r->xw.err ? strerror(r->xw.err) : "not started");
	}
	fputc('}', o);
}

int pkc_run_verdict(const struct pkc_run *r, int code)
{
	char who[64];

	snprintf(who, sizeof(who), "probekit %s", r->mode_name);
	for (int i = 0; i < r->nproblems; i++)
		pkc_msg(who, "%s\n", r->problems[i]);
	if (r->fatal || (r->strict && r->nproblems))
		return PKC_EXIT_OWN;
	return code;
}

void pkc_run_free(struct pkc_run *r)
{
	for (int i = 0; i < r->nprocs; i++)
		free(r->procs[i].exe);
	free(r->procs);
	for (int i = 0; i < r->nproblems; i++)
		free(r->problems[i]);
	free(r->problems);
	free(r->buf);
	free(r->pre);
	free(r->notes);
	free(r->fsize);
	free(r->specs_path);
	r->fsize = NULL;
	r->nfsize = 0;
	r->notes = NULL;
	r->nnotes = 0;
	r->specs_path = NULL;
	r->pre = NULL;
	r->npre = 0;
	r->procs = NULL;
	r->problems = NULL;
	r->buf = NULL;
	r->nprocs = r->nproblems = 0;
	r->buf_len = 0;
}

int pkc_spawn(char **argv, pid_t *pid, void (*ready)(pid_t pid, void *ctx),
	      void *ctx)
{
	int code;

	catch_signals();
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	code = start_command(argv, pid, ready, ctx);
	if (code)
		unblock_signals();
	return code;
}

int pkc_spawn_wait(pid_t pid, struct rusage *ru, struct timespec *end)
{
	int status = -1, err;

	err = wait_end(pid, 1);
	clock_gettime(CLOCK_MONOTONIC, end);
	fwd_pid = 0;
	if (!err)
		while (wait4(pid, &status, 0, ru) < 0 && errno == EINTR)
			;
	if (status == -1) {
		pkc_err("waitpid: %s\n",
			strerror(err ? -err : errno));
		return PKC_EXIT_OWN;
	}
	/* Orphans of the command that became ours and have ended. */
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	return WIFSIGNALED(status) ? 128 + WTERMSIG(status)
				   : WEXITSTATUS(status);
}
