// SPDX-License-Identifier: MIT
/* interpose.c - the agent's copies of libprobekit's libc signal calls: they forward to the library's (src/sig/interpose.c). */

/*
 * A preloaded object comes first in the lookup order, but its dependencies
 * (libprobekit.so) come after the program's, libc among them: libc's
 * sigaction would win over the library's. So the agent defines the same
 * names and forwards each to libprobekit's definition, looked up in
 * libprobekit's own scope (dlsym on its handle finds its definition first).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stddef.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <threads.h>
#include <time.h>

#include "probekit.h"

#define PKA_EXPORT __attribute__((visibility("default")))

static void *lib_handle(void)
{
	static void *h;
	void *p = __atomic_load_n(&h, __ATOMIC_ACQUIRE);
	Dl_info di;

	if (p)
		return p;
	if (!dladdr((void *)pk_version, &di) || !di.dli_fname)
		return NULL;
	/* Already loaded (a dependency of ours): never loads anything. */
	p = dlopen(di.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
	if (p)
		__atomic_store_n(&h, p, __ATOMIC_RELEASE);
	return p;
}

static void *lib_fn(const char *name)
{
	void *h = lib_handle();

	return h ? dlsym(h, name) : NULL;
}

/*
 * Each forwarder's pointer to the library's function, with its name, in
 * the pka_fwd section: all are resolved by resolve_fwd() below, before
 * main, so that a first call from a signal handler never runs the dynamic
 * loader (dlopen and dlsym take its lock: a handler interrupting the
 * loader would deadlock). The lazy path is left for calls that come
 * before the agent's constructors (another object's constructor).
 */
struct fwd {
	const char *name;
	void **fn;
};

/* One forwarder: NAME(ARGS) returns RET, calling the library's NAME. */
#define FORWARD(ret, name, fail, params, args)                                 \
	static ret (*fwd_##name) params;                                       \
	static const struct fwd fwd_ent_##name                                 \
		__attribute__((used, section("pka_fwd"), aligned(8))) = {      \
			#name, (void **)&fwd_##name };                         \
	PKA_EXPORT ret name params                                             \
	{                                                                      \
		ret (*p) params = __atomic_load_n(&fwd_##name,                 \
						  __ATOMIC_ACQUIRE);           \
                                                                               \
		if (!p) {                                                      \
			*(void **)&p = lib_fn(#name);                          \
			if (!p) {                                              \
				errno = ENOSYS;                                \
				return fail;                                   \
			}                                                      \
			__atomic_store_n(&fwd_##name, p, __ATOMIC_RELEASE);    \
		}                                                              \
		return p args;                                                 \
	}

extern const struct fwd __start_pka_fwd[], __stop_pka_fwd[];

/* Before pka_init() (agent.c, no priority) and the program's main. */
__attribute__((constructor(101))) static void resolve_fwd(void)
{
	for (const struct fwd *e = __start_pka_fwd; e < __stop_pka_fwd; e++) {
		void *p = lib_fn(e->name);

		if (p)
			__atomic_store_n(e->fn, p, __ATOMIC_RELEASE);
	}
}

FORWARD(int, sigaction, -1,
	(int sig, const struct sigaction *act, struct sigaction *old),
	(sig, act, old))
FORWARD(int, sigprocmask, -1,
	(int how, const sigset_t *set, sigset_t *old), (how, set, old))
FORWARD(int, pthread_sigmask, ENOSYS,
	(int how, const sigset_t *set, sigset_t *old), (how, set, old))
FORWARD(int, sigsuspend, -1, (const sigset_t *mask), (mask))
FORWARD(int, ppoll, -1,
	(struct pollfd *fds, nfds_t n, const struct timespec *t,
	 const sigset_t *mask), (fds, n, t, mask))
FORWARD(int, pselect, -1,
	(int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *t,
	 const sigset_t *mask), (n, r, w, e, t, mask))
FORWARD(int, epoll_pwait, -1,
	(int fd, struct epoll_event *ev, int max, int tmo,
	 const sigset_t *mask), (fd, ev, max, tmo, mask))
FORWARD(int, epoll_pwait2, -1,
	(int fd, struct epoll_event *ev, int max, const struct timespec *t,
	 const sigset_t *mask), (fd, ev, max, t, mask))
FORWARD(int, sigtimedwait, -1,
	(const sigset_t *set, siginfo_t *info, const struct timespec *t),
	(set, info, t))
FORWARD(int, sigwaitinfo, -1, (const sigset_t *set, siginfo_t *info),
	(set, info))
FORWARD(int, sigwait, ENOSYS, (const sigset_t *set, int *sig), (set, sig))
FORWARD(sighandler_t, signal, SIG_ERR, (int sig, sighandler_t h), (sig, h))
FORWARD(sighandler_t, bsd_signal, SIG_ERR, (int sig, sighandler_t h),
	(sig, h))
FORWARD(sighandler_t, sysv_signal, SIG_ERR, (int sig, sighandler_t h),
	(sig, h))
FORWARD(sighandler_t, __sysv_signal, SIG_ERR, (int sig, sighandler_t h),
	(sig, h))
FORWARD(sighandler_t, sigset, SIG_ERR, (int sig, sighandler_t h), (sig, h))
FORWARD(int, sighold, -1, (int sig), (sig))
FORWARD(int, sigrelse, -1, (int sig), (sig))
FORWARD(int, sigignore, -1, (int sig), (sig))
FORWARD(int, siginterrupt, -1, (int sig, int flag), (sig, flag))
FORWARD(int, pthread_create, ENOSYS,
	(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *),
	 void *arg), (t, attr, fn, arg))
FORWARD(int, pthread_attr_setsigmask_np, ENOSYS,
	(pthread_attr_t *attr, const sigset_t *mask), (attr, mask))
FORWARD(int, pthread_attr_getsigmask_np, ENOSYS,
	(const pthread_attr_t *attr, sigset_t *mask), (attr, mask))
FORWARD(int, thrd_create, thrd_error,
	(thrd_t *t, thrd_start_t fn, void *arg), (t, fn, arg))
FORWARD(int, __ppoll_chk, -1,
	(struct pollfd *fds, nfds_t n, const struct timespec *t,
	 const sigset_t *mask, size_t len), (fds, n, t, mask, len))
FORWARD(int, sigblock, -1, (int mask), (mask))
FORWARD(int, sigsetmask, -1, (int mask), (mask))
FORWARD(int, __sigpause, -1, (int sig_or_mask, int is_sig),
	(sig_or_mask, is_sig))
FORWARD(int, __xpg_sigpause, -1, (int sig), (sig))

/* The symbol sigpause is BSD's; <signal.h>'s sigpause() is XPG's. */
static int (*fwd_bsd_sigpause)(int);
static const struct fwd fwd_ent_bsd_sigpause
	__attribute__((used, section("pka_fwd"), aligned(8))) = {
		"sigpause", (void **)&fwd_bsd_sigpause };
PKA_EXPORT int pka_bsd_sigpause(int mask) __asm__("sigpause");
int pka_bsd_sigpause(int mask)
{
	int (*p)(int) = __atomic_load_n(&fwd_bsd_sigpause, __ATOMIC_ACQUIRE);

	if (!p)
		*(void **)&p = lib_fn("sigpause");
	if (!p) {
		errno = ENOSYS;
		return -1;
	}
	return p(mask);
}

/*
 * The jumps out of handlers and __sigsetjmp (src/sig/interpose.c, "jumps
 * out of handlers"): the jumps forward like the rest; __sigsetjmp and
 * setjmp must leave the caller's frame as setjmp sees it, so they are
 * stubs that tail-jump to the library's.
 */
#define FORWARD_JUMP(name)                                                     \
	static void (*fwd_##name)(struct __jmp_buf_tag *, int);                \
	static const struct fwd fwd_ent_##name                                 \
		__attribute__((used, section("pka_fwd"), aligned(8))) = {      \
			#name, (void **)&fwd_##name };                         \
	PKA_EXPORT _Noreturn void name(struct __jmp_buf_tag env[1], int val)   \
	{                                                                      \
		void (*p)(struct __jmp_buf_tag *, int) =                       \
			__atomic_load_n(&fwd_##name, __ATOMIC_ACQUIRE);        \
                                                                               \
		if (!p)                                                        \
			*(void **)&p = lib_fn(#name);                          \
		if (!p)                                                        \
			*(void **)&p = dlsym(RTLD_NEXT, #name);                \
		p(env, val);                                                   \
		__builtin_unreachable();                                       \
	}

FORWARD_JUMP(longjmp)
FORWARD_JUMP(_longjmp)
FORWARD_JUMP(siglongjmp)
FORWARD_JUMP(__longjmp_chk)

__attribute__((visibility("hidden"))) void *pka_fwd_sigsetjmp;
static const struct fwd fwd_ent_sigsetjmp
	__attribute__((used, section("pka_fwd"), aligned(8))) = {
		"__sigsetjmp", &pka_fwd_sigsetjmp };

/* The stubs' slow path (before resolve_fwd()): the library's, or libc's. */
__attribute__((visibility("hidden"))) void *pka_sigsetjmp_slow(void);
void *pka_sigsetjmp_slow(void)
{
	void *p = lib_fn("__sigsetjmp");

	if (!p)
		p = dlsym(RTLD_NEXT, "__sigsetjmp");
	return p;
}

__asm__(".text\n"
	".globl __sigsetjmp\n"
	".type __sigsetjmp, @function\n"
	"__sigsetjmp:\n"
	".Lpka_sigsetjmp:\n"
	"	.cfi_startproc\n"
	"	endbr64\n"
	"	mov pka_fwd_sigsetjmp(%rip), %rax\n"
	"	test %rax, %rax\n"
	"	jz 1f\n"
	"	jmp *%rax\n"
	"1:	push %rdi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	push %rsi\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	sub $8, %rsp\n"
	"	.cfi_adjust_cfa_offset 8\n"
	"	call pka_sigsetjmp_slow\n"
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
	"	jmp .Lpka_sigsetjmp\n"
	".size setjmp, .-setjmp\n");
