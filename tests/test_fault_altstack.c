// SPDX-License-Identifier: MIT
/* test_fault_altstack.c - fault handlers run on the thread's alternate stack where it has one (pk_thread_altstack), on its own stack otherwise; a thread's stack is freed when it exits. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include "probekit.h"
#include "harness.h"

static long page;
static char *area;	/* one page per thread below */

static __thread uintptr_t handler_sp;

static int on_fault(const struct pk_fault *f, void *ctx)
{
	volatile char here;

	(void)ctx;
	handler_sp = (uintptr_t)&here;
	mprotect((void *)((uintptr_t)f->addr & ~(uintptr_t)(page - 1)),
		 (size_t)page, PROT_READ | PROT_WRITE);
	return PK_FAULT_HANDLED;
}

/* Fault on @p; 1 if the handler ran on this thread's alternate stack. */
static int fault_on_altstack(char *p)
{
	stack_t ss;

	mprotect(p, (size_t)page, PROT_NONE);
	handler_sp = 0;
	*(volatile char *)p = 1;
	__asm__ volatile("" ::: "memory");
	if (!handler_sp || sigaltstack(NULL, &ss) || (ss.ss_flags & SS_DISABLE))
		return 0;
	return handler_sp >= (uintptr_t)ss.ss_sp &&
	       handler_sp < (uintptr_t)ss.ss_sp + ss.ss_size;
}

struct res {
	int had, with, without, ran, err;
	void *sp;
	size_t size;
};

static void *thread_with(void *arg)
{
	struct res *r = arg;
	stack_t ss;

	/* ASan gives threads an alternate stack itself: see main(). */
	sigaltstack(NULL, &ss);
	r->had = !(ss.ss_flags & SS_DISABLE);
	r->without = fault_on_altstack(area + page);
	r->ran = handler_sp != 0;
	r->err = pk_thread_altstack(128 * 1024);
	if (r->err)
		return NULL;
	sigaltstack(NULL, &ss);
	r->sp = ss.ss_sp;
	r->size = ss.ss_size;
	r->with = fault_on_altstack(area + page);
	return NULL;
}

int main(void)
{
	struct res r = { 0 };
	stack_t mine;
	pthread_t t;

	page = sysconf(_SC_PAGESIZE);
	area = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED)
		SKIP("mmap");
	ASSERT_OK(pk_fault_register(area, 2 * (size_t)page, on_fault, NULL),
		  "register");

	sigaltstack(NULL, &mine);
	if (mine.ss_flags & SS_DISABLE)	/* ASan gives threads one itself */
		ASSERT_FALSE(fault_on_altstack(area), "no altstack: own stack");
	ASSERT_OK(pk_thread_altstack(0), "altstack for this thread");
	ASSERT_TRUE(fault_on_altstack(area), "handler on the alternate stack");
	sigaltstack(NULL, &mine);

	pthread_create(&t, NULL, thread_with, &r);
	pthread_join(t, NULL);
	ASSERT_TRUE(r.ran, "a thread's fault is handled");
	ASSERT_OK(r.err, "altstack for the thread");
	if (!r.had)
		ASSERT_FALSE(r.without, "thread without one: own stack");
	ASSERT_TRUE(r.with, "on that thread's own alternate stack");
	ASSERT_TRUE(r.sp && r.sp != mine.ss_sp, "not the main thread's");
	/* Freed with the thread: msync() fails on unmapped memory. */
	ASSERT_EQ(msync((void *)((uintptr_t)r.sp & ~(uintptr_t)(page - 1)),
			(size_t)page, MS_ASYNC), -1,
		  "the thread's alternate stack is unmapped at its exit");
	ASSERT_OK(pk_fault_unregister(area), "unregister");
	return t_exit();
}
