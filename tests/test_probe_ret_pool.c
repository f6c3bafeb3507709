// SPDX-License-Identifier: MIT
/* test_probe_ret_pool.c - return probe records of threads that ended by a raw SYS_exit inside a probed call are taken back; an empty pool is counted and logged once. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "harness.h"
#include "probekit.h"

/*
 * The default pool: 128 threads' blocks (PROBEKIT_RETPROBE_THREADS unset).
 * On main before the fix, after 200 threads that ended inside the probed
 * function by syscall(SYS_exit), 0 of 50 new threads' returns were seen,
 * nor the main thread's, and nothing said why.
 */
#define POOL 128
#define DEAD 200
#define NEW 50
#define SMALL (64 << 10)	/* stack size of the short-lived threads */

static unsigned long rets;		/* atomic */

T_NOINLINE long pt_fn(long a)
{
	volatile long x = a;

	if (x == 1)
		syscall(SYS_exit, 0);	/* no destructors, no unwinding */
	return x + 40;
}

static void on_ret(struct pk_retprobe *rp, struct pk_regs *r, void *data,
		   void *ctx)
{
	(void)rp;
	(void)data;
	(void)ctx;
	if (pk_regs_ret(r) == 42)
		__atomic_add_fetch(&rets, 1, __ATOMIC_RELAXED);
}

static int run(void *(*fn)(void *), size_t stack);

static void *raw_exit(void *arg)
{
	(void)arg;
	pt_fn(1);
	return NULL;	/* not reached */
}

static void *one_call(void *arg)
{
	(void)arg;
	pt_fn(2);
	return NULL;
}

static void *no_call(void *arg)
{
	return arg;
}

/* Holds its block until told to go. */
static pthread_mutex_t park_mx = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t park_cv = PTHREAD_COND_INITIALIZER;
static int park_go, parked;

static void *park(void *arg)
{
	(void)arg;
	pt_fn(2);
	pthread_mutex_lock(&park_mx);
	parked++;
	pthread_cond_broadcast(&park_cv);
	while (!park_go)
		pthread_cond_wait(&park_cv, &park_mx);
	pthread_mutex_unlock(&park_mx);
	return NULL;
}

static int dry_logs;

static void log_fn(enum pk_log_level level, const char *msg, void *ctx)
{
	(void)level;
	(void)ctx;
	if (strstr(msg, "ran dry"))
		dry_logs++;
	fprintf(stderr, "probekit: %s\n", msg);
}

/*
 * ASan keeps per-thread data under a pthread key too: a thread that reuses
 * the cached descriptor of one that ended by a raw SYS_exit trips its
 * check. Under ASan raw-exit threads run on stacks of their own, never
 * reused (so the stale key value below is not exercised there).
 */
#if defined(__SANITIZE_ADDRESS__)
#define T_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define T_ASAN 1
#endif
#endif

static int run_raw_exit(size_t stack)
{
#ifdef T_ASAN
	pthread_attr_t a;
	pthread_t th;
	void *mem = mmap(NULL, stack, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int err;

	if (mem == MAP_FAILED)
		return errno;
	pthread_attr_init(&a);
	pthread_attr_setstack(&a, mem, stack);
	err = pthread_create(&th, &a, raw_exit, NULL);
	pthread_attr_destroy(&a);
	if (!err)
		err = pthread_join(th, NULL);
	munmap(mem, stack);
	return err;
#else
	return run(raw_exit, stack);
#endif
}

static int run(void *(*fn)(void *), size_t stack)
{
	pthread_attr_t a;
	pthread_t th;
	int err;

	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, stack);
	err = pthread_create(&th, &a, fn, NULL);
	pthread_attr_destroy(&a);
	if (!err)
		err = pthread_join(th, NULL);
	return err;
}

int main(void)
{
	struct pk_retprobe_info info = { .sz = sizeof(info) };
	pthread_t parkers[POOL];
	struct pk_retprobe *rp;
	unsigned long before;
	int n = 0;

	PK_OPTS(pk_retprobe_opts, o, .addr = (void *)pt_fn, .ret = on_ret);

	unsetenv("PROBEKIT_RETPROBE_THREADS");
	pk_set_log(log_fn, NULL);
	if (!ASSERT_OK(pk_retprobe_create(&o, &rp), "create") ||
	    !ASSERT_OK(pk_retprobe_register(&rp, 1), "register"))
		return t_exit();

	/* Threads that end inside the probed call, by a raw SYS_exit. */
	for (int i = 0; i < DEAD; i++)
		if (!ASSERT_OK(run_raw_exit(SMALL), "raw-exit thread"))
			return t_exit();
	for (int i = 0; i < NEW; i++)
		ASSERT_OK(run(one_call, SMALL), "new thread");
	ASSERT_EQ(__atomic_load_n(&rets, __ATOMIC_RELAXED), NEW,
		  "new threads' returns seen after the raw exits");
	before = rets;
	ASSERT_EQ(pt_fn(2), 42, "main thread's call");
	ASSERT_EQ(rets - before, 1, "main thread's return seen");
	ASSERT_OK(pk_retprobe_get_info(rp, &info), "info");
	ASSERT_EQ(info.pool_empty, 0, "no call found the pool empty");
	ASSERT_EQ(dry_logs, 0, "nothing logged yet");

	/*
	 * Every block held by a live thread (main holds one): counted, logged.
	 * One more raw exit first; the parked threads' stacks are larger, so
	 * glibc does not hand them its thread descriptor.
	 */
	ASSERT_OK(run_raw_exit(SMALL), "raw-exit thread");
	for (; n < POOL - 1; n++) {
		pthread_attr_t a;

		pthread_attr_init(&a);
		pthread_attr_setstacksize(&a, 1 << 20);
		if (pthread_create(&parkers[n], &a, park, NULL)) {
			pthread_attr_destroy(&a);
			break;
		}
		pthread_attr_destroy(&a);
	}
	pthread_mutex_lock(&park_mx);
	while (parked < n)
		pthread_cond_wait(&park_cv, &park_mx);
	pthread_mutex_unlock(&park_mx);
	/*
	 * A thread without a probed call. glibc reused for it the descriptor
	 * of the raw-exited thread above, whose key value (its block) it did
	 * not clear, so at exit it runs that thread's key destructor with the
	 * block a parked thread has taken over since: it must not free it.
	 */
	ASSERT_OK(run(no_call, SMALL), "thread without a probed call");
	if (n == POOL - 1) {
		before = rets;
		for (int i = 0; i < 3; i++)
			ASSERT_OK(run(one_call, SMALL), "thread past the pool");
		ASSERT_EQ(rets - before, 0, "no block: returns not probed");
		info.sz = sizeof(info);
		ASSERT_OK(pk_retprobe_get_info(rp, &info), "info 2");
		ASSERT_EQ(info.pool_empty, 3, "pool-empty misses counted");
		ASSERT_GE(info.missed, 3, "and counted as missed");
		/* Said once, at the next API call (off the hit path). */
		ASSERT_OK(pk_retprobe_unregister(&rp, 1), "unregister");
		ASSERT_OK(pk_retprobe_register(&rp, 1), "register again");
		ASSERT_OK(run(one_call, SMALL), "another past the pool");
		ASSERT_OK(pk_retprobe_unregister(&rp, 1), "unregister 2");
		ASSERT_EQ(dry_logs, 1, "the empty pool logged once");
	} else {
		printf("only %d parked threads: exhaustion part skipped\n", n);
		ASSERT_OK(pk_retprobe_unregister(&rp, 1), "unregister");
	}
	pthread_mutex_lock(&park_mx);
	park_go = 1;
	pthread_cond_broadcast(&park_cv);
	pthread_mutex_unlock(&park_mx);
	for (int i = 0; i < n; i++)
		pthread_join(parkers[i], NULL);
	pk_retprobe_destroy(rp);
	pk_set_log(NULL, NULL);
	return t_exit();
}
