// SPDX-License-Identifier: MIT
/* agent_mcount.c - for agent.sh: an LD_PRELOAD wrapper counting the program's malloc, free, calloc and realloc calls, an independent count to compare the agent's with. */

/*
 * Each wrapper counts a call and passes it to glibc's own entry point
 * (__libc_malloc and so on: no dlsym, which allocates). glibc calls its
 * malloc family through the PLT, so calls libc makes for the program
 * (strdup, fopen, ...) are seen here too, as a probe on malloc sees them.
 * What a probe also sees and a wrapper does not: glibc's realloc and
 * reallocarray enter malloc's code for a NULL pointer and free's for a
 * size of 0 (reallocarray calls realloc's): counted here as such.
 * At exit the four counts go to $PKA_MCOUNT_OUT as "malloc N" lines.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *__libc_malloc(size_t n);
void *__libc_calloc(size_t n, size_t size);
void *__libc_realloc(void *p, size_t n);
void __libc_free(void *p);

static unsigned long n_malloc, n_free, n_calloc, n_realloc;

#define ADD(c) __atomic_fetch_add(&(c), 1, __ATOMIC_RELAXED)

void *malloc(size_t n)
{
	ADD(n_malloc);
	return __libc_malloc(n);
}

void free(void *p)
{
	ADD(n_free);
	__libc_free(p);
}

void *calloc(size_t n, size_t size)
{
	ADD(n_calloc);
	return __libc_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
	ADD(n_realloc);
	if (!p)
		ADD(n_malloc);
	else if (!n)
		ADD(n_free);
	return __libc_realloc(p, n);
}

void *reallocarray(void *p, size_t n, size_t size)
{
	if (size && n > (size_t)-1 / size)
		return __libc_realloc(p, (size_t)-1);	/* fails: ENOMEM */
	return realloc(p, n * size);
}

__attribute__((destructor)) static void report(void)
{
	const char *out = getenv("PKA_MCOUNT_OUT");
	char buf[256];
	int fd, len;

	if (!out)
		return;
	len = snprintf(buf, sizeof(buf), "malloc %lu\nfree %lu\ncalloc %lu\n"
			     "realloc %lu\n", n_malloc, n_free, n_calloc,
		       n_realloc);
	fd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	if (write(fd, buf, (size_t)len) != len)
		_exit(3);
	close(fd);
}
