// SPDX-License-Identifier: MIT
/* test_probe_deadlk.c - probe and return probe API calls from inside their own handlers are refused with -EDEADLK, and change nothing. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "probekit.h"

/*
 * On main before the fix: the pre-handler's unregister returned 0 and
 * freed the trampoline the thread ran in (ASan: heap-use-after-free), and
 * the return handler's unregister waited for itself forever (the alarm
 * below ends it).
 */

T_NOINLINE long dt_plain(long a)
{
	volatile long x = a;

	return x * 3 + 1;
}

T_NOINLINE long dt_other(long a)
{
	volatile long x = a;

	return x + 7;
}

/* What a handler's API calls returned, and how often it ran. */
struct calls {
	int unreg, reg, create, destroyed;
	int hits;
};

static struct pk_probe *self_probe, *other_probe;
static struct pk_retprobe *self_rp, *other_rp;

static void self_pre(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	struct calls *c = ctx;
	struct pk_probe *np = NULL;

	PK_OPTS(pk_probe_opts, o, .addr = (void *)dt_other);

	(void)r;
	c->hits++;
	c->unreg = pk_probe_unregister(&p, 1);
	c->reg = pk_probe_register(&other_probe, 1);
	c->create = pk_probe_create(&o, &np);
	if (np)
		free(np);	/* never reached: create refused */
	pk_probe_destroy(p);	/* nothing done: still armed after */
	c->destroyed = 1;
}

static void check_probe(void)
{
	struct calls c = { 0 };
	struct pk_probe_info info = { .sz = sizeof(info) };

	PK_OPTS(pk_probe_opts, o, .addr = (void *)dt_plain, .pre = self_pre,
		.ctx = &c);
	PK_OPTS(pk_probe_opts, o2, .addr = (void *)dt_other);

	if (!ASSERT_OK(pk_probe_create(&o, &self_probe), "create") ||
	    !ASSERT_OK(pk_probe_create(&o2, &other_probe), "create other") ||
	    !ASSERT_OK(pk_probe_register(&self_probe, 1), "register"))
		return;
	ASSERT_EQ(dt_plain(2), 7, "probed call's value");
	ASSERT_EQ(c.hits, 1, "pre-handler ran");
	ASSERT_EQ(c.unreg, -EDEADLK, "unregister from its own pre-handler");
	ASSERT_EQ(c.reg, -EDEADLK, "register from a pre-handler");
	ASSERT_EQ(c.create, -EDEADLK, "create from a pre-handler");
	ASSERT_EQ(c.destroyed, 1, "destroy from a pre-handler returned");
	ASSERT_OK(pk_probe_get_info(self_probe, &info), "info");
	ASSERT_EQ(info.armed, 1, "still armed: nothing done");
	info.sz = sizeof(info);
	ASSERT_OK(pk_probe_get_info(other_probe, &info), "info other");
	ASSERT_EQ(info.armed, 0, "the other not armed by the handler");
	/* Still works: fires again, and unregisters from outside. */
	ASSERT_EQ(dt_plain(3), 10, "second call's value");
	ASSERT_EQ(c.hits, 2, "pre-handler ran again");
	ASSERT_OK(pk_probe_unregister(&self_probe, 1), "unregister outside");
	ASSERT_EQ(dt_plain(3), 10, "unprobed call");
	ASSERT_EQ(c.hits, 2, "no hit after unregister");
	pk_probe_destroy(self_probe);
	pk_probe_destroy(other_probe);
}

/* A post-handler (offset probe inside the function) does the same. */
static void self_post(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	struct calls *c = ctx;

	(void)r;
	c->hits++;
	c->unreg = pk_probe_unregister(&p, 1);
}

static void check_post(void)
{
	struct calls c = { 0 };
	struct pk_probe *p;

	PK_OPTS(pk_probe_opts, o, .addr = (void *)dt_plain, .post = self_post,
		.ctx = &c);

	if (!ASSERT_OK(pk_probe_create(&o, &p), "create post") ||
	    !ASSERT_OK(pk_probe_register(&p, 1), "register post"))
		return;
	ASSERT_EQ(dt_plain(2), 7, "value under post-handler");
	ASSERT_EQ(c.hits, 1, "post-handler ran");
	ASSERT_EQ(c.unreg, -EDEADLK, "unregister from its own post-handler");
	ASSERT_OK(pk_probe_unregister(&p, 1), "unregister outside");
	pk_probe_destroy(p);
}

static int rp_entry(struct pk_retprobe *rp, struct pk_regs *r, void *data,
		    void *ctx)
{
	struct calls *c = ctx;

	(void)r;
	(void)data;
	c->hits++;
	c->unreg = pk_retprobe_unregister(&rp, 1);
	c->reg = pk_retprobe_register(&other_rp, 1);
	pk_retprobe_destroy(rp);
	c->destroyed = 1;
	return 0;
}

static void rp_ret_quiet(struct pk_retprobe *rp, struct pk_regs *r, void *data,
			 void *ctx)
{
	(void)rp;
	(void)r;
	(void)data;
	(void)ctx;
}

static struct calls ret_calls;

static void rp_ret(struct pk_retprobe *rp, struct pk_regs *r, void *data,
		   void *ctx)
{
	struct calls *c = ctx;
	struct pk_retprobe *np = NULL;

	PK_OPTS(pk_retprobe_opts, o, .addr = (void *)dt_other,
		.ret = rp_ret_quiet);

	(void)r;
	(void)data;
	c->hits++;
	c->unreg = pk_retprobe_unregister(&rp, 1);
	c->reg = pk_retprobe_register(&other_rp, 1);
	c->create = pk_retprobe_create(&o, &np);
	if (np)
		free(np);	/* never reached: create refused */
	pk_retprobe_destroy(rp);
	c->destroyed = 1;
}

static void check_retprobe(void)
{
	struct calls c = { 0 };
	struct pk_retprobe_info info = { .sz = sizeof(info) };

	PK_OPTS(pk_retprobe_opts, o, .addr = (void *)dt_plain,
		.entry = rp_entry, .ret = rp_ret_quiet, .ctx = &c);
	PK_OPTS(pk_retprobe_opts, o2, .addr = (void *)dt_other,
		.ret = rp_ret_quiet);

	if (!ASSERT_OK(pk_retprobe_create(&o, &self_rp), "retprobe create") ||
	    !ASSERT_OK(pk_retprobe_create(&o2, &other_rp), "retprobe other") ||
	    !ASSERT_OK(pk_retprobe_register(&self_rp, 1), "retprobe register"))
		return;
	ASSERT_EQ(dt_plain(2), 7, "value under entry handler");
	ASSERT_EQ(c.hits, 1, "entry handler ran");
	ASSERT_EQ(c.unreg, -EDEADLK, "unregister from its own entry handler");
	ASSERT_EQ(c.reg, -EDEADLK, "register from an entry handler");
	ASSERT_EQ(c.destroyed, 1, "destroy from an entry handler returned");
	ASSERT_OK(pk_retprobe_get_info(self_rp, &info), "retprobe info");
	ASSERT_EQ(info.armed, 1, "still armed after the entry handler");
	ASSERT_OK(pk_retprobe_unregister(&self_rp, 1), "unregister outside");
	pk_retprobe_destroy(self_rp);

	/* The return handler. */
	o.entry = NULL;
	o.ret = rp_ret;
	o.ctx = &ret_calls;
	if (!ASSERT_OK(pk_retprobe_create(&o, &self_rp), "retprobe create 2") ||
	    !ASSERT_OK(pk_retprobe_register(&self_rp, 1), "retprobe register 2"))
		return;
	alarm(20);	/* main before the fix: the handler waits for itself */
	ASSERT_EQ(dt_plain(2), 7, "value under return handler");
	alarm(0);
	ASSERT_EQ(ret_calls.hits, 1, "return handler ran");
	ASSERT_EQ(ret_calls.unreg, -EDEADLK,
		  "unregister from its own return handler");
	ASSERT_EQ(ret_calls.reg, -EDEADLK, "register from a return handler");
	ASSERT_EQ(ret_calls.create, -EDEADLK, "create from a return handler");
	ASSERT_EQ(ret_calls.destroyed, 1, "destroy from a return handler returned");
	info.sz = sizeof(info);
	ASSERT_OK(pk_retprobe_get_info(self_rp, &info), "retprobe info 2");
	ASSERT_EQ(info.armed, 1, "still armed after the return handler");
	info.sz = sizeof(info);
	ASSERT_OK(pk_retprobe_get_info(other_rp, &info), "other info");
	ASSERT_EQ(info.armed, 0, "the other not armed by the handler");
	ASSERT_EQ(dt_plain(1), 4, "second call");
	ASSERT_EQ(ret_calls.hits, 2, "return handler ran again");
	ASSERT_OK(pk_retprobe_unregister(&self_rp, 1), "unregister outside 2");
	pk_retprobe_destroy(self_rp);
	pk_retprobe_destroy(other_rp);
}

static void on_alarm(int sig)
{
	static const char msg[] = "test_probe_deadlk: a handler's API call "
				  "hung (20 s)\n";
	ssize_t n = write(2, msg, sizeof(msg) - 1);

	(void)sig;
	(void)n;
	_exit(1);
}

int main(void)
{
	signal(SIGALRM, on_alarm);
	check_probe();
	check_post();
	check_retprobe();
	return t_exit();
}
