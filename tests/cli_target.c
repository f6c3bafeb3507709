// SPDX-License-Identifier: MIT
/* cli_target.c - a program for tests/cli.sh: calls a static function a known number of times, then forks, execs or dies as told. */

/*
 * cli_target N [fork M] [exec K] [sleep MS] [daemon M] [orphans M]
 *            [exit CODE | _exit | kill]
 *
 *   N        calls of cli_target_fn() in this process
 *   fork M   a forked child calls it M more times (its counts land in the
 *            parent's counts file, which the child shares)
 *   exec K   a forked child runs "cli_target K" anew (a file of its own)
 *   sleep MS sleep MS milliseconds (to be seen running: cli_uncounted.sh)
 *   daemon M a double-forked grandchild, in a session of its own, calls it
 *            M times 400 ms later (the command has ended by then) and
 *            ends; the child between them ends at once
 *   orphans M M times: a forked child forks a grandchild and ends at once;
 *            the grandchild (an orphan, the subreaper's child) calls it
 *            once 2 ms later and ends; 20 ms between them
 *   exit C   end with exit(C); _exit: with _exit(0), no destructors;
 *            kill: by SIGTERM
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

/* static: found through .symtab, not .dynsym */
/* noipa: no renamed clone (cli_target_fn.isra.0) that the CLI cannot find. */
__attribute__((noinline, noipa)) static void cli_target_fn(unsigned long i)
{
	sink += i * 3 + 1;
	__asm__ volatile("" ::: "memory");
}

/*
 * One byte, another function right after it (no padding a jump could use,
 * issue 12): too short for a jump probe, so the agent arms an int3 one.
 */
void cli_target_tiny(void);
__asm__(".text\n.globl cli_target_tiny\n.type cli_target_tiny,@function\n"
	"cli_target_tiny:\n\tret\n.size cli_target_tiny, 1\n"
	".type cli_target_tiny_next,@function\n"
	"cli_target_tiny_next:\n\tret\n.size cli_target_tiny_next, 1\n");

static void calls(long n)
{
	for (long i = 0; i < n; i++) {
		cli_target_fn((unsigned long)i);
		cli_target_tiny();
	}
}

int main(int argc, char **argv)
{
	int code = 0;

	if (argc < 2)
		return 2;
	calls(atol(argv[1]));
	for (int i = 2; i < argc; i++) {
		pid_t pid;

		if (!strcmp(argv[i], "fork") && i + 1 < argc) {
			long m = atol(argv[++i]);

			pid = fork();
			if (pid == 0) {
				calls(m);
				_exit(0);
			}
			waitpid(pid, NULL, 0);
		} else if (!strcmp(argv[i], "exec") && i + 1 < argc) {
			char *args[] = { argv[0], argv[++i], NULL };

			pid = fork();
			if (pid == 0) {
				execv("/proc/self/exe", args);
				_exit(127);
			}
			waitpid(pid, NULL, 0);
		} else if (!strcmp(argv[i], "sleep") && i + 1 < argc) {
			struct timespec ts = { 0, 0 };
			long ms = atol(argv[++i]);

			ts.tv_sec = ms / 1000;
			ts.tv_nsec = ms % 1000 * 1000000L;
			while (nanosleep(&ts, &ts))
				;
		} else if (!strcmp(argv[i], "daemon") && i + 1 < argc) {
			long m = atol(argv[++i]);

			pid = fork();
			if (pid == 0) {
				struct timespec ts = { 0, 400 * 1000000L };

				if (fork())
					_exit(0);
				setsid();
				while (nanosleep(&ts, &ts))
					;
				calls(m);
				_exit(0);
			}
			waitpid(pid, NULL, 0);
		} else if (!strcmp(argv[i], "orphans") && i + 1 < argc) {
			long m = atol(argv[++i]);

			for (long k = 0; k < m; k++) {
				struct timespec ts = { 0, 2 * 1000000L };

				pid = fork();
				if (pid == 0) {
					if (fork())
						_exit(0);
					while (nanosleep(&ts, &ts))
						;
					calls(1);
					_exit(0);
				}
				waitpid(pid, NULL, 0);
				ts.tv_nsec = 20 * 1000000L;
				while (nanosleep(&ts, &ts))
					;
			}
		} else if (!strcmp(argv[i], "exit") && i + 1 < argc) {
			code = atoi(argv[++i]);
		} else if (!strcmp(argv[i], "_exit")) {
			_exit(0);
		} else if (!strcmp(argv[i], "kill")) {
			raise(SIGTERM);
		} else {
			return 2;
		}
	}
	printf("cli_target done\n");
	return code;
}
