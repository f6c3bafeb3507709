// SPDX-License-Identifier: MIT
/* agent_early_lib.c - for agent_early.sh: a library whose constructor, run before the agent's, starts a thread parked inside the first bytes of early_park() (AGENT_EARLY=park), or one that blocks every signal (=block). */

/*
 * early_park() is "syscall; nopl (%rax); ret": entered with eax =
 * SYS_pause, its thread sleeps with its resume address at early_park + 2,
 * inside the five bytes a jump probe replaces. Arming must move it (the
 * thread sweep, src/probe/sweep.c): left there, its next wake-up returns
 * into the middle of the jmp and faults. The thread's loop is assembly,
 * so no compiler keeps anything in the red zone a call would overwrite.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The loop's counter: local, so the assembly reaches it without a GOT. */
static volatile unsigned long wakes __asm__("agent_early_wakes")
	__attribute__((used));
__attribute__((visibility("default"))) volatile unsigned long *early_wakes = &wakes;
__attribute__((visibility("default"))) volatile int early_tid;

__asm__(".text\n"
	".globl early_park\n"
	".type early_park, @function\n"
	".p2align 4\n"
	"early_park:\n"
	".Learly_park:\n"
	"\tsyscall\n"
	"\tnopl (%rax)\n"
	"\tret\n"
	".size early_park, .-early_park\n"
	".p2align 4\n"
	".type early_loop, @function\n"
	"early_loop:\n"
	"1:\tmovl $" "34" ", %eax\n"	/* SYS_pause */
	"\tcall .Learly_park\n"
	"\tlock incq agent_early_wakes(%rip)\n"
	"\tjmp 1b\n"
	".size early_loop, .-early_loop\n");

void early_loop(void) __attribute__((noreturn));

static int blocking;

static void *start(void *arg)
{
	(void)arg;
	if (blocking) {
		unsigned long all = ~0UL;

		/* Past every interposer: really blocked. */
		syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, NULL, 8);
	}
	early_tid = (int)syscall(SYS_gettid);
	early_loop();
}

static void on_usr1(int sig)
{
	(void)sig;
}

/* Whether thread @tid sleeps in pause() now (/proc: "34 ..."). */
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

__attribute__((constructor)) static void early(void)
{
	const char *m = getenv("AGENT_EARLY");
	struct sigaction sa;
	pthread_t t;

	if (!m)
		return;
	blocking = !strcmp(m, "block");
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;	/* no SA_RESTART: pause() returns */
	sigaction(SIGUSR1, &sa, NULL);
	if (pthread_create(&t, NULL, start, NULL))
		abort();
	for (int i = 0; i < 5000; i++) {
		struct timespec ts = { 0, 1000000 };

		if (early_tid && parked(early_tid))
			return;
		nanosleep(&ts, NULL);
	}
	fprintf(stderr, "agent_early_lib: the thread never parked\n");
	abort();
}
