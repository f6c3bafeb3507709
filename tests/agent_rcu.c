// SPDX-License-Identifier: MIT
/* agent_rcu.c - the agent's urcu-bp replacement (agent/rcu.c): a grace period waits for every reader inside a section, nested ones too, and a fork child's wait is not held up by the parent's other threads. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <urcu-bp.h>
#include <urcu/static/urcu-bp.h>

/* harness.h brings probekit.h's module constructor: a test of its own. */
#define FAIL_IF(c, what)                                                       \
	do {                                                                   \
		if (c) {                                                       \
			fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__,  \
				what);                                         \
			exit(1);                                               \
		}                                                              \
	} while (0)

struct obj {
	volatile int alive;
};

static struct obj *volatile cur;
static volatile int stop;
static unsigned long seen_dead, reads;

static void *reader(void *arg)
{
	(void)arg;
	urcu_bp_register_thread();
	for (unsigned long n = 0; !stop; n++) {
		int nest = n & 1;
		struct obj *o;

		_urcu_bp_read_lock();
		if (nest)
			_urcu_bp_read_lock();	/* nested */
		o = __atomic_load_n(&cur, __ATOMIC_CONSUME);
		for (int i = 0; i < 200; i++)
			if (!o->alive)
				__atomic_fetch_add(&seen_dead, 1, __ATOMIC_RELAXED);
		if (nest)
			_urcu_bp_read_unlock();
		_urcu_bp_read_unlock();
		/* Room for the writer on a machine of 2 busy cores. */
		if (!(__atomic_fetch_add(&reads, 1, __ATOMIC_RELAXED) % 64))
			usleep(20);
	}
	return NULL;
}

int main(void)
{
	const char *s = getenv("PK_STRESS_SECONDS");
	double secs = s ? atof(s) : 1, t0;
	unsigned long gps = 0;
	struct timespec ts;
	pthread_t t[3];
	pid_t pid;
	int st;

	cur = calloc(1, sizeof(*cur));
	cur->alive = 1;
	for (int i = 0; i < 3; i++)
		FAIL_IF(pthread_create(&t[i], NULL, reader, NULL), "reader");
	clock_gettime(CLOCK_MONOTONIC, &ts);
	t0 = ts.tv_sec + ts.tv_nsec / 1e9;
	do {
		struct obj *n = calloc(1, sizeof(*n)), *old = cur;

		n->alive = 1;
		__atomic_store_n(&cur, n, __ATOMIC_RELEASE);
		urcu_bp_synchronize_rcu();
		old->alive = 0;		/* no reader may still see it */
		usleep(100);
		free(old);
		gps++;
		clock_gettime(CLOCK_MONOTONIC, &ts);
	} while (ts.tv_sec + ts.tv_nsec / 1e9 - t0 < secs);

	/* A child: the parent's readers are gone, its grace period is not held. */
	urcu_bp_before_fork();
	pid = fork();
	if (!pid) {
		urcu_bp_after_fork_child();
		alarm(5);
		urcu_bp_synchronize_rcu();
		_exit(0);
	}
	urcu_bp_after_fork_parent();
	FAIL_IF(waitpid(pid, &st, 0) != pid, "waitpid");
	FAIL_IF(!WIFEXITED(st) || WEXITSTATUS(st), "child's grace period ended");

	stop = 1;
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	printf("%lu grace periods, %lu read sections\n", gps, reads);
	FAIL_IF(gps < 10, "grace periods");
	FAIL_IF(reads < 100, "read sections");
	FAIL_IF(seen_dead, "readers saw a retired object");
	return 0;
}
