// SPDX-License-Identifier: MIT
/* test_prof_trace.c - trace writers: the JSON through python's json (fields, nesting, metadata, values), the protobuf through a decoder of our own and protoc --decode. */
#include <errno.h>

#include "harness.h"
#include "trace.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Function names: C++ quotes, a backslash, a newline, UTF-8, an invalid byte. */
static const char *const funcs[] = {
	"main", "lzma_code", "operator\"\" _km(unsigned long long)", "a\\b", "two\nlines",
	"caf\xc3\xa9", "bad_\xff_byte", "recurse",
};
/* The same as the decoder must read them back: the invalid byte as U+FFFD. */
static const char *const funcs_utf8[] = {
	"main", "lzma_code", "operator\"\" _km(unsigned long long)", "a\\b", "two\nlines",
	"caf\xc3\xa9", "bad_\xef\xbf\xbd_byte", "recurse",
};
#define NFUNCS (sizeof(funcs) / sizeof(funcs[0]))

static const struct pk_trace_process procs[] = { { 100, "xz" }, { 200, "x\"z -9" } };
static const struct pk_trace_thread threads[] = {
	{ 100, 100, "xz" }, { 100, 101, "xz worker" }, { 200, 200, "main\\thread" },
};

#define MAXEV 20000
static struct pk_trace_event ev[MAXEV];
static size_t nev;

/* Calls nested inside [t0, t1): children at the start, adjacent siblings, zero-length ones. */
static void gen(uint32_t pid, uint32_t tid, uint64_t t0, uint64_t t1, int depth)
{
	uint64_t t = t0;

	while (t < t1 && nev < MAXEV && depth < 8) {
		uint64_t len = next() % ((t1 - t) + 1), gap;
		struct pk_trace_event *e = &ev[nev++];

		if (depth == 0)
			len %= 200000;
		if (next() % 8 == 0)
			len = 0;
		*e = (struct pk_trace_event){ .ts_ns = t, .dur_ns = len, .pid = pid, .tid = tid,
					      .func = (uint32_t)(next() % NFUNCS),
					      .nargs = (uint8_t)(next() % 7), .has_ret = next() % 4 != 0 };
		for (int a = 0; a < e->nargs; a++)
			e->args[a] = next() >> (next() % 64);
		e->ret = next() % 2 ? (uint64_t)-1 : next() % 1000;
		if (len > 2 && next() % 2)
			gen(pid, tid, t + (next() % 2 ? 0 : 1), t + len - (next() % 2), depth + 1);
		gap = next() % 3 == 0 ? 0 : next() % 1000;
		t += len + gap;
	}
}

static void shuffle(void)
{
	for (size_t i = nev - 1; i > 0; i--) {
		size_t j = next() % (i + 1);
		struct pk_trace_event t = ev[i];

		ev[i] = ev[j];
		ev[j] = t;
	}
}

static const char *py(void)
{
	return access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
}

static void put_hex(FILE *f, const char *s)
{
	for (; *s; s++)
		fprintf(f, "%02x", (unsigned char)*s);
}

/* ---- a protobuf decoder of the test's own ---- */

struct rd {
	const uint8_t *p, *end;
	int bad;
};

static uint64_t rd_varint(struct rd *r)
{
	uint64_t v = 0;

	for (int s = 0; s < 64; s += 7) {
		if (r->p >= r->end) {
			r->bad = 1;
			return 0;
		}
		v |= (uint64_t)(*r->p & 0x7f) << s;
		if (!(*r->p++ & 0x80))
			return v;
	}
	r->bad = 1;
	return 0;
}

/* The next field: 1 with *f, *v (varint) or *sub (length-delimited); 0 at the end. */
static int rd_next(struct rd *r, uint32_t *f, uint64_t *v, struct rd *sub)
{
	uint64_t key, len;

	if (r->bad || r->p >= r->end)
		return 0;
	key = rd_varint(r);
	*f = (uint32_t)(key >> 3);
	switch (key & 7) {
	case 0:
		*v = rd_varint(r);
		sub->p = sub->end = NULL;
		break;
	case 2:
		len = rd_varint(r);
		if (len > (uint64_t)(r->end - r->p)) {
			r->bad = 1;
			return 0;
		}
		sub->p = r->p;
		sub->end = r->p + len;
		sub->bad = 0;
		r->p += len;
		*v = len;
		break;
	default:
		r->bad = 1;	/* we write only varints and length-delimited fields */
		return 0;
	}
	return !r->bad;
}

struct dec {
	struct pk_trace_event *out;
	size_t nout;
	char *iname[NFUNCS + 1];
	char dname[8][8];
	uint32_t uuid_pid[16], uuid_tid[16], uuid_is_thread[16];
	struct pk_trace_event stack[16][16];
	int sp[16];
	size_t packets, events;
	int bad_seq, bad_flags, bad_order, bad_struct, bad_names;
	uint64_t last_ts;
};

static char *dup_sub(const struct rd *s)
{
	char *p = malloc((size_t)(s->end - s->p) + 1);

	memcpy(p, s->p, (size_t)(s->end - s->p));
	p[s->end - s->p] = 0;
	return p;
}

static void dec_interned(struct dec *d, struct rd *r)
{
	struct rd s, t;
	uint32_t f, g;
	uint64_t v, w;

	while (rd_next(r, &f, &v, &s)) {
		uint64_t iid = 0;
		char *name = NULL;

		if (f != 2 && f != 3) {
			d->bad_struct++;
			continue;
		}
		while (rd_next(&s, &g, &w, &t)) {
			if (g == 1)
				iid = w;
			else if (g == 2 && t.p)
				free(name), name = dup_sub(&t);
		}
		if (f == 2 && iid >= 1 && iid <= NFUNCS && name)
			d->iname[iid] = name, name = NULL;
		else if (f == 3 && iid >= 1 && iid <= 7 && name && strlen(name) < 8)
			strcpy(d->dname[iid], name);
		else
			d->bad_struct++;
		free(name);
	}
}

static void dec_desc(struct dec *d, struct rd *r)
{
	struct rd s, t;
	uint32_t f, g;
	uint64_t v, w, uuid = 0, pid = 0, tid = 0;
	int thread = 0;

	while (rd_next(r, &f, &v, &s)) {
		if (f == 1)
			uuid = v;
		if (f == 3 || f == 4) {
			thread = f == 4;
			while (rd_next(&s, &g, &w, &t)) {
				if (g == 1)
					pid = w;
				if (g == 2 && thread)
					tid = w;
			}
		}
	}
	if (uuid >= 16) {
		d->bad_struct++;
		return;
	}
	d->uuid_pid[uuid] = (uint32_t)pid;
	d->uuid_tid[uuid] = (uint32_t)tid;
	d->uuid_is_thread[uuid] = thread;
}

static void dec_event(struct dec *d, struct rd *r, uint64_t ts)
{
	struct pk_trace_event e = { 0 };
	uint64_t type = 0, uuid = 0, name_iid = 0, v, w;
	struct rd s, t;
	uint32_t f, g;
	uint64_t ret = 0;
	int has_ret = 0;

	while (rd_next(r, &f, &v, &s)) {
		if (f == 9)
			type = v;
		else if (f == 11)
			uuid = v;
		else if (f == 10)
			name_iid = v;
		else if (f == 4) {
			uint64_t niid = 0, val = 0;

			while (rd_next(&s, &g, &w, &t)) {
				if (g == 1)
					niid = w;
				else if (g == 7)
					val = w;
			}
			if (niid >= 1 && niid <= 6 && niid == (uint64_t)e.nargs + 1)
				e.args[e.nargs++] = val;
			else if (niid == 7)
				ret = val, has_ret = 1;
			else
				d->bad_struct++;
		} else {
			d->bad_struct++;
		}
	}
	if (uuid >= 16 || !d->uuid_is_thread[uuid]) {
		d->bad_struct++;
		return;
	}
	if (type == 1) {
		if (!name_iid || name_iid > NFUNCS || !d->iname[name_iid] ||
		    strcmp(d->iname[name_iid], funcs_utf8[name_iid - 1]))
			d->bad_names++;
		e.ts_ns = ts;
		e.func = (uint32_t)(name_iid - 1);
		e.pid = d->uuid_pid[uuid];
		e.tid = d->uuid_tid[uuid];
		if (d->sp[uuid] >= 16) {
			d->bad_struct++;
			return;
		}
		d->stack[uuid][d->sp[uuid]++] = e;
	} else if (type == 2) {
		struct pk_trace_event *b;

		if (!d->sp[uuid]) {
			d->bad_struct++;
			return;
		}
		b = &d->stack[uuid][--d->sp[uuid]];
		b->dur_ns = ts - b->ts_ns;
		b->has_ret = (uint8_t)has_ret;
		b->ret = has_ret ? ret : 0;
		d->out[d->nout++] = *b;
	} else {
		d->bad_struct++;
	}
}

static void decode(struct dec *d, const uint8_t *buf, size_t len)
{
	struct rd r = { buf, buf + len, 0 }, pkt, s;
	uint32_t f;
	uint64_t v;

	while (rd_next(&r, &f, &v, &pkt)) {
		uint64_t ts = 0, seq = 0, flags = 0;
		struct rd te = { 0 };
		int has_ts = 0;

		if (f != 1) {
			d->bad_struct++;
			continue;
		}
		d->packets++;
		/* Interned data first: a packet may intern the name its event uses. */
		for (struct rd p = pkt; rd_next(&p, &f, &v, &s);) {
			if (f == 8)
				ts = v, has_ts = 1;
			else if (f == 10)
				seq = v;
			else if (f == 13)
				flags = v;
			else if (f == 12)
				dec_interned(d, &s);
			else if (f == 60)
				dec_desc(d, &s);
			else if (f == 11)
				te = s;
			else
				d->bad_struct++;
		}
		d->bad_seq += seq != 1;
		if (d->packets == 1)
			d->bad_flags += flags != 1;
		if (te.p) {
			d->events++;
			d->bad_flags += flags != 2;
			d->bad_order += !has_ts || ts < d->last_ts;
			d->last_ts = ts;
			dec_event(d, &te, ts);
		}
	}
	d->bad_struct += r.bad;
}

static int cmp_ev(const void *a, const void *b)
{
	const struct pk_trace_event *x = a, *y = b;

	if (x->pid != y->pid)
		return x->pid < y->pid ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->ts_ns != y->ts_ns)
		return x->ts_ns < y->ts_ns ? -1 : 1;
	if (x->dur_ns != y->dur_ns)
		return x->dur_ns > y->dur_ns ? -1 : 1;
	return memcmp(&x->func, &y->func, sizeof(*x) - offsetof(struct pk_trace_event, func));
}

static void check_proto(const char *path, const char *src)
{
	static struct pk_trace_event want[MAXEV], got[MAXEV];
	static struct dec d;
	struct pk_trace_meta m = { .funcs = funcs, .nfuncs = NFUNCS, .procs = procs, .nprocs = 2, .threads = threads, .nthreads = 3 };
	char *buf = NULL, cmd[4096];
	size_t len = 0, same = 0;
	FILE *f = open_memstream(&buf, &len);
	int rc;

	ASSERT_OK(pk_trace_write_proto(f, ev, nev, &m), "write proto");
	fclose(f);
	printf("proto: %zu calls, %zu bytes, %.1f bytes a call\n", nev, len, (double)len / nev);
	d.out = got;
	decode(&d, (const uint8_t *)buf, len);
	ASSERT_EQ(d.bad_struct, 0, "proto: well-formed, known fields only, every END has its BEGIN");
	ASSERT_EQ(d.bad_seq, 0, "proto: every packet on sequence 1");
	ASSERT_EQ(d.bad_flags, 0, "proto: first packet clears incremental state, events need it");
	ASSERT_EQ(d.bad_order, 0, "proto: event packets in timestamp order");
	ASSERT_EQ(d.bad_names, 0, "proto: names interned before use, read back as UTF-8");
	ASSERT_EQ(d.events, 2 * nev, "proto: a BEGIN and an END per call");
	ASSERT_EQ(d.nout, nev, "proto: every call decoded");
	ASSERT_TRUE(!strcmp(d.dname[1], "arg0") && !strcmp(d.dname[7], "ret"), "proto: annotation names interned");
	memcpy(want, ev, nev * sizeof(ev[0]));
	for (size_t i = 0; i < nev; i++)
		if (!want[i].has_ret)
			want[i].ret = 0;
	qsort(want, nev, sizeof(want[0]), cmp_ev);
	qsort(got, d.nout, sizeof(got[0]), cmp_ev);
	for (size_t i = 0; i < nev && i < d.nout; i++)
		same += !cmp_ev(&want[i], &got[i]);
	ASSERT_EQ(same, nev, "proto: decoded calls equal the calls written");

	/* protoc against the fixture written from Perfetto's public field numbers. */
	f = fopen(path, "w");
	fwrite(buf, 1, len, f);
	fclose(f);
	free(buf);
	if (system("command -v protoc >/dev/null 2>&1")) {
		printf("protoc missing (Debian: protobuf-compiler): protoc --decode part not run\n");
		return;
	}
	snprintf(cmd, sizeof(cmd),
		 "protoc --proto_path=%s/tests --decode=perfetto.protos.Trace %s/tests/prof_perfetto_trace.proto"
		 " < %s > %s.txt", src, src, path, path);
	rc = system(cmd);
	ASSERT_EQ(rc, 0, "protoc --decode=perfetto.protos.Trace");
	snprintf(cmd, sizeof(cmd), "test $(grep -c 'type: TYPE_SLICE_BEGIN' %s.txt) -eq %zu && "
		 "test $(grep -c 'type: TYPE_SLICE_END' %s.txt) -eq %zu && "
		 "! grep -qE '^ *[0-9]+ *[:{]' %s.txt && grep -q 'thread_name: \"xz worker\"' %s.txt",
		 path, nev, path, nev, path, path);
	ASSERT_EQ(system(cmd), 0, "protoc: a BEGIN and an END per call, no unknown fields, names");
	snprintf(cmd, sizeof(cmd), "sed -n '1,40p' %s.txt; rm -f %s.txt", path, path);
	rc = system(cmd);
	(void)rc;
}

/* What the progress callback was told: in order, from 0 to n, not too often. */
struct prog_seen {
	size_t calls, first, last, n, backwards, wrong_n;
};

static void prog_cb(void *arg, size_t done, size_t n)
{
	struct prog_seen *p = arg;

	if (!p->calls)
		p->first = done;
	else if (done < p->last)
		p->backwards++;
	if (n != p->n)
		p->wrong_n++;
	p->last = done;
	p->calls++;
}

static void check_progress(int proto)
{
	const size_t n = 300000;
	struct pk_trace_event *big = calloc(n, sizeof(*big));
	struct pk_trace_meta m = { .funcs = funcs, .nfuncs = NFUNCS, .progress = prog_cb };
	struct prog_seen p = { .n = n };
	FILE *f = fopen("/dev/null", "w");
	const char *w = proto ? "proto" : "json";

	ASSERT_TRUE(big && f, "progress: memory and /dev/null");
	for (size_t i = 0; i < n; i++)
		big[i] = (struct pk_trace_event){ .ts_ns = 1000 + 10 * i, .dur_ns = 5, .pid = 1, .tid = 1 };
	m.progress_arg = &p;
	ASSERT_OK(proto ? pk_trace_write_proto(f, big, n, &m) : pk_trace_write_json(f, big, n, &m),
		  "progress: write");
	printf("progress (%s): %zu calls, first %zu, last %zu\n", w, p.calls, p.first, p.last);
	ASSERT_TRUE(p.first == 0 && p.last == n, "progress: from 0 to n");
	ASSERT_TRUE(p.backwards == 0 && p.wrong_n == 0, "progress: in order, n as given");
	/* 300 000 calls: 0, then every 65 536 (4), then n: a few, not one a call. */
	ASSERT_TRUE(p.calls >= 5 && p.calls <= 8, "progress: told every 65 536 calls");
	fclose(f);
	free(big);
}

int main(void)
{
	struct pk_trace_meta m = { .funcs = funcs, .nfuncs = NFUNCS, .procs = procs, .nprocs = 2, .threads = threads, .nthreads = 3 };
	const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	const char *src = getenv("PK_SOURCE_DIR");
	char exp_path[256], json_path[256], proto_path[256], cmd[4096];
	FILE *f;
	int rc;

	if (!src)
		SKIP("PK_SOURCE_DIR not set (run under ctest)");
	gen(100, 100, 1000000000123ull, 1000000000123ull + 3000000, 0);
	gen(100, 101, 1000000000500ull, 1000000000500ull + 3000000, 0);
	gen(200, 200, 999999999999ull, 999999999999ull + 3000000, 0);
	/* A call at the end of the clock's range stays exact. */
	ev[nev++] = (struct pk_trace_event){ .ts_ns = (1ull << 53) - 7, .dur_ns = 5, .pid = 200,
					     .tid = 200, .func = 0, .nargs = 1, .args = { UINT64_MAX } };
	shuffle();
	printf("%zu calls\n", nev);
	ASSERT_TRUE(nev > 1000, "enough calls generated");

	{
		struct pk_trace_event bad = ev[0];

		bad.func = NFUNCS;
		ASSERT_EQ(pk_trace_write_json(stdout, &bad, 1, &m), -EINVAL, "json: unknown func refused");
		bad.func = 0, bad.nargs = 7;
		ASSERT_EQ(pk_trace_write_proto(stdout, &bad, 1, &m), -EINVAL, "proto: 7 args refused");
	}

	snprintf(exp_path, sizeof(exp_path), "%s/pk_trace_%d.expected", dir, getpid());
	snprintf(json_path, sizeof(json_path), "%s/pk_trace_%d.json", dir, getpid());
	snprintf(proto_path, sizeof(proto_path), "%s/pk_trace_%d.pftrace", dir, getpid());
	f = fopen(exp_path, "w");
	for (size_t i = 0; i < NFUNCS; i++) {
		fprintf(f, "F %zu ", i);
		put_hex(f, funcs[i]);
		fputc('\n', f);
	}
	for (size_t i = 0; i < nev; i++) {
		fprintf(f, "E %u %u %" PRIu64 " %" PRIu64 " %u %u", ev[i].pid, ev[i].tid, ev[i].ts_ns,
			ev[i].dur_ns, ev[i].func, ev[i].nargs);
		for (int a = 0; a < ev[i].nargs; a++)
			fprintf(f, " %" PRIu64, ev[i].args[a]);
		if (ev[i].has_ret)
			fprintf(f, " %" PRIu64 "\n", ev[i].ret);
		else
			fputs(" -\n", f);
	}
	fclose(f);
	f = fopen(json_path, "w");
	ASSERT_OK(pk_trace_write_json(f, ev, nev, &m), "write json");
	printf("json: %ld bytes, %.1f bytes a call\n", ftell(f), (double)ftell(f) / nev);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "%s %s/tests/prof_trace_json.py %s %s", py(), src, exp_path, json_path);
	rc = system(cmd);
	if (rc == 127 << 8)
		SKIP("no python3");
	ASSERT_EQ(rc, 0, "json: python's json and the trace-event checks");

	check_proto(proto_path, src);
	check_progress(0);
	check_progress(1);
	if (!t_failed)
		unlink(exp_path), unlink(json_path), unlink(proto_path);
	else
		fprintf(stderr, "kept %s %s %s\n", exp_path, json_path, proto_path);
	return t_exit();
}
