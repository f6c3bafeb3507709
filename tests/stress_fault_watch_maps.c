// SPDX-License-Identifier: MIT
/* stress_fault_watch_maps.c - page watches come and go while two threads write the page and another process reads /proc/PID/maps in a loop (issue 9, item 4: the watch race). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probekit.h"
#include "harness.h"

/*
 * The reader (cat in a shell loop, as a user's monitoring would) contends
 * with the kernel's fault path and with probekit's remaps for the
 * process's mapping locks, and with the threads for the CPUs: a fault
 * raised while pk_watch_add() or pk_watch_remove() converts the page can
 * reach probekit's handler late, after the page has changed state. Every
 * such fault must be recognised and retried. The workload runs in a child
 * (so the parent can report its end and the reader stops); it fails if a
 * writer is killed, or if its own SIGSEGV handler, installed before
 * probekit's, is ever called for the page (a fault probekit gave away: the
 * default action without that handler). A matter of timing, so it may pass
 * on code with the defect; test_fault_watch_late holds a late fault on
 * purpose (ptrace) and fails on it every time.
 */

#define WRITERS 2

#include "watch_writers.h"

/*
 * The program's own SIGSEGV handler, installed before probekit's: probekit
 * passes it the faults that are not its own. The page never faults without
 * probekit, so every call here is a fault of probekit's given away (without
 * this handler: the default action, the process killed). It returns, so the
 * access runs again.
 */
static unsigned long foreign;
static void on_segv(int sig, siginfo_t *si, void *uc)
{
	uintptr_t a = (uintptr_t)si->si_addr, p = (uintptr_t)vars;

	(void)sig;
	(void)uc;
	if (a >= p && a < p + sizeof(vars)) {
		__atomic_add_fetch(&foreign, 1, __ATOMIC_RELAXED);
		return;
	}
	signal(SIGSEGV, SIG_DFL);	/* a real crash: let it happen */
}

/* A shell loop that reads our maps until we are gone (or it is killed). */
static pid_t reader_start(void)
{
	char cmd[128];
	pid_t pid;

	snprintf(cmd, sizeof(cmd),
		 "while cat /proc/%d/maps >/dev/null 2>&1; do :; done",
		 (int)getpid());
	pid = fork();
	if (pid == 0) {
		setpgid(0, 0);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		setpgid(pid, pid);
	return pid;
}

static int workload(double seconds)
{
	pthread_t th[WRITERS];
	unsigned long cycles = 0;
	double until = t_now() + seconds;
	pid_t rd;
	struct sigaction sa;

	sigemptyset(&sa.sa_mask);
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigaction(SIGSEGV, &sa, NULL);
	rd = reader_start();

	if (!ASSERT_GE(rd, 1, "reader started"))
		return 1;
	usleep(20000);	/* the reader is looping */
	for (long i = 0; i < WRITERS; i++)
		pthread_create(&th[i], NULL, writer, (void *)(uintptr_t)i);
	while (t_now() < until) {
		struct pk_watch *w;
		int err = pk_watch_add((void *)&vars[0], 8, PK_WATCH_WRITE,
				       on_hit, NULL, &w);

		if (!ASSERT_OK(err, "watch add"))
			break;
		/*
		 * Most watches go at once (the conversions back to back are
		 * what provokes late faults); one in 16 lasts a while, so
		 * that the writers, who wait out each conversion, also get to
		 * write a watched page (and be reported).
		 */
		if (cycles % 16 == 15)
			usleep(50);
		if (!ASSERT_OK(pk_watch_remove(w), "watch remove"))
			break;
		cycles++;
	}
	stop = 1;
	for (int i = 0; i < WRITERS; i++) {
		pthread_join(th[i], NULL);
		ASSERT_GE(writes[i], 1, "writer made progress");
		ASSERT_EQ(vars[8 + i], writes[i] - 1, "unwatched bytes written");
	}
	kill(-rd, SIGKILL);
	waitpid(rd, NULL, 0);
	printf("%lu add/remove cycles, %lu hits, %lu faults given to the "
	       "program\n", cycles, hits, foreign);
	ASSERT_EQ(foreign, 0, "no fault of probekit's reached the program");
	ASSERT_GE(cycles, 1, "watches came and went");
	return t_exit();
}

int main(void)
{
	double secs = t_stress_seconds(3.0);
	int status;
	pid_t pid;

	if (access("/bin/sh", X_OK) || access("/bin/cat", X_OK))
		SKIP("no /bin/sh or /bin/cat for the maps reader");
	setenv("PROBEKIT_WATCH", "page", 1);
	fflush(stdout);
	pid = fork();
	if (pid == 0)
		exit(workload(secs));
	if (!ASSERT_GE(pid, 1, "fork"))
		return t_exit();
	waitpid(pid, &status, 0);
	if (WIFSIGNALED(status))
		fprintf(stderr, "the workload was killed by signal %d\n",
			WTERMSIG(status));
	ASSERT_TRUE(WIFEXITED(status), "the workload was not killed");
	ASSERT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0,
		  "the workload's checks passed");
	return t_exit();
}
