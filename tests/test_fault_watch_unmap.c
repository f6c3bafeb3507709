// SPDX-License-Identifier: MIT
/* test_fault_watch_unmap.c - a page watch whose page the program unmaps or maps over: writes there fault as without probekit, and pk_watch_remove() leaves the program's new mapping alone (issue 9, item 4). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
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

static int exited_0(int status)
{
	return status != -1 && WIFEXITED(status) && !WEXITSTATUS(status);
}

/*
 * Two watches on an aliased page, the page unmapped and fresh rw memory
 * mapped there: removing one of them (not the page's last) and adding
 * another on the page leave the new mapping alone (its protection, its
 * bytes; its writes succeed); the add is refused with -ESTALE. Once the
 * stale watches are gone the new mapping can be watched.
 */
static void remap_then_more(long psz)
{
	uint64_t *pg = new_page(psz);
	struct pk_watch *w1, *w2, *w3 = NULL;
	char what[160];
	int status, ok = 1, err;
	void *q;

	if (!ASSERT_TRUE(pg, "mmap"))
		return;
	if (!ASSERT_OK(pk_watch_add(pg, 8, PK_WATCH_WRITE, on_hit, NULL, &w1),
		       "more: watch pg[0]") ||
	    !ASSERT_OK(pk_watch_add(pg + 1, 8, PK_WATCH_WRITE, on_hit, NULL,
				    &w2), "more: watch pg[1]"))
		return;
	ASSERT_OK(munmap(pg, (size_t)psz), "more: munmap the watched page");
	q = mmap(pg, (size_t)psz, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (!ASSERT_TRUE(q == pg, "more: fresh rw memory at the page"))
		return;
	memset(pg, 0xcd, (size_t)psz);
	hits = 0;
	ASSERT_OK(pk_watch_remove(w1), "more: remove pg[0]'s (not the last)");
	snprintf(what, sizeof(what),
		 "more: that remove left the new mapping rw (%s)", t_prot_of(pg));
	ASSERT_TRUE(!strcmp(t_prot_of(pg), "rw-p"), what);
	status = write_in_child(pg, 7);
	snprintf(what, sizeof(what),
		 "more: a write to the new mapping succeeds (status %#x)", status);
	ASSERT_TRUE(exited_0(status), what);
	err = pk_watch_add(pg + 2, 8, PK_WATCH_WRITE, on_hit, NULL, &w3);
	ASSERT_EQ(err, -ESTALE, "more: another watch on the page: -ESTALE");
	if (!err)
		pk_watch_remove(w3);
	snprintf(what, sizeof(what),
		 "more: that add left the new mapping rw (%s)", t_prot_of(pg));
	ASSERT_TRUE(!strcmp(t_prot_of(pg), "rw-p"), what);
	status = write_in_child(pg + 2, 8);
	snprintf(what, sizeof(what),
		 "more: a write there still succeeds (status %#x)", status);
	ASSERT_TRUE(exited_0(status), what);
	ASSERT_OK(pk_watch_remove(w2), "more: remove pg[1]'s (the last)");
	for (long i = 0; i < psz; i++)
		ok &= ((unsigned char *)pg)[i] == 0xcd;
	ASSERT_TRUE(ok, "more: the new mapping's bytes are its own");
	ASSERT_TRUE(!strcmp(t_prot_of(pg), "rw-p"), "more: and still rw");
	ASSERT_EQ(hits, 0, "more: nothing reported");
	/* The stale watches gone: the new mapping is watched as any. */
	if (ASSERT_OK(pk_watch_add(pg + 2, 8, PK_WATCH_WRITE, on_hit, NULL,
				   &w3), "more: now the new mapping's watch")) {
		((volatile uint64_t *)pg)[2] = 9;
		ASSERT_EQ(hits, 1, "more: and its write is reported");
		ASSERT_OK(pk_watch_remove(w3), "more: remove it");
	}
	munmap(pg, (size_t)psz);
}

/* The descriptor of /proc/self/maps probekit keeps open, or -1. */
static int probekit_maps_fd(void)
{
	char want[64], path[300], got[64];
	struct dirent *de;
	DIR *d = opendir("/proc/self/fd");
	int fd = -1;

	snprintf(want, sizeof(want), "/proc/%d/maps", (int)getpid());
	while (d && (de = readdir(d))) {
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/self/fd/%s", de->d_name);
		n = readlink(path, got, sizeof(got) - 1);
		if (n < 0)
			continue;
		got[n] = 0;
		if (!strcmp(got, want) && atoi(de->d_name) != dirfd(d))
			fd = atoi(de->d_name);
	}
	if (d)
		closedir(d);
	return fd;
}

/*
 * The program closes probekit's /proc/self/maps descriptor and the number
 * comes back for another process's maps (where the watched address is an
 * ordinary private page): a watched write is still served and reported,
 * not passed on as a fault (the other file's answer is not asked). In a
 * child (the write would kill it): exit 0 when all went well.
 */
static int fd_reused_child(long psz)
{
	uint64_t *pg = new_page(psz);
	struct pk_watch *w;
	pid_t other;
	int fd, o, ret = 0;
	char path[64];

	if (!pg)
		return 10;
	other = fork();	/* pg is an ordinary private page in it */
	if (other == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);	/* the writer may die */
		alarm(20);
		for (;;)
			pause();
	}
	if (other < 0)
		return 11;
	if (pk_watch_add(pg, 8, PK_WATCH_WRITE, on_hit, NULL, &w)) {
		ret = 12;
		goto out;
	}
	fd = probekit_maps_fd();
	if (fd < 0) {
		ret = 77;	/* no descriptor kept: nothing to test */
		goto out;
	}
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)other);
	o = open(path, O_RDONLY | O_CLOEXEC);
	if (o < 0 || dup2(o, fd) != fd) {
		ret = 13;
		goto out;
	}
	close(o);
	hits = 0;
	((volatile uint64_t *)pg)[0] = 3;	/* SIGSEGV if passed on */
	if (hits != 1)
		ret = 14;
	if (pk_watch_remove(w))
		ret = 15;
out:
	kill(other, SIGKILL);
	waitpid(other, NULL, 0);
	return ret;
}

static void fd_reused(long psz)
{
	struct rlimit no_core = { 0, 0 };
	int status = -1;
	char what[128];
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		setrlimit(RLIMIT_CORE, &no_core);
		alarm(10);
		_exit(fd_reused_child(psz));
	}
	if (pid > 0)
		waitpid(pid, &status, 0);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
		printf("fd reused: no /proc/self/maps descriptor kept; not run\n");
		return;
	}
	snprintf(what, sizeof(what),
		 "fd reused: the watched write is served (status %#x)", status);
	ASSERT_TRUE(exited_0(status), what);
}

int main(void)
{
	long psz = sysconf(_SC_PAGESIZE);

	setenv("PROBEKIT_WATCH", "page", 1);
	unmap_then_write("alias", psz);
	map_over("alias, new rw data", psz, PROT_READ | PROT_WRITE);
	map_over("alias, new read-only data", psz, PROT_READ);
	remap_then_more(psz);
	fd_reused(psz);
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
