// SPDX-License-Identifier: MIT
/* test_noprobe_repro.c - the reproductions of issue 9, item 2 (probes on what probekit's own trap path called: __errno_location, getpid, syscall), handlers that call a probed function (a miss, not a recursion), errno kept across a thread's first trap and fault. */

/*
 * Each case runs in a child of its own, so that a crash (unfixed: SIGSEGV,
 * a stack overflowed by the trap handler trapping in itself) is reported
 * as the case's failure; alarm() turns a hang into SIGALRM.
 *
 * test_noprobe_repro_slots1 runs it again with PROBEKIT_FAULT_SLOTS=1: one
 * reader slot, so the second thread to trap takes pk_slot_claim()'s
 * second pass (pk_tid_gone(): getpid, tgkill) inside its trap handler.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/ucontext.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "probekit.h"

static volatile int stop;
static volatile long sink;
static unsigned long hits;

static void on_pre(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p;
	(void)r;
	(void)ctx;
	__atomic_add_fetch(&hits, 1, __ATOMIC_RELAXED);
}

static void *set_errno(void *arg)
{
	(void)arg;
	while (!stop) {
		errno = EAGAIN;
		sink += errno;
	}
	return NULL;
}

static void *call_getpid(void *arg)
{
	(void)arg;
	while (!stop)
		sink += getpid();
	return NULL;
}

static void *call_syscall(void *arg)
{
	(void)arg;
	while (!stop)
		sink += syscall(SYS_getpid);
	return NULL;
}

/* A short-lived thread: its first trap claims a reader slot. */
static void *once_syscall(void *arg)
{
	(void)arg;
	sink += syscall(SYS_getpid);
	sink += getpid();
	return NULL;
}

/*
 * Threads running @fn; main registers and unregisters a probe on @sym
 * @n times (and starts a short-lived thread each time, whose first trap
 * is a first read side). Returns 0 if all went well, in the child.
 */
static int loop(const char *sym, unsigned int flags, void *(*fn)(void *),
		int nthreads, int n)
{
	struct pk_probe_opts o = { .sz = sizeof(o), .symbol = sym,
				   .pre = on_pre, .flags = flags };
	pthread_t th[4];
	struct pk_probe *p;
	int bad = 0;

	for (int i = 0; i < nthreads; i++)
		pthread_create(&th[i], NULL, fn, NULL);
	for (int i = 0; i < n && !bad; i++) {
		pthread_t t;

		if (pk_probe_create(&o, &p)) {
			bad = 2;
			break;
		}
		if (pk_probe_register(&p, 1))
			bad = 3;
		pthread_create(&t, NULL, once_syscall, NULL);
		usleep(500);
		pthread_join(t, NULL);
		if (!bad && pk_probe_unregister(&p, 1))
			bad = 4;
		pk_probe_destroy(p);
	}
	stop = 1;
	for (int i = 0; i < nthreads; i++)
		pthread_join(th[i], NULL);
	return bad;
}

/* Probe A's handler calls the function of probe A (and of probe B). */
static struct pk_probe *pa, *pb;
static unsigned long a_runs;

static void calls_probed(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p;
	(void)r;
	(void)ctx;
	__atomic_add_fetch(&a_runs, 1, __ATOMIC_RELAXED);
	sink += getpid();	/* probe A again: nested */
	sink += gettid();	/* probe B: nested */
}

static int nested(unsigned int flags)
{
	struct pk_probe_opts oa = { .sz = sizeof(oa), .symbol = "getpid",
				    .pre = calls_probed, .flags = flags };
	struct pk_probe_opts ob = { .sz = sizeof(ob), .symbol = "gettid",
				    .pre = on_pre, .flags = flags };
	struct pk_probe_info ia = { .sz = sizeof(ia) }, ib = { .sz = sizeof(ib) };
	struct pk_probe *v[2];
	pthread_t th[2];

	if (pk_probe_create(&oa, &pa) || pk_probe_create(&ob, &pb))
		return 2;
	v[0] = pa;
	v[1] = pb;
	if (pk_probe_register(v, 2))
		return 3;
	for (int i = 0; i < 2; i++)
		pthread_create(&th[i], NULL, call_getpid, NULL);
	for (int i = 0; i < 1000; i++)
		sink += getpid();
	stop = 1;
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	if (pk_probe_unregister(v, 2))
		return 4;
	pk_probe_get_info(pa, &ia);
	pk_probe_get_info(pb, &ib);
	printf("  handler runs %lu; missed: getpid %lu, gettid %lu; gettid hits %lu\n",
	       a_runs, ia.missed, ib.missed, hits);
	/* Every run of A's handler met A and B once each, nested: misses. */
	if (a_runs < 1000 || ia.missed != a_runs || ib.missed != a_runs ||
	    hits != 0)
		return 5;
	pk_probe_destroy(pa);
	pk_probe_destroy(pb);
	return 0;
}

/*
 * (e) errno across a thread's first trap and first fault, whose handlers
 * (called by probekit from its signal handler) change it: probekit keeps
 * it through the thread pointer (pk_errno_ptr()), so a wrong address
 * would show here as the handler's value, or as a crash.
 */
__asm__(".pushsection .text\n"
	".globl t_int3_site\n"
	".type t_int3_site, @function\n"
	"t_int3_site:\n"
	"\tint3\n"
	"\tret\n"
	".size t_int3_site, . - t_int3_site\n"
	".popsection\n");
void t_int3_site(void);

static char *e_page;
static int e_bad;

static int e_trap(const struct pk_fault *f, void *ctx)
{
	(void)f;
	(void)ctx;
	errno = 99;
	return PK_FAULT_HANDLED;	/* on after the int3 */
}

/* "mov (%rbx), %eax" (8b 03): skipped. */
static int e_fault(const struct pk_fault *f, void *ctx)
{
	(void)ctx;
	errno = 98;
	((ucontext_t *)f->ucontext)->uc_mcontext.gregs[REG_RIP] += 2;
	return PK_FAULT_HANDLED;
}

static void *e_thread(void *arg)
{
	int v;

	(void)arg;
	errno = 1234;
	t_int3_site();
	if (errno != 1234)
		__atomic_add_fetch(&e_bad, 1, __ATOMIC_RELAXED);
	errno = 4321;
	__asm__ volatile("mov (%%rbx), %%eax" : "=a"(v) : "b"(e_page) : "memory");
	if (errno != 4321)
		__atomic_add_fetch(&e_bad, 1, __ATOMIC_RELAXED);
	return NULL;
}

static int errno_kept(const void *arg)
{
	pthread_t th[16];

	(void)arg;
	e_page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (e_page == MAP_FAILED || pk_trap_register((void *)t_int3_site, e_trap, NULL) ||
	    pk_fault_register(e_page, 4096, e_fault, NULL))
		return 2;
	e_thread(NULL);
	for (int i = 0; i < 16; i++)
		pthread_create(&th[i], NULL, e_thread, NULL);
	for (int i = 0; i < 16; i++)
		pthread_join(th[i], NULL);
	printf("  errno changed on %d of 34 traps and faults\n", e_bad);
	return e_bad ? 5 : 0;
}

/* Run @fn(@arg) in a child; its status, reported. */
static void run_case(const char *name, int (*fn)(const void *), const void *arg)
{
	const char *only = getenv("T_CASE");	/* debugging: cases named so */
	pid_t pid;
	int st = 0;

	if (only && !strstr(name, only))
		return;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		alarm(60);
		_exit(fn(arg));
	}
	waitpid(pid, &st, 0);
	if (WIFSIGNALED(st))
		printf("%s: killed by signal %d (%s)\n", name, WTERMSIG(st),
		       strsignal(WTERMSIG(st)));
	else
		printf("%s: exit %d\n", name, WEXITSTATUS(st));
	ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0, name);
}

struct lp {
	const char *sym;
	unsigned int flags;
	void *(*fn)(void *);
	int nthreads, n;
};

static int run_loop(const void *arg)
{
	const struct lp *l = arg;

	return loop(l->sym, l->flags, l->fn, l->nthreads, l->n);
}

static int run_nested(const void *arg)
{
	return nested(*(const unsigned int *)arg);
}

int main(void)
{
	/* (a) the trap and sweep handlers read errno. */
	static const struct lp errno_jump = { "__errno_location", 0, set_errno, 2, 100 };
	static const struct lp errno_int3 = { "__errno_location", PK_PROBE_F_INT3, set_errno, 2, 100 };
	/* (b) the reader slot claim called getpid. */
	static const struct lp getpid_int3 = { "getpid", PK_PROBE_F_INT3, call_getpid, 2, 50 };
	static const struct lp getpid_jump = { "getpid", 0, call_getpid, 2, 20 };
	/* (c) the reader slot claim called syscall(SYS_gettid). */
	static const struct lp syscall_int3 = { "syscall", PK_PROBE_F_INT3, call_syscall, 2, 50 };
	static const struct lp syscall_jump = { "syscall", 0, call_syscall, 2, 20 };
	static const unsigned int jump = 0, int3 = PK_PROBE_F_INT3;

	setvbuf(stdout, NULL, _IOLBF, 0);
	run_case("(a) __errno_location, jump probe, 100 times", run_loop, &errno_jump);
	run_case("(a) __errno_location, int3 probe, 100 times", run_loop, &errno_int3);
	run_case("(b) getpid, int3 probe", run_loop, &getpid_int3);
	run_case("(b) getpid, jump probe", run_loop, &getpid_jump);
	run_case("(c) syscall, int3 probe", run_loop, &syscall_int3);
	run_case("(c) syscall, jump probe", run_loop, &syscall_jump);
	run_case("(d) jump probe handlers calling probed functions: misses",
		 run_nested, &jump);
	run_case("(d) int3 probe handlers calling probed functions: misses",
		 run_nested, &int3);
	run_case("(e) errno across a thread's first trap and fault: kept",
		 errno_kept, NULL);
	return t_exit();
}
