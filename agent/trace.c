// SPDX-License-Identifier: MIT
/* trace.c - the agent's "trace" mode: a return probe per function, one event per call into this thread's ring buffer in a shared file the command drains. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent.h"
#include "tsc.h"

/*
 * protocol.h (PKA_MODE_TRACE) has the layout and the ring protocol; this
 * is the producer side. What it shares with time.c: the command's clock
 * (pka_clock_from_env()) and the claim of a thread block
 * (pka_block_claim()), both in time.c.
 *
 * The hit path (tr_entry(), tr_ret()) is async-signal-safe: no malloc,
 * no lock; raw system calls only when a thread claims its block (the
 * block is mapped then, open + mmap + close of the file by its absolute
 * name, the first time any thread claims it: a process maps the header
 * and one block per thread that traced, not nthr blocks of the
 * program's address space), every 4096th call of a thread that found
 * none, and as its ring reaches bytes not reserved yet
 * (MADV_POPULATE_WRITE, 64 KiB at a time: protocol.h, PKA_TRACE_CHUNK;
 * before Linux 5.14, where it is EINVAL, the block is fallocate()d
 * whole at its first mapping instead: a write-touch of a hole would be
 * SIGBUS on a full disk). No file descriptor is kept open in the
 * program, so a program that closes every descriptor, or reuses the
 * number, cannot be hurt; a full file system fails the madvise, which
 * becomes lost calls (at the claim, the errno in the area's ring_err)
 * or drops (later), never a SIGBUS. Probe hits inside our handlers are
 * the library's misses, so a ring has one writer at a time: its owner
 * thread.
 *
 * Forks: a fork() child's thread state is reset by the atfork handler;
 * _Fork(), syscall(SYS_fork) and raw clones run none, so the handlers
 * also look at a MADV_WIPEONFORK page (tr_wipe, as time.c's tm_pidw)
 * holding the process's pid, which the kernel zeroes in every child: a
 * thread whose cached pid is not the page's has its state from another
 * process, reset before use (a load and a compare a hit). pid and tid
 * are cached in TLS only with that check in front.
 *
 * Depth: the nesting among traced calls, kept per thread as a stack of
 * the entry stack pointers of the calls in flight (in the thread's block,
 * not in TLS: 1 KiB of initial-exec TLS does not fit in every process's
 * static TLS, an ASan one's for one). A call's entry pops the entries
 * whose stack pointer is at or below its own (calls that were left by
 * longjmp or an exception, whose return never came), so depth stays right
 * without a return; a return restores the depth its entry saw. Calls
 * deeper than --depth are skipped at entry (no return handler, nothing
 * pushed: everything inside them is deeper still). A call with
 * PKA_TRACE_DEPTH calls in flight is lost (counted in lost and deep).
 * The stack-pointer comparison assumes one stack per thread: on a
 * coroutine stack or a sigaltstack above the thread's stack, the calls
 * in flight below are taken as left (man TRACE says so). So a thread
 * claims its block at its first traced entry; a call that finds none is
 * lost there.
 * A fork()ed child starts its depth at 0 again in a block of its own (the
 * calls it inherited still restore their depth as they return).
 *
 * Durations are raw (the return handler's clock minus the entry's), not
 * less an overhead as time's: a trace shows when each call ran, and a
 * nested call's probe cost is inside its caller's span either way.
 */

static struct pka_header *tr_h;
static struct pka_trace_area *tr_a;
static struct pka_trace_file *tr_f;	/* the header and indices only */
static struct pka_trace_ring *tr_blk[PKA_TRACE_THREADS]; /* atomic: mapped */
static char tr_path[4200];		/* the ring file, absolute */
static int tr_nopopulate;	/* MADV_POPULATE_WRITE unknown (< 5.14) */
static uint32_t *tr_wipe;	/* MADV_WIPEONFORK page: our pid, 0 in a child */
static struct pk_tsc tr_clk = { .mult = 1, .shift = 0,
				.source = PK_TSC_SRC_MONO_RAW };
static uint32_t tr_nargs, tr_ev, tr_nslot, tr_maxdepth, tr_fpid, tr_ftid;
static uint64_t tr_min, tr_thr_size;
static void tr_atfork_child(void);

#define TLS __attribute__((tls_model("initial-exec")))
static __thread struct pka_trace_thread *tr_self TLS;
static __thread struct pka_trace_ring *tr_ring TLS;	/* tr_self's block */
static __thread uint32_t tr_pid TLS, tr_tid TLS;
static __thread unsigned int tr_fails TLS;
static __thread unsigned char tr_skip TLS;	/* 1 filtered out, 2 no ring */
static __thread uint32_t tr_depth TLS;

/* A call's data: 16 + 8 * nargs bytes, rounded to 16. */
struct tr_call {
	uint64_t t0;
	uint32_t depth;		/* tr_depth at entry (its own is depth + 1) */
	uint32_t pad;
	uint64_t args[PKA_TRACE_ARGS];
};

static struct pka_trace_thread *thr(uint32_t b)
{
	return (struct pka_trace_thread *)((char *)tr_f + 4096) + b;
}

static long sys6(long nr, long a, long b, long c, long d, long e, long f)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long ret;

	__asm__ volatile("syscall" : "=a"(ret)
			 : "0"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8),
			   "r"(r9)
			 : "rcx", "r11", "memory");
	return ret;
}

/*
 * Block @b, mapped when a thread first claims it (so a process maps a
 * ring per thread that traced, not nthr of them: address space is the
 * program's, RLIMIT_AS counts it), and kept mapped for the next owner.
 * Raw system calls (open, mmap, close): async-signal-safe. With
 * *@fresh set when @b had never been mapped; NULL, *@err set, if it
 * cannot be.
 */
static struct pka_trace_ring *blk(uint32_t b, int *err)
{
	struct pka_trace_ring *r = __atomic_load_n(&tr_blk[b], __ATOMIC_ACQUIRE);
	uint64_t off = PKA_TRACE_HDR + (uint64_t)b * tr_thr_size;
	long fd, p;

	if (r)
		return r;
	fd = pka_sys(SYS_open, (long)tr_path, O_RDWR | O_CLOEXEC, 0);
	if (fd < 0) {
		*err = (int)fd;
		return NULL;
	}
	/* Before 5.14: the block's disk reserved whole, or no ring. */
	if (tr_nopopulate) {
		p = sys6(SYS_fallocate, fd, 0, (long)off, (long)tr_thr_size, 0, 0);
		if (p) {
			pka_sys(SYS_close, fd, 0, 0);
			*err = (int)p;
			return NULL;
		}
	}
	p = sys6(SYS_mmap, 0, (long)tr_thr_size, PROT_READ | PROT_WRITE,
		 MAP_SHARED, fd, (long)off);
	pka_sys(SYS_close, fd, 0, 0);
	if (p < 0 && p > -4096) {
		*err = (int)p;
		return NULL;
	}
	r = (struct pka_trace_ring *)p;
	/* Only our own thread maps block b (it owns it): no race to lose. */
	__atomic_store_n(&tr_blk[b], r, __ATOMIC_RELEASE);
	return r;
}

static void ring_fail(int err)
{
	if (err)
		__atomic_store_n(&tr_a->ring_err, err, __ATOMIC_RELAXED);
	tr_skip = 2;
}

/*
 * In a child of a fork that ran no atfork handler (_Fork(), a raw clone):
 * the thread's state, made in another process (its tr_pid is not this
 * process's pid), is reset. The page's pid is the process's, read again
 * once the kernel wiped it (each thread of the child stores the same);
 * a thread's own pid is compared, not the page's zero, so that a thread
 * the child made first cannot hide the forking thread's stale state.
 */
static inline void fork_check(void)
{
	uint32_t pid;

	if (!tr_wipe)
		return;
	pid = __atomic_load_n(tr_wipe, __ATOMIC_RELAXED);
	if (__builtin_expect(!pid, 0)) {
		pid = (uint32_t)pka_sys(SYS_getpid, 0, 0, 0);
		__atomic_store_n(tr_wipe, pid, __ATOMIC_RELAXED);
	}
	if (__builtin_expect(tr_tid && pid != tr_pid, 0))
		tr_atfork_child();
}

/*
 * This thread's ring, or NULL: the process and thread filters first
 * (once per thread), then a block, its bytes reserved on first use.
 */
static struct pka_trace_thread *ring(void)
{
	struct pka_trace_thread *t;
	struct pka_trace_ring *r;
	unsigned int scan = 0;
	int b, err = 0;

	if (tr_skip == 1)
		return NULL;
	/* No ring: 64 compare-and-swaps tried again every 4096th call. */
	if (tr_skip == 2 && (++tr_fails & 4095))
		return NULL;
	if (!tr_tid) {
		tr_pid = (uint32_t)pka_sys(SYS_getpid, 0, 0, 0);
		tr_tid = (uint32_t)pka_sys(SYS_gettid, 0, 0, 0);
		if ((tr_fpid && tr_pid != tr_fpid) ||
		    (tr_ftid && tr_tid != tr_ftid)) {
			tr_skip = 1;
			return NULL;
		}
	}
	/* scan 0: gone owners looked for at each try (every 4096th call). */
	b = pka_block_claim(&thr(0)->owner, tr_f->nthr, sizeof(*t), &scan);
	if (b < 0) {
		ring_fail(0);
		return NULL;
	}
	t = thr((uint32_t)b);
	r = blk((uint32_t)b, &err);
	if (r && !__atomic_load_n(&t->ready, __ATOMIC_ACQUIRE)) {
		uint64_t len = tr_thr_size < PKA_TRACE_CHUNK ? tr_thr_size :
			       PKA_TRACE_CHUNK;

		if (tr_nopopulate)
			len = tr_thr_size;	/* fallocate()d whole */
		else
			err = (int)pka_sys(SYS_madvise, (long)r, (long)len,
					   MADV_POPULATE_WRITE);
		if (!err) {
			t->reserved = len;
			__atomic_store_n(&t->ready, 1, __ATOMIC_RELEASE);
		}
	}
	if (!r || err) {
		__atomic_store_n(&t->owner, 0, __ATOMIC_RELEASE);
		ring_fail(err);
		return NULL;
	}
	tr_skip = 0;
	/*
	 * The slot from head: a writer killed between its pos and head
	 * stores left pos one ahead of the events written.
	 */
	t->pos = (uint32_t)(t->head % tr_nslot);
	tr_ring = r;
	return tr_self = t;
}

static int tr_entry(struct pk_retprobe *rp, struct pk_regs *regs, void *data,
		    void *ctx)
{
	struct tr_call *c = data;
	struct pka_trace_thread *t;
	uint32_t d;

	(void)rp;
	(void)ctx;
	if (pka_busy || !tr_f)
		return 1;
	fork_check();
	t = tr_self;
	d = tr_depth;
	if (!t && !(t = ring())) {
		if (tr_skip != 1)
			__atomic_fetch_add(&tr_a->lost, 1, __ATOMIC_RELAXED);
		return 1;
	}
	/* Calls left without a return (longjmp, exceptions) are gone. */
	while (d && tr_ring->sp[d - 1] <= regs->rsp)
		d--;
	tr_depth = d;
	if (tr_maxdepth && d >= tr_maxdepth)
		return 1;
	/* No room on the depth stack: a call the trace misses, said so. */
	if (d >= PKA_TRACE_DEPTH) {
		__atomic_fetch_add(&tr_a->deep, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&tr_a->lost, 1, __ATOMIC_RELAXED);
		return 1;
	}
	tr_ring->sp[d] = regs->rsp;
	tr_depth = d + 1;
	c->depth = d;
	for (uint32_t i = 0; i < tr_nargs; i++)
		c->args[i] = pk_regs_arg(regs, i);
	c->t0 = pk_tsc_now(&tr_clk);
	return 0;
}

static void tr_ret(struct pk_retprobe *rp, struct pk_regs *regs, void *data,
		   void *ctx)
{
	uint64_t t1 = pk_tsc_now(&tr_clk), ns, head, tail;
	struct tr_call *c = data;
	struct pka_trace_thread *t;
	struct pka_trace_event *e;
	uint32_t pos;

	(void)rp;
	fork_check();
	tr_depth = c->depth;
	ns = pk_tsc_to_ns(&tr_clk, t1 - c->t0);
	if (ns < tr_min)
		return;
	/* Its entry claimed one; not so in a fork()ed child's first returns. */
	t = tr_self;
	if (!t && !(t = ring())) {
		if (tr_skip != 1)
			__atomic_fetch_add(&tr_a->lost, 1, __ATOMIC_RELAXED);
		return;
	}
	head = t->head;
	/* Acquire: the consumer is done with the slot it freed. */
	tail = __atomic_load_n(&t->tail, __ATOMIC_ACQUIRE);
	if (head - tail >= tr_nslot) {
		__atomic_store_n(&t->drops, t->drops + 1, __ATOMIC_RELAXED);
		return;
	}
	pos = t->pos;
	if (pos >= tr_nslot)
		pos = (uint32_t)(head % tr_nslot);
	e = (struct pka_trace_event *)((char *)(tr_ring + 1) +
				       (uint64_t)pos * tr_ev);
	/* The ring's next bytes, reserved as the producer reaches them. */
	if (__builtin_expect((char *)e + tr_ev > (char *)tr_ring + t->reserved,
			     0)) {
		uint64_t len = tr_thr_size - t->reserved;

		if (len > PKA_TRACE_CHUNK)
			len = PKA_TRACE_CHUNK;
		if (pka_sys(SYS_madvise, (long)((char *)tr_ring + t->reserved),
			    (long)len, MADV_POPULATE_WRITE)) {
			/* A full disk: the rest of the ring is not ours. */
			__atomic_store_n(&t->drops, t->drops + 1,
					 __ATOMIC_RELAXED);
			return;
		}
		t->reserved += len;
	}
	e->t0 = c->t0;
	e->dur_ns = ns;
	e->pid = tr_pid;
	e->tid = tr_tid;
	e->probe = (uint32_t)(uintptr_t)ctx;
	e->depth = (uint16_t)(c->depth + 1);
	e->pad = 0;
	e->ret = regs->rax;
	for (uint32_t i = 0; i < tr_nargs; i++)
		e->args[i] = c->args[i];
	t->pos = pos + 1 == tr_nslot ? 0 : pos + 1;
	/* Release: a consumer that sees head sees the event. */
	__atomic_store_n(&t->head, head + 1, __ATOMIC_RELEASE);
}

static void tr_probe(struct pka_header *h, unsigned int i,
		     struct pk_probe_opts *o)
{
	(void)h;
	o->ctx = (void *)(uintptr_t)i;
}

static void tr_ret_opts(struct pk_retprobe_opts *o)
{
	o->entry = tr_entry;
	o->ret = tr_ret;
	o->data_size = (16 + 8 * tr_nargs + 15) & ~15u;
	/* The library's misses: lost calls too (set before any arming). */
	if (tr_a)
		o->missed = &tr_a->missed;
}

static uint64_t tr_area(uint32_t nprobe)
{
	(void)nprobe;
	return sizeof(struct pka_trace_area);
}

/* PKA_ENV_TRACE: "NARGS:BUFFER_BYTES:MIN_NS:DEPTH:PID:TID". */
static uint64_t tr_config(void)
{
	const char *s = secure_getenv(PKA_ENV_TRACE);
	unsigned long long v[6] = { 0, PKA_TRACE_BUF_DEFAULT, 0, 0, 0, 0 };
	char *end;

	for (int k = 0; s && k < 6; k++) {
		v[k] = strtoull(s, &end, 10);
		if (end == s || (*end != ':' && *end) || (*end == 0 && k < 5))
			break;
		s = end + 1;
	}
	tr_nargs = v[0] <= PKA_TRACE_ARGS ? (uint32_t)v[0] : PKA_TRACE_ARGS;
	if (v[1] < PKA_TRACE_BUF_MIN)
		v[1] = PKA_TRACE_BUF_MIN;
	if (v[1] > PKA_TRACE_BUF_MAX)
		v[1] = PKA_TRACE_BUF_MAX;
	tr_min = v[2];
	tr_maxdepth = v[3] < PK_RETPROBE_DEPTH ? (uint32_t)v[3] : 0;
	tr_fpid = (uint32_t)v[4];
	tr_ftid = (uint32_t)v[5];
	return v[1];
}

/*
 * The ring file: dir/.trace-<pid>-XXXXXX, sparse, its header and the
 * rings' indices reserved, mapped shared. 0, or -errno.
 */
static int tr_file(struct pka_trace_area *a, uint64_t buf)
{
	const char *dir = secure_getenv(PKA_ENV_DIR);
	uint64_t size;
	struct rlimit rl;
	char path[4200];
	void *p;
	int fd, err = 0;

	tr_ev = pka_trace_ev_size(tr_nargs);
	tr_thr_size = pka_trace_thr_size(buf, tr_ev);
	tr_nslot = (uint32_t)((tr_thr_size - sizeof(struct pka_trace_ring)) /
			      tr_ev);
	size = PKA_TRACE_HDR + PKA_TRACE_THREADS * tr_thr_size;
	/* ftruncate() past ulimit -f would be SIGXFSZ. */
	if (!getrlimit(RLIMIT_FSIZE, &rl) && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur < size)
		return -EFBIG;
	if (!dir || dir[0] != '/' ||
	    (size_t)snprintf(path, sizeof(path), "%s/%s%d-XXXXXX", dir,
			     PKA_TRACE_PREFIX, (int)getpid()) >= sizeof(path))
		return -ENAMETOOLONG;
	fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)size) ||
	    (err = posix_fallocate(fd, 0, PKA_TRACE_HDR))) {
		err = err ? -err : -errno;
		close(fd);
		unlink(path);
		return err;
	}
	/* The header and indices only: a block is mapped by its first owner. */
	p = mmap(NULL, PKA_TRACE_HDR, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	err = p == MAP_FAILED ? -errno : 0;
	close(fd);
	if (err) {
		unlink(path);
		return err;
	}
	/*
	 * MADV_POPULATE_WRITE is EINVAL before Linux 5.14. A write-touch of
	 * a hole instead would be SIGBUS on a full disk, so there a block's
	 * bytes are fallocate()d whole when a thread first claims it.
	 */
	if (madvise(p, 4096, MADV_POPULATE_WRITE) && errno == EINVAL)
		tr_nopopulate = 1;
	memcpy(tr_path, path, sizeof(path));
	tr_f = p;
	tr_f->nthr = PKA_TRACE_THREADS;
	tr_f->thr_size = tr_thr_size;
	tr_f->ev_size = tr_ev;
	tr_f->nslot = tr_nslot;
	tr_f->size = size;
	__atomic_store_n(&tr_f->magic, PKA_TRACE_MAGIC, __ATOMIC_RELEASE);
	snprintf(a->ring, sizeof(a->ring), "%s", strrchr(path, '/') + 1);
	return 0;
}

/* In a fork()ed child: its threads claim blocks of their own. */
static void tr_atfork_child(void)
{
	tr_self = NULL;
	tr_ring = NULL;
	tr_tid = 0;
	tr_skip = 0;
	tr_fails = 0;
	tr_depth = 0;
}

static void tr_start(struct pka_header *h)
{
	struct pka_trace_area *a = (void *)((char *)h + h->mode_at);
	uint64_t buf;

	if (h->mode_len < sizeof(*a))
		return;
	buf = tr_config();
	pka_clock_from_env(&tr_clk);
	a->nargs = tr_nargs;
	a->min_ns = tr_min;
	a->depth = tr_maxdepth;
	a->pid = tr_fpid;
	a->tid = tr_ftid;
	a->source = tr_clk.source;
	pthread_atfork(NULL, NULL, tr_atfork_child);
	/*
	 * _Fork(), syscall(SYS_fork) and a raw clone run no atfork handler:
	 * a page the kernel zeroes in the child says so to its first hit.
	 * Without MADV_WIPEONFORK (< 4.14) only fork() children are right.
	 */
	tr_wipe = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (tr_wipe == MAP_FAILED || madvise(tr_wipe, 4096, MADV_WIPEONFORK)) {
		if (tr_wipe != MAP_FAILED)
			munmap(tr_wipe, 4096);
		tr_wipe = NULL;
	} else {
		*tr_wipe = (uint32_t)getpid();
	}
	tr_h = h;
	tr_a = a;
	/* Without a ring file the handlers see tr_f NULL: nothing traced. */
	a->status = tr_file(a, buf);
	a->nthr = tr_f ? tr_f->nthr : 0;
}

const struct pka_mode_ops pka_mode_trace = {
	.name = "trace",
	.mode = PKA_MODE_TRACE,
	.size = sizeof(struct pka_count),
	.probe = tr_probe,
	.ret = tr_ret_opts,
	.area = tr_area,
	.start = tr_start,
};
