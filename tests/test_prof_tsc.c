// SPDX-License-Identifier: MIT
/* test_prof_tsc.c - the TSC clock: a 20 ms sleep measured through it, exact conversion at large values, the fallback. */
#include <errno.h>

#include "harness.h"
#include "tsc.h"

static uint64_t mono(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * A 20 ms nanosleep timed by @c and by CLOCK_MONOTONIC around the same
 * readings. Tolerance: the calibration's windows agree within 0.1 %, so
 * the rate is within 0.1 % (20 us of 20 ms); plus 5 us for the two readings
 * not being simultaneous (each bracket is tens of ns; a preemption between
 * a tick and a clock reading is the rest). The lower bound is nanosleep's:
 * it never returns early.
 */
static void check_sleep(const struct pk_tsc *c, const char *what)
{
	struct timespec w = { 0, 20000000 };
	int ok = 0;

	/* Three attempts: a preemption between paired readings is not the clock's fault. */
	for (int i = 0; i < 3 && !ok; i++) {
		uint64_t m0 = mono(CLOCK_MONOTONIC), t0 = pk_tsc_now(c);
		uint64_t t1, m1, ns, ref, diff;

		nanosleep(&w, NULL);
		t1 = pk_tsc_now(c);
		m1 = mono(CLOCK_MONOTONIC);
		ns = pk_tsc_to_ns(c, t1 - t0);
		ref = m1 - m0;
		diff = ns > ref ? ns - ref : ref - ns;
		printf("%s: slept 20 ms: clock %" PRIu64 " ns, CLOCK_MONOTONIC %" PRIu64 " ns, diff %" PRIu64 " ns\n",
		       what, ns, ref, diff);
		ok = ns >= 20000000 && diff <= ref / 1000 + 5000;
	}
	ASSERT_TRUE(ok, "20 ms sleep within 0.1 % + 5 us of CLOCK_MONOTONIC, >= 20 ms");
}

/* floor(t * num / den) by long division in 128 bits: the reference. */
static uint64_t ref_conv(uint64_t t, uint64_t num, uint64_t den)
{
	return (uint64_t)((unsigned __int128)t * num / den);
}

static void check_conversion(void)
{
	static const uint64_t big[] = { 1, 999, 1000000007, 1ull << 40, 1ull << 62,
					(1ull << 63) + 12345, UINT64_MAX / 3, UINT64_MAX };
	/* ns per tick as num/den: 1 GHz, 2 GHz, 3 GHz, 2.1 GHz, 3.6 GHz. */
	static const uint64_t rate[][2] = { { 1, 1 }, { 1, 2 }, { 1, 3 }, { 10, 21 }, { 5, 18 } };
	struct pk_tsc c = { 0 };
	int bad = 0;

	for (size_t r = 0; r < sizeof(rate) / sizeof(rate[0]); r++) {
		ASSERT_OK(pk_tsc_set_rate(&c, rate[r][0] * 1000000000u, rate[r][1] * 1000000000u), "set_rate");
		for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
			uint64_t want = ref_conv(big[i], rate[r][0], rate[r][1]);
			uint64_t got = pk_tsc_to_ns(&c, big[i]);
			uint64_t d = got > want ? got - want : want - got;

			if (d > 1) {
				bad++;
				fprintf(stderr, "rate %" PRIu64 "/%" PRIu64 " ticks %" PRIu64 ": %" PRIu64
					" want %" PRIu64 "\n", rate[r][0], rate[r][1], big[i], got, want);
			}
		}
	}
	ASSERT_EQ(bad, 0, "ticks -> ns within 1 ns up to UINT64_MAX ticks");
	ASSERT_OK(pk_tsc_set_rate(&c, 1, 1), "1 GHz");
	ASSERT_TRUE(pk_tsc_to_ns(&c, UINT64_MAX) == UINT64_MAX, "1 GHz: identity at UINT64_MAX");
	ASSERT_EQ(pk_tsc_set_rate(&c, 0, 5), -EINVAL, "0 ns refused");
	ASSERT_EQ(pk_tsc_set_rate(&c, 5, 0), -EINVAL, "0 ticks refused");
	/* A 64-bit product would overflow here: 2^40 ticks at mult ~2^63. */
	ASSERT_OK(pk_tsc_set_rate(&c, 1000000000u, 3000000000u), "3 GHz");
	ASSERT_TRUE(pk_tsc_to_ns(&c, 3ull << 40) == 1ull << 40, "3 GHz: 3*2^40 ticks = 2^40 ns");
}

int main(void)
{
	struct pk_tsc c, fb;
	uint32_t fl = pk_tsc_flags();
	int ret;

	printf("cpuid invariant %d, cpuinfo read %d constant_tsc %d nonstop_tsc %d\n",
	       !!(fl & PK_TSC_CPUID_INVARIANT), !!(fl & PK_TSC_CPUINFO_READ),
	       !!(fl & PK_TSC_CPUINFO_CONSTANT), !!(fl & PK_TSC_CPUINFO_NONSTOP));
	check_conversion();

	ret = pk_tsc_init(&c, 0);
	ASSERT_TRUE(ret == 0 || ret == -EAGAIN, "init: 0 or -EAGAIN");
	printf("clock: %s, %" PRIu64 " Hz, mult %" PRIu64 " shift %u, %u tries\n",
	       c.source == PK_TSC_SRC_TSC ? "tsc" : "CLOCK_MONOTONIC_RAW", c.hz, c.mult, c.shift, c.tries);
	if ((fl & PK_TSC_CPUID_INVARIANT) && ret == 0)
		ASSERT_EQ(c.source, PK_TSC_SRC_TSC, "invariant TSC: used");
	check_sleep(&c, c.source == PK_TSC_SRC_TSC ? "tsc" : "fallback");
	/* Timestamps: now through the clock against CLOCK_MONOTONIC. */
	{
		uint64_t m0 = mono(CLOCK_MONOTONIC), ts = pk_tsc_mono_ns(&c, pk_tsc_now(&c));
		uint64_t m1 = mono(CLOCK_MONOTONIC);

		ASSERT_TRUE(ts + 20000 >= m0 && ts <= m1 + 20000, "mono_ns within 20 us of CLOCK_MONOTONIC");
	}

	ASSERT_OK(pk_tsc_init(&fb, PK_TSC_FALLBACK), "fallback init");
	ASSERT_EQ(fb.source, PK_TSC_SRC_MONO_RAW, "fallback: CLOCK_MONOTONIC_RAW");
	ASSERT_EQ(pk_tsc_to_ns(&fb, 123456789), 123456789, "fallback: ticks are ns");
	check_sleep(&fb, "fallback");
	return t_exit();
}
