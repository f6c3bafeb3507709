/* SPDX-License-Identifier: MIT */
/* watch_writers.h - the writer threads of the watch stress tests: WRITERS threads write a watched word and a word of their own on the same page. */
#ifndef PK_TEST_WATCH_WRITERS_H
#define PK_TEST_WATCH_WRITERS_H

#include <stdint.h>

#include "probekit.h"

#ifndef WRITERS
#error "define WRITERS (the number of writer threads) before watch_writers.h"
#endif

static volatile uint64_t vars[512] __attribute__((aligned(4096)));
static volatile int stop;
static unsigned long hits, writes[WRITERS];

static void on_hit(const struct pk_watch_hit *h, void *ctx)
{
	(void)h;
	(void)ctx;
	__atomic_add_fetch(&hits, 1, __ATOMIC_RELAXED);
}

/* Writer i writes vars[0] (watched) and vars[8 + i] (same page, not). */
static void *writer(void *arg)
{
	long i = (long)(uintptr_t)arg;
	unsigned long n = 0;

	while (!stop) {
		vars[0] = n;
		vars[8 + i] = n;
		n++;
	}
	writes[i] = n;
	return NULL;
}

#endif /* PK_TEST_WATCH_WRITERS_H */
