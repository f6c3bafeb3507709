// SPDX-License-Identifier: MIT
/* test_chain_fork.c - fork while other threads call and change chains: the child's chains work. */
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probekit.h"
#include "harness.h"

static PK_CHAIN_ATOMIC_DEFINE(busy);
static PK_CHAIN_BLOCKING_DEFINE(churn);
static PK_CHAIN_ATOMIC_DEFINE(quiet);
static volatile int stop;

static int handler(struct pk_notifier *nb, unsigned long action, void *data)
{
	(void)nb;
	(void)data;
	return action == 7 ? PK_OK : PK_BAD;
}

static struct pk_notifier resident = { .call = handler, .priority = 0 };

/* Readers on the unregistered path: their counts are live at any fork. */
static void *reader(void *arg)
{
	(void)arg;
	while (!stop)
		pk_chain_call(&busy, 7, NULL, NULL);
	return NULL;
}

/* A writer: chain locks and key changes in progress at any fork. */
static void *writer(void *arg)
{
	struct pk_notifier nb = { .call = handler, .priority = 1 };

	(void)arg;
	while (!stop) {
		pk_chain_register(&churn, &nb);
		pk_chain_unregister(&churn, &nb);
	}
	return NULL;
}

/* The child: unregistering waits for readers, so stale counts would hang it. */
static int child(void)
{
	struct pk_notifier nb = { .call = handler, .priority = 2 };
	int nr = -1;

	alarm(10);	/* a hang is a failure, not a stuck test */
	if (pk_chain_unregister(&busy, &resident))
		return 2;
	/* churn may hold the parent writer's handler: it was mid-loop. */
	if (pk_chain_register(&churn, &nb) || pk_chain_unregister(&churn, &nb))
		return 3;
	if (pk_chain_register(&quiet, &nb) || pk_chain_call(&quiet, 7, NULL, &nr) != PK_OK ||
	    nr != 1 || pk_chain_unregister(&quiet, &nb))
		return 4;
	if (pk_chain_register(&busy, &resident) || pk_notify(&busy, 7, NULL) != PK_OK)
		return 5;
	return 0;
}

int main(void)
{
	pthread_t th[5];
	int forks = 0, good = 0;
	double until = t_now() + t_stress_seconds(1.0);

#ifdef __SANITIZE_ADDRESS__
	SKIP("GCC 12's AddressSanitizer allocator is not fork-safe while "
	     "another thread allocates");
#endif
	ASSERT_OK(pk_chain_register(&busy, &resident), "register");
	for (int i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, reader, NULL);
	pthread_create(&th[4], NULL, writer, NULL);
	good = t_fork_loop(child, until, 20, &forks);
	stop = 1;
	for (int i = 0; i < 5; i++)
		pthread_join(th[i], NULL);
	ASSERT_EQ(good, forks, "children whose chains worked");
	ASSERT_OK(pk_chain_unregister(&busy, &resident), "parent unregister");
	return t_exit();
}
