// SPDX-License-Identifier: MIT
/* test_text_basic.c - batches and single pokes on generated code, page layouts, a library. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "probekit.h"
#include "harness.h"
#include "codegen.h"

/* Flip every site of @cg to @state in one batch; check every function. */
static void flip_all(struct cg *cg, int state, const char *what)
{
	struct pk_batch *b;
	uint8_t old[5], nw[5];
	int bad = 0;

	if (!ASSERT_OK(pk_batch_create(&b), "create"))
		return;
	for (size_t i = 0; i < cg->n; i++) {
		cg_site_bytes(cg, i, !state, old);
		cg_site_bytes(cg, i, state, nw);
		ASSERT_OK(pk_batch_add(b, cg_fn(cg, i), nw, 5, old, 0), "add");
	}
	ASSERT_EQ(pk_batch_count(b), cg->n, "count");
	ASSERT_EQ(pk_batch_commit(b), (int)cg->n, what);
	pk_batch_free(b);
	for (size_t i = 0; i < cg->n; i++)
		bad += cg_call(cg, i) != cg_val(i, state);
	ASSERT_EQ(bad, 0, "functions returning the wrong value");
}

static void layouts(enum cg_kind kind)
{
	struct cg cg;

	/* One page; neighbouring pages; a site straddling a page boundary. */
	ASSERT_OK(cg_create(&cg, kind, 64, 32, 0), "cg one page");
	flip_all(&cg, 1, "one page on");
	flip_all(&cg, 0, "one page off");
	cg_destroy(&cg);

	ASSERT_OK(cg_create(&cg, kind, 400, 32, 0), "cg several pages");
	flip_all(&cg, 1, "pages on");
	flip_all(&cg, 0, "pages off");
	cg_destroy(&cg);

	ASSERT_OK(cg_create(&cg, kind, 3, 4096, 4096 - 2), "cg straddling");
	flip_all(&cg, 1, "straddle on");
	flip_all(&cg, 0, "straddle off");
	cg_destroy(&cg);
}

static void single_poke(void)
{
	struct cg cg;
	uint8_t on[5], off[5];

	ASSERT_OK(cg_create(&cg, CG_JMP, 2, 32, 0), "cg");
	cg_site_bytes(&cg, 0, 1, on);
	cg_site_bytes(&cg, 0, 0, off);
	ASSERT_EQ(pk_text_poke(cg_fn(&cg, 0), on, 5, off, 0), 1, "poke");
	ASSERT_EQ(cg_call(&cg, 0), cg_val(0, 1), "poked function");
	ASSERT_EQ(cg_call(&cg, 1), cg_val(1, 0), "neighbour untouched");
	/* The same bytes again: valid, nothing to write. */
	ASSERT_EQ(pk_text_poke(cg_fn(&cg, 0), on, 5, NULL, 0), 1, "same bytes");
	ASSERT_EQ(cg_call(&cg, 0), cg_val(0, 1), "still poked");
	cg_destroy(&cg);
}

static void shared_library(void)
{
	char path[4096];
	const char *dir = getenv("PK_TARGET_DIR");
	static const uint8_t nop5[5] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };
	uint8_t jmp[5] = { 0xe9, 6, 0, 0, 0 };
	int (*fn)(void);
	uint8_t *site;
	void *h;

	snprintf(path, sizeof(path), "%s/libtexttarget.so", dir ? dir : ".");
	h = dlopen(path, RTLD_NOW);
	if (!ASSERT_TRUE(h != NULL, "dlopen libtexttarget"))
		return;
	fn = (int (*)(void))dlsym(h, "pk_tt_site_fn");
	site = (uint8_t *)fn;
	ASSERT_EQ(fn(), 1, "library function before");
	ASSERT_EQ(pk_text_poke(site, jmp, 5, nop5, 0), 1, "poke library");
	ASSERT_EQ(fn(), 2, "library function after");
	ASSERT_EQ(pk_text_poke(site, nop5, 5, jmp, 0), 1, "poke back");
	ASSERT_EQ(fn(), 1, "library function restored");
	dlclose(h);
}

static char sync_msg[256];

static void capture(enum pk_log_level level, const char *msg, void *ctx)
{
	(void)level;
	(void)ctx;
	if (strstr(msg, "cross-core sync by"))
		snprintf(sync_msg, sizeof(sync_msg), "%s", msg);
}

int main(void)
{
	struct pk_text_stats st = { .sz = sizeof(st) };
	const char *want = getenv("PROBEKIT_SYNC");

	pk_set_log(capture, NULL);

	layouts(CG_JMP);
	layouts(CG_MOV);
	single_poke();
	shared_library();

	ASSERT_OK(pk_text_stats(&st), "stats");
	ASSERT_GE(st.commits, 12, "commits counted");
	ASSERT_TRUE(st.sync_method != NULL, "a sync method was chosen");
	ASSERT_TRUE(strstr(sync_msg, st.sync_method) != NULL,
		    "the chosen sync method was logged");
	/* PROBEKIT_SYNC=expedited|mprotect forces a fallback (tests/extra.cmake). */
	if (want && st.sync_method)
		ASSERT_TRUE(strstr(st.sync_method, want) != NULL,
			    "the forced sync method is used");
	ASSERT_LE(st.syncs, st.commits * 3, "at most three syncs per commit");
	printf("sync method: %s, %llu commits, %llu syncs, %llu writes\n",
	       st.sync_method, (unsigned long long)st.commits,
	       (unsigned long long)st.syncs, (unsigned long long)st.writes);
	return t_exit();
}
