// SPDX-License-Identifier: MIT
/* text.c - live patching of running code: batches, the int3 protocol, the trap path. */

/*
 * How a batch is written (pk_batch_commit), for every site at once:
 *
 *   0. validate everything, precompute how a trapping thread continues, and
 *      publish the in-flight table that the SIGTRAP handler reads;
 *   1. write int3 on the first byte of every site;        sync
 *   2. write the tail bytes of every site;                 sync
 *   3. write the first byte of every site;                 sync
 *   4. unpublish the table; it is freed once no handler can still read it.
 *
 * "sync" makes every core that runs this process serialise its instruction
 * stream (membarrier SYNC_CORE), so no core executes bytes older than the
 * last write. Between 1 and 3 a thread that reaches a site executes int3 and
 * lands in pk_text_trap() (through src/sig/sig.c), which sends it on as if the new bytes were in
 * place (emulating nop/jmp/call, or running an out-of-line copy of the
 * new bytes). No thread is ever stopped; the only bytes a thread can execute
 * at a site are the old ones, int3 followed by anything, or the new ones.
 *
 * Writes go through /proc/self/mem, which writes read-only text by breaking
 * copy-on-write: no mapping is ever made writable, let alone writable and
 * executable. Writes of one phase are coalesced into one pwrite per run of
 * nearby sites in one mapping (gaps are rewritten with their current bytes,
 * which is harmless: only this file changes code, under text_lock).
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/ucontext.h>
#include <unistd.h>

#include "arch/arch.h"
#include "internal.h"
#include "text/text.h"
#include "sig/sig.h"
#include "util/maps.h"

/* How a thread that traps on a site continues. */
enum cont_kind {
	CONT_NONE,	/* not possible: the site is refused */
	CONT_SKIP,	/* only NOPs: resume after the site */
	CONT_JMP,	/* NOPs then jmp: resume at target */
	CONT_CALL,	/* NOPs then call: push the return address, go to target */
	CONT_XOL,	/* run a copy of the bytes out of line, then come back */
	CONT_TRAP,	/* the new code is int3 itself: not ours to handle */
};

struct cont {
	uint8_t kind;
	uint64_t target;	/* CONT_JMP/CALL: destination; CONT_XOL: the copy */
};

struct site {
	uintptr_t addr;
	uint8_t len;
	uint8_t flags;
	uint8_t has_expect;
	uint8_t changed;		/* new bytes differ from the old ones */
	uint8_t bytes[PK_TEXT_MAX];	/* new */
	uint8_t expect[PK_TEXT_MAX];
	uint8_t old[PK_TEXT_MAX];	/* read at commit */
	struct cont to_new, to_old;
	uintptr_t via, via_old;		/* pk_batch_add_via(), or 0 */
};

struct pk_batch {
	struct site *sites;
	size_t n, cap;
	int committed;
	int (*hook)(void *);	/* pk_batch_set_hook() */
	void *hook_arg;
};

/*
 * The table the trap handler reads: sites of the commit in progress, sorted
 * by address. Published before phase 1, unpublished after phase 3; freed
 * once trap_readers drops to zero (step 4). rolling_back sends trappers to
 * the old bytes instead.
 */
struct inflight {
	size_t n;
	int rolling_back;
	struct inflight *retired_next;	/* on the retired list, see unpublish() */
	struct {
		uintptr_t addr;
		uintptr_t end;
		struct cont to_new, to_old;
	} s[];
};

static struct inflight *inflight;	/* atomic; see struct inflight */
static unsigned long trap_readers;	/* atomic: handlers inside the table */

/*
 * text_lock serialises commits and guards everything below it, the XOL
 * copies and the /proc/self/mem descriptor. fork() takes it (util.c's atfork) so no
 * commit is half done in a child.
 */
static pthread_mutex_t text_lock = PTHREAD_MUTEX_INITIALIZER;
static int mem_fd = -1;
static pid_t mem_pid;
/* The mappings a commit looks at (src/util/maps.h): a view per commit. */
static struct pk_maps maps = PK_MAPS_INIT;
static int sync_kind;			/* enum sync_kind, 0 until chosen */
static int trap_installed;
static struct pk_text_stats stats;	/* counters; .traps is atomic */
/* What pk_text_trap() reads or writes (internal.h). */
PK_SIGNAL_DATA(inflight);
PK_SIGNAL_DATA(trap_readers);
PK_SIGNAL_DATA(stats);

enum sync_kind {
	SYNC_NONE = 0,
	SYNC_CORE,		/* membarrier PRIVATE_EXPEDITED_SYNC_CORE */
	SYNC_EXPEDITED,		/* membarrier PRIVATE_EXPEDITED: IPIs, iret */
	SYNC_MPROTECT,		/* TLB shootdown IPIs from an mprotect */
};

static const char *const sync_names[] = {
	[SYNC_CORE] = "membarrier-sync-core",
	[SYNC_EXPEDITED] = "membarrier-expedited",
	[SYNC_MPROTECT] = "mprotect-ipi",
};

/* ------------------------------------------------------------ trap path */

/* Continue a trapped thread per @c; false if the trap is not ours to end. */
PK_NOPROBE static int trap_continue(ucontext_t *uc, const struct cont *c,
				    uintptr_t end)
{
	switch (c->kind) {
	case CONT_SKIP:
		pk_arch_set_pc(uc, end);
		return 1;
	case CONT_JMP:
	case CONT_XOL:
		pk_arch_set_pc(uc, c->target);
		return 1;
	case CONT_CALL:
		pk_arch_emulate_call(uc, end, c->target);
		return 1;
	default:
		return 0;
	}
}

/*
 * Text's part of SIGTRAP, first in the order of src/sig/sig.h: a thread that
 * hit an int3 of the commit in flight is sent on; anything else is left to
 * the next hook (the fault layer's trap chain), the previous handler and
 * the default action. Returns non-zero when the trap was ours.
 */
PK_NOPROBE static int pk_text_trap(int sig, siginfo_t *si, ucontext_t *uc)
{
	uintptr_t addr = pk_arch_trap_addr(uc);
	const struct inflight *t;

	(void)sig;
	if (!pk_arch_trap_hit(si))
		return 0;

	/*
	 * No commit in flight (every int3 probe hit, say): no table to read,
	 * and no shared counter written. Otherwise count ourselves in, then
	 * load again: only a table loaded after the increment is read.
	 * Pairs with the seq_cst store that publishes inflight in
	 * commit_locked() and the exchange that takes it away in unpublish().
	 */
	if (!__atomic_load_n(&inflight, __ATOMIC_SEQ_CST))
		goto gone;
	__atomic_add_fetch(&trap_readers, 1, __ATOMIC_SEQ_CST);
	t = __atomic_load_n(&inflight, __ATOMIC_SEQ_CST);
	if (t) {
		size_t lo = PK_LOWER_BOUND(t->n, i, t->s[i].addr < addr);

		if (lo < t->n && t->s[lo].addr == addr) {
			const struct cont *c = __atomic_load_n(&t->rolling_back,
							       __ATOMIC_ACQUIRE)
						       ? &t->s[lo].to_old
						       : &t->s[lo].to_new;
			int done = trap_continue(uc, c, t->s[lo].end);

			__atomic_sub_fetch(&trap_readers, 1, __ATOMIC_SEQ_CST);
			if (done) {
				__atomic_add_fetch(&stats.traps, 1,
						   __ATOMIC_RELAXED);
				return 1;
			}
			if (c->kind != CONT_TRAP) {
				/*
				 * A rollback whose old bytes cannot be
				 * emulated: the int3 goes away within the
				 * commit; try the instruction again.
				 */
				pk_arch_set_pc(uc, addr);
				return 1;
			}
			return 0;
		}
	}
	__atomic_sub_fetch(&trap_readers, 1, __ATOMIC_SEQ_CST);
gone:
	/*
	 * An int3 that is gone: a thread trapped at a site before phase 3 of
	 * a commit and got here after step 4. Run what is there now.
	 */
	if (!pk_arch_trap_present((const void *)addr)) {
		pk_arch_set_pc(uc, addr);
		return 1;
	}
	return 0;
}

/* -------------------------------------------------------------- writing */

static void text_fork_prepare(void)
{
	pthread_mutex_lock(&text_lock);
}

static void text_fork_parent(void)
{
	pthread_mutex_unlock(&text_lock);
}

static void text_fork_child(void)
{
	/* The descriptors still name the parent's memory: never use them. */
	if (mem_fd >= 0)
		close(mem_fd);
	mem_fd = -1;
	pk_maps_close(&maps);
	sync_kind = SYNC_NONE;	/* membarrier registration is per process */
	pthread_mutex_unlock(&text_lock);
}

PK_ATFORK(text, PK_RANK_TEXT, text_fork_prepare, text_fork_parent,
	  text_fork_child);

#ifdef PK_TEST_HOOKS
/*
 * Test hook, compiled only into the tests' copy of the library (never the
 * installed one): PROBEKIT_TEST_FAIL_WRITE=C:N fails write N (from 0) of
 * the commit that follows C successful ones, once.
 */
static long fail_commit = -1, fail_write = -1, commit_writes;

static void text_once(void)
{
	const char *v = pk_getenv("PROBEKIT_TEST_FAIL_WRITE");

	if (v && sscanf(v, "%ld:%ld", &fail_commit, &fail_write) != 2)
		fail_commit = fail_write = -1;
}

static void fail_hook_start(void)
{
	commit_writes = 0;
}

static int fail_hook_write(uintptr_t addr)
{
	if ((long)stats.commits != fail_commit || commit_writes++ != fail_write)
		return 0;
	fail_commit = -1;	/* once */
	pk_err("text: injected write failure at %#" PRIxPTR, addr);
	return -EIO;
}
#else
static void text_once(void)
{
}

static void fail_hook_start(void)
{
}

static int fail_hook_write(uintptr_t addr)
{
	(void)addr;
	return 0;
}
#endif

static int open_mem(void)
{
	pid_t pid = getpid();

	if (mem_fd >= 0 && mem_pid == pid)
		return 0;
	if (mem_fd >= 0)
		close(mem_fd);
	mem_fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	if (mem_fd < 0) {
		int err = errno;

		pk_err("text: cannot open /proc/self/mem: %s", strerror(err));
		return err == EACCES ? -EPERM : -err;
	}
	mem_pid = pid;
	return 0;
}

static int mem_write(uintptr_t addr, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	pk_assert_held(&text_lock);
	while (len) {
		ssize_t r;

		r = fail_hook_write(addr);
		if (r)
			return (int)r;
		r = pwrite(mem_fd, p, len, (off_t)addr);
		stats.writes++;
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			int err = r < 0 ? errno : EIO;

			pk_err("text: writing %zu bytes of code at %#" PRIxPTR
			       " through /proc/self/mem failed: %s (a W^X policy "
			       "such as proc_mem.force_override=never?)",
			       len, addr, strerror(err));
			return err == EACCES || err == EPERM || err == EIO
				       ? -EPERM
				       : -err;
		}
		p += r;
		addr += (uintptr_t)r;
		len -= (size_t)r;
	}
	return 0;
}

static void choose_sync(void)
{
	const char *force = pk_getenv("PROBEKIT_SYNC");
	long have = pk_membarrier(MEMBARRIER_CMD_QUERY);

	if (have < 0)
		have = 0;
	if ((!force || !strcmp(force, "sync-core")) &&
	    (have & MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE) &&
	    !pk_membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE))
		sync_kind = SYNC_CORE;
	else if ((!force || strcmp(force, "mprotect")) &&
		 (have & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
		 !pk_membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED))
		/*
		 * Not architecturally a core sync, but on x86-64 the IPI
		 * returns to user space through iret, which serialises.
		 */
		sync_kind = SYNC_EXPEDITED;
	else
		sync_kind = SYNC_MPROTECT;
	pk_info("text: cross-core sync by %s", sync_names[sync_kind]);
}

/* A page that is touched and then write-protected: the TLB shootdown IPIs. */
static void *ipi_page;

static void core_sync(void)
{
	stats.syncs++;
	switch (sync_kind) {
	case SYNC_CORE:
		if (!pk_membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE))
			return;
		break;
	case SYNC_EXPEDITED:
		if (!pk_membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED))
			return;
		break;
	default:
		break;
	}
	if (!ipi_page) {
		ipi_page = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (ipi_page == MAP_FAILED) {
			ipi_page = NULL;
			return;
		}
	}
	mprotect(ipi_page, 4096, PROT_READ | PROT_WRITE);
	*(volatile char *)ipi_page = 1;
	mprotect(ipi_page, 4096, PROT_READ);
}

/*
 * Hook text into SIGTRAP (src/sig/sig.c) from the first commit on, for
 * good: a thread may have trapped on a site just before a commit removed
 * it and still be on its way to the handler.
 */
static int install_trap_handler(void)
{
	int err;

	if (trap_installed)
		return 0;
	err = pk_sig_hook(SIGTRAP, PK_SIG_TEXT, pk_text_trap);
	if (err) {
		pk_err("text: cannot install the SIGTRAP handler: %s",
		       strerror(-err));
		return err;
	}
	trap_installed = 1;
	return 0;
}

/* ------------------------------------------------------- out-of-line copies */

/*
 * XOL copies (execute out of line, the kernel uprobes' word): a copy of a
 * site's bytes followed by an absolute jmp to the end of the site. A thread
 * may still be running in one when its commit returns, and nothing tells
 * when it has left without stopping it, so copies are never freed; they are reused when the same bytes are written at the
 * same address again (a key or probe flipping back and forth).
 */
#define XOL_SIZE 32
#define XOL_PAGE 4096

struct xol {
	uintptr_t site;
	uint8_t len;
	uint8_t bytes[PK_TEXT_MAX];
	uintptr_t code;
	struct xol *next;
};

static struct xol *xols;	/* guarded by text_lock */
static uintptr_t xol_page, xol_used = XOL_PAGE;

static int xol_get(uintptr_t site, const uint8_t *bytes, size_t len,
		    uintptr_t *code)
{
	uint8_t buf[XOL_SIZE];
	struct xol *s;
	size_t n;
	int err;

	for (s = xols; s; s = s->next)
		if (s->site == site && s->len == len &&
		    !memcmp(s->bytes, bytes, len)) {
			*code = s->code;
			return 0;
		}
	if (xol_used + XOL_SIZE > XOL_PAGE) {
		/* Executable, never writable: filled through /proc/self/mem. */
		void *p = mmap(NULL, XOL_PAGE, PROT_READ | PROT_EXEC,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED)
			return -ENOMEM;
		xol_page = (uintptr_t)p;
		xol_used = 0;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	memset(buf, PK_ARCH_TRAP_BYTE, sizeof(buf));
	memcpy(buf, bytes, len);
	n = len + pk_arch_encode_abs_jmp(buf + len, site + len);
	err = mem_write(xol_page + xol_used, buf, n);
	if (err) {
		free(s);
		return err;
	}
	s->site = site;
	s->len = (uint8_t)len;
	memcpy(s->bytes, bytes, len);
	s->code = xol_page + xol_used;
	xol_used += XOL_SIZE;
	s->next = xols;
	xols = s;
	*code = s->code;
	return 0;
}

/* ----------------------------------------------------------- validation */

/* [addr, addr+len) lies in executable mappings; 1 if they are all readable. */
static int range_exec(struct pk_maps *ms, uintptr_t addr, size_t len,
		      int *readable)
{
	uintptr_t end = addr + len;
	struct pk_mapinfo m;

	*readable = 1;
	while (addr < end) {
		if (pk_maps_find(ms, addr, &m) || !(m.prot & PROT_EXEC))
			return 0;
		*readable &= !!(m.prot & PROT_READ);
		addr = m.hi;
	}
	return 1;
}

static int read_code(uintptr_t addr, void *buf, size_t len, int readable)
{
	if (readable) {
		memcpy(buf, (const void *)addr, len);
		return 0;
	}
	return pread(mem_fd, buf, len, (off_t)addr) == (ssize_t)len ? 0 : -EFAULT;
}

/*
 * Decode @len bytes at @addr (running there) into whole instructions; mark
 * the offsets where one begins in @starts. Return the continuation a
 * trapping thread needs to run them, in @c (CONT_NONE if there is none).
 */
static int decode_site_uncached(const uint8_t *code, size_t len,
				uintptr_t addr, uint8_t starts[PK_TEXT_MAX],
				struct cont *c)
{
	int all_plain = 1, nops_so_far = 1;
	size_t off = 0;

	memset(starts, 0, PK_TEXT_MAX);
	c->kind = CONT_SKIP;
	c->target = 0;
	while (off < len) {
		struct pk_insn in;

		if (pk_arch_decode(code + off, len - off, addr + off, &in))
			return -EINVAL;
		starts[off] = 1;
		off += in.len;
		if (in.kind == PK_INSN_NOP)
			continue;
		if (in.kind == PK_INSN_TRAP && off == PK_ARCH_TRAP_LEN) {
			c->kind = CONT_TRAP;
			nops_so_far = 0;
			continue;
		}
		if (nops_so_far && off == len &&
		    (in.kind == PK_INSN_JMP || in.kind == PK_INSN_CALL)) {
			c->kind = in.kind == PK_INSN_JMP ? CONT_JMP : CONT_CALL;
			c->target = in.target;
			continue;
		}
		nops_so_far = 0;
		if (in.kind != PK_INSN_PLAIN && in.kind != PK_INSN_NOP)
			all_plain = 0;
	}
	if (c->kind == CONT_TRAP && off != PK_ARCH_TRAP_LEN)
		c->kind = CONT_NONE;	/* int3 followed by more: no */
	else if (!nops_so_far && c->kind != CONT_TRAP)
		c->kind = all_plain ? CONT_XOL : CONT_NONE;
	return 0;
}

/*
 * Batches repeat the same few byte patterns (a NOP, a jmp with the same
 * displacement at every site of a kind), and decoding dominates a large
 * commit, so results are remembered by bytes. Nothing in a result depends
 * on the address except a branch target, which is kept relative to it.
 */
#define DECODE_CACHE 64

struct decode_memo {
	uint8_t valid, len, bad;
	uint8_t bytes[PK_TEXT_MAX];
	uint8_t starts[PK_TEXT_MAX];
	struct cont c;		/* .target relative to the site */
};

static struct decode_memo decode_cache[DECODE_CACHE]; /* guarded by text_lock */

static int decode_site(const uint8_t *code, size_t len, uintptr_t addr,
		       uint8_t starts[PK_TEXT_MAX], struct cont *c)
{
	uint32_t h = 2166136261u;
	struct decode_memo *m;
	int err;

	for (size_t i = 0; i < len; i++)
		h = (h ^ code[i]) * 16777619u;
	m = &decode_cache[h % DECODE_CACHE];
	if (!m->valid || m->len != len || memcmp(m->bytes, code, len)) {
		err = decode_site_uncached(code, len, addr, m->starts, &m->c);
		m->valid = 1;
		m->len = (uint8_t)len;
		m->bad = err != 0;
		memcpy(m->bytes, code, len);
		if (m->c.kind == CONT_JMP || m->c.kind == CONT_CALL)
			m->c.target -= addr;
	}
	if (m->bad)
		return -EINVAL;
	memcpy(starts, m->starts, PK_TEXT_MAX);
	*c = m->c;
	if (c->kind == CONT_JMP || c->kind == CONT_CALL)
		c->target += addr;
	return 0;
}

static int site_cmp(const void *a, const void *b)
{
	const struct site *x = a, *y = b;

	return (x->addr > y->addr) - (x->addr < y->addr);
}

/* Check one site against memory and fill in its old bytes and continuations. */
static int validate(struct site *s, struct pk_maps *ms)
{
	uint8_t old_starts[PK_TEXT_MAX], new_starts[PK_TEXT_MAX];
	int readable, err;

	if (!range_exec(ms, s->addr, s->len, &readable)) {
		pk_err("text: site %#" PRIxPTR "+%u is not in executable memory",
		       s->addr, s->len);
		return -EINVAL;
	}
	err = read_code(s->addr, s->old, s->len, readable);
	if (err) {
		pk_err("text: cannot read the code at %#" PRIxPTR, s->addr);
		return err;
	}
	if (s->has_expect && memcmp(s->old, s->expect, s->len)) {
		pk_err("text: site %#" PRIxPTR ": the bytes there are not the "
		       "expected ones", s->addr);
		return -EBUSY;
	}
	/*
	 * Bytes whose continuation the caller gives (pk_batch_add_via) need
	 * not decode: an int3 on the first byte of a longer instruction.
	 */
	memset(old_starts, 0, sizeof(old_starts));
	memset(new_starts, 0, sizeof(new_starts));
	if (!s->via_old &&
	    decode_site(s->old, s->len, s->addr, old_starts, &s->to_old)) {
		pk_err("text: site %#" PRIxPTR "+%u: the old code does not "
		       "decode into whole instructions ending at the site's end",
		       s->addr, s->len);
		return -EINVAL;
	}
	if (!s->via &&
	    decode_site(s->bytes, s->len, s->addr, new_starts, &s->to_new)) {
		pk_err("text: site %#" PRIxPTR "+%u: the new bytes are not whole "
		       "instructions", s->addr, s->len);
		return -EINVAL;
	}
	if (!(s->flags & PK_TEXT_F_MERGE))
		for (size_t i = 1; i < s->len; i++)
			if (old_starts[i] && !new_starts[i]) {
				pk_err("text: site %#" PRIxPTR ": the new bytes "
				       "split the old instruction boundary at "
				       "+%zu (a thread may be stopped there)",
				       s->addr, i);
				return -EINVAL;
			}
	s->changed = memcmp(s->old, s->bytes, s->len) != 0;
	/* The caller's equivalents of the new and old bytes (pk_batch_add_via). */
	if (s->via) {
		s->to_new.kind = CONT_JMP;
		s->to_new.target = s->via;
	}
	if (s->via_old) {
		s->to_old.kind = CONT_JMP;
		s->to_old.target = s->via_old;
	}
	if (s->changed && s->to_new.kind == CONT_NONE) {
		pk_err("text: site %#" PRIxPTR ": a thread trapping there could "
		       "not be sent through the new bytes (PC-relative code other "
		       "than jmp/call)", s->addr);
		return -ENOTSUP;
	}
	return 0;
}

/* -------------------------------------------------------------- commit */

/*
 * One phase's writes: for each changed site, @len bytes from offset @off of
 * @pick (new or old bytes, or int3). Nearby writes in one mapping become one
 * pwrite; the gap between them is rewritten with what is there now.
 */
enum pick { PICK_TRAP, PICK_NEW, PICK_OLD };
#define MERGE_GAP 512
#define RUN_MAX (64 * 1024)

static int write_phase(struct site *s, size_t n, struct pk_maps *ms,
		       size_t off, size_t len_max, enum pick pick)
{
	static uint8_t buf[RUN_MAX];	/* guarded by text_lock */
	size_t i = 0;
	int runs = 0;

	while (i < n) {
		uintptr_t start, end;
		struct pk_mapinfo m;
		size_t j;
		int readable, err;

		for (; i < n && (!s[i].changed || s[i].len <= off); i++)
			;
		if (i == n)
			break;
		start = s[i].addr + off;
		end = start + (len_max < s[i].len - off ? len_max : s[i].len - off);
		if (pk_maps_find(ms, start, &m))
			m.hi = end;	/* validated: not seen */
		/* Extend the run over following sites close enough. */
		for (j = i + 1; j < n; j++) {
			uintptr_t ns, ne;

			if (!s[j].changed || s[j].len <= off)
				continue;
			ns = s[j].addr + off;
			ne = ns + (len_max < s[j].len - off ? len_max
							    : s[j].len - off);
			if (ns - end > MERGE_GAP || ne - start > sizeof(buf) ||
			    ne > m.hi)
				break;
			end = ne;
		}
		range_exec(ms, start, end - start, &readable);
		err = read_code(start, buf, end - start, readable);
		if (err)
			return err;
		for (size_t k = i; k < j; k++) {
			size_t l;

			if (!s[k].changed || s[k].len <= off)
				continue;
			l = len_max < s[k].len - off ? len_max : s[k].len - off;
			if (pick == PICK_TRAP)
				memset(buf + (s[k].addr + off - start),
				       PK_ARCH_TRAP_BYTE, l);
			else
				memcpy(buf + (s[k].addr + off - start),
				       (pick == PICK_NEW ? s[k].bytes : s[k].old) + off,
				       l);
		}
		err = mem_write(start, buf, end - start);
		if (err)
			return err;
		runs++;
		i = j;
	}
	return runs;
}

/*
 * Unpublished tables wait on this list (guarded by text_lock) until
 * trap_readers is seen at zero, rather than the commit waiting for that: a
 * thread preempted inside the handler could hold a commit for milliseconds.
 */
static struct inflight *retired;

/* Free every retired table if no handler can still be reading one. */
static void reap_retired(void)
{
	pk_assert_held(&text_lock);
	/*
	 * Pairs with the increment in pk_text_trap(): a handler counted
	 * after this load loads inflight after the exchange that retired
	 * each table on the list, so it cannot see one of them.
	 */
	if (!retired || __atomic_load_n(&trap_readers, __ATOMIC_SEQ_CST))
		return;
	while (retired) {
		struct inflight *t = retired;

		retired = t->retired_next;
		free(t);
	}
}

static void unpublish(void)
{
	struct inflight *t = __atomic_exchange_n(&inflight, NULL,
						 __ATOMIC_SEQ_CST);

	t->retired_next = retired;
	retired = t;
	reap_retired();
}

/*
 * Undo a partly written batch with the same protocol: int3 stays on every
 * first byte while the old tails go back, then the old first bytes. Trappers
 * meanwhile run the old bytes. If even that fails the table stays published
 * forever, so a thread that meets a leftover int3 still gets through.
 */
static void rollback(struct site *s, size_t n, struct pk_maps *ms)
{
	int err;

	__atomic_store_n(&inflight->rolling_back, 1, __ATOMIC_RELEASE);
	err = write_phase(s, n, ms, 1, PK_TEXT_MAX, PICK_OLD);
	core_sync();
	if (err >= 0)
		err = write_phase(s, n, ms, 0, 1, PICK_OLD);
	core_sync();
	if (err < 0) {
		pk_err("text: rollback failed; leaving the trap table in place");
		return;
	}
	unpublish();
}

/*
 * Before any int3 is written (src/sig/sig.c, "Threads probekit cannot
 * see"): a thread with SIGTRAP really blocked would be killed by it, and
 * glibc's posix_spawn child runs some libc functions with every handler
 * reset, where a permanent int3 (an int3 probe) kills it. Refuse both.
 *
 * A commit writes an int3 at each changed site whose first byte is not
 * one already: phase 1 (transient) or phase 3 (permanent). A site whose
 * first byte is an int3 gets none it did not have (phase 1 rewrites the
 * same byte) and loses it, or keeps it, in phase 3: a batch of only such
 * sites (an int3 probe restored: one byte, the original over the int3) is
 * not checked, so it is never refused for a blocked thread, which it can
 * only help. With text_lock held, one pass and no sleep: -EAGAIN when a
 * thread blocks SIGTRAP now, waited out by pk_batch_commit() unlocked.
 */
static int check_signals(const struct site *s, size_t n)
{
	int int3 = 0;

	for (size_t i = 0; i < n; i++) {
		const char *fn;

		if (!s[i].changed)
			continue;
		int3 |= s[i].old[0] != PK_ARCH_TRAP_BYTE;
		if (s[i].bytes[0] != PK_ARCH_TRAP_BYTE)
			continue;
		fn = pk_sig_spawn_child_fn(s[i].addr, s[i].len);
		if (fn) {
			pk_err("text: an int3 at %#" PRIxPTR " in libc's %s would "
			       "kill posix_spawn()/system() children (they run "
			       "it with SIGTRAP reset to SIG_DFL); refused",
			       s[i].addr, fn);
			return -EPERM;
		}
	}
	return int3 ? pk_sig_check_blocked(SIGTRAP, "text", 0) : 0;
}

static int commit_locked(struct pk_batch *b)
{
	struct site *s = b->sites;
	size_t n = b->n, changed = 0;
	struct inflight *t;
	int err;

	pk_assert_held(&text_lock);
	reap_retired();
	fail_hook_start();
	err = open_mem();
	if (err)
		return err;
	if (sync_kind == SYNC_NONE)
		choose_sync();
	err = install_trap_handler();
	if (err)
		return err;

	qsort(s, n, sizeof(*s), site_cmp);
	for (size_t i = 1; i < n; i++)
		if (s[i - 1].addr + s[i - 1].len > s[i].addr) {
			pk_err("text: sites %#" PRIxPTR " and %#" PRIxPTR
			       " overlap", s[i - 1].addr, s[i].addr);
			return -EINVAL;
		}
	err = pk_maps_open(&maps, 0);
	if (err)
		return err;
	for (size_t i = 0; i < n && !err; i++) {
		err = validate(&s[i], &maps);
		changed += s[i].changed;
	}
	for (size_t i = 0; i < n && !err; i++)
		if (s[i].changed && s[i].to_new.kind == CONT_XOL)
			err = xol_get(s[i].addr, s[i].bytes, s[i].len,
				       &s[i].to_new.target);
	for (size_t i = 0; i < n && !err; i++)
		if (s[i].changed && s[i].to_old.kind == CONT_XOL &&
		    xol_get(s[i].addr, s[i].old, s[i].len, &s[i].to_old.target))
			s[i].to_old.kind = CONT_NONE; /* rollback retries instead */
	if (err || !changed)
		goto out;
	err = check_signals(s, n);
	if (err)
		goto out;

	t = calloc(1, sizeof(*t) + changed * sizeof(t->s[0]));
	if (!t) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		if (!s[i].changed)
			continue;
		t->s[t->n].addr = s[i].addr;
		t->s[t->n].end = s[i].addr + s[i].len;
		t->s[t->n].to_new = s[i].to_new;
		t->s[t->n].to_old = s[i].to_old;
		t->n++;
	}
	/* Pairs with the seq_cst load in pk_text_trap(): table before int3. */
	__atomic_store_n(&inflight, t, __ATOMIC_SEQ_CST);

	/*
	 * The three phases; a phase that wrote nothing (no site has a tail)
	 * needs no sync.
	 */
	for (int phase = 1; phase <= 3; phase++) {
		int runs = phase == 2 ? write_phase(s, n, &maps, 1, PK_TEXT_MAX, PICK_NEW)
				      : write_phase(s, n, &maps, 0, 1,
						    phase == 1 ? PICK_TRAP : PICK_NEW);

		if (runs < 0) {
			err = runs;
			rollback(s, n, &maps);
			goto out;
		}
		if (runs)
			core_sync();
		if (phase == 1 && b->hook && (err = b->hook(b->hook_arg))) {
			rollback(s, n, &maps);
			goto out;
		}
	}
	unpublish();						/* 4 */
out:
	if (err)
		return err;
	stats.commits++;
	stats.sites += changed;
	return (int)n;
}

int pk_text_fill(void *addr, const void *bytes, size_t len)
{
	int err;

	pthread_mutex_lock(&text_lock);
	err = open_mem();
	if (!err)
		err = mem_write((uintptr_t)addr, bytes, len);
	pthread_mutex_unlock(&text_lock);
	return err;
}

/* ------------------------------------------------------------ public API */

static pthread_once_t text_once_ctl = PTHREAD_ONCE_INIT;

int pk_batch_create(struct pk_batch **out)
{
	struct pk_batch *b;

	if (!out)
		return -EINVAL;
	pthread_once(&text_once_ctl, text_once);
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	*out = b;
	return 0;
}

int pk_batch_add(struct pk_batch *b, void *addr, const void *bytes, size_t len,
		 const void *expect, unsigned int flags)
{
	struct site *s;

	if (!b || !addr || !bytes || !len || b->committed ||
	    (flags & ~PK_TEXT_F_MERGE))
		return -EINVAL;
	if (len > PK_TEXT_MAX)
		return -E2BIG;
	if ((uintptr_t)addr + len < (uintptr_t)addr)
		return -EINVAL;		/* wraps: no mapping holds it */
	if (PK_GROW(&b->sites, &b->cap, b->n + 1))
		return -ENOMEM;
	s = &b->sites[b->n++];
	memset(s, 0, sizeof(*s));
	s->addr = (uintptr_t)addr;
	s->len = (uint8_t)len;
	s->flags = (uint8_t)flags;
	memcpy(s->bytes, bytes, len);
	if (expect) {
		s->has_expect = 1;
		memcpy(s->expect, expect, len);
	}
	return 0;
}

int pk_batch_add_via(struct pk_batch *b, void *addr, const void *bytes,
		     size_t len, const void *expect, unsigned int flags,
		     uintptr_t via, uintptr_t via_old)
{
	int err = pk_batch_add(b, addr, bytes, len, expect, flags);

	if (!err) {
		b->sites[b->n - 1].via = via;
		b->sites[b->n - 1].via_old = via_old;
	}
	return err;
}

void pk_batch_set_hook(struct pk_batch *b, int (*fn)(void *), void *arg)
{
	b->hook = fn;
	b->hook_arg = arg;
}

size_t pk_batch_count(const struct pk_batch *b)
{
	return b ? b->n : 0;
}

int pk_batch_commit(struct pk_batch *b)
{
	int ret;

	if (!b || b->committed)
		return -EINVAL;
	b->committed = 1;
	if (!b->n)
		return 0;
	pthread_once(&text_once_ctl, text_once);
	/*
	 * A thread seen blocking SIGTRAP under the lock (check_signals(),
	 * nothing written): wait it out with text_lock dropped, then commit
	 * again from the start (the bytes may have changed meanwhile). A
	 * transient blocker (glibc creating a thread) is gone by then; a
	 * persistent one is -EDEADLK.
	 */
	for (int tries = 0;; tries++) {
		pthread_mutex_lock(&text_lock);
		ret = commit_locked(b);
		pthread_mutex_unlock(&text_lock);
		if (ret != -EAGAIN)
			return ret;
		if (tries == 3) {
			pk_err("text: threads kept blocking SIGTRAP at each try; "
			       "refused");
			return -EDEADLK;
		}
		ret = pk_sig_check_blocked(SIGTRAP, "text", PK_SIG_CHECK_WAIT);
		if (ret)
			return ret;
	}
}

void pk_batch_free(struct pk_batch *b)
{
	if (!b)
		return;
	free(b->sites);
	free(b);
}

int pk_text_poke(void *addr, const void *bytes, size_t len, const void *expect,
		 unsigned int flags)
{
	struct pk_batch *b;
	int ret = pk_batch_create(&b);

	if (ret)
		return ret;
	ret = pk_batch_add(b, addr, bytes, len, expect, flags);
	if (!ret)
		ret = pk_batch_commit(b);
	pk_batch_free(b);
	return ret;
}

int pk_text_stats(struct pk_text_stats *st)
{
	struct pk_text_stats cur;

	if (!st || st->sz < offsetof(struct pk_text_stats, sites))
		return -EINVAL;
	pthread_mutex_lock(&text_lock);
	cur = stats;
	cur.traps = __atomic_load_n(&stats.traps, __ATOMIC_RELAXED);
	cur.sync_method = sync_kind ? sync_names[sync_kind] : NULL;
	pthread_mutex_unlock(&text_lock);
	cur.sz = st->sz < sizeof(cur) ? st->sz : sizeof(cur);
	memcpy(st, &cur, cur.sz);
	return 0;
}
