// SPDX-License-Identifier: MIT
/* test_fault_own_tls.c - a watch over thread-local data of probekit's own signal path is refused (PK_SIGNAL_TLS). */
#include <errno.h>
#include <link.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "probekit.h"
#include "harness.h"

static char *tls;	/* this thread's copy of libprobekit's TLS block */
static size_t tls_size;

static int find_tls(struct dl_phdr_info *info, size_t sz, void *arg)
{
	(void)sz;
	(void)arg;
	if (!strstr(info->dlpi_name, "libprobekit.so"))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_TLS)
			tls_size = info->dlpi_phdr[i].p_memsz;
	tls = info->dlpi_tls_data;
	return 1;
}

static void on_watch(const struct pk_watch_hit *h, void *ctx)
{
	(void)h;
	(void)ctx;
}

int main(void)
{
	struct pk_watch *w;
	size_t busy = 0, tried = 0;

	/* A call first, so that the library's TLS is in use on this thread. */
	ASSERT_OK(pk_fault_stats(&(struct pk_fault_stats){
			  .sz = sizeof(struct pk_fault_stats) }), "stats");
	dl_iterate_phdr(find_tls, NULL);
	if (!tls || !tls_size)
		SKIP("libprobekit.so has no TLS block here (linked statically?)");
	/*
	 * Every 8-byte word of the block: the fault layer's per-thread state
	 * (its reader slot, a watch step in flight) is among them, and a
	 * watch there would make probekit's own handler fault. Words of other
	 * layers may be accepted: those are removed at once.
	 */
	for (size_t off = 0; off + 8 <= tls_size; off += 8) {
		int err = pk_watch_add(tls + off, 8, PK_WATCH_WRITE, on_watch,
				       NULL, &w);

		tried++;
		if (err == -EBUSY)
			busy++;
		else if (!err)
			pk_watch_remove(w);
	}
	printf("libprobekit TLS: %zu bytes, %zu of %zu words refused\n",
	       tls_size, busy, tried);
	ASSERT_TRUE(busy > 0, "a word of the signal path's TLS is refused");
	return t_exit();
}
