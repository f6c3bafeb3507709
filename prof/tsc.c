// SPDX-License-Identifier: MIT
/* tsc.c - the invariant-TSC check and the calibration against CLOCK_MONOTONIC (see tsc.h). */
#include <cpuid.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tsc.h"

int pk_tsc_set_rate(struct pk_tsc *c, uint64_t ns, uint64_t ticks)
{
	unsigned __int128 m = 0;
	int s;

	if (!ns || !ticks)
		return -EINVAL;
	for (s = 96; s >= 0; s--) {
		/* ns < 2^64, so ns << 96 < 2^160 would overflow: limit by ns's width. */
		if (64 - __builtin_clzll(ns) + s > 127)
			continue;
		m = (((unsigned __int128)ns << s) + ticks / 2) / ticks;
		if (!(m >> 64))
			break;
	}
	if (s < 0)
		return -EINVAL;
	c->mult = (uint64_t)m;
	c->shift = (uint32_t)s;
	c->hz = (uint64_t)(((unsigned __int128)ticks * 1000000000u + ns / 2) / ns);
	return 0;
}

static int has_word(const char *line, const char *w)
{
	size_t n = strlen(w);

	for (const char *p = line; (p = strstr(p, w)); p += n)
		if ((p == line || p[-1] == ' ' || p[-1] == '\t') &&
		    (p[n] == ' ' || p[n] == '\n' || p[n] == 0))
			return 1;
	return 0;
}

uint32_t pk_tsc_flags(void)
{
	unsigned int a, b, c, d;
	uint32_t flags = 0;
	char line[8192];
	FILE *f;

	if (__get_cpuid_max(0x80000000, NULL) >= 0x80000007 &&
	    __get_cpuid(0x80000007, &a, &b, &c, &d) && (d & (1u << 8)))
		flags |= PK_TSC_CPUID_INVARIANT;
	f = fopen("/proc/cpuinfo", "re");
	if (!f)
		return flags;
	/* The first CPU's flags line (lines are long: 8 KiB is ample). */
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "flags", 5))
			continue;
		flags |= PK_TSC_CPUINFO_READ;
		if (has_word(line, "constant_tsc"))
			flags |= PK_TSC_CPUINFO_CONSTANT;
		if (has_word(line, "nonstop_tsc"))
			flags |= PK_TSC_CPUINFO_NONSTOP;
		break;
	}
	fclose(f);
	return flags;
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A (tsc, CLOCK_MONOTONIC) pair: the tightest of 5 brackets, tsc at its middle. */
static void pair(uint64_t *tsc, uint64_t *ns)
{
	uint64_t best = UINT64_MAX;

	for (int i = 0; i < 5; i++) {
		uint64_t a = pk_tsc_rdtscp(NULL), n = mono_ns(), b = pk_tsc_rdtscp(NULL);

		if (b - a < best) {
			best = b - a;
			*tsc = a + (b - a) / 2;
			*ns = n;
		}
	}
}

static void fallback(struct pk_tsc *c)
{
	uint64_t raw0, ns, raw1;
	struct pk_tsc tmp = { .source = PK_TSC_SRC_MONO_RAW };

	c->source = PK_TSC_SRC_MONO_RAW;
	c->mult = 1;
	c->shift = 0;
	c->hz = 1000000000u;
	raw0 = pk_tsc_now(&tmp);
	ns = mono_ns();
	raw1 = pk_tsc_now(&tmp);
	c->base_ticks = raw0 + (raw1 - raw0) / 2;
	c->base_ns = ns;
}

#define PK_TSC_WINDOW_NS 10000000L
#define PK_TSC_TRIES 5

int pk_tsc_init(struct pk_tsc *c, unsigned int how)
{
	const uint32_t cpuinfo = PK_TSC_CPUINFO_CONSTANT | PK_TSC_CPUINFO_NONSTOP;
	struct timespec w = { 0, PK_TSC_WINDOW_NS };
	uint64_t t[3], n[3];

	memset(c, 0, sizeof(*c));
	c->flags = pk_tsc_flags();
	if ((how & PK_TSC_FALLBACK) || !(c->flags & PK_TSC_CPUID_INVARIANT) ||
	    ((c->flags & PK_TSC_CPUINFO_READ) && (c->flags & cpuinfo) != cpuinfo)) {
		fallback(c);
		return 0;
	}
	for (c->tries = 1; c->tries <= PK_TSC_TRIES; c->tries++) {
		double r1, r2;

		pair(&t[0], &n[0]);
		nanosleep(&w, NULL);
		pair(&t[1], &n[1]);
		nanosleep(&w, NULL);
		pair(&t[2], &n[2]);
		r1 = (double)(t[1] - t[0]) / (double)(n[1] - n[0]);
		r2 = (double)(t[2] - t[1]) / (double)(n[2] - n[1]);
		if (r1 > 0 && r2 > 0 && (r1 > r2 ? r1 - r2 : r2 - r1) <= 0.001 * r1)
			break;
	}
	if (c->tries > PK_TSC_TRIES || pk_tsc_set_rate(c, n[2] - n[0], t[2] - t[0])) {
		uint32_t flags = c->flags, tries = PK_TSC_TRIES;

		fallback(c);
		c->flags = flags;
		c->tries = tries;
		return -EAGAIN;
	}
	c->source = PK_TSC_SRC_TSC;
	c->base_ticks = t[2];
	c->base_ns = n[2];
	return 0;
}
