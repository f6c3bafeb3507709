// SPDX-License-Identifier: MIT
/* test_fault_watch.c - hardware watchpoints: hits with old and new values, on threads made before and after, removal, failure paths. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include "probekit.h"
#include "harness.h"

/*
 * A page of its own: with page protection, a thread touching other data of
 * the watched page (a barrier) while another writes the variable would
 * merge hits (probekit.h), and the counts below are exact.
 */
static volatile uint64_t target_page[512] __attribute__((aligned(4096)));
#define target target_page[0]
static volatile uint32_t other;
static volatile int hits, bad;
static volatile uint64_t last_old, last_new;

static void on_hit(const struct pk_watch_hit *h, void *ctx)
{
	if (ctx != &target || h->addr != (void *)&target || h->len != 8)
		bad++;
	last_old = h->old_value;
	last_new = h->new_value;
	__atomic_add_fetch(&hits, 1, __ATOMIC_RELAXED);
}

static pthread_barrier_t go, done;

/* A thread that exists before the watchpoint is added. */
static void *early(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&go);
	for (int i = 0; i < 100; i++)
		target = 1000 + i;
	pthread_barrier_wait(&done);
	return NULL;
}

static void *late(void *arg)
{
	(void)arg;
	for (int i = 0; i < 100; i++)
		target = 2000 + i;
	return NULL;
}

/* Two threads write at once: nothing crashes, hits are real writes. */
static volatile int race_stop;

static void *racer(void *arg)
{
	uint64_t base = (uint64_t)(uintptr_t)arg;

	for (uint64_t i = 0; i < 2000 && !race_stop; i++)
		target = base + i;
	return NULL;
}

static volatile int race_bad;

static void on_race(const struct pk_watch_hit *h, void *ctx)
{
	(void)ctx;
	if (h->new_value >= 2 * 100000 + 2000 || h->new_value < 100000)
		race_bad++;
	__atomic_add_fetch(&hits, 1, __ATOMIC_RELAXED);
}

static void test_race(void)
{
	struct pk_watch *w;
	pthread_t a, b;

	target = 100000;
	hits = 0;
	if (!ASSERT_OK(pk_watch_add((void *)&target, 8, PK_WATCH_WRITE,
				    on_race, NULL, &w), "watch for the race"))
		return;
	pthread_create(&a, NULL, racer, (void *)(uintptr_t)100000);
	pthread_create(&b, NULL, racer, (void *)(uintptr_t)200000);
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	ASSERT_OK(pk_watch_remove(w), "remove after the race");
	ASSERT_EQ(race_bad, 0, "every hit reports a value a thread wrote");
	ASSERT_LE(hits, 4000, "no more hits than writes");
	ASSERT_GE(hits, 1, "hits reported");
	printf("race: %d of 4000 writes reported\n", hits);
}

int main(void)
{
	struct pk_watch *w = NULL, *w2 = NULL;
	pthread_t t1, t2;
	int err;

	/* Failure paths first: nothing changes. */
	ASSERT_EQ(pk_watch_add(NULL, 8, PK_WATCH_WRITE, on_hit, NULL, &w),
		  -EINVAL, "NULL address");
	ASSERT_EQ(pk_watch_add((void *)&target, 3, PK_WATCH_WRITE, on_hit,
			       NULL, &w), -EINVAL, "length 3");
	ASSERT_EQ(pk_watch_add((char *)&target + 4, 8, PK_WATCH_WRITE, on_hit,
			       NULL, &w), -EINVAL, "unaligned");
	ASSERT_EQ(pk_watch_add((void *)&target, 8, 0, on_hit, NULL, &w),
		  -EINVAL, "no access kind");
	ASSERT_EQ(pk_watch_add((void *)&target, 8, PK_WATCH_WRITE, NULL, NULL,
			       &w), -EINVAL, "NULL handler");
	ASSERT_EQ(pk_watch_remove(NULL), -EINVAL, "remove NULL");
	ASSERT_EQ(pk_watch_remove((struct pk_watch *)&target), -EINVAL,
		  "remove a non-watchpoint");

	pthread_barrier_init(&go, NULL, 2);
	pthread_barrier_init(&done, NULL, 2);
	pthread_create(&t1, NULL, early, NULL);

	target = 5;
	err = pk_watch_add((void *)&target, 8, PK_WATCH_WRITE, on_hit,
			   (void *)&target, &w);
	if (err == -ENOTSUP || err == -EPERM) {
		pthread_barrier_wait(&go);
		pthread_barrier_wait(&done);
		pthread_join(t1, NULL);
		SKIP("no hardware watchpoints here (%d)", err);
	}
	if (!ASSERT_OK(err, "pk_watch_add"))
		return t_exit();

	target = 7;
	__asm__ volatile("" ::: "memory");
	ASSERT_EQ(hits, 1, "a write on this thread hits");
	ASSERT_EQ(last_old, 5, "old value");
	ASSERT_EQ(last_new, 7, "new value");
	(void)target;
	other = 1;
	ASSERT_EQ(hits, 1, "a read and a write elsewhere do not");

	pthread_barrier_wait(&go);
	pthread_barrier_wait(&done);
	pthread_join(t1, NULL);
	ASSERT_EQ(hits, 101, "a thread made before the watchpoint is watched");

	pthread_create(&t2, NULL, late, NULL);
	pthread_join(t2, NULL);
	ASSERT_EQ(hits, 201, "a thread made after it is watched");
	ASSERT_EQ(last_new, 2099, "its last write");
	ASSERT_EQ(bad, 0, "handler got its address, length and context");

	/* A second watchpoint on another variable, then remove the first. */
	ASSERT_OK(pk_watch_add((void *)&other, 4, PK_WATCH_WRITE, on_hit,
			       (void *)&other, &w2), "second watchpoint");
	other = 2;
	ASSERT_EQ(hits, 202, "second watchpoint hits");
	ASSERT_EQ(bad, 1, "with its own context");

	ASSERT_OK(pk_watch_remove(w), "remove");
	target = 9;
	ASSERT_EQ(hits, 202, "no hit after removal");
	ASSERT_EQ(pk_watch_remove(w), -ENOENT, "remove twice");
	ASSERT_OK(pk_watch_remove(w2), "remove second");
	other = 3;
	ASSERT_EQ(hits, 202, "none from the second either");

	struct pk_fault_stats st = { .sz = sizeof(st) };
	ASSERT_OK(pk_fault_stats(&st), "stats");
	ASSERT_EQ(st.watch_hits, 202, "stats.watch_hits");
	test_race();
	return t_exit();
}
