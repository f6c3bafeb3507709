// SPDX-License-Identifier: MIT
/* test_fault_watch_late.c - a fault on a watched page whose handler runs only after pk_watch_remove() has given the page back (the thread preempted in between) is retried, every time, never passed to the program (issue 9, item 4: the watch race). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probekit.h"
#include "harness.h"

/*
 * What a preempted thread does by chance (stress_fault_watch_maps provokes
 * it with a /proc/PID/maps reader), done here on purpose: the parent
 * traces the writer thread of a child and holds the writer's SIGSEGV at its
 * delivery (signal-delivery-stop) while the child's main thread removes the
 * watch; then it lets the signal through, so probekit's handler runs on a
 * page that is no longer watched and no longer faults. Three rounds, the
 * same thread and address each time: each late fault must be retried, none
 * must reach the program's own SIGSEGV handler (installed before
 * probekit's, it counts them) or kill it. In the last two rounds, while
 * the fault is held, other pages are watched and given back, one after
 * another (churn_n[]): more than the watch table holds (the page must stay
 * known as retired), then more than the ring of retired pages remembers
 * (a late fault is still retried where the mapping allows the access).
 */

#define ROUNDS 5
static const int churn_n[ROUNDS] = { 0, 0, 0, 20, 40 };
#define CHURN_MAX 40

static volatile uint64_t churn[CHURN_MAX][512] __attribute__((aligned(4096)));

static volatile uint64_t vars[512] __attribute__((aligned(4096)));
static volatile int go, quit, done;
static pid_t writer_tid;
static unsigned long foreign, own_seen;
static int own;		/* the last phase: vars protected by the program */
static int to_parent[2], to_child[2];

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	uintptr_t a = (uintptr_t)si->si_addr, p = (uintptr_t)vars;

	(void)sig;
	(void)uc;
	if (a >= p && a < p + sizeof(vars) &&
	    __atomic_load_n(&own, __ATOMIC_ACQUIRE)) {
		/* The program's own protection: it opens the page. */
		mprotect((void *)p, sizeof(vars), PROT_READ | PROT_WRITE);
		__atomic_add_fetch(&own_seen, 1, __ATOMIC_RELAXED);
		return;
	}
	if (a >= p && a < p + sizeof(vars)) {
		__atomic_add_fetch(&foreign, 1, __ATOMIC_RELAXED);
		return;	/* the access runs again */
	}
	signal(SIGSEGV, SIG_DFL);
}

static void on_hit(const struct pk_watch_hit *h, void *ctx)
{
	(void)h;
	(void)ctx;
}

/* One write each time it is told to. */
static void *writer(void *arg)
{
	uint64_t n = 0;

	(void)arg;
	__atomic_store_n(&writer_tid, (pid_t)syscall(SYS_gettid),
			 __ATOMIC_RELEASE);
	while (!__atomic_load_n(&quit, __ATOMIC_ACQUIRE)) {
		if (!__atomic_load_n(&go, __ATOMIC_ACQUIRE)) {
			usleep(100);
			continue;
		}
		vars[0] = ++n;
		__atomic_store_n(&go, 0, __ATOMIC_RELEASE);
		__atomic_add_fetch(&done, 1, __ATOMIC_RELEASE);
	}
	return NULL;
}

static void say(int fd, char c)
{
	if (write(fd, &c, 1) != 1)
		_exit(3);
}

static char hear(int fd)
{
	char c = 0;

	if (read(fd, &c, 1) != 1)
		return 0;
	return c;
}

/*
 * The program's own protection fault on a page just given back (in the
 * ring of retired pages), held at every delivery while another page is
 * watched and given back: probekit retries it once (it may be a late
 * one), then it goes to the program's handler, which opens the page. Not
 * retried for as long as other pages churn.
 */
static void own_fault(void)
{
	struct pk_watch *w;
	int holds = 0;

	if (!ASSERT_OK(pk_watch_add((void *)&vars[0], 8, PK_WATCH_WRITE,
				    on_hit, NULL, &w), "own: watch") ||
	    !ASSERT_OK(pk_watch_remove(w), "own: and remove"))
		return;
	__atomic_store_n(&own, 1, __ATOMIC_RELEASE);
	mprotect((void *)vars, sizeof(vars), PROT_READ);
	say(to_parent[1], 'm');	/* hold every fault */
	if (!ASSERT_EQ(hear(to_child[0]), 'G', "own: the tracer is ready"))
		return;
	__atomic_store_n(&go, 1, __ATOMIC_RELEASE);
	while (__atomic_load_n(&done, __ATOMIC_ACQUIRE) <= ROUNDS) {
		struct pollfd pfd = { .fd = to_child[0], .events = POLLIN };

		if (poll(&pfd, 1, 10) != 1)
			continue;
		if (!ASSERT_EQ(hear(to_child[0]), 'h', "own: a fault held"))
			return;
		holds++;
		if (holds <= 4) {
			struct pk_watch *o;

			if (!ASSERT_OK(pk_watch_add((void *)&churn[0][0], 8,
						    PK_WATCH_WRITE, on_hit,
						    NULL, &o), "own: churn") ||
			    !ASSERT_OK(pk_watch_remove(o), "own: churn back"))
				return;
		}
		say(to_parent[1], 'r');
	}
	printf("own fault: delivered %d times, %lu to the program\n", holds,
	       own_seen);
	ASSERT_EQ(own_seen, 1, "own: the program's handler saw it once");
	ASSERT_TRUE(holds <= 2, "own: retried at most once, whatever churns");
}

static int child(void)
{
	struct sigaction sa;
	pthread_t th;
	pid_t tid;

	alarm(60);	/* a lost message ends in SIGALRM, not a hang */
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigaction(SIGSEGV, &sa, NULL);
	pthread_create(&th, NULL, writer, NULL);
	while (!(tid = __atomic_load_n(&writer_tid, __ATOMIC_ACQUIRE)))
		usleep(100);
	if (write(to_parent[1], &tid, sizeof(tid)) != sizeof(tid) ||
	    hear(to_child[0]) != 'a')
		return 2;	/* not traced: the parent skips */
	for (int r = 0; r < ROUNDS; r++) {
		struct pk_watch *w;
		double until;

		if (!ASSERT_OK(pk_watch_add((void *)&vars[0], 8, PK_WATCH_WRITE,
					    on_hit, NULL, &w), "watch"))
			break;
		/* The tracer is waiting for the fault before the write. */
		say(to_parent[1], 'g');
		if (!ASSERT_EQ(hear(to_child[0]), 'G', "the tracer is ready"))
			break;
		__atomic_store_n(&go, 1, __ATOMIC_RELEASE);
		if (!ASSERT_EQ(hear(to_child[0]), 'h', "the writer's fault held"))
			break;
		ASSERT_OK(pk_watch_remove(w), "remove while the fault waits");
		for (int i = 0; i < churn_n[r]; i++) {
			struct pk_watch *o;

			if (!ASSERT_OK(pk_watch_add((void *)&churn[i][0], 8,
						    PK_WATCH_WRITE, on_hit,
						    NULL, &o),
				       "watch another page") ||
			    !ASSERT_OK(pk_watch_remove(o), "and remove it"))
				break;
		}
		say(to_parent[1], 'r');	/* let the fault through */
		until = t_now() + 10;
		while (__atomic_load_n(&done, __ATOMIC_ACQUIRE) <= r &&
		       t_now() < until)
			usleep(100);
		ASSERT_EQ(done, r + 1, "the late write went through");
	}
	own_fault();
	say(to_parent[1], 'q');
	__atomic_store_n(&quit, 1, __ATOMIC_RELEASE);
	pthread_join(th, NULL);
	printf("%d rounds, %lu faults given to the program\n", done, foreign);
	ASSERT_EQ(foreign, 0, "no late fault reached the program");
	ASSERT_EQ(vars[0], (uint64_t)done, "every write landed on the page");
	return t_exit();
}

/*
 * Trace the writer: hold its first SIGSEGV after 'g' (answered 'G') until
 * 'r'; after 'q'
 * (or the child's end) pass everything on until the thread has exited and
 * is reaped (the child's own exit waits for that).
 */
static void tracer(pid_t tid)
{
	int want = 0, held = 0, closing = 0, multi = 0;

	for (;;) {
		struct pollfd pfd = { .fd = to_parent[0], .events = POLLIN };
		int st;
		pid_t r = waitpid(tid, &st, __WALL | WNOHANG);

		if (r == tid) {
			if (!WIFSTOPPED(st))
				return;	/* the thread is gone */
			if (want && !held && WSTOPSIG(st) == SIGSEGV) {
				held = 1;
				say(to_child[1], 'h');
			} else {
				ptrace(PTRACE_CONT, tid, NULL,
				       (void *)(uintptr_t)(st >> 16 ? 0 :
							   WSTOPSIG(st)));
			}
			continue;
		}
		if (r < 0)
			return;
		if (closing) {
			usleep(1000);
			continue;
		}
		if (poll(&pfd, 1, 1) == 1) {
			char c = hear(to_parent[0]);

			if (c == 'g' || c == 'm') {
				want = 1;
				multi = c == 'm';	/* every fault, not one */
				say(to_child[1], 'G');
			} else if (c == 'r' && held) {
				held = 0;
				want = multi;
				ptrace(PTRACE_CONT, tid, NULL,
				       (void *)(uintptr_t)SIGSEGV);
			} else if (c != 'r') {
				closing = 1;	/* 'q', or the child is gone */
			}
		}
	}
}

int main(void)
{
	int status = 0;
	pid_t pid, tid = 0;

	setenv("PROBEKIT_WATCH", "page", 1);
	if (pipe(to_parent) || pipe(to_child))
		SKIP("pipe");
	fflush(stdout);
	pid = fork();
	if (pid == 0)
		exit(child());
	if (!ASSERT_GE(pid, 1, "fork"))
		return t_exit();
	if (read(to_parent[0], &tid, sizeof(tid)) != sizeof(tid) ||
	    ptrace(PTRACE_SEIZE, tid, NULL, NULL)) {
		int e = errno;

		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		SKIP("cannot trace the child's thread (%s)", strerror(e));
	}
	say(to_child[1], 'a');
	tracer(tid);
	waitpid(pid, &status, 0);
	if (WIFSIGNALED(status))
		fprintf(stderr, "the child was killed by signal %d\n",
			WTERMSIG(status));
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		    "the child's checks passed");
	return t_exit();
}
