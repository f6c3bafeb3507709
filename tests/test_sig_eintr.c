// SPDX-License-Identifier: MIT
/* test_sig_eintr.c - probekit's sweep signal never makes sigsuspend, ppoll, pselect, epoll_pwait or sigtimedwait return EINTR: each is restarted, its timeout kept (issue 9, item 1). */
#include <poll.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>

#include "sig_common.h"

enum { W_SIGSUSPEND, W_PPOLL, W_PSELECT, W_EPOLL, W_SIGTIMEDWAIT, W_N };
static const char *const names[W_N] = { "sigsuspend", "ppoll", "pselect",
					"epoll_pwait", "sigtimedwait" };

static volatile int usr1[W_N], stop;
static int spurious[W_N], rounds[W_N], timeouts_short[W_N];
static pthread_t th[W_N];
static int epfd;

static void on_usr1(int sig)
{
	pthread_t me = pthread_self();

	(void)sig;
	for (int i = 0; i < W_N; i++)
		if (pthread_equal(me, th[i]))
			usr1[i] = 1;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* One wait of 50 ms; -1/EINTR only if SIGUSR1's handler ran. */
static void *waiter(void *p)
{
	int w = (int)(long)p;
	sigset_t m, usr;

	sigfillset(&m);
	sigdelset(&m, SIGUSR1);
	sigemptyset(&usr);
	sigaddset(&usr, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &usr, NULL);
	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		struct timespec ts = { 0, 50 * 1000 * 1000 };
		double t0 = now();
		int r = 0, e;

		usr1[w] = 0;
		switch (w) {
		case W_SIGSUSPEND:
			r = sigsuspend(&m);
			break;
		case W_PPOLL:
			r = ppoll(NULL, 0, &ts, &m);
			break;
		case W_PSELECT:
			r = pselect(0, NULL, NULL, NULL, &ts, &m);
			break;
		case W_EPOLL:
			r = epoll_pwait(epfd, &(struct epoll_event){ 0 }, 1, 50, &m);
			break;
		case W_SIGTIMEDWAIT:
			/* Waits for SIGUSR2, which never comes. */
			{
				sigset_t u2;

				sigemptyset(&u2);
				sigaddset(&u2, SIGUSR2);
				pthread_sigmask(SIG_BLOCK, &u2, NULL);
				pthread_sigmask(SIG_UNBLOCK, &usr, NULL);
				r = sigtimedwait(&u2, NULL, &ts);
				pthread_sigmask(SIG_BLOCK, &usr, NULL);
			}
			break;
		}
		e = errno;
		rounds[w]++;
		if (r < 0 && e == EINTR && !usr1[w])
			spurious[w]++;
		if (r == 0 || (r < 0 && e == EAGAIN)) {
			/* A timeout: never before its time. */
			if (now() - t0 < 0.049)
				timeouts_short[w]++;
		}
	}
	return NULL;
}

int main(void)
{
	struct sigaction sa;
	struct pk_probe *p;
	double end;
	int n = 0, fails = 0;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	epfd = epoll_create1(0);
	for (long i = 0; i < W_N; i++)
		pthread_create(&th[i], NULL, waiter, (void *)i);
	p = sig_probe((void *)sig_victim_jmp, 0);
	if (!ASSERT_TRUE(p != NULL, "probe"))
		return t_exit();
	/* Each register and unregister sweeps every thread. */
	end = t_now() + t_stress_seconds(1.5);
	while (t_now() < end || n < 20) {
		if (pk_probe_register(&p, 1) || pk_probe_unregister(&p, 1))
			fails++;
		n++;
		if (n % 8 == 0)
			for (int i = 0; i < W_N; i++)
				pthread_kill(th[i], SIGUSR1);	/* a real one */
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < W_N; i++) {
		pthread_kill(th[i], SIGUSR1);
		pthread_join(th[i], NULL);
	}
	pk_probe_destroy(p);
	ASSERT_EQ(fails, 0, "every register and unregister");
	for (int i = 0; i < W_N; i++) {
		if (spurious[i])
			fprintf(stderr, "%s: %d spurious EINTR in %d waits\n",
				names[i], spurious[i], rounds[i]);
		ASSERT_EQ(spurious[i], 0, names[i]);
		ASSERT_EQ(timeouts_short[i], 0, "no timeout ends early");
	}
	printf("%d register/unregister pairs\n", n);
	return t_exit();
}
