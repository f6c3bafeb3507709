// SPDX-License-Identifier: MIT
/* stat.c - the agent's "stat" mode: a return probe per function; the thread's page faults and context switches read at each call's entry and return, the differences into this thread's cell in the record. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent.h"

/*
 * How the counters are read, and why so. The figures are the kernel's
 * own per-task counts (the task's min_flt, maj_flt, nvcsw, nivcsw, which
 * every fault and every switch of the thread bumps); three ways reach
 * them from user space, measured here (Debian 12, a 2-core VM shared
 * with other work, 3 runs of 200 000 readings each, one program):
 *   - getrusage(RUSAGE_THREAD): one system call, all four figures, no
 *     file descriptor, no permission, nothing to set up per thread or
 *     after a fork: 264-432 ns (a bare getppid() 174-244 ns; bench_stat's
 *     stat/getrusage, on a quieter machine: 168 ns);
 *   - perf_event_open() software counters of the thread (page-faults-min,
 *     page-faults-maj, context-switches), one group read(2): 741-949 ns, a
 *     descriptor trio per thread opened on its first call (a program
 *     that closes its descriptors, or runs out of them, loses them), none
 *     inherited by a fork()ed child's thread, no voluntary/involuntary
 *     split, and context-switches read 0 where perf_event_paranoid only
 *     allows user-space counting (cli/cmd_stat.c); rdpmc does not work
 *     for software events;
 *   - /proc/thread-self/stat (minflt, majflt; the switches are in
 *     status): a pread() and parsing, 2.2-3.1 us (status: 8-9 us).
 * So getrusage(): two system calls a probed call, made raw (pka_sys():
 * async-signal-safe, errno untouched), into a buffer on the handler's
 * stack written first (a fresh stack page's fault must not land between
 * the kernel's sampling and its copy-out, inside the call).
 *
 * What a call's figures include: everything the thread incurred from
 * the entry reading to the return reading (inclusive: a nested probed
 * call's faults and switches, its own two readings and bookkeeping
 * included); a switch that preempts one of our system calls on its way
 * back counts too. What they leave out: the return-probe machinery's
 * work before the entry reading (its per-thread record's first touch)
 * and after the return one. The thread block and the cell a call uses
 * are found, and touched, at its entry before the reading, and the area
 * and the slots are written through once at start, so that the agent's
 * own first touches of the record's pages (page faults) are in no call
 * of this process; a fork()ed child touches them afresh (a shared
 * mapping's pages are not copied at fork), at most one minor fault a
 * page, which an enclosing probed call of the child can see.
 *
 * The hit path is async-signal-safe as time.c's is (block and cell
 * claimed by compare-and-swap, raw system calls, no malloc, no lock), and
 * probe hits inside our handlers are the library's misses, so a cell
 * never sees two writers.
 */

static struct pka_header *st_h;
static struct pka_stat_area *st_a;

/* This thread's block, or NULL; the back-off as time.c's (claim()). */
static __thread struct pka_stat_thread *st_self
	__attribute__((tls_model("initial-exec")));
static __thread unsigned int st_skip __attribute__((tls_model("initial-exec")));
static __thread unsigned int st_backoff
	__attribute__((tls_model("initial-exec")));
#define ST_BACKOFF 4096u

/*
 * This process's pid in a MADV_WIPEONFORK page (0 in any kind of child:
 * fork(), _Fork(), a raw clone() without CLONE_VM), as time.c's tm_pidw:
 * a child never writes its parent's cells, and a call entered in the
 * parent that returns in the child is told apart.
 */
static uint32_t *st_pidw;
static uint32_t st_pid_static;

/* What the entry leaves for the return (data_size 48). */
struct st_call {
	uint64_t minflt, majflt, nvcsw, nivcsw;
	struct pka_stat_cell *cell;	/* NULL: the slot */
	uint32_t pid;
	uint32_t pad;
};

_Static_assert(sizeof(struct st_call) <= PK_RETPROBE_DATA_MAX,
	       "a call's data must fit the return probe's");

static inline uint32_t st_pid(void)
{
	uint32_t pid = __atomic_load_n(st_pidw, __ATOMIC_RELAXED);

	if (__builtin_expect(!pid, 0)) {
		pid = (uint32_t)pka_sys(SYS_getpid, 0, 0, 0);
		__atomic_store_n(st_pidw, pid, __ATOMIC_RELAXED);
	}
	return pid;
}

static struct pka_stat_thread *thr(uint32_t b)
{
	return (struct pka_stat_thread *)((char *)st_h + st_a->thr_at +
					  (uint64_t)b * st_a->thr_size);
}

static struct pka_stat_cell *cell(uint32_t c)
{
	return (struct pka_stat_cell *)((char *)st_h + st_a->cell_at) + c;
}

/* The thread's counters: 0, or -errno (then *@ru is not filled). */
static inline long read_ru(struct rusage *ru)
{
	return pka_sys(SYS_getrusage, RUSAGE_THREAD, (long)ru, 0);
}

static struct pka_stat_thread *claim(void)
{
	unsigned int no_scan = st_backoff && st_backoff < ST_BACKOFF;
	int b = pka_block_claim(&thr(0)->owner, st_a->nthr, st_a->thr_size,
				&no_scan);

	return b < 0 ? NULL : thr((uint32_t)b);
}

/*
 * This thread's cell for probe @i, claimed if it has none yet; NULL if
 * the thread has no block (then the slot takes the call).
 */
static struct pka_stat_cell *cell_for(uint32_t i)
{
	struct pka_stat_thread *t = st_self;
	struct pka_stat_cell *c;
	uint32_t at;

	if (t && __builtin_expect((uint32_t)(__atomic_load_n(&t->owner,
			__ATOMIC_RELAXED) >> 32) != st_pid(), 0)) {
		t = st_self = NULL;
		st_skip = st_backoff = 0;
	}
	if (!t) {
		if (st_skip) {
			st_skip--;
			return NULL;
		}
		t = st_self = claim();
		if (!t) {
			st_backoff = st_backoff ? st_backoff * 2 : 1;
			if (st_backoff > ST_BACKOFF)
				st_backoff = ST_BACKOFF;
			st_skip = st_backoff;
			return NULL;
		}
		st_backoff = 0;
	}
	at = t->cell[i];
	if (__builtin_expect(!at, 0)) {
		/* As time.c's record(): cells_used must not wrap. */
		if (__atomic_load_n(&st_a->cells_used, __ATOMIC_RELAXED) >=
		    st_a->ncell)
			return NULL;
		at = __atomic_fetch_add(&st_a->cells_used, 1, __ATOMIC_RELAXED);
		if (at >= st_a->ncell)
			return NULL;
		c = cell(at);
		c->probe = i;
		c->thread = (uint32_t)(((char *)t - ((char *)st_h + st_a->thr_at)) /
				       st_a->thr_size);
		/* Release: a reader that finds the cell finds it named. */
		__atomic_store_n(&t->cell[i], at + 1, __ATOMIC_RELEASE);
		at++;
	}
	return cell(at - 1);
}

static struct pka_stat *slot(uint32_t i)
{
	return pka_record_slot(st_h, i);
}

static int stat_entry(struct pk_retprobe *rp, struct pk_regs *regs, void *data,
		      void *ctx)
{
	struct st_call *d = data;
	struct rusage ru;

	(void)rp;
	(void)regs;
	if (pka_busy || !st_a)
		return 1;
	d->cell = cell_for((uint32_t)(uintptr_t)ctx);
	d->pid = st_pid();
	/*
	 * Its pages faulted in now, not between the sampling and the copy
	 * (stores, not memset(): a libc call could use vector registers).
	 */
	((volatile char *)&ru)[0] = 0;
	((volatile char *)&ru)[sizeof(ru) - 1] = 0;
	if (read_ru(&ru)) {
		__atomic_fetch_add(&slot((uint32_t)(uintptr_t)ctx)->missed, 1,
				   __ATOMIC_RELAXED);
		return 1;
	}
	d->minflt = (uint64_t)ru.ru_minflt;
	d->majflt = (uint64_t)ru.ru_majflt;
	d->nvcsw = (uint64_t)ru.ru_nvcsw;
	d->nivcsw = (uint64_t)ru.ru_nivcsw;
	return 0;
}

/* @now - @then, never below 0 (a counter read in another task). */
static inline uint64_t since(long now, uint64_t then)
{
	return (uint64_t)now >= then ? (uint64_t)now - then : 0;
}

static void stat_ret(struct pk_retprobe *rp, struct pk_regs *regs, void *data,
		     void *ctx)
{
	struct st_call *d = data;
	uint32_t i = (uint32_t)(uintptr_t)ctx;
	uint64_t mi, ma, vc, ic;
	struct pka_stat_cell *c;
	struct rusage ru;

	(void)rp;
	(void)regs;
	if (read_ru(&ru)) {
		__atomic_fetch_add(&slot(i)->missed, 1, __ATOMIC_RELAXED);
		return;
	}
	c = d->cell;
	if (__builtin_expect(d->pid != st_pid(), 0)) {
		/*
		 * Entered in the process this one was forked from: what
		 * this task incurred is all it has counted (a new task's
		 * counters start at 0), and the cell is the parent's.
		 */
		d->minflt = d->majflt = d->nvcsw = d->nivcsw = 0;
		c = cell_for(i);
	}
	mi = since(ru.ru_minflt, d->minflt);
	ma = since(ru.ru_majflt, d->majflt);
	vc = since(ru.ru_nvcsw, d->nvcsw);
	ic = since(ru.ru_nivcsw, d->nivcsw);
	if (!c) {
		struct pka_stat *s = slot(i);

		__atomic_fetch_add(&s->calls, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&s->minflt, mi, __ATOMIC_RELAXED);
		__atomic_fetch_add(&s->majflt, ma, __ATOMIC_RELAXED);
		__atomic_fetch_add(&s->nvcsw, vc, __ATOMIC_RELAXED);
		__atomic_fetch_add(&s->nivcsw, ic, __ATOMIC_RELAXED);
		return;
	}
	/*
	 * The command reads a live cell: each field on its own, so that a
	 * reading is never torn (relaxed stores of whole words).
	 */
	__atomic_store_n(&c->minflt, c->minflt + mi, __ATOMIC_RELAXED);
	__atomic_store_n(&c->majflt, c->majflt + ma, __ATOMIC_RELAXED);
	__atomic_store_n(&c->nvcsw, c->nvcsw + vc, __ATOMIC_RELAXED);
	__atomic_store_n(&c->nivcsw, c->nivcsw + ic, __ATOMIC_RELAXED);
	__atomic_store_n(&c->calls, c->calls + 1, __ATOMIC_RELAXED);
}

static void stat_probe(struct pka_header *h, unsigned int i,
		       struct pk_probe_opts *o)
{
	(void)h;
	o->ctx = (void *)(uintptr_t)i;
}

static void stat_ret_opts(struct pk_retprobe_opts *o)
{
	o->entry = stat_entry;
	o->ret = stat_ret;
	o->data_size = (sizeof(struct st_call) + 15) & ~(size_t)15;
	/*
	 * This file is built -mgeneral-regs-only and a hit calls nothing
	 * outside it but the kernel: no vector save.
	 */
	o->flags |= PK_PROBE_F_GPR_ONLY;
	/* Calls the library could not take the return of: the slot's. */
	if (st_h)
		o->missed = &slot((uint32_t)(uintptr_t)o->ctx)->missed;
}

static uint64_t stat_area(uint32_t nprobe)
{
	return pka_stat_area_size(nprobe);
}

/* fork() (with its atfork handlers): the parent's block is not ours. */
static void stat_atfork_child(void)
{
	st_self = NULL;
	st_skip = st_backoff = 0;
	if (st_pidw)
		__atomic_store_n(st_pidw, 0, __ATOMIC_RELAXED);
}

static void pid_page(void)
{
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	st_pidw = &st_pid_static;
	if (p != MAP_FAILED && !madvise(p, 4096, MADV_WIPEONFORK))
		st_pidw = p;
	else if (p != MAP_FAILED)
		munmap(p, 4096);
	/*
	 * This process's pid from the start: left for its first probed
	 * call to find, a vfork() child's (which shares the page) would be
	 * kept for the parent's threads.
	 */
	__atomic_store_n(st_pidw, (uint32_t)getpid(), __ATOMIC_RELAXED);
}

/* Write each page of @len bytes at @p (with what it holds). */
static void touch(void *p, uint64_t len)
{
	char *c = p;

	if (!len)
		return;
	for (uint64_t k = 0; k < len; k += 4096)
		__atomic_store_n(c + k, *(c + k), __ATOMIC_RELAXED);
	__atomic_store_n(c + len - 1, *(c + len - 1), __ATOMIC_RELAXED);
}

static void stat_start(struct pka_header *h)
{
	struct pka_stat_area *a = (struct pka_stat_area *)((char *)h + h->mode_at);
	struct rusage ru;
	long err;

	if (h->mode_len < pka_stat_area_size(h->nprobe))
		return;
	a->nthr = PKA_STAT_THREADS;
	a->thr_size = (uint32_t)pka_stat_thr_size(h->nprobe);
	a->thr_at = (uint32_t)(h->mode_at + sizeof(*a));
	a->ncell = pka_stat_ncell(h->nprobe);
	a->cell_at = a->thr_at + a->nthr * a->thr_size;
	/* A seccomp filter could refuse it: then nothing is counted, said. */
	err = read_ru(&ru);
	a->status = (int32_t)err;
	if (err)
		return;
	/*
	 * Every page the hits write touched now, in no call (see the top):
	 * the area, and the slots (calls without a cell, misses).
	 */
	touch(a, h->mode_len);
	touch((char *)h + h->slot_at, (uint64_t)h->nprobe * h->slot_size);
	pid_page();
	pthread_atfork(NULL, NULL, stat_atfork_child);
	/* Before arming: its text commit orders these before any hit. */
	st_h = h;
	st_a = a;
}

const struct pka_mode_ops pka_mode_stat = {
	.name = "stat",
	.mode = PKA_MODE_STAT,
	.size = sizeof(struct pka_stat),
	.probe = stat_probe,
	.ret = stat_ret_opts,
	.area = stat_area,
	.start = stat_start,
};
