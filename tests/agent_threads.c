// SPDX-License-Identifier: MIT
/* agent_threads.c - for agent.sh: threads that allocate, created with a signal blocked (the agent's pthread_create then allocates a start record of its own). */

/*
 * The threads never exit: glibc frees a thread's cache at its exit by a
 * direct internal call, which a probe on free sees and an LD_PRELOAD
 * wrapper cannot. They wait, and the process exits under them.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* Where each block goes before it is freed: no pair the compiler can drop. */
static void *volatile sink[4];
static pthread_barrier_t done;

static void *work(void *arg)
{
	long n = (long)arg & 0xffffff, me = (long)arg >> 24;

	for (long i = 0; i < n; i++) {
		sink[me] = malloc(32);
		free(sink[me]);
	}
	pthread_barrier_wait(&done);
	for (;;)
		pause();
	return NULL;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000;
	pthread_t t[4];
	sigset_t set;

	/* A blocked signal: the sig layer's virtual mask is inherited. */
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigprocmask(SIG_BLOCK, &set, NULL);
	pthread_barrier_init(&done, NULL, 5);
	for (int i = 0; i < 4; i++)
		if (pthread_create(&t[i], NULL, work,
				   (void *)(n | (long)i << 24)))
			return 1;
	pthread_barrier_wait(&done);
	printf("agent_threads done\n");
	return 0;
}
