// SPDX-License-Identifier: MIT
/* sig.c - signal ownership: one handler per fault signal, hooks in order, then the previous handler, then the default action. */

/*
 * How the program's handlers and masks are kept
 * =============================================
 *
 * Two ways exist to keep working a handler the program installs after
 * probekit: interpose sigaction() so that every later installation lands
 * behind probekit (Android's libsigchain, frida's Exceptor, HotSpot's
 * libjsig), or give the program an explicit call (the JNI "signal
 * chaining" docs). probekit used to take only the explicit way,
 * pk_signal_action(), and that was not enough (issue 9, item 1): an int3
 * that a thread executes with SIGTRAP blocked is force-delivered by the
 * kernel with the default action, and nothing in user space can catch it
 * after the fact. liblzma's workers, dash, posix_spawn and most thread
 * pools block every signal with pthread_sigmask(); programs reset SIGTRAP
 * with signal(SIGTRAP, SIG_DFL) or install their own handler. Every one of
 * them died (133/139) on the first int3 probe hit or transient int3 of a
 * commit. Only the signal mask and the handler table can prevent it, so
 * probekit now interposes the libc calls that change them (interpose.c):
 *
 *   - sigaction, signal, bsd_signal, sysv_signal, siginterrupt, sigset,
 *     sighold, sigrelse, sigignore: for a signal probekit owns, the program's
 *     handler is recorded in prev[] (through pk_signal_action(), which
 *     stays the explicit API for code that does not go through libc's
 *     names) and chained, and reading it back returns it; for any other,
 *     it is wrapped (interpose.c's wrap_handler()) so that it runs with
 *     the program's virtual mask as the kernel would set it;
 *   - sigprocmask, pthread_sigmask, sigblock, sigsetmask, sigsuspend,
 *     sigpause, ppoll (and __ppoll_chk), pselect, epoll_pwait(2): the
 *     owned signals are never really blocked; what the program asked for
 *     is a per-thread virtual mask, read back as set; a handler's sa_mask
 *     never blocks them either (it blocks them virtually while the
 *     handler runs), and the waits restart when only probekit's own
 *     signals interrupted them;
 *   - longjmp, _longjmp, siglongjmp, __longjmp_chk and __sigsetjmp: a
 *     jump out of a handler restores the virtual mask sigsetjmp saw;
 *   - the program's own signals still reach it as the kernel would: an
 *     asynchronous one (si_code <= 0: its raise(SIGTRAP), a kill) that
 *     arrives while it is virtually blocked waits per thread and is sent
 *     again when the program unblocks it (or taken by its sigwait); a
 *     fault the kernel raises while it is virtually blocked takes the
 *     default action (call_prev() returns 0), as it would;
 *   - pthread_create, thrd_create, pthread_attr_setsigmask_np: the
 *     child's virtual mask is its creator's, or its attribute's.
 *
 * Why the reasons against it no longer hold: the sanitizers also
 * interpose sigaction, but they call the next definition (dlsym
 * RTLD_NEXT), which is ours, and ours calls libc's; the lookup order is
 * fixed where it matters (-lprobekit precedes libc; the preloaded agent
 * defines the same names, agent/interpose.c). What is changed for the
 * whole process is only what probekit owns, and only while it owns it:
 * before, every call passes through (the virtual mask follows along).
 *
 * Threads probekit cannot see (raw rt_sigprocmask, as the Go runtime
 * makes; glibc's internal blocking in posix_spawn and pthread_create; a
 * static binary): text.c asks pk_sig_check_blocked() before any commit
 * that writes int3, and refuses with -EDEADLK rather than kill the
 * process. glibc's posix_spawn child runs a few libc functions with every
 * handler reset to SIG_DFL in the parent's memory: a permanent int3 on one
 * of them is refused (pk_sig_spawn_child_fn(), -EPERM).
 *
 * What is not covered: signalfd (owned signals are never blocked, so a
 * signalfd never reads them; the program's handler gets them instead),
 * handlers installed past sigaction() (raw rt_sigaction, or before
 * libprobekit loaded: not wrapped), and exec (the new image starts with
 * the owned signals unblocked). Every owned signal is owned from load
 * (interpose.c's and fault.c's constructors), so no thread can have
 * blocked one through libc before probekit took it.
 *
 * The previous action is kept in two copies and an index, so the signal
 * path reads a whole struct while pk_signal_action() writes the other copy;
 * writers are serialised by sig_lock, and two writes in a row while one
 * signal handler is still copying the older one is the one race left (a
 * torn read of a handler that is being replaced anyway).
 *
 * Signal masks: probekit's handler is installed with SA_NODEFER (see
 * install()), so the previous handler, called from it, runs with its own
 * signal really unblocked even if it was installed without SA_NODEFER;
 * only its sa_mask, less the signals probekit owns, is really blocked
 * around it. The owned signals of its sa_mask and its own signal (without
 * SA_NODEFER) are blocked virtually instead (pk_sig_prog_enter(): the
 * program's raise() of one waits until the handler returns, a fault of one
 * takes the default action, as the kernel's would), and the virtual mask
 * is put back when the handler returns (pk_sig_prog_leave()) or leaves
 * with siglongjmp() (interpose.c interposes the jumps and __sigsetjmp).
 * Really blocking them is not done: for SIGTRAP it would make an int3
 * probe or a watched-page step met inside that handler fatal, which
 * SA_NODEFER is there to prevent. The program's handlers of the other
 * signals are wrapped the same way (interpose.c, wrap_handler()).
 */

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arch/arch.h"
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

#define NSIGS 4
static const int sig_nums[NSIGS] = { SIGSEGV, SIGBUS, SIGILL, SIGTRAP };

/* sig_lock serialises pk_sig_hook() and pk_signal_action(); it guards
 * installed[] and the inactive copy of prev[][]. */
static pthread_mutex_t sig_lock = PTHREAD_MUTEX_INITIALIZER;
static int installed[NSIGS];
static int pinned[NSIGS];	/* sig_lock: installed for good (pk_sig_pin()) */

/*
 * sigaction() and signal() are async-signal-safe in libc, so must stay so
 * here: a handler that calls them while its thread holds sig_lock (in
 * pk_signal_action(), say) would deadlock. So sig_lock is held with every
 * signal blocked but the synchronous ones probekit owns (an int3 or a
 * fault in what the section calls, a probe on libc's sigaction, must stay
 * deliverable), through the real pthread_sigmask (no vmask change). Those
 * four keep what the section made of them (pk_sig_strip_masks() may
 * unblock one) when the mask is put back.
 */
#define SYNC_BITS ((1UL << (SIGSEGV - 1)) | (1UL << (SIGBUS - 1)) | \
		   (1UL << (SIGILL - 1)) | (1UL << (SIGTRAP - 1)))

static void sig_lock_take(sigset_t *old)
{
	sigset_t all;

	OWN_ENTER();
	sigfillset(&all);
	((unsigned long *)&all)[0] &= ~SYNC_BITS;
	pk_sig_real_sigmask(SIG_BLOCK, &all, old);
	pthread_mutex_lock(&sig_lock);
	OWN_LEAVE();
}

static void sig_lock_drop(sigset_t *old)
{
	sigset_t cur;

	OWN_ENTER();
	pthread_mutex_unlock(&sig_lock);
	if (pk_sig_real_sigmask(SIG_BLOCK, NULL, &cur) == 0)
		((unsigned long *)old)[0] =
			(((unsigned long *)old)[0] & ~SYNC_BITS) |
			(((unsigned long *)&cur)[0] & SYNC_BITS);
	pk_sig_real_sigmask(SIG_SETMASK, old, NULL);
	OWN_LEAVE();
}

static pk_sig_hook_fn hooks[NSIGS][PK_SIG_NSLOTS];	/* atomic */
static struct sigaction prev[NSIGS][2];
static unsigned int prev_idx[NSIGS];			/* atomic */
PK_SIGNAL_DATA(installed);
PK_SIGNAL_DATA(hooks);
PK_SIGNAL_DATA(prev);
PK_SIGNAL_DATA(prev_idx);

static PK_NOPROBE_INLINE int sig_index(int sig)
{
	for (int i = 0; i < NSIGS; i++)
		if (sig_nums[i] == sig)
			return i;
	return -1;
}

/* What the kernel calls for each signal (pk_sig_set_entry()). */
static pk_sig_entry_fn entries[NSIGS];	/* sig_lock */

static pk_sig_entry_fn entry_of(int i)
{
	return entries[i] ? entries[i] : pk_sig_handler;
}

static PK_NOPROBE_INLINE int is_ours(int i, const struct sigaction *sa)
{
	return (sa->sa_flags & SA_SIGINFO) &&
	       (sa->sa_sigaction == pk_sig_handler ||
		(entries[i] && sa->sa_sigaction == entries[i]));
}

/* A fault the kernel raised for the interrupted instruction (it will recur). */
PK_NOPROBE static int sync_fault(int sig, const siginfo_t *si)
{
	if (si->si_code <= 0)	/* kill, raise, sigqueue, tgkill */
		return 0;
	return sig == SIGSEGV || sig == SIGBUS || sig == SIGILL;
}

/*
 * Step 4: the default action, so that the process ends as it would have
 * without probekit: killed by @sig, with a core where cores are enabled.
 */
PK_NOPROBE static void take_default(int sig, siginfo_t *si, ucontext_t *uc)
{
	struct sigaction dfl;
	int i = sig_index(sig);

	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	pk_sig_real_sigaction(sig, &dfl, NULL);
	if (i >= 0) {
		__atomic_store_n(&installed[i], 0, __ATOMIC_RELAXED);
		__atomic_and_fetch(&pk_sig_owned_bits, ~(1UL << (sig - 1)),
				   __ATOMIC_RELAXED);
	}
	if (sync_fault(sig, si))
		return;		/* the instruction faults again, unhandled */
	if (sig == SIGTRAP && pk_arch_trap_hit(si)) {
		/* A trap instruction: run it again, at its own address. */
		pk_arch_set_pc(uc, pk_arch_trap_addr(uc));
		return;
	}
	/* Sent, or a trap that will not recur: pending until we return. */
	raise(sig);
}

/* Step 3: the handler before probekit, with its own flags. */
PK_NOPROBE static int call_prev(int i, int sig, siginfo_t *si, void *ctx)
{
	unsigned int idx = __atomic_load_n(&prev_idx[i], __ATOMIC_ACQUIRE);
	struct sigaction p = prev[i][idx & 1];
	unsigned long vwas, extra;
	sigset_t saved;

	/*
	 * The program has @sig blocked in this thread (its virtual mask,
	 * interpose.c): one it sent is kept until it unblocks it; a fault
	 * the kernel raised takes the default action, as it would.
	 */
	if (pk_sig_vblocked(sig)) {
		if (si->si_code <= 0) {
			pk_sig_defer(sig, si);
			return 1;
		}
		return 0;
	}
	/* The handler's value decides, whatever the flags (the kernel's
	 * rule): SA_SIGINFO with SIG_IGN ignores, with SIG_DFL defaults. */
	if (p.sa_handler == SIG_DFL || p.sa_handler == SIG_IGN) {
		/* A synchronous fault cannot be ignored: the kernel would kill. */
		if (p.sa_handler == SIG_IGN && !sync_fault(sig, si) &&
		    !(sig == SIGTRAP && pk_arch_trap_hit(si)))
			return 1;
		return 0;
	}
	if (is_ours(i, &p))
		return 0;	/* never loop into ourselves */
	if (p.sa_flags & SA_RESETHAND) {
		/* Once only: what the kernel would have done to it. */
		struct sigaction *w = &prev[i][idx & 1];

		/* The kernel keeps sa_flags: read back as it would. SIG_DFL
		 * is decided on the value, SA_SIGINFO or not (above). */
		__atomic_store_n(&w->sa_handler, SIG_DFL, __ATOMIC_RELAXED);
	}
	/*
	 * The owned signals of its sa_mask and @sig itself (without
	 * SA_NODEFER) blocked virtually for the call, as the kernel would
	 * block them really, and put back when it returns (or siglongjmp()s
	 * out: interpose.c's jumps).
	 */
	vwas = pk_sig_prog_enter(sig, p.sa_flags, &p.sa_mask, ctx);
	/*
	 * Never the owned signals really: an int3 in there would be fatal.
	 * An sa_mask with nothing else (the common case) costs no system
	 * call: the kernel's 64 signals are word 0, and the sigreturn that
	 * follows puts back the mask of before anyway.
	 */
	extra = ((unsigned long *)&p.sa_mask)[0] &
		~__atomic_load_n(&pk_sig_owned_bits, __ATOMIC_RELAXED);
	((unsigned long *)&p.sa_mask)[0] = extra;
	if (extra)
		pk_sig_real_sigmask(SIG_BLOCK, &p.sa_mask, &saved);
	if (p.sa_flags & SA_SIGINFO)
		p.sa_sigaction(sig, si, ctx);
	else
		p.sa_handler(sig);
	if (extra)
		pk_sig_real_sigmask(SIG_SETMASK, &saved, NULL);
	pk_sig_prog_leave(vwas, ctx);
	return 1;
}

PK_NOPROBE void pk_sig_handler(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	/*
	 * Not errno, which is a call of __errno_location(): a probe there
	 * would trap again here before any hook could know it (arch.h).
	 */
	int *ep = pk_errno_ptr();
	int saved_errno = *ep;
	int i = sig_index(sig);

	if (i < 0)
		goto out;
	for (int s = 0; s < PK_SIG_NSLOTS; s++) {
		pk_sig_hook_fn fn = __atomic_load_n(&hooks[i][s],
						    __ATOMIC_ACQUIRE);

		if (fn && fn(sig, si, uc))
			goto out;
	}
	if (!call_prev(i, sig, si, ctx))
		take_default(sig, si, uc);
out:
	*ep = saved_errno;
}

/* Installed, and owned, but the handlers' masks not stripped yet. */
static int install_nostrip(int i)
{
	struct sigaction sa, old;
	unsigned int idx;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = entry_of(i);
	/*
	 * SA_NODEFER: code that runs inside this handler (a handler installed
	 * before probekit, a die or fault handler) may hit an int3 probe or a
	 * site being patched, or fault on a watched page; with the signal
	 * blocked the kernel would make that synchronous signal fatal.
	 * With an empty sa_mask too, delivery leaves the thread's signal
	 * mask as it was, which lets an entry resume a handled fault without
	 * rt_sigreturn (fault.c, arch/x86_64/resume.c).
	 */
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	if (pk_sig_real_sigaction(sig_nums[i], &sa, &old))
		return -errno;
	if (!is_ours(i, &old)) {
		idx = prev_idx[i] + 1;
		prev[i][idx & 1] = old;
		__atomic_store_n(&prev_idx[i], idx, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&installed[i], 1, __ATOMIC_RELAXED);
	/* From here the program's calls see it virtually (interpose.c). */
	__atomic_or_fetch(&pk_sig_owned_bits, 1UL << (sig_nums[i] - 1),
			  __ATOMIC_RELAXED);
	return 0;
}

static int install(int i)
{
	int err = install_nostrip(i);

	if (!err)
		pk_sig_strip_masks(1UL << (sig_nums[i] - 1));
	return err;
}

static void uninstall(int i)
{
	struct sigaction cur;

	/* Put the previous handler back only if ours is still in place. */
	if (pk_sig_real_sigaction(sig_nums[i], NULL, &cur) == 0 &&
	    is_ours(i, &cur))
		pk_sig_real_sigaction(sig_nums[i], &prev[i][prev_idx[i] & 1],
				      NULL);
	__atomic_store_n(&installed[i], 0, __ATOMIC_RELAXED);
	__atomic_and_fetch(&pk_sig_owned_bits, ~(1UL << (sig_nums[i] - 1)),
			   __ATOMIC_RELAXED);
}

int pk_sig_set_entry(int sig, pk_sig_entry_fn fn)
{
	sigset_t omask;
	int i = sig_index(sig), err = 0;

	if (i < 0)
		return -EINVAL;
	sig_lock_take(&omask);
	if (installed[i])
		err = -EBUSY;
	else
		entries[i] = fn;
	sig_lock_drop(&omask);
	return err;
}

int pk_sig_hook(int sig, enum pk_sig_slot slot, pk_sig_hook_fn fn)
{
	sigset_t omask;
	int i = sig_index(sig), err = 0, any = 0;

	if (i < 0 || (unsigned int)slot >= PK_SIG_NSLOTS)
		return -EINVAL;
	sig_lock_take(&omask);
	if (fn && !installed[i])
		err = install(i);
	if (!err) {
		__atomic_store_n(&hooks[i][slot], fn, __ATOMIC_RELEASE);
		for (int s = 0; s < PK_SIG_NSLOTS; s++)
			any |= hooks[i][s] != NULL;
		if (!any && installed[i] && !pinned[i])
			uninstall(i);
	}
	sig_lock_drop(&omask);
	return err;
}

int pk_sig_pin_set(unsigned long bits)
{
	unsigned long fresh = 0;	/* installed by this call */
	sigset_t omask;
	int err = 0;

	for (int s = 1; s <= 64; s++)
		if ((bits & (1UL << (s - 1))) && sig_index(s) < 0)
			return -EINVAL;
	sig_lock_take(&omask);
	for (int i = 0; i < NSIGS; i++) {
		unsigned long bit = 1UL << (sig_nums[i] - 1);
		int e = 0;

		if (!(bits & bit))
			continue;
		if (!installed[i] && !(e = install_nostrip(i)))
			fresh |= bit;
		if (!e)
			pinned[i] = 1;
		else if (!err)
			err = e;
	}
	/*
	 * One pass over the handlers for every owned signal not stripped
	 * yet: these, and one owned without install() (the sweep signal;
	 * its owner unblocks it in its thread's real mask, unlocked: the
	 * mask sig_lock_take() set blocks it). Then this thread's mask for
	 * these: sig_lock_take() leaves them deliverable.
	 */
	if (fresh) {
		pk_sig_strip_handlers(fresh | __atomic_load_n(&pk_sig_owned_bits,
							      __ATOMIC_RELAXED));
		pk_sig_strip_masks(fresh);
	}
	sig_lock_drop(&omask);
	return err;
}

int pk_sig_pin(int sig)
{
	if (sig <= 0 || sig > 64)
		return -EINVAL;
	return pk_sig_pin_set(1UL << (sig - 1));
}

/* fork(): taken last but the log lock (internal.h's lock order). */
static void sig_fork_prepare(void)
{
	pthread_mutex_lock(&sig_lock);
}

static void sig_fork_release(void)
{
	pthread_mutex_unlock(&sig_lock);
}

PK_ATFORK(sig, PK_RANK_SIG, sig_fork_prepare, sig_fork_release,
	  sig_fork_release);

int pk_sig_owned(int sig)
{
	int i = sig_index(sig);

	return i >= 0 && __atomic_load_n(&installed[i], __ATOMIC_RELAXED);
}

int pk_signal_action(int sig, const struct sigaction *act,
		     struct sigaction *oldact)
{
	sigset_t omask;
	int i = sig_index(sig), err = 0;

	if (i < 0) {
		if (sig <= 0 || sig >= NSIG)
			return -EINVAL;
		return pk_sig_real_sigaction(sig, act, oldact) ? -errno : 0;
	}
	sig_lock_take(&omask);
	if (!installed[i]) {
		err = pk_sig_real_sigaction(sig, act, oldact) ? -errno : 0;
	} else {
		unsigned int idx = prev_idx[i];

		if (oldact)
			*oldact = prev[i][idx & 1];
		if (act && is_ours(i, act)) {
			/* Someone restoring probekit's handler: put it back. */
			struct sigaction cur;

			pk_sig_real_sigaction(sig, NULL, &cur);
			if (!is_ours(i, &cur))
				pk_sig_real_sigaction(sig, act, NULL);
		} else if (act) {
			prev[i][(idx + 1) & 1] = *act;
			__atomic_store_n(&prev_idx[i], idx + 1,
					 __ATOMIC_RELEASE);
		}
	}
	sig_lock_drop(&omask);
	return err;
}

/* ------------------------------------------------- alternate stacks */

static pthread_key_t altstack_key;
static pthread_once_t altstack_once = PTHREAD_ONCE_INIT;

struct altstack {
	void *map;
	size_t len;
};

static void altstack_free(void *p)
{
	struct altstack *a = p;
	stack_t ss;

	memset(&ss, 0, sizeof(ss));
	ss.ss_flags = SS_DISABLE;
	sigaltstack(&ss, NULL);
	munmap(a->map, a->len);
}

static void altstack_init(void)
{
	pthread_key_create(&altstack_key, altstack_free);
}

int pk_thread_altstack(size_t size)
{
	static __thread struct altstack mine;
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	stack_t ss, cur;
	void *m;

	if (size == 0)
		size = 64 * 1024;
	if (size < (size_t)MINSIGSTKSZ || size > ((size_t)1 << 30))
		return -EINVAL;
	if (sigaltstack(NULL, &cur))
		return -errno;
	if (!(cur.ss_flags & SS_DISABLE))
		return 0;	/* the thread has one already: keep it */
	size = (size + page - 1) & ~(page - 1);
	/* A guard page below, so overflowing the handler faults too. */
	m = mmap(NULL, size + page, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return -errno;
	mprotect(m, page, PROT_NONE);
	memset(&ss, 0, sizeof(ss));
	ss.ss_sp = (char *)m + page;
	ss.ss_size = size;
	if (sigaltstack(&ss, NULL)) {
		int err = -errno;

		munmap(m, size + page);
		return err;
	}
	pthread_once(&altstack_once, altstack_init);
	mine.map = m;
	mine.len = size + page;
	pthread_setspecific(altstack_key, &mine);
	return 0;
}
