// SPDX-License-Identifier: MIT
/* faults.c - user-space faults handled by range: dirty-page tracking (a GC write barrier), and a watchpoint on one variable. */
#include <probekit.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define NPAGES 8

static char *heap;
static long page;
static unsigned char dirty[NPAGES];

/*
 * Called only for faults inside [heap, heap + NPAGES pages): the fault
 * chain finds the range by address, without asking anyone else. Note the
 * page, let the write through, and say so: the access is retried.
 */
static int on_write(const struct pk_fault *f, void *ctx)
{
	size_t i = (size_t)((char *)f->addr - heap) / (size_t)page;

	(void)ctx;
	if (f->access != PK_ACCESS_WRITE)
		return PK_FAULT_UNHANDLED;	/* a crash, as without probekit */
	dirty[i] = 1;
	mprotect(heap + i * page, (size_t)page, PROT_READ | PROT_WRITE);
	return PK_FAULT_HANDLED;
}

static volatile long balance;
static int changes;
static long seen[4][2];		/* old, new: printed later (signal handler) */

static void on_balance(const struct pk_watch_hit *hit, void *ctx)
{
	(void)ctx;
	if (changes < 4) {
		seen[changes][0] = (long)hit->old_value;
		seen[changes][1] = (long)hit->new_value;
	}
	changes++;
}

int main(void)
{
	struct pk_watch *w;
	int ndirty = 0, err;

	page = sysconf(_SC_PAGESIZE);
	heap = mmap(NULL, NPAGES * page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS,
		    -1, 0);
	if (heap == MAP_FAILED ||
	    pk_fault_register(heap, NPAGES * page, on_write, NULL))
		return 1;

	/* The program just writes; the barrier sees the first write per page. */
	heap[0] = 1;
	heap[5 * page + 17] = 2;
	heap[5 * page + 18] = 3;
	for (int i = 0; i < NPAGES; i++)
		ndirty += dirty[i];
	printf("dirty pages: %d (0 and 5: %d %d)\n", ndirty, dirty[0], dirty[5]);
	if (pk_fault_unregister(heap) || ndirty != 2 || !dirty[0] || !dirty[5])
		return 1;

	/* A watchpoint: hardware breakpoint where allowed, else page protection. */
	err = pk_watch_add((void *)&balance, sizeof(balance), PK_WATCH_WRITE,
			   on_balance, NULL, &w);
	if (err) {
		/* The page-protection fallback always exists: a failure is real. */
		printf("pk_watch_add: %s\n", strerror(-err));
		return 1;
	}
	balance = 100;
	balance -= 30;
	if (pk_watch_remove(w))
		return 1;
	balance = 0;		/* not watched any more: not seen */
	for (int i = 0; i < changes && i < 4; i++)
		printf("  balance: %ld -> %ld\n", seen[i][0], seen[i][1]);
	munmap(heap, NPAGES * page);
	return changes == 2 ? 0 : 1;
}
