// SPDX-License-Identifier: MIT
/* cmd_trace.c - probekit trace: one event per call (time, duration, pid, tid, arguments, return value) of the probed functions, written as a trace Perfetto opens. */

/*
 * probekit trace [-p SPEC]... [-P FILE]... [--args N] [--buffer-size BYTES]
 *                [--min-duration DUR] [--pid PID] [--tid TID] [--depth N]
 *                [--format json|perfetto] -o FILE [--strict] [--wait-all]
 *                [-q] -- COMMAND [ARG]...
 *
 * Runs COMMAND with the agent in its "trace" mode (agent/protocol.h,
 * PKA_MODE_TRACE; agent/trace.c): each process's threads write one event
 * per call into rings of a shared file, which this command maps and
 * drains every 10 ms while COMMAND runs and once after it ended; the
 * events, converted to CLOCK_MONOTONIC ns with the clock calibrated here
 * (prof/tsc.h, handed to the agent as time does), go to prof/trace.h's
 * writers. Filters (--min-duration, --depth, --pid, --tid) apply in the
 * agent, so filtered calls take no ring space. Drops (a full ring) and
 * lost calls (no ring) are counted, said in the summary line, and put in
 * the trace as metadata: the thread's (or process's) name says how many.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "trace.h"
#include "tsc.h"

/*
 * One process's ring file: its header and thread table mapped (f), and
 * each thread's block (blk[]) once a thread has claimed it, so a process
 * costs this command's address space only for the threads that traced
 * (a block is --buffer-size; all 64 would be 64 MiB at the default, 16
 * GiB at 256M). f NULL once done (its process gone, drained a last time
 * and unmapped) or failed (it could not be mapped: counted in
 * ring_failed).
 */
struct ring {
	char name[32];
	struct pka_trace_file *f;
	struct pka_trace_file hdr; /* f's header as checked once: the
				 * program can write f, not this */
	char **blk;		/* per block: mapped, or NULL */
	int failed;
	int err;		/* failed: why (errno), 0 not a valid ring file */
	size_t len;		/* of the mapping at f */
	uint32_t nargs;
	uint32_t *fid;		/* probe -> 1 + function id, 0 unknown */
	uint32_t nfid;
	uint64_t *seen_drops;	/* per block, drops already attributed */
	uint64_t lost, deep, missed; /* the record's, last read */
	uint32_t pid;		/* the record's process */
	char comm[17];
};

/*
 * Events kept in memory (88 bytes each, plus the writer's: about 1 GiB
 * at this default) before the rest count as dropped.
 */
#define TRACE_MAX_EVENTS 10000000ull

/* The agent's depth stack holds 128 calls in flight (PK_RETPROBE_DEPTH). */
#define TRACE_DEPTH_MAX 127

static uint64_t trace_area_size(uint32_t nprobe)
{
	(void)nprobe;
	return sizeof(struct pka_trace_area);
}

struct thr {
	uint32_t pid, tid;
	char *name;
	uint64_t events, drops;
};

struct proc {
	uint32_t pid;
	char *name;
	uint64_t lost;
};

struct ctx {
	struct pkc_run *run;
	struct pkc_spec *t;
	struct pk_tsc clk;
	struct ring *rings;
	size_t nrings;
	struct pk_trace_event *ev;
	size_t nev, capev;
	char **funcs;
	uint32_t nfuncs, capfuncs;
	struct thr *thr;
	size_t nthr, lastthr;
	struct proc *procs;
	size_t nprocs;
	uint64_t drops, lost;
	uint64_t deep;		/* of lost: the depth stack was full */
	uint64_t missed;	/* of lost: returns the library missed */
	uint64_t over;		/* events past --max-events, not kept */
	uint64_t max_ev;	/* --max-events */
	int ring_failed;	/* processes without a ring file (or ours) */
	int ring_err;		/* a thread's ring could not be made: -errno */
	int status_err;		/* a ring file could not be made: -errno */
	int map_err;		/* a ring file could not be mapped: errno */
	int blk_err;		/* a thread's block could not be mapped: errno */
	uint64_t unmapped;	/* events lost so (their block not mapped) */
	int oom;
};

static void *grow(void *p, size_t *cap, size_t need, size_t size, int *oom)
{
	size_t n = *cap ? *cap : 16;
	void *q;

	if (need <= *cap)
		return p;
	while (n < need)
		n *= 2;
	q = realloc(p, n * size);
	if (!q) {
		*oom = 1;
		return NULL;
	}
	*cap = n;
	return q;
}

/* The id of function @name (names are few: a linear search is fine). */
static uint32_t func_id(struct ctx *c, const char *name)
{
	size_t cap = c->capfuncs;
	char **v;

	for (uint32_t i = 0; i < c->nfuncs; i++)
		if (!strcmp(c->funcs[i], name))
			return i;
	v = grow(c->funcs, &cap, (size_t)c->nfuncs + 1, sizeof(*v), &c->oom);
	if (!v)
		return UINT32_MAX;
	c->funcs = v;
	c->capfuncs = (uint32_t)cap;
	if (!(v[c->nfuncs] = strdup(name))) {
		c->oom = 1;
		return UINT32_MAX;
	}
	return c->nfuncs++;
}

/* /proc/PID[/task/TID]/comm, or NULL. */
static char *comm_of(uint32_t pid, uint32_t tid)
{
	char path[64], buf[32];
	ssize_t got;
	int fd;

	if (tid)
		snprintf(path, sizeof(path), "/proc/%u/task/%u/comm", pid, tid);
	else
		snprintf(path, sizeof(path), "/proc/%u/comm", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	got = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (got <= 0)
		return NULL;
	buf[got] = 0;
	buf[strcspn(buf, "\n")] = 0;
	return strdup(buf);
}

static struct proc *proc_get(struct ctx *c, uint32_t pid, const char *comm)
{
	size_t cap = c->nprocs;
	struct proc *v;

	for (size_t i = 0; i < c->nprocs; i++)
		if (c->procs[i].pid == pid)
			return &c->procs[i];
	v = realloc(c->procs, (cap + 1) * sizeof(*v));
	if (!v) {
		c->oom = 1;
		return NULL;
	}
	c->procs = v;
	v[c->nprocs] = (struct proc){ .pid = pid, .name = comm_of(pid, 0) };
	if (!v[c->nprocs].name)
		v[c->nprocs].name = strdup(comm);
	return &v[c->nprocs++];
}

static struct thr *thr_get(struct ctx *c, uint32_t pid, uint32_t tid,
			   const char *comm)
{
	size_t cap = c->nthr;
	struct thr *v;

	if (c->lastthr < c->nthr && c->thr[c->lastthr].tid == tid &&
	    c->thr[c->lastthr].pid == pid)
		return &c->thr[c->lastthr];
	for (size_t i = 0; i < c->nthr; i++)
		if (c->thr[i].pid == pid && c->thr[i].tid == tid)
			return &c->thr[c->lastthr = i];
	if (!proc_get(c, pid, comm))
		return NULL;
	v = realloc(c->thr, (cap + 1) * sizeof(*v));
	if (!v) {
		c->oom = 1;
		return NULL;
	}
	c->thr = v;
	v[c->nthr] = (struct thr){ .pid = pid, .tid = tid,
				   .name = comm_of(pid, tid) };
	if (!v[c->nthr].name)
		v[c->nthr].name = strdup(comm);
	c->lastthr = c->nthr;
	return &v[c->nthr++];
}

/* The ring file @name of the run, mapped and checked, or NULL. */
static struct ring *ring_get(struct ctx *c, const struct pka_header *h,
			     const struct pka_trace_area *a)
{
	struct ring *rg;
	struct pka_trace_file *f;
	struct stat st;
	void *p;
	int fd;

	for (size_t i = 0; i < c->nrings; i++)
		if (!strcmp(c->rings[i].name, a->ring))
			return &c->rings[i];
	rg = realloc(c->rings, (c->nrings + 1) * sizeof(*rg));
	if (!rg) {
		c->oom = 1;
		return NULL;
	}
	c->rings = rg;
	rg += c->nrings++;
	memset(rg, 0, sizeof(*rg));
	snprintf(rg->name, sizeof(rg->name), "%s", a->ring);
	rg->nargs = a->nargs;
	rg->pid = (uint32_t)h->pid;
	memcpy(rg->comm, h->comm, sizeof(h->comm));
	/* Not mapped: the process's calls are not in the trace, said so. */
	rg->failed = 1;
	c->ring_failed++;
	if (strncmp(a->ring, PKA_TRACE_PREFIX, strlen(PKA_TRACE_PREFIX)) ||
	    strchr(a->ring, '/') || a->nargs > PKA_TRACE_ARGS)
		return rg;
	fd = openat(c->run->dir_fd, a->ring, O_RDWR | O_NOFOLLOW | O_NONBLOCK |
		    O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		c->map_err = rg->err = errno;
		return rg;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    st.st_nlink != 1 || st.st_size < PKA_TRACE_HDR) {
		close(fd);
		return rg;
	}
	p = mmap(NULL, PKA_TRACE_HDR, PROT_READ | PROT_WRITE, MAP_SHARED,
		 fd, 0);
	if (p == MAP_FAILED)
		c->map_err = rg->err = errno;
	close(fd);
	if (p == MAP_FAILED)
		return rg;
	/* Checked and used from a copy: the program may write the file. */
	f = &rg->hdr;
	if (__atomic_load_n(&((struct pka_trace_file *)p)->magic,
			    __ATOMIC_ACQUIRE) == PKA_TRACE_MAGIC)
		memcpy(f, p, sizeof(*f));
	if (f->magic != PKA_TRACE_MAGIC ||
	    f->size != (uint64_t)st.st_size || !f->nthr ||
	    f->nthr > PKA_TRACE_THREADS || f->thr_size % 4096 ||
	    f->size != PKA_TRACE_HDR + (uint64_t)f->nthr * f->thr_size ||
	    f->ev_size != pka_trace_ev_size(a->nargs) || !f->nslot ||
	    sizeof(struct pka_trace_ring) + (uint64_t)f->nslot * f->ev_size >
	    f->thr_size) {
		munmap(p, PKA_TRACE_HDR);
		return rg;
	}
	rg->failed = 0;
	c->ring_failed--;
	rg->f = p;
	rg->len = PKA_TRACE_HDR;
	rg->seen_drops = calloc(f->nthr, sizeof(*rg->seen_drops));
	rg->blk = calloc(f->nthr, sizeof(*rg->blk));
	if (!rg->seen_drops || !rg->blk)
		c->oom = 1;
	return rg;
}

/* Blocks are mapped at their offsets: the header must end on a page. */
_Static_assert(PKA_TRACE_HDR % 4096 == 0, "ring blocks start on a page");

/*
 * Block @b of @rg, mapped now if it was not (the file opened again by
 * name: no descriptor is kept per process); NULL if it cannot be (errno
 * in c->blk_err: its events are lost, counted, and it is tried again at
 * the next drain).
 */
static const char *ring_block(struct ctx *c, struct ring *rg, uint32_t b)
{
	const struct pka_trace_file *f = &rg->hdr;
	void *p;
	int fd;

	if (!rg->blk)
		return NULL;
	if (rg->blk[b])
		return rg->blk[b];
	fd = openat(c->run->dir_fd, rg->name, O_RDWR | O_NOFOLLOW |
		    O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		c->blk_err = errno;
		return NULL;
	}
	p = mmap(NULL, (size_t)f->thr_size, PROT_READ | PROT_WRITE,
		 MAP_SHARED, fd, (off_t)(PKA_TRACE_HDR + (uint64_t)b * f->thr_size));
	if (p == MAP_FAILED)
		c->blk_err = errno;
	close(fd);
	if (p == MAP_FAILED)
		return NULL;
	return rg->blk[b] = p;
}

/* Unmap all of @rg: done with it. */
static void ring_unmap(struct ring *rg)
{
	if (!rg->f)
		return;
	for (uint32_t b = 0; rg->blk && b < rg->hdr.nthr; b++)
		if (rg->blk[b])
			munmap(rg->blk[b], (size_t)rg->hdr.thr_size);
	munmap(rg->f, rg->len);
	rg->f = NULL;
	free(rg->blk);
	rg->blk = NULL;
}

/* 1 + the function id of probe @k of record @h (its name, else its spec's). */
static uint32_t probe_fid(struct ctx *c, struct ring *rg,
			  const struct pka_header *h, uint32_t k)
{
	struct pka_header *w = (struct pka_header *)h;
	const struct pka_probe *p;
	const char *name;
	uint32_t id;

	if (k >= h->nprobe)
		return 0;
	if (k >= rg->nfid) {
		uint32_t *v = realloc(rg->fid, h->nprobe * sizeof(*v));

		if (!v) {
			c->oom = 1;
			return 0;
		}
		memset(v + rg->nfid, 0, (h->nprobe - rg->nfid) * sizeof(*v));
		rg->fid = v;
		rg->nfid = h->nprobe;
	}
	if (rg->fid[k])
		return rg->fid[k];
	p = pka_record_probe(w, k);
	if (p->spec >= (uint32_t)c->run->n)
		return 0;
	name = c->run->specs[p->spec];
	if (p->name && p->name <= h->why_len)
		name = (const char *)h + h->why_at + p->name - 1;
	id = func_id(c, name);
	if (id == UINT32_MAX)
		return 0;
	return rg->fid[k] = id + 1;
}

/* Copy out every event of @rg's rings and free their slots. */
static void drain(struct ctx *c, struct ring *rg, const struct pka_header *h)
{
	const struct pka_trace_file *f = &rg->hdr;

	for (uint32_t b = 0; b < f->nthr && !c->oom; b++) {
		struct pka_trace_thread *t = (struct pka_trace_thread *)
					     ((char *)rg->f + 4096) + b;
		const char *ev0;
		uint64_t head, tail, drops, owner;
		struct thr *th;

		if (!__atomic_load_n(&t->ready, __ATOMIC_ACQUIRE))
			continue;
		/* Acquire: the events before head are written. */
		head = __atomic_load_n(&t->head, __ATOMIC_ACQUIRE);
		tail = t->tail;
		if (head - tail > f->nslot)	/* cannot be: the newest */
			tail = head - f->nslot;
		ev0 = ring_block(c, rg, b);
		if (!ev0) {
			/* Lost, not silently: counted and said; --strict fails. */
			c->unmapped += head - tail;
			tail = head;
		} else {
			ev0 += sizeof(struct pka_trace_ring);
		}
		for (; tail != head; tail++) {
			const struct pka_trace_event *e = (const void *)
				(ev0 + (tail % f->nslot) * f->ev_size);
			struct pk_trace_event *o;
			uint32_t fid = probe_fid(c, rg, h, e->probe);

			if (!fid)
				continue;
			/* Past --max-events: counted, said, not kept. */
			if (c->nev >= c->max_ev) {
				c->over++;
				continue;
			}
			o = grow(c->ev, &c->capev, c->nev + 1, sizeof(*c->ev),
				 &c->oom);
			if (!o)
				return;	/* c->ev kept: freed at the end */
			c->ev = o;
			th = thr_get(c, e->pid, e->tid, rg->comm);
			if (th)
				th->events++;
			o = &c->ev[c->nev++];
			memset(o, 0, sizeof(*o));
			o->ts_ns = pk_tsc_mono_ns(&c->clk, e->t0);
			o->dur_ns = e->dur_ns;
			o->pid = e->pid;
			o->tid = e->tid;
			o->func = fid - 1;
			o->nargs = (uint8_t)rg->nargs;
			o->has_ret = 1;
			o->ret = e->ret;
			for (uint32_t i = 0; i < rg->nargs; i++)
				o->args[i] = e->args[i];
		}
		/* Release: the producer may reuse what was copied. */
		__atomic_store_n(&t->tail, head, __ATOMIC_RELEASE);
		drops = __atomic_load_n(&t->drops, __ATOMIC_RELAXED);
		if (rg->seen_drops && drops != rg->seen_drops[b]) {
			owner = __atomic_load_n(&t->owner, __ATOMIC_RELAXED);
			th = thr_get(c, (uint32_t)(owner >> 32), (uint32_t)owner,
				     rg->comm);
			if (th)
				th->drops += drops - rg->seen_drops[b];
			c->drops += drops - rg->seen_drops[b];
			rg->seen_drops[b] = drops;
		}
	}
}

static void add_rec(const struct pka_header *h, void *arg)
{
	struct ctx *c = arg;
	const struct pka_trace_area *a;
	struct ring *rg;
	char name[sizeof(a->ring)];
	int gone;

	if (h->mode_len < sizeof(*a))
		return;
	a = (const void *)((const char *)h + h->mode_at);
	memcpy(name, a->ring, sizeof(name));
	if (a->status || !name[0] || name[sizeof(name) - 1])
		return;
	rg = ring_get(c, h, a);
	if (!rg)
		return;
	/* Lost: no ring, a full depth stack, or the library's misses. */
	if (a->lost > rg->lost || a->missed > rg->missed) {
		uint64_t n = a->lost - rg->lost + a->missed - rg->missed;
		struct proc *p = proc_get(c, rg->pid, rg->comm);

		if (p)
			p->lost += n;
		c->lost += n;
		c->deep += a->deep - rg->deep;
		c->missed += a->missed - rg->missed;
		rg->lost = a->lost;
		rg->deep = a->deep;
		rg->missed = a->missed;
	}
	if (a->ring_err)
		c->ring_err = a->ring_err;
	if (!rg->f)
		return;
	/*
	 * Gone (asked before the drain: whatever it wrote is there), so
	 * drained a last time and unmapped. An exec()ed image's old ring
	 * stays mapped until the process ends.
	 */
	gone = kill((pid_t)rg->pid, 0) && errno == ESRCH;
	drain(c, rg, h);
	if (gone && !c->oom)
		ring_unmap(rg);
}

/* The last read: processes without a ring file, said as a problem. */
static void add_last(const struct pka_header *h, void *arg)
{
	struct ctx *c = arg;
	const struct pka_trace_area *a = (const void *)((const char *)h +
							 h->mode_at);

	if (h->mode_len >= sizeof(*a) && a->status) {
		c->ring_failed++;
		c->status_err = a->status;
	}
	add_rec(h, arg);
}

static void tick(double el, void *arg)
{
	struct ctx *c = arg;

	(void)el;
	if (c->oom)
		return;
	memset(c->t, 0, (size_t)c->run->n * sizeof(*c->t));
	pkc_run_collect(c->run, c->t, 0, add_rec, c);
}

/* ------------------------------------------------------------ options */

/* "10us", "1.5ms", "2s", "300ns", "300" (ns) into *@ns; 0 or -1. */
static int parse_dur(const char *s, uint64_t *ns)
{
	char *end;
	double v, mul = 1;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || !(v >= 0))
		return -1;
	if (!strcmp(end, "") || !strcmp(end, "ns"))
		mul = 1;
	else if (!strcmp(end, "us"))
		mul = 1e3;
	else if (!strcmp(end, "ms"))
		mul = 1e6;
	else if (!strcmp(end, "s"))
		mul = 1e9;
	else
		return -1;
	if (v * mul > 1e18)
		return -1;
	*ns = (uint64_t)(v * mul + 0.5);
	return 0;
}

/* "65536", "64K", "1M" (KiB, MiB) into *@b; 0 or -1. */
static int parse_size(const char *s, uint64_t *b)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *s == '-')
		return -1;
	if (!strcmp(end, "K") || !strcmp(end, "k"))
		v <<= 10;
	else if (!strcmp(end, "M") || !strcmp(end, "m"))
		v <<= 20;
	else if (*end)
		return -1;
	if (v < PKA_TRACE_BUF_MIN || v > PKA_TRACE_BUF_MAX)
		return -1;
	*b = v;
	return 0;
}

static int parse_u32(const char *s, unsigned long max, uint32_t *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || *s == '-' || v > max)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

static int usage_error(const char *msg)
{
	fprintf(stderr, "probekit: %s\n", msg);
	pkc_usage(stderr, &pkc_cmd_trace);
	return PKC_EXIT_OWN;
}

/* A name with its drops said, or NULL if there were none (@buf). */
static const char *dropped_name(char *buf, size_t len, const char *name,
				uint64_t drops, const char *what)
{
	if (!drops)
		return name;
	snprintf(buf, len, "%s (probekit: %llu %s)", name ? name : "?",
		 (unsigned long long)drops, what);
	return buf;
}

/* Where writing the trace is, on the progress line (a terminal only). */
struct wprog {
	const char *path;
	size_t total;		/* calls, and the sort before them */
};

static void write_progress(void *arg, size_t done, size_t n)
{
	const struct wprog *w = arg;
	char line[256], a[32], b[32];

	if (done == n) {
		pkc_progress_update(NULL);
		return;
	}
	snprintf(line, sizeof(line), "probekit: writing %s of %s events to %s...",
		 pkc_group(a, sizeof(a), done), pkc_group(b, sizeof(b), w->total),
		 w->path);
	pkc_progress_update(line);
}

static int write_trace(struct ctx *c, FILE *out, int proto, const char *path)
{
	struct wprog wp = { .path = path, .total = c->nev };
	struct pk_trace_process *ps = calloc(c->nprocs + 1, sizeof(*ps));
	struct pk_trace_thread *ts = calloc(c->nthr + 1, sizeof(*ts));
	char (*pn)[96] = calloc(c->nprocs + 1, sizeof(*pn));
	char (*tn)[96] = calloc(c->nthr + 1, sizeof(*tn));
	struct pk_trace_meta m = { 0 };
	int err = -ENOMEM;

	if (ps && ts && pn && tn) {
		for (size_t i = 0; i < c->nprocs; i++) {
			ps[i].pid = c->procs[i].pid;
			ps[i].name = dropped_name(pn[i], sizeof(pn[i]),
						  c->procs[i].name,
						  c->procs[i].lost,
						  "calls lost: no ring");
		}
		for (size_t i = 0; i < c->nthr; i++) {
			ts[i].pid = c->thr[i].pid;
			ts[i].tid = c->thr[i].tid;
			ts[i].name = dropped_name(tn[i], sizeof(tn[i]),
						  c->thr[i].name,
						  c->thr[i].drops,
						  "events dropped: ring full");
		}
		m.funcs = (const char *const *)c->funcs;
		m.nfuncs = c->nfuncs;
		m.procs = ps;
		m.nprocs = c->nprocs;
		m.threads = ts;
		m.nthreads = c->nthr;
		if (pkc_progress_on()) {
			m.progress = write_progress;
			m.progress_arg = &wp;
		}
		err = proto ? pk_trace_write_proto(out, c->ev, c->nev, &m)
			    : pk_trace_write_json(out, c->ev, c->nev, &m);
	}
	pkc_progress_update(NULL);
	free(ps);
	free(ts);
	free(pn);
	free(tn);
	return err;
}

static void ctx_free(struct ctx *c)
{
	for (size_t i = 0; i < c->nrings; i++) {
		ring_unmap(&c->rings[i]);
		free(c->rings[i].fid);
		free(c->rings[i].seen_drops);
	}
	free(c->rings);
	for (uint32_t i = 0; i < c->nfuncs; i++)
		free(c->funcs[i]);
	free(c->funcs);
	for (size_t i = 0; i < c->nthr; i++)
		free(c->thr[i].name);
	free(c->thr);
	for (size_t i = 0; i < c->nprocs; i++)
		free(c->procs[i].name);
	free(c->procs);
	free(c->ev);
}

static int trace_main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "probe", required_argument, NULL, 'p' },
		{ "probes", required_argument, NULL, 'P' },
		{ "args", required_argument, NULL, 'a' },
		{ "buffer-size", required_argument, NULL, 'b' },
		{ "min-duration", required_argument, NULL, 'm' },
		{ "pid", required_argument, NULL, 'i' },
		{ "tid", required_argument, NULL, 't' },
		{ "depth", required_argument, NULL, 'D' },
		{ "format", required_argument, NULL, 'f' },
		{ "output", required_argument, NULL, 'o' },
		{ "strict", no_argument, NULL, 's' },
		{ "wait-all", no_argument, NULL, 'w' },
		{ "max-events", required_argument, NULL, 'x' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct pkc_spec_list l = { 0 };
	struct pkc_run r = {
		.mode_name = "trace",
		.mode = PKA_MODE_TRACE,
		.slot = sizeof(struct pka_count),
		.area = NULL,
	};
	struct ctx c = { .run = &r, .max_ev = TRACE_MAX_EVENTS };
	uint64_t buf = PKA_TRACE_BUF_DEFAULT, min_ns = 0;
	uint32_t nargs = 0, depth = 0, fpid = 0, ftid = 0;
	int code = PKC_EXIT_OWN, ch, procs, wrote, proto = 0, err, quiet = 0;
	const char *out_path = NULL;
	char env[160];
	long bytes;
	FILE *out = NULL;

	while ((ch = getopt_long(argc, argv, "+p:P:o:qh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'p':
			if (pkc_spec_add(&l, optarg, "-p"))
				goto out;
			break;
		case 'P':
			if (pkc_spec_file(&l, optarg))
				goto out;
			break;
		case 'q':
			quiet = 1;
			break;
		case 'a':
			if (parse_u32(optarg, PKA_TRACE_ARGS, &nargs)) {
				code = usage_error("--args wants 0 to 6");
				goto out;
			}
			break;
		case 'b':
			if (parse_size(optarg, &buf)) {
				code = usage_error("--buffer-size wants bytes "
						   "(K, M: KiB, MiB), 4096 to 256M");
				goto out;
			}
			break;
		case 'm':
			if (parse_dur(optarg, &min_ns)) {
				code = usage_error("--min-duration wants a "
						   "duration: 10us, 1.5ms, 2s, 300ns");
				goto out;
			}
			break;
		case 'i':
			if (parse_u32(optarg, INT32_MAX, &fpid) || !fpid) {
				code = usage_error("--pid wants a process id");
				goto out;
			}
			break;
		case 't':
			if (parse_u32(optarg, INT32_MAX, &ftid) || !ftid) {
				code = usage_error("--tid wants a thread id");
				goto out;
			}
			break;
		case 'D':
			if (parse_u32(optarg, TRACE_DEPTH_MAX, &depth) ||
			    !depth) {
				code = usage_error("--depth wants 1 to 127");
				goto out;
			}
			break;
		case 'f':
			if (!strcmp(optarg, "json"))
				proto = 0;
			else if (!strcmp(optarg, "perfetto"))
				proto = 1;
			else {
				code = usage_error("--format: json or perfetto");
				goto out;
			}
			break;
		case 'o':
			out_path = optarg;
			break;
		case 's':
			r.strict = 1;
			break;
		case 'x': {
			char *end;

			errno = 0;
			c.max_ev = strtoull(optarg, &end, 10);
			if (errno || end == optarg || *end || *optarg == '-' ||
			    !c.max_ev || c.max_ev > SIZE_MAX / 2 /
			    sizeof(struct pk_trace_event)) {
				code = usage_error("--max-events wants a count "
						   "of events, 1 or more");
				goto out;
			}
			break;
		}
		case 'w':
			r.wait_all = 1;
			break;
		case 'h':
			pkc_usage(stdout, &pkc_cmd_trace);
			code = 0;
			goto out;
		default:
			pkc_usage(stderr, &pkc_cmd_trace);
			goto out;
		}
	}
	if (!l.n || optind >= argc || !out_path) {
		code = usage_error(!l.n ? "no probe given (-p NAME)" :
				   optind >= argc ? "no command given" :
				   "no output file given (-o FILE)");
		goto out;
	}
	r.specs = l.v;
	r.n = l.n;
	r.area = NULL;
	if (pkc_run_find_agent(&r))
		goto out;
	c.t = calloc((size_t)r.n, sizeof(*c.t));
	if (!c.t) {
		fprintf(stderr, "probekit: %s\n", strerror(ENOMEM));
		goto out;
	}
	out = fopen(out_path, "we");
	if (!out) {
		fprintf(stderr, "probekit: %s: %s\n", out_path, strerror(errno));
		goto out;
	}
	/* The clock, calibrated here once; the agent gets its rate. */
	pk_tsc_init(&c.clk, 0);
	snprintf(env, sizeof(env), "%u:%llu:%u", c.clk.source,
		 (unsigned long long)c.clk.mult, c.clk.shift);
	setenv(PKA_ENV_CLOCK, env, 1);
	snprintf(env, sizeof(env), "%u:%llu:%llu:%u:%u:%u", nargs,
		 (unsigned long long)buf, (unsigned long long)min_ns, depth,
		 fpid, ftid);
	setenv(PKA_ENV_TRACE, env, 1);
	r.area = trace_area_size;
	pkc_progress_init(quiet);
	code = pkc_run_start(&r, &argv[optind]);
	if (code)
		goto out;
	code = pkc_run_wait(&r, 10, tick, &c);

	memset(c.t, 0, (size_t)r.n * sizeof(*c.t));
	for (int i = 0; i < r.n; i++)
		c.t[i].spec = l.v[i];
	procs = pkc_run_collect(&r, c.t, 1, add_last, &c);
	pkc_run_end(&r);
	pkc_run_check(&r, procs, c.t);
	err = c.oom ? -ENOMEM : write_trace(&c, out, proto, out_path);
	fflush(out);
	bytes = ftell(out);
	wrote = pkc_report_done(out, out_path, err < 0 ? -err : 0);
	out = NULL;
	/* Nothing written: say so, not the events that were not. */
	if (err < 0)
		fprintf(stderr, "probekit trace: no trace written (%s): %zu "
			"events read, %llu dropped (ring full), %llu lost "
			"(no ring), %s\n", strerror(-err), c.nev,
			(unsigned long long)c.drops,
			(unsigned long long)c.lost, out_path);
	else
		fprintf(stderr, "probekit trace: %zu events written, %llu "
			"dropped (ring full), %llu lost (no ring), %ld bytes, "
			"%s%s\n", c.nev, (unsigned long long)c.drops,
			(unsigned long long)c.lost, bytes, out_path,
			c.drops ? " (a larger --buffer-size keeps more)" : "");
	if (c.over)
		fprintf(stderr, "probekit trace: %llu more events dropped: past "
			"--max-events %llu (held in memory, 88 bytes each)\n",
			(unsigned long long)c.over,
			(unsigned long long)c.max_ev);
	if (c.deep)
		fprintf(stderr, "probekit trace: of the lost, %llu calls with "
			"%u traced calls in flight in their thread already\n",
			(unsigned long long)c.deep, PKA_TRACE_DEPTH);
	if (c.missed)
		fprintf(stderr, "probekit trace: of the lost, %llu calls whose "
			"return could not be probed (more than %u deep in a "
			"thread, more threads than PROBEKIT_RETPROBE_THREADS, or "
			"inside a handler)\n", (unsigned long long)c.missed,
			PKA_TRACE_DEPTH);
	if (c.ring_err)
		fprintf(stderr, "probekit trace: a thread's ring could not be "
			"mapped or reserved: %s (its calls lost)\n", strerror(-c.ring_err));
	if (c.unmapped)
		fprintf(stderr, "probekit trace: %llu more events lost: a "
			"thread's ring could not be mapped by this command: %s\n",
			(unsigned long long)c.unmapped, strerror(c.blk_err));
	for (int i = 0; i < r.n; i++) {
		if (c.t[i].failed)
			fprintf(stderr, " %s: not probed in %d of %d: %s\n",
				c.t[i].spec, c.t[i].failed, procs,
				c.t[i].why[0] ? c.t[i].why
					      : strerror(c.t[i].last_err));
		else if (!c.t[i].armed)
			fprintf(stderr, " %s: not probed\n", c.t[i].spec);
	}
	if (c.ring_failed)
		fprintf(stderr, "probekit: %d process%s made no ring file, or "
			"one this command could not map (nothing traced there)%s%s\n",
			c.ring_failed, c.ring_failed == 1 ? "" : "es",
			c.status_err || c.map_err ? ": " : "",
			c.status_err ? strerror(-c.status_err) :
			c.map_err ? strerror(c.map_err) : "");
	code = pkc_run_verdict(&r, code);
	/* A trace missing calls is incomplete too. */
	if (r.strict && (c.drops || c.lost || c.over || c.unmapped ||
			 c.ring_failed)) {
		fprintf(stderr, "probekit: --strict: the trace misses %llu "
			"calls%s\n",
			(unsigned long long)(c.drops + c.lost + c.over +
					     c.unmapped),
			c.ring_failed ? " and every call of a process" : "");
		code = PKC_EXIT_OWN;
	}
	if (wrote)
		code = wrote;
out:
	if (out)
		fclose(out);
	pkc_run_free(&r);
	free(c.t);
	ctx_free(&c);
	pkc_spec_list_free(&l);
	return code;
}

const struct pkc_cmd pkc_cmd_trace = {
	.name = "trace",
	.synopsis = "trace [-p SPEC]... [-P FILE]... [--args N] [--buffer-size BYTES]\n"
		    "         [--min-duration DUR] [--pid PID] [--tid TID] [--depth N]\n"
		    "         [--format json|perfetto] [--max-events N] -o FILE [--strict]\n"
		    "         [--wait-all] [-q]\n"
		    "         -- COMMAND [ARG]...",
	.help =
		"Traces every call of functions while COMMAND runs, in every process it\n"
		"starts: when, how long, pid, tid, arguments, return value; a trace that\n"
		"Perfetto (ui.perfetto.dev) and chrome://tracing open.\n"
		"  -p, --probe SPEC  a function: NAME or OBJECT:NAME, or a glob ('lzma_*')\n"
		"  -P, --probes FILE the specs in FILE, one a line (- for stdin; # comments)\n"
		"      --args N      keep the first N integer arguments (0 to 6; default 0)\n"
		"      --buffer-size BYTES  each thread's ring (K, M; default 1M): a full\n"
		"                    ring drops new events, counted and said\n"
		"      --min-duration DUR  only calls lasting DUR or more (10us, 1ms, ...)\n"
		"      --depth N     only calls nested at most N deep among traced calls\n"
		"      --pid PID, --tid TID  only calls of that process, that thread\n"
		"      --format F    json (trace-event JSON, default) or perfetto (protobuf)\n"
		"  -o, --output FILE the trace (required)\n"
		"      --max-events N  events kept in memory (default 10000000, 88 bytes\n"
		"                    each): the rest are dropped, counted and said\n"
		"      --strict      exit 125 if anything is missing from the trace (drops too)\n"
		"      --wait-all    once COMMAND ended, wait for its descendants too\n"
		"  -q, --quiet       no progress line on the terminal (arming, writing)\n",
	.main = trace_main,
};
