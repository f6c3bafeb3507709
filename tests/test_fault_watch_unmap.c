// SPDX-License-Identifier: MIT
/* test_fault_watch_unmap.c - a page watch whose page the program unmaps or maps over: writes there fault as without probekit, and pk_watch_remove() leaves the program's new mapping alone (issue 9, item 4). */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probekit.h"
#include "harness.h"

static volatile int hits;

static void on_hit(const struct pk_watch_hit *h, void *ctx)
{
	(void)h;
	(void)ctx;
	hits++;
}

/*
 * Write @v to @p in a child: its wait status (a write that must fault ends
 * in SIGSEGV; no core file). One that faults for ever (the fault handled
 * and retried without end) ends in SIGALRM.
 */
static int write_in_child(volatile uint64_t *p, uint64_t v)
{
	struct rlimit no_core = { 0, 0 };
	int status = -1;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		setrlimit(RLIMIT_CORE, &no_core);
		alarm(10);
		*p = v;
		_exit(0);
	}
	if (pid < 0)
		return -1;
	waitpid(pid, &status, 0);
	return status;
}

static int killed_by_segv(int status)
{
	return status != -1 && WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV;
}

static uint64_t *new_page(long psz)
{
	void *p = mmap(NULL, (size_t)psz, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* Watch pg[0], munmap the page, write it: SIGSEGV; remove maps nothing. */
static void unmap_then_write(const char *mech, long psz)
{
	uint64_t *pg = new_page(psz);
	struct pk_watch *w;
	char what[128];
	int status;

	if (!ASSERT_TRUE(pg, "mmap"))
		return;
	pg[0] = 1;
	snprintf(what, sizeof(what), "%s: watch", mech);
	if (!ASSERT_OK(pk_watch_add(pg, 8, PK_WATCH_WRITE, on_hit, NULL, &w),
		       what))
		return;
	hits = 0;
	((volatile uint64_t *)pg)[0] = 2;
	snprintf(what, sizeof(what), "%s: a write is reported", mech);
	ASSERT_EQ(hits, 1, what);
	ASSERT_OK(munmap(pg, (size_t)psz), "munmap the watched page");
	status = write_in_child(pg, 5);
	snprintf(what, sizeof(what),
		 "%s: a write to the unmapped page is killed by SIGSEGV "
		 "(status %#x)", mech, status);
	ASSERT_TRUE(killed_by_segv(status), what);
	ASSERT_EQ(hits, 1, "nothing reported");
	snprintf(what, sizeof(what), "%s: remove", mech);
	ASSERT_OK(pk_watch_remove(w), what);
	snprintf(what, sizeof(what), "%s: remove mapped nothing there (%s)",
		 mech, t_prot_of(pg));
	ASSERT_TRUE(!t_prot_of(pg)[0], what);
	status = write_in_child(pg, 6);
	ASSERT_TRUE(killed_by_segv(status), "after remove: still SIGSEGV");
}

/*
 * Watch pg[0], map new data over the page (MAP_FIXED, @prot): with
 * PROT_READ a write there faults; pk_watch_remove() leaves the new bytes
 * and protection as they are.
 */
static void map_over(const char *mech, long psz, int prot)
{
	uint64_t *pg = new_page(psz);
	struct pk_watch *w;
	char what[160], want[8];
	int status, ok = 1;
	void *q;

	if (!ASSERT_TRUE(pg, "mmap"))
		return;
	memset(pg, 0x11, (size_t)psz);
	snprintf(what, sizeof(what), "%s: watch", mech);
	if (!ASSERT_OK(pk_watch_add(pg, 8, PK_WATCH_WRITE, on_hit, NULL, &w),
		       what))
		return;
	/* New data, mapped over the watched page. */
	q = mmap(pg, (size_t)psz, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (!ASSERT_TRUE(q == pg, "mmap MAP_FIXED over the watched page"))
		return;
	memset(pg, 0xab, (size_t)psz);
	if (prot != (PROT_READ | PROT_WRITE))
		mprotect(pg, (size_t)psz, prot);
	hits = 0;
	if (!(prot & PROT_WRITE)) {
		status = write_in_child(pg, 5);
		snprintf(what, sizeof(what),
			 "%s: a write to the new read-only mapping is killed "
			 "by SIGSEGV (status %#x)", mech, status);
		ASSERT_TRUE(killed_by_segv(status), what);
	}
	snprintf(what, sizeof(what), "%s: remove", mech);
	ASSERT_OK(pk_watch_remove(w), what);
	for (long i = 0; i < psz; i++)
		ok &= ((unsigned char *)pg)[i] == 0xab;
	snprintf(what, sizeof(what),
		 "%s: remove left the new mapping's bytes (pg[0] = %#llx)",
		 mech, (unsigned long long)pg[0]);
	ASSERT_TRUE(ok, what);
	snprintf(want, sizeof(want), "%c%c-p", prot & PROT_READ ? 'r' : '-',
		 prot & PROT_WRITE ? 'w' : '-');
	snprintf(what, sizeof(what), "%s: and its protection (%s, not %s)",
		 mech, want, t_prot_of(pg));
	ASSERT_TRUE(!strcmp(t_prot_of(pg), want), what);
	ASSERT_EQ(hits, 0, "nothing reported");
	munmap(pg, (size_t)psz);
}

int main(void)
{
	long psz = sysconf(_SC_PAGESIZE);

	setenv("PROBEKIT_WATCH", "page", 1);
	unmap_then_write("alias", psz);
	map_over("alias, new rw data", psz, PROT_READ | PROT_WRITE);
	map_over("alias, new read-only data", psz, PROT_READ);
	/*
	 * Without an alias the page is the program's own private page:
	 * recognised by the protection probekit gave it. A new mapping with
	 * that same protection cannot be told apart (probekit(7)).
	 */
	setenv("PROBEKIT_WATCH_NOALIAS", "1", 1);
	unmap_then_write("no alias", psz);
	map_over("no alias, new rw data", psz, PROT_READ | PROT_WRITE);
	return t_exit();
}
