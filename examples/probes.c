// SPDX-License-Identifier: MIT
/* probes.c - probe a running function by name: count calls, see arguments, change one, time each call with a return probe. */
#include <probekit.h>
#include <stdio.h>
#include <time.h>

static unsigned long area_calls;

/* An ordinary function of this program; nothing in it knows about probes. */
__attribute__((noinline)) long area(long w, long h)
{
	area_calls++;
	return w * h;
}

static unsigned long calls;

/* Entry probe: sees the arguments; may change them before the body runs. */
static void on_area(struct pk_probe *p, struct pk_regs *regs, void *ctx)
{
	(void)p;
	(void)ctx;
	calls++;
	if ((long)pk_regs_arg(regs, 1) < 0)
		regs->rsi = 0;		/* clamp a negative height to 0 */
}

static long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* Return probe: a start time per call in its data area, the result at return. */
static int on_enter(struct pk_retprobe *rp, struct pk_regs *regs, void *data,
		    void *ctx)
{
	(void)rp;
	(void)regs;
	(void)ctx;
	*(long *)data = now_ns();
	return 0;		/* 0: call on_return for this call */
}

static void on_return(struct pk_retprobe *rp, struct pk_regs *regs, void *data,
		      void *ctx)
{
	(void)rp;
	(void)ctx;
	printf("  area() returned %ld after %ld ns\n", (long)pk_regs_ret(regs),
	       now_ns() - *(long *)data);
}

int main(void)
{
	PK_OPTS(pk_probe_opts, po, .symbol = "area", .pre = on_area);
	PK_OPTS(pk_retprobe_opts, ro, .symbol = "area", .entry = on_enter,
		.ret = on_return, .data_size = 16);
	struct pk_probe_info info = { .sz = sizeof(info) };
	struct pk_retprobe *rp;
	struct pk_probe *p;
	long a;

	/* Found through the symbol table: a static function would do too. */
	if (pk_probe_create(&po, &p) || pk_retprobe_create(&ro, &rp))
		return 1;
	pk_probe_get_info(p, &info);
	printf("area() at %#lx, %s probe, %zu bytes\n", (unsigned long)info.addr,
	       info.kind == PK_PROBE_JUMP ? "jump-optimised" : "int3",
	       info.bytes);

	if (pk_probe_register(&p, 1) || pk_retprobe_register(&rp, 1))
		return 1;
	a = area(6, 7);
	printf("area(6, 7) = %ld\n", a);
	a += area(3, -2);	/* the entry probe clamps h to 0 */
	printf("area(3, -2) = %ld with the probe\n", a - 42);
	if (a != 42 || calls != 2)
		return 1;

	/* Both return once no thread is inside their handlers. */
	if (pk_retprobe_unregister(&rp, 1) || pk_probe_unregister(&p, 1))
		return 1;
	a = area(3, -2);
	printf("area(3, -2) = %ld without\n", a);
	pk_retprobe_destroy(rp);
	pk_probe_destroy(p);
	return a == -6 && calls == 2 && area_calls == 3 ? 0 : 1;
}
