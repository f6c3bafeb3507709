/* SPDX-License-Identifier: MIT */
/* tsc.h - timing with the TSC: rdtsc/rdtscp, the invariant-TSC check, one calibration, ticks to ns by mult/shift. */
#ifndef PK_PROF_TSC_H
#define PK_PROF_TSC_H

/*
 * Design
 *
 * A timed call reads the clock twice; clock_gettime() costs tens of ns even
 * through the vDSO, rdtsc a few. So per call we keep raw ticks and convert
 * once, when results are reported:
 *
 *	ns = (ticks * mult) >> shift
 *
 * with a 64x64 -> 128-bit product (one mul instruction), so no value of
 * ticks overflows; mult is chosen as large as fits in 64 bits (shift up to
 * 96), so the conversion's relative error is below 2^-63 and the result is
 * within 1 ns of ticks * (ns per tick) for every 64-bit ticks (the kernel's
 * clocksource uses the same mult/shift form, with a 64-bit product and so
 * a bounded interval; we need neither).
 *
 * Calibration (pk_tsc_init()), once: three (tsc, CLOCK_MONOTONIC) pairs
 * 10 ms apart, each pair the tightest of a few tsc-clock_gettime-tsc
 * brackets. The two windows' rates must agree within 0.1 % (a window a
 * preemption stretched between its two readings fails this), else it is
 * tried again, up to 5 times; mult/shift then come from the whole 20 ms.
 *
 * Which clock. The TSC is used when CPUID 0x80000007 EDX bit 8 (invariant
 * TSC: constant rate in every P-, C- and T-state, so one rate holds for the
 * whole run and on every core) says so, and /proc/cpuinfo, where readable,
 * agrees (constant_tsc and nonstop_tsc). Otherwise, or with
 * PK_TSC_FALLBACK, ticks are CLOCK_MONOTONIC_RAW nanoseconds read through
 * the vDSO (about 20-30 ns a reading instead of 6-10; never a system
 * call where the vDSO has the clock): mult = 1, shift = 0, and everything
 * else is unchanged for the caller.
 *
 * Timestamps: pk_tsc_mono_ns() turns ticks into CLOCK_MONOTONIC ns through
 * the pair taken at calibration (so traces line up with other tools' clocks
 * to within the calibration's error times the time since).
 */

#include <stdint.h>
#include <time.h>

/* Why the TSC is (not) used: bits of struct pk_tsc.flags. */
#define PK_TSC_CPUID_INVARIANT	(1u << 0)	/* CPUID 0x80000007 EDX[8] */
#define PK_TSC_CPUINFO_CONSTANT	(1u << 1)	/* /proc/cpuinfo constant_tsc */
#define PK_TSC_CPUINFO_NONSTOP	(1u << 2)	/* /proc/cpuinfo nonstop_tsc */
#define PK_TSC_CPUINFO_READ	(1u << 3)	/* /proc/cpuinfo had a flags line */

/* pk_tsc_init()'s @how. */
#define PK_TSC_FALLBACK		(1u << 0)	/* CLOCK_MONOTONIC_RAW even if the TSC is invariant */

enum pk_tsc_source {
	PK_TSC_SRC_TSC = 1,		/* ticks are rdtsc's */
	PK_TSC_SRC_MONO_RAW = 2,	/* ticks are CLOCK_MONOTONIC_RAW ns */
};

struct pk_tsc {
	uint64_t mult;		/* ns = ticks * mult >> shift */
	uint32_t shift;
	uint32_t source;	/* enum pk_tsc_source */
	uint32_t flags;		/* PK_TSC_CPUID_INVARIANT ... */
	uint32_t tries;		/* calibration attempts used */
	uint64_t hz;		/* ticks per second, rounded (information) */
	uint64_t base_ticks;	/* a reading ... */
	uint64_t base_ns;	/* ... and CLOCK_MONOTONIC at that reading */
};

/**
 * pk_tsc_rdtsc() - the time stamp counter, unordered (rdtsc).
 *
 * Context: any thread, async-signal-safe.
 * Return: the counter.
 */
static inline uint64_t pk_tsc_rdtsc(void)
{
	uint32_t lo, hi;

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
}

/**
 * pk_tsc_rdtscp() - the time stamp counter after earlier instructions completed.
 * @aux: where to put IA32_TSC_AUX (Linux: cpu | node << 12), or NULL.
 *
 * rdtscp waits for earlier instructions (not later ones); use it at a
 * timed region's end, rdtsc at its start.
 *
 * Context: any thread, async-signal-safe.
 * Return: the counter.
 */
static inline uint64_t pk_tsc_rdtscp(uint32_t *aux)
{
	uint32_t lo, hi, c;

	__asm__ volatile("rdtscp" : "=a"(lo), "=d"(hi), "=c"(c));
	if (aux)
		*aux = c;
	return (uint64_t)hi << 32 | lo;
}

/**
 * pk_tsc_now() - a reading of @c's clock, in ticks.
 * @c: an initialised clock.
 *
 * Context: any thread, async-signal-safe.
 * Return: the ticks.
 */
static inline uint64_t pk_tsc_now(const struct pk_tsc *c)
{
	struct timespec ts;

	if (__builtin_expect(c->source == PK_TSC_SRC_TSC, 1))
		return pk_tsc_rdtsc();
	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/**
 * pk_tsc_to_ns() - a duration of @ticks in ns.
 * @c: an initialised clock.
 * @ticks: any 64-bit value.
 *
 * Context: any thread, async-signal-safe.
 * Return: floor(@ticks * mult / 2^shift); exact to 1 ns, no overflow.
 */
static inline uint64_t pk_tsc_to_ns(const struct pk_tsc *c, uint64_t ticks)
{
	return (uint64_t)(((unsigned __int128)ticks * c->mult) >> c->shift);
}

/**
 * pk_tsc_mono_ns() - the CLOCK_MONOTONIC time of reading @ticks.
 * @c: an initialised clock.
 * @ticks: a reading of pk_tsc_now() (before or after calibration).
 *
 * Context: any thread, async-signal-safe.
 * Return: ns.
 */
static inline uint64_t pk_tsc_mono_ns(const struct pk_tsc *c, uint64_t ticks)
{
	if (ticks >= c->base_ticks)
		return c->base_ns + pk_tsc_to_ns(c, ticks - c->base_ticks);
	return c->base_ns - pk_tsc_to_ns(c, c->base_ticks - ticks);
}

/**
 * pk_tsc_set_rate() - set @c's mult and shift for @ns nanoseconds per @ticks ticks.
 * @c: the clock.
 * @ns: a duration in ns, not 0.
 * @ticks: that duration in ticks, not 0.
 *
 * mult = round(@ns * 2^shift / @ticks) with the largest shift (<= 96)
 * that keeps mult below 2^64. Used by the calibration, and by tests with a
 * known rate.
 *
 * Context: any thread, async-signal-safe.
 * Return: 0, or -EINVAL if @ns or @ticks is 0 or a tick is longer than 2^64 ns.
 */
int pk_tsc_set_rate(struct pk_tsc *c, uint64_t ns, uint64_t ticks);

/**
 * pk_tsc_flags() - what CPUID and /proc/cpuinfo say about the TSC.
 *
 * Context: any thread, may block (reads /proc/cpuinfo).
 * Return: PK_TSC_CPUID_INVARIANT, PK_TSC_CPUINFO_* bits.
 */
uint32_t pk_tsc_flags(void);

/**
 * pk_tsc_init() - choose the clock and calibrate it.
 * @c: the clock to set up.
 * @how: 0, or PK_TSC_FALLBACK.
 *
 * Takes about 20 ms (more if windows must be taken again), sleeping.
 *
 * Context: any thread, may block; not from a signal handler.
 * Return: 0 (TSC calibrated, or the fallback clock chosen), or -EAGAIN if
 * 5 calibrations in a row disagreed (the machine too loaded to trust one);
 * @c then holds the fallback clock, usable as well.
 */
int pk_tsc_init(struct pk_tsc *c, unsigned int how);

#endif /* PK_PROF_TSC_H */
