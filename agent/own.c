// SPDX-License-Identifier: MIT
/* own.c - the agent's own work is never counted: a per-thread flag set around it, and around every allocation the agent's code makes. */
#include <stddef.h>

#include "agent.h"

/*
 * pka_busy is nonzero while this thread runs the agent's own code: the
 * constructor (symbol reading, arming), the arming of a library loaded
 * later, and each call the agent's objects (libprobekit's, libelf's,
 * liburcu's) make to malloc, calloc, realloc, aligned_alloc or free, in any
 * thread, since the agent is linked with --wrap for those five
 * (agent/CMakeLists.txt).
 * A mode's handler ignores a hit while it is set (count.c), so a probe on
 * malloc counts the program's calls only. Initial-exec TLS: one
 * %fs-relative load in the handler, and no allocation to reach it.
 *
 * The library's signal interposers mark their own libc calls (pk_own_enter,
 * below). What stays outside: calls libc makes for the agent's libc calls outside
 * the constructor (none today: the library's interposers call only the
 * real signal functions, and pthread_create's start record is a wrapped
 * malloc), and a program's signal handler that interrupts the agent's
 * own work on its thread: its calls are not counted either.
 */
__thread unsigned int pka_busy __attribute__((tls_model("initial-exec")));

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);
void *__real_aligned_alloc(size_t align, size_t n);
void *__wrap_aligned_alloc(size_t align, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
void __wrap_free(void *p);

void *__wrap_malloc(size_t n)
{
	void *p;

	pka_busy++;
	p = __real_malloc(n);
	pka_busy--;
	return p;
}

void *__wrap_calloc(size_t n, size_t size)
{
	void *p;

	pka_busy++;
	p = __real_calloc(n, size);
	pka_busy--;
	return p;
}

void *__wrap_realloc(void *p, size_t n)
{
	pka_busy++;
	p = __real_realloc(p, n);
	pka_busy--;
	return p;
}

void *__wrap_aligned_alloc(size_t align, size_t n)
{
	void *p;

	pka_busy++;
	p = __real_aligned_alloc(align, n);
	pka_busy--;
	return p;
}

void __wrap_free(void *p)
{
	pka_busy++;
	__real_free(p);
	pka_busy--;
}

/*
 * The library's signal interposers (src/sig) call these around their own
 * libc calls on the program's threads (sigfillset, their lock, the mask):
 * weak and hidden there, defined only here.
 */
void pk_own_enter(void) __attribute__((visibility("hidden")));
void pk_own_leave(void) __attribute__((visibility("hidden")));

void pk_own_enter(void)
{
	pka_busy++;
}

void pk_own_leave(void)
{
	pka_busy--;
}
