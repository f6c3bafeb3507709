// SPDX-License-Identifier: MIT
/* test_probe_fail.c - a probe batch (jump, int3, post) and a return probe whose commit fails halfway change nothing; the next one works. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "probe_target.h"
#include "probekit.h"

static int hits;
static volatile int stop;
static unsigned long wrong;

static void count(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p, (void)r, (void)ctx;
	__atomic_add_fetch(&hits, 1, __ATOMIC_RELAXED);
}

/* Callers run through the sites while the failed commit rolls back. */
static void *caller(void *arg)
{
	(void)arg;
	while (!stop)
		if (pt_asm_jcc(3) != 4 || pt_asm_rip(1) != 101 ||
		    pt_sum6(1, 1, 1, 1, 1, 1) != 21 || pt_asm_loop(3) != 6 ||
		    pt_asm_post(1, 2) != 8)
			__atomic_add_fetch(&wrong, 1, __ATOMIC_RELAXED);
	return NULL;
}

static int posts;

static void count_post(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p, (void)r, (void)ctx;
	__atomic_add_fetch(&posts, 1, __ATOMIC_RELAXED);
}

#define N 5

static void ret_count(struct pk_retprobe *rp, struct pk_regs *r, void *data,
		      void *ctx)
{
	(void)rp, (void)r, (void)data, (void)ctx;
	__atomic_add_fetch(&hits, 1, __ATOMIC_RELAXED);
}

/*
 * A return probe whose register's code write fails: rolled back the same
 * way. Run in a child forked before this process touched the text layer,
 * as the injected failure happens once per process.
 */
static int retprobe_child(void)
{
	PK_OPTS(pk_retprobe_opts, o, .symbol = "pt_sum6", .ret = ret_count);
	struct pk_retprobe_info info = { .sz = sizeof(info) };
	struct pk_retprobe *rp = NULL;
	uint8_t before[16];
	int err;

	setenv("PROBEKIT_TEST_FAIL_WRITE", "0:1", 1);
	if (!ASSERT_OK(pk_retprobe_create(&o, &rp), "retprobe create"))
		return 1;
	memcpy(before, (void *)pt_sum6, 16);
	pk_set_log(t_quiet_log, NULL);
	err = pk_retprobe_register(&rp, 1);
	pk_set_log(NULL, NULL);
	ASSERT_EQ(err, -EPERM, "retprobe register fails when a code write fails");
	ASSERT_MEM_EQ((void *)pt_sum6, before, 16, "retprobe: pt_sum6 untouched");
	ASSERT_OK(pk_retprobe_get_info(rp, &info), "retprobe info");
	ASSERT_EQ(info.armed, 0, "retprobe not armed");
	ASSERT_EQ(pk_retprobe_unregister(&rp, 1), -EINVAL, "nothing to unregister");
	hits = 0;
	if (ASSERT_OK(pk_retprobe_register(&rp, 1), "the next retprobe register works")) {
		ASSERT_EQ(pt_sum6(1, 1, 1, 1, 1, 1), 21, "probed result");
		ASSERT_EQ(hits, 1, "return handler runs");
		ASSERT_OK(pk_retprobe_unregister(&rp, 1), "retprobe unregister");
	}
	ASSERT_MEM_EQ((void *)pt_sum6, before, 16, "retprobe: restored");
	pk_retprobe_destroy(rp);
	return t_failed ? 1 : 0;
}

int main(void)
{
	/* Jump probes; an int3 one (a branch into its bytes); int3 + post. */
	static const char *const syms[N] = { "pt_sum6", "pt_asm_jcc", "pt_asm_rip",
					     "pt_asm_loop", "pt_asm_post" };
	uint8_t before[N][16];
	struct pk_probe *p[N] = { 0 };
	pthread_t th[4];
	int err, st = 0;
	pid_t pid;

	pid = fork();
	if (pid == 0)
		_exit(retprobe_child());
	if (ASSERT_GE(pid, 1, "fork")) {
		waitpid(pid, &st, 0);
		ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0,
			    "child: a failed retprobe register changed nothing");
	}

	/* The first commit's second write (the tails) fails, once. */
	setenv("PROBEKIT_TEST_FAIL_WRITE", "0:1", 1);
	for (int i = 0; i < N; i++) {
		PK_OPTS(pk_probe_opts, o, .symbol = syms[i], .pre = count,
			.post = i == 4 ? count_post : NULL,
			.flags = i == 4 ? PK_PROBE_F_INT3 : 0);

		if (!ASSERT_OK(pk_probe_create(&o, &p[i]), syms[i]))
			return t_exit();
	}
	memcpy(before[0], (void *)pt_sum6, 16);
	memcpy(before[1], (void *)pt_asm_jcc, 16);
	memcpy(before[2], (void *)pt_asm_rip, 16);
	memcpy(before[3], (void *)pt_asm_loop, 16);
	memcpy(before[4], (void *)pt_asm_post, 16);
	for (int i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, caller, NULL);
	pk_set_log(t_quiet_log, NULL);
	err = pk_probe_register(p, N);
	pk_set_log(NULL, NULL);
	/* The injected write failure is reported as the documented -EPERM. */
	ASSERT_EQ(err, -EPERM, "register fails with -EPERM when a code write fails");
	ASSERT_MEM_EQ((void *)pt_sum6, before[0], 16, "pt_sum6 untouched");
	ASSERT_MEM_EQ((void *)pt_asm_jcc, before[1], 16, "pt_asm_jcc untouched");
	ASSERT_MEM_EQ((void *)pt_asm_rip, before[2], 16, "pt_asm_rip untouched");
	ASSERT_MEM_EQ((void *)pt_asm_loop, before[3], 16, "pt_asm_loop untouched");
	ASSERT_MEM_EQ((void *)pt_asm_post, before[4], 16, "pt_asm_post untouched");
	for (int i = 0; i < N; i++) {
		struct pk_probe_info info = { .sz = sizeof(info) };

		pk_probe_get_info(p[i], &info);
		ASSERT_EQ(info.armed, 0, "not armed");
	}
	ASSERT_EQ(pk_probe_unregister(p, N), -EINVAL, "nothing to unregister");
	hits = 0;
	/* The failed batch's trap entries went: the int3 probes arm again. */
	if (ASSERT_OK(pk_probe_register(p, N), "the next register works")) {
		ASSERT_EQ(pt_asm_jcc(0), -1, "probed jcc");
		ASSERT_GE(hits, 1, "handler runs");
		ASSERT_EQ(*(uint8_t *)pt_asm_loop, 0xcc, "int3 probe armed");
		ASSERT_EQ(pt_asm_post(3, 4), 12, "int3 + post result");
		ASSERT_GE(posts, 1, "post-handler runs");
		ASSERT_OK(pk_probe_unregister(p, N), "unregister");
	}
	stop = 1;
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	ASSERT_EQ(wrong, 0, "callers saw right results throughout");
	ASSERT_MEM_EQ((void *)pt_asm_rip, before[2], 16, "restored at the end");
	ASSERT_MEM_EQ((void *)pt_asm_post, before[4], 16, "restored at the end");
	for (int i = 0; i < N; i++)
		pk_probe_destroy(p[i]);
	return t_exit();
}
