// SPDX-License-Identifier: MIT
/* test_fault_watch_fork.c - fork() while another thread writes a page-watched variable: the child's page is its own, frozen at the fork, and its watchpoint comes off (alias and PROBEKIT_WATCH_NOALIAS=1). */
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "probekit.h"
#include "harness.h"

static volatile uint64_t *var;
static volatile int stop;
static struct pk_watch *w;

static void on_hit(const struct pk_watch_hit *h, void *ctx)
{
	(void)h;
	(void)ctx;
}

static void *writer(void *arg)
{
	uint64_t n = 1;

	(void)arg;
	while (!stop)
		*var = n++;
	return NULL;
}

/* In the child: only this thread; the value must not move. */
static int child(void)
{
	uint64_t v = *var;

	usleep(2000);		/* the parent's writer goes on meanwhile */
	if (*var != v)
		return 2;	/* the page is still the parent's */
	if (pk_watch_remove(w))
		return 3;
	if (*var != v)
		return 4;
	*var = v + 1;
	return *var != v + 1 ? 5 : 0;
}

static void run(const char *mech)
{
	pthread_t t;
	int good, forks;
	uint64_t before;

	*var = 0;
	stop = 0;
	if (!ASSERT_OK(pk_watch_add((void *)var, 8, PK_WATCH_WRITE, on_hit,
				    NULL, &w), mech))
		return;
	pthread_create(&t, NULL, writer, NULL);
	good = t_fork_loop(child, t_now() + 0.5, 20, &forks);
	ASSERT_EQ(good, forks, mech);
	before = *var;
	for (int i = 0; i < 1000 && *var == before; i++)
		usleep(1000);
	ASSERT_TRUE(*var != before, "the parent's writer went on");
	stop = 1;
	pthread_join(t, NULL);
	ASSERT_OK(pk_watch_remove(w), "remove in the parent");
}

int main(void)
{
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		SKIP("mmap");
	var = p;
	alarm(60);
	setenv("PROBEKIT_WATCH", "page", 1);
	run("fork with an aliased page");
	setenv("PROBEKIT_WATCH_NOALIAS", "1", 1);
	run("fork with a page opened for steps");
	return t_exit();
}
