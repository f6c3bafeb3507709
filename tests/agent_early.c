// SPDX-License-Identifier: MIT
/* agent_early.c - for agent_early.sh: wakes agent_early_lib's parked thread N times (each wake-up one more early_park() call) and prints how often it woke. */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Whether thread @tid sleeps in pause() (34): a signal then wakes it. */
static int parked(int tid)
{
	char path[64], buf[64] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = 0;
	fclose(f);
	return !strncmp(buf, "34 ", 3);
}

int main(int argc, char **argv)
{
	volatile unsigned long **wp = dlsym(RTLD_DEFAULT, "early_wakes");
	volatile unsigned long *wakes = wp ? *wp : NULL;
	volatile int *tid = dlsym(RTLD_DEFAULT, "early_tid");
	int n = argc > 1 ? atoi(argv[1]) : 0;

	if (!wakes || !tid || !*tid) {
		fprintf(stderr, "agent_early: no parked thread (AGENT_EARLY, the library)\n");
		return 2;
	}
	for (int i = 0; i < n; i++) {
		unsigned long was = *wakes;

		/*
		 * Back in pause() first: a signal that came while it was
		 * still on its way there (the probe's handler, a loaded
		 * machine) would be taken outside it, and wake nothing.
		 */
		for (int k = 0; k < 2000 && !parked(*tid); k++) {
			struct timespec ts = { 0, 1000000 };

			nanosleep(&ts, NULL);
		}
		syscall(SYS_tgkill, getpid(), *tid, SIGUSR1);
		for (int k = 0; k < 2000 && *wakes == was; k++) {
			struct timespec ts = { 0, 1000000 };

			nanosleep(&ts, NULL);
		}
	}
	printf("woke %lu\n", *wakes);
	return 0;
}
