// SPDX-License-Identifier: MIT
/* watch.c - memory watchpoints (pk_watch_*): hardware breakpoints, or page protection with an alias; a client of the fault chain. */

/*
 * Design
 * ======
 *
 * A watchpoint is one perf breakpoint event per thread of the process:
 * pk_watch_add() opens one on the calling thread, then on every thread in
 * /proc/self/task, listing again until a listing finds no thread without
 * one. Each event has inherit + inherit_thread set, so threads that a
 * watched thread creates later are watched too (threads of fork()ed
 * children are not: the events are per process image, and remove_on_exec,
 * which sigtrap requires, drops them at exec).
 *
 * A hit is a synchronous SIGTRAP with si_code TRAP_PERF and the event's
 * sig_data in si_perf_data, on the thread that made the access, after the
 * access (x86 data breakpoints trap after the instruction). sig_data
 * carries WATCH_MAGIC and the watch's index in watches[], so watch_hook()
 * finds the watch without a search and never mistakes the program's own
 * perf signals for ours. x86 has no read-only data breakpoint:
 * PK_WATCH_READ watches reads and writes.
 *
 * For writes the handler sees the old value (a shadow copy, updated at
 * every hit) and the new one. Two threads hitting at once may both see the
 * same old value; the new value is always what memory held at the trap.
 *
 * Watches live in a static table, watches[] (x86 has 4 hardware debug
 * registers; the kernel says when they are all taken); an entry's fields
 * are set before it is published and read by the handler inside the fault
 * layer's read side, so pk_watch_remove() unpublishes, closes the events,
 * waits one grace period and only then frees the entry.
 *
 * Where perf breakpoints are unavailable (no PMU in a VM, perf_event_paranoid
 * too strict, a kernel older than 5.13 without sigtrap, all debug registers
 * taken), or PROBEKIT_WATCH=page, the page-protection mechanism serves the
 * watchpoint instead (struct wpage below). Its limits: a page whose
 * protection the program changes is no longer watched; a system call that
 * writes the page (read(2) into it) fails with EFAULT instead of faulting;
 * each access to an unwatched byte of the page costs a fault and a step;
 * and while one thread steps over an access, the page is open to all.
 *
 * The page is never opened while its accesses can be moved to an alias
 * ("Alias stepping" below). Where one cannot, what keeps the window of an
 * opened page small (the guarantees: probekit(7), section WATCHPOINTS,
 * "Open steps", in man/man7/probekit.7):
 *   1. one stepper per page (wpage.stepper): a thread faulting meanwhile
 *      waits for the stepper to protect the page again, then retries;
 *   2. the stepper snapshots the watched values at its fault (nobody else
 *      can write then: the page is protected, nobody else steps), and at
 *      its step protects the page first and reads the values after, so a
 *      write another thread slipped into the window is in what it reads,
 *      and every later write faults: each change is reported once.
 * Protection keys (pkey_mprotect, a per-thread PKRU opened only in the
 * stepper's signal frame) would be another sound design, without the
 * memfd; the CPUs here have no PKU.
 *
 * A client of the fault chain
 * ---------------------------
 *
 * Watchpoints use the fault layer's core through fault.h only. A watched
 * page is a range of the fault chain (wpage_fault() its handler). What no
 * table can claim (a breakpoint's TRAP_PERF, a step's TRAP_TRACE, a fault
 * on a retired page, see wpage_retired()) reaches watch_hook(), the hook of
 * watch_client, which joins the signal path at the first pk_watch_add()
 * and stays: until then the signal path tests nothing of watchpoints.
 * Their state is guarded by pk_fault_lock and read on the signal path
 * inside the fault layer's read side.
 *
 * Memory ordering
 * ---------------
 *
 * A watch is published and unpublished through its active flag, read
 * inside the fault layer's read side: active = 0 is W1 of the grace period
 * (fault.c, pk_fault_wait_readers()), the handlers' seq_cst loads of it
 * are R3, and pk_watch_remove() waits one grace period before the entry
 * may serve another add (a handle is never reused: "Handles" at
 * pk_watch_add()). A watched page has two handshakes of its own, numbered
 * for the barriers below:
 *   P1. a faulter (wpage_fault()) counts itself in pg->steps, then loads
 *       pg->busy (both seq_cst);
 *   P2. a converter (wpage_quiesce(): add, remove, fork) stores busy = 1,
 *       then waits for steps == 0 (both seq_cst): with P1 either it sees
 *       the faulter's count and waits for it, or the faulter sees busy,
 *       takes its count back and waits;
 *   P3. the converter stores busy = 0 (release) once the page is in its
 *       new state, watched or not (wpage_done(): the whole conversion,
 *       protection and nw included, is inside busy); a waiting faulter's
 *       acquire load of busy sees that state when it retries;
 *   P4. one stepper per page: a faulter claims pg->stepper by a
 *       compare-and-swap (acquire) or waits for it to be 0 (acquire);
 *   P5. the stepper, after protecting the page again, stores stepper = 0
 *       (release): its page state happens before the next claim (P4);
 *   P6. a step (or a faulter backing out) ends by taking its count off
 *       steps (seq_cst): what P2 waits for.
 * The fields a page is served with (page, orig_prot, alias) are set
 * before pg->nw is stored (release) and wpage_fault() loads nw (acquire)
 * before it uses them; pg->prot, the protection a step gives back, is
 * stored with release and loaded with acquire the same way.
 */

#include <errno.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/ucontext.h>
#include <unistd.h>

#include "arch/arch.h"
#include "fault/fault.h"
#include "internal.h"
#include "util/maps.h"

#define WATCH_MAX 16	/* watches at once (and watched pages) */
#define WATCH_MAGIC 0x706b7761ul	/* "pkwa" */

struct pk_watch {
	uintptr_t addr;
	size_t len;
	unsigned int access;
	pk_watch_fn fn;
	void *ctx;
	uint64_t gen;		/* in the handle given out ("Handles") */
	uint64_t shadow;	/* last value seen (atomic) */
	int active;		/* atomic: published ("Memory ordering") */
	struct {
		int fd;		/* a perf breakpoint event */
		pid_t tid;	/* on this thread */
	} *evs;			/* one per thread; pk_fault_lock */
	size_t nevs;		/* pk_fault_lock */
	size_t capevs;		/* room (PK_GROW); pk_fault_lock */
	struct wpage *pg;	/* page mechanism: the watched page; else NULL */
};

/*
 * Page mechanism: a watched page, protected (PROT_READ for write watches,
 * PROT_NONE if one watch on it wants reads) and registered as a range of the
 * fault chain. A fault on it: remember the watched values, give the page its
 * own protection back, set the trap flag and retry; the single-step SIGTRAP
 * after the instruction protects the page again and reports the watches it
 * touched. Unwatched bytes of the page go through the same way, unreported.
 */
struct wpage {
	uintptr_t page;
	int orig_prot;		/* as found in /proc/self/maps */
	int prot;		/* while watched (atomic) */
	unsigned int nw;	/* watches on it (atomic); 0: entry unused */
	unsigned long steps;	/* atomic: threads between fault and step */
	uintptr_t stepper;	/* atomic: the thread stepping (its &wstep), 0 */
	int busy;		/* atomic: being converted; faulters wait */
	char *alias;		/* writable view of the page (memfd), or NULL */
	char *resv;		/* address space reserved around the alias */
	char *snap;		/* fork: the alias's bytes at prepare, or NULL */
	uint64_t ino;		/* the alias's memfd: its inode and device, */
	unsigned int dev_major, dev_minor;	/* how wpage_ours() knows it */
};

/*
 * Changed under pk_fault_lock (fault.h) only; read on the signal path
 * inside the fault layer's read side (with atomic loads where a field is
 * marked atomic).
 */
static struct pk_watch watches[WATCH_MAX];
static struct wpage wpages[WATCH_MAX];
PK_SIGNAL_DATA(watches);
PK_SIGNAL_DATA(wpages);

/* The single step a thread is in the middle of (page mechanism). */
struct wstep {
	struct wpage *pg;
	uintptr_t addr;		/* the faulting address */
	uintptr_t end;		/* ... and the end of the access (decoded) */
	unsigned int access;
	unsigned int reopened;	/* wpages opened during the step (bits) */
	int trap_blocked;	/* SIGTRAP was blocked where the fault was */
	int how;		/* 0: page opened; else PK_ACCESS_MOVE_* */
	int reg;		/* PK_ACCESS_MOVE_REG: the register moved */
	uintptr_t rip_next;	/* PK_ACCESS_MOVE_RIP: where to go on */
	uintptr_t xol;		/* PK_ACCESS_MOVE_RIP: the code page mapped */
	uint64_t old[WATCH_MAX];
};
static __thread struct wstep wstep __attribute__((tls_model("initial-exec")));
PK_SIGNAL_TLS(wstep);

static struct {
	unsigned long hits;		/* handlers called */
	unsigned long open_steps;	/* steps that opened their page */
} wstats;				/* atomic counters */
PK_SIGNAL_DATA(wstats);

/*
 * Is the mapping at a watched page still probekit's?
 * --------------------------------------------------
 *
 * The program may munmap() a watched page, or map something else over it
 * (mmap MAP_FIXED, mremap, shmat), without telling probekit. Its range in
 * the fault chain stays until pk_watch_remove(), so:
 *   - a fault there that is not a protection fault on a mapped page
 *     (SEGV_MAPERR: nothing mapped; SIGBUS) is never probekit's: it is
 *     passed on, whatever the state of the watch;
 *   - before a protection fault is served (the access moved to the alias,
 *     or the page opened), and before pk_watch_remove() or fork() maps
 *     anything at the page, the mapping found there is asked whether it is
 *     still the one probekit made: the alias's memfd (same inode and
 *     device, shared) for an aliased page; for a page without an alias (a
 *     private mapping, nothing to name it by), a private mapping with the
 *     protection probekit gave it. If it is not, the fault goes on to the
 *     program and nothing is mapped or protected there. (Without an
 *     alias this is a weak test: a new private mapping that is read-only,
 *     inaccessible or has the page's own protection passes it.)
 * The question is PROCMAP_QUERY (Linux 6.11) on a descriptor of
 * /proc/self/maps kept open for it (wmaps_fd: opened at the first page
 * watch, again in a fork child). Where it cannot be asked (an older
 * kernel, the descriptor closed by the program, or its number reused for
 * another file: wmaps_query() compares device and inode) the answer is
 * "ours", as before. pk_watch_add() of another address on a watched page
 * and pk_watch_remove() of one of several watches ask too before they
 * protect the page again: a page that is not probekit's any more is never
 * protected; the add is refused (-ESTALE: the page's stale watches must go
 * first), the remove only drops the watch. What remains (probekit(7), WATCHPOINTS): the program changing
 * the mapping between the question and the step or the remap.
 */
#define WMAPS_VMA_PROT (PK_PROCMAP_VMA_READABLE | PK_PROCMAP_VMA_WRITABLE | \
			PK_PROCMAP_VMA_EXECUTABLE)

static int wmaps_fd = -1;	/* pk_fault_lock (and fork child) */
PK_SIGNAL_DATA(wmaps_fd);
static dev_t wmaps_dev;		/* what it was opened as: pk_fault_lock */
static ino_t wmaps_ino;
PK_SIGNAL_DATA(wmaps_dev);
PK_SIGNAL_DATA(wmaps_ino);

/* PROT_* as PROCMAP_QUERY's vma_flags name them (the same three bits). */
_Static_assert(PROT_READ == 1 && PROT_WRITE == 2 && PROT_EXEC == 4,
	       "PROT_* and PROCMAP_VMA_* bits");

/*
 * Ask PROCMAP_QUERY about the mapping at @addr, into @q: 0; -ENOENT,
 * nothing mapped there; another -errno where it cannot be asked (no
 * descriptor, an older kernel, or the program closed wmaps_fd and the
 * number names another file now: /proc/OTHER/maps would answer for
 * another process, so the file's device and inode must be those
 * wmaps_open() saw). Async-signal-safe: raw fstat and ioctl (pk_sys3():
 * nothing a probe can be on, errno untouched).
 */
PK_NOPROBE static long wmaps_query(uintptr_t addr, struct pk_procmap_query *q)
{
	/* Acquire: pairs with wmaps_open()'s release (wmaps_dev, _ino). */
	int fd = __atomic_load_n(&wmaps_fd, __ATOMIC_ACQUIRE);
	struct stat st;	/* x86-64: glibc's struct stat is the kernel's */
	long ret;

	if (fd < 0)
		return -EBADF;
	ret = pk_sys3(SYS_fstat, fd, (long)&st, 0);
	if (ret < 0 || st.st_dev != wmaps_dev || st.st_ino != wmaps_ino)
		return -EBADF;
	/* Field by field: an initializer or memset() may call memset. */
	q->size = sizeof(*q);
	q->query_flags = 0;
	q->query_addr = addr;
	q->vma_name_size = q->build_id_size = 0;
	q->vma_name_addr = q->build_id_addr = 0;
	ret = pk_sys3(SYS_ioctl, fd, (long)PK_PROCMAP_QUERY, (long)q);
	if (!ret && (q->vma_start > addr || q->vma_end <= addr))
		return -ENOENT;	/* the next mapping up: none at @addr */
	return ret;
}

/*
 * Whether the page of @pg is still mapped as probekit mapped it: 1 (or
 * cannot tell), 0 (not: unmapped, or another mapping). Async-signal-safe.
 */
PK_NOPROBE static int wpage_ours(const struct wpage *pg)
{
	struct pk_procmap_query q;
	long ret = wmaps_query(pg->page, &q);
	int prot;

	if (ret < 0)
		return ret == -ENOENT ? 0 : 1;	/* nothing mapped there */
	if (pg->alias)
		return (q.vma_flags & PK_PROCMAP_VMA_SHARED) && q.inode == pg->ino &&
		       q.dev_major == pg->dev_major &&
		       q.dev_minor == pg->dev_minor;
	/*
	 * Any protection probekit gives the page: protected for writes or
	 * for reads (pg->prot changes before the page does), or opened for
	 * a step.
	 */
	prot = (int)(q.vma_flags & WMAPS_VMA_PROT);
	return !(q.vma_flags & PK_PROCMAP_VMA_SHARED) &&
	       (prot == PROT_NONE || prot == PROT_READ ||
		prot == pg->orig_prot);
}

/*
 * Whether the mapping at @addr allows @access (PK_ACCESS_*) now: 1, or 0
 * (it does not, nothing is mapped there, or cannot tell).
 */
PK_NOPROBE static int wmaps_allows(uintptr_t addr, unsigned int access)
{
	struct pk_procmap_query q;
	unsigned long need;

	if (access == PK_ACCESS_WRITE)
		need = PK_PROCMAP_VMA_WRITABLE;
	else if (access == PK_ACCESS_READ)
		need = PK_PROCMAP_VMA_READABLE;
	else if (access == PK_ACCESS_EXEC)
		need = PK_PROCMAP_VMA_EXECUTABLE;
	else
		return 0;
	return !wmaps_query(addr, &q) && (q.vma_flags & need);
}

PK_NOPROBE static uint64_t watch_read(uintptr_t addr, size_t len)
{
	switch (len) {
	case 1:
		return __atomic_load_n((uint8_t *)addr, __ATOMIC_RELAXED);
	case 2:
		return __atomic_load_n((uint16_t *)addr, __ATOMIC_RELAXED);
	case 4:
		return __atomic_load_n((uint32_t *)addr, __ATOMIC_RELAXED);
	default:
		return __atomic_load_n((uint64_t *)addr, __ATOMIC_RELAXED);
	}
}

/* ------------------------------------------------------------ signal path */

/*
 * A TRAP_PERF SIGTRAP: ours when its data carries WATCH_MAGIC (then claimed
 * even if the watch went away meanwhile: the event was ours).
 * si_perf_data follows si_addr in the kernel's siginfo (glibc 2.36 does
 * not name it).
 */
PK_NOPROBE static int watch_hit(siginfo_t *si, ucontext_t *uc)
{
	unsigned long data = *(unsigned long *)((char *)&si->si_addr +
						sizeof(void *));
	struct pk_watch *w;
	struct pk_watch_hit h;
	struct pk_fault_reader rd;

	if ((data >> 8) != WATCH_MAGIC || (data & 0xff) >= WATCH_MAX)
		return 0;
	w = &watches[data & 0xff];
	pk_fault_read_enter(&rd);
	/* R3: pairs with W1 (active = 0) and with the publication. */
	if (__atomic_load_n(&w->active, __ATOMIC_SEQ_CST)) {
		h.addr = (void *)w->addr;
		h.len = w->len;
		h.new_value = watch_read(w->addr, w->len);
		h.old_value = __atomic_exchange_n(&w->shadow, h.new_value,
						  __ATOMIC_RELAXED);
		h.access = h.new_value != h.old_value ? PK_ACCESS_WRITE : 0;
		h.ucontext = uc;
		w->fn(&h, w->ctx);
		__atomic_add_fetch(&wstats.hits, 1, __ATOMIC_RELAXED);
	}
	pk_fault_read_leave(&rd);
	return 1;
}

/*
 * Alias stepping (the sound path)
 * -------------------------------
 *
 * A watched page is turned into a MAP_SHARED memfd page, and the same memfd
 * is mapped writable at pg->alias, in the middle of 4 GiB of address space
 * reserved (PROT_NONE) at pg->resv. The page itself stays protected for
 * every thread all the time; the stepping thread's one access is moved to
 * the alias instead (pk_arch_access()):
 *   - base or index register: that register + delta for the one
 *     instruction (nothing else in it uses the register), undone at the
 *     step;
 *   - RIP-relative: the same bytes run at rip + delta, in a page mapped
 *     inside the reservation for the step (RW, filled, then R+X: never
 *     writable and executable at once), so their operand lands on the
 *     alias; the thread goes on at rip + len.
 * So no access by another thread ever goes unseen. Instructions that
 * cannot be moved (a second memory operand, a branch, the register used
 * twice, FS/GS, RSP, a code page that cannot be made executable) fall back
 * to opening the page for the step (the window probekit(7) documents under
 * WATCHPOINTS, "Open steps").
 *
 * Known gap: a moved instruction that traps for another reason before its
 * step completes (div by zero through a watched operand, SIGSEGV elsewhere)
 * leaves the stepper's claim on the page in place; the program gets its
 * signal with the shifted register in the context.
 */
#define RESV_HALF PK_ARCH_PCREL_REACH

/*
 * Move the stepping thread's access @a (from pk_arch_access_at()) to the
 * alias; 0 if it cannot be.
 */
PK_NOPROBE static int wpage_move(struct wpage *pg, ucontext_t *uc,
				 struct pk_access a)
{
	uintptr_t psz = (uintptr_t)pk_page_size, rip = pk_arch_pc(uc);
	uintptr_t delta = (uintptr_t)pg->alias - pg->page, cp;

	if (a.addr < pg->page || a.addr + a.size > pg->page + psz)
		return 0;
	if (a.how == PK_ACCESS_MOVE_REG) {
		pk_arch_reg_add(uc, a.reg, delta);
		wstep.reg = a.reg;
		wstep.how = a.how;
		return 1;
	}
	if (a.how != PK_ACCESS_MOVE_RIP)
		return 0;
	cp = (rip + delta) & ~(psz - 1);
	if (cp < (uintptr_t)pg->resv ||
	    cp + psz > (uintptr_t)pg->resv + 2 * RESV_HALF ||
	    cp == (uintptr_t)pg->alias)
		return 0;
	if (mmap((void *)cp, psz, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
		return 0;
	memcpy((void *)(rip + delta), (void *)rip, a.len);
	if (mprotect((void *)cp, psz, PROT_READ | PROT_EXEC)) {
		mmap((void *)cp, psz, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS |
		     MAP_FIXED | MAP_NORESERVE, -1, 0);
		return 0;	/* W^X policy (MDWE): open the page instead */
	}
	pk_arch_set_pc(uc, rip + delta);
	wstep.rip_next = rip + a.len;
	wstep.xol = cp;
	wstep.how = a.how;
	return 1;
}

/* Undo wpage_move() after the step. */
PK_NOPROBE static void wpage_unmove(struct wpage *pg, ucontext_t *uc)
{
	if (wstep.how == PK_ACCESS_MOVE_REG) {
		pk_arch_reg_add(uc, wstep.reg,
				pg->page - (uintptr_t)pg->alias);
	} else if (wstep.how == PK_ACCESS_MOVE_RIP) {
		pk_arch_set_pc(uc, wstep.rip_next);
		mmap((void *)wstep.xol, (size_t)pk_page_size, PROT_NONE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
		     -1, 0);
	}
	wstep.how = 0;
}

/* Where a watch's bytes can be read during a step (the page may be PROT_NONE). */
PK_NOPROBE static uintptr_t wview(const struct wpage *pg, uintptr_t addr)
{
	return pg->alias ? (uintptr_t)pg->alias + (addr - pg->page) : addr;
}

/* Page mechanism, part 1: a fault on a watched page (a fault-chain range). */
PK_NOPROBE static int wpage_fault(const struct pk_fault *f, void *ctx)
{
	struct wpage *pg = ctx;
	ucontext_t *uc = f->ucontext;
	long psz = pk_page_size;
	struct pk_access a;
	int decoded;

	/* Nothing mapped there (the program unmapped it), or not ours. */
	if (f->signo != SIGSEGV || f->code != SEGV_ACCERR)
		return PK_FAULT_UNHANDLED;
	if (wstep.pg) {
		/*
		 * This thread is in a step already: a watch handler of it
		 * wrote a watched page (this one after the step protected it
		 * again, or another), or the stepped instruction touched a
		 * second watched page. Open the page until the step ends
		 * (wpage_step() protects it again); writes other threads make
		 * meanwhile go unseen (probekit(7), WATCHPOINTS, "Open steps").
		 */
		wstep.reopened |= 1u << (pg - wpages);
		mprotect((void *)pg->page, (size_t)psz, pg->orig_prot);
		return PK_FAULT_HANDLED;
	}
	/* P1 ("Memory ordering"): pairs with P2 in wpage_quiesce(). */
	__atomic_add_fetch(&pg->steps, 1, __ATOMIC_SEQ_CST);
	if (__atomic_load_n(&pg->busy, __ATOMIC_SEQ_CST)) {
		__atomic_sub_fetch(&pg->steps, 1, __ATOMIC_SEQ_CST);	/* P6 */
		/* Acquire: pairs with P3, the converter's busy = 0. */
		while (__atomic_load_n(&pg->busy, __ATOMIC_ACQUIRE))
			sched_yield();
		return PK_FAULT_HANDLED;	/* retry on the new mapping */
	}
	/*
	 * No watch on it: the range is about to go (or has just come, and
	 * the page is not protected yet), so the fault was raised before a
	 * conversion that has ended: watch_hook() judges it
	 * (wpage_retired()), as no range claimed it. Acquire: pairs with
	 * watch_page_add()'s release store of nw.
	 */
	if (!__atomic_load_n(&pg->nw, __ATOMIC_ACQUIRE)) {
		__atomic_sub_fetch(&pg->steps, 1, __ATOMIC_SEQ_CST);	/* P6 */
		return PK_FAULT_UNHANDLED;
	}
	/*
	 * Counted in steps, the page cannot be converted now (P2): a mapping
	 * that is not probekit's is the program's (it unmapped the page and
	 * mapped something else there): its fault goes on to it.
	 */
	if (!wpage_ours(pg)) {
		__atomic_sub_fetch(&pg->steps, 1, __ATOMIC_SEQ_CST);	/* P6 */
		return PK_FAULT_UNHANDLED;
	}
	/*
	 * One thread steps over a page at a time. A thread that faults while
	 * another steps waits until that one has protected the page again,
	 * then retries its access (and faults again, and steps, unless a
	 * third thread opened the page meanwhile). So no two steps overlap:
	 * a change of a watched value is reported by exactly one step.
	 * The wait is bounded: the stepper is one instruction away from its
	 * trap. Released in wpage_step(). P4: the claim and the wait are
	 * acquire, pairing with P5 there.
	 */
	if (!__atomic_compare_exchange_n(&pg->stepper, &(uintptr_t){ 0 },
					 (uintptr_t)&wstep, 0, __ATOMIC_ACQUIRE,
					 __ATOMIC_RELAXED)) {
		__atomic_sub_fetch(&pg->steps, 1, __ATOMIC_SEQ_CST);	/* P6 */
		while (__atomic_load_n(&pg->stepper, __ATOMIC_ACQUIRE))
			sched_yield();
		return PK_FAULT_HANDLED;
	}
	wstep.pg = pg;
	wstep.addr = (uintptr_t)f->addr;
	wstep.end = wstep.addr + 1;
	wstep.access = f->access;
	wstep.how = 0;
	/*
	 * The range the instruction accesses: an access that starts before
	 * a watched value (si_addr) but covers it touches it too.
	 */
	decoded = !pk_arch_access_at(uc, (uintptr_t)pk_page_size, &a);
	if (decoded && a.addr <= wstep.addr && a.addr + a.size > wstep.addr) {
		wstep.addr = (uintptr_t)a.addr;
		wstep.end = (uintptr_t)a.addr + a.size;
	}
	/*
	 * A step where SIGTRAP is blocked would end in a forced SIGTRAP,
	 * which the kernel turns into SIG_DFL. probekit's own handler is
	 * SA_NODEFER (sig.c), so a watch handler does not block it; the
	 * program can (pthread_sigmask(), or a handler of its own with
	 * SIGTRAP in its sa_mask): let SIGTRAP through for the one
	 * instruction; wpage_step() blocks it again in the context it
	 * returns to.
	 */
	wstep.trap_blocked = sigismember(&uc->uc_sigmask, SIGTRAP) == 1;
	if (wstep.trap_blocked)
		sigdelset(&uc->uc_sigmask, SIGTRAP);
	if (!pg->alias || !decoded || !wpage_move(pg, uc, a)) {
		__atomic_add_fetch(&wstats.open_steps, 1, __ATOMIC_RELAXED);
		mprotect((void *)pg->page, (size_t)psz, pg->orig_prot);
	}
	/*
	 * The values before the step: through the alias, or else from the
	 * page just opened (a read watch's page is unreadable until then).
	 * Nothing has run the instruction yet. R3 of dispatch()'s read side.
	 */
	for (unsigned int i = 0; i < WATCH_MAX; i++)
		if (watches[i].pg == pg &&
		    __atomic_load_n(&watches[i].active, __ATOMIC_ACQUIRE))
			wstep.old[i] = watch_read(wview(pg, watches[i].addr),
						  watches[i].len);
	pk_arch_set_step(uc, 1);
	return PK_FAULT_HANDLED;
}

/* Page mechanism, part 2: the single-step trap after the access. */
PK_NOPROBE static int wpage_step(ucontext_t *uc)
{
	struct wpage *pg = wstep.pg;
	long psz = pk_page_size;
	int prot = __atomic_load_n(&pg->prot, __ATOMIC_ACQUIRE);
	struct pk_watch_hit h[WATCH_MAX];
	struct pk_watch *hw[WATCH_MAX];
	unsigned int n = 0;
	int moved = wstep.how != 0;
	struct pk_fault_reader rd;

	pk_arch_set_step(uc, 0);
	pk_fault_read_enter(&rd);
	/*
	 * Opened page: protect it again before reading the values, not
	 * after: a write that another thread made while the page was open is
	 * then in what we read (and reported here), and any later write
	 * faults. Read watches (PROT_NONE) read through PROT_READ first.
	 * Moved access: the page was never opened.
	 */
	if (moved)
		wpage_unmove(pg, uc);
	else
		mprotect((void *)pg->page, (size_t)psz, prot | PROT_READ);
	for (unsigned int i = 0; i < WATCH_MAX; i++) {
		struct pk_watch *w = &watches[i];
		int touched;

		/* R3: pairs with W1 in watch_page_remove(). */
		if (w->pg != pg || !__atomic_load_n(&w->active, __ATOMIC_SEQ_CST))
			continue;
		h[n].new_value = watch_read(wview(pg, w->addr), w->len);
		h[n].old_value = wstep.old[i];
		touched = wstep.addr < w->addr + w->len && wstep.end > w->addr;
		if (h[n].new_value == h[n].old_value && !touched)
			continue;	/* an unwatched byte of the page */
		if (wstep.access == PK_ACCESS_READ && !(w->access & PK_WATCH_READ))
			continue;
		h[n].addr = (void *)w->addr;
		h[n].len = w->len;
		h[n].access = h[n].new_value != h[n].old_value ? PK_ACCESS_WRITE
							       : 0;
		h[n].ucontext = uc;
		hw[n++] = w;
	}
	/* A handler that writes the page opens it again: see wpage_fault(). */
	for (unsigned int i = 0; i < n; i++) {
		hw[i]->fn(&h[i], hw[i]->ctx);
		__atomic_add_fetch(&wstats.hits, 1, __ATOMIC_RELAXED);
	}
	if (!moved && !(prot & PROT_READ))
		mprotect((void *)pg->page, (size_t)psz, prot);
	for (unsigned int i = 0; i < WATCH_MAX; i++)
		if (wstep.reopened & (1u << i))
			mprotect((void *)wpages[i].page, (size_t)psz,
				 __atomic_load_n(&wpages[i].prot,
						 __ATOMIC_ACQUIRE));
	wstep.reopened = 0;
	if (wstep.trap_blocked)
		sigaddset(&uc->uc_sigmask, SIGTRAP);
	/* P5: pairs with P4, the claim and the wait in wpage_fault(). */
	__atomic_store_n(&pg->stepper, 0, __ATOMIC_RELEASE);
	pk_fault_read_leave(&rd);
	wstep.pg = NULL;
	__atomic_sub_fetch(&pg->steps, 1, __ATOMIC_SEQ_CST);	/* P6 */
	return 1;
}

/*
 * Retired pages: a page whose last watch went away, its protection given
 * back and its range removed. A thread can fault on it and reach the fault
 * chain only after that (the access would succeed now): the last RETIRED_N
 * retired pages are remembered in a ring, each with the number of its
 * retirement (in the bits below the page), and a protection fault there is
 * retried. A fault at the address this thread retried last, with the page
 * not retired again since (the same ring entry), is a real one (the
 * program's own protection): it goes on. So a fault is retried at most
 * once per retirement of its page, however much other pages churn. A
 * retirement between the two (the page watched and given back again: a
 * thread can be preempted between the fault and its handler for
 * milliseconds, while watches come and go) makes the second one stale too:
 * retried again. A fault with no range on it reaches this only when no
 * range claimed it, and a page is retired only once its range has no
 * watch (wpage_fault() does not claim such faults).
 *
 * A page that left the ring (more than RETIRED_N retirements while the
 * handler was delayed) is retried if its mapping allows the access now
 * (wmaps_allows()), at most once per retirement of any page. Only a
 * protection fault (SEGV_ACCERR) is ever retried: SEGV_MAPERR and SIGBUS
 * are the program's.
 */
#define RETIRED_N 32
_Static_assert(RETIRED_N >= 2 * WATCH_MAX,
	       "every watched page can be retired twice before it leaves the ring");
#define RETIRED_SEQ ((uintptr_t)0xfff)	/* below any page (4 KiB at least) */
static uintptr_t retired[RETIRED_N];	/* atomic; written under pk_fault_lock */
PK_SIGNAL_DATA(retired);
static unsigned long retired_pos;	/* retirements; atomic, pk_fault_lock */
PK_SIGNAL_DATA(retired_pos);
static __thread uintptr_t retry_addr __attribute__((tls_model("initial-exec")));
PK_SIGNAL_TLS(retry_addr);
static __thread uintptr_t retry_stamp __attribute__((tls_model("initial-exec")));
PK_SIGNAL_TLS(retry_stamp);

PK_NOPROBE __attribute__((cold)) static int wpage_retired(uintptr_t addr,
							  unsigned int access)
{
	uintptr_t page = addr & ~(uintptr_t)(pk_page_size - 1), stamp = 0;
	/* Acquire: pairs with watch_page_remove()'s release. */
	unsigned long n = __atomic_load_n(&retired_pos, __ATOMIC_ACQUIRE);

	if (!n)
		return 0;	/* no page was ever given back */
again:
	/* Newest first: the page's last retirement is the one that counts. */
	for (unsigned int i = 0; i < RETIRED_N && !stamp; i++) {
		/* Acquire: pairs with watch_page_remove()'s release. */
		uintptr_t e = __atomic_load_n(&retired[(n - 1 - i) % RETIRED_N],
					      __ATOMIC_ACQUIRE);

		if ((e & ~RETIRED_SEQ) == page)
			stamp = e;
	}
	/* A retirement meanwhile: the ring may have its newer entry. */
	if (__atomic_load_n(&retired_pos, __ATOMIC_ACQUIRE) != n) {
		n = __atomic_load_n(&retired_pos, __ATOMIC_ACQUIRE);
		stamp = 0;
		goto again;
	}
	if (!stamp) {
		/* Out of the ring: stale only if the access is allowed now. */
		if (!wmaps_allows(addr, access))
			return 0;
		stamp = (uintptr_t)n | (uintptr_t)1 << 63;	/* no page's */
	}
	if (retry_addr == addr && retry_stamp == stamp) {
		retry_addr = 0;
		return 0;
	}
	retry_addr = addr;
	retry_stamp = stamp;
	return 1;
}

/*
 * The fault layer's hook (fault.h): a TRAP_PERF or TRAP_TRACE SIGTRAP, or
 * a SEGV_ACCERR fault that no range claimed.
 */
PK_NOPROBE static int watch_hook(int sig, siginfo_t *si, ucontext_t *uc)
{
	if (sig == SIGSEGV)
		return si->si_code == SEGV_ACCERR &&
		       wpage_retired((uintptr_t)si->si_addr,
				     pk_arch_fault_access(uc));
	if (sig != SIGTRAP)
		return 0;
	/* Only the single-step trap ends a step (TRAP_TRACE). */
	if (si->si_code == TRAP_TRACE)
		return wstep.pg ? wpage_step(uc) : 0;
	return watch_hit(si, uc);
}

static void watch_stats(struct pk_fault_stats *st)
{
	st->watch_hits = __atomic_load_n(&wstats.hits, __ATOMIC_RELAXED);
	st->watch_open_steps = __atomic_load_n(&wstats.open_steps,
					       __ATOMIC_RELAXED);
}

static const struct pk_fault_client watch_client = {
	.hook = watch_hook,
	.range_fn = wpage_fault,
	.stats = watch_stats,
};
PK_SIGNAL_DATA(watch_client);

/* ---------------------------------------------------------------- writers */

static int watch_open(struct pk_watch *w, unsigned int idx, pid_t tid)
{
	struct perf_event_attr a;
	int fd;

	memset(&a, 0, sizeof(a));
	a.type = PERF_TYPE_BREAKPOINT;
	a.size = sizeof(a);
	a.bp_type = w->access & PK_WATCH_READ ? HW_BREAKPOINT_RW
					       : HW_BREAKPOINT_W;
	a.bp_addr = w->addr;
	a.bp_len = w->len;
	a.sample_period = 1;
	a.sigtrap = 1;
	a.remove_on_exec = 1;
	a.inherit = 1;
	a.inherit_thread = 1;
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	a.sig_data = (WATCH_MAGIC << 8) | idx;
	fd = (int)syscall(SYS_perf_event_open, &a, tid, -1, -1,
			  PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (PK_GROW(&w->evs, &w->capevs, w->nevs + 1)) {
		close(fd);
		return -ENOMEM;
	}
	w->evs[w->nevs].fd = fd;
	w->evs[w->nevs++].tid = tid;
	return 0;
}

static int watch_has(const struct pk_watch *w, pid_t tid)
{
	for (size_t i = 0; i < w->nevs; i++)
		if (w->evs[i].tid == tid)
			return 1;
	return 0;
}

/* Open an event on every thread; list again until nothing is new. */
static int watch_open_all(struct pk_watch *w, unsigned int idx)
{
	int err = watch_open(w, idx, pk_gettid()), added;

	while (!err) {
		pid_t *tids;
		size_t n;

		err = pk_tasks_list(0, &tids, &n);
		if (err)
			return err;
		added = 0;
		for (size_t i = 0; i < n && !err; i++) {
			if (watch_has(w, tids[i]))
				continue;
			err = watch_open(w, idx, tids[i]);
			if (err == -ESRCH)	/* exited meanwhile */
				err = 0;
			else
				added++;
		}
		free(tids);
		if (!added)
			break;
	}
	return err;
}

static void watch_close_all(struct pk_watch *w)
{
	for (size_t i = 0; i < w->nevs; i++)
		close(w->evs[i].fd);
	free(w->evs);
	w->evs = NULL;
	w->nevs = w->capevs = 0;
}

static int watch_errno(int err)
{
	switch (err) {
	case -ENOSPC:
		return -EBUSY;		/* no debug register left */
	case -EACCES:
	case -EPERM:
		return -EPERM;		/* perf_event_paranoid, seccomp */
	case -ENOMEM:
	case -EBUSY:
		return err;
	default:
		return -ENOTSUP;	/* no breakpoint PMU, no sigtrap */
	}
}

/*
 * The rule of pk_watch_add() for the page mechanism (its comment in
 * include/probekit/watch.h, "What may be watched"): the page must be
 * private, writable, not executable data that no signal handler of the
 * calling thread needs. One view of the mappings serves both lookups,
 * the page's and the caller's stack's.
 * Return: 0 with *@mi the page's mapping, or the -errno to refuse it with
 * (-EINVAL where nothing is mapped).
 */
static int watch_page_allowed(uintptr_t page, size_t psz, struct pk_mapinfo *mi)
{
	volatile char here = 0;
	uintptr_t sp = (uintptr_t)&here;
	struct pk_maps ms = PK_MAPS_INIT;
	struct pk_mapinfo stack;
	stack_t ss;
	int err, on_stack;

	err = pk_maps_open(&ms, PK_MAPS_NAME);
	if (!err)
		err = pk_maps_find(&ms, page, mi);
	on_stack = !err && !pk_maps_find(&ms, sp, &stack) &&
		   page >= stack.lo && page < stack.hi;
	pk_maps_close(&ms);
	if (err)
		return err == -ENOENT ? -EINVAL : err;	/* unmapped */
	if (!(mi->prot & PROT_WRITE))
		return -EINVAL;			/* nothing to watch */
	if (mi->shared || (mi->prot & PROT_EXEC))
		return -ENOTSUP;		/* other views; code */
	if (mi->name[0] == '[' && strcmp(mi->name, "[heap]") &&
	    strncmp(mi->name, "[anon", 5))
		return -EBUSY;			/* [stack], [vvar], ... */
	if (on_stack)
		return -EBUSY;			/* the caller's stack */
	if (!sigaltstack(NULL, &ss) && !(ss.ss_flags & SS_DISABLE) &&
	    pk_overlaps(page, page + psz,
		&(struct pk_span){ ss.ss_sp, ss.ss_size }, 1))
		return -EBUSY;			/* its signal stack */
	return 0;
}

/* The protection a watched page gets: reads fault too if one watch wants. */
static int wpage_prot(const struct wpage *pg)
{
	int prot = pg->orig_prot & ~PROT_WRITE;

	for (unsigned int i = 0; i < WATCH_MAX; i++)
		if (watches[i].fn && watches[i].pg == pg &&
		    (watches[i].access & PK_WATCH_READ))
			prot = PROT_NONE;
	return prot;
}

/* Wait until no thread is between a fault on @pg and its step. */
static void wpage_quiesce(struct wpage *pg)
{
	/* P2: pairs with P1 in wpage_fault(); waits for P6. */
	__atomic_store_n(&pg->busy, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&pg->steps, __ATOMIC_SEQ_CST))
		sched_yield();
}

/* The end of a conversion: faulters go on to find the page in its new state. */
static void wpage_done(struct wpage *pg)
{
	__atomic_store_n(&pg->busy, 0, __ATOMIC_RELEASE);	/* P3 */
}

/* Map a new memfd holding @pg's bytes at the alias and at the page. */
static int wpage_remap(struct wpage *pg, int prot, const void *src)
{
	size_t psz = (size_t)pk_page_size;
	int fd = memfd_create("probekit-watch", MFD_CLOEXEC), err = 0;
	struct stat st;
	void *tmp;

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)psz) || fstat(fd, &st)) {
		err = -errno;
		goto out;
	}
	tmp = mmap(NULL, psz, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (tmp == MAP_FAILED) {
		err = -errno;
		goto out;
	}
	/*
	 * @src: a copy that cannot change (fork), or the page itself while
	 * writers fault and wait (busy).
	 */
	pk_arch_copy_unchecked(tmp, src ? src : pg->alias ? pg->alias :
			       (char *)pg->page, psz);
	munmap(tmp, psz);
	if (mmap(pg->resv + RESV_HALF, psz, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED ||
	    mmap((void *)pg->page, psz, prot, MAP_SHARED | MAP_FIXED, fd,
		 0) == MAP_FAILED) {
		err = -errno;	/* only after the reservation was checked */
		goto out;
	}
	/* What wpage_ours() recognises the page by from now on. */
	pg->ino = st.st_ino;
	pg->dev_major = major(st.st_dev);
	pg->dev_minor = minor(st.st_dev);
out:
	close(fd);
	return err;
}

/*
 * Turn @pg into a memfd page with an alias (see "Alias stepping"), mapped
 * with @prot; on failure the page stays as it was and steps open it
 * instead. The caller has quiesced it (busy).
 */
static void wpage_alias(struct wpage *pg, int prot)
{
	size_t psz = (size_t)pk_page_size;
	char *resv;
	int err;

	pk_assert_held(&pk_fault_lock);
	resv = mmap(NULL, 2 * RESV_HALF, PROT_NONE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (resv == MAP_FAILED)
		return;
	pg->resv = resv;
	/* Freeze writers (they fault and wait: busy) while the bytes move. */
	mprotect((void *)pg->page, psz, PROT_READ);
	err = wpage_remap(pg, prot, NULL);
	if (err) {
		pk_dbg("watch: page %#lx: no alias (%s); steps open the page",
		       (unsigned long)pg->page, strerror(-err));
		mprotect((void *)pg->page, psz, pg->orig_prot);
		munmap(resv, 2 * RESV_HALF);
		pg->resv = NULL;
	} else {
		pg->alias = resv + RESV_HALF;
	}
}

/*
 * The last watch went: a private page with the bytes and protection back,
 * if the page is still the memfd probekit mapped (@ours); else the
 * program's mapping there is left alone, and the alias only goes. The
 * caller has quiesced it (busy).
 */
static void wpage_unalias(struct wpage *pg, int ours)
{
	size_t psz = (size_t)pk_page_size;
	void *tmp = MAP_FAILED;

	pk_assert_held(&pk_fault_lock);
	if (ours)
		tmp = mmap(NULL, psz, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (tmp != MAP_FAILED) {
		pk_arch_copy_unchecked(tmp, pg->alias, psz);
		mprotect(tmp, psz, pg->orig_prot);
		if (mremap(tmp, psz, psz, MREMAP_MAYMOVE | MREMAP_FIXED,
			   (void *)pg->page) == MAP_FAILED) {
			munmap(tmp, psz);
			tmp = MAP_FAILED;
		}
	}
	if (!ours) {
		pk_dbg("watch: page %#lx was unmapped or replaced by the "
		       "program: left alone", (unsigned long)pg->page);
	} else if (tmp == MAP_FAILED) {
		/* Keep the shared page, unprotected: the bytes stay right. */
		pk_warn("watch: page %#lx stays a shared mapping",
			(unsigned long)pg->page);
		mprotect((void *)pg->page, psz, pg->orig_prot);
	}
	munmap(pg->resv, 2 * RESV_HALF);
	pg->resv = pg->alias = NULL;
}

/*
 * The descriptor wpage_ours() asks; -1 where it cannot be had. Opened
 * again if the program closed it (it may hold another file now: that one
 * is the program's, left open).
 */
static void wmaps_open(void)
{
	struct stat st;
	int fd;

	if (wmaps_fd >= 0 && !fstat(wmaps_fd, &st) &&
	    st.st_dev == wmaps_dev && st.st_ino == wmaps_ino)
		return;
	fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd >= 0 && fstat(fd, &st)) {
		close(fd);
		fd = -1;
	}
	if (fd >= 0) {
		wmaps_dev = st.st_dev;
		wmaps_ino = st.st_ino;
	}
	/* Release: pairs with wmaps_query()'s acquire load. */
	__atomic_store_n(&wmaps_fd, fd, __ATOMIC_RELEASE);
}

/*
 * Page mechanism: protect @w's page and join the fault chain.
 *
 * A page's first watch converts it with busy set from before it is first
 * protected until it is watched (nw, the watch active, its protection), so
 * no fault raised meanwhile, however late its handler runs, finds the page
 * protected with no watch counted on it: the handler either waits (busy)
 * or finds it watched, or finds it retired (wpage_retired()) and retries.
 */
static int watch_page_add(struct pk_watch *w)
{
	uintptr_t psz = (uintptr_t)pk_page_size;
	uintptr_t page = w->addr & ~(psz - 1);
	struct wpage *pg = NULL;
	int err = 0, prot, fresh = 0;

	pk_assert_held(&pk_fault_lock);
	if (((w->addr + w->len - 1) & ~(psz - 1)) != page)
		return -EINVAL;
	wmaps_open();
	for (unsigned int i = 0; i < WATCH_MAX; i++)
		if (wpages[i].nw && wpages[i].page == page)
			pg = &wpages[i];
	/*
	 * Watched already, but the program unmapped the page or mapped
	 * something else there: not probekit's to protect ("Is the mapping
	 * at a watched page still probekit's?").
	 */
	if (pg && !wpage_ours(pg))
		return -ESTALE;
	if (!pg) {
		struct pk_mapinfo mi;

		for (unsigned int i = 0; i < WATCH_MAX && !pg; i++)
			if (!wpages[i].nw)
				pg = &wpages[i];
		err = watch_page_allowed(page, psz, &mi);
		if (err)
			return err;
		/* -EBUSY too if the page holds a table of the fault layer's. */
		err = pk_fault_range_add(page, page + psz, wpage_fault, pg);
		if (err)
			return err;
		pg->page = page;
		pg->orig_prot = mi.prot;
		fresh = 1;
		wpage_quiesce(pg);
	}
	w->pg = pg;
	prot = wpage_prot(pg);
	/* Release: pairs with wpage_step()'s acquire load of prot. */
	__atomic_store_n(&pg->prot, prot, __ATOMIC_RELEASE);
	if (fresh && !pk_env_flag("WATCH_NOALIAS"))
		wpage_alias(pg, prot);
	/* Release: pairs with wpage_fault()'s acquire load of nw. */
	__atomic_store_n(&pg->nw, pg->nw + 1, __ATOMIC_RELEASE);
	/* Published: pairs with R3 in wpage_fault() and wpage_step(). */
	__atomic_store_n(&w->active, 1, __ATOMIC_SEQ_CST);
	if (mprotect((void *)page, psz, prot))
		err = -errno;	/* the caller undoes */
	if (fresh)
		wpage_done(pg);
	return err;
}

/* Page mechanism: stop reporting, wait for steps, unprotect if last. */
static void watch_page_remove(struct pk_watch *w)
{
	uintptr_t psz = (uintptr_t)pk_page_size;
	struct wpage *pg = w->pg;
	int last = pg->nw == 1, ours;

	pk_assert_held(&pk_fault_lock);
	/* W1 of the grace period below (pk_fault_wait_readers()). */
	__atomic_store_n(&w->active, 0, __ATOMIC_SEQ_CST);
	w->pg = NULL;
	if (!last) {
		/*
		 * The page's protection for the watches left (a step in
		 * flight re-protects with it: release, pairs with
		 * wpage_step()'s acquire load).
		 */
		__atomic_store_n(&pg->prot, wpage_prot(pg), __ATOMIC_RELEASE);
		/* Not over a mapping the program put there. */
		if (wpage_ours(pg))
			mprotect((void *)pg->page, psz, pg->prot);
		pk_fault_wait_readers();  /* no handler runs w->fn after this */
		w->fn = NULL;
		__atomic_store_n(&pg->nw, pg->nw - 1, __ATOMIC_RELEASE);
		return;
	}
	/*
	 * The last watch: the page converts back with busy set (no thread
	 * steps over it meanwhile, P2), remembered as retired before its
	 * range goes (wpage_retired(); release, pairs with its acquire
	 * load). nw goes to 0 before busy does, so a late fault finds the
	 * conversion over and is retried (wpage_retired()).
	 */
	wpage_quiesce(pg);
	ours = wpage_ours(pg);	/* while pg->prot says what probekit set */
	__atomic_store_n(&pg->prot, pg->orig_prot, __ATOMIC_RELEASE);
	__atomic_store_n(&retired[retired_pos % RETIRED_N],
			 pg->page | ((retired_pos + 1) & RETIRED_SEQ),
			 __ATOMIC_RELEASE);
	__atomic_store_n(&retired_pos, retired_pos + 1, __ATOMIC_RELEASE);
	if (pg->alias)
		wpage_unalias(pg, ours);
	else if (ours)
		mprotect((void *)pg->page, psz, pg->orig_prot);
	__atomic_store_n(&pg->nw, 0, __ATOMIC_RELEASE);
	wpage_done(pg);
	pk_fault_wait_readers();	/* no handler runs w->fn after this */
	w->fn = NULL;
	pk_fault_range_remove(pg->page);
}

/*
 * fork(): the fault layer's PK_RANK_FAULT entries (fault.h: both hold
 * pk_fault_lock, in either order). In a child only the forking thread
 * exists.
 *
 * Prepare stops every step over every watched page (the bytes cannot
 * change then: all writes fault and wait), so that no page is open and no
 * step claimed in the child, whose other threads are gone.
 *
 * Aliased watch pages: the memfd is MAP_SHARED, so a child would share the
 * page with the parent. Prepare also copies each such page to a private
 * snapshot, because glibc runs the parent's and the child's handlers
 * concurrently: the parent's writers go on (busy cleared) while the child
 * still builds its page. The child maps a memfd of its own holding the
 * snapshot at the same two places. A fork from inside a watch handler (a
 * step of this thread in flight) cannot wait for itself: that page is left
 * shared, and keeps this thread's step state.
 */
static void snap_free(struct wpage *pg)
{
	if (pg->snap)
		munmap(pg->snap, (size_t)pk_page_size);
	pg->snap = NULL;
}

static void watch_fork_prepare(void)
{
	size_t psz = (size_t)pk_page_size;

	pk_fault_fork_hold();
	pk_assert_held(&pk_fault_lock);
	for (unsigned int i = 0; i < WATCH_MAX; i++) {
		struct wpage *pg = &wpages[i];
		void *p;

		if (!pg->nw || pg == wstep.pg)
			continue;
		wpage_quiesce(pg);
		if (!pg->alias)
			continue;
		/* Without a snapshot the child copies the shared page. */
		p = mmap(NULL, psz, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			continue;
		pk_arch_copy_unchecked(p, pg->alias, psz);
		pg->snap = p;
	}
}

static void watch_fork_parent(void)
{
	for (unsigned int i = 0; i < WATCH_MAX; i++) {
		snap_free(&wpages[i]);
		__atomic_store_n(&wpages[i].busy, 0, __ATOMIC_RELEASE); /* P3 */
	}
	pk_fault_fork_release(0);
}

static void watch_fork_child(void)
{
	/* The parent's descriptor answers for the parent's mappings. */
	if (wmaps_fd >= 0) {
		int old = wmaps_fd;
		struct stat st;
		int mine = !fstat(old, &st) && st.st_dev == wmaps_dev &&
			   st.st_ino == wmaps_ino;

		wmaps_fd = -1;
		wmaps_open();
		if (mine)
			close(old);	/* after: the new one has another number */
	}
	for (unsigned int i = 0; i < WATCH_MAX; i++) {
		struct wpage *pg = &wpages[i];

		if (pg->nw && pg != wstep.pg) {
			/* Not over a mapping the program put there. */
			if (pg->alias && wpage_ours(pg))
				wpage_remap(pg, pg->prot, pg->snap);
			pg->steps = 0;
			pg->stepper = 0;
		}
		snap_free(pg);
		pg->busy = 0;
	}
	pk_fault_fork_release(1);
}

PK_ATFORK(watch, PK_RANK_FAULT, watch_fork_prepare, watch_fork_parent,
	  watch_fork_child);

/*
 * Handles
 * -------
 *
 * A handle is not the entry's address (an entry serves the next add as
 * soon as it is free, and a stale handle would then name the new watch):
 * it names the entry and the add that filled it, (gen << 5) | (idx << 1) | 1,
 * gen counting adds from 1 (2^59 of them never wrap). Odd, so no pointer
 * to anything of 2-byte alignment or more is one; a handle whose entry was
 * freed or filled again by a later add no longer matches its gen.
 */
#define HANDLE_IDX_BITS 4
_Static_assert(WATCH_MAX <= 1u << HANDLE_IDX_BITS, "idx fits in a handle");
static uint64_t watch_adds;	/* pk_fault_lock */

static struct pk_watch *handle_of(unsigned int idx, uint64_t gen)
{
	return (struct pk_watch *)(uintptr_t)(gen << (HANDLE_IDX_BITS + 1) |
					      idx << 1 | 1);
}

/* The entry a handle names, or -EINVAL if it cannot be a handle. */
static int handle_idx(const struct pk_watch *h, unsigned int *idx,
		      uint64_t *gen)
{
	uintptr_t v = (uintptr_t)h;

	if (!(v & 1) || !(v >> (HANDLE_IDX_BITS + 1)))
		return -EINVAL;
	*idx = (v >> 1) & ((1u << HANDLE_IDX_BITS) - 1);
	*gen = v >> (HANDLE_IDX_BITS + 1);
	return *idx < WATCH_MAX ? 0 : -EINVAL;
}

int pk_watch_add(void *addr, size_t len, unsigned int access, pk_watch_fn fn,
		 void *ctx, struct pk_watch **out)
{
	const char *mech = pk_getenv("PROBEKIT_WATCH");
	int force_page = mech && !strcmp(mech, "page");
	uintptr_t a = (uintptr_t)addr;
	struct pk_watch *w = NULL;
	struct pk_maps ms = PK_MAPS_INIT;
	struct pk_mapinfo mi;
	unsigned int idx;
	int err;

	if (!out || !addr || !fn || (len != 1 && len != 2 && len != 4 &&
				     len != 8) || (a & (len - 1)) ||
	    !(access & (PK_WATCH_READ | PK_WATCH_WRITE)) ||
	    (access & ~(PK_WATCH_READ | PK_WATCH_WRITE)))
		return -EINVAL;
	if (pk_fault_own_data(a, a + len))
		return -EBUSY;	/* its handler would trap on itself */
	/* The shadow copy reads it: mapped and readable, or refused. */
	err = pk_maps_open(&ms, 0);
	if (!err)
		err = pk_maps_find(&ms, a, &mi);
	pk_maps_close(&ms);
	if (err || !(mi.prot & PROT_READ))
		return -EINVAL;
	err = pk_fault_write_lock();
	if (err)
		return err;
	for (idx = 0; idx < WATCH_MAX; idx++)
		if (!watches[idx].fn) {
			w = &watches[idx];
			break;
		}
	if (!w) {
		err = -EBUSY;
		goto out;
	}
	w->addr = a;
	w->len = len;
	w->access = access;
	w->fn = fn;
	w->ctx = ctx;
	w->shadow = watch_read(a, len);
	err = pk_fault_client_join(&watch_client);
	if (!err && !force_page) {
		/*
		 * Published, its fields before it, before the first event can
		 * fire: pairs with R3 in watch_hit().
		 */
		__atomic_store_n(&w->active, 1, __ATOMIC_SEQ_CST);
		err = watch_open_all(w, idx);
		if (err) {
			/* W1 (pk_fault_wait_readers()). */
			__atomic_store_n(&w->active, 0, __ATOMIC_SEQ_CST);
			watch_close_all(w);
			pk_fault_wait_readers();
			pk_dbg("watch: %p+%zu: perf breakpoint: %s; page "
			       "protection instead", addr, len, strerror(-err));
			err = watch_errno(err);
			if (err == -ENOMEM)
				goto fail;
			err = 1;	/* fall back */
		}
	}
	if (err == 1 || (!err && force_page)) {
		err = watch_page_add(w);
		if (err) {
			if (w->pg)
				watch_page_remove(w);
			goto fail;
		}
	}
	if (err) {
fail:
		w->fn = NULL;
		w->pg = NULL;
		pk_fault_client_join(&watch_client);	/* if it failed */
		goto out;
	}
	w->gen = ++watch_adds;
	*out = handle_of(idx, w->gen);
out:
	pk_fault_write_unlock();
	return err;
}

int pk_watch_remove(struct pk_watch *h)
{
	struct pk_watch *w;
	unsigned int idx;
	uint64_t gen;
	int err = handle_idx(h, &idx, &gen);

	if (err)
		return err;
	err = pk_fault_write_lock();
	if (err)
		return err;
	w = &watches[idx];
	if (!w->fn || w->gen != gen) {
		err = -ENOENT;	/* removed (its entry may serve another) */
		goto out;
	}
	if (w->pg) {
		watch_page_remove(w);
	} else {
		/* W1 (pk_fault_wait_readers()). */
		__atomic_store_n(&w->active, 0, __ATOMIC_SEQ_CST);
		watch_close_all(w);
		pk_fault_wait_readers();
		w->fn = NULL;
	}
	/* Retries a hook install that failed earlier; its error is not ours. */
	pk_fault_client_join(&watch_client);
out:
	pk_fault_write_unlock();
	return err;
}
