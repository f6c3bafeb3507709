/* SPDX-License-Identifier: MIT */
/* tracefs.h - find a tracefs whose uprobe_events answers, for tests and benchmarks that compare with kernel uprobes. */
#ifndef PK_TEST_TRACEFS_H
#define PK_TEST_TRACEFS_H

/*
 * Seen on this workplace (kernel 6.18): a process hitting a uprobe while
 * another process removed uprobe events deadlocked inside the kernel
 * (uprobe_dispatcher waiting on a lock held by a writer that waits in
 * synchronize_rcu_tasks_trace for the first). From then on, every open of
 * uprobe_events blocks forever in an unkillable sleep. So before using
 * uprobes, a child process (with no descriptor of ours, so a stuck child
 * keeps no pipe of ctest open) reads uprobe_events; if it does not answer in
 * time, uprobes are reported unusable instead of hanging the caller. Tests
 * that use uprobes also hold the ctest RESOURCE_LOCK "tracefs", so two of
 * them never race as above.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TRACEFS_DIR "/sys/kernel/tracing"

/* NULL if uprobes can be used at TRACEFS_DIR; otherwise why not. */
static inline const char *tracefs_uprobes_unusable(void)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 };
	int status;
	pid_t pid;

	if (getenv("PK_NO_UPROBES"))
		return "PK_NO_UPROBES is set";
	if (access(TRACEFS_DIR "/uprobe_events", W_OK) && geteuid() == 0)
		mount("nodev", TRACEFS_DIR, "tracefs", 0, NULL);
	if (access(TRACEFS_DIR "/uprobe_events", W_OK))
		return geteuid() ? "needs root for tracefs uprobe_events"
				 : "no writable tracefs uprobe_events";
	pid = fork();
	if (pid < 0)
		return "fork failed";
	if (pid == 0) {
		char buf[4096];
		int fd;

		for (int i = 0; i < 1024; i++)
			close(i);
		fd = open(TRACEFS_DIR "/uprobe_events", O_RDONLY);
		while (fd >= 0 && read(fd, buf, sizeof(buf)) > 0)
			;
		_exit(fd >= 0 ? 0 : 1);
	}
	for (int i = 0; i < 300; i++) {	/* 3 s */
		if (waitpid(pid, &status, WNOHANG) == pid)
			return WIFEXITED(status) && !WEXITSTATUS(status)
				       ? NULL
				       : "cannot read uprobe_events";
		nanosleep(&ts, NULL);
	}
	kill(pid, SIGKILL);	/* it may be beyond reach: an unkillable sleep */
	return "tracefs uprobe_events does not answer (the kernel's uprobe "
	       "code is stuck on this machine)";
}

#endif /* PK_TEST_TRACEFS_H */
