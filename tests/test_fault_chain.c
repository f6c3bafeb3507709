// SPDX-License-Identifier: MIT
/* test_fault_chain.c - fault chain by range, trap chain by address, die chain: claimed and not-claimed paths, failure paths. */
#include <errno.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/ucontext.h>
#include <unistd.h>

#include "probekit.h"
#include "harness.h"

#define NPAGES 20

static long page;
static char *area;	/* NPAGES pages */

struct hit {
	int calls;
	void *addr, *start;
	unsigned int access;
	int restore_prot;	/* mprotect the page to this, then HANDLED */
	int unregister_ret;	/* what pk_fault_unregister said from inside */
	int try_unregister;
};

static struct hit hits[NPAGES];

/* The handlers change memory behind the compiler's back. */
#define BARRIER() __asm__ volatile("" ::: "memory")
static void store(volatile char *p, char v)
{
	*p = v;
	BARRIER();
}

static int on_fault(const struct pk_fault *f, void *ctx)
{
	struct hit *h = ctx;
	uintptr_t p = (uintptr_t)f->addr & ~(uintptr_t)(page - 1);

	h->calls++;
	h->addr = f->addr;
	h->start = f->start;
	h->access = f->access;
	if (h->try_unregister)
		h->unregister_ret = pk_fault_unregister(f->start);
	if (h->restore_prot < 0)
		return PK_FAULT_UNHANDLED;
	mprotect((void *)p, (size_t)page, h->restore_prot);
	return PK_FAULT_HANDLED;
}

static volatile int die_calls, die_sig;
static void *volatile die_addr;

static int on_die(struct pk_notifier *nb, unsigned long sig, void *data)
{
	const struct pk_fault *f = data;
	uintptr_t p = (uintptr_t)f->addr & ~(uintptr_t)(page - 1);

	(void)nb;
	die_calls++;
	die_sig = (int)sig;
	die_addr = f->addr;
	if (sig == SIGSEGV && (char *)f->addr >= area &&
	    (char *)f->addr < area + NPAGES * page) {
		mprotect((void *)p, (size_t)page, PROT_READ | PROT_WRITE);
		return PK_STOP;
	}
	return PK_DONE;
}

static struct pk_notifier die_nb = { .call = on_die };

/* int3 and ud2 at known addresses. */
extern char pk_test_int3[], pk_test_ud2[];
__attribute__((noinline)) static void run_int3(void)
{
	__asm__ volatile(".globl pk_test_int3\npk_test_int3: int3\n" ::: "memory");
}

__attribute__((noinline)) static void run_ud2(void)
{
	__asm__ volatile(".globl pk_test_ud2\npk_test_ud2: ud2\n" ::: "memory");
}

static volatile int trap_calls;

static int on_trap(const struct pk_fault *f, void *ctx)
{
	ucontext_t *uc = f->ucontext;

	(void)ctx;
	trap_calls++;
	if (f->signo == SIGILL)
		uc->uc_mcontext.gregs[REG_RIP] += 2;	/* past ud2 */
	return PK_FAULT_HANDLED;
}

static void test_ranges(void)
{
	volatile char *p;
	struct pk_fault_stats st = { .sz = sizeof(st) };

	/* Every even page is a range of its own; odd pages are nobody's. */
	for (int i = 0; i < NPAGES; i += 2) {
		hits[i].restore_prot = PROT_READ | PROT_WRITE;
		ASSERT_OK(pk_fault_register(area + i * page, (size_t)page,
					    on_fault, &hits[i]),
			  "register a page");
	}
	mprotect(area, (size_t)(NPAGES * page), PROT_NONE);

	/* Read fault on page 4, claimed, retried. */
	p = area + 4 * page + 123;
	ASSERT_EQ(*p, 0, "read retried after the handler");
	BARRIER();
	ASSERT_EQ(hits[4].calls, 1, "only page 4's handler ran");
	ASSERT_TRUE(hits[4].addr == (void *)p, "fault address");
	ASSERT_TRUE(hits[4].start == area + 4 * page, "range start");
	ASSERT_EQ(hits[4].access, PK_ACCESS_READ, "read access");

	/* Write fault on page 6. */
	p = area + 6 * page + 7;
	store(p, 42);
	ASSERT_EQ(area[6 * page + 7], 42, "write retried");
	ASSERT_EQ(hits[6].access, PK_ACCESS_WRITE, "write access");

	/* Exec fault on page 8: a ret in a page without PROT_EXEC. */
	mprotect(area + 8 * page, (size_t)page, PROT_READ | PROT_WRITE);
	area[8 * page] = (char)0xc3;
	mprotect(area + 8 * page, (size_t)page, PROT_READ);
	hits[8].restore_prot = PROT_READ | PROT_EXEC;
	((void (*)(void))(area + 8 * page))();
	BARRIER();
	ASSERT_EQ(hits[8].calls, 1, "exec fault handled");
	ASSERT_EQ(hits[8].access, PK_ACCESS_EXEC, "exec access");

	int others = 0;
	for (int i = 0; i < NPAGES; i++)
		if (i != 4 && i != 6 && i != 8)
			others += hits[i].calls;
	ASSERT_EQ(others, 0, "no other range's handler ran");

	/* A handler that declines: the die chain gets it, and claims it. */
	ASSERT_OK(pk_die_register(&die_nb), "die register");
	hits[10].restore_prot = -1;
	p = area + 10 * page;
	store(p, 1);
	ASSERT_EQ(hits[10].calls, 1, "range handler asked first");
	ASSERT_EQ(die_calls, 1, "die chain called when unclaimed");
	ASSERT_EQ(die_sig, SIGSEGV, "die action is the signal");
	ASSERT_TRUE(die_addr == (void *)p, "die sees the address");

	/* Not in any range: straight to the die chain. */
	p = area + 11 * page;
	store(p, 1);
	ASSERT_EQ(die_calls, 2, "die chain for an address of no range");
	ASSERT_EQ(hits[10].calls, 1, "neighbour range not asked");

	/* Claimed: the die chain is not called. */
	p = area + 12 * page;
	store(p, 1);
	ASSERT_EQ(hits[12].calls, 1, "claimed");
	ASSERT_EQ(die_calls, 2, "die chain not called when claimed");

	/* From inside a handler, writers refuse instead of deadlocking. */
	hits[14].try_unregister = 1;
	p = area + 14 * page;
	store(p, 1);
	ASSERT_EQ(hits[14].unregister_ret, -EDEADLK, "unregister inside handler");

	ASSERT_OK(pk_fault_stats(&st), "stats");
	ASSERT_GE(st.faults, 5, "stats.faults");
	ASSERT_GE(st.die_claimed, 2, "stats.die_claimed");

	ASSERT_OK(pk_die_unregister(&die_nb), "die unregister");
	ASSERT_EQ(pk_die_unregister(&die_nb), -ENOENT, "die unregister twice");
	for (int i = 0; i < NPAGES; i += 2)
		ASSERT_OK(pk_fault_unregister(area + i * page), "unregister");
}

static void test_errors(void)
{
	char *hole;

	/* NULL, empty, unaligned start, wrapping: test_fault_fail.c. */
	ASSERT_EQ(pk_fault_register(area, (size_t)page + 1, on_fault, NULL),
		  -EINVAL, "unaligned length");
	hole = mmap(NULL, 2 * (size_t)page, PROT_NONE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	munmap(hole + page, (size_t)page);
	ASSERT_EQ(pk_fault_register(hole, 2 * (size_t)page, on_fault, NULL),
		  -EINVAL, "partly unmapped range");
	munmap(hole, (size_t)page);

	/* Overlaps refused, nothing changed. */
	ASSERT_OK(pk_fault_register(area + 2 * page, 3 * (size_t)page,
				    on_fault, &hits[0]), "register 3 pages");
	ASSERT_EQ(pk_fault_register(area + page, 2 * (size_t)page, on_fault,
				    NULL), -EEXIST, "overlap from below");
	ASSERT_EQ(pk_fault_register(area + 4 * page, 2 * (size_t)page, on_fault,
				    NULL), -EEXIST, "overlap from above");
	ASSERT_EQ(pk_fault_register(area + 3 * page, (size_t)page, on_fault,
				    NULL), -EEXIST, "inside");
	ASSERT_EQ(pk_fault_register(area, 8 * (size_t)page, on_fault, NULL),
		  -EEXIST, "around");
	ASSERT_EQ(pk_fault_unregister(area + 3 * page), -ENOENT,
		  "unregister by an inner address");
	ASSERT_OK(pk_fault_register(area + page, (size_t)page, on_fault,
				    &hits[1]), "adjacent below is fine");
	ASSERT_OK(pk_fault_register(area + 5 * page, (size_t)page, on_fault,
				    &hits[5]), "adjacent above is fine");
	memset(hits, 0, sizeof(hits));
	hits[0].restore_prot = PROT_READ | PROT_WRITE;
	mprotect(area, (size_t)(NPAGES * page), PROT_NONE);
	store(area + 4 * page, 1);
	ASSERT_EQ(hits[0].calls, 1, "the first range still works after refusals");
	ASSERT_OK(pk_fault_unregister(area + 2 * page), "unregister");
	ASSERT_OK(pk_fault_unregister(area + page), "unregister");
	ASSERT_OK(pk_fault_unregister(area + 5 * page), "unregister");
	ASSERT_EQ(pk_fault_unregister(area + 2 * page), -ENOENT,
		  "unregister twice");
	ASSERT_EQ(pk_fault_unregister(NULL), -ENOENT, "unknown range");

	ASSERT_EQ(pk_trap_register(NULL, on_trap, NULL), -EINVAL, "trap NULL");
	ASSERT_EQ(pk_trap_register(pk_test_int3, NULL, NULL), -EINVAL,
		  "trap NULL handler");
	ASSERT_EQ(pk_trap_unregister(pk_test_int3), -ENOENT, "trap unknown");
	ASSERT_EQ(pk_die_register(NULL), -EINVAL, "die NULL");
}

static void test_traps(void)
{
	struct pk_fault_stats st0 = { .sz = sizeof(st0) }, st1 = st0;

	ASSERT_OK(pk_fault_stats(&st0), "stats");
	ASSERT_OK(pk_trap_register(pk_test_int3, on_trap, NULL), "trap int3");
	ASSERT_EQ(pk_trap_register(pk_test_int3, on_trap, NULL), -EEXIST,
		  "trap twice");
	ASSERT_OK(pk_trap_register(pk_test_ud2, on_trap, NULL), "trap ud2");
	run_int3();
	BARRIER();
	ASSERT_EQ(trap_calls, 1, "int3 claimed by its entry");
	run_ud2();
	BARRIER();
	ASSERT_EQ(trap_calls, 2, "ud2 claimed by its entry");
	ASSERT_OK(pk_fault_stats(&st1), "stats");
	ASSERT_EQ(st1.traps - st0.traps, 2, "stats.traps counts both");
	ASSERT_OK(pk_trap_unregister(pk_test_int3), "trap unregister");
	ASSERT_OK(pk_trap_unregister(pk_test_ud2), "trap unregister");
}

int main(void)
{
	page = sysconf(_SC_PAGESIZE);
	area = mmap(NULL, (size_t)(NPAGES * page), PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED)
		SKIP("mmap");
	test_ranges();
	test_errors();
	test_traps();
	return t_exit();
}
