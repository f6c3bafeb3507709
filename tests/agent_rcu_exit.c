// SPDX-License-Identifier: MIT
/*
 * agent_rcu_exit.c - a thread leaving the agent's urcu-bp registry
 * (agent/rcu.c's rd_gone) forgets its reader before any signal can run on
 * it again: a handler that runs there (a probe hit in the rest of the
 * thread's exit) sees an unregistered thread, never a reader that the
 * grace periods no longer wait for.
 *
 * The exiting thread is held inside rd_gone (the registry's lock taken
 * here, with urcu_bp_before_fork()) while a signal is sent to it: it runs
 * when rd_gone unblocks signals again.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <urcu-bp.h>
#include <urcu/static/urcu-bp.h>

#define FAIL_IF(c, what)                                                       \
	do {                                                                   \
		if (c) {                                                       \
			fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__,  \
				what);                                         \
			exit(1);                                               \
		}                                                              \
	} while (0)

static volatile int returned;	/* the thread's start routine is done */
static volatile int ran;	/* the handler ran after that */
static volatile int stale;	/* ... and found the thread's reader set */
static volatile pid_t tid;
static volatile int registered, held;

void urcu_bp_before_fork(void);
void urcu_bp_after_fork_parent(void);

static void on_usr1(int sig)
{
	(void)sig;
	if (!returned)
		return;
	ran = 1;
	stale = URCU_TLS(urcu_bp_reader) != NULL;
}

static void *exiting(void *arg)
{
	urcu_bp_register_thread();
	_urcu_bp_read_lock();
	_urcu_bp_read_unlock();
	tid = (pid_t)syscall(SYS_gettid);
	__atomic_store_n(&registered, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&held, __ATOMIC_ACQUIRE))
		sched_yield();
	__atomic_store_n(&returned, 1, __ATOMIC_RELEASE);
	return arg;
}

int main(void)
{
	struct sigaction sa = { .sa_handler = on_usr1 };
	struct timespec ts = { 0, 300 * 1000 * 1000 };
	pthread_t t;

	sigemptyset(&sa.sa_mask);
	FAIL_IF(sigaction(SIGUSR1, &sa, NULL), "sigaction");
	FAIL_IF(pthread_create(&t, NULL, exiting, NULL), "pthread_create");
	while (!__atomic_load_n(&registered, __ATOMIC_ACQUIRE))
		sched_yield();
	urcu_bp_before_fork();	/* the registry's lock, signals blocked */
	__atomic_store_n(&held, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&returned, __ATOMIC_ACQUIRE))
		sched_yield();
	nanosleep(&ts, NULL);	/* it waits for the lock in rd_gone */
	syscall(SYS_tgkill, getpid(), tid, SIGUSR1);
	urcu_bp_after_fork_parent();
	FAIL_IF(pthread_join(t, NULL), "pthread_join");
	FAIL_IF(!ran, "the handler did not run on the exiting thread");
	FAIL_IF(stale, "a signal on the exiting thread found its reader still "
		"set after it left the registry");
	printf("ok: a signal during the registry exit sees no reader\n");
	return 0;
}
