// SPDX-License-Identifier: MIT
/* symlist_fail.c - LD_PRELOAD shim for cli-list.sh: fork() or fdopen() fails (SYMLIST_FAIL=fork|fdopen), and at exit the pipes opened and still open are counted ("open pipes at exit: N" on stderr). */
#define _GNU_SOURCE 1
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failing(const char *what)
{
	const char *f = getenv("SYMLIST_FAIL");

	return f && !strcmp(f, what);
}

pid_t fork(void)
{
	pid_t (*real)(void) = (pid_t (*)(void))dlsym(RTLD_NEXT, "fork");

	if (failing("fork")) {
		errno = EAGAIN;
		return -1;
	}
	return real();
}

FILE *fdopen(int fd, const char *mode)
{
	FILE *(*real)(int, const char *) =
		(FILE *(*)(int, const char *))dlsym(RTLD_NEXT, "fdopen");

	if (failing("fdopen")) {
		errno = ENOMEM;
		return NULL;
	}
	return real(fd, mode);
}

static int pipes(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d))) {
		char path[300], to[64];
		ssize_t l;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		l = readlink(path, to, sizeof(to) - 1);
		if (l > 0 && !strncmp(to, "pipe:", 5))
			n++;
	}
	if (d)
		closedir(d);
	return n;
}

static int at_start;	/* inherited ones */

__attribute__((constructor)) static void count_start(void)
{
	at_start = pipes();
}

__attribute__((destructor)) static void count_end(void)
{
	if (getenv("SYMLIST_FAIL"))
		fprintf(stderr, "open pipes at exit: %d\n", pipes() - at_start);
}
