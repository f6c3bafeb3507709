// SPDX-License-Identifier: MIT
/* test_fault_watch_alias.c - page watchpoints move each access to the page's alias: register and RIP-relative forms, locked RMW, reads, the fallback, fork(), removal. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probekit.h"
#include "harness.h"

/* The watched page: only these, so other accesses do not touch it. */
__attribute__((aligned(4096))) uint64_t pk_alias_page[512];
#define var pk_alias_page[0]

static volatile int hits;

/* A second watched page, and a variable on a page of its own. */
__attribute__((aligned(4096))) uint64_t pk_alias_page2[512];
__attribute__((aligned(4096))) uint64_t pk_alias_page3[512];
static volatile int hits2;

/* A handler that writes another watched page (from a SIGTRAP handler). */
static void on_hit_writes(const struct pk_watch_hit *h, void *ctx)
{
	(void)h;
	(void)ctx;
	hits2++;
	pk_alias_page2[8] = pk_alias_page2[8] + 1;	/* page-watched */
}
static volatile uint64_t last_old, last_new;
static volatile unsigned int last_access;

static void on_hit(const struct pk_watch_hit *h, void *ctx)
{
	(void)ctx;
	last_old = h->old_value;
	last_new = h->new_value;
	last_access = h->access;
	hits++;
}

#define BARRIER() __asm__ volatile("" ::: "memory")

static void store_reg(uint64_t *p, uint64_t v)
{
	__asm__ volatile("movq %1, (%0)" : : "r"(p), "r"(v) : "memory");
}

static void store_rip(uint64_t v)
{
	__asm__ volatile("movq %0, pk_alias_page(%%rip)" : : "r"(v) : "memory");
}

static void add_locked(uint64_t *p, uint64_t v)
{
	__asm__ volatile("lock addq %1, (%0)" : : "r"(p), "r"(v) : "memory");
}

static uint64_t load_reg(uint64_t *p)
{
	uint64_t v;

	__asm__ volatile("movq (%1), %0" : "=r"(v) : "r"(p) : "memory");
	return v;
}

/* rep stosq has a second (hidden) operand: it cannot move, the page opens. */
static void store_rep(uint64_t *p, uint64_t v)
{
	__asm__ volatile("rep stosq"
			 : "+D"(p), "+c"((unsigned long){ 1 })
			 : "a"(v) : "memory");
}

int main(void)
{
	struct pk_watch *w;
	uint64_t opened;
	int status = 0;
	pid_t pid;

	setenv("PROBEKIT_WATCH", "page", 1);
	var = 1;
	if (!ASSERT_OK(pk_watch_add(&var, 8, PK_WATCH_WRITE, on_hit, NULL, &w),
		       "watch"))
		return t_exit();
	ASSERT_TRUE(!strcmp(t_prot_of(&var), "r--s"),
		    "the page is a protected shared (memfd) page now");
	opened = t_watch_open_steps();

	store_reg(&var, 2);
	BARRIER();
	ASSERT_EQ(hits, 1, "store through a register");
	ASSERT_EQ(last_old, 1, "old value");
	ASSERT_EQ(last_new, 2, "new value");
	ASSERT_EQ(var, 2, "the value is in the page");

	store_rip(3);
	BARRIER();
	ASSERT_EQ(hits, 2, "RIP-relative store");
	ASSERT_EQ(last_new, 3, "its value");
	ASSERT_EQ(var, 3, "in the page");

	add_locked(&var, 10);
	BARRIER();
	ASSERT_EQ(hits, 3, "lock add");
	ASSERT_EQ(last_old, 3, "lock add: old");
	ASSERT_EQ(last_new, 13, "lock add: new");

	ASSERT_EQ(load_reg(&var), 13, "a read goes through (write watch)");
	ASSERT_EQ(hits, 3, "and is not a hit");
	store_reg(&pk_alias_page[100], 5);
	BARRIER();
	ASSERT_EQ(hits, 3, "other bytes of the page: no hit");
	ASSERT_EQ(pk_alias_page[100], 5, "but written");
	ASSERT_EQ(t_watch_open_steps(), opened, "none of these opened the page");

	store_rep(&var, 20);
	BARRIER();
	ASSERT_EQ(hits, 4, "rep stosq: still reported");
	ASSERT_EQ(last_new, 20, "rep stosq: value");
	ASSERT_EQ(t_watch_open_steps(), opened + 1, "by opening the page for its step");

	/* A child of fork() has a page of its own. */
	pid = fork();
	if (pid == 0) {
		store_reg(&var, 99);
		_exit(var == 99 && hits == 5 ? 0 : 1);
	}
	waitpid(pid, &status, 0);
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		    "the child writes its copy, watched");
	ASSERT_EQ(var, 20, "the parent's value is untouched");
	store_reg(&var, 21);
	BARRIER();
	ASSERT_EQ(hits, 5, "the parent is still watched");

	ASSERT_OK(pk_watch_remove(w), "remove");
	ASSERT_TRUE(!strcmp(t_prot_of(&var), "rw-p"),
		    "a private writable page again");
	ASSERT_EQ(var, 21, "with its bytes");
	ASSERT_EQ(pk_alias_page[100], 5, "all of them");
	store_reg(&var, 22);
	ASSERT_EQ(hits, 5, "no hit after removal");

	/* A read watch: reads are hits too, the page is PROT_NONE. */
	ASSERT_OK(pk_watch_add(&var, 8, PK_WATCH_READ, on_hit, NULL, &w),
		  "read watch");
	ASSERT_TRUE(!strcmp(t_prot_of(&var), "---s"), "PROT_NONE shared page");
	ASSERT_EQ(load_reg(&var), 22, "read through the alias");
	ASSERT_EQ(hits, 6, "a read is a hit");
	ASSERT_EQ(last_access, 0, "value unchanged");
	store_rip(23);
	BARRIER();
	ASSERT_EQ(hits, 7, "a write too");
	ASSERT_EQ(last_access, PK_ACCESS_WRITE, "changed");
	ASSERT_OK(pk_watch_remove(w), "remove read watch");
	ASSERT_EQ(var, 23, "value kept");
	ASSERT_TRUE(!strcmp(t_prot_of(&var), "rw-p"), "private again");

	/*
	 * A watch handler runs in a SIGTRAP handler (SIGTRAP blocked) and
	 * writes another page that a page watchpoint protects: that fault is
	 * stepped too (or opened) and the process lives on.
	 */
	{
		struct pk_watch *w2, *w3;
		int before = hits;

		ASSERT_OK(pk_watch_add(&pk_alias_page2[0], 8, PK_WATCH_WRITE,
				       on_hit, NULL, &w2), "page watch 2");
		unsetenv("PROBEKIT_WATCH");	/* hardware where possible */
		ASSERT_OK(pk_watch_add(&pk_alias_page3[0], 8, PK_WATCH_WRITE,
				       on_hit_writes, NULL, &w3), "watch 3");
		for (int i = 1; i <= 3; i++) {
			store_reg(&pk_alias_page3[0], (uint64_t)i);
			BARRIER();
		}
		ASSERT_EQ(hits2, 3, "the handler ran for each write");
		ASSERT_EQ(pk_alias_page2[8], 3, "and its writes landed");
		ASSERT_EQ(hits, before, "unwatched bytes of page 2: no hit");
		ASSERT_OK(pk_watch_remove(w3), "remove 3");
		ASSERT_OK(pk_watch_remove(w2), "remove 2");
	}
	return t_exit();
}
