// SPDX-License-Identifier: MIT
/* stress_chain.c - 64 threads and signal handlers call an atomic chain while a writer registers, unregisters and frees handlers. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <unistd.h>

#include "harness.h"
#include "probekit.h"

/*
 * The writer frees every handler right after pk_chain_unregister() returns,
 * first writing DEAD into it. A reader that still reached it afterwards
 * counts an anomaly (and, under AddressSanitizer, is a reported
 * use-after-free). Readers also check that each call saw handlers in
 * priority order and that nr_calls matches the handlers that ran.
 */

#define NREADERS 64
#define MAXLIVE 6
#define ALIVE 0xa11fe5a1u
#define DEAD 0xdeaddeadu

static PK_CHAIN_ATOMIC_DEFINE(chain);

struct handler {
	struct pk_notifier nb;
	_Atomic unsigned int magic;
};

struct call_ctx {
	int last_prio;
	int n;
};

static atomic_int stop;
static pthread_barrier_t start;	/* every thread begins together */
static atomic_long anomalies, order_bad, count_bad, reader_calls, sig_calls;
static atomic_long writer_ops, writer_unregs;

static int handler_fn(struct pk_notifier *nb, unsigned long action, void *data)
{
	struct handler *h = (struct handler *)((char *)nb - offsetof(struct handler, nb));
	struct call_ctx *ctx = data;

	(void)action;
	if (atomic_load_explicit(&h->magic, memory_order_relaxed) != ALIVE)
		atomic_fetch_add(&anomalies, 1);
	if (ctx) {
		if (nb->priority > ctx->last_prio)
			atomic_fetch_add(&order_bad, 1);
		ctx->last_prio = nb->priority;
		ctx->n++;
	}
	return PK_DONE;
}

static unsigned int xorshift(unsigned int *s)
{
	unsigned int x = *s;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return *s = x;
}

/* One checked call; @use_notify picks pk_notify() or pk_chain_call(). */
static void one_call(int use_notify)
{
	struct call_ctx ctx = { INT_MAX, 0 };
	int nr = -1;

	if (use_notify) {
		pk_notify(&chain, 0, &ctx);
		return;
	}
	pk_chain_call(&chain, 0, &ctx, &nr);
	if (nr != ctx.n || nr > MAXLIVE)
		atomic_fetch_add(&count_bad, 1);
}

static void *reader(void *arg)
{
	long i = (long)arg, n = 0;

	if (i % 2)
		pk_thread_register();
	pthread_barrier_wait(&start);
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		one_call(n & 1);
		n++;
	}
	atomic_fetch_add(&reader_calls, n);
	return NULL;
}

static void *writer(void *arg)
{
	struct handler *live[MAXLIVE];
	unsigned int seed = 0x12345u;
	int nlive = 0;
	double end;

	pthread_barrier_wait(&start);
	end = *(double *)arg;
	while (t_now() < end) {
		unsigned int r = xorshift(&seed);

		if (nlive == 0 || (nlive < MAXLIVE && (r & 1))) {
			struct handler *h = malloc(sizeof(*h));
			int ret;

			if (!h)
				break;
			memset(h, 0, sizeof(*h));
			h->nb.call = handler_fn;
			h->nb.priority = (int)(r >> 8) % 4;
			atomic_store(&h->magic, ALIVE);
			ret = pk_chain_register(&chain, &h->nb);
			if (!ASSERT_OK(ret, "register")) {
				free(h);
				break;
			}
			live[nlive++] = h;
			ASSERT_EQ(pk_chain_register(&chain, &h->nb), -EEXIST, "register twice");
		} else {
			int k = (int)((r >> 8) % (unsigned int)nlive);
			struct handler *h = live[k];

			if (!ASSERT_OK(pk_chain_unregister(&chain, &h->nb), "unregister"))
				break;
			atomic_store(&h->magic, DEAD);
			free(h);
			live[k] = live[--nlive];
			atomic_fetch_add(&writer_unregs, 1);
		}
		atomic_fetch_add(&writer_ops, 1);
	}
	while (nlive > 0) {
		struct handler *h = live[--nlive];

		ASSERT_OK(pk_chain_unregister(&chain, &h->nb), "final unregister");
		atomic_store(&h->magic, DEAD);
		free(h);
	}
	return NULL;
}

/* Signal-handler readers: the handler walks the chain, possibly nested in a call. */
static void on_usr1(int sig)
{
	int saved = errno;

	(void)sig;
	one_call(0);
	atomic_fetch_add(&sig_calls, 1);
	errno = saved;
}

static void *sig_target(void *arg)
{
	long n = 0;

	if ((long)arg)
		pk_thread_register();
	pthread_barrier_wait(&start);
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		one_call(n & 1);	/* signals land inside calls, too */
		n++;
	}
	atomic_fetch_add(&reader_calls, n);
	return NULL;
}

int main(void)
{
	double secs = t_stress_seconds(3.0);
	double end = 0;
	pthread_t readers[NREADERS], targets[2], w;
	struct sigaction sa;
	long kills = 0;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL))
		SKIP("sigaction failed");

	/*
	 * The writer first: a thread created after 66 spinning ones may wait
	 * seconds for a CPU. All start together at the barrier.
	 */
	pthread_barrier_init(&start, NULL, NREADERS + 2 + 1 + 1);
	if (pthread_create(&w, NULL, writer, &end))
		SKIP("cannot create threads");
	for (long i = 0; i < NREADERS; i++)
		if (pthread_create(&readers[i], NULL, reader, (void *)i))
			SKIP("cannot create %d threads", NREADERS);
	for (long i = 0; i < 2; i++)
		if (pthread_create(&targets[i], NULL, sig_target, (void *)i))
			SKIP("cannot create threads");
	end = t_now() + secs;
	pthread_barrier_wait(&start);

	/* This thread is the signaller: both targets, every 50 us or so. */
	while (t_now() < end) {
		struct timespec ts = { 0, 50000 };

		pthread_kill(targets[kills & 1], SIGUSR1);
		kills++;
		nanosleep(&ts, NULL);
	}

	pthread_join(w, NULL);
	atomic_store(&stop, 1);
	for (int i = 0; i < NREADERS; i++)
		pthread_join(readers[i], NULL);
	for (int i = 0; i < 2; i++)
		pthread_join(targets[i], NULL);

	printf("%.1f s: writer ops %ld (unregisters %ld), reader calls %ld, "
	       "signals sent %ld, signal-handler calls %ld\n", secs,
	       (long)writer_ops, (long)writer_unregs, (long)reader_calls, kills,
	       (long)sig_calls);
	ASSERT_EQ(anomalies, 0, "handler called after unregister returned");
	ASSERT_EQ(order_bad, 0, "priority order broken within a call");
	ASSERT_EQ(count_bad, 0, "nr_calls disagrees with handlers run");
	/*
	 * Each unregister waits for every reader preempted inside a call to run
	 * again: with 66 spinning threads on 2 cores that is a few hundred ms.
	 * A writer starved by busy readers would finish none.
	 */
	ASSERT_GE(writer_unregs, secs >= 2 ? 2 : 1, "unregister completes under 64 busy readers");
	ASSERT_GE(reader_calls, NREADERS, "readers ran");
	ASSERT_GE(sig_calls, 1, "signal handlers called the chain");
	ASSERT_FALSE(pk_key_enabled(&chain.key), "key off at the end");
	{
		int nr = -1;

		ASSERT_EQ(pk_chain_call(&chain, 0, NULL, &nr), PK_DONE, "empty at the end");
		ASSERT_EQ(nr, 0, "no handler left");
	}
	return t_exit();
}
