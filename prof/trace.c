// SPDX-License-Identifier: MIT
/* trace.c - trace-event JSON and a small protobuf encoder for Perfetto's Trace (see trace.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "esc.h"
#include "trace.h"

static int check_events(const struct pk_trace_event *ev, size_t n, const struct pk_trace_meta *m)
{
	if (n > INT32_MAX)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (ev[i].func >= m->nfuncs || ev[i].nargs > PK_TRACE_MAX_ARGS)
			return -EINVAL;
	return 0;
}

/* ---- JSON ---- */

/* ns as us with three decimals: exact. */
static int put_us(FILE *f, uint64_t ns)
{
	return fprintf(f, "%llu.%03u", (unsigned long long)(ns / 1000), (unsigned int)(ns % 1000)) < 0;
}

/* Events are separated by ",\n": before every one but the first. */
static const char *sep_of(int *first)
{
	const char *s = *first ? "" : ",\n";

	*first = 0;
	return s;
}

static int put_meta_json(FILE *f, int *first, uint32_t pid, uint32_t tid, const char *what,
			 const char *name)
{
	int err = fprintf(f, "%s{\"ph\":\"M\",\"pid\":%u,\"tid\":%u,\"name\":\"%s\",\"args\":{\"name\":\"",
			  sep_of(first), pid, tid, what) < 0;

	err |= pk_esc_put(f, name, PK_ESC_JSON) != 0;
	err |= fputs("\"}}", f) < 0;
	return err;
}

/* Tell @m's progress callback, if any, where writing is: every PROGRESS_EVERY calls, and at the ends. */
#define PROGRESS_EVERY 65536
static void progress(const struct pk_trace_meta *m, size_t done, size_t n)
{
	if (m->progress && (done % PROGRESS_EVERY == 0 || done == n))
		m->progress(m->progress_arg, done, n);
}

int pk_trace_write_json(FILE *f, const struct pk_trace_event *ev, size_t n,
			const struct pk_trace_meta *m)
{
	int err = check_events(ev, n, m), first = 1;

	if (err)
		return err;
	err |= fputs("{\"traceEvents\":[\n", f) < 0;
	for (size_t i = 0; i < m->nprocs; i++)
		if (m->procs[i].name)
			err |= put_meta_json(f, &first, m->procs[i].pid, m->procs[i].pid, "process_name", m->procs[i].name);
	for (size_t i = 0; i < m->nthreads; i++)
		if (m->threads[i].name)
			err |= put_meta_json(f, &first, m->threads[i].pid, m->threads[i].tid, "thread_name", m->threads[i].name);
	for (size_t i = 0; i < n && !err; i++) {
		const struct pk_trace_event *e = &ev[i];
		const char *sep = "";

		progress(m, i, n);
		err |= fprintf(f, "%s{\"ph\":\"X\",\"name\":\"", sep_of(&first)) < 0;
		err |= pk_esc_put(f, m->funcs[e->func], PK_ESC_JSON) != 0;
		err |= fprintf(f, "\",\"pid\":%u,\"tid\":%u,\"ts\":", e->pid, e->tid) < 0;
		err |= put_us(f, e->ts_ns);
		err |= fputs(",\"dur\":", f) < 0;
		err |= put_us(f, e->dur_ns);
		err |= fputs(",\"args\":{", f) < 0;
		for (unsigned int a = 0; a < e->nargs; a++, sep = ",")
			err |= fprintf(f, "%s\"arg%u\":\"0x%llx\"", sep, a, (unsigned long long)e->args[a]) < 0;
		if (e->has_ret)
			err |= fprintf(f, "%s\"ret\":\"0x%llx\"", sep, (unsigned long long)e->ret) < 0;
		err |= fputs("}}", f) < 0;
	}
	err |= fputs("\n],\"displayTimeUnit\":\"ns\"}\n", f) < 0;
	if (!err)
		progress(m, n, n);
	return err ? -EIO : 0;
}

/* ---- protobuf ---- */

/* Field numbers, from Perfetto's public protos (protos/perfetto/trace/...). */
enum {
	PB_TRACE_PACKET = 1,			/* Trace.packet */
	PB_PKT_TIMESTAMP = 8,			/* TracePacket */
	PB_PKT_SEQ_ID = 10,			/* trusted_packet_sequence_id */
	PB_PKT_TRACK_EVENT = 11,
	PB_PKT_INTERNED = 12,
	PB_PKT_SEQ_FLAGS = 13,
	PB_PKT_TRACK_DESC = 60,
	PB_SEQ_CLEARED = 1,			/* SEQ_INCREMENTAL_STATE_CLEARED */
	PB_SEQ_NEEDS = 2,			/* SEQ_NEEDS_INCREMENTAL_STATE */
	PB_TD_UUID = 1,				/* TrackDescriptor */
	PB_TD_NAME = 2,
	PB_TD_PROCESS = 3,
	PB_TD_THREAD = 4,
	PB_TD_PARENT = 5,
	PB_PD_PID = 1,				/* ProcessDescriptor */
	PB_PD_NAME = 6,
	PB_THD_PID = 1,				/* ThreadDescriptor */
	PB_THD_TID = 2,
	PB_THD_NAME = 5,
	PB_TE_DEBUG = 4,			/* TrackEvent.debug_annotations */
	PB_TE_TYPE = 9,
	PB_TE_NAME_IID = 10,
	PB_TE_TRACK = 11,
	PB_TE_BEGIN = 1,			/* TYPE_SLICE_BEGIN */
	PB_TE_END = 2,				/* TYPE_SLICE_END */
	PB_ID_EVENT_NAMES = 2,			/* InternedData */
	PB_ID_DEBUG_NAMES = 3,
	PB_IID = 1,				/* EventName, DebugAnnotationName */
	PB_INAME = 2,
	PB_DA_NAME_IID = 1,			/* DebugAnnotation */
	PB_DA_POINTER = 7,
};
#define PB_RET_IID (PK_TRACE_MAX_ARGS + 1)	/* arg0..arg5: 1..6, ret: 7 */
#define PB_SEQ 1

struct pb {
	uint8_t *p;
	size_t len, cap;
	int err;
};

static int pb_reserve(struct pb *b, size_t n)
{
	size_t cap;
	uint8_t *p;

	if (b->len + n <= b->cap)
		return 0;
	cap = b->cap * 2 > b->len + n + 4096 ? b->cap * 2 : b->len + n + 4096;
	p = realloc(b->p, cap);
	if (!p) {
		b->err = -ENOMEM;
		return -1;
	}
	b->p = p;
	b->cap = cap;
	return 0;
}

static size_t varint_enc(uint8_t *d, uint64_t v)
{
	size_t i = 0;

	while (v >= 0x80) {
		d[i++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	d[i++] = (uint8_t)v;
	return i;
}

static void pb_varint(struct pb *b, uint64_t v)
{
	if (!pb_reserve(b, 10))
		b->len += varint_enc(b->p + b->len, v);
}

static void pb_uint(struct pb *b, uint32_t field, uint64_t v)
{
	pb_varint(b, (uint64_t)field << 3);	/* wire type 0 */
	pb_varint(b, v);
}

static void pb_bytes(struct pb *b, uint32_t field, const void *s, size_t n)
{
	pb_varint(b, (uint64_t)field << 3 | 2);
	pb_varint(b, n);
	if (!pb_reserve(b, n)) {
		memcpy(b->p + b->len, s, n);
		b->len += n;
	}
}

/* A nested message: its fields are written after pb_open(), then pb_close() puts tag and length before them. */
static size_t pb_open(struct pb *b)
{
	return b->len;
}

static void pb_close(struct pb *b, size_t start, uint32_t field)
{
	uint8_t hdr[20];
	size_t n = b->len - start, hl;

	if (b->err)
		return;
	hl = varint_enc(hdr, (uint64_t)field << 3 | 2);
	hl += varint_enc(hdr + hl, n);
	if (pb_reserve(b, hl))
		return;
	memmove(b->p + start + hl, b->p + start, n);
	memcpy(b->p + start, hdr, hl);
	b->len += hl;
}

/* A string made valid UTF-8 (a proto string must be). */
static void pb_str(struct pb *b, uint32_t field, const char *s)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);

	if (!m) {
		b->err = -ENOMEM;
		return;
	}
	if (pk_esc_put(m, s, PK_ESC_NONE))
		b->err = -ENOMEM;
	if (fclose(m))
		b->err = -ENOMEM;
	else
		pb_bytes(b, field, buf, len);
	free(buf);
}

static int pb_flush(struct pb *b, FILE *f, size_t above)
{
	if (b->err || b->len <= above)
		return b->err;
	if (fwrite(b->p, 1, b->len, f) != b->len)
		b->err = -EIO;
	b->len = 0;
	return b->err;
}

static int cmp_call(const void *a, const void *b, void *arg)
{
	const struct pk_trace_event *ev = arg;
	const struct pk_trace_event *x = &ev[*(const uint32_t *)a], *y = &ev[*(const uint32_t *)b];

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->ts_ns != y->ts_ns)
		return x->ts_ns < y->ts_ns ? -1 : 1;
	if (x->dur_ns != y->dur_ns)
		return x->dur_ns > y->dur_ns ? -1 : 1;	/* the caller first */
	return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

/* A slice's begin or end: when, which call (ev << 1 | is_end), its place in its thread's order. */
struct edge {
	uint64_t t;
	uint32_t what;
	uint32_t seq;
};

static int cmp_edge(const void *a, const void *b)
{
	const struct edge *x = a, *y = b;

	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static uint64_t end_of(const struct pk_trace_event *e)
{
	return e->ts_ns + e->dur_ns < e->ts_ns ? UINT64_MAX : e->ts_ns + e->dur_ns;
}

static const char *proc_name(const struct pk_trace_meta *m, uint32_t pid)
{
	for (size_t i = 0; i < m->nprocs; i++)
		if (m->procs[i].pid == pid)
			return m->procs[i].name;
	return NULL;
}

static const char *thread_name(const struct pk_trace_meta *m, uint32_t pid, uint32_t tid)
{
	for (size_t i = 0; i < m->nthreads; i++)
		if (m->threads[i].pid == pid && m->threads[i].tid == tid)
			return m->threads[i].name;
	return NULL;
}

static void put_descriptors(struct pb *b, const struct pk_trace_event *ev, const uint32_t *idx,
			    size_t n, const uint32_t *thr, const struct pk_trace_meta *m,
			    uint32_t nthreads)
{
	uint32_t last_pid = 0, nproc = 0, proc_uuid = 0;

	for (size_t i = 0; i < n; i++) {
		const struct pk_trace_event *e = &ev[idx[i]];
		size_t pkt, td, d;
		const char *name;

		if (i && thr[idx[i]] == thr[idx[i - 1]])
			continue;
		if (!i || e->pid != last_pid) {
			last_pid = e->pid;
			proc_uuid = nthreads + 1 + nproc++;
			pkt = pb_open(b);
			pb_uint(b, PB_PKT_SEQ_ID, PB_SEQ);
			td = pb_open(b);
			pb_uint(b, PB_TD_UUID, proc_uuid);
			d = pb_open(b);
			pb_uint(b, PB_PD_PID, e->pid);
			if ((name = proc_name(m, e->pid)))
				pb_str(b, PB_PD_NAME, name);
			pb_close(b, d, PB_TD_PROCESS);
			pb_close(b, td, PB_PKT_TRACK_DESC);
			pb_close(b, pkt, PB_TRACE_PACKET);
		}
		pkt = pb_open(b);
		pb_uint(b, PB_PKT_SEQ_ID, PB_SEQ);
		td = pb_open(b);
		pb_uint(b, PB_TD_UUID, thr[idx[i]] + 1);
		pb_uint(b, PB_TD_PARENT, proc_uuid);
		d = pb_open(b);
		pb_uint(b, PB_THD_PID, e->pid);
		pb_uint(b, PB_THD_TID, e->tid);
		if ((name = thread_name(m, e->pid, e->tid)))
			pb_str(b, PB_THD_NAME, name);
		pb_close(b, d, PB_TD_THREAD);
		pb_close(b, td, PB_PKT_TRACK_DESC);
		pb_close(b, pkt, PB_TRACE_PACKET);
	}
}

static void put_slice(struct pb *b, const struct pk_trace_event *e, uint64_t t, int is_end,
		      uint64_t uuid, const struct pk_trace_meta *m, uint8_t *named)
{
	size_t pkt = pb_open(b), te, x;

	pb_uint(b, PB_PKT_TIMESTAMP, t);
	pb_uint(b, PB_PKT_SEQ_ID, PB_SEQ);
	pb_uint(b, PB_PKT_SEQ_FLAGS, PB_SEQ_NEEDS);
	if (!is_end && !named[e->func]) {
		size_t id = pb_open(b);

		named[e->func] = 1;
		x = pb_open(b);
		pb_uint(b, PB_IID, (uint64_t)e->func + 1);
		pb_str(b, PB_INAME, m->funcs[e->func]);
		pb_close(b, x, PB_ID_EVENT_NAMES);
		pb_close(b, id, PB_PKT_INTERNED);
	}
	te = pb_open(b);
	pb_uint(b, PB_TE_TYPE, is_end ? PB_TE_END : PB_TE_BEGIN);
	pb_uint(b, PB_TE_TRACK, uuid);
	if (!is_end) {
		pb_uint(b, PB_TE_NAME_IID, (uint64_t)e->func + 1);
		for (unsigned int a = 0; a < e->nargs; a++) {
			x = pb_open(b);
			pb_uint(b, PB_DA_NAME_IID, a + 1);
			pb_uint(b, PB_DA_POINTER, e->args[a]);
			pb_close(b, x, PB_TE_DEBUG);
		}
	} else if (e->has_ret) {
		x = pb_open(b);
		pb_uint(b, PB_DA_NAME_IID, PB_RET_IID);
		pb_uint(b, PB_DA_POINTER, e->ret);
		pb_close(b, x, PB_TE_DEBUG);
	}
	pb_close(b, te, PB_PKT_TRACK_EVENT);
	pb_close(b, pkt, PB_TRACE_PACKET);
}

int pk_trace_write_proto(FILE *f, const struct pk_trace_event *ev, size_t n,
			 const struct pk_trace_meta *m)
{
	static const char *const dnames[] = { "arg0", "arg1", "arg2", "arg3", "arg4", "arg5", "ret" };
	uint32_t *idx = NULL, *thr = NULL, *stack = NULL, nthreads = 0;
	struct edge *edges = NULL;
	uint8_t *named = NULL;
	struct pb b = { 0 };
	size_t ne = 0, pkt, id, x;
	int err = check_events(ev, n, m);

	if (err)
		return err;
	idx = malloc((n + 1) * sizeof(*idx));
	thr = malloc((n + 1) * sizeof(*thr));
	stack = malloc((n + 1) * sizeof(*stack));
	edges = malloc((2 * n + 1) * sizeof(*edges));
	named = calloc(m->nfuncs + 1, 1);
	if (!idx || !thr || !stack || !edges || !named) {
		err = -ENOMEM;
		goto out;
	}
	progress(m, 0, n);
	for (size_t i = 0; i < n; i++)
		idx[i] = (uint32_t)i;
	qsort_r(idx, n, sizeof(*idx), cmp_call, (void *)ev);

	/* Each thread's calls in call order: begins and ends by a stack walk. */
	for (size_t i = 0, sp = 0; i < n; i++) {
		const struct pk_trace_event *e = &ev[idx[i]];

		if (i && (e->pid != ev[idx[i - 1]].pid || e->tid != ev[idx[i - 1]].tid)) {
			while (sp) {
				uint32_t top = stack[--sp];

				edges[ne] = (struct edge){ end_of(&ev[top]), top << 1 | 1, (uint32_t)ne };
				ne++;
			}
			nthreads++;
		}
		thr[idx[i]] = nthreads;
		while (sp && end_of(e) > end_of(&ev[stack[sp - 1]])) {
			uint32_t top = stack[--sp];

			edges[ne] = (struct edge){ end_of(&ev[top]), top << 1 | 1, (uint32_t)ne };
			ne++;
		}
		edges[ne] = (struct edge){ e->ts_ns, idx[i] << 1, (uint32_t)ne };
		ne++;
		stack[sp++] = idx[i];
		if (i == n - 1)
			while (sp) {
				uint32_t top = stack[--sp];

				edges[ne] = (struct edge){ end_of(&ev[top]), top << 1 | 1, (uint32_t)ne };
				ne++;
			}
	}
	if (n)
		nthreads++;
	qsort(edges, ne, sizeof(*edges), cmp_edge);

	/* 1. incremental state cleared, debug annotation names interned */
	pkt = pb_open(&b);
	pb_uint(&b, PB_PKT_SEQ_ID, PB_SEQ);
	pb_uint(&b, PB_PKT_SEQ_FLAGS, PB_SEQ_CLEARED);
	id = pb_open(&b);
	for (unsigned int i = 0; i < sizeof(dnames) / sizeof(dnames[0]); i++) {
		x = pb_open(&b);
		pb_uint(&b, PB_IID, i + 1);
		pb_str(&b, PB_INAME, dnames[i]);
		pb_close(&b, x, PB_ID_DEBUG_NAMES);
	}
	pb_close(&b, id, PB_PKT_INTERNED);
	pb_close(&b, pkt, PB_TRACE_PACKET);
	/* 2. tracks */
	put_descriptors(&b, ev, idx, n, thr, m, nthreads);
	/* 3. slices, in time order */
	for (size_t i = 0; i < ne && !b.err; i++) {
		const struct pk_trace_event *e = &ev[edges[i].what >> 1];

		put_slice(&b, e, edges[i].t, edges[i].what & 1, thr[edges[i].what >> 1] + 1, m, named);
		pb_flush(&b, f, 1 << 20);
		/* Two edges a call: calls written so far, at every 2^16th. */
		if (!(i & 1) && i / 2 && (i / 2) % PROGRESS_EVERY == 0)
			progress(m, i / 2, n);
	}
	err = pb_flush(&b, f, 0);
	if (!err && ferror(f))
		err = -EIO;
	if (!err)
		progress(m, n, n);
out:
	free(b.p);
	free(idx);
	free(thr);
	free(stack);
	free(edges);
	free(named);
	return err;
}
