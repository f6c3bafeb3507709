// SPDX-License-Identifier: MIT
/* secure_target.c - a program for tests/secure.sh: probes a function of its own and says what the environment changed. */

/*
 * Prints one line: "secure=S register=R signal=N calls=C"
 *
 *   S  getauxval(AT_SECURE): 1 when run set-user-ID by another user
 *   R  what pk_probe_register() returned (PROBEKIT_PROBE_SIGNAL=1 names a
 *      signal that is not real-time: -EINVAL where the variable is read;
 *      PROBEKIT_TEST_FAIL_WRITE=0:0 would make it -EIO where that hook
 *      exists)
 *   N  the real-time signal that has a handler after registering (the
 *      one probe registration uses), 0 if none
 *   C  hits the probe counted in 3 calls
 * Anything the library logs goes to standard error.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>

#include <probekit.h>

static volatile int sink;
static int hits;

__attribute__((noinline)) int secure_target_fn(int x)
{
	sink += x;
	return sink * 3 + x;
}

static void on_hit(struct pk_probe *p, struct pk_regs *regs, void *ctx)
{
	(void)p;
	(void)regs;
	(void)ctx;
	__atomic_add_fetch(&hits, 1, __ATOMIC_RELAXED);
}

int main(void)
{
	struct pk_probe_opts o;
	struct pk_probe *p = NULL;
	int reg, sig = 0;

	memset(&o, 0, sizeof(o));
	o.sz = sizeof(o);
	o.addr = (void *)secure_target_fn;
	o.pre = on_hit;
	reg = pk_probe_create(&o, &p);
	if (!reg)
		reg = pk_probe_register(&p, 1);
	for (int s = SIGRTMIN; s <= SIGRTMAX && !sig; s++) {
		struct sigaction sa;

		if (!sigaction(s, NULL, &sa) && sa.sa_handler != SIG_DFL)
			sig = s;
	}
	for (int i = 0; i < 3; i++)
		secure_target_fn(i);
	printf("secure=%lu register=%d signal=%d calls=%d\n",
	       getauxval(AT_SECURE), reg, sig, hits);
	return 0;
}
