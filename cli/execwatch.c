// SPDX-License-Identifier: MIT
/* execwatch.c - every exec() of COMMAND's processes, told by the kernel (perf_event_open() side-band rings), so that a process too short-lived for the scans is never silently missing. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cli.h"

/*
 * A software "dummy" event (it counts nothing) opened on COMMAND before
 * its exec(), one a CPU (the kernel maps no ring of an inherited event
 * on all CPUs), inherited by every process and thread it starts: per
 * exec() it writes a PERF_RECORD_COMM marked PERF_RECORD_MISC_COMM_EXEC
 * (pid, the new name), then a PERF_RECORD_MMAP per executable mapping,
 * the new program's own first (the kernel maps the executable before its
 * interpreter), which names its file; each with its time (sample_id_all),
 * since a process may move to another CPU, and so another ring, between
 * the two. This is how perf record follows a workload's processes, and
 * it needs the same permission (perf_event_paranoid <= 2 for one's own
 * processes, or CAP_PERFMON). The kernel takes the event off a process
 * whose exec() raises its privileges (set-user-ID) or runs an unreadable
 * file, after its COMM and before its file is mapped, and off all that
 * process's descendants: the scans still see those while they live.
 *
 * The rings are read every scan (10 ms) and once at the end; 64 pages a
 * CPU hold some hundreds of exec()s, and records the kernel could not
 * write are counted (PERF_RECORD_LOST) and said. Which file an exec()
 * ran is decided once, at the end (pkc_xw_done()): the first mapping of
 * its pid after it in time.
 */
#define XW_PAGES 64

/* What each record ends with (sample_id_all): pid, tid, time. */
struct xw_id {
	uint32_t pid, tid;
	uint64_t time;
};

static long xw_open_event(pid_t pid, int cpu)
{
	struct perf_event_attr a;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_DUMMY;
	a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
	a.sample_id_all = 1;
	a.inherit = 1;
	a.comm = 1;
	a.comm_exec = 1;
	a.mmap = 1;
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	return syscall(SYS_perf_event_open, &a, pid, cpu, -1,
		       PERF_FLAG_FD_CLOEXEC);
}

int pkc_xw_open(struct pkc_xw *w, pid_t pid)
{
	long page = sysconf(_SC_PAGESIZE);
	long ncpu = sysconf(_SC_NPROCESSORS_CONF);

	memset(w, 0, sizeof(*w));
	if (ncpu < 1)
		ncpu = 1;
	w->ring = calloc((size_t)ncpu, sizeof(*w->ring));
	if (!w->ring) {
		w->err = ENOMEM;
		return -w->err;
	}
	w->err = ENODEV;	/* no CPU at all: said so */
	for (long cpu = 0; cpu < ncpu; cpu++) {
		struct pkc_xw_ring *g = &w->ring[w->nring];
		long fd = xw_open_event(pid, (int)cpu);
		void *m;

		/* An offline CPU has no event: the others carry its work. */
		if (fd < 0) {
			if (errno != ENODEV && errno != EINVAL)
				w->err = errno;
			continue;
		}
		g->len = (size_t)page * (1 + XW_PAGES);
		m = mmap(NULL, g->len, PROT_READ | PROT_WRITE, MAP_SHARED,
			 (int)fd, 0);
		if (m == MAP_FAILED) {
			w->err = errno;
			close((int)fd);
			continue;
		}
		g->fd = (int)fd;
		g->map = m;
		g->size = (size_t)page * XW_PAGES;
		w->nring++;
	}
	if (!w->nring) {
		free(w->ring);
		w->ring = NULL;
		return -w->err;
	}
	w->err = 0;
	return 0;
}

/* Keep one more record of @what (the grown array in *@v, *@n, *@cap). */
static void *xw_more(void **v, size_t *n, size_t *cap, size_t size)
{
	if (*n == *cap) {
		size_t c = *cap ? 2 * *cap : 64;
		void *p = realloc(*v, c * size);

		if (!p)
			return NULL;
		*v = p;
		*cap = c;
	}
	return (char *)*v + (*n)++ * size;
}

static void xw_record(struct pkc_xw *w, const struct perf_event_header *h,
		      const char *body, size_t len)
{
	struct xw_id id;
	uint32_t pid;

	if (len < 8 + sizeof(id))
		return;
	memcpy(&pid, body, sizeof(pid));
	memcpy(&id, body + len - sizeof(id), sizeof(id));
	len -= sizeof(id);
	switch (h->type) {
	case PERF_RECORD_COMM: {
		struct pkc_exec *e;

		if (!(h->misc & PERF_RECORD_MISC_COMM_EXEC))
			return;	/* a thread renamed, not an exec() */
		e = xw_more((void **)&w->v, &w->n, &w->cap, sizeof(*e));
		if (!e) {
			w->lost++;
			return;
		}
		memset(e, 0, sizeof(*e));
		e->pid = (pid_t)pid;
		e->time = id.time;
		/* After pid and tid: the name, NUL-terminated, padded to 8. */
		memcpy(e->comm, body + 8, len - 8 < sizeof(e->comm) - 1 ?
					  len - 8 : sizeof(e->comm) - 1);
		return;
	}
	case PERF_RECORD_MMAP: {
		struct pkc_xw_map *m;

		/* pid, tid, addr, len, pgoff, then the file name. */
		if (len <= 32 || body[32] != '/')
			return;	/* [vdso] and the like: no file */
		m = xw_more((void **)&w->maps, &w->nmaps, &w->capmaps,
			    sizeof(*m));
		if (!m)
			return;
		m->pid = (pid_t)pid;
		m->time = id.time;
		m->file = strndup(body + 32, len - 32);
		if (!m->file)
			w->nmaps--;
		return;
	}
	case PERF_RECORD_LOST: {
		uint64_t n;

		/* id, then how many records were lost. */
		if (len >= 16) {
			memcpy(&n, body + 8, sizeof(n));
			w->lost += n;
		}
		return;
	}
	}
}

static void xw_drain_ring(struct pkc_xw *w, struct pkc_xw_ring *g)
{
	struct perf_event_mmap_page *mp = g->map;
	const char *data = (const char *)g->map + (g->len - g->size);
	uint64_t head, tail;

	/* Acquire: the records before data_head are written. */
	head = __atomic_load_n(&mp->data_head, __ATOMIC_ACQUIRE);
	tail = mp->data_tail;
	while (tail + sizeof(struct perf_event_header) <= head) {
		struct perf_event_header h;
		char rec[sizeof(h) + 4096 + 64];
		size_t off = tail % g->size, first;

		/* A record may wrap around the ring's end: copy it out whole. */
		first = g->size - off < sizeof(h) ? g->size - off : sizeof(h);
		memcpy(&h, data + off, first);
		memcpy((char *)&h + first, data, sizeof(h) - first);
		if (h.size < sizeof(h) || tail + h.size > head)
			break;
		if (h.size <= sizeof(rec)) {
			first = g->size - off < h.size ? g->size - off : h.size;
			memcpy(rec, data + off, first);
			memcpy(rec + first, data, h.size - first);
			xw_record(w, &h, rec + sizeof(h), h.size - sizeof(h));
		}
		tail += h.size;
	}
	/* Release: the kernel may write over what was read. */
	__atomic_store_n(&mp->data_tail, tail, __ATOMIC_RELEASE);
}

void pkc_xw_drain(struct pkc_xw *w)
{
	for (size_t i = 0; i < w->nring; i++)
		xw_drain_ring(w, &w->ring[i]);
}

static int by_pid_time(const void *a, const void *b)
{
	const struct pkc_xw_map *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	return x->time < y->time ? -1 : x->time > y->time;
}

static int by_time(const void *a, const void *b)
{
	const struct pkc_exec *x = a, *y = b;

	return x->time < y->time ? -1 : x->time > y->time;
}

void pkc_xw_done(struct pkc_xw *w)
{
	pkc_xw_drain(w);
	/* The rings are a CPU's each: in time order, as they ran. */
	qsort(w->v, w->n, sizeof(*w->v), by_time);
	qsort(w->maps, w->nmaps, sizeof(*w->maps), by_pid_time);
	for (size_t i = 0; i < w->n; i++) {
		struct pkc_exec *e = &w->v[i];
		size_t lo = 0, hi = w->nmaps;

		/* The first mapping of its pid at or after its exec(). */
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			const struct pkc_xw_map *m = &w->maps[mid];

			if (m->pid < e->pid ||
			    (m->pid == e->pid && m->time < e->time))
				lo = mid + 1;
			else
				hi = mid;
		}
		/* Not past its pid's next exec(): that one's file, not its. */
		if (lo < w->nmaps && w->maps[lo].pid == e->pid) {
			int later = 0;

			for (size_t k = 0; k < w->n; k++)
				later |= w->v[k].pid == e->pid &&
					 w->v[k].time > e->time &&
					 w->v[k].time <= w->maps[lo].time;
			if (!later)
				e->exe = w->maps[lo].file;
		}
	}
}

void pkc_xw_close(struct pkc_xw *w)
{
	for (size_t i = 0; i < w->nring; i++) {
		munmap(w->ring[i].map, w->ring[i].len);
		close(w->ring[i].fd);
	}
	free(w->ring);
	for (size_t i = 0; i < w->nmaps; i++)
		free(w->maps[i].file);
	free(w->maps);
	free(w->v);
	memset(w, 0, sizeof(*w));
}
