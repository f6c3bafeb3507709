// SPDX-License-Identifier: MIT
/* test_probe_ret_missed.c - pk_retprobe_opts.missed: each call whose return the library does not probe (deeper than PK_RETPROBE_DEPTH) is added to the caller's counter, as pk_retprobe_info.missed counts it; NULL leaves it off. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include "harness.h"
#include "probekit.h"

#define DEEP 300	/* calls nested: 301, PK_RETPROBE_DEPTH of them probed */

static unsigned long rets;
static volatile unsigned long sink;

T_NOINLINE void pm_rec(int d)
{
	if (d > 0)
		pm_rec(d - 1);
	sink++;
}

static void on_ret(struct pk_retprobe *rp, struct pk_regs *r, void *data,
		   void *ctx)
{
	(void)rp;
	(void)r;
	(void)data;
	(void)ctx;
	rets++;
}

int main(void)
{
	uint64_t missed = 0;
	struct pk_retprobe *rp, *rp2;
	struct pk_retprobe_info info = { .sz = sizeof(info) };
	PK_OPTS(pk_retprobe_opts, o, .addr = (void *)pm_rec, .ret = on_ret,
		.missed = &missed);
	int err;

	pk_set_log(t_quiet_log, NULL);
	err = pk_retprobe_create(&o, &rp);
	if (err == -ENOTSUP || err == -EPERM)
		SKIP("no return probe here: %s", strerror(-err));
	ASSERT_OK(err, "pk_retprobe_create() with missed");
	ASSERT_OK(pk_retprobe_register(&rp, 1), "register");
	pm_rec(DEEP);
	ASSERT_EQ(rets, (unsigned long)PK_RETPROBE_DEPTH, "returns probed: the depth");
	ASSERT_EQ(missed, (uint64_t)(DEEP + 1 - PK_RETPROBE_DEPTH),
		  "the caller's counter: every call too deep");
	ASSERT_OK(pk_retprobe_get_info(rp, &info), "get_info");
	ASSERT_EQ((uint64_t)info.missed, missed, "the same as info.missed");
	pm_rec(10);
	ASSERT_EQ(missed, (uint64_t)(DEEP + 1 - PK_RETPROBE_DEPTH),
		  "calls within the depth add nothing");
	pk_retprobe_destroy(rp);

	/* Without it: the same misses, no counter written. */
	o.missed = NULL;
	rets = 0;
	ASSERT_OK(pk_retprobe_create(&o, &rp2), "pk_retprobe_create() without");
	ASSERT_OK(pk_retprobe_register(&rp2, 1), "register");
	pm_rec(DEEP);
	ASSERT_OK(pk_retprobe_get_info(rp2, &info), "get_info");
	ASSERT_EQ((uint64_t)info.missed, (uint64_t)(DEEP + 1 - PK_RETPROBE_DEPTH),
		  "info.missed still counts");
	ASSERT_EQ(missed, (uint64_t)(DEEP + 1 - PK_RETPROBE_DEPTH),
		  "the old counter untouched");
	pk_retprobe_destroy(rp2);
	return t_exit();
}
