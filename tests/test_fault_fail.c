// SPDX-License-Identifier: MIT
/* test_fault_fail.c - every failure path of every fault-layer entry point, and that nothing changed after it. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "probekit.h"
#include "harness.h"

static long page;
static char *area;	/* 4 private anonymous pages, read-write */

static int on_fault(const struct pk_fault *f, void *ctx)
{
	(void)ctx;
	mprotect(f->start, (size_t)page, PROT_READ | PROT_WRITE);
	return PK_FAULT_HANDLED;
}

static int action_is_default(int sig)
{
	struct sigaction cur;

	sigaction(sig, NULL, &cur);
	return !(cur.sa_flags & SA_SIGINFO) && cur.sa_handler == SIG_DFL;
}

/* Nothing registered: probekit's handler is on none of its signals. */
static int nothing_hooked(void)
{
	return action_is_default(SIGSEGV) && action_is_default(SIGBUS) &&
	       action_is_default(SIGTRAP) && action_is_default(SIGILL);
}

/*
 * Once a watchpoint existed, probekit keeps SIGTRAP and SIGSEGV hooked (for
 * signals still in flight); from then on "nothing registered" is checked by
 * registering the page as a range, which fails if anything holds it.
 */
static int watched_once;

static int page_free(void *p)
{
	void *pg = (void *)((uintptr_t)p & ~(uintptr_t)(page - 1));

	if (pk_fault_register(pg, (size_t)page, on_fault, NULL))
		return 0;
	return pk_fault_unregister(pg) == 0;
}

#define UNCHANGED(p, perm, what)                                               \
	do {                                                                   \
		ASSERT_TRUE(!strcmp(t_prot_of(p), perm), what ": protection");   \
		if (!watched_once)                                             \
			ASSERT_TRUE(nothing_hooked(),                          \
				    what ": no handler installed");            \
		else if (!strcmp(perm, "rw-p"))         \
			ASSERT_TRUE(page_free(p), what ": no range left");     \
	} while (0)


static void on_watch(const struct pk_watch_hit *h, void *ctx)
{
	(void)h;
	(void)ctx;
}

static int on_die(struct pk_notifier *nb, unsigned long sig, void *data)
{
	(void)nb;
	(void)sig;
	(void)data;
	return PK_DONE;
}

static struct pk_notifier die_nb = { .call = on_die };

static void test_fault_register(void)
{
	char *hole;
	int *e = &errno;
	uintptr_t epage = (uintptr_t)e & ~(uintptr_t)(page - 1);

	ASSERT_EQ(pk_fault_register(NULL, (size_t)page, on_fault, NULL),
		  -EINVAL, "NULL address");
	ASSERT_EQ(pk_fault_register(area, (size_t)page, NULL, NULL), -EINVAL,
		  "NULL handler");
	ASSERT_EQ(pk_fault_register(area, 0, on_fault, NULL), -EINVAL,
		  "empty range");
	ASSERT_EQ(pk_fault_register(area + 1, (size_t)page, on_fault, NULL),
		  -EINVAL, "unaligned start");
	ASSERT_EQ(pk_fault_register(area, (size_t)page - 1, on_fault, NULL),
		  -EINVAL, "unaligned length");
	ASSERT_EQ(pk_fault_register((void *)(uintptr_t)-page, 2 * (size_t)page,
				    on_fault, NULL), -EINVAL, "wrapping");
	hole = mmap(NULL, 3 * (size_t)page, PROT_READ,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	munmap(hole + page, (size_t)page);
	ASSERT_EQ(pk_fault_register(hole, 3 * (size_t)page, on_fault, NULL),
		  -EINVAL, "a hole in the middle");
	ASSERT_EQ(pk_fault_register(hole + page, (size_t)page, on_fault, NULL),
		  -EINVAL, "unmapped");
	UNCHANGED(hole, "r--p", "unmapped range");
	munmap(hole, 3 * (size_t)page);
	/* The page of this thread's errno: probekit's handler writes it. */
	ASSERT_EQ(pk_fault_register((void *)epage, (size_t)page, on_fault,
				    NULL), -EBUSY, "probekit's own data");
	UNCHANGED(area, "rw-p", "pk_fault_register failures");

	/* Overlaps: the registered range stays as it was. */
	ASSERT_OK(pk_fault_register(area + page, (size_t)page, on_fault, NULL),
		  "register");
	ASSERT_EQ(pk_fault_register(area, 2 * (size_t)page, on_fault, NULL),
		  -EEXIST, "overlap");
	ASSERT_EQ(pk_fault_register(area + page, (size_t)page, on_fault, NULL),
		  -EEXIST, "same range twice");
	ASSERT_EQ(pk_fault_unregister(area), -ENOENT, "unregister unknown");
	ASSERT_EQ(pk_fault_unregister(area + page + 1), -ENOENT,
		  "unregister by an inner address");
	ASSERT_OK(pk_fault_unregister(area + page), "unregister");
	ASSERT_EQ(pk_fault_unregister(area + page), -ENOENT,
		  "unregister twice");
	UNCHANGED(area + page, "rw-p", "after overlaps");
}

static int on_trap(const struct pk_fault *f, void *ctx)
{
	(void)f;
	(void)ctx;
	return PK_FAULT_HANDLED;
}

static void test_trap_die(void)
{
	ASSERT_EQ(pk_trap_register(NULL, on_trap, NULL), -EINVAL, "trap NULL");
	ASSERT_EQ(pk_trap_register(area, NULL, NULL), -EINVAL,
		  "trap NULL handler");
	ASSERT_EQ(pk_trap_unregister(area), -ENOENT, "trap unknown");
	ASSERT_OK(pk_trap_register(area, on_trap, NULL), "trap");
	ASSERT_EQ(pk_trap_register(area, on_trap, NULL), -EEXIST,
		  "trap twice");
	ASSERT_EQ(pk_trap_unregister(area + 1), -ENOENT, "trap elsewhere");
	ASSERT_OK(pk_trap_unregister(area), "trap unregister");
	ASSERT_EQ(pk_trap_unregister(area), -ENOENT, "trap unregister twice");

	ASSERT_EQ(pk_die_register(NULL), -EINVAL, "die NULL");
	ASSERT_EQ(pk_die_unregister(&die_nb), -ENOENT, "die unknown");
	ASSERT_EQ(pk_die_unregister(NULL), -EINVAL, "die unregister NULL");
	ASSERT_OK(pk_die_register(&die_nb), "die");
	ASSERT_EQ(pk_die_register(&die_nb), -EEXIST, "die twice");
	ASSERT_OK(pk_die_unregister(&die_nb), "die unregister");
	ASSERT_EQ(pk_die_unregister(&die_nb), -ENOENT, "die unregister twice");
	UNCHANGED(area, "rw-p", "trap and die failures");
}

static void test_watch_args(void)
{
	static uint64_t vp[512] __attribute__((aligned(4096)));
	uint64_t *const v = vp;
	struct pk_watch *w = NULL, *fake;

	ASSERT_EQ(pk_watch_add(NULL, 8, PK_WATCH_WRITE, on_watch, NULL, &w),
		  -EINVAL, "NULL address");
	ASSERT_EQ(pk_watch_add(v, 8, PK_WATCH_WRITE, on_watch, NULL, NULL),
		  -EINVAL, "NULL out");
	ASSERT_EQ(pk_watch_add(v, 8, PK_WATCH_WRITE, NULL, NULL, &w), -EINVAL,
		  "NULL handler");
	ASSERT_EQ(pk_watch_add(v, 16, PK_WATCH_WRITE, on_watch, NULL, &w),
		  -EINVAL, "length 16");
	ASSERT_EQ(pk_watch_add(v, 0, PK_WATCH_WRITE, on_watch, NULL, &w),
		  -EINVAL, "length 0");
	ASSERT_EQ(pk_watch_add((char *)v + 2, 4, PK_WATCH_WRITE, on_watch,
			       NULL, &w), -EINVAL, "unaligned");
	ASSERT_EQ(pk_watch_add(v, 8, 0, on_watch, NULL, &w), -EINVAL,
		  "no access kind");
	ASSERT_EQ(pk_watch_add(v, 8, PK_WATCH_WRITE | 0x10, on_watch, NULL,
			       &w), -EINVAL, "unknown access bit");
	ASSERT_EQ(pk_watch_add((void *)&errno, sizeof(errno), PK_WATCH_WRITE,
			       on_watch, NULL, &w), -EBUSY,
		  "probekit's own data (this thread's errno)");
	{
		char *none = mmap(NULL, 2 * (size_t)page, PROT_NONE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		munmap(none + page, (size_t)page);
		ASSERT_EQ(pk_watch_add(none, 8, PK_WATCH_WRITE, on_watch, NULL,
				       &w), -EINVAL, "unreadable page");
		ASSERT_EQ(pk_watch_add(none + page, 8, PK_WATCH_WRITE,
				       on_watch, NULL, &w), -EINVAL,
			  "unmapped page");
		UNCHANGED(none, "---p", "unreadable page");
		munmap(none, (size_t)page);
	}
	ASSERT_TRUE(w == NULL, "out untouched on failure");
	ASSERT_EQ(pk_watch_remove(NULL), -EINVAL, "remove NULL");
	ASSERT_EQ(pk_watch_remove((struct pk_watch *)v), -EINVAL,
		  "remove a non-watchpoint");

	/* A real handle, then one byte past it: not a handle. */
	watched_once = 1;
	ASSERT_OK(pk_watch_add(v, 8, PK_WATCH_WRITE, on_watch, NULL, &w),
		  "watch");
	fake = (struct pk_watch *)((char *)w + 1);
	ASSERT_EQ(pk_watch_remove(fake), -EINVAL, "remove a misaligned handle");
	ASSERT_OK(pk_watch_remove(w), "remove");
	ASSERT_EQ(pk_watch_remove(w), -ENOENT, "remove twice");
}

/* The first page of a mapping named [anon:probekit], or NULL. */
#define MAXMAPS 4096

/* The start of each one-page mapping of the process. */
static int map_starts(unsigned long *out)
{
	FILE *f = fopen("/proc/self/maps", "re");
	unsigned long end;
	char line[512];
	int n = 0;

	while (f && n < MAXMAPS && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx", &out[n], &end) == 2 &&
		    end - out[n] == (unsigned long)page)
			n++;
	if (f)
		fclose(f);
	return n;
}

/*
 * Register four ranges on @more: more than fit in the fault layer's static
 * table, so the table gets pages of its own. Return the one-page mapping
 * that appeared meanwhile (that table), or NULL.
 */
static void *probekit_table(char *more)
{
	static unsigned long before[MAXMAPS], after[MAXMAPS];
	int nb = map_starts(before), na;

	for (int i = 0; i < 4; i++)
		ASSERT_OK(pk_fault_register(more + i * page, (size_t)page,
					    on_fault, NULL), "one of 4 ranges");
	na = map_starts(after);
	for (int i = 0; i < na; i++) {
		int seen = 0;

		for (int j = 0; j < nb && !seen; j++)
			seen = before[j] == after[i];
		if (!seen && !strcmp(t_prot_of((void *)after[i]), "rw-p"))
			return (void *)after[i];
	}
	return NULL;
}

/* The page mechanism's rule (PROBEKIT_WATCH=page). */
static void test_watch_page_rule(void)
{
	struct pk_watch *w = NULL, *ws[17];
	volatile uint64_t local = 0;
	char *ro, *shared, *rwx, *more;
	void *tab;
	stack_t ss;
	int n, err;

	setenv("PROBEKIT_WATCH", "page", 1);

	ro = mmap(NULL, (size_t)page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS,
		  -1, 0);
	ASSERT_EQ(pk_watch_add(ro, 8, PK_WATCH_WRITE, on_watch, NULL, &w),
		  -EINVAL, "read-only page");
	UNCHANGED(ro, "r--p", "read-only page");
	munmap(ro, (size_t)page);
	ASSERT_EQ(pk_watch_add(ro, 8, PK_WATCH_WRITE, on_watch, NULL, &w),
		  -EINVAL, "unmapped page");

	shared = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE,
		      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ASSERT_EQ(pk_watch_add(shared, 8, PK_WATCH_WRITE, on_watch, NULL, &w),
		  -ENOTSUP, "shared mapping");
	UNCHANGED(shared, "rw-s", "shared mapping");
	munmap(shared, (size_t)page);

	rwx = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE | PROT_EXEC,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (rwx != MAP_FAILED) {
		ASSERT_EQ(pk_watch_add(rwx, 8, PK_WATCH_WRITE, on_watch, NULL,
				       &w), -ENOTSUP, "executable page");
		UNCHANGED(rwx, "rwxp", "executable page");
		munmap(rwx, (size_t)page);
	}

	ASSERT_EQ(pk_watch_add((void *)&local, 8, PK_WATCH_WRITE, on_watch,
			       NULL, &w), -EBUSY, "the caller's stack");
	UNCHANGED((void *)&local, "rw-p", "the caller's stack");

	ASSERT_OK(pk_thread_altstack(0), "altstack");
	sigaltstack(NULL, &ss);
	ASSERT_EQ(pk_watch_add((char *)ss.ss_sp + 64, 8, PK_WATCH_WRITE,
			       on_watch, NULL, &w), -EBUSY,
		  "the caller's signal stack");
	UNCHANGED((char *)ss.ss_sp + 64, "rw-p", "signal stack");

	/* A page inside a range of the fault chain, and the reverse. */
	ASSERT_OK(pk_fault_register(area, (size_t)page, on_fault, NULL),
		  "range");
	ASSERT_EQ(pk_watch_add(area + 8, 8, PK_WATCH_WRITE, on_watch, NULL,
			       &w), -EEXIST, "page in a registered range");
	ASSERT_TRUE(!strcmp(t_prot_of(area), "rw-p"), "its protection kept");
	/* A range table in pages of its own is probekit's. */
	more = mmap(NULL, 4 * (size_t)page, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	tab = probekit_table(more);
	ASSERT_TRUE(tab != NULL, "a table of 4 ranges has a page of its own");
	if (tab) {
		ASSERT_EQ(pk_watch_add(tab, 8, PK_WATCH_WRITE, on_watch, NULL,
				       &w), -EBUSY, "probekit's table page");
		ASSERT_EQ(pk_fault_register(tab, (size_t)page, on_fault, NULL),
			  -EBUSY, "a range over probekit's table page");
		ASSERT_TRUE(!strcmp(t_prot_of(tab), "rw-p"),
			    "probekit's table page: protection kept");
	}
	for (int i = 0; i < 4; i++)
		ASSERT_OK(pk_fault_unregister(more + i * page), "unregister");
	munmap(more, 4 * (size_t)page);
	ASSERT_OK(pk_fault_unregister(area), "range unregister");
	ASSERT_OK(pk_watch_add(area + 8, 8, PK_WATCH_WRITE, on_watch, NULL,
			       &w), "watch on the page now");
	ASSERT_TRUE(!strncmp(t_prot_of(area), "r--", 3), "page protected");
	ASSERT_EQ(pk_fault_register(area, (size_t)page, on_fault, NULL),
		  -EEXIST, "range over a watched page");
	ASSERT_EQ(pk_fault_unregister(area), -EBUSY,
		  "a watchpoint's range is not the caller's to remove");
	ASSERT_TRUE(!strncmp(t_prot_of(area), "r--", 3), "still protected");
	ASSERT_OK(pk_watch_remove(w), "remove");
	UNCHANGED(area, "rw-p", "after the watch went");

	/* Every slot taken: the next one is refused, the others stay. */
	for (n = 0; n < 17; n++) {
		err = pk_watch_add(area + 2 * page + 8 * n, 8, PK_WATCH_WRITE,
				   on_watch, NULL, &ws[n]);
		if (err)
			break;
	}
	ASSERT_EQ(n, 16, "16 watchpoints");
	ASSERT_EQ(err, -EBUSY, "the 17th refused");
	for (int i = 0; i < n; i++)
		ASSERT_OK(pk_watch_remove(ws[i]), "remove one of 16");
	UNCHANGED(area + 2 * page, "rw-p", "after 16 watchpoints");
	unsetenv("PROBEKIT_WATCH");
}

/* Writers called from inside a fault handler refuse with -EDEADLK. */
static int inner[8];
static struct pk_watch *inner_w;

static int on_fault_nested(const struct pk_fault *f, void *ctx)
{
	struct pk_watch *w;

	(void)ctx;
	inner[0] = pk_fault_register(area + 3 * page, (size_t)page, on_fault,
				     NULL);
	inner[1] = pk_fault_unregister(f->start);
	inner[2] = pk_trap_register(area, on_trap, NULL);
	inner[3] = pk_trap_unregister(area);
	inner[4] = pk_die_register(&die_nb);
	inner[5] = pk_die_unregister(&die_nb);
	inner[6] = pk_watch_add(area + 3 * page, 8, PK_WATCH_WRITE, on_watch,
				NULL, &w);
	inner[7] = pk_watch_remove(inner_w);
	mprotect(f->start, (size_t)page, PROT_READ | PROT_WRITE);
	return PK_FAULT_HANDLED;
}

static void test_deadlk(void)
{
	/* A page of its own: the page mechanism protects it. */
	static uint64_t vp[512] __attribute__((aligned(4096)));
	uint64_t *const v = vp;

	ASSERT_OK(pk_watch_add(v, 8, PK_WATCH_WRITE, on_watch, NULL,
			       &inner_w), "a watchpoint to remove from inside");
	ASSERT_OK(pk_fault_register(area + page, (size_t)page,
				    on_fault_nested, NULL), "range");
	mprotect(area + page, (size_t)page, PROT_NONE);
	*(volatile char *)(area + page) = 1;
	__asm__ volatile("" ::: "memory");
	for (int i = 0; i < 8; i++)
		ASSERT_EQ(inner[i], -EDEADLK, "writer inside a handler");
	ASSERT_TRUE(!strcmp(t_prot_of(area + 3 * page), "rw-p"),
		    "nothing registered from inside");
	ASSERT_OK(pk_fault_unregister(area + page), "range still there");
	ASSERT_OK(pk_watch_remove(inner_w), "watch still there");
	ASSERT_EQ(pk_die_unregister(&die_nb), -ENOENT, "no die handler added");
	ASSERT_EQ(pk_trap_unregister(area), -ENOENT, "no trap added");
}

static void test_misc(void)
{
	struct pk_fault_stats st = { .sz = 0 };
	stack_t ss, before;

	ASSERT_EQ(pk_fault_stats(NULL), -EINVAL, "stats NULL");
	ASSERT_EQ(pk_fault_stats(&st), -EINVAL, "stats sz 0");
	ASSERT_EQ(pk_signal_action(0, NULL, NULL), -EINVAL, "signal 0");
	ASSERT_EQ(pk_signal_action(NSIG + 1, NULL, NULL), -EINVAL,
		  "signal out of range");
	sigaltstack(NULL, &before);	/* ASan gives threads one of its own */
	ASSERT_EQ(pk_thread_altstack(16), -EINVAL, "altstack too small");
	ASSERT_EQ(pk_thread_altstack((size_t)1 << 40), -EINVAL,
		  "altstack too large");
	sigaltstack(NULL, &ss);
	ASSERT_TRUE(ss.ss_flags == before.ss_flags && ss.ss_sp == before.ss_sp &&
		    ss.ss_size == before.ss_size, "altstack unchanged on failure");
}

int main(void)
{
	page = sysconf(_SC_PAGESIZE);
	area = mmap(NULL, 4 * (size_t)page, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED)
		SKIP("mmap");
	ASSERT_TRUE(nothing_hooked(), "nothing hooked at start");
	test_misc();
	test_fault_register();
	test_trap_die();
	test_watch_args();
	test_deadlk();
	test_watch_page_rule();
	return t_exit();
}
