// SPDX-License-Identifier: MIT
/* test_chain_basic.c - notifier chain semantics: order, results, counts, errors, keys; atomic and blocking. */
#include <errno.h>
#include <stdlib.h>

#include "harness.h"
#include "probekit.h"

/* ABI: changing these sizes is a deliberate act (update this test with it). */
_Static_assert(sizeof(struct pk_notifier) == 40, "struct pk_notifier ABI");
_Static_assert(sizeof(struct pk_chain) == 136, "struct pk_chain ABI");
_Static_assert(sizeof(struct pk_key) == 24, "struct pk_key ABI");

/* A handler that records its id into the trace passed as data. */
struct rec {
	struct pk_notifier nb;
	int id;
	int ret;		/* what to return */
	int calls;
};

struct trace {
	int ids[64];
	int n;
	unsigned long action;
};

static int rec_fn(struct pk_notifier *nb, unsigned long action, void *data)
{
	struct rec *r = (struct rec *)((char *)nb - offsetof(struct rec, nb));
	struct trace *t = data;

	r->calls++;
	if (t) {
		if (t->n < 64)
			t->ids[t->n++] = r->id;
		t->action = action;
	}
	return r->ret;
}

static void rec_init(struct rec *r, int id, int prio, int ret)
{
	memset(r, 0, sizeof(*r));
	r->nb.call = rec_fn;
	r->nb.priority = prio;
	r->id = id;
	r->ret = ret;
}

/* Static chains: pk_notify() needs a chain with a constant address. */
static PK_CHAIN_ATOMIC_DEFINE(s_atomic);
static PK_CHAIN_BLOCKING_DEFINE(s_blocking);

static const struct cfg {
	const char *name;
	struct pk_chain *c;
	enum pk_chain_type type;
} cfgs[] = {
	{ "atomic", &s_atomic, PK_CHAIN_ATOMIC },
	{ "blocking", &s_blocking, PK_CHAIN_BLOCKING },
};

static int notify_static(const struct cfg *cfg, unsigned long action,
			 void *data)
{
	/* One pk_notify() site per static chain. */
	if (cfg->c == &s_atomic)
		return pk_notify(&s_atomic, action, data);
	return pk_notify(&s_blocking, action, data);
}

static void test_order(const struct cfg *cfg)
{
	struct pk_chain *c = cfg->c;
	/* id: priority; equal priorities keep registration order. */
	static const int prio[] = { 0, 10, -5, 10, 0, 100, -5, 10 };
	static const int want[] = { 5, 1, 3, 7, 0, 4, 2, 6 };
	struct rec r[8];
	struct trace t = { 0 };
	int nr = -1, ret;

	printf("[%s] order\n", cfg->name);
	for (int i = 0; i < 8; i++) {
		rec_init(&r[i], i, prio[i], PK_DONE);
		ASSERT_OK(pk_chain_register(c, &r[i].nb), "register");
	}
	ret = pk_chain_call(c, 42, &t, &nr);
	ASSERT_EQ(ret, PK_DONE, "all DONE");
	ASSERT_EQ(nr, 8, "nr_calls");
	ASSERT_EQ(t.n, 8, "trace length");
	ASSERT_EQ(t.action, 42, "action passed");
	for (int i = 0; i < 8 && i < t.n; i++)
		ASSERT_EQ(t.ids[i], want[i], "priority order, stable");

	/* Remove from the middle, the head and the tail; order holds. */
	ASSERT_OK(pk_chain_unregister(c, &r[3].nb), "unregister middle");
	ASSERT_OK(pk_chain_unregister(c, &r[5].nb), "unregister head");
	ASSERT_OK(pk_chain_unregister(c, &r[6].nb), "unregister tail");
	memset(&t, 0, sizeof(t));
	pk_chain_call(c, 0, &t, &nr);
	{
		static const int want2[] = { 1, 7, 0, 4, 2 };

		ASSERT_EQ(nr, 5, "nr_calls after removal");
		for (int i = 0; i < 5 && i < t.n; i++)
			ASSERT_EQ(t.ids[i], want2[i], "order after removal");
	}
	/* A removed handler re-registers at its priority's end. */
	ASSERT_OK(pk_chain_register(c, &r[3].nb), "re-register");
	memset(&t, 0, sizeof(t));
	pk_chain_call(c, 0, &t, NULL);
	{
		static const int want3[] = { 1, 7, 3, 0, 4, 2 };

		ASSERT_EQ(t.n, 6, "count after re-register");
		for (int i = 0; i < 6 && i < t.n; i++)
			ASSERT_EQ(t.ids[i], want3[i], "re-registered last among equals");
	}
	for (int i = 0; i < 8; i++)
		if (i != 5 && i != 6)
			ASSERT_OK(pk_chain_unregister(c, &r[i].nb), "cleanup");
	ASSERT_FALSE(pk_key_enabled(&c->key), "key off when empty");
}

static void test_results(const struct cfg *cfg)
{
	struct pk_chain *c = cfg->c;
	struct rec a, b, d;
	struct trace t = { 0 };
	int nr = -1, ret;

	printf("[%s] results\n", cfg->name);
	rec_init(&a, 1, 3, PK_OK);
	rec_init(&b, 2, 2, PK_DONE);
	rec_init(&d, 3, 1, PK_OK);
	ASSERT_OK(pk_chain_register(c, &a.nb), "register a");
	ASSERT_OK(pk_chain_register(c, &b.nb), "register b");
	ASSERT_OK(pk_chain_register(c, &d.nb), "register d");

	/* The last handler's value is returned, not an aggregate. */
	ret = pk_chain_call(c, 0, &t, &nr);
	ASSERT_EQ(ret, PK_OK, "last value (d: OK)");
	ASSERT_EQ(nr, 3, "all three ran");
	d.ret = PK_DONE;
	a.ret = PK_OK;
	ret = pk_chain_call(c, 0, NULL, &nr);
	ASSERT_EQ(ret, PK_DONE, "last value (d: DONE) though a said OK");

	/* STOP stops the walk and is returned as is. */
	b.ret = PK_STOP;
	memset(&t, 0, sizeof(t));
	ret = pk_chain_call(c, 0, &t, &nr);
	ASSERT_EQ(ret, PK_STOP, "STOP returned");
	ASSERT_EQ(nr, 2, "walk stopped after b");
	ASSERT_EQ(t.n, 2, "d not called");

	/* BAD has the stop mask too. */
	b.ret = PK_BAD;
	ret = pk_chain_call(c, 0, NULL, &nr);
	ASSERT_EQ(ret, PK_BAD, "BAD returned");
	ASSERT_EQ(nr, 2, "BAD stops");

	/* Any value with PK_STOP_MASK stops; errno-coded values too. */
	b.ret = pk_notifier_from_errno(-EIO);
	ret = pk_chain_call(c, 0, NULL, &nr);
	ASSERT_EQ(nr, 2, "errno result stops");
	ASSERT_EQ(pk_notifier_to_errno(ret), -EIO, "errno carried through");

	/* The first handler stopping: one call. */
	a.ret = PK_STOP;
	ret = pk_chain_call(c, 0, NULL, &nr);
	ASSERT_EQ(nr, 1, "stop at first");
	ASSERT_EQ(ret, PK_STOP, "first's value");

	/* A value without the mask does not stop. */
	a.ret = 0x7ff0;
	b.ret = PK_OK;
	d.ret = 0x1234;
	ret = pk_chain_call(c, 0, NULL, &nr);
	ASSERT_EQ(nr, 3, "no mask, no stop");
	ASSERT_EQ(ret, 0x1234, "arbitrary last value");

	ASSERT_OK(pk_chain_unregister(c, &a.nb), "unregister a");
	ASSERT_OK(pk_chain_unregister(c, &b.nb), "unregister b");
	ASSERT_OK(pk_chain_unregister(c, &d.nb), "unregister d");
	nr = -1;
	ret = pk_chain_call(c, 0, NULL, &nr);
	ASSERT_EQ(ret, PK_DONE, "empty chain: DONE");
	ASSERT_EQ(nr, 0, "empty chain: nr 0");
}

static void test_notify_and_key(const struct cfg *cfg)
{
	struct pk_chain *c = cfg->c;
	struct rec a;
	struct trace t = { 0 };

	printf("[%s] pk_notify and key\n", cfg->name);
	rec_init(&a, 1, 0, PK_OK);
	ASSERT_FALSE(pk_key_enabled(&c->key), "empty: key off");
	ASSERT_EQ(notify_static(cfg, 1, &t), PK_DONE, "empty: DONE");
	ASSERT_EQ(a.calls, 0, "empty: nothing called");

	ASSERT_OK(pk_chain_register(c, &a.nb), "register");
	ASSERT_TRUE(pk_key_enabled(&c->key), "non-empty: key on");
	ASSERT_EQ(notify_static(cfg, 7, &t), PK_OK, "notify returns OK");
	ASSERT_EQ(a.calls, 1, "handler called once");
	ASSERT_EQ(t.action, 7, "action");

	ASSERT_OK(pk_chain_unregister(c, &a.nb), "unregister");
	ASSERT_FALSE(pk_key_enabled(&c->key), "empty again: key off");
	ASSERT_EQ(notify_static(cfg, 1, &t), PK_DONE, "empty again: DONE");
	ASSERT_EQ(a.calls, 1, "not called after unregister");

	/* Key tracks emptiness through several handlers. */
	{
		struct rec r[3];

		for (int i = 0; i < 3; i++) {
			rec_init(&r[i], i, i, PK_DONE);
			ASSERT_OK(pk_chain_register(c, &r[i].nb), "register n");
		}
		for (int i = 0; i < 3; i++) {
			ASSERT_TRUE(pk_key_enabled(&c->key), "key on while any");
			ASSERT_OK(pk_chain_unregister(c, &r[i].nb), "unregister n");
		}
		ASSERT_FALSE(pk_key_enabled(&c->key), "key off after last");
	}
}

static void test_errors(const struct cfg *cfg)
{
	struct pk_chain *c = cfg->c;
	struct rec a, b;
	struct pk_notifier nocall = { 0 };

	printf("[%s] errors\n", cfg->name);
	rec_init(&a, 1, 0, PK_DONE);
	rec_init(&b, 2, 0, PK_DONE);

	ASSERT_EQ(pk_chain_register(NULL, &a.nb), -EINVAL, "register NULL chain");
	ASSERT_EQ(pk_chain_register(c, NULL), -EINVAL, "register NULL nb");
	ASSERT_EQ(pk_chain_register(c, &nocall), -EINVAL, "register nb->call NULL");
	ASSERT_EQ(pk_chain_unregister(NULL, &a.nb), -EINVAL, "unregister NULL chain");
	ASSERT_EQ(pk_chain_unregister(c, NULL), -EINVAL, "unregister NULL nb");
	ASSERT_EQ(pk_chain_unregister(c, &a.nb), -ENOENT, "unregister unknown (empty)");

	ASSERT_OK(pk_chain_register(c, &a.nb), "register");
	ASSERT_EQ(pk_chain_register(c, &a.nb), -EEXIST, "register twice");
	a.nb.priority = 99; /* still the same block */
	ASSERT_EQ(pk_chain_register(c, &a.nb), -EEXIST, "register twice, new prio");
	a.nb.priority = 0;
	ASSERT_EQ(pk_chain_unregister(c, &b.nb), -ENOENT, "unregister unknown");
	{
		int nr;

		pk_chain_call(c, 0, NULL, &nr);
		ASSERT_EQ(nr, 1, "failed register added nothing");
	}
	ASSERT_OK(pk_chain_unregister(c, &a.nb), "unregister");
	ASSERT_EQ(pk_chain_unregister(c, &a.nb), -ENOENT, "unregister twice");
	ASSERT_FALSE(pk_key_enabled(&c->key), "key off");
	ASSERT_EQ(errno, 0, "errno never written");
}

static void test_dynamic(const struct cfg *cfg)
{
	struct pk_chain *c = malloc(sizeof(*c));
	struct rec a, b;
	int nr = -1;

	printf("[%s] dynamic chain\n", cfg->name);
	if (!c) {
		ASSERT_TRUE(0, "malloc");
		return;
	}
	memset(c, 0xa5, sizeof(*c)); /* pk_chain_init must set every field */
	ASSERT_OK(pk_chain_init(c, cfg->type), "init");
	ASSERT_EQ(c->type, cfg->type, "type");
	ASSERT_FALSE(pk_key_enabled(&c->key), "key off");
	ASSERT_EQ(pk_chain_call(c, 0, NULL, &nr), PK_DONE, "empty call");
	ASSERT_EQ(nr, 0, "no calls");
	rec_init(&a, 1, 1, PK_OK);
	rec_init(&b, 2, 2, PK_DONE);
	ASSERT_OK(pk_chain_register(c, &a.nb), "register a");
	ASSERT_OK(pk_chain_register(c, &b.nb), "register b");
	ASSERT_TRUE(pk_key_enabled(&c->key), "key on");
	ASSERT_EQ(pk_chain_call(c, 0, NULL, &nr), PK_OK, "a is last");
	ASSERT_EQ(nr, 2, "two calls");
	ASSERT_OK(pk_chain_unregister(c, &b.nb), "unregister b");
	ASSERT_OK(pk_chain_unregister(c, &a.nb), "unregister a");
	ASSERT_FALSE(pk_key_enabled(&c->key), "key off");
	free(c);
}

int main(void)
{
	struct pk_chain c;

	errno = 0;
	ASSERT_EQ(pk_chain_init(NULL, PK_CHAIN_ATOMIC), -EINVAL, "init NULL");
	ASSERT_EQ(pk_chain_init(&c, (enum pk_chain_type)0), -EINVAL, "init type 0");
	ASSERT_EQ(pk_chain_init(&c, (enum pk_chain_type)3), -EINVAL, "init type 3");
	ASSERT_EQ(pk_chain_call(NULL, 0, NULL, NULL), PK_DONE, "call NULL chain");
	{
		/* A zeroed chain has no valid type: writers refuse it. */
		struct pk_chain z;
		struct rec a;

		memset(&z, 0, sizeof(z));
		rec_init(&a, 1, 0, PK_DONE);
		ASSERT_EQ(pk_chain_register(&z, &a.nb), -EINVAL, "register on zeroed chain");
	}

	/* The errno <-> result helpers round-trip. */
	for (int e = 1; e < 4096; e++) {
		int r = pk_notifier_from_errno(-e);

		if (!ASSERT_TRUE(r & PK_STOP_MASK, "from_errno stops"))
			break;
		if (!ASSERT_EQ(pk_notifier_to_errno(r), -e, "round trip"))
			break;
	}
	ASSERT_EQ(pk_notifier_from_errno(0), PK_OK, "from_errno(0)");
	ASSERT_EQ(pk_notifier_to_errno(PK_OK), 0, "to_errno(OK)");
	ASSERT_EQ(pk_notifier_to_errno(PK_DONE), 0, "to_errno(DONE)");
	ASSERT_EQ(pk_notifier_to_errno(PK_STOP), 0, "to_errno(STOP)");
	ASSERT_EQ(pk_notifier_to_errno(PK_BAD), -1, "to_errno(BAD) = -EPERM");

	for (size_t i = 0; i < sizeof(cfgs) / sizeof(cfgs[0]); i++) {
		errno = 0;
		test_order(&cfgs[i]);
		test_results(&cfgs[i]);
		test_notify_and_key(&cfgs[i]);
		test_errors(&cfgs[i]);
		test_dynamic(&cfgs[i]);
	}

	/* The same again on a registered thread (atomic chains' fast path). */
	ASSERT_OK(pk_thread_register(), "pk_thread_register");
	ASSERT_OK(pk_thread_register(), "pk_thread_register twice");
	for (size_t i = 0; i < sizeof(cfgs) / sizeof(cfgs[0]); i++) {
		test_order(&cfgs[i]);
		test_results(&cfgs[i]);
		test_notify_and_key(&cfgs[i]);
	}
	return t_exit();
}
