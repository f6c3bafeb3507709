// SPDX-License-Identifier: MIT
/* stress_probe_ret.c - register, unregister and destroy return probes in a loop while 64 threads call, recurse, longjmp out, take signals that call probed code, come and go. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "harness.h"
#include "probekit.h"


#define NTHREADS 64

T_NOINLINE long sr_rec(long n);
static long (*volatile rec_ptr)(long) = sr_rec;

T_NOINLINE long sr_rec(long n)
{
	volatile long pad = n;

	if (n <= 0)
		return 7;
	return rec_ptr(n - 1) + pad;
}

static long rec_ref(long n)
{
	return 7 + n * (n + 1) / 2;
}

static __thread jmp_buf *jb;

T_NOINLINE long sr_jump(long n)
{
	volatile long x = n;

	if (x & 1)
		longjmp(*jb, 1);
	return x * 5;
}

/* Spends a while inside, so unregister often finds threads there. */
T_NOINLINE long sr_slow(long n)
{
	volatile long x = n;

	for (int i = 0; i < 200; i++)
		__asm__ volatile("pause");
	return x ^ 0x55;
}

static volatile int stop;
static unsigned long wrong, handler_bad, calls, rets;	/* atomic */
static unsigned long sig_calls;				/* atomic */

/*
 * Each thread takes a signal every 100 us (and when it resumes), so at
 * any point, also between a return probe's entry handler and the call it
 * diverts, and while probes are (un)registered (a handler may run inside
 * the SIGTRAP handler of a thread that trapped on a site in flight); the
 * handler (on a sigaltstack in half the threads) calls probed functions.
 */
static void on_sig(int sig)
{
	int saved = errno;

	(void)sig;
	if (sr_rec(4) != rec_ref(4) || sr_slow(3) != (3 ^ 0x55))
		__atomic_add_fetch(&wrong, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&sig_calls, 1, __ATOMIC_RELAXED);
	errno = saved;
}

/* Entry stores the argument; return checks the value against it. */
static int s_entry(struct pk_retprobe *rp, struct pk_regs *r, void *data,
		   void *ctx)
{
	(void)rp, (void)ctx;
	memcpy(data, &r->rdi, sizeof(r->rdi));
	return 0;
}

static void s_ret(struct pk_retprobe *rp, struct pk_regs *r, void *data,
		  void *ctx)
{
	long arg, want;
	uintptr_t which = (uintptr_t)ctx;

	(void)rp;
	memcpy(&arg, data, sizeof(arg));
	want = which == 0 ? rec_ref(arg) : which == 1 ? arg * 5 : arg ^ 0x55;
	if ((long)pk_regs_ret(r) != want)
		__atomic_add_fetch(&handler_bad, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&rets, 1, __ATOMIC_RELAXED);
}

static void work(long id, long i)
{
	jmp_buf here;
	long n = (id + i) % 24;
	volatile int jumped = 0;

	if (sr_rec(n) != rec_ref(n))
		__atomic_add_fetch(&wrong, 1, __ATOMIC_RELAXED);
	jb = &here;
	if (!setjmp(here)) {
		long v = sr_jump(i);

		if (v != i * 5)
			__atomic_add_fetch(&wrong, 1, __ATOMIC_RELAXED);
	} else {
		jumped = 1;
	}
	if (jumped != (int)(i & 1))
		__atomic_add_fetch(&wrong, 1, __ATOMIC_RELAXED);
	if (sr_slow(i) != (i ^ 0x55))
		__atomic_add_fetch(&wrong, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
}

static void *caller(void *arg)
{
	long id = (long)arg;
	stack_t ss = { .ss_size = 1 << 16 }, off = { .ss_flags = SS_DISABLE };
	struct sigevent sev;
	struct itimerspec its = { { 0, 100000 }, { 0, 100000 } };
	timer_t tm;
	int have_tm;
	void *ret = NULL;

	if (id & 1) {
		ss.ss_sp = malloc(ss.ss_size);
		if (ss.ss_sp)
			sigaltstack(&ss, NULL);
	}
	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = SIGUSR1;
	sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
	have_tm = !timer_create(CLOCK_MONOTONIC, &sev, &tm) &&
		  !timer_settime(tm, 0, &its, NULL);
	for (long i = 0; !__atomic_load_n(&stop, __ATOMIC_RELAXED); i++) {
		work(id, i);
		/* Every so often this thread ends and a fresh one takes over. */
		if (i == 2000 + id * 50) {
			pthread_t t;

			if (!pthread_create(&t, NULL, caller, (void *)id)) {
				pthread_detach(t);
				break;
			}
		}
	}
	if (have_tm)
		timer_delete(tm);
	if (ss.ss_sp) {
		sigset_t all, old;

		/* No signal may run on the stack once it is freed. */
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old);
		sigaltstack(&off, NULL);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		free(ss.ss_sp);
	}
	return ret;
}

static const char *const syms[3] = { "sr_rec", "sr_jump", "sr_slow" };

static int make(int i, struct pk_retprobe **out)
{
	PK_OPTS(pk_retprobe_opts, o, .symbol = syms[i % 3], .entry = s_entry,
		.ret = s_ret, .ctx = (void *)(uintptr_t)(i % 3),
		.data_size = sizeof(long));

	return pk_retprobe_create(&o, out);
}

int main(void)
{
	struct pk_retprobe *rp[6] = { 0 };
	pthread_t th[NTHREADS];
	double end = t_now() + t_stress_seconds(5);
	unsigned long rounds = 0;


	for (int i = 0; i < 6; i++)
		if (!ASSERT_OK(make(i, &rp[i]), "create"))
			return t_exit();
	{
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_sig;
		sa.sa_flags = SA_RESTART | SA_ONSTACK;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGUSR1, &sa, NULL);
	}
	for (long i = 0; i < NTHREADS; i++)
		pthread_create(&th[i], NULL, caller, (void *)i);

	while (t_now() < end) {
		/* Two probes per function; sets of different shapes. */
		if (!ASSERT_OK(pk_retprobe_register(rp, 6), "register all") ||
		    !ASSERT_OK(pk_retprobe_unregister(rp + 3, 3), "unregister 3-5") ||
		    !ASSERT_OK(pk_retprobe_register(rp + 3, 2), "register 3-4") ||
		    !ASSERT_OK(pk_retprobe_unregister(rp, 2), "unregister 0-1") ||
		    !ASSERT_OK(pk_retprobe_unregister(rp + 2, 3), "unregister 2-4"))
			break;
		/* Destroy and recreate one: freed while threads may be inside. */
		pk_retprobe_destroy(rp[rounds % 6]);	/* not armed: no commit */
		rp[rounds % 6] = NULL;
		if (!ASSERT_OK(make((int)(rounds % 6), &rp[rounds % 6]), "recreate"))
			break;
		rounds++;
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	/* Detached successors: give them time to see stop. */
	usleep(200000);
	printf("%lu rounds, %lu work items, %lu return handler calls, %lu "
	       "signal handlers\n", rounds, calls, rets, sig_calls);
	ASSERT_EQ(wrong, 0, "wrong results while return probes came and went");
	ASSERT_EQ(handler_bad, 0, "a return handler saw another call's value");
	ASSERT_GE(rounds, 1, "rounds");
	ASSERT_GE(rets, 1, "handlers ran");
	ASSERT_GE(sig_calls, 1, "signals handled");
	for (int i = 0; i < 6; i++)
		pk_retprobe_destroy(rp[i]);
	return t_exit();
}
