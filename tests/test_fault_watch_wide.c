// SPDX-License-Identifier: MIT
/* test_fault_watch_wide.c - page watchpoints: an access that starts before a watched value and covers it is reported (decoded range, not si_addr). */
#include <stdlib.h>
#include <sys/mman.h>

#include "probekit.h"
#include "harness.h"

static volatile int hits;

static void on_hit(const struct pk_watch_hit *h, void *ctx)
{
	(void)h;
	(void)ctx;
	hits++;
}

static uint64_t load8(const void *p)
{
	uint64_t v;

	__asm__ volatile("movq (%1), %0" : "=r"(v) : "r"(p) : "memory");
	return v;
}

/* mov (%rax),%rax: the address register is also the destination (-O0). */
static uint64_t load8_self(void *p)
{
	uint64_t v;

	__asm__ volatile("movq (%0), %0" : "=r"(v) : "0"(p) : "memory");
	return v;
}

static void store8(void *p, uint64_t v)
{
	__asm__ volatile("movq %1, (%0)" : : "r"(p), "r"(v) : "memory");
}

static void run(char *pg, const char *mech)
{
	struct pk_watch *w;
	char what[96];
	int before;

	memset(pg, 0, 64);
	/* A 4-byte read watch at pg + 12; 8-byte accesses at pg + 8. */
	hits = 0;
	snprintf(what, sizeof(what), "%s: read watch", mech);
	if (!ASSERT_OK(pk_watch_add(pg + 12, 4, PK_WATCH_READ, on_hit, NULL,
				    &w), what))
		return;
	ASSERT_EQ(load8(pg), 0, "an 8-byte read beside it");
	ASSERT_EQ(hits, 0, "not reported");
	ASSERT_EQ(load8(pg + 16), 0, "an 8-byte read after it");
	ASSERT_EQ(hits, 0, "not reported");
	ASSERT_EQ(load8(pg + 8), 0, "an 8-byte read from 4 bytes before it");
	snprintf(what, sizeof(what), "%s: the read covering it is reported",
		 mech);
	ASSERT_EQ(hits, 1, what);
	ASSERT_EQ(load8_self(pg + 8), 0, "the same through its own register");
	snprintf(what, sizeof(what),
		 "%s: a covering read that overwrites its address register",
		 mech);
	ASSERT_EQ(hits, 2, what);
	ASSERT_OK(pk_watch_remove(w), "remove");

	/* A store of the same value over it: touched, nothing changed. */
	hits = 0;
	store8(pg + 8, 0x1234);
	if (!ASSERT_OK(pk_watch_add(pg + 12, 4, PK_WATCH_WRITE, on_hit, NULL,
				    &w), "write watch"))
		return;
	store8(pg + 8, 0x1234);
	snprintf(what, sizeof(what), "%s: a same-value store covering it",
		 mech);
	ASSERT_EQ(hits, 1, what);
	before = hits;
	store8(pg, 1);
	ASSERT_EQ(hits, before, "a store beside it: not reported");
	ASSERT_OK(pk_watch_remove(w), "remove");
}

int main(void)
{
	char *pg = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (pg == MAP_FAILED)
		SKIP("mmap");
	setenv("PROBEKIT_WATCH", "page", 1);
	run(pg, "alias");
	setenv("PROBEKIT_WATCH_NOALIAS", "1", 1);
	run(pg, "page opened");
	munmap(pg, 4096);
	return t_exit();
}
