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
 * no lock; raw system calls only when a thread claims its block and as
 * its ring reaches bytes not reserved yet (MADV_POPULATE_WRITE, 64 KiB
 * at a time: protocol.h, PKA_TRACE_CHUNK). No file descriptor is kept
 * open in the program, so a program that closes every descriptor, or
 * reuses the number, cannot be hurt; a full file system fails the
 * madvise, which becomes lost calls (at the claim) or drops (later),
 * never a SIGBUS. Probe hits inside our handlers are the library's
 * misses, so a ring has one writer at a time: its owner thread.
 *
 * Depth: the nesting among traced calls, kept per thread as a stack of
 * the entry stack pointers of the calls in flight (in the thread's block,
 * not in TLS: 1 KiB of initial-exec TLS does not fit in every process's
 * static TLS, an ASan one's for one). A call's entry pops the entries
 * whose stack pointer is at or below its own (calls that were left by
 * longjmp or an exception, whose return never came), so depth stays right
 * without a return; a return restores the depth its entry saw. Calls
 * deeper than --depth are skipped at entry (no return handler, nothing
 * pushed: everything inside them is deeper still). So a thread claims its
 * block at its first traced entry; a call that finds none is lost there.
 * A fork()ed child starts its depth at 0 again in a block of its own (the
 * calls it inherited still restore their depth as they return).
 *
 * Durations are raw (the return handler's clock minus the entry's), not
 * less an overhead as time's: a trace shows when each call ran, and a
 * nested call's probe cost is inside its caller's span either way.
 */

static struct pka_header *tr_h;
static struct pka_trace_area *tr_a;
static struct pka_trace_file *tr_f;
static struct pk_tsc tr_clk = { .mult = 1, .shift = 0,
				.source = PK_TSC_SRC_MONO_RAW };
static uint32_t tr_nargs, tr_ev, tr_nslot, tr_maxdepth, tr_fpid, tr_ftid;
static uint64_t tr_min, tr_thr_size;

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

static struct pka_trace_ring *blk(uint32_t b)
{
	return (struct pka_trace_ring *)((char *)tr_f + PKA_TRACE_HDR +
					 (uint64_t)b * tr_thr_size);
}

/*
 * This thread's ring, or NULL: the process and thread filters first
 * (once per thread), then a block, its bytes reserved on first use.
 */
static struct pka_trace_thread *ring(void)
{
	struct pka_trace_thread *t;
	int b;

	if (tr_skip)
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
	b = pka_block_claim(&thr(0)->owner, tr_f->nthr, sizeof(*t), &tr_fails);
	if (b < 0)
		return NULL;
	t = thr((uint32_t)b);
	if (!__atomic_load_n(&t->ready, __ATOMIC_ACQUIRE)) {
		uint64_t len = tr_thr_size < PKA_TRACE_CHUNK ? tr_thr_size :
			       PKA_TRACE_CHUNK;

		if (pka_sys(SYS_madvise, (long)blk((uint32_t)b), (long)len,
			    MADV_POPULATE_WRITE)) {
			__atomic_store_n(&t->owner, 0, __ATOMIC_RELEASE);
			tr_skip = 2;
			return NULL;
		}
		t->reserved = len;
		__atomic_store_n(&t->ready, 1, __ATOMIC_RELEASE);
	}
	tr_ring = blk((uint32_t)b);
	return tr_self = t;
}

static int tr_entry(struct pk_retprobe *rp, struct pk_regs *regs, void *data,
		    void *ctx)
{
	struct tr_call *c = data;
	struct pka_trace_thread *t = tr_self;
	uint32_t d = tr_depth;

	(void)rp;
	(void)ctx;
	if (pka_busy || !tr_f)
		return 1;
	if (!t && !(t = ring())) {
		if (tr_skip != 1)
			__atomic_fetch_add(&tr_a->lost, 1, __ATOMIC_RELAXED);
		return 1;
	}
	/* Calls left without a return (longjmp, exceptions) are gone. */
	while (d && tr_ring->sp[d - 1] <= regs->rsp)
		d--;
	tr_depth = d;
	if ((tr_maxdepth && d >= tr_maxdepth) || d >= PKA_TRACE_DEPTH)
		return 1;
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
	if (!dir || (size_t)snprintf(path, sizeof(path), "%s/%s%d-XXXXXX", dir,
				     PKA_TRACE_PREFIX, (int)getpid()) >=
			    sizeof(path))
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
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	err = p == MAP_FAILED ? -errno : 0;
	close(fd);
	if (err) {
		unlink(path);
		return err;
	}
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
	tr_h = h;
	tr_a = a;
	/* Without a ring file the handlers see tr_f NULL: nothing traced. */
	a->status = tr_file(a, buf);
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
