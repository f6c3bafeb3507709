// SPDX-License-Identifier: MIT
/* test_sig_signal.c - signal() under probekit keeps libc's semantics: siginterrupt() makes a blocking read return EINTR, SIG_ERR and bad signals are refused with EINVAL (issue 9, item 1). */
#include <fcntl.h>
#include <sys/time.h>

#include "sig_common.h"

/* siginterrupt() is what the program under test calls. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

static volatile int alarms;
static int pfd[2];

static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
}

/* The guard: if the read restarts, it gets this byte instead of hanging. */
static void *unhang(void *arg)
{
	(void)arg;
	sleep(3);
	if (write(pfd[1], "x", 1) != 1)
		_exit(5);
	return NULL;
}

static int interrupted_read(void)
{
	struct itimerval it = { .it_value = { .tv_usec = 100000 } };
	pthread_t t;
	sigset_t one;
	char c;
	ssize_t n;
	int err;

	if (pipe(pfd))
		return 2;
	/* Only this thread takes SIGALRM. */
	sigemptyset(&one);
	sigaddset(&one, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &one, NULL);
	pthread_create(&t, NULL, unhang, NULL);
	pthread_sigmask(SIG_UNBLOCK, &one, NULL);
	siginterrupt(SIGALRM, 1);
	if (signal(SIGALRM, on_alarm) == SIG_ERR)
		return 3;
	setitimer(ITIMER_REAL, &it, NULL);
	n = read(pfd[0], &c, 1);
	err = errno;
	if (n != -1 || err != EINTR || alarms != 1) {
		fprintf(stderr, "read: %zd, errno %d, %d alarm(s): not EINTR\n",
			n, err, alarms);
		return 4;
	}
	return 0;
}

int main(void)
{
	sighandler_t r;

	sig_expect_ok(sig_in_child(interrupted_read),
		      "siginterrupt(SIGALRM, 1) + signal(): read interrupted");
	errno = 0;
	r = signal(SIGUSR1, SIG_ERR);
	ASSERT_TRUE(r == SIG_ERR, "signal(SIGUSR1, SIG_ERR) returns SIG_ERR");
	ASSERT_EQ(errno, EINVAL, "signal(SIGUSR1, SIG_ERR) errno");
	errno = 0;
	ASSERT_TRUE(signal(SIGSEGV, SIG_ERR) == SIG_ERR,
		    "signal(SIGSEGV, SIG_ERR) returns SIG_ERR");
	ASSERT_EQ(errno, EINVAL, "signal(SIGSEGV, SIG_ERR) errno");
	errno = 0;
	ASSERT_TRUE(signal(0, SIG_DFL) == SIG_ERR, "signal(0) returns SIG_ERR");
	ASSERT_EQ(errno, EINVAL, "signal(0) errno");
	errno = 0;
	ASSERT_TRUE(signal(NSIG, SIG_DFL) == SIG_ERR, "signal(NSIG) returns SIG_ERR");
	ASSERT_EQ(errno, EINVAL, "signal(NSIG) errno");
	/* An owned signal: siginterrupt reaches its handler's flags. */
	ASSERT_TRUE(signal(SIGSEGV, on_alarm) != SIG_ERR, "signal(SIGSEGV, h)");
	{
		struct sigaction sa;

		siginterrupt(SIGSEGV, 1);
		sigaction(SIGSEGV, NULL, &sa);
		ASSERT_FALSE(sa.sa_flags & SA_RESTART,
			     "siginterrupt(SIGSEGV, 1) clears SA_RESTART");
		ASSERT_TRUE(sa.sa_handler == on_alarm, "SIGSEGV handler kept");
		signal(SIGSEGV, SIG_DFL);
	}
	return t_exit();
}
