// SPDX-License-Identifier: MIT
/* test_probe_signal_api.c - a signal handler's pk_probe_create()/pk_retprobe_create() on a thread inside a probe API call is refused (-EDEADLK) instead of deadlocking. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "probekit.h"

/*
 * The main thread registers and unregisters a probe and a return probe in
 * a loop; another thread signals it all the while, and the signal handler
 * creates a probe. On main before the fix the handler interrupted the
 * thread holding probe_lock and waited for it: the watchdog below fails
 * the test after 10 s without progress.
 */

T_NOINLINE long st_plain(long a)
{
	volatile long x = a;

	return x * 3 + 1;
}

T_NOINLINE long st_ret(long a)
{
	volatile long x = a;

	return x + 2;
}

static pthread_t main_thread;
static volatile int done;
static unsigned long progress;		/* atomic: main loop iterations */
static unsigned long sent;		/* atomic */
static unsigned long refused, made, other;	/* the handler's results */

static void ret_fn(struct pk_retprobe *rp, struct pk_regs *r, void *data,
		   void *ctx)
{
	(void)rp;
	(void)r;
	(void)data;
	(void)ctx;
}

static void on_usr1(int sig)
{
	int saved = errno, err;

	(void)sig;
	if (__atomic_load_n(&sent, __ATOMIC_RELAXED) & 1) {
		PK_OPTS(pk_retprobe_opts, o, .addr = (void *)st_plain,
			.ret = ret_fn);
		struct pk_retprobe *rp = NULL;

		err = pk_retprobe_create(&o, &rp);
		if (!err)
			pk_retprobe_destroy(rp);
	} else {
		PK_OPTS(pk_probe_opts, o, .addr = (void *)st_ret);
		struct pk_probe *p = NULL;

		err = pk_probe_create(&o, &p);
		if (!err)
			pk_probe_destroy(p);
	}
	if (err == -EDEADLK)
		__atomic_add_fetch(&refused, 1, __ATOMIC_RELAXED);
	else if (!err)
		__atomic_add_fetch(&made, 1, __ATOMIC_RELAXED);
	else
		__atomic_add_fetch(&other, 1, __ATOMIC_RELAXED);
	errno = saved;
}

static void *signaller(void *arg)
{
	unsigned long last = 0;
	struct timespec idle_since;

	(void)arg;
	clock_gettime(CLOCK_MONOTONIC, &idle_since);
	while (!done) {
		struct timespec now, ts = { 0, 200000 };
		unsigned long p = __atomic_load_n(&progress, __ATOMIC_RELAXED);

		__atomic_add_fetch(&sent, 1, __ATOMIC_RELAXED);
		pthread_kill(main_thread, SIGUSR1);
		nanosleep(&ts, NULL);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (p != last) {
			last = p;
			idle_since = now;
		} else if (now.tv_sec - idle_since.tv_sec > 10) {
			fprintf(stderr, "test_probe_signal_api: no progress for "
				"10 s after %lu iterations: deadlock\n", p);
			_exit(1);
		}
	}
	return NULL;
}

int main(void)
{
	struct pk_probe *p;
	struct pk_retprobe *rp;
	struct timespec t0, now;
	pthread_t th;
	struct sigaction sa;

	PK_OPTS(pk_probe_opts, po, .addr = (void *)st_plain);
	PK_OPTS(pk_retprobe_opts, ro, .addr = (void *)st_ret, .ret = ret_fn);

	if (!ASSERT_OK(pk_probe_create(&po, &p), "create") ||
	    !ASSERT_OK(pk_retprobe_create(&ro, &rp), "retprobe create"))
		return t_exit();
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGUSR1, &sa, NULL);
	main_thread = pthread_self();
	if (pthread_create(&th, NULL, signaller, NULL))
		SKIP("pthread_create failed");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		int e1 = pk_probe_register(&p, 1);
		int e2 = pk_retprobe_register(&rp, 1);

		st_plain(1);
		st_ret(1);
		e1 |= pk_probe_unregister(&p, 1);
		e2 |= pk_retprobe_unregister(&rp, 1);
		if (!ASSERT_OK(e1, "probe register/unregister") ||
		    !ASSERT_OK(e2, "retprobe register/unregister"))
			break;
		__atomic_add_fetch(&progress, 1, __ATOMIC_RELAXED);
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while ((now.tv_sec - t0.tv_sec) * 1000000000L +
		 (now.tv_nsec - t0.tv_nsec) < 1500000000L ||
		 __atomic_load_n(&refused, __ATOMIC_RELAXED) < 10);
	done = 1;
	pthread_join(th, NULL);
	signal(SIGUSR1, SIG_IGN);
	printf("iterations %lu, signals %lu: refused %lu, created %lu, "
	       "other %lu\n", progress, sent, refused, made, other);
	ASSERT_GE(refused, 10, "handler calls refused inside the API");
	ASSERT_EQ(other, 0, "handler calls failing otherwise");
	pk_probe_destroy(p);
	pk_retprobe_destroy(rp);
	return t_exit();
}
