// SPDX-License-Identifier: MIT
/* sweep.c - the thread sweep: a signal to every other thread, which moves itself out of changed sites or says whether it is still busy in changed slots. */

/*
 * What a sweep decides is in sweep.h. How it asks:
 *
 *   1. list the other threads (pk_tasks_list(): sorted, the sweeper left
 *      out), publish the request (cur_sweep, seq_cst) and tgkill each one;
 *   2. each handler finds its thread in the sorted tid list, moves it
 *      (move sweeps), and stores where it was and whether it is busy in its
 *      own state byte (release; the sweeper's acquire loads pair with it);
 *   3. the sweeper waits for every answer (threads that exited meanwhile
 *      are noticed by pk_tid_gone(): tgkill with signal 0 says ESRCH); a
 *      wait sweep asks the busy ones again, 1 ms later, until none is;
 *   4. unpublish: exchange cur_sweep to NULL, then wait until no handler is
 *      inside (sweep_readers), so the request's arrays may be freed. A
 *      handler increments sweep_readers before it loads cur_sweep (both
 *      seq_cst): either the sweeper's exchange comes first and the handler
 *      sees NULL, or the sweeper sees the count.
 *
 * A signal that arrives after its sweep is over finds cur_sweep NULL, or
 * a later sweep, whose question it answers from where the thread is now:
 * after that sweep was published, so a true answer.
 *
 * Locking: the callers serialise sweeps and pk_sweep_busy_code() (probe.c
 * holds probe_lock), which guards sweep_sig and writes of busy_code and
 * cur_sweep; the handler reads cur_sweep and busy_code without a lock, as
 * said beside them.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "arch/arch.h"
#include "internal.h"
#include "probe/probe.h"
#include "probe/sweep.h"
#include "sig/sig.h"

#define SWEEP_TIMEOUT_NS 10000000000LL

enum { ASKED, CLEAR, BUSY };	/* a thread's state in a sweep */

struct sweep {
	const struct pk_sweep_site *sites;	/* sorted by addr */
	size_t nsites;
	const uintptr_t *slots;			/* sorted */
	size_t nslots;
	const pid_t *tids;			/* sorted */
	uint8_t *state;				/* per tid: ASKED, CLEAR, BUSY */
	uintptr_t *ip;				/* per tid: where last seen */
	size_t ntids;
};

static struct sweep *cur_sweep;		/* atomic: steps 1 and 4 */
static unsigned long sweep_readers;	/* atomic: handlers inside cur_sweep */
static int sweep_sig;			/* 0 until installed; not read by
					   the handler */
/* Prepended by pk_sweep_busy_code(), release-published; never removed. */
static const struct pk_sweep_code *busy_code;
/* sweep_handler() reads or writes these (internal.h's PK_SIGNAL_DATA). */
PK_SIGNAL_DATA(cur_sweep);
PK_SIGNAL_DATA(sweep_readers);
PK_SIGNAL_DATA(busy_code);

__thread struct pk_sweep_self pk_sweep_self
	__attribute__((tls_model("initial-exec")));
/* busy_at() reads it in the handler. */
PK_SIGNAL_TLS(pk_sweep_self);

/*
 * fork(): the caller's lock (probe_lock) keeps sweeps out of fork, so a
 * child has no sweep in flight; a thread of the parent that was inside
 * sweep_handler() does not exist in the child, so its count goes.
 */
static void sweep_fork_child(void)
{
	__atomic_store_n(&sweep_readers, 0, __ATOMIC_RELAXED);
}

PK_ATFORK(sweep, PK_RANK_PROBE, NULL, NULL, sweep_fork_child);

void pk_sweep_busy_code(struct pk_sweep_code *c)
{
	c->next = busy_code;
	/* Pairs with the acquire load in busy_at(). */
	__atomic_store_n(&busy_code, c, __ATOMIC_RELEASE);
}

/* ------------------------------------------------------------- handler */

PK_NOPROBE static int in_slots(const struct sweep *sw, uintptr_t ip)
{
	size_t i = PK_LOWER_BOUND(sw->nslots, k,
				  sw->slots[k] + PK_TRAMP_SLOT_SIZE <= ip);

	return i < sw->nslots && sw->slots[i] <= ip;
}

PK_NOPROBE static int busy_at(const struct sweep *sw, uintptr_t ip)
{
	const struct pk_sweep_code *c;

	if (pk_sweep_self.depth) {
		/*
		 * In handlers: only those of a changed trampoline matter (its
		 * probes were unlinked, or it goes). Not yet known which: busy.
		 */
		const uintptr_t *cur = pk_sweep_self.slot;

		if (!cur || in_slots(sw, *cur))
			return 1;
	}
	if (pk_probe_in_noprobe(ip, 1))
		return 1;
	for (c = __atomic_load_n(&busy_code, __ATOMIC_ACQUIRE); c; c = c->next)
		if (c->lo <= ip && ip < c->hi)
			return 1;	/* in a stub, or on its way into a slot */
	return in_slots(sw, ip);
}

PK_NOPROBE static void move(const struct sweep *sw, ucontext_t *uc)
{
	uintptr_t ip = pk_arch_pc(uc);
	size_t i = PK_LOWER_BOUND(sw->nsites, k,
				  sw->sites[k].addr + sw->sites[k].len <= ip);
	const struct pk_sweep_site *s;
	size_t off;

	if (i == sw->nsites || sw->sites[i].addr >= ip)
		return;		/* not strictly inside a site */
	s = &sw->sites[i];
	off = ip - s->addr;
	if (!s->arming) {
		/* Between the NOPs and the jmp: where the jmp goes. */
		if (off == (size_t)s->len - PK_ARCH_JMP_LEN)
			pk_arch_set_pc(uc, s->slot + PK_TRAMP_SLOT_ENTRY);
		return;
	}
	for (unsigned int j = 1; j < s->map->n; j++)
		if (s->map->src[j] == off) {
			pk_arch_set_pc(uc, s->slot + PK_TRAMP_SLOT_COPY +
					       s->map->dst[j]);
			return;
		}
}

PK_NOPROBE static void sweep_handler(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	/* Nothing here calls libc, which a probe may be on (arch.h). */
	int *ep = pk_errno_ptr(), saved = *ep;
	const struct sweep *sw;
	pid_t tid;
	size_t i;

	(void)sig;
	(void)si;
	/* Pairs with the exchange in sweep_unpublish(). */
	__atomic_add_fetch(&sweep_readers, 1, __ATOMIC_SEQ_CST);
	sw = __atomic_load_n(&cur_sweep, __ATOMIC_SEQ_CST);
	if (!sw)
		goto out;
	tid = (pid_t)pk_gettid();
	i = PK_LOWER_BOUND(sw->ntids, k, sw->tids[k] < tid);
	if (i == sw->ntids || sw->tids[i] != tid)
		goto out;
	if (sw->nsites)
		move(sw, uc);
	sw->ip[i] = pk_arch_pc(uc);
	__atomic_store_n(&sw->state[i], busy_at(sw, sw->ip[i]) ? BUSY : CLEAR,
			 __ATOMIC_RELEASE);
out:
	__atomic_sub_fetch(&sweep_readers, 1, __ATOMIC_SEQ_CST);
	/* Not the program's: a wait this interrupted is restarted. */
	pk_sig_own_runs++;
	*ep = saved;
}

/* ------------------------------------------------------------- sweeper */

int pk_sweep_init(void)
{
	struct sigaction sa, old;
	const char *v = pk_getenv("PROBEKIT_PROBE_SIGNAL");
	int sig = v ? atoi(v) : SIGRTMAX - 2;

	if (sweep_sig)
		return 0;
	if (sig < SIGRTMIN || sig > SIGRTMAX) {
		pk_err("probe: PROBEKIT_PROBE_SIGNAL=%s is not a real-time signal",
		       v ? v : "");
		return -EINVAL;
	}
	if (sigaction(sig, NULL, &old))
		return -errno;
	if ((old.sa_flags & SA_SIGINFO) ? old.sa_sigaction != NULL
					: old.sa_handler != SIG_DFL) {
		pk_err("probe: signal %d already has a handler; pick a free one "
		       "with PROBEKIT_PROBE_SIGNAL", sig);
		return -EBUSY;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = sweep_handler;
	sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	if (sigaction(sig, &sa, NULL))
		return -errno;
	sweep_sig = sig;
	return 0;
}

/* ------------------------------------------------ threads that never answer */

/*
 * A thread whose real mask blocks the sweep signal (glibc's SIGEV_THREAD
 * timer and mq_notify helpers, AIO workers: they block every signal for
 * life, behind any interposer) never answers; each sweep used to wait its
 * whole 10 s for it and fail. Such a thread is judged from outside
 * instead, by a rule that proves what the handler would have found:
 *
 *   1. it is asleep in a system call (/proc/self/task/TID/syscall gives
 *      its user sp and pc), and not at a pc that is busy: in a changed
 *      slot, a busy-code stub, probekit's PK_NOPROBE code, or strictly
 *      inside a changed site;
 *   2. no 8-byte word of its stack, from that sp to the end of the
 *      mapping holding it, points into any of those: no frame of it
 *      returns into a slot or a site, and none is a probe handler's (the
 *      dispatcher, PK_NOPROBE, would be on the stack): so it runs no
 *      changed trampoline's handlers, which is what pk_sweep_self would
 *      have said;
 *   3. read again after that, it is still asleep in the same call at the
 *      same place, with no context switch since: it did not run while its
 *      stack was read, so what was read is its state.
 *
 * Then, as for an answer, it can never enter the changed code: its next
 * instruction is at that pc, and every return it makes goes to a place
 * outside. Reading its stack goes through /proc/self/mem, so a sanitizer
 * does not take another thread's frames for bad accesses. Not seen: frames
 * on another stack than the one its sp is in (a signal handler running on
 * an alternate stack, which it entered before blocking the signal); a
 * thread that blocks every signal from birth, as glibc's helpers do, has
 * none. A blocker that fails the rule (running, busy, not asleep) is
 * waited for as before; if it still blocks the sweep signal after
 * BLOCKED_GIVE_UP_NS the sweep fails early, -EBUSY, naming it.
 */
#define BLOCKED_GIVE_UP_NS 2000000000LL

PK_NOPROBE static int in_site(const struct sweep *sw, uintptr_t ip)
{
	size_t i = PK_LOWER_BOUND(sw->nsites, k,
				  sw->sites[k].addr + sw->sites[k].len <= ip);

	return i < sw->nsites && sw->sites[i].addr < ip;
}

/* Whether @w, a pc or a word of a stack, leads into what a sweep changes. */
static int word_busy(const struct sweep *sw, uintptr_t w)
{
	const struct pk_sweep_code *c;

	if (pk_probe_in_noprobe(w, 1) || in_slots(sw, w) || in_site(sw, w))
		return 1;
	for (c = __atomic_load_n(&busy_code, __ATOMIC_ACQUIRE); c; c = c->next)
		if (c->lo <= w && w < c->hi)
			return 1;
	return 0;
}

/* The mapping holding @addr, from /proc/self/maps: 0, or -1. */
static int mapping_of(uintptr_t addr, uintptr_t *lo, uintptr_t *hi)
{
	FILE *f = fopen("/proc/self/maps", "re");
	unsigned long a, b;
	int found = -1;
	char line[512];

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx", &a, &b) == 2 && a <= addr &&
		    addr < b) {
			*lo = a;
			*hi = b;
			found = 0;
			break;
		}
	}
	fclose(f);
	return found;
}

/* Whether any word of [@lo, @hi) is word_busy(); 1 too if unreadable. */
static int stack_busy(const struct sweep *sw, uintptr_t lo, uintptr_t hi)
{
	uint64_t buf[1024];
	int fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC), busy = 0;

	if (fd < 0)
		return 1;
	lo &= ~(uintptr_t)7;
	while (lo < hi && !busy) {
		size_t want = hi - lo < sizeof(buf) ? hi - lo : sizeof(buf);
		ssize_t got = pread(fd, buf, want, (off_t)lo);

		if (got <= 0) {
			busy = 1;
			break;
		}
		for (size_t k = 0; k < (size_t)got / 8 && !busy; k++)
			busy = word_busy(sw, (uintptr_t)buf[k]);
		lo += (uintptr_t)got;
	}
	close(fd);
	return busy;
}

/*
 * @tid has not answered: 1 if it really blocks the sweep signal and the
 * rule above shows it clear (*@ip: its pc); 0 if it does not block it or
 * cannot be judged now; -1 if it blocks it, for BLOCKED_GIVE_UP_NS since
 * *@first_seen (0 until seen blocking).
 */
static int judge_blocked(const struct sweep *sw, pid_t tid, uintptr_t *ip,
			 int64_t *first_seen, int64_t now)
{
	struct pk_sig_task t;
	uintptr_t lo, hi;

	if (pk_sig_task_look(tid, &t) ||
	    !(t.sigblk & (1UL << (sweep_sig - 1))))
		return 0;
	if (!*first_seen)
		*first_seen = now;
	if (t.nr >= 0 && (t.state == 'S' || t.state == 'D') &&
	    !word_busy(sw, t.pc) && mapping_of(t.sp, &lo, &hi) == 0 &&
	    !stack_busy(sw, t.sp, hi) && pk_sig_task_still(tid, &t)) {
		*ip = t.pc;
		return 1;
	}
	return now - *first_seen > BLOCKED_GIVE_UP_NS ? -1 : 0;
}

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void sweep_unpublish(void)
{
	(void)__atomic_exchange_n(&cur_sweep, NULL, __ATOMIC_SEQ_CST);
	/* Pairs with the increment in sweep_handler(). */
	while (__atomic_load_n(&sweep_readers, __ATOMIC_SEQ_CST))
		sched_yield();
}

/*
 * Signal every other thread and wait for each answer. With @until_clear,
 * ask again those found busy until each has been seen clear once. Return 0,
 * or -EBUSY on timeout, -ENOMEM.
 */
static int sweep(const struct pk_sweep_site *sites, size_t nsites,
		 const uintptr_t *slots, size_t nslots, int until_clear)
{
	struct sweep sw = { sites, nsites, slots, nslots, NULL, NULL, NULL, 0 };
	int64_t deadline = now_ns() + SWEEP_TIMEOUT_NS, *blocked_since;
	pid_t *tids, refused = 0;
	int err = pk_tasks_list(pk_gettid(), &tids, &sw.ntids);

	if (err)
		return err;
	if (!sw.ntids) {
		free(tids);
		return 0;
	}
	sw.tids = tids;
	sw.state = calloc(sw.ntids, 1);
	sw.ip = calloc(sw.ntids, sizeof(*sw.ip));
	blocked_since = calloc(sw.ntids, sizeof(*blocked_since));
	if (!sw.state || !sw.ip || !blocked_since) {
		free(sw.state);
		free(sw.ip);
		free(blocked_since);
		free(tids);
		return -ENOMEM;
	}
	/* Pairs with the seq_cst load in sweep_handler(). */
	__atomic_store_n(&cur_sweep, &sw, __ATOMIC_SEQ_CST);
	for (;;) {
		pid_t pid = getpid();
		size_t waiting, busy;

		/* Ask every thread not yet seen clear (all, the first time). */
		for (size_t i = 0; i < sw.ntids; i++)
			if (sw.state[i] != CLEAR) {
				__atomic_store_n(&sw.state[i], ASKED, __ATOMIC_RELEASE);
				if (syscall(SYS_tgkill, pid, sw.tids[i], sweep_sig))
					sw.state[i] = CLEAR;	/* gone */
			}
		/* Wait for every answer. */
		for (int64_t gone_check = now_ns() + 10000000;;) {
			waiting = busy = 0;
			for (size_t i = 0; i < sw.ntids; i++) {
				uint8_t st = __atomic_load_n(&sw.state[i],
							     __ATOMIC_ACQUIRE);

				waiting += st == ASKED;
				busy += st == BUSY;
			}
			if (!waiting || now_ns() > deadline || refused)
				break;
			if (now_ns() > gone_check) {
				/*
				 * Threads that exited never answer, nor do
				 * those that block the signal (judged from
				 * outside: judge_blocked()). Checked by time,
				 * not by sched_yield() calls: with many busy
				 * threads one yield can take a time slice
				 * each of theirs.
				 */
				for (size_t i = 0; i < sw.ntids && !refused; i++) {
					int j;

					if (__atomic_load_n(&sw.state[i], __ATOMIC_ACQUIRE) != ASKED)
						continue;
					if (pk_tid_gone(sw.tids[i])) {
						sw.state[i] = CLEAR;
						continue;
					}
					j = judge_blocked(&sw, sw.tids[i], &sw.ip[i],
							  &blocked_since[i], now_ns());
					if (j > 0)
						__atomic_store_n(&sw.state[i], CLEAR,
								 __ATOMIC_RELEASE);
					else if (j < 0)
						refused = sw.tids[i];
				}
				gone_check = now_ns() + 10000000;
			}
			sched_yield();
		}
		if (waiting) {
			err = -EBUSY;
			break;
		}
		if (!until_clear || !busy)
			break;
		if (now_ns() > deadline) {
			err = -EBUSY;
			break;
		}
		{
			struct timespec ts = { 0, 1000000 };

			nanosleep(&ts, NULL);
		}
	}
	sweep_unpublish();
	if (err && refused) {
		pk_warn("probe: thread %d blocks signal %d for real (SigBlk in "
			"/proc/self/task/%d/status) and is not provably clear of "
			"the changed code (running, or busy there): the sweep "
			"gave up after %lld ms (probekit(7), SIGNALS)",
			(int)refused, sweep_sig, (int)refused,
			BLOCKED_GIVE_UP_NS / 1000000);
	} else if (err) {
		size_t stuck = 0;

		for (size_t i = 0; i < sw.ntids; i++)
			if (sw.state[i] != CLEAR) {
				stuck++;
				pk_dbg("probe: thread %d %s at %#" PRIxPTR,
				       (int)sw.tids[i],
				       sw.state[i] == BUSY ? "busy" : "silent",
				       sw.ip[i]);
			}
		pk_warn("probe: %zu thread(s) did not answer signal %d (or stayed "
			"in a probe handler) for %lld ms", stuck, sweep_sig,
			SWEEP_TIMEOUT_NS / 1000000);
	}
	free(sw.state);
	free(sw.ip);
	free(blocked_since);
	free(tids);
	return err;
}

static int site_cmp(const void *a, const void *b)
{
	const struct pk_sweep_site *x = a, *y = b;

	return pk_probe_addr_order(x->addr, y->addr);
}

static int addr_cmp(const void *a, const void *b)
{
	return pk_probe_addr_order(*(const uintptr_t *)a, *(const uintptr_t *)b);
}

int pk_sweep_move(struct pk_sweep_site *sites, size_t n)
{
	if (n > 1)
		qsort(sites, n, sizeof(*sites), site_cmp);
	return sweep(sites, n, NULL, 0, 0);
}

int pk_sweep_wait(uintptr_t *slots, size_t n)
{
	if (n > 1)
		qsort(slots, n, sizeof(*slots), addr_cmp);
	return sweep(NULL, 0, slots, n, 1);
}
