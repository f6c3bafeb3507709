// SPDX-License-Identifier: MIT
/* run.c - what every subcommand that runs COMMAND does: find the agent, start, wait, read the records, pick the exit status. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
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
		fprintf(stderr, "probekit: cannot find the agent %s (set "
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

/* The agent first in LD_PRELOAD, and what it is to do (protocol.h). */
static int set_env(const struct pkc_run *r)
{
	const char *pre = getenv("LD_PRELOAD");
	char *list = NULL, *preload;
	size_t len;
	FILE *m = open_memstream(&list, &len);

	if (!m)
		return -ENOMEM;
	for (int i = 0; i < r->n; i++) {
		if (i)
			fputc(PKA_SEP, m);
		fputs(r->specs[i], m);
	}
	if (fclose(m)) {
		free(list);
		return -ENOMEM;
	}
	if (asprintf(&preload, "%s%s%s", r->agent, pre && *pre ? ":" : "",
		     pre ? pre : "") < 0) {
		free(list);
		return -ENOMEM;
	}
	if (setenv(PKA_ENV_DIR, r->dir, 1) ||
	    setenv(PKA_ENV_MODE, r->mode_name, 1) ||
	    setenv(PKA_ENV_SPECS, list, 1) ||
	    setenv("LD_PRELOAD", preload, 1)) {
		free(list);
		free(preload);
		return -errno;
	}
	free(list);
	free(preload);
	return set_audit(r);
}

/*
 * Signals. COMMAND runs in probekit's own process group, as under perf
 * stat or timeout --foreground, so that it stays in the terminal's
 * foreground and can read it: the terminal's ^C, ^\ and hangup reach
 * COMMAND by themselves (si_code SI_KERNEL) and are not sent again.
 * SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to probekit by a process
 * (kill(1), a supervisor) are passed on to COMMAND, its first process
 * only; probekit itself waits on, reports and exits with COMMAND's status.
 * SIGPIPE is ignored: a report that cannot be written fails the write.
 * COMMAND gets the dispositions and mask probekit was started with (a
 * signal ignored then, as under nohup, stays ignored).
 *
 * fwd_pid is COMMAND's pid from fork() until it has ended, and 0 before
 * and once it is reaped-to-be (set before waitpid() reaps it, so a pid
 * the kernel hands out again is never signalled).
 */
static const int fwd_sigs[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
#define N_FWD (sizeof(fwd_sigs) / sizeof(fwd_sigs[0]))
static volatile sig_atomic_t fwd_pid;
static struct sigaction old_act[N_FWD], old_pipe, old_chld;
static sigset_t old_mask;

static void forward(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;

	(void)uc;
	if (si->si_code != SI_KERNEL && fwd_pid > 0)
		kill((pid_t)fwd_pid, sig);
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
	/* SIGCHLD ignored (inherited) would reap COMMAND before we wait. */
	sigaction(SIGCHLD, &dfl, &old_chld);
}

/* In a child: the dispositions and mask probekit was started with. */
static void restore_signals(void)
{
	for (size_t i = 0; i < N_FWD; i++)
		sigaction(fwd_sigs[i], &old_act[i], NULL);
	sigaction(SIGPIPE, &old_pipe, NULL);
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
 * unwatched.
 */
static int start_command(char **argv, pid_t *pid)
{
	pid_t parent = getpid();
	int err[2], e;

	if (pipe2(err, O_CLOEXEC)) {
		fprintf(stderr, "probekit: pipe: %s\n", strerror(errno));
		return PKC_EXIT_OWN;
	}
	*pid = fork();
	if (*pid == 0) {
		restore_signals();
		if (prctl(PR_SET_PDEATHSIG, SIGTERM) || getppid() != parent)
			_exit(PKC_EXIT_OWN);
		execvp(argv[0], argv);
		/* The parent maps errno to the status; this one goes unseen. */
		e = errno;
		if (write(err[1], &e, sizeof(e)) < 0)
			_exit(PKC_EXIT_OWN);
		_exit(PKC_EXIT_CANNOT_RUN);
	}
	close(err[1]);
	if (*pid < 0) {
		fprintf(stderr, "probekit: fork: %s\n", strerror(errno));
		close(err[0]);
		return PKC_EXIT_OWN;
	}
	fwd_pid = *pid;
	unblock_signals();
	if (read(err[0], &e, sizeof(e)) == (ssize_t)sizeof(e)) {
		fprintf(stderr, "probekit: %s: %s\n", argv[0], strerror(e));
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
	int fd = openat(r->dir_fd, ".room", O_RDWR | O_CREAT | O_EXCL |
			O_NOFOLLOW | O_CLOEXEC, 0600);
	int err;

	if (fd < 0)
		return errno;
	err = posix_fallocate(fd, 0, r->rec_size);
	close(fd);
	unlinkat(r->dir_fd, ".room", 0);
	return err;
}

static int no_room(int err)
{
	return err == ENOSPC || err == EDQUOT;
}

int pkc_run_start(struct pkc_run *r, char **argv)
{
	const char *tmp = getenv("TMPDIR");
	int err, code;

	r->dir_fd = -1;
	r->guard_fd = -1;
	r->guard = 0;
	r->rec_size = PKA_RECORD_SIZE(r->size, r->n);
	if (!(tmp && *tmp))
		tmp = "/tmp";
	catch_signals();
	snprintf(r->dir, sizeof(r->dir), "%s/probekit-%s.XXXXXX", tmp,
		 r->mode_name);
	if (!mkdtemp(r->dir)) {
		err = errno;
		if (no_room(err))
			fprintf(stderr, "probekit: no room for the counts in "
					"%s: %s\n", tmp, strerror(err));
		else
			fprintf(stderr, "probekit: cannot make the counts "
					"directory in %s (mkdtemp): %s\n", tmp,
				strerror(err));
		unblock_signals();
		return PKC_EXIT_OWN;
	}
	r->dir_fd = open(r->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
			 O_CLOEXEC);
	if (r->dir_fd < 0) {
		fprintf(stderr, "probekit: %s: %s\n", r->dir, strerror(errno));
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
				fprintf(stderr, "probekit: no room for the counts "
						"in %s (a record is %u bytes)\n",
					tmp, r->rec_size);
			else
				fprintf(stderr, "probekit: %s: %s\n", r->dir,
					strerror(err));
			code = PKC_EXIT_OWN;
			goto fail;
		}
		err = set_env(r);
	}
	if (err) {
		fprintf(stderr, "probekit: cannot start: %s\n", strerror(-err));
		code = PKC_EXIT_OWN;
		goto fail;
	}
	code = start_command(argv, &r->pid);
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

/* Wait for COMMAND, calling @tick every @ms milliseconds (as perf stat -I). */
static int wait_ticking(pid_t pid, long ms,
			void (*tick)(double elapsed, void *ctx), void *ctx)
{
	struct timespec t0, now, nap = { 0, 10 * 1000 * 1000 };
	double next = ms / 1e3;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int err = wait_end(pid, 0);
		double el;

		if (err != -EAGAIN)
			return err;
		nanosleep(&nap, NULL);
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

int pkc_run_wait(struct pkc_run *r, long interval_ms,
		 void (*tick)(double elapsed, void *ctx), void *ctx)
{
	int status = -1, err;

	err = tick ? wait_ticking(r->pid, interval_ms, tick, ctx)
		   : wait_end(r->pid, 1);
	fwd_pid = 0;
	if (!err)
		while (waitpid(r->pid, &status, 0) < 0 && errno == EINTR)
			;
	/* waitpid() failed (status untouched): probekit's failure, not COMMAND's. */
	if (status == -1) {
		fprintf(stderr, "probekit: waitpid: %s\n",
			strerror(err ? -err : errno));
		return PKC_EXIT_OWN;
	}
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
	} else if (h->mode != r->mode || h->size != r->rec_size ||
		   h->why_at != r->size || h->nwhy != (uint32_t)r->n) {
		snprintf(buf, sizeof(buf), "it served mode %u, not %s",
			 h->mode, r->mode_name);
		why = buf;
	}
	if (why) {
		if (!r->refused[0])
			snprintf(r->refused, sizeof(r->refused), "%s", why);
		return 0;
	}
	return got == (ssize_t)r->rec_size;
}

/* Add what arming each spec gave in record @h to @t. */
static void add_specs(struct pka_header *h, struct pkc_spec *t, int n)
{
	for (int i = 0; i < n && i < (int)h->n; i++) {
		struct pka_spec *s = &h->spec[i];

		if (s->status == 0) {
			t[i].armed++;
			t[i].int3 += s->int3 != 0;
		} else if (s->status != PKA_PENDING) {
			char *why = pka_spec_why(h, (uint32_t)i);

			t[i].failed++;
			t[i].last_err = -s->status;
			if (why && why[0]) {
				why[PKA_WHY_LEN - 1] = 0;
				memcpy(t[i].why, why, sizeof(t[i].why));
			}
		}
	}
}

/* Whether @name is as the agent names a record: <pid>-XXXXXX. */
static int record_name(const char *name)
{
	const char *dash = name + strspn(name, "0123456789");

	return dash != name && *dash == '-' && strlen(dash + 1) == 6;
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

int pkc_run_collect(struct pkc_run *r, void *rec, struct pkc_spec *t,
		    int consume, void (*add)(const void *rec, void *ctx),
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
		int fd;

		/* Anything else is left for pkc_run_end() to remove. */
		if (!record_name(e->d_name))
			continue;
		fd = open_record(dirfd(d), e->d_name, &size);
		if (fd < 0)
			continue;
		got = pread(fd, rec, r->rec_size, 0);
		close(fd);
		if (consume) {
			unlinkat(dirfd(d), e->d_name, 0);
			/* The agent found no room and left it empty. */
			if (size == 0) {
				r->no_room++;
				continue;
			}
		}
		if (!usable(r, rec, got))
			continue;
		procs++;
		add_specs(rec, t, r->n);
		add(rec, ctx);
	}
	closedir(d);
	return procs;
}

void pkc_run_end(struct pkc_run *r)
{
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

int pkc_run_verdict(const struct pkc_run *r, int procs,
		    const struct pkc_spec *t, int code)
{
	int armed = 0;

	for (int i = 0; i < r->n; i++)
		armed += t[i].armed;
	if (r->refused[0]) {
		fprintf(stderr, "probekit: cannot use the agent %s: %s\n",
			r->agent, r->refused);
		return PKC_EXIT_OWN;
	}
	if (r->no_room) {
		fprintf(stderr, "probekit: no room for the counts in %.*s: %d "
				"process%s of the command not counted\n",
			(int)(strrchr(r->dir, '/') - r->dir), r->dir, r->no_room,
			r->no_room == 1 ? "" : "es");
		return PKC_EXIT_OWN;
	}
	if (!procs) {
		fprintf(stderr, "probekit: no process of the command loaded the "
				"agent (a static or setuid program?)\n");
		return PKC_EXIT_OWN;
	}
	if (!armed) {
		fprintf(stderr, "probekit: no probe could be armed in any "
				"process\n");
		return PKC_EXIT_OWN;
	}
	return code;
}
