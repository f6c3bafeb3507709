// SPDX-License-Identifier: MIT
/* time.c - the agent's "time" mode: a return probe per function, each call's inclusive duration into this thread's histogram cell in the record. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent.h"
#include "hist.h"
#include "tsc.h"

/*
 * Where durations go, and why there (protocol.h, PKA_MODE_TIME, has the
 * layout): per thread and function, a cell in the shared record that
 * only that thread writes. Per-thread memory of the process merged into
 * the record at thread or process exit would be lost by _exit() and by a
 * fatal signal, and merging on the command's read interval needs a
 * thread of ours in every process; writing straight into a cell of the
 * record costs the same as a private histogram (one thread, no atomics)
 * and keeps count's promise: whatever returned is in the file.
 *
 * The hit path (time_entry(), time_ret()) is async-signal-safe: a cell or
 * thread block is claimed by compare-and-swap and raw system calls, no
 * malloc, no lock. Probe hits inside our handlers (a probed function we
 * call) are the library's misses, so a handler never runs inside
 * another on one thread, and a cell never sees two writers.
 *
 * The cost of timing itself: start() arms a return probe on an empty
 * function of ours and times 2000 calls of it: their median (the part of
 * the probe machinery between the two clock readings: the rest of the
 * entry handler, the trampoline, the return landing, the dispatcher) is
 * overhead_ns, subtracted from every duration (clamped at 0). What it
 * cannot know: the time a nested timed call adds to its callers'
 * inclusive durations (the whole of a timed call's cost, bench_time's
 * time/timed_call), which stays in them.
 */

static struct pka_header *tm_h;
static struct pka_time_area *tm_a;
static struct pk_tsc tm_clk = { .mult = 1, .shift = 0,
				.source = PK_TSC_SRC_MONO_RAW };
static uint64_t tm_ovh;

/*
 * This thread's block, or NULL; without one, calls left before the next
 * claim() and the current back-off (claims double it up to TM_BACKOFF).
 */
static __thread struct pka_time_thread *tm_self
	__attribute__((tls_model("initial-exec")));
static __thread unsigned int tm_skip __attribute__((tls_model("initial-exec")));
static __thread unsigned int tm_backoff
	__attribute__((tls_model("initial-exec")));
#define TM_BACKOFF 4096u

/*
 * This process's pid, in a MADV_WIPEONFORK page: 0 in the child of any
 * kind of fork (fork(), _Fork(), a raw clone() without CLONE_VM), which
 * skip pthread_atfork() handlers. The child's one thread still holds its
 * parent's tm_self; record() compares the block's owner pid with this
 * one and drops a block that is not this process's, so a child never
 * writes its parent's cells. Without the page (madvise() refused:
 * before Linux 4.14), only fork() is covered (time_atfork_child()).
 */
static uint32_t *tm_pidw;
static uint32_t tm_pid_static;

static inline uint64_t tm_now_start(void)
{
	return pk_tsc_now(&tm_clk);
}

/*
 * rdtsc at the return too, not rdtscp: the return handler runs after the
 * function's ret, the landing, the register saves and the dispatcher, so
 * the function's own instructions are done long before, and rdtscp costs
 * twice rdtsc here (prof/README.md: 21 ns against 11-13). What ordering
 * slack remains is in the calibration as well, and so subtracted.
 */
static inline uint64_t tm_now_end(void)
{
	return pk_tsc_now(&tm_clk);
}

static struct pka_time_thread *thr(uint32_t b)
{
	return (struct pka_time_thread *)((char *)tm_h + tm_a->thr_at +
					  (uint64_t)b * tm_a->thr_size);
}

static struct pka_time_cell *cell(uint32_t c)
{
	return (struct pka_time_cell *)((char *)tm_h + tm_a->cell_at) + c;
}

/* This process's pid (tm_pidw), read again after any fork. */
static inline uint32_t tm_pid(void)
{
	uint32_t pid = __atomic_load_n(tm_pidw, __ATOMIC_RELAXED);

	if (__builtin_expect(!pid, 0)) {
		/* Every thread of the child stores the same value. */
		pid = (uint32_t)pka_sys(SYS_getpid, 0, 0, 0);
		__atomic_store_n(tm_pidw, pid, __ATOMIC_RELAXED);
	}
	return pid;
}

/*
 * A thread block for this thread: a free one, else one whose owner is
 * gone (a thread that ended, or, in a fork()ed child, the parent's ids:
 * the pid part differs, so the child never writes its parent's cells).
 * A scan for gone owners at most every 4096 failed calls. Shared with
 * trace.c (agent.h): @owner0 is block 0's owner, blocks @stride bytes
 * apart. The owners are loaded before any compare-and-swap (with all
 * blocks taken, a try costs plain loads).
 */
int pka_block_claim(uint64_t *owner0, uint32_t n, uint64_t stride,
		    unsigned int *fails)
{
	uint32_t pid = (uint32_t)pka_sys(SYS_getpid, 0, 0, 0);
	uint32_t tid = (uint32_t)pka_sys(SYS_gettid, 0, 0, 0);
	uint64_t me = (uint64_t)pid << 32 | tid;

#define OWNER(b) ((uint64_t *)((char *)owner0 + (uint64_t)(b) * stride))
	for (uint32_t b = 0; b < n; b++) {
		uint64_t zero = 0;

		if (!__atomic_load_n(OWNER(b), __ATOMIC_RELAXED) &&
		    __atomic_compare_exchange_n(OWNER(b), &zero, me, 0,
						__ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return (int)b;
	}
	if ((*fails)++ & 4095)
		return -1;
	for (uint32_t b = 0; b < n; b++) {
		uint64_t o = __atomic_load_n(OWNER(b), __ATOMIC_RELAXED);

		/*
		 * Same process, gone thread (or this very tid: a thread that
		 * had it ended); or another process that is gone.
		 */
		if (o != me && (uint32_t)(o >> 32) == pid &&
		    pka_sys(SYS_tgkill, pid, (long)(uint32_t)o, 0) != -ESRCH)
			continue;
		if ((uint32_t)(o >> 32) != pid &&
		    pka_sys(SYS_kill, (long)(o >> 32), 0, 0) != -ESRCH)
			continue;
		if (__atomic_compare_exchange_n(OWNER(b), &o, me, 0,
						__ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
			return (int)b;
	}
#undef OWNER
	return -1;
}

/*
 * A try of record()'s back-off (a thread without a block tries on ever
 * fewer calls): it scans for gone owners, a system call a block, at the
 * thread's first try (a new thread takes a gone one's block) and once
 * the back-off is at its longest, so at most every TM_BACKOFF calls.
 */
static struct pka_time_thread *claim(void)
{
	unsigned int no_scan = tm_backoff && tm_backoff < TM_BACKOFF;
	int b = pka_block_claim(&thr(0)->owner, tm_a->nthr, tm_a->thr_size,
				&no_scan);

	return b < 0 ? NULL : thr((uint32_t)b);
}

/* No cell: the probe's slot, atomically (calls, total, min, max). */
static void add_slot(uint32_t i, uint64_t ns)
{
	struct pka_time *s = pka_record_slot(tm_h, i);
	uint64_t inv = ~ns, cur;

	__atomic_fetch_add(&s->calls, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&s->total_ns, ns, __ATOMIC_RELAXED);
	cur = __atomic_load_n(&s->min_inv, __ATOMIC_RELAXED);
	while (inv > cur && !__atomic_compare_exchange_n(&s->min_inv, &cur, inv,
							 1, __ATOMIC_RELAXED,
							 __ATOMIC_RELAXED))
		;
	cur = __atomic_load_n(&s->max_ns, __ATOMIC_RELAXED);
	while (ns > cur && !__atomic_compare_exchange_n(&s->max_ns, &cur, ns, 1,
							 __ATOMIC_RELAXED,
							 __ATOMIC_RELAXED))
		;
}

static void record(uint32_t i, uint64_t ns)
{
	struct pka_time_thread *t = tm_self;
	struct pka_time_cell *c;
	uint32_t at, idx, *bk;

	/* A block of the process we were forked from (tm_pidw): not ours. */
	if (t && __builtin_expect((uint32_t)(__atomic_load_n(&t->owner,
			__ATOMIC_RELAXED) >> 32) != tm_pid(), 0)) {
		t = tm_self = NULL;
		tm_skip = tm_backoff = 0;
	}
	if (!t) {
		if (tm_skip) {
			tm_skip--;
			add_slot(i, ns);
			return;
		}
		t = tm_self = claim();
		if (!t) {
			tm_backoff = tm_backoff ? tm_backoff * 2 : 1;
			if (tm_backoff > TM_BACKOFF)
				tm_backoff = TM_BACKOFF;
			tm_skip = tm_backoff;
			add_slot(i, ns);
			return;
		}
		tm_backoff = 0;
	}
	at = t->cell[i];
	if (__builtin_expect(!at, 0)) {
		/*
		 * Looked at first: a pair that found no cell tries on each
		 * call, and cells_used must never wrap back into taken ones.
		 */
		if (__atomic_load_n(&tm_a->cells_used, __ATOMIC_RELAXED) >=
		    tm_a->ncell) {
			add_slot(i, ns);
			return;
		}
		at = __atomic_fetch_add(&tm_a->cells_used, 1, __ATOMIC_RELAXED);
		if (at >= tm_a->ncell) {
			add_slot(i, ns);
			return;
		}
		c = cell(at);
		c->probe = i;
		c->thread = (uint32_t)(((char *)t - ((char *)tm_h + tm_a->thr_at)) /
				       tm_a->thr_size);
		/* Release: a reader that finds the cell finds it named. */
		__atomic_store_n(&t->cell[i], at + 1, __ATOMIC_RELEASE);
		at++;
	}
	c = cell(at - 1);
	idx = pk_hist_index(ns);
	bk = &c->bucket[idx < PKA_TIME_BUCKETS ? idx : PKA_TIME_BUCKETS - 1];
	/*
	 * A full 32-bit bucket (2^32 calls of one thread in one bucket):
	 * this call to the slot, exact but without histogram, rather than
	 * a wrap (the command takes a cell's calls as its buckets' sum).
	 */
	if (__builtin_expect(*bk == UINT32_MAX, 0)) {
		add_slot(i, ns);
		return;
	}
	(*bk)++;
	c->calls++;
	c->total_ns += ns;
	if (~ns > c->min_inv)
		c->min_inv = ~ns;
	if (ns > c->max_ns)
		c->max_ns = ns;
}

/* Entry: the clock, unless the call is the agent's own (pka_busy). */
static int time_entry(struct pk_retprobe *rp, struct pk_regs *regs, void *data,
		      void *ctx)
{
	(void)rp;
	(void)regs;
	(void)ctx;
	if (pka_busy || !tm_a)
		return 1;
	*(uint64_t *)data = tm_now_start();
	return 0;
}

static void time_ret(struct pk_retprobe *rp, struct pk_regs *regs, void *data,
		     void *ctx)
{
	uint64_t t1 = tm_now_end(), ns;

	(void)rp;
	(void)regs;
	ns = pk_tsc_to_ns(&tm_clk, t1 - *(uint64_t *)data);
	record((uint32_t)(uintptr_t)ctx, ns > tm_ovh ? ns - tm_ovh : 0);
}

static void time_probe(struct pka_header *h, unsigned int i,
		       struct pk_probe_opts *o)
{
	(void)h;
	o->ctx = (void *)(uintptr_t)i;
}

static void time_ret_opts(struct pk_retprobe_opts *o)
{
	o->entry = time_entry;
	o->ret = time_ret;
	o->data_size = 16;
	/*
	 * This file is built -mgeneral-regs-only and a hit calls nothing
	 * outside it but with the TSC: no vector save (the fallback clock
	 * calls libc's clock_gettime(), which makes no such promise).
	 */
	if (tm_clk.source == PK_TSC_SRC_TSC)
		o->flags |= PK_PROBE_F_GPR_ONLY;
	/* Calls the library could not time: counted in the slot. */
	if (tm_h)
		o->missed = &((struct pka_time *)pka_record_slot(
				tm_h, (uint32_t)(uintptr_t)o->ctx))->missed;
}

static uint64_t time_area(uint32_t nprobe)
{
	return pka_time_area_size(nprobe);
}

/* ------------------------------------------------------- calibration */

#define CAL_CALLS 2000

/*
 * What the calibration times: exported (agent.map) so that the symbol
 * layer knows its extent, which a probe needs; never a spec's (the
 * agent's object is nobody's, arm.c).
 */
__attribute__((visibility("default"), noinline, noclone)) void
pka_time_empty(void)
{
	__asm__ volatile("" ::: "memory");
}

static uint64_t cal_ns[CAL_CALLS];
static unsigned int cal_n;

static int cal_entry(struct pk_retprobe *rp, struct pk_regs *regs, void *data,
		     void *ctx)
{
	(void)rp;
	(void)regs;
	(void)ctx;
	*(uint64_t *)data = tm_now_start();
	return 0;
}

static void cal_ret(struct pk_retprobe *rp, struct pk_regs *regs, void *data,
		    void *ctx)
{
	uint64_t t1 = tm_now_end();

	(void)rp;
	(void)regs;
	(void)ctx;
	if (cal_n < CAL_CALLS)
		cal_ns[cal_n++] = pk_tsc_to_ns(&tm_clk, t1 - *(uint64_t *)data);
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * Time CAL_CALLS calls of the empty function: overhead_ns is their
 * median. The probe stays armed (never called again): disarming it
 * would cost another text batch in every process.
 */
static int calibrate(void)
{
	/* The same kind of hit as time_ret_opts() gives the specs. */
	PK_OPTS(pk_retprobe_opts, o, .addr = (void *)pka_time_empty,
		.entry = cal_entry, .ret = cal_ret, .data_size = 16,
		.flags = tm_clk.source == PK_TSC_SRC_TSC ? PK_PROBE_F_GPR_ONLY : 0);
	struct pk_retprobe *rp;
	int err;

	err = pk_retprobe_create(&o, &rp);
	if (err)
		return err;
	err = pk_retprobe_register(&rp, 1);
	if (err) {
		pk_retprobe_destroy(rp);
		return err;
	}
	for (int k = 0; k < CAL_CALLS; k++)
		pka_time_empty();
	if (cal_n < CAL_CALLS / 2)
		return -ENOTSUP;
	qsort(cal_ns, cal_n, sizeof(cal_ns[0]), u64_cmp);
	tm_ovh = cal_ns[cal_n / 2];
	return 0;
}

/* The command's clock: "SOURCE:MULT:SHIFT" (PKA_ENV_CLOCK); shared with trace.c. */
void pka_clock_from_env(struct pk_tsc *clk)
{
	const char *s = secure_getenv(PKA_ENV_CLOCK);
	unsigned long long mult;
	unsigned int src, shift;
	char *end;

	if (!s)
		return;
	src = (unsigned int)strtoul(s, &end, 10);
	if (*end != ':')
		return;
	mult = strtoull(end + 1, &end, 10);
	if (*end != ':')
		return;
	shift = (unsigned int)strtoul(end + 1, &end, 10);
	if (*end || !mult || shift > 127 ||
	    (src != PK_TSC_SRC_TSC && src != PK_TSC_SRC_MONO_RAW))
		return;
	clk->source = src;
	clk->mult = mult;
	clk->shift = shift;
}

/* In a fork()ed child the parent's block is the parent thread's. */
static void time_atfork_child(void)
{
	tm_self = NULL;
	tm_skip = tm_backoff = 0;
	if (tm_pidw)
		__atomic_store_n(tm_pidw, 0, __ATOMIC_RELAXED);
}

/* tm_pidw: a page the kernel zeroes in every child, else a plain word. */
static void pid_page(void)
{
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	tm_pidw = &tm_pid_static;
	if (p != MAP_FAILED && !madvise(p, 4096, MADV_WIPEONFORK))
		tm_pidw = p;
	else if (p != MAP_FAILED)
		munmap(p, 4096);
	/*
	 * This process's pid from the start: left for its first probed
	 * call to find, a vfork() child's (which shares the page) would be
	 * kept for the parent's threads.
	 */
	__atomic_store_n(tm_pidw, (uint32_t)getpid(), __ATOMIC_RELAXED);
}

static void time_start(struct pka_header *h)
{
	struct pka_time_area *a = (struct pka_time_area *)((char *)h + h->mode_at);

	/* No area (cannot be: the record was sized for it): nothing timed. */
	if (h->mode_len < pka_time_area_size(h->nprobe))
		return;
	a->nthr = PKA_TIME_THREADS;
	a->thr_size = (uint32_t)pka_time_thr_size(h->nprobe);
	a->thr_at = (uint32_t)(h->mode_at + sizeof(*a));
	a->ncell = pka_time_ncell(h->nprobe);
	a->cell_at = a->thr_at + a->nthr * a->thr_size;
	pka_clock_from_env(&tm_clk);
	a->source = tm_clk.source;
	pid_page();
	pthread_atfork(NULL, NULL, time_atfork_child);
	a->cal_status = calibrate();
	a->cal_raw_ns = tm_ovh;
	a->overhead_ns = tm_ovh;
	/*
	 * Before arming: the handlers see both (arming's text commit orders
	 * these stores before any hit).
	 */
	tm_h = h;
	tm_a = a;
}

const struct pka_mode_ops pka_mode_time = {
	.name = "time",
	.mode = PKA_MODE_TIME,
	.size = sizeof(struct pka_time),
	.probe = time_probe,
	.ret = time_ret_opts,
	.area = time_area,
	.start = time_start,
};
