// SPDX-License-Identifier: MIT
/* test_fault_watch_handle.c - a removed watch's handle stays stale: removing it again is -ENOENT and leaves the watch that took its place alone (issue 9, item 4). */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "probekit.h"
#include "harness.h"

static volatile uint64_t a __attribute__((aligned(4096)));
static volatile uint64_t b __attribute__((aligned(4096)));
static volatile int hits_a, hits_b;

static void on_a(const struct pk_watch_hit *h, void *ctx)
{
	(void)h;
	(void)ctx;
	hits_a++;
}

static void on_b(const struct pk_watch_hit *h, void *ctx)
{
	(void)h;
	(void)ctx;
	hits_b++;
}

static void run(const char *mech)
{
	struct pk_watch *w1, *w2, *w3;
	char what[128];

	snprintf(what, sizeof(what), "%s: add the first", mech);
	if (!ASSERT_OK(pk_watch_add((void *)&a, 8, PK_WATCH_WRITE, on_a, NULL,
				    &w1), what))
		return;
	ASSERT_OK(pk_watch_remove(w1), "remove it");
	/* The same entry serves the next add. */
	snprintf(what, sizeof(what), "%s: add the second", mech);
	if (!ASSERT_OK(pk_watch_add((void *)&b, 8, PK_WATCH_WRITE, on_b, NULL,
				    &w2), what))
		return;
	snprintf(what, sizeof(what), "%s: a new handle, not the stale one",
		 mech);
	ASSERT_TRUE(w2 != w1, what);
	snprintf(what, sizeof(what), "%s: the stale handle: -ENOENT", mech);
	ASSERT_EQ(pk_watch_remove(w1), -ENOENT, what);
	hits_b = 0;
	b = 1;
	snprintf(what, sizeof(what), "%s: the second still reports", mech);
	ASSERT_EQ(hits_b, 1, what);
	ASSERT_OK(pk_watch_remove(w2), "remove the second");
	ASSERT_EQ(pk_watch_remove(w2), -ENOENT, "twice: -ENOENT");
	ASSERT_EQ(pk_watch_remove(w1), -ENOENT, "the first again: -ENOENT");

	/* Many adds and removes: no handle comes back. */
	for (int i = 0; i < 100; i++) {
		if (!ASSERT_OK(pk_watch_add((void *)&a, 8, PK_WATCH_WRITE, on_a,
					    NULL, &w3), "add in a loop"))
			break;
		if (w3 == w1 || w3 == w2) {
			ASSERT_TRUE(0, "a handle came back");
			pk_watch_remove(w3);
			break;
		}
		ASSERT_OK(pk_watch_remove(w3), "remove in a loop");
	}
	hits_a = 0;
	a = 2;
	ASSERT_EQ(hits_a, 0, "nothing watches a");
}

int main(void)
{
	run("hardware where available");
	setenv("PROBEKIT_WATCH", "page", 1);
	run("page");
	return t_exit();
}
