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
 * its exec(), one a CPU (the kernel maps no ring of an event inherited
 * on all CPUs), inherited by every process and thread it starts: per
 * exec() it writes a PERF_RECORD_COMM marked PERF_RECORD_MISC_COMM_EXEC
 * (pid, the new name), then a PERF_RECORD_MMAP2 per executable mapping,
 * the new program's own first (the kernel maps the executable before its
 * interpreter), which names its file and inode; each with its time
 * (sample_id_all), since a process may move to another CPU, and so
 * another ring, between the two. This is how perf record follows a
 * workload's processes, and it needs the same permission
 * (perf_event_paranoid <= 2 for one's own processes, or CAP_PERFMON). The
 * kernel takes the event off a process whose exec() raises its
 * privileges (set-user-ID) or runs an unreadable file, after its COMM and
 * before its file is mapped, and off all that process's descendants: the
 * scans still see those while they live.
 *
 * What it costs the measured program: each fork() and thread copies one
 * event a CPU (a few microseconds each on a large machine), each exec()
 * and executable mapping writes a record, and the rings (XW_PAGES + 1
 * pages a CPU) count against the user's locked memory, which io_uring's
 * registered buffers share. PROBEKIT_EXEC_WATCH=0 turns it off.
 *
 * The rings are read every scan (10 ms) and once at the end, all of them
 * at each read, the records sorted by time: a COMM-exec opens an exec, the
 * next file mapping of its pid (within XW_WINDOW_NS) names its file. A
 * mapping read before its COMM (the COMM written on a CPU whose ring was
 * read just before) is kept for the next read. Records the kernel could
 * not write are counted (PERF_RECORD_LOST), and a read that finds a ring
 * nearly full says so: at the end no LOST record may follow.
 */
#define XW_PAGES 16
#define XW_WINDOW_NS 1000000000ull

/* What each record ends with (sample_id_all): pid, tid, time. */
struct xw_id {
	uint32_t pid, tid;
	uint64_t time;
};

/* A record of one read, before sorting. */
struct xw_rec {
	uint64_t time;
	uint32_t type;		/* PERF_RECORD_COMM or _MMAP2 */
	pid_t pid;
	uint64_t ino;		/* MMAP2 */
	char comm[16];		/* COMM */
	char *file;		/* MMAP2: the file (owned) */
	int kept;		/* unmatched at one read already */
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
	a.mmap2 = 1;
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
	for (long cpu = 0; cpu < ncpu; cpu++) {
		struct pkc_xw_ring *g = &w->ring[w->nring];
		long fd = xw_open_event(pid, (int)cpu);
		void *m;

		if (fd < 0) {
			/* Offline (no such CPU now): nothing runs there. */
			if (errno == ENODEV)
				continue;
			w->err = errno;
			break;
		}
		g->len = (size_t)page * (1 + XW_PAGES);
		m = mmap(NULL, g->len, PROT_READ | PROT_WRITE, MAP_SHARED,
			 (int)fd, 0);
		if (m == MAP_FAILED) {
			w->err = errno;
			close((int)fd);
			break;
		}
		g->fd = (int)fd;
		g->map = m;
		g->size = (size_t)page * XW_PAGES;
		w->nring++;
	}
	/* Some CPUs and not others would tell some exec()s: none, said. */
	if (!w->err && !w->nring)
		w->err = ENODEV;
	if (w->err) {
		int err = w->err;

		pkc_xw_close(w);
		w->err = err;
		return -err;
	}
	w->on = 1;
	return 0;
}

/* Room for one more of @size bytes in *@v (*@n used of *@cap), or NULL. */
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

/* Keep what matters of one record: exec()s, file mappings, losses. */
static void xw_record(struct pkc_xw *w, const struct perf_event_header *h,
		      const char *body, size_t len)
{
	struct xw_rec *r;
	struct xw_id id;
	uint32_t pid;

	if (h->type == PERF_RECORD_LOST) {
		uint64_t n;

		/* id, then how many records were lost. */
		if (len >= 16) {
			memcpy(&n, body + 8, sizeof(n));
			w->lost += n;
		}
		return;
	}
	if (len < 8 + sizeof(id))
		return;
	memcpy(&pid, body, sizeof(pid));
	memcpy(&id, body + len - sizeof(id), sizeof(id));
	len -= sizeof(id);
	if (h->type == PERF_RECORD_COMM) {
		if (!(h->misc & PERF_RECORD_MISC_COMM_EXEC))
			return;	/* a thread renamed, not an exec() */
	} else if (h->type == PERF_RECORD_MMAP2) {
		/*
		 * pid, tid, addr, len, pgoff, maj, min, ino, ino_generation,
		 * prot, flags, then the name: a file's starts with '/'
		 * (//anon, [vdso] and JIT code are not files).
		 */
		if (len <= 64 || body[64] != '/')
			return;
	} else {
		return;
	}
	r = xw_more((void **)&w->rec, &w->nrec, &w->caprec, sizeof(*r));
	if (!r) {
		w->lost++;
		return;
	}
	memset(r, 0, sizeof(*r));
	r->time = id.time;
	r->type = h->type;
	r->pid = (pid_t)pid;
	if (h->type == PERF_RECORD_COMM) {
		/* After pid and tid: the name, NUL-terminated, padded to 8. */
		memcpy(r->comm, body + 8, len - 8 < sizeof(r->comm) - 1 ?
					  len - 8 : sizeof(r->comm) - 1);
		return;
	}
	memcpy(&r->ino, body + 40, sizeof(r->ino));
	r->file = strndup(body + 64, len - 64);
	if (!r->file) {
		w->nrec--;
		w->lost++;
	}
}

static void xw_read_ring(struct pkc_xw *w, struct pkc_xw_ring *g)
{
	struct perf_event_mmap_page *mp = g->map;
	const char *data = (const char *)g->map + (g->len - g->size);
	uint64_t head, tail;

	/* Acquire: the records before data_head are written. */
	head = __atomic_load_n(&mp->data_head, __ATOMIC_ACQUIRE);
	tail = mp->data_tail;
	/* Nearly full: the kernel may have lost records it cannot say yet. */
	if (head - tail > g->size - g->size / 8)
		w->full++;
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

static int by_time(const void *a, const void *b)
{
	const struct xw_rec *x = a, *y = b;

	return x->time < y->time ? -1 : x->time > y->time;
}

/* The exec() of @pid waiting for its file at time @t, or NULL. */
static struct pkc_exec *xw_waiting(struct pkc_xw *w, pid_t pid, uint64_t t)
{
	for (size_t i = w->nwait; i-- > 0;) {
		struct pkc_exec *e = &w->v[w->wait[i]];

		if (e->pid == pid)
			return t >= e->time && t - e->time < XW_WINDOW_NS ?
			       e : NULL;
	}
	return NULL;
}

static void xw_unwait(struct pkc_xw *w, pid_t pid)
{
	for (size_t i = 0; i < w->nwait; i++)
		if (w->v[w->wait[i]].pid == pid) {
			w->wait[i] = w->wait[--w->nwait];
			return;
		}
}

void pkc_xw_drain(struct pkc_xw *w)
{
	size_t keep = 0;

	if (!w->on)
		return;
	for (size_t i = 0; i < w->nring; i++)
		xw_read_ring(w, &w->ring[i]);
	qsort(w->rec, w->nrec, sizeof(*w->rec), by_time);
	for (size_t i = 0; i < w->nrec; i++) {
		struct xw_rec *r = &w->rec[i];
		struct pkc_exec *e;
		size_t *slot;

		if (r->type == PERF_RECORD_COMM) {
			/* A new image: one still waiting for a file gets none. */
			xw_unwait(w, r->pid);
			e = xw_more((void **)&w->v, &w->n, &w->cap, sizeof(*e));
			slot = e ? xw_more((void **)&w->wait, &w->nwait,
					   &w->capwait, sizeof(*slot)) : NULL;
			if (!slot) {
				if (e)
					w->n--;
				w->lost++;
				continue;
			}
			memset(e, 0, sizeof(*e));
			e->pid = r->pid;
			e->time = r->time;
			memcpy(e->comm, r->comm, sizeof(e->comm));
			*slot = w->n - 1;
			continue;
		}
		e = xw_waiting(w, r->pid, r->time);
		if (e) {
			e->exe = r->file;
			e->ino = r->ino;
			r->file = NULL;
			xw_unwait(w, r->pid);
		} else if (!r->kept) {
			/* Once more, in case its COMM comes in the next read. */
			r->kept = 1;
			w->rec[keep++] = *r;
			continue;
		}
		free(r->file);
	}
	w->nrec = keep;
}

void pkc_xw_done(struct pkc_xw *w)
{
	pkc_xw_drain(w);
	pkc_xw_drain(w);	/* what the last read kept: now or never */
}

void pkc_xw_close(struct pkc_xw *w)
{
	int err = w->err, on = w->on;
	uint64_t lost = w->lost, full = w->full;

	for (size_t i = 0; i < w->nring; i++) {
		munmap(w->ring[i].map, w->ring[i].len);
		close(w->ring[i].fd);
	}
	free(w->ring);
	for (size_t i = 0; i < w->nrec; i++)
		free(w->rec[i].file);
	free(w->rec);
	free(w->wait);
	for (size_t i = 0; i < w->n; i++)
		free(w->v[i].exe);
	free(w->v);
	memset(w, 0, sizeof(*w));
	/* What the report says of it outlives the rings. */
	w->err = err;
	w->on = on;
	w->lost = lost;
	w->full = full;
}
