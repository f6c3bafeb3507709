// SPDX-License-Identifier: MIT
/* interpose.c - libc's signal calls, seen through probekit: the program's handlers and masks of the signals probekit owns are virtual. */

/*
 * What this file is for: sig.c's design comment ("How the program's
 * handlers and masks are kept"). In short: libprobekit.so exports
 * sigaction, signal, sigprocmask, pthread_sigmask, ... under libc's names,
 * unversioned, so that they come before libc's in the lookup order of a
 * program linked with -lprobekit (and the agent, agent/interpose.c, has the
 * same names forward here, a preload's dependencies coming after libc).
 * While probekit owns a signal P (sig.c's installed[], mirrored in
 * owned_bits):
 *
 *   - a handler the program installs for P is recorded and chained
 *     (pk_signal_action()), and reading it back returns it;
 *   - the thread's real mask never blocks P: what the program asked for is
 *     kept per thread in vmask (initial-exec TLS, read in the signal path),
 *     and reading the mask back returns it; likewise the sa_mask of every
 *     handler never blocks P (strip[] keeps what was asked, for read-back);
 *   - an asynchronous P (si_code <= 0: its own raise/kill) arriving while
 *     the program has it virtually blocked is kept pending per thread and
 *     sent again to the thread (rt_tgsigqueueinfo, same si_code, pid and
 *     value where the kernel allows it) when the program unblocks it;
 *   - a new thread's vmask is its creator's (pthread_create).
 *
 * Before probekit owns a signal, everything passes through unchanged
 * except that vmask keeps following what the program asked for, so that
 * read-back is right from the moment probekit takes the signal. All of
 * them are owned from the moment the library loads: SIGTRAP and the sweep
 * signal here (resolve_all()), SIGSEGV, SIGBUS and SIGILL by fault.c's
 * constructor right after, so no thread can have blocked one really
 * through libc before probekit took it.
 *
 * The real functions are libc's (or a sanitizer's that comes after us):
 * dlsym(RTLD_NEXT) first, libc's own definition when that finds nothing,
 * as in a preloaded agent where libc precedes libprobekit. The library's
 * own calls use the real functions directly (pk_sig_real_*()).
 */

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <threads.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "arch/arch.h"
#include "internal.h"
#include "sig/sig.h"

/*
 * The agent's busy flag (agent/own.c), where the library is linked into
 * libprobekit-agent.so: the interposers' own libc calls on the program's
 * threads (sigfillset, the lock, the mask) are not the program's, and a
 * probe on them must not count them. Weak and hidden: NULL elsewhere.
 */
void pk_own_enter(void) __attribute__((weak, visibility("hidden")));
void pk_own_leave(void) __attribute__((weak, visibility("hidden")));
#define OWN_ENTER() do { if (pk_own_enter) pk_own_enter(); } while (0)
#define OWN_LEAVE() do { if (pk_own_leave) pk_own_leave(); } while (0)

#define PK_EXPORT __attribute__((visibility("default")))

/* The signals probekit may own, as bits of a sigset_t's first word. */
#define BIT(s) (1UL << ((s) - 1))
#define FAULT_SIGS (BIT(SIGSEGV) | BIT(SIGBUS) | BIT(SIGILL) | BIT(SIGTRAP))

/*
 * Bits of the signals probekit owns now (sig.c keeps those of FAULT_SIGS)
 * and of those it may own (vmask follows the program's wishes for these):
 * FAULT_SIGS and the probe layer's sweep signal (src/probe/sweep.c,
 * PROBEKIT_PROBE_SIGNAL or SIGRTMAX - 2), owned from load on: a thread that
 * cannot take it holds every probe registration for seconds.
 */
unsigned long pk_sig_owned_bits;	/* atomic */
static unsigned long ownable_bits = FAULT_SIGS;	/* set before main */
PK_SIGNAL_DATA(pk_sig_owned_bits);
#define OWNABLE (__atomic_load_n(&ownable_bits, __ATOMIC_RELAXED))

/* ---------------------------------------------------- per-thread state */

/* A deferred asynchronous signal: what it is sent again with. */
struct deferred {
	int code;
	int pid;
	int uid;
	union sigval value;
};

/*
 * vmask: which ownable signals the program has blocked in this thread;
 * pend: which of them arrived while blocked and wait (info in dinfo).
 * Written by this thread only, read by its signal handlers; pend is also
 * written by them (pk_sig_defer()), so its every change is one atomic
 * instruction (lock or/and): a handler's bit set between a plain load and
 * store would be lost.
 */
static __thread unsigned long vmask __attribute__((tls_model("initial-exec")));
static __thread unsigned long pend __attribute__((tls_model("initial-exec")));
static __thread struct deferred dinfo[4]
	__attribute__((tls_model("initial-exec")));
PK_SIGNAL_TLS(vmask);
PK_SIGNAL_TLS(pend);

/*
 * How many of the program's handlers (prog_runs) and of probekit's that
 * stand for none of the program's (pk_sig_own_runs: the sweep handler, a
 * deferral) ran in this thread: a wait that only the latter interrupted
 * is restarted (the waits' restart, below).
 */
static __thread unsigned long prog_runs
	__attribute__((tls_model("initial-exec")));
__thread unsigned long pk_sig_own_runs
	__attribute__((tls_model("initial-exec")));
PK_SIGNAL_TLS(prog_runs);
PK_SIGNAL_TLS(pk_sig_own_runs);
PK_SIGNAL_TLS(dinfo);

static PK_NOPROBE_INLINE int dslot(int sig)
{
	return sig == SIGSEGV ? 0 : sig == SIGBUS ? 1 : sig == SIGILL ? 2 : 3;
}

static PK_NOPROBE_INLINE unsigned long owned(void)
{
	return __atomic_load_n(&pk_sig_owned_bits, __ATOMIC_RELAXED);
}

static PK_NOPROBE_INLINE unsigned long word(const sigset_t *s)
{
	return ((const unsigned long *)s)[0];
}

static PK_NOPROBE_INLINE void set_word(sigset_t *s, unsigned long w)
{
	((unsigned long *)s)[0] = w;
}

PK_NOPROBE int pk_sig_vblocked(int sig)
{
	return (vmask & BIT(sig)) != 0;
}

PK_NOPROBE void pk_sig_defer(int sig, const siginfo_t *si)
{
	struct deferred *d = &dinfo[dslot(sig)];

	d->code = si->si_code;
	d->pid = si->si_pid;
	d->uid = si->si_uid;
	d->value = si->si_value;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	__atomic_fetch_or(&pend, BIT(sig), __ATOMIC_RELAXED);
	pk_sig_own_runs++;
}

/*
 * The process these memory and TLS belong to (set before main and in a
 * fork child). A vfork child, or any CLONE_VM child as posix_spawn's,
 * shares its parent's memory, vmask and pend included, with a pid of its
 * own: what it blocks before _exit or exec must not become its parent's
 * virtual mask (a SIGSEGV virtually blocked in the parent makes its next
 * fault take the default action). Such a child makes the real call only,
 * without the owned signals, and leaves vmask and pend alone. One system
 * call; raw, so that errno is untouched. A fork made past glibc's fork()
 * (_Fork, a raw clone) leaves proc_pid stale: the child then keeps its
 * virtual mask unchanged too, its owned signals still never blocked.
 */
static int proc_pid;		/* atomic */

static int vm_child(void)
{
	int pid = __atomic_load_n(&proc_pid, __ATOMIC_RELAXED);

	return pid && pk_sys4(SYS_getpid, 0, 0, 0, 0) != pid;
}

/*
 * A fork child has no pending signal of its parent's (the kernel clears
 * them): nor of the deferred ones, which the forking thread's copy of pend
 * would otherwise send again in the child at its next unblock.
 */
static void pend_fork_child(void)
{
	__atomic_store_n(&pend, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&proc_pid, (int)pk_sys4(SYS_getpid, 0, 0, 0, 0),
			 __ATOMIC_RELAXED);
}

PK_ATFORK(sig_pend, PK_RANK_SIG, NULL, NULL, pend_fork_child);

/* Send again, to this thread, every deferred signal @mask lets through. */
PK_NOPROBE static void flush_pending(unsigned long mask)
{
	/* Raw system calls only: errno is not touched. */
	for (;;) {
		unsigned long ready = pend & ~mask;
		siginfo_t si;
		long pid, tid;
		int sig;

		if (!ready)
			break;
		sig = __builtin_ctzl(ready) + 1;
		__atomic_fetch_and(&pend, ~BIT(sig), __ATOMIC_RELAXED);
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		/* Byte by byte through volatile: a memset call (as a
		 * sanitizer build makes of __builtin_memset) would leave
		 * pk_noprobe_text. */
		for (size_t b = 0; b < sizeof(si); b++)
			((volatile unsigned char *)&si)[b] = 0;
		si.si_signo = sig;
		si.si_code = dinfo[dslot(sig)].code;
		si.si_pid = dinfo[dslot(sig)].pid;
		si.si_uid = dinfo[dslot(sig)].uid;
		si.si_value = dinfo[dslot(sig)].value;
		/* The kernel allows SI_USER/SI_TKILL to self from the main
		 * thread only: elsewhere tgkill, which loses si_pid. */
		pid = pk_sys4(SYS_getpid, 0, 0, 0, 0);
		tid = pk_sys4(SYS_gettid, 0, 0, 0, 0);
		if (pk_sys4(SYS_rt_tgsigqueueinfo, pid, tid, sig, (long)&si) < 0)
			pk_sys4(SYS_tgkill, pid, tid, sig, 0);
	}
}

/* ---------------------------------------------------- the real functions */

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef int (*sigmask_fn)(int, const sigset_t *, sigset_t *);
typedef int (*sigsuspend_fn)(const sigset_t *);
typedef int (*ppoll_fn)(struct pollfd *, nfds_t, const struct timespec *,
			const sigset_t *);
typedef int (*pselect_fn)(int, fd_set *, fd_set *, fd_set *,
			  const struct timespec *, const sigset_t *);
typedef int (*epoll_pwait_fn)(int, struct epoll_event *, int, int,
			      const sigset_t *);
typedef int (*epoll_pwait2_fn)(int, struct epoll_event *, int,
			       const struct timespec *, const sigset_t *);
typedef int (*sigtimedwait_fn)(const sigset_t *, siginfo_t *,
			       const struct timespec *);
typedef int (*pthread_create_fn)(pthread_t *, const pthread_attr_t *,
				 void *(*)(void *), void *);
typedef void (*longjmp_fn)(struct __jmp_buf_tag *, int);
typedef int (*attr_sigmask_fn)(pthread_attr_t *, sigset_t *);
typedef int (*thrd_create_fn)(thrd_t *, thrd_start_t, void *);
typedef int (*ppoll_chk_fn)(struct pollfd *, nfds_t, const struct timespec *,
			    const sigset_t *, size_t);

enum {
	R_SIGACTION, R_SIGPROCMASK, R_PTHREAD_SIGMASK, R_SIGSUSPEND, R_PPOLL,
	R_PSELECT, R_EPOLL_PWAIT, R_EPOLL_PWAIT2, R_SIGTIMEDWAIT,
	R_PTHREAD_CREATE, R_LONGJMP, R_SIGLONGJMP, R__LONGJMP,
	R_LONGJMP_CHK, R_SIGSETJMP, R_ATTR_SETSIGMASK, R_ATTR_GETSIGMASK,
	R_THRD_CREATE, R_PPOLL_CHK, R_SETCONTEXT, R_SWAPCONTEXT,
	R_GETCONTEXT, R_MAKECONTEXT, R_N
};
static const char *const real_names[R_N] = {
	"sigaction", "sigprocmask", "pthread_sigmask", "sigsuspend", "ppoll",
	"pselect", "epoll_pwait", "epoll_pwait2", "sigtimedwait",
	"pthread_create", "longjmp", "siglongjmp", "_longjmp",
	"__longjmp_chk", "__sigsetjmp", "pthread_attr_setsigmask_np",
	"pthread_attr_getsigmask_np", "thrd_create", "__ppoll_chk",
	"setcontext", "swapcontext", "getcontext", "makecontext",
};
static void *real[R_N];		/* atomic; set once */
PK_SIGNAL_DATA(real);

static void *resolve(int i)
{
	void *p = __atomic_load_n(&real[i], __ATOMIC_ACQUIRE);
	Dl_info mine, found;

	if (p)
		return p;
	p = dlsym(RTLD_NEXT, real_names[i]);
	/* Not ourselves (a static link, or an object after us that is us). */
	if (p && dladdr((void *)resolve, &mine) && dladdr(p, &found) &&
	    found.dli_fbase == mine.dli_fbase)
		p = NULL;
	if (!p) {
		void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);

		if (libc) {
			p = dlsym(libc, real_names[i]);
			dlclose(libc);
		}
	}
	if (p)
		__atomic_store_n(&real[i], p, __ATOMIC_RELEASE);
	return p;
}

static void spawn_init(void);

/*
 * Resolved before main, so that the signal path never calls dlsym; and
 * SIGTRAP owned from here on. Not at the first commit: a thread's mask
 * that blocks SIGTRAP cannot be changed from another thread, so a thread
 * that blocked every signal before probekit took SIGTRAP would keep it
 * blocked, and any later commit would have to be refused (text.c). Owning
 * it costs nothing while nothing traps: the handler passes every SIGTRAP
 * on to the program's handler or the default action (sig.c).
 */
__attribute__((constructor(101))) static void resolve_all(void)
{
	const char *v = secure_getenv("PROBEKIT_PROBE_SIGNAL");
	int sweep = v ? atoi(v) : SIGRTMAX - 2;

	__atomic_store_n(&proc_pid, (int)pk_sys4(SYS_getpid, 0, 0, 0, 0),
			 __ATOMIC_RELAXED);
	for (int i = 0; i < R_N; i++)
		resolve(i);
	spawn_init();
	if (sweep >= SIGRTMIN && sweep <= SIGRTMAX && sweep <= 64) {
		__atomic_or_fetch(&ownable_bits, BIT(sweep), __ATOMIC_RELAXED);
		__atomic_or_fetch(&pk_sig_owned_bits, BIT(sweep),
				  __ATOMIC_RELAXED);
	}
	/*
	 * The handlers' masks lose both in one pass (pk_sig_pin_set()); the
	 * sweep signal out of this thread's mask here, out of sig_lock (its
	 * mask blocks it), and out of the handlers' too if pinning failed.
	 */
	pk_sig_pin(SIGTRAP);
	if (sweep >= SIGRTMIN && sweep <= SIGRTMAX && sweep <= 64)
		pk_sig_strip_masks(BIT(sweep));
}

#define REAL(i) (__atomic_load_n(&real[i], __ATOMIC_ACQUIRE) ?: resolve(i))

/*
 * Called through a pointer, so that the signal path has no direct call out
 * of pk_noprobe_text; it runs only before resolve_all() has.
 */
static void *(*const volatile resolve_late_p)(int) = resolve;

PK_NOPROBE int pk_sig_real_sigaction(int sig, const struct sigaction *act,
				     struct sigaction *old)
{
	sigaction_fn f = (sigaction_fn)__atomic_load_n(&real[R_SIGACTION],
						       __ATOMIC_ACQUIRE);

	if (!f)
		f = (sigaction_fn)resolve_late_p(R_SIGACTION);
	if (!f) {
		*pk_errno_ptr() = ENOSYS;	/* not __errno_location() */
		return -1;
	}
	return f(sig, act, old);
}

/* pthread_sigmask's convention: 0 or an error number; errno kept. */
PK_NOPROBE int pk_sig_real_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	sigmask_fn f = (sigmask_fn)__atomic_load_n(&real[R_PTHREAD_SIGMASK],
						   __ATOMIC_ACQUIRE);

	if (!f) {
		/* The 8-byte kernel mask, as glibc passes it. */
		long r = pk_sys4(SYS_rt_sigprocmask, how, (long)set, (long)old, 8);

		return r < 0 ? (int)-r : 0;
	}
	return f(how, set, old);
}

/* ---------------------------------------------------- masks */

/*
 * mask_set() - the mask calls' common part: vmask follows @how/@set for the
 * ownable signals, the real mask gets @set without the owned ones, and
 * *@old reads back what the program had set. Returns pthread_sigmask's
 * convention (0 or an error number).
 */
static int mask_set(int how, const sigset_t *set, sigset_t *old, int errno_style)
{
	unsigned long was = vmask, now = was, own = owned();
	int err, child = vm_child();
	sigset_t adj;

	if (set) {
		unsigned long w = word(set) & OWNABLE;

		switch (how) {
		case SIG_BLOCK:   now = was | w; break;
		case SIG_UNBLOCK: now = was & ~w; break;
		case SIG_SETMASK: now = w; break;
		default:          return EINVAL;
		}
		adj = *set;
		if (how != SIG_UNBLOCK)
			set_word(&adj, word(&adj) & ~own);
		/* Before the real call: a signal arriving in between sees
		 * the state the program is moving to. */
		if (!child)
			vmask = now;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
	}
	if (errno_style) {
		sigmask_fn f = (sigmask_fn)REAL(R_SIGPROCMASK);

		err = f(how, set ? &adj : NULL, old) ? errno : 0;
	} else {
		err = pk_sig_real_sigmask(how, set ? &adj : NULL, old);
	}
	if (err) {
		if (!child)
			vmask = was;
		return err;
	}
	if (old)
		set_word(old, (word(old) & ~own) | (was & own));
	if (!child && (pend & ~now))
		flush_pending(now);
	return 0;
}

PK_EXPORT int pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	return mask_set(how, set, old, 0);
}

PK_EXPORT int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	int err = mask_set(how, set, old, 1);

	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

/*
 * For the calls that wait with a temporary mask (sigsuspend, ppoll,
 * pselect, epoll_pwait): @in without the owned signals in *@out, vmask set
 * to @in's for the wait. Returns 1 when a deferred signal is let through
 * by @in: it has been delivered (its handler ran), and the call returns
 * EINTR without waiting, as the kernel's would.
 */
struct wait_mask {
	unsigned long was;
	int child;		/* vm_child(): vmask and pend left alone */
	sigset_t adj;
};

static int wait_enter(const sigset_t *in, struct wait_mask *w)
{
	unsigned long now = word(in) & OWNABLE;

	w->was = vmask;
	w->adj = *in;
	set_word(&w->adj, word(&w->adj) & ~owned());
	w->child = vm_child();
	if (w->child)
		return 0;
	vmask = now;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (pend & ~now) {
		/* Delivered under the wait's mask, as the kernel would. */
		flush_pending(now);
		vmask = w->was;
		__atomic_signal_fence(__ATOMIC_SEQ_CST);
		return 1;
	}
	return 0;
}

static void wait_leave(struct wait_mask *w)
{
	int saved = errno;

	if (w->child)
		return;
	vmask = w->was;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (pend & ~w->was)
		flush_pending(w->was);
	errno = saved;
}

/*
 * The waits below return EINTR when any handler ran, the kernel never
 * restarting them whatever SA_RESTART says; probekit's sweep signal (and
 * a program's signal probekit deferred, which the kernel would have left
 * pending) would make that a spurious EINTR the program never asked for.
 * So each is restarted when only probekit's handlers ran during it:
 * prog_runs counts the program's handlers (prog_enter(), which every one
 * of them goes through: wrap_handler(), sig.c's call_prev()),
 * pk_sig_own_runs probekit's (the sweep handler, pk_sig_defer()). A
 * restart waits only what is left of the timeout (CLOCK_MONOTONIC, as
 * the kernel measures it). Not seen: a handler of the program's that
 * bypassed sigaction() (installed by a raw system call) and ran in the
 * same wait as a sweep: that wait is restarted too.
 */
struct restart {
	unsigned long prog, own;
	int timed;
	struct timespec deadline;
};

static void rs_start(struct restart *rs, const struct timespec *t)
{
	rs->prog = __atomic_load_n(&prog_runs, __ATOMIC_RELAXED);
	rs->own = __atomic_load_n(&pk_sig_own_runs, __ATOMIC_RELAXED);
	rs->timed = t != NULL;
	if (t) {
		clock_gettime(CLOCK_MONOTONIC, &rs->deadline);
		rs->deadline.tv_sec += t->tv_sec;
		rs->deadline.tv_nsec += t->tv_nsec;
		while (rs->deadline.tv_nsec >= 1000000000) {
			rs->deadline.tv_nsec -= 1000000000;
			rs->deadline.tv_sec++;
		}
	}
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
}

/* @r -1 with EINTR that only probekit's handlers caused: wait again. */
static int rs_again(int r, struct restart *rs)
{
	unsigned long own;

	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (r >= 0 || errno != EINTR ||
	    __atomic_load_n(&prog_runs, __ATOMIC_RELAXED) != rs->prog)
		return 0;
	own = __atomic_load_n(&pk_sig_own_runs, __ATOMIC_RELAXED);
	if (own == rs->own)
		return 0;
	rs->own = own;
	return 1;
}

/* What is left of the timeout in *@left (zero once past). */
static const struct timespec *rs_left(const struct restart *rs,
				      struct timespec *left)
{
	struct timespec now;
	long long ns;

	if (!rs->timed)
		return NULL;
	clock_gettime(CLOCK_MONOTONIC, &now);
	ns = (long long)(rs->deadline.tv_sec - now.tv_sec) * 1000000000 +
	     (rs->deadline.tv_nsec - now.tv_nsec);
	if (ns < 0)
		ns = 0;
	left->tv_sec = ns / 1000000000;
	left->tv_nsec = ns % 1000000000;
	return left;
}

PK_EXPORT int sigsuspend(const sigset_t *mask)
{
	struct wait_mask w;
	struct restart rs;
	int r;

	if (wait_enter(mask, &w)) {
		errno = EINTR;
		return -1;
	}
	rs_start(&rs, NULL);
	do
		r = ((sigsuspend_fn)REAL(R_SIGSUSPEND))(&w.adj);
	while (rs_again(r, &rs));
	wait_leave(&w);
	return r;
}

PK_EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *t,
		    const sigset_t *mask)
{
	struct timespec left;
	struct wait_mask w;
	struct restart rs;
	int r, masked = mask != NULL;

	if (masked && wait_enter(mask, &w)) {
		errno = EINTR;
		return -1;
	}
	rs_start(&rs, t);
	do
		r = ((ppoll_fn)REAL(R_PPOLL))(fds, n, t,
					      masked ? &w.adj : NULL);
	while (rs_again(r, &rs) && ((t = rs_left(&rs, &left)), 1));
	if (masked)
		wait_leave(&w);
	return r;
}

/* _FORTIFY_SOURCE's ppoll: glibc's calls its ppoll internally, past ours. */
PK_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t n,
			  const struct timespec *t, const sigset_t *mask,
			  size_t fdslen)
{
	ppoll_chk_fn f = (ppoll_chk_fn)REAL(R_PPOLL_CHK);

	if (fdslen / sizeof(*fds) < n && f)
		return f(fds, n, t, mask, fdslen);	/* __chk_fail() */
	return ppoll(fds, n, t, mask);
}

/*
 * pselect: the fd sets are the call's result, so a restart waits on a
 * copy of what the program passed: (n + 7) / 8 bytes of each, which may
 * be more than an fd_set (n past FD_SETSIZE, sets the program allocated):
 * on the stack up to an fd_set each, allocated beyond. Without the memory
 * for the copies a spurious EINTR is returned rather than a wrong wait.
 */
PK_EXPORT int pselect(int n, fd_set *r, fd_set *wr, fd_set *e,
		      const struct timespec *t, const sigset_t *mask)
{
	fd_set small[3];
	fd_set *const sets[3] = { r, wr, e };
	size_t len = n > 0 ? ((size_t)n + 7) / 8 : 0;
	unsigned char *in = (unsigned char *)small;
	struct timespec left;
	struct wait_mask w;
	struct restart rs;
	int ret, masked = mask != NULL, copies = 1;

	if (len > sizeof(fd_set)) {
		in = malloc(3 * len);
		copies = in != NULL;
	}
	if (masked && wait_enter(mask, &w)) {
		if (in != (unsigned char *)small)
			free(in);
		errno = EINTR;
		return -1;
	}
	for (int i = 0; i < 3 && copies; i++)
		if (sets[i])
			memcpy(in + i * len, sets[i], len);
	rs_start(&rs, t);
	for (;;) {
		ret = ((pselect_fn)REAL(R_PSELECT))(n, r, wr, e, t,
						    masked ? &w.adj : NULL);
		if (!copies || !rs_again(ret, &rs))
			break;
		t = rs_left(&rs, &left);
		for (int i = 0; i < 3; i++)
			if (sets[i])
				memcpy(sets[i], in + i * len, len);
	}
	if (masked)
		wait_leave(&w);
	if (in != (unsigned char *)small) {
		int saved = errno;

		free(in);
		errno = saved;
	}
	return ret;
}

PK_EXPORT int epoll_pwait(int fd, struct epoll_event *ev, int max, int tmo,
			  const sigset_t *mask)
{
	struct timespec t = { tmo / 1000, (tmo % 1000) * 1000000L };
	struct timespec left = { 0, 0 };
	struct wait_mask w;
	struct restart rs;
	int r, masked = mask != NULL;

	if (masked && wait_enter(mask, &w)) {
		errno = EINTR;
		return -1;
	}
	rs_start(&rs, tmo >= 0 ? &t : NULL);
	for (;;) {
		r = ((epoll_pwait_fn)REAL(R_EPOLL_PWAIT))(fd, ev, max, tmo,
							  masked ? &w.adj :
								   NULL);
		if (!rs_again(r, &rs))
			break;
		if (tmo > 0) {
			/* Rounded up: never a shorter wait than asked. */
			rs_left(&rs, &left);
			tmo = (int)(left.tv_sec * 1000 +
				    (left.tv_nsec + 999999) / 1000000);
		}
	}
	if (masked)
		wait_leave(&w);
	return r;
}

PK_EXPORT int epoll_pwait2(int fd, struct epoll_event *ev, int max,
			   const struct timespec *t, const sigset_t *mask)
{
	epoll_pwait2_fn f = (epoll_pwait2_fn)REAL(R_EPOLL_PWAIT2);
	struct timespec left;
	struct wait_mask w;
	struct restart rs;
	int r, masked = mask != NULL;

	if (!f) {
		errno = ENOSYS;
		return -1;
	}
	if (masked && wait_enter(mask, &w)) {
		errno = EINTR;
		return -1;
	}
	rs_start(&rs, t);
	do
		r = f(fd, ev, max, t, masked ? &w.adj : NULL);
	while (rs_again(r, &rs) && ((t = rs_left(&rs, &left)), 1));
	if (masked)
		wait_leave(&w);
	return r;
}

/*
 * sigwait and friends: an owned signal the program waits for is never
 * really blocked, so it reaches probekit's handler, which defers it (the
 * program has it blocked, as sigwait requires) and interrupts the wait:
 * take it from the deferred ones first, and again after EINTR. The set
 * the kernel waits on never holds an owned signal: it would take
 * probekit's sweep signal or trap from under its handler.
 */
static int take_deferred(const sigset_t *set, siginfo_t *info)
{
	unsigned long ready = pend & word(set) & OWNABLE;
	int sig;

	if (!ready || vm_child())	/* the parent's deferred ones */
		return 0;
	sig = __builtin_ctzl(ready) + 1;
	__atomic_fetch_and(&pend, ~BIT(sig), __ATOMIC_RELAXED);
	if (info) {
		memset(info, 0, sizeof(*info));
		info->si_signo = sig;
		info->si_code = dinfo[dslot(sig)].code;
		info->si_pid = dinfo[dslot(sig)].pid;
		info->si_uid = dinfo[dslot(sig)].uid;
		info->si_value = dinfo[dslot(sig)].value;
	}
	return sig;
}

PK_EXPORT int sigtimedwait(const sigset_t *set, siginfo_t *info,
			   const struct timespec *t)
{
	int r, sig = take_deferred(set, info);
	struct timespec left;
	struct restart rs;
	sigset_t adj;

	if (sig)
		return sig;
	/* Never the owned ones: the kernel would hand the wait probekit's
	 * own signals (a sweep, a trap); the program's own come deferred. */
	adj = *set;
	set_word(&adj, word(&adj) & ~owned());
	rs_start(&rs, t);
	for (;;) {
		r = ((sigtimedwait_fn)REAL(R_SIGTIMEDWAIT))(&adj, info, t);
		if (r < 0 && errno == EINTR && (sig = take_deferred(set, info)))
			return sig;
		if (!rs_again(r, &rs))
			return r;
		t = rs_left(&rs, &left);
	}
}

PK_EXPORT int sigwaitinfo(const sigset_t *set, siginfo_t *info)
{
	return sigtimedwait(set, info, NULL);
}

PK_EXPORT int sigwait(const sigset_t *set, int *sig)
{
	int r;

	do
		r = sigtimedwait(set, NULL, NULL);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return errno;
	*sig = r;
	return 0;
}

/* ---------------------------------------------------- handlers */

/* Ownable signals each handler's sa_mask asked for and did not get. */
static unsigned long strip[NSIG];	/* atomic */
/*
 * Ownable signals no handler's sa_mask has blocked since they were last
 * taken out of all of them (pk_sig_strip_masks()): a handler installed
 * through sigaction() while the signal was not owned clears its bit.
 */
static unsigned long stripped;		/* atomic */

/*
 * The program's handlers of the signals probekit does not own, wrapped
 * (as Android's libsigchain does): the kernel has wrap_handler(), which
 * runs the program's handler with the program's view of probekit's signals
 * as the kernel would make it (its sa_mask blocked, virtually, for the
 * call: prog_enter()) and puts the mask back when it returns (prog_leave():
 * the kernel restores the real one at sigreturn, but vmask is ours). Two
 * copies and an index, as sig.c's prev[]: the handler reads one whole
 * while sigaction() writes the other, writers serialised by pact_lock
 * (taken with every signal blocked: sigaction is async-signal-safe).
 * Probekit's own signals (FAULT_SIGS and the sweep signal) are not
 * wrapped: sig.c's call_prev() does the same for them.
 */
struct pact {
	void *fn;		/* the program's sa_handler / sa_sigaction */
	int flags;		/* its sa_flags (SA_SIGINFO: how to call it) */
	unsigned long mask;	/* the ownable signals of its sa_mask */
};

static struct pact pacts[NSIG][2];
static unsigned int pact_idx[NSIG];	/* atomic */
static int pact_lock;			/* atomic; a spin lock */
PK_SIGNAL_DATA(pacts);
PK_SIGNAL_DATA(pact_idx);

/* The ownable signals each handler's sa_mask asked for (call_prev()). */
static unsigned long asked[NSIG];	/* atomic */
PK_SIGNAL_DATA(asked);

static PK_NOPROBE_INLINE unsigned long prog_enter(unsigned long add,
						  ucontext_t *uc)
{
	unsigned long was = vmask, own = owned();

	/* What the kernel would have saved: the program's view of the mask. */
	if (uc)
		set_word(&uc->uc_sigmask,
			 (word(&uc->uc_sigmask) & ~own) | (was & own));
	vmask = was | (add & OWNABLE);
	prog_runs++;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	return was;
}

static PK_NOPROBE_INLINE void prog_leave(unsigned long was, ucontext_t *uc)
{
	unsigned long now = was, own = owned();

	/* A handler may edit uc_sigmask: the mask its sigreturn sets. */
	if (uc) {
		now = (was & ~own) | (word(&uc->uc_sigmask) & own);
		set_word(&uc->uc_sigmask, word(&uc->uc_sigmask) & ~own);
	}
	vmask = now;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (pend & ~now)
		flush_pending(now);
}

PK_NOPROBE unsigned long pk_sig_prog_enter(int sig, int flags,
					   const sigset_t *sa_mask, void *ctx)
{
	unsigned long add = word(sa_mask);

	if (sig > 0 && sig < NSIG)
		add |= __atomic_load_n(&asked[sig], __ATOMIC_RELAXED);
	if (!(flags & SA_NODEFER) && sig > 0 && sig <= 64)
		add |= BIT(sig);
	return prog_enter(add, ctx);
}

PK_NOPROBE void pk_sig_prog_leave(unsigned long was, void *ctx)
{
	prog_leave(was, ctx);
}

PK_NOPROBE static void wrap_handler(int sig, siginfo_t *si, void *ctx)
{
	unsigned int idx;
	unsigned long was;
	void *fn;
	int flags;

	if (sig <= 0 || sig >= NSIG)
		return;
	idx = __atomic_load_n(&pact_idx[sig], __ATOMIC_ACQUIRE);
	/* Members, not a struct copy (a memcpy call at -O0). */
	fn = pacts[sig][idx & 1].fn;
	flags = pacts[sig][idx & 1].flags;
	was = prog_enter(pacts[sig][idx & 1].mask, ctx);
	if (fn && fn != (void *)SIG_IGN && fn != (void *)SIG_DFL) {
		if (flags & SA_SIGINFO)
			((void (*)(int, siginfo_t *, void *))fn)(sig, si, ctx);
		else
			((void (*)(int))fn)(sig);
	}
	prog_leave(was, ctx);
}

/*
 * Every asynchronous signal blocked (a handler calling sigaction() while
 * its thread holds pact_lock would spin forever), but never the
 * synchronous ones probekit owns: libc's sigaction, called with the lock
 * held, may carry an int3 probe, which a really blocked SIGTRAP makes
 * fatal (as sig.c's sig_lock_take()).
 */
static void pact_take(sigset_t *old)
{
	sigset_t all;

	OWN_ENTER();
	sigfillset(&all);
	set_word(&all, word(&all) & ~(FAULT_SIGS & owned()));
	pk_sig_real_sigmask(SIG_BLOCK, &all, old);
	while (__atomic_exchange_n(&pact_lock, 1, __ATOMIC_ACQUIRE))
		sched_yield();
	OWN_LEAVE();
}

static void pact_drop(sigset_t *old)
{
	OWN_ENTER();
	__atomic_store_n(&pact_lock, 0, __ATOMIC_RELEASE);
	pk_sig_real_sigmask(SIG_SETMASK, old, NULL);
	OWN_LEAVE();
}

/*
 * SIG_IGN and SIG_DFL are values of the handler union whatever the flags
 * say, as the kernel compares them: SA_SIGINFO with SIG_IGN ignores.
 */
static int is_handler(const struct sigaction *sa)
{
	return sa->sa_handler != SIG_DFL && sa->sa_handler != SIG_IGN;
}

/*
 * @old as the program set it, if the kernel has the wrapper there, or
 * SIG_DFL that the kernel put in its place (SA_RESETHAND: the flags kept,
 * the SA_SIGINFO among them ours, not the program's).
 */
static void pact_read_back(struct sigaction *old, const struct pact *p)
{
	if (p->fn && (p->flags & SA_RESETHAND) && old->sa_handler == SIG_DFL &&
	    (old->sa_flags & SA_RESETHAND)) {
		old->sa_flags = (old->sa_flags & ~SA_SIGINFO) |
				(p->flags & SA_SIGINFO);
		return;
	}
	if (!(old->sa_flags & SA_SIGINFO) || old->sa_sigaction != wrap_handler)
		return;
	/* The kernel's flags (it may have dropped some: SA_UNSUPPORTED's
	 * protocol), but SA_SIGINFO as the program set it. */
	old->sa_flags = (old->sa_flags & ~SA_SIGINFO) | (p->flags & SA_SIGINFO);
	if (p->flags & SA_SIGINFO)
		old->sa_sigaction = (void (*)(int, siginfo_t *, void *))p->fn;
	else
		old->sa_handler = (sighandler_t)p->fn;
}

/* sigaction() for a signal probekit does not own: its handler wrapped. */
static int wrapped_action(int sig, const struct sigaction *act,
			  struct sigaction *old, unsigned long ask)
{
	struct sigaction a;
	struct pact cur;
	unsigned int idx;
	sigset_t omask;
	int err;

	pact_take(&omask);
	idx = pact_idx[sig];
	cur = pacts[sig][idx & 1];
	if (act && is_handler(act)) {
		struct pact *n = &pacts[sig][(idx + 1) & 1];

		n->fn = (act->sa_flags & SA_SIGINFO) ? (void *)act->sa_sigaction
						     : (void *)act->sa_handler;
		n->flags = act->sa_flags;
		n->mask = ask;
		__atomic_store_n(&pact_idx[sig], idx + 1, __ATOMIC_RELEASE);
		a = *act;
		a.sa_sigaction = wrap_handler;
		a.sa_flags |= SA_SIGINFO;
		act = &a;
	} else if (act) {
		/* SIG_IGN or SIG_DFL, passed through: no wrapped handler. */
		struct pact *n = &pacts[sig][(idx + 1) & 1];

		n->fn = NULL;
		n->flags = act->sa_flags;
		n->mask = ask;
		__atomic_store_n(&pact_idx[sig], idx + 1, __ATOMIC_RELEASE);
	}
	err = pk_sig_real_sigaction(sig, act, old) ? -errno : 0;
	if (err && act)
		__atomic_store_n(&pact_idx[sig], idx, __ATOMIC_RELEASE);
	pact_drop(&omask);
	if (!err && old)
		pact_read_back(old, &cur);
	return err;
}

PK_EXPORT int sigaction(int sig, const struct sigaction *act,
			struct sigaction *old)
{
	unsigned long was = 0, own = owned(), ask = 0;
	int ok_sig = sig > 0 && sig < NSIG;
	struct sigaction a;
	int err;

	if (ok_sig)
		was = __atomic_load_n(&strip[sig], __ATOMIC_RELAXED);
	if (act) {
		unsigned long w = word(&act->sa_mask);

		ask = w & OWNABLE;
		a = *act;
		set_word(&a.sa_mask, w & ~own);
		if (w & OWNABLE & ~own)
			__atomic_and_fetch(&stripped, ~(w & OWNABLE & ~own),
					   __ATOMIC_RELAXED);
		if (ok_sig)
			__atomic_store_n(&strip[sig], w & own,
					 __ATOMIC_RELAXED);
		act = &a;
	}
	if (ok_sig && (FAULT_SIGS & BIT(sig)))
		err = pk_signal_action(sig, act, old);
	else if (ok_sig && sig <= 64 && !(OWNABLE & BIT(sig)) &&
		 sig != SIGKILL && sig != SIGSTOP)
		err = wrapped_action(sig, act, old, ask);
	else
		err = pk_sig_real_sigaction(sig, act, old) ? -errno : 0;
	if (err) {
		if (act && ok_sig)
			__atomic_store_n(&strip[sig], was, __ATOMIC_RELAXED);
		errno = -err;
		return -1;
	}
	if (act && ok_sig)
		__atomic_store_n(&asked[sig], ask, __ATOMIC_RELAXED);
	if (old)
		set_word(&old->sa_mask, word(&old->sa_mask) | was);
	return 0;
}

/*
 * pk_sig_strip_masks() - the signals of @bits have just become owned: take
 * them out of every handler's sa_mask (remembered in strip[] for
 * read-back) and out of this thread's real mask (vmask keeps them). One
 * pass over the handlers for all of them, none for those no handler has
 * blocked since they were last stripped. Called by sig.c under sig_lock,
 * and by resolve_all() before any other thread of ours can be.
 * pk_sig_strip_handlers() is its pass over the handlers alone.
 */
void pk_sig_strip_handlers(unsigned long bits)
{
	unsigned long todo = bits & ~__atomic_load_n(&stripped,
						     __ATOMIC_RELAXED);

	for (int s = 1; s < NSIG && todo; s++) {
		struct sigaction sa;
		unsigned long w;

		if (s == SIGKILL || s == SIGSTOP ||
		    pk_sig_real_sigaction(s, NULL, &sa) ||
		    !(w = word(&sa.sa_mask) & todo) || !is_handler(&sa))
			continue;
		set_word(&sa.sa_mask, word(&sa.sa_mask) & ~w);
		if (pk_sig_real_sigaction(s, &sa, NULL) == 0)
			__atomic_or_fetch(&strip[s], w, __ATOMIC_RELAXED);
	}
	__atomic_or_fetch(&stripped, todo, __ATOMIC_RELAXED);
}

void pk_sig_strip_masks(unsigned long bits)
{
	sigset_t cur, one;

	pk_sig_strip_handlers(bits);
	if (pk_sig_real_sigmask(SIG_BLOCK, NULL, &cur) == 0 &&
	    (word(&cur) & bits)) {
		/* Blocked behind our back (a raw syscall): now virtual. */
		unsigned long w = word(&cur) & bits;

		vmask |= w;
		sigemptyset(&one);
		set_word(&one, w);
		pk_sig_real_sigmask(SIG_UNBLOCK, &one, NULL);
	}
}

static sighandler_t set_handler(int sig, sighandler_t h, int flags,
				int mask_self)
{
	struct sigaction sa, old;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = h;
	sa.sa_flags = flags;
	sigemptyset(&sa.sa_mask);
	if (mask_self && sig > 0 && sig < NSIG)
		sigaddset(&sa.sa_mask, sig);
	if (sigaction(sig, &sa, &old))
		return SIG_ERR;
	return old.sa_handler;
}

/*
 * The signal() family, through sigaction() above for every signal (so
 * that the handler is wrapped), with libc's checks and what
 * siginterrupt() asked kept here (intr_bits): libc's signal() would
 * install its handler through its internal sigaction, past the wrapper,
 * and libc's siginterrupt() state is not readable from outside.
 */
static unsigned long intr_bits;		/* atomic */

static sighandler_t signal_via(int sig, sighandler_t h, int sysv)
{
	if (h == SIG_ERR || sig < 1 || sig >= NSIG) {
		errno = EINVAL;
		return SIG_ERR;
	}
	if (sysv)
		return set_handler(sig, h, SA_RESETHAND | SA_NODEFER, 0);
	/* glibc's signal() is BSD's: SA_RESTART unless siginterrupt() said
	 * otherwise, the signal blocked in its handler. */
	return set_handler(sig, h,
			   (__atomic_load_n(&intr_bits, __ATOMIC_RELAXED) &
			    BIT(sig)) ? 0 : SA_RESTART, 1);
}

PK_EXPORT sighandler_t signal(int sig, sighandler_t h)
{
	return signal_via(sig, h, 0);
}

PK_EXPORT sighandler_t bsd_signal(int sig, sighandler_t h)
{
	return signal_via(sig, h, 0);
}

PK_EXPORT sighandler_t sysv_signal(int sig, sighandler_t h)
{
	return signal_via(sig, h, 1);
}

PK_EXPORT sighandler_t __sysv_signal(int sig, sighandler_t h)
{
	return sysv_signal(sig, h);
}

PK_EXPORT int siginterrupt(int sig, int flag)
{
	struct sigaction sa;

	if (sig < 1 || sig >= NSIG || sig > 64) {
		errno = EINVAL;
		return -1;
	}
	if (sigaction(sig, NULL, &sa))
		return -1;
	if (flag) {
		__atomic_or_fetch(&intr_bits, BIT(sig), __ATOMIC_RELAXED);
		sa.sa_flags &= ~SA_RESTART;
	} else {
		__atomic_and_fetch(&intr_bits, ~BIT(sig), __ATOMIC_RELAXED);
		sa.sa_flags |= SA_RESTART;
	}
	return sigaction(sig, &sa, NULL);
}

static int mask_one(int how, int sig)
{
	sigset_t s;

	sigemptyset(&s);
	if (sigaddset(&s, sig))
		return -1;
	return sigprocmask(how, &s, NULL);
}

PK_EXPORT int sighold(int sig)
{
	return mask_one(SIG_BLOCK, sig);
}

PK_EXPORT int sigrelse(int sig)
{
	return mask_one(SIG_UNBLOCK, sig);
}

/*
 * The BSD mask calls: glibc's call its sigprocmask internally, past ours,
 * so an owned signal would be really blocked. Their masks are the first
 * 32 signals.
 */
static int bsd_mask(int how, int mask)
{
	sigset_t s, old;

	sigemptyset(&s);
	set_word(&s, (unsigned int)mask);
	if (sigprocmask(how, &s, &old))
		return -1;
	return (int)(unsigned int)word(&old);
}

PK_EXPORT int sigblock(int mask)
{
	return bsd_mask(SIG_BLOCK, mask);
}

PK_EXPORT int sigsetmask(int mask)
{
	return bsd_mask(SIG_SETMASK, mask);
}

/* sigpause(): BSD's takes a mask, XPG's (__xpg_sigpause) a signal. */
PK_EXPORT int __sigpause(int sig_or_mask, int is_sig)
{
	sigset_t s;

	if (is_sig) {
		if (sigprocmask(SIG_BLOCK, NULL, &s) ||
		    sigdelset(&s, sig_or_mask))
			return -1;
	} else {
		sigemptyset(&s);
		set_word(&s, (unsigned int)sig_or_mask);
	}
	return sigsuspend(&s);
}

PK_EXPORT int __xpg_sigpause(int sig)
{
	return __sigpause(sig, 1);
}

/*
 * <signal.h> names XPG's sigpause() (asm label __xpg_sigpause); the symbol
 * sigpause is BSD's. (The line after next only tells scripts/check-abi.sh
 * that sigpause is exported on purpose; it redeclares XPG's.)
 */
PK_EXPORT int pk_bsd_sigpause(int mask) __asm__("sigpause");
PK_EXPORT int sigpause(int sig);
int pk_bsd_sigpause(int mask)
{
	return __sigpause(mask, 0);
}

PK_EXPORT int sigignore(int sig)
{
	return set_handler(sig, SIG_IGN, 0, 0) == SIG_ERR ? -1 : 0;
}

PK_EXPORT sighandler_t sigset(int sig, sighandler_t h)
{
	sigset_t cur;
	sighandler_t prev;
	int held;

	if (sigprocmask(SIG_BLOCK, NULL, &cur))
		return SIG_ERR;
	held = sigismember(&cur, sig) == 1;
	if (h == SIG_HOLD) {
		struct sigaction old;

		if (sigaction(sig, NULL, &old) || mask_one(SIG_BLOCK, sig))
			return SIG_ERR;
		return held ? SIG_HOLD : old.sa_handler;
	}
	prev = set_handler(sig, h, 0, 0);
	if (prev == SIG_ERR || mask_one(SIG_UNBLOCK, sig))
		return SIG_ERR;
	return held ? SIG_HOLD : prev;
}

/* ---------------------------------------------------- threads */

struct start {
	void *(*fn)(void *);
	void *arg;
	unsigned long vmask;
};

static void *thread_start(void *p)
{
	struct start s = *(struct start *)p;

	free(p);
	vmask = s.vmask;
	return s.fn(s.arg);
}

/*
 * pthread_attr_setsigmask_np() (glibc 2.32+): the mask a new thread starts
 * with, set by glibc before the thread runs any code of the program's. The
 * owned signals are taken out of it, as out of every mask; what the
 * program asked for them is kept in the sigset_t's words 1 and 2, which
 * glibc copies whole into the attribute but never gives the kernel (its
 * 64 signals are word 0): word 1 the asked bits, word 2 the same xor
 * ATTR_MAGIC, so that a mask set behind our back is not misread.
 * pthread_attr_getsigmask_np() reads it back as set, pthread_create()
 * gives the thread that virtual mask.
 */
#define ATTR_MAGIC 0x706b5f7369676d61UL	/* "pk_sigma" */

PK_EXPORT int pthread_attr_setsigmask_np(pthread_attr_t *attr,
					 const sigset_t *mask)
{
	attr_sigmask_fn f = (attr_sigmask_fn)REAL(R_ATTR_SETSIGMASK);
	unsigned long ask;
	sigset_t adj;

	if (!f)
		return ENOSYS;
	if (!mask)
		return f(attr, NULL);
	adj = *mask;
	ask = word(mask) & OWNABLE;
	set_word(&adj, word(mask) & ~owned());
	((unsigned long *)&adj)[1] = ask;
	((unsigned long *)&adj)[2] = ask ^ ATTR_MAGIC;
	return f(attr, &adj);
}

/* 0 and the thread's virtual mask in *@vm when @attr sets a mask. */
static int attr_vmask(const pthread_attr_t *attr, unsigned long *vm,
		      sigset_t *got)
{
	attr_sigmask_fn f = (attr_sigmask_fn)REAL(R_ATTR_GETSIGMASK);
	const unsigned long *w = (const unsigned long *)got;

	if (!attr || !f || f((pthread_attr_t *)attr, got) != 0)
		return -1;	/* PTHREAD_ATTR_NO_SIGMASK_NP, or none */
	if ((w[1] ^ ATTR_MAGIC) == w[2])
		*vm = w[1] & OWNABLE;
	else
		*vm = w[0] & OWNABLE;
	return 0;
}

PK_EXPORT int pthread_attr_getsigmask_np(const pthread_attr_t *attr,
					 sigset_t *mask)
{
	attr_sigmask_fn f = (attr_sigmask_fn)REAL(R_ATTR_GETSIGMASK);
	unsigned long vm, *w = (unsigned long *)mask;
	int r;

	if (!f)
		return ENOSYS;
	r = f((pthread_attr_t *)attr, mask);
	if (r == 0 && (w[1] ^ ATTR_MAGIC) == w[2]) {
		vm = w[1];
		w[1] = w[2] = 0;
		w[0] = (w[0] & ~owned()) | (vm & owned());
	}
	return r;
}

/*
 * The child's virtual mask is its creator's, as its real one is, or the
 * one its attribute sets (pthread_attr_setsigmask_np()).
 */
PK_EXPORT int pthread_create(pthread_t *t, const pthread_attr_t *attr,
			     void *(*fn)(void *), void *arg)
{
	pthread_create_fn f = (pthread_create_fn)REAL(R_PTHREAD_CREATE);
	unsigned long vm = vmask;
	struct start *s;
	sigset_t got;
	int err;

	if (!f)
		return ENOSYS;
	attr_vmask(attr, &vm, &got);
	if (!vm)
		return f(t, attr, fn, arg);
	s = malloc(sizeof(*s));
	if (!s)
		return EAGAIN;
	s->fn = fn;
	s->arg = arg;
	s->vmask = vm;
	err = f(t, attr, thread_start, s);
	if (err)
		free(s);
	return err;
}

/* C11's threads: glibc's thrd_create calls its pthread_create internally. */
struct c11_start {
	thrd_start_t fn;
	void *arg;
	unsigned long vmask;
};

static int c11_thread_start(void *p)
{
	struct c11_start s = *(struct c11_start *)p;

	free(p);
	vmask = s.vmask;
	return s.fn(s.arg);
}

PK_EXPORT int thrd_create(thrd_t *t, thrd_start_t fn, void *arg)
{
	thrd_create_fn f = (thrd_create_fn)REAL(R_THRD_CREATE);
	struct c11_start *s;
	int err;

	if (!f)
		return thrd_error;
	if (!vmask)
		return f(t, fn, arg);
	s = malloc(sizeof(*s));
	if (!s)
		return thrd_nomem;
	s->fn = fn;
	s->arg = arg;
	s->vmask = vmask;
	err = f(t, c11_thread_start, s);
	if (err != thrd_success)
		free(s);
	return err;
}

/* ---------------------------------------------------- jumps out of handlers */

/*
 * siglongjmp() out of a handler: glibc restores the real mask saved by
 * sigsetjmp() with its internal sigprocmask, which no interposer sees, and
 * the handler's prog_leave() never runs. So the jumps are interposed
 * (longjmp, _longjmp, siglongjmp, __longjmp_chk: in glibc each restores
 * the mask when sigsetjmp saved one) and set vmask first:
 *
 *   - for an ownable signal probekit does not own, from the jmp_buf's
 *     saved mask, which is the real one (vmask follows it);
 *   - for an owned one the saved mask never has it (never really
 *     blocked), so __sigsetjmp itself is interposed by a stub that
 *     stores vmask in the jmp_buf itself and tail-jumps to libc's,
 *     leaving the caller's frame as setjmp must see it. The note lives
 *     with the buffer (a copied jmp_buf carries it, a freed one takes it
 *     along, any number of buffers have one each): glibc's __sigjmp_save
 *     writes only the kernel's 8 bytes (word 0) of __saved_mask, x86's
 *     setjmp the shadow stack pointer in word 2 (setjmpP.h's
 *     __jmpbuf_arch_t); words 14 and 15 of the 16 hold vmask and
 *     vmask ^ JNOTE_MAGIC. Only when a mask is saved: a cancellation
 *     buffer (savemask 0) is shorter than a jmp_buf. A jmp_buf without
 *     a valid note (filled past the stub) gets the owned signals
 *     unblocked: never a signal of the program's held forever, at worst
 *     one delivered that it had blocked before.
 *
 * A longjmp from a jmp_buf without a saved mask changes no mask, as the
 * kernel's would not: what the handler ran with stays blocked.
 */
#define JNOTE_WORD 14
#define JNOTE_MAGIC 0x706b2d6a6d706e74UL	/* "pk-jmpnt" */

_Static_assert(sizeof(__sigset_t) >= (JNOTE_WORD + 2) * sizeof(unsigned long),
	       "the jmp_buf note fits in __saved_mask");

/* From the stubs below, with the caller's arguments: libc's __sigsetjmp. */
PK_HIDDEN void *pk_sig_setjmp_note(struct __jmp_buf_tag *env, int save);
void *pk_sig_setjmp_note(struct __jmp_buf_tag *env, int save)
{
	if (save) {
		unsigned long *w = (unsigned long *)&env->__saved_mask;
		unsigned long v = vmask;

		w[JNOTE_WORD] = v;
		w[JNOTE_WORD + 1] = v ^ JNOTE_MAGIC;
	}
	return REAL(R_SIGSETJMP);
}

/*
 * __sigsetjmp(env, savemask) and setjmp(env) (BSD's, which saves the
 * mask): note, then jump to libc's with the arguments and the return
 * address untouched. The three pushes keep the call 16-byte aligned.
 */
__asm__(".text\n"
	".globl __sigsetjmp\n"
	".type __sigsetjmp, @function\n"
	"__sigsetjmp:\n"
	".Lpk_sigsetjmp:\n"
	"	.cfi_startproc\n"
	"	endbr64\n"
	"	push %rdi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	push %rsi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	sub $8, %rsp\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	call pk_sig_setjmp_note\n"
	"	add $8, %rsp\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	pop %rsi\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	pop %rdi\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	jmp *%rax\n"
	"	.cfi_endproc\n"
	".size __sigsetjmp, .-__sigsetjmp\n"
	".globl setjmp\n"
	".type setjmp, @function\n"
	"setjmp:\n"
	"	endbr64\n"
	"	mov $1, %esi\n"
	"	jmp .Lpk_sigsetjmp\n"
	".size setjmp, .-setjmp\n");

/* The stubs' names, exported (scripts/check-abi.sh reads these lines). */
#undef setjmp
PK_EXPORT int __sigsetjmp(struct __jmp_buf_tag env[1], int savemask);
PK_EXPORT int setjmp(struct __jmp_buf_tag env[1]);

static void jump_mask(struct __jmp_buf_tag *env)
{
	const unsigned long *w = (const unsigned long *)&env->__saved_mask;
	unsigned long own = owned(), now, noted = 0;

	if (!env->__mask_was_saved)
		return;
	if ((w[JNOTE_WORD] ^ JNOTE_MAGIC) == w[JNOTE_WORD + 1])
		noted = w[JNOTE_WORD];
	now = (word(&env->__saved_mask) & OWNABLE & ~own) | (noted & own);
	vmask = now;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	/* Delivered here, as glibc's sigprocmask in the jump would. */
	if (pend & ~now)
		flush_pending(now);
}

PK_EXPORT _Noreturn void longjmp(struct __jmp_buf_tag env[1], int val)
{
	jump_mask(env);
	((longjmp_fn)REAL(R_LONGJMP))(env, val);
	__builtin_unreachable();
}

PK_EXPORT _Noreturn void _longjmp(struct __jmp_buf_tag env[1], int val)
{
	jump_mask(env);
	((longjmp_fn)REAL(R__LONGJMP))(env, val);
	__builtin_unreachable();
}

PK_EXPORT _Noreturn void siglongjmp(struct __jmp_buf_tag env[1], int val)
{
	jump_mask(env);
	((longjmp_fn)REAL(R_SIGLONGJMP))(env, val);
	__builtin_unreachable();
}

PK_EXPORT _Noreturn void __longjmp_chk(struct __jmp_buf_tag env[1], int val)
{
	jump_mask(env);
	((longjmp_fn)REAL(R_LONGJMP_CHK))(env, val);
	__builtin_unreachable();
}

/* ---------------------------------------------------- contexts */

/*
 * setcontext(uc) from a handler, with the uc the kernel passed: its
 * uc_sigmask holds the program's view (prog_enter() put the virtual owned
 * bits there), which libc's setcontext would make the real mask, owned
 * signals really blocked. So setcontext and swapcontext take the owned
 * bits out of the mask they set (in place, as prog_leave() does) into
 * vmask, and getcontext and swapcontext note vmask in the context they
 * save, as sigsetjmp does in a jmp_buf: libc writes only word 0 of
 * uc_sigmask (the kernel's 8 bytes), words 14 and 15 hold vmask and
 * vmask ^ JNOTE_MAGIC ^ word 0. A context without a valid note (the
 * kernel's, or one whose mask the program set since) gives its word 0's
 * owned bits.
 */
typedef int (*setcontext_fn)(const ucontext_t *);
typedef int (*swapcontext_fn)(ucontext_t *, const ucontext_t *);

static void uc_note(ucontext_t *uc)
{
	unsigned long *w = (unsigned long *)&uc->uc_sigmask;
	unsigned long v = vmask, cur = 0;

	/* Bound to the word 0 libc is about to write (this thread's real
	 * mask): a program that edits uc_sigmask (sigemptyset, sigaddset
	 * touch word 0 only) makes the note stale, and word 0 counts. */
	pk_sys4(SYS_rt_sigprocmask, SIG_BLOCK, 0, (long)&cur, 8);
	w[JNOTE_WORD] = v;
	w[JNOTE_WORD + 1] = v ^ JNOTE_MAGIC ^ cur;
}

/* The virtual mask @uc sets; its real mask without the owned signals. */
static unsigned long uc_take(ucontext_t *uc)
{
	unsigned long *w = (unsigned long *)&uc->uc_sigmask;
	unsigned long own = owned(), v;

	if ((w[JNOTE_WORD] ^ JNOTE_MAGIC ^ w[0]) == w[JNOTE_WORD + 1])
		v = (w[JNOTE_WORD] & own) | (w[0] & OWNABLE & ~own);
	else
		v = w[0] & OWNABLE;
	w[0] &= ~own;
	return v;
}

PK_EXPORT int setcontext(const ucontext_t *uc)
{
	unsigned long now = uc_take((ucontext_t *)uc);

	vmask = now;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (pend & ~now)
		flush_pending(now);
	return ((setcontext_fn)REAL(R_SETCONTEXT))(uc);
}

PK_EXPORT int swapcontext(ucontext_t *oucp, const ucontext_t *ucp)
{
	unsigned long was = vmask, now;
	int r;

	uc_note(oucp);
	now = uc_take((ucontext_t *)ucp);
	vmask = now;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	r = ((swapcontext_fn)REAL(R_SWAPCONTEXT))(oucp, ucp);
	/* Back here (or failed): the mask of before. */
	vmask = was;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (pend & ~was)
		flush_pending(was);
	return r;
}

/* From the getcontext stub, with the caller's argument: libc's getcontext. */
PK_HIDDEN void *pk_sig_getcontext_note(ucontext_t *uc);
void *pk_sig_getcontext_note(ucontext_t *uc)
{
	uc_note(uc);
	return REAL(R_GETCONTEXT);
}

/* getcontext returns twice: a tail jump, as the __sigsetjmp stub. */
__asm__(".text\n"
	".globl getcontext\n"
	".type getcontext, @function\n"
	"getcontext:\n"
	"	.cfi_startproc\n"
	"	endbr64\n"
	"	push %rdi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	call pk_sig_getcontext_note\n"
	"	pop %rdi\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	jmp *%rax\n"
	"	.cfi_endproc\n"
	".size getcontext, .-getcontext\n");

/*
 * makecontext: the program has set the new context's uc_sigmask (word 0
 * only: sigemptyset and sigaddset leave the note alone), so the note of
 * the getcontext it started from is dropped and word 0 counts. A stub
 * (makecontext is variadic): every argument register kept.
 */
PK_HIDDEN void *pk_sig_makecontext_note(ucontext_t *uc);
void *pk_sig_makecontext_note(ucontext_t *uc)
{
	unsigned long *w = (unsigned long *)&uc->uc_sigmask;

	w[JNOTE_WORD] = 0;
	w[JNOTE_WORD + 1] = 0;
	return REAL(R_MAKECONTEXT);
}

__asm__(".text\n"
	".globl makecontext\n"
	".type makecontext, @function\n"
	"makecontext:\n"
	"	.cfi_startproc\n"
	"	endbr64\n"
	"	push %rdi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	push %rsi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	push %rdx\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	push %rcx\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	push %r8\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	push %r9\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	sub $8, %rsp\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	call pk_sig_makecontext_note\n"
	"	add $8, %rsp\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	pop %r9\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	pop %r8\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	pop %rcx\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	pop %rdx\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	pop %rsi\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	pop %rdi\n"
	"	.cfi_adjust_cfa_offset -8\n"
	"	jmp *%rax\n"
	"	.cfi_endproc\n"
	".size makecontext, .-makecontext\n");

/* The stubs' names, exported (scripts/check-abi.sh reads these lines). */
PK_EXPORT int getcontext(ucontext_t *uc);
PK_EXPORT void makecontext(ucontext_t *uc, void (*fn)(void), int argc, ...);

/* ---------------------------------------------------- threads that block */

/* From /proc/self/task/@tid/status: the line @key's value, or NULL. */
static const char *status_field(const char *buf, const char *key)
{
	const char *p = strstr(buf, key);

	return p ? p + strlen(key) : NULL;
}

int pk_sig_task_look(pid_t tid, struct pk_sig_task *t)
{
	char path[64], buf[2048];
	const char *v;
	ssize_t n;
	int fd;

	memset(t, 0, sizeof(*t));
	t->nr = -2;
	snprintf(path, sizeof(path), "/proc/self/task/%d/status", (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -ESRCH;
	buf[n] = 0;
	if ((v = status_field(buf, "\nSigBlk:")))
		t->sigblk = strtoull(v, NULL, 16);
	if ((v = status_field(buf, "\nState:")))
		t->state = v[strspn(v, " \t")];
	if ((v = status_field(buf, "\nvoluntary_ctxt_switches:")))
		t->ctxt = strtoull(v, NULL, 10);
	if ((v = status_field(buf, "\nnonvoluntary_ctxt_switches:")))
		t->ctxt += strtoull(v, NULL, 10);
	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", (int)tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;	/* no syscall file: nr stays -2, "unknown" */
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n > 0) {
		unsigned long long a[8];
		long nr;

		buf[n] = 0;
		/* "nr a1 .. a6 sp pc", "-1 sp pc" or "running". */
		if (sscanf(buf, "%ld %llx %llx %llx %llx %llx %llx %llx %llx", &nr,
			   &a[0], &a[1], &a[2], &a[3], &a[4], &a[5], &a[6],
			   &a[7]) == 9 && nr >= 0) {
			t->nr = nr;
			t->sp = (uintptr_t)a[6];
			t->pc = (uintptr_t)a[7];
		} else if (sscanf(buf, "%ld", &nr) == 1) {
			t->nr = -1;
		}
	}
	return 0;
}

/*
 * A thread asleep in a system call that has not run since @prev was read
 * (same call, same place, no context switch): in that state a thread with
 * every signal blocked stays until an event it waits for, which may be
 * never (glibc's helpers). The calls glibc makes inside its own short
 * all-blocked windows (creating a thread or a posix_spawn child, which
 * waits in clone until the child has exec'd) are not counted.
 */
static int task_parked(const struct pk_sig_task *prev,
		       const struct pk_sig_task *now)
{
	return now->nr >= 0 && (now->state == 'S' || now->state == 'D') &&
	       now->nr != SYS_clone && now->nr != SYS_clone3 &&
	       now->nr != SYS_vfork && now->nr != SYS_exit &&
	       now->nr != SYS_exit_group && now->nr == prev->nr &&
	       now->pc == prev->pc && now->sp == prev->sp &&
	       now->ctxt == prev->ctxt;
}

int pk_sig_task_still(pid_t tid, const struct pk_sig_task *prev)
{
	struct pk_sig_task now;

	return pk_sig_task_look(tid, &now) == 0 && task_parked(prev, &now);
}

/*
 * pk_sig_check_blocked() - 0 when no thread of the process has @sig really
 * blocked. glibc blocks every signal for short windows of its own (a
 * thread being created or ending, posix_spawn's parent): with
 * PK_SIG_CHECK_WAIT a thread counts only if it still has @sig blocked
 * after about two seconds (under load, or ASan, such a window can last
 * over 100 ms; on a machine with 25 runnable threads per core a thread
 * seen blocked at 0.5 s was not a raw blocker), re-read with growing
 * pauses, and a blocker is -EDEADLK, logged. That wait is for callers
 * that hold no lock of probekit's (the probe layer before probe_lock,
 * text.c with text_lock dropped). Without it, one pass and no sleep (for
 * a caller holding its lock): -EAGAIN, not logged, when a thread has @sig
 * blocked now, which the caller waits out unlocked and then checks again.
 *
 * One pass over /proc/self/task when nothing is blocked (one status read
 * per thread, ~8 us each); none when this thread's last waiting check
 * found nothing under 2 ms ago (the probe layer's, whose commit in text.c
 * comes next): a waiting check then keeps that stamp, one without the
 * wait uses it up.
 */
#define CHECK_MAX 64

/* When this thread's last waiting check found nothing (ns), or 0. */
static __thread int64_t handed_off;

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * glibc (2.35 on) blocks every signal but SIGSETXID (33, which setuid() in
 * another thread needs this one to take) for a thread's last steps in
 * start_thread: releasing its stack (madvise, the stack cache's lock,
 * munmap) and exit. Such a thread may sleep in one call for a while under
 * load, but it is ending, not parked for good: it is waited for.
 */
static int task_exiting(const struct pk_sig_task *t)
{
	return (t->sigblk | BIT(SIGKILL) | BIT(SIGSTOP)) == ~BIT(33);
}

/*
 * Sleep @us whole: a signal (the program's timers, another thread's
 * pthread_kill()) ends a plain usleep() early, and a wait made of such
 * sleeps lasted a few ms instead of ~2 s.
 */
static void sleep_whole(unsigned int us)
{
	struct timespec until;

	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_nsec += (long)(us % 1000000) * 1000;
	until.tv_sec += us / 1000000 + until.tv_nsec / 1000000000;
	until.tv_nsec %= 1000000000;
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) ==
	       EINTR)
		;
}

/* What a blocker is, for the refusal's message. */
static const char *blocker_kind(const struct pk_sig_task *t)
{
	if (task_exiting(t))
		return "blocks every signal but SIGSETXID (glibc's thread-exit "
		       "window, which lasted)";
	/* glibc's helpers block every signal (SigBlk fffffffe7ffbfeff). */
	if ((t->sigblk | BIT(SIGKILL) | BIT(SIGSTOP) | BIT(32) | BIT(33)) ==
	    ~0UL) {
		if (t->nr == SYS_rt_sigtimedwait)
			return "blocks every signal, waiting in rt_sigtimedwait "
			       "(glibc's timer_create SIGEV_THREAD helper)";
		if (t->nr == SYS_recvfrom || t->nr == SYS_recvmsg)
			return "blocks every signal, waiting on a socket "
			       "(glibc's mq_notify SIGEV_THREAD helper)";
		if (t->nr == SYS_futex)
			return "blocks every signal, waiting on a futex (an AIO "
			       "worker or another helper thread)";
		return "blocks every signal";
	}
	return "set behind libc's back (a raw rt_sigprocmask, a thread that "
	       "libc created with its own mask)";
}

/*
 * The threads of this process, from /proc/self/task with raw system calls
 * into @buf (no malloc: a commit lists them with int3 on probed libc
 * functions, opendir()'s malloc among them): @fn(tid, @arg) for each, in
 * directory order, until it returns nonzero. Return: what @fn last
 * returned (0: every thread seen), or -errno (no /proc).
 */
static int tasks_each(int (*fn)(pid_t tid, void *arg), void *arg)
{
	char buf[4096] __attribute__((aligned(8)));
	long fd = pk_sys4(SYS_openat, AT_FDCWD, (long)"/proc/self/task",
			  O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0), n;
	int ret = 0;

	if (fd < 0)
		return (int)fd;
	while (!ret && (n = pk_sys3(SYS_getdents64, fd, (long)buf,
				    sizeof(buf))) > 0) {
		for (long at = 0; at < n && !ret;) {
			const struct dirent64 *de = (const void *)(buf + at);
			long tid = 0;

			for (const char *c = de->d_name; *c >= '0' && *c <= '9';
			     c++)
				tid = tid * 10 + (*c - '0');
			if (tid > 0)
				ret = fn((pid_t)tid, arg);
			at += de->d_reclen;
		}
	}
	pk_sys3(SYS_close, fd, 0, 0);
	return ret;
}

static int other_task(pid_t tid, void *arg)
{
	return tid != *(pid_t *)arg;
}

int pk_sig_other_threads(void)
{
	pid_t self = (pid_t)pk_sys3(SYS_gettid, 0, 0, 0);
	int r = tasks_each(other_task, &self);

	return r ? 1 : 0;	/* no /proc: there may be */
}

struct blocked_scan {
	unsigned long bit;
	pid_t self;
	int n;
	struct pk_sig_task *seen;
	pid_t *tids;
};

/*
 * One thread of pk_sig_check_blocked()'s pass. The calling thread's real
 * mask is what rt_sigprocmask() says (/proc's SigBlk is the same field),
 * so its status and syscall files are read only when it blocks @bit.
 */
static int blocked_one(pid_t tid, void *arg)
{
	struct blocked_scan *b = arg;

	if (tid == b->self) {
		unsigned long cur = 0;

		if (pk_sys4(SYS_rt_sigprocmask, SIG_BLOCK, 0, (long)&cur, 8) ||
		    !(cur & b->bit))
			return 0;
	}
	if (pk_sig_task_look(tid, &b->seen[b->n]) == 0 &&
	    (b->seen[b->n].sigblk & b->bit))
		b->tids[b->n++] = tid;
	return b->n >= CHECK_MAX;
}

int pk_sig_check_blocked(int sig, const char *what, unsigned int flags)
{
	unsigned long bit = BIT(sig);
	struct pk_sig_task seen[CHECK_MAX];
	pid_t tids[CHECK_MAX];
	int wait = flags & PK_SIG_CHECK_WAIT;
	struct blocked_scan scan = { bit, 0, 0, seen, tids };
	int n = 0, left, parked = -1;

	if (handed_off) {
		int fresh = mono_ns() - handed_off < 2000000;

		if (!wait || !fresh)
			handed_off = 0;
		if (fresh)
			return 0;
	}
	scan.self = (pid_t)pk_sys3(SYS_gettid, 0, 0, 0);
	if (tasks_each(blocked_one, &scan) < 0)
		return 0;	/* no /proc: nothing to go by */
	n = scan.n;
	if (n && !wait)
		return -EAGAIN;
	/*
	 * Only those seen blocked are read again: a transient one unblocks.
	 * One that is parked (asleep in the same call at the same place, not
	 * run since: task_parked()) while blocking is not in one of glibc's
	 * short windows; it is refused at once rather than after ~2 s, unless
	 * it is in glibc's thread-exit window (task_exiting()).
	 */
	for (unsigned int pause = 1000; n && pause <= 1024000; pause *= 2) {
		sleep_whole(pause);
		left = 0;
		for (int i = 0; i < n && parked < 0; i++) {
			struct pk_sig_task now;

			if (pk_sig_task_look(tids[i], &now) || !(now.sigblk & bit))
				continue;
			if (pause >= 4000 && !task_exiting(&now) &&
			    task_parked(&seen[i], &now))
				parked = left;
			tids[left] = tids[i];
			seen[left++] = now;
		}
		if (parked >= 0) {
			tids[0] = tids[parked];
			seen[0] = seen[parked];
			break;
		}
		n = left;
	}
	if (!n) {
		if (wait)
			handed_off = mono_ns();
		return 0;
	}
	pk_err("%s: thread %d blocks SIG%s (SigBlk %016lx in "
	       "/proc/self/task/%d/status: %s; %s): an int3 there would kill "
	       "the process; refused (probekit(7), SIGNALS)",
	       what, (int)tids[0], sigabbrev_np(sig), seen[0].sigblk,
	       (int)tids[0], blocker_kind(&seen[0]),
	       parked >= 0 ? "parked in a system call, refused at once" :
			     "still blocking after ~2 s");
	return -EDEADLK;
}

/* ---------------------------------------------------- posix_spawn's child */

/*
 * What glibc's posix_spawn child (CLONE_VM|CLONE_VFORK, in the parent's
 * memory) runs after it has set every handler to SIG_DFL or with every
 * signal blocked: an int3 there kills it. Names; libc's own definitions.
 */
static const char *const spawn_names[] = {
	"sigprocmask", "__sigprocmask", "pthread_sigmask", "sigaction",
	"__sigaction", "__libc_sigaction", "sched_setparam",
	"sched_setscheduler", "setsid", "setpgid", "getuid", "getgid",
	"seteuid", "setegid", "close", "__close", "__close_nocancel",
	"open", "open64", "__open_nocancel", "__open64_nocancel", "dup2",
	"__dup2", "chdir", "fchdir", "getrlimit", "getrlimit64",
	"close_range", "closefrom", "tcsetpgrp", "ioctl", "execve",
	"__execve", "execvpe", "fexecve", "_exit", "_Exit",
	/*
	 * posix_spawnp's PATH search in the child (glibc's __execvpex).
	 * It copies with memcpy and mempcpy too, which are not here: an
	 * int3 is the only probe memcpy takes where another function jumps
	 * into its first bytes (glibc without AVX: tests/cli-xjump.sh), and
	 * refusing it would refuse that; a posix_spawnp child meets such an
	 * int3 (probekit(7), SIGNALS).
	 */
	"getenv", "strchr", "strchrnul", "strnlen", "strlen",
};
#define N_SPAWN PK_ARRAY_SIZE(spawn_names)

static struct { uintptr_t lo, hi; } spawn_fn[N_SPAWN];	/* set before main */

/* libc's dynamic symbol table, as the dynamic linker mapped it. */
struct dynsyms {
	const ElfW(Sym) *sym;
	const char *str;
	const uint32_t *gnu;		/* DT_GNU_HASH */
	const ElfW(Half) *versym;	/* DT_VERSYM, or NULL */
};

static int dynsyms_of(const struct link_map *lm, struct dynsyms *d)
{
	memset(d, 0, sizeof(*d));
	for (const ElfW(Dyn) *dyn = lm->l_ld; dyn && dyn->d_tag != DT_NULL;
	     dyn++) {
		/* Relocated in place by ld.so (the vdso's are not: unused). */
		uintptr_t p = dyn->d_un.d_ptr;

		if (p < lm->l_addr)
			p += lm->l_addr;
		switch (dyn->d_tag) {
		case DT_SYMTAB: d->sym = (const ElfW(Sym) *)p; break;
		case DT_STRTAB: d->str = (const char *)p; break;
		case DT_GNU_HASH: d->gnu = (const uint32_t *)p; break;
		case DT_VERSYM: d->versym = (const ElfW(Half) *)p; break;
		}
	}
	return d->sym && d->str && d->gnu ? 0 : -ENOENT;
}

/*
 * The definition of @name that dlsym(libc, @name) finds: defined, and of
 * the default version (its versym entry not hidden), through DT_GNU_HASH.
 */
static const ElfW(Sym) *dynsym_find(const struct dynsyms *d, const char *name)
{
	const uint32_t nb = d->gnu[0], base = d->gnu[1], words = d->gnu[2];
	const uint32_t *bucket = d->gnu + 4 + words * (sizeof(ElfW(Addr)) / 4);
	const uint32_t *chain = bucket + nb;
	uint32_t h = 5381, i;

	for (const unsigned char *c = (const unsigned char *)name; *c; c++)
		h = h * 33 + *c;
	if (!nb || (i = bucket[h % nb]) < base)
		return NULL;
	for (;; i++) {
		uint32_t h2 = chain[i - base];
		const ElfW(Sym) *sym = &d->sym[i];

		if ((h | 1) == (h2 | 1) && sym->st_shndx != SHN_UNDEF &&
		    !(d->versym && (d->versym[i] & 0x8000)) &&
		    !strcmp(d->str + sym->st_name, name))
			return sym;
		if (h2 & 1)
			return NULL;
	}
}

/*
 * From the constructor: a commit (under text_lock) must not take dlopen's
 * lock. Each name's extent from libc's own .dynsym, one hash lookup each
 * (a dladdr1() per name cost a pass over every libc symbol, then a hash
 * of them all: 90 us of every process's start-up); dlsym() only for an
 * IFUNC, whose chosen variant only the dynamic linker knows.
 */
static void spawn_init(void)
{
	void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
	struct link_map *lm = NULL;
	struct dynsyms d;

	if (!libc)
		return;
	if (dlinfo(libc, RTLD_DI_LINKMAP, &lm) || !lm)
		goto out;
	/*
	 * A libc without DT_GNU_HASH (linked --hash-style=sysv): each name
	 * through dlsym() and dladdr1() (slower, the same answers), never
	 * none: an empty extent would let an int3 probe on one of them
	 * kill a posix_spawn() child (text.c, check_signals()).
	 */
	if (dynsyms_of(lm, &d)) {
		pk_dbg("sig: libc has no DT_GNU_HASH: its spawn functions "
		       "through dlsym()");
		for (size_t i = 0; i < N_SPAWN; i++) {
			void *p = dlsym(libc, spawn_names[i]);
			const ElfW(Sym) *sym = NULL;
			Dl_info info;

			if (!p)
				continue;
			spawn_fn[i].lo = (uintptr_t)p;
			spawn_fn[i].hi = (uintptr_t)p + 1;
			if (dladdr1(p, &info, (void **)&sym, RTLD_DL_SYMENT) &&
			    sym && ELF64_ST_TYPE(sym->st_info) != STT_GNU_IFUNC &&
			    sym->st_size)
				spawn_fn[i].hi = (uintptr_t)p + sym->st_size;
		}
		goto out;
	}
	for (size_t i = 0; i < N_SPAWN; i++) {
		const ElfW(Sym) *sym = dynsym_find(&d, spawn_names[i]);
		void *p;

		if (!sym)
			continue;
		if (ELF64_ST_TYPE(sym->st_info) != STT_GNU_IFUNC) {
			spawn_fn[i].lo = lm->l_addr + sym->st_value;
			spawn_fn[i].hi = spawn_fn[i].lo +
					 (sym->st_size ? sym->st_size : 1);
			continue;
		}
		/* An IFUNC's dlsym() is the chosen variant, which has no
		 * dynamic symbol of its own: its entry only. */
		p = dlsym(libc, spawn_names[i]);
		if (p) {
			spawn_fn[i].lo = (uintptr_t)p;
			spawn_fn[i].hi = (uintptr_t)p + 1;
		}
	}
out:
	dlclose(libc);
}

/*
 * pk_sig_spawn_child_fn() - the name of the function of glibc's posix_spawn
 * child path that [@addr, @addr + @len) lies in, or NULL.
 */
const char *pk_sig_spawn_child_fn(uintptr_t addr, size_t len)
{
	for (size_t i = 0; i < N_SPAWN; i++)
		if (spawn_fn[i].lo < addr + len && addr < spawn_fn[i].hi)
			return spawn_names[i];
	return NULL;
}
