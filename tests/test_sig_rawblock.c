// SPDX-License-Identifier: MIT
/* test_sig_rawblock.c - a thread that blocks SIGTRAP behind libc's back (a raw rt_sigprocmask, as Go's runtime does) makes int3 placement refused with -EDEADLK instead of killing the process (issue 9, item 2). */
#include <sched.h>

#include "sig_common.h"

static volatile int phase;	/* 0 run blocked, 1 unblock, 2 stop */
static volatile int blocked;

static void *worker(void *arg)
{
	unsigned long all = ~0UL, none = 0;
	long acc = 0;

	(void)arg;
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, NULL, 8);
	blocked = 1;
	while (phase == 0)
		acc += sig_victim_jmp(acc & 7) + sig_victim_int3(acc & 3) +
		       sig_keyed(acc & 1);
	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, 8);
	blocked = 0;
	while (phase == 1)
		acc += sig_victim_jmp(acc & 7) + sig_victim_int3(acc & 3) +
		       sig_keyed(acc & 1);
	return (void *)acc;
}

static int scenario(void)
{
	struct pk_probe *jp = sig_probe((void *)sig_victim_jmp, 0);
	struct pk_probe *ip = sig_probe((void *)sig_victim_int3, PK_PROBE_F_INT3);
	pthread_t t;
	int bad = 0, r;

	if (!jp || !ip)
		return 2;
	pthread_create(&t, NULL, worker, NULL);
	while (!blocked)
		sched_yield();
	r = pk_probe_register(&ip, 1);
	if (r != -EDEADLK) {
		fprintf(stderr, "int3 probe: %d, not -EDEADLK\n", r);
		bad |= 1;
	}
	r = pk_probe_register(&jp, 1);
	if (r != -EDEADLK) {
		fprintf(stderr, "jump probe: %d, not -EDEADLK\n", r);
		bad |= 2;
	}
	r = pk_key_enable(&sig_key);
	if (r >= 0 && pk_key_patching()) {
		fprintf(stderr, "key enable: %d, not refused\n", r);
		bad |= 4;
	}
	if (sig_victim_int3(1) != 7 || sig_keyed(1) != 1)
		bad |= 8;	/* left as it was */
	phase = 1;
	while (blocked)
		sched_yield();
	if (pk_probe_register(&ip, 1) || pk_probe_register(&jp, 1) ||
	    pk_key_enable(&sig_key) < 0)
		bad |= 16;	/* once unblocked, all goes */
	sig_victim_int3(1);
	if (!sig_hits)
		bad |= 32;
	pk_probe_unregister(&ip, 1);
	pk_probe_unregister(&jp, 1);
	pk_key_disable(&sig_key);
	phase = 2;
	pthread_join(t, NULL);
	if (bad)
		fprintf(stderr, "failed checks %#x\n", bad);
	return bad;
}

int main(void)
{
	sig_expect_ok(sig_in_child(scenario),
		      "raw-syscall SIGTRAP blocker: refused, process survives");
	return t_exit();
}
