// SPDX-License-Identifier: MIT
/* test_chain_signal.c - an atomic chain called from a signal handler on a thread that never called probekit. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>

#include "harness.h"
#include "probekit.h"

static PK_CHAIN_ATOMIC_DEFINE(s_chain);

static volatile sig_atomic_t h_calls, sig_ret, sig_nr, sig_ret2;

static int count_fn(struct pk_notifier *nb, unsigned long action, void *data)
{
	(void)nb;
	(void)data;
	h_calls++;
	return action == 5 ? PK_STOP : PK_OK;
}

static struct pk_notifier nb_hi = { .call = count_fn, .priority = 10 };
static struct pk_notifier nb_lo = { .call = count_fn, .priority = 0 };

static void on_usr1(int sig)
{
	int nr = -1;

	(void)sig;
	sig_ret = pk_chain_call(&s_chain, 5, NULL, &nr);
	sig_nr = nr;
	sig_ret2 = pk_notify(&s_chain, 1, NULL);
}

/*
 * urcu-bp's per-thread reader pointer, read through dlsym (which resolves a
 * TLS symbol for the calling thread): NULL means urcu-bp never registered
 * this thread. A chain call must never register a thread lazily.
 */
static void **urcu_reader_slot(void)
{
	return dlsym(RTLD_DEFAULT, "urcu_bp_reader");
}

struct result {
	int registered;
	void *urcu_before, *urcu_after;
	int have_slot;
};

static void *thread_fn(void *arg)
{
	struct result *res = arg;
	void **slot;

	if (res->registered)
		pk_thread_register();
	slot = urcu_reader_slot();
	res->have_slot = slot != NULL;
	res->urcu_before = slot ? *slot : NULL;
	raise(SIGUSR1);
	res->urcu_after = slot ? *slot : NULL;
	return NULL;
}

int main(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL))
		SKIP("sigaction failed");

	ASSERT_OK(pk_chain_register(&s_chain, &nb_hi), "register hi");
	ASSERT_OK(pk_chain_register(&s_chain, &nb_lo), "register lo");

	for (int registered = 0; registered < 2; registered++) {
		struct result res = { .registered = registered };
		pthread_t t;

		printf("[%s thread]\n", registered ? "registered" : "fresh");
		h_calls = 0;
		sig_ret = sig_nr = sig_ret2 = -1;
		ASSERT_OK(pthread_create(&t, NULL, thread_fn, &res), "pthread_create");
		ASSERT_OK(pthread_join(t, NULL), "pthread_join");
		ASSERT_EQ(sig_ret, PK_STOP, "chain call from handler: STOP");
		ASSERT_EQ(sig_nr, 1, "stopped after the first");
		ASSERT_EQ(sig_ret2, PK_OK, "pk_notify from handler: OK");
		ASSERT_EQ(h_calls, 3, "handlers called");
		if (!res.have_slot) {
			printf("note: urcu_bp_reader not found by dlsym; registration not checked\n");
			continue;
		}
		if (registered) {
			ASSERT_TRUE(res.urcu_before != NULL, "registered thread known to urcu-bp");
		} else {
			ASSERT_TRUE(res.urcu_before == NULL, "fresh thread unknown to urcu-bp");
			ASSERT_TRUE(res.urcu_after == NULL,
				    "chain call in a signal handler did not register the thread");
		}
	}

	ASSERT_OK(pk_chain_unregister(&s_chain, &nb_hi), "unregister hi");
	ASSERT_OK(pk_chain_unregister(&s_chain, &nb_lo), "unregister lo");
	h_calls = 0;
	raise(SIGUSR1); /* main thread, empty chain */
	ASSERT_EQ(h_calls, 0, "empty chain from handler: nothing called");
	ASSERT_EQ(sig_ret, PK_DONE, "empty chain: DONE");
	ASSERT_EQ(sig_ret2, PK_DONE, "empty notify: DONE");
	return t_exit();
}
