// SPDX-License-Identifier: MIT
/* test_chain_deadlk.c - register/unregister from inside a handler: -EDEADLK, not a deadlock; nesting. */
#include <errno.h>

#include "harness.h"
#include "probekit.h"

static PK_CHAIN_ATOMIC_DEFINE(s_atomic);
static PK_CHAIN_BLOCKING_DEFINE(s_blocking);
static PK_CHAIN_ATOMIC_DEFINE(s_other);

static struct pk_chain *const chains[] = { &s_atomic, &s_blocking };
static const char *const names[] = { "atomic", "blocking" };

static struct pk_chain *cur;		/* chain under test */
static struct pk_notifier extra;	/* registered from inside a handler */
static int r_self, r_other_unreg, r_reg_same, r_reg_other, calls;
static int nested_calls, nested_ret, nested_nr;

static int noop_fn(struct pk_notifier *nb, unsigned long action, void *data)
{
	(void)nb;
	(void)action;
	(void)data;
	nested_calls++;
	return PK_OK;
}

static struct pk_notifier other_nb = { .call = noop_fn };

static int self_fn(struct pk_notifier *nb, unsigned long action, void *data)
{
	(void)data;
	calls++;
	if (action == 1) {
		r_self = pk_chain_unregister(cur, nb);
		r_other_unreg = pk_chain_unregister(&s_other, &other_nb);
		r_reg_same = pk_chain_register(cur, &extra);
		r_reg_other = pk_chain_register(&s_other, &extra);
	} else if (action == 2) {
		/* Calling another chain from a handler is fine. */
		nested_ret = pk_chain_call(&s_other, 0, NULL, &nested_nr);
	}
	return PK_DONE;
}

int main(void)
{
	extra.call = noop_fn;
	ASSERT_OK(pk_chain_register(&s_other, &other_nb), "register other");

	for (int pass = 0; pass < 2; pass++) {
		if (pass == 1)
			ASSERT_OK(pk_thread_register(), "thread register");
		for (int i = 0; i < 2; i++) {
			struct pk_notifier self = { .call = self_fn };
			int nr;

			printf("[%s%s]\n", names[i], pass ? ", registered thread" : "");
			cur = chains[i];
			calls = 0;
			r_self = r_other_unreg = r_reg_same = r_reg_other = 1;
			ASSERT_OK(pk_chain_register(cur, &self), "register");
			pk_chain_call(cur, 1, NULL, &nr);
			ASSERT_EQ(calls, 1, "handler ran");
			ASSERT_EQ(r_self, -EDEADLK, "unregister self from handler");
			ASSERT_EQ(r_other_unreg, -EDEADLK, "unregister on another chain from handler");
			ASSERT_EQ(r_reg_same, -EDEADLK, "register on same chain from handler");
			ASSERT_EQ(r_reg_other, -EDEADLK, "register on another chain from handler");

			/* Nothing changed, and the chain still works. */
			pk_chain_call(cur, 0, NULL, &nr);
			ASSERT_EQ(nr, 1, "still one handler");
			ASSERT_EQ(calls, 2, "still called");
			nested_calls = 0;
			pk_chain_call(&s_other, 0, NULL, &nr);
			ASSERT_EQ(nr, 1, "other chain unchanged");

			/* Nested call into another chain. */
			nested_calls = 0;
			pk_chain_call(cur, 2, NULL, &nr);
			ASSERT_EQ(nested_calls, 1, "nested chain call ran");
			ASSERT_EQ(nested_nr, 1, "nested nr");
			ASSERT_EQ(nested_ret, PK_OK, "nested ret");

			/* Outside a call, the same operations work. */
			ASSERT_OK(pk_chain_unregister(cur, &self), "unregister outside");
			ASSERT_EQ(pk_chain_unregister(cur, &self), -ENOENT, "gone");
			ASSERT_FALSE(pk_key_enabled(&cur->key), "key off");
			ASSERT_OK(pk_chain_register(cur, &extra), "register outside");
			ASSERT_OK(pk_chain_unregister(cur, &extra), "unregister outside");
		}
	}
	ASSERT_OK(pk_chain_unregister(&s_other, &other_nb), "unregister other");
	return t_exit();
}
