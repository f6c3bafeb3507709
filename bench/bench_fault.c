// SPDX-License-Identifier: MIT
/* bench_fault.c - the seeds' fork-and-touch page-fault benchmark, and user-space handled faults per fault-chain configuration. */
#include <errno.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef PK_HAVE_LIBSIGSEGV
#include <sigsegv.h>
#endif

#include "bench.h"
#include "probekit.h"

/*
 * Figures:
 *
 *   pagefault/seed_program  ns_per_fault        read faults on a fresh
 *                                               PROT_READ anonymous mapping,
 *                                               one byte per page, a fork per
 *                                               loop, timed around the loops
 *                                               as the seed's program did,
 *                                               with probekit armed (a range
 *                                               and 4 die handlers)
 *                           ratio_vs_reference  that / the same program in
 *                                               plain C without probekit
 *                                               (seed_reference()), same run
 *   userfault/CASE          ns_per_fault        a PROT_NONE page whose
 *                                               handler mprotects it back,
 *                                               then the access is retried;
 *                                               the loop re-protects it
 *                           ratio_vs_nothing_registered   (probekit cases)
 *   userfault/libsigsegv    ratio_probekit_vs_libsigsegv  nothing_registered
 *                                               / libsigsegv, same run
 *   watch/write             ns_per_hit          a write to a watched 8-byte
 *                                               variable with an empty
 *                                               handler, minus a plain write
 *                                               (hardware breakpoint where
 *                                               available)
 *   watch/write,page        ns_per_hit          the same, page protection +
 *                                               single step (PROBEKIT_WATCH=page)
 *   watch/unwatched_write,page  ns_per_access   a write to another byte of
 *                                               the watched page
 *
 * Userfault cases run each in a child of their own (a clean signal state),
 * interleaved within every run, in reverse order every other run; each
 * child keeps its fastest of UROUNDS short rounds (ucase_measure()).
 * --full runs the seed's own size: 2048 x 2048 pages x 128 loops.
 */

static long page;
static int full;

/* ------------------------------------------------------ pagefault */

/*
 * The seed's program, written the way it was: map, then per loop fork a
 * child that reads one byte of every page and exits; time the whole thing
 * with gettimeofday. Nothing from probekit.
 */
static double seed_reference(long npages, int loops)
{
	struct timeval t0, t1;
	char *p = mmap(NULL, npages * page, PROT_READ,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	long i;
	int l, status;

	if (p == MAP_FAILED)
		return -1;
	gettimeofday(&t0, NULL);
	for (l = 0; l < loops; l++) {
		if (fork() == 0) {
			volatile char c;

			for (i = 0; i < npages; i++)
				c = p[i * page];
			(void)c;
			_exit(0);
		}
		wait(&status);
	}
	gettimeofday(&t1, NULL);
	munmap(p, npages * page);
	return ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_usec - t0.tv_usec) * 1e3) /
	       ((double)npages * loops);
}

static int on_fault_restore(const struct pk_fault *f, void *ctx)
{
	(void)ctx;
	mprotect(f->start, (size_t)page, PROT_READ | PROT_WRITE);
	return PK_FAULT_HANDLED;
}

static int die_pass(struct pk_notifier *nb, unsigned long sig, void *data)
{
	(void)nb;
	(void)sig;
	(void)data;
	return PK_DONE;
}

/* The same measurement through this file's own harness, probekit armed. */
static double seed_probekit(long npages, int loops)
{
	static struct pk_notifier dies[4];
	char *p = mmap(NULL, npages * page, PROT_READ,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	char *guard = mmap(NULL, (size_t)page, PROT_NONE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	double t0, ns;

	if (p == MAP_FAILED || guard == MAP_FAILED)
		return -1;
	pk_fault_register(guard, (size_t)page, on_fault_restore, NULL);
	for (int i = 0; i < 4; i++) {
		dies[i].call = die_pass;
		pk_die_register(&dies[i]);
	}
	t0 = bench_now_ns();
	for (int l = 0; l < loops; l++) {
		pid_t pid = fork();

		if (pid == 0) {
			for (long i = 0; i < npages; i++)
				bench_keep(*(volatile char *)(p + i * page));
			_exit(0);
		}
		waitpid(pid, NULL, 0);
	}
	ns = (bench_now_ns() - t0) / ((double)npages * loops);
	for (int i = 0; i < 4; i++)
		pk_die_unregister(&dies[i]);
	pk_fault_unregister(guard);
	munmap(guard, (size_t)page);
	munmap(p, npages * page);
	return ns;
}

static void bench_pagefault(void)
{
	long npages = full ? 2048L * 2048 : bench_opts.quick ? 32768 : 131072;
	int loops = full ? 128 : bench_opts.quick ? 6 : 12;
	struct bench_series pk = { 0 }, ratio = { 0 };

	printf("pagefault: %ld pages x %d loops per run\n", npages, loops);
	for (int r = 0; r < bench_opts.runs; r++) {
		/* Alternate which goes first, so drift hits both alike. */
		double ref = r & 1 ? seed_reference(npages, loops) : 0;
		double ours = seed_probekit(npages, loops);

		if (!(r & 1))
			ref = seed_reference(npages, loops);

		if (ref <= 0 || ours <= 0) {
			bench_skip("pagefault", "seed_program", "ns_per_fault",
				   "mmap failed");
			bench_skip("pagefault", "seed_program",
				   "ratio_vs_reference", "mmap failed");
			return;
		}
		bench_add(&pk, ours);
		bench_add(&ratio, ours / ref);
	}
	bench_report("pagefault", "seed_program", "ns_per_fault", "ns", &pk);
	bench_report("pagefault", "seed_program", "ratio_vs_reference", "x",
		     &ratio);
}

/* ------------------------------------------------------ userfault */

enum ucase {
	U_NONE,		/* no probekit: a plain sigaction handler */
	U_NOTHING,	/* probekit, only the page's own range */
	U_DIE1, U_DIE4, U_DIE16,
	U_FAULT16,	/* plus 16 ranges on other pages */
	U_NAIVE16,	/* 16 handlers on one chain, each checks its range */
	U_SIGSEGV,	/* GNU libsigsegv */
	U_N
};

static const char *const ucase_names[U_N] = {
	"no_probekit", "nothing_registered", "die_handlers=1",
	"die_handlers=4", "die_handlers=16", "fault_handlers=16",
	"naive_chain=16", "libsigsegv",
};

static char *upage;		/* the page that faults */
static char *others;		/* 16 other pages */

static void plain_handler(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	(void)ctx;
	if ((char *)si->si_addr >= upage && (char *)si->si_addr < upage + page)
		mprotect(upage, (size_t)page, PROT_READ | PROT_WRITE);
}

/* Naive design: every handler is called for every fault, checks its range. */
struct naive {
	struct pk_notifier nb;
	char *start;
};

static int naive_call(struct pk_notifier *nb, unsigned long sig, void *data)
{
	struct naive *n = (struct naive *)nb;
	const struct pk_fault *f = data;

	(void)sig;
	if ((char *)f->addr >= n->start && (char *)f->addr < n->start + page) {
		mprotect(n->start, (size_t)page, PROT_READ | PROT_WRITE);
		return PK_STOP;
	}
	return PK_DONE;
}

#ifdef PK_HAVE_LIBSIGSEGV
static int sigsegv_handler(void *addr, int serious)
{
	(void)serious;
	if ((char *)addr >= upage && (char *)addr < upage + page) {
		mprotect(upage, (size_t)page, PROT_READ | PROT_WRITE);
		return 1;
	}
	return 0;
}
#endif

static int ucase_setup(enum ucase c)
{
	static struct pk_notifier dies[16];
	static struct naive naive[16];
	struct sigaction sa;
	int ndie = c == U_DIE1 ? 1 : c == U_DIE4 ? 4 : c == U_DIE16 ? 16 : 0;

	switch (c) {
	case U_NONE:
		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = plain_handler;
		sa.sa_flags = SA_SIGINFO;
		return sigaction(SIGSEGV, &sa, NULL);
	case U_SIGSEGV:
#ifdef PK_HAVE_LIBSIGSEGV
		return sigsegv_install_handler(sigsegv_handler);
#else
		return -1;
#endif
	case U_NAIVE16:
		/* The page's own handler last, as the unluckiest of 16. */
		for (int i = 0; i < 16; i++) {
			naive[i].nb.call = naive_call;
			naive[i].nb.priority = 16 - i;
			naive[i].start = i == 15 ? upage : others + i * page;
			if (pk_die_register(&naive[i].nb))
				return -1;
		}
		return 0;
	default:
		break;
	}
	if (pk_fault_register(upage, (size_t)page, on_fault_restore, NULL))
		return -1;
	for (int i = 0; i < ndie; i++) {
		dies[i].call = die_pass;
		if (pk_die_register(&dies[i]))
			return -1;
	}
	if (c == U_FAULT16)
		for (int i = 0; i < 16; i++)
			if (pk_fault_register(others + i * page, (size_t)page,
					      on_fault_restore, NULL))
				return -1;
	return 0;
}

/*
 * In a child: set case @c up, time @n faults in UROUNDS rounds, keep the
 * fastest round. Short rounds (about 1 ms) and many of them: on a shared
 * machine a round that another process preempted is simply not the
 * fastest, where with few long rounds every round had some.
 */
#define UROUNDS 40
static double ucase_measure(enum ucase c, long n)
{
	double best = 1e30;
	long per = n / UROUNDS > 10 ? n / UROUNDS : 10;

	if (ucase_setup(c))
		return -1;
	for (int round = -1; round < UROUNDS; round++) {
		double t0 = bench_now_ns();

		for (long i = 0; i < per; i++) {
			mprotect(upage, (size_t)page, PROT_NONE);
			*(volatile char *)upage = (char)i;
		}
		double ns = (bench_now_ns() - t0) / per;

		if (round >= 0 && ns < best)	/* round -1 warms up */
			best = ns;
	}
	return best;
}

static double ucase_run(enum ucase c, long n)
{
	int fds[2];
	double v = -1;
	pid_t pid;

	if (pipe(fds))
		return -1;
	pid = fork();
	if (pid == 0) {
		v = ucase_measure(c, n);
		if (write(fds[1], &v, sizeof(v)) != sizeof(v))
			_exit(1);
		_exit(0);
	}
	close(fds[1]);
	if (read(fds[0], &v, sizeof(v)) != sizeof(v))
		v = -1;
	close(fds[0]);
	waitpid(pid, NULL, 0);
	return v;
}

static void bench_userfault(void)
{
	long n = bench_opts.quick ? 4000 : 12000;
	struct bench_series ns[U_N], ratio[U_N], vs_lib = { 0 };
	int ok[U_N];

	memset(ns, 0, sizeof(ns));
	memset(ratio, 0, sizeof(ratio));
	for (int c = 0; c < U_N; c++)
		ok[c] = 1;
#ifndef PK_HAVE_LIBSIGSEGV
	ok[U_SIGSEGV] = 0;
#endif
	upage = mmap(NULL, 17 * (size_t)page, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	others = upage + page;
	printf("userfault: %d rounds of %ld faults per case per run, fastest "
	       "round\n", UROUNDS, n / UROUNDS);
	for (int r = 0; r < bench_opts.runs; r++) {
		double v[U_N];

		/*
		 * Forward on even runs, backward on odd ones, so that drift
		 * within a run (frequency, the parent's caches) does not always
		 * favour the cases that come last, as libsigsegv did.
		 */
		for (int i = 0; i < U_N; i++) {
			int c = r & 1 ? U_N - 1 - i : i;

			v[c] = ok[c] ? ucase_run((enum ucase)c, n) : -1;
			if (v[c] <= 0)
				ok[c] = 0;
			else
				bench_add(&ns[c], v[c]);
		}
		for (int c = U_NOTHING; c <= U_NAIVE16; c++)
			if (ok[c] && ok[U_NOTHING])
				bench_add(&ratio[c], v[c] / v[U_NOTHING]);
		if (ok[U_SIGSEGV] && ok[U_NOTHING])
			bench_add(&vs_lib, v[U_NOTHING] / v[U_SIGSEGV]);
	}
	for (int c = 0; c < U_N; c++) {
		if (!ok[c]) {
			const char *why = c == U_SIGSEGV
#ifndef PK_HAVE_LIBSIGSEGV
				? "libsigsegv-dev not installed when built"
#else
				? "libsigsegv failed to install its handler"
#endif
				: "setup failed";

			bench_skip("userfault", ucase_names[c], "ns_per_fault", why);
			continue;
		}
		bench_report("userfault", ucase_names[c], "ns_per_fault", "ns",
			     &ns[c]);
	}
	for (int c = U_NOTHING; c <= U_NAIVE16; c++)
		if (ok[c] && ok[U_NOTHING])
			bench_report("userfault", ucase_names[c],
				     "ratio_vs_nothing_registered", "x",
				     &ratio[c]);
	if (ok[U_SIGSEGV] && ok[U_NOTHING])
		bench_report("userfault", "libsigsegv",
			     "ratio_probekit_vs_libsigsegv", "x", &vs_lib);
	else
		bench_skip("userfault", "libsigsegv",
			   "ratio_probekit_vs_libsigsegv",
			   "no libsigsegv figure in this run");
	munmap(upage, 17 * (size_t)page);
}

/* ---------------------------------------------------------- watch */

/* The watched variable and a neighbour on its page (page mechanism). */
static volatile uint64_t wpage_vars[512] __attribute__((aligned(4096)));
#define watched wpage_vars[0]
#define neighbour wpage_vars[64]
static volatile unsigned long watch_hits;

static void on_watch(const struct pk_watch_hit *h, void *ctx)
{
	(void)h;
	(void)ctx;
	watch_hits++;
}

__attribute__((noinline)) static double write_loop(volatile uint64_t *v,
						   long n)
{
	double t0 = bench_now_ns();

	for (long i = 0; i < n; i++)
		*v = (uint64_t)i;
	return (bench_now_ns() - t0) / n;
}

/* One watch case: @page forces page protection; @other writes elsewhere. */
static void watch_case(const char *cas, const char *metric, int page_mech,
		       int other)
{
	long n = bench_opts.quick ? 200 : 2000;
	volatile uint64_t *v = other ? &neighbour : &watched;
	struct bench_series s = { 0 };
	struct pk_watch *w;
	int err;

	if (page_mech)
		setenv("PROBEKIT_WATCH", "page", 1);
	for (int r = 0; r < bench_opts.runs; r++) {
		double plain = write_loop(v, n), hit;

		err = pk_watch_add((void *)&watched, 8, PK_WATCH_WRITE,
				   on_watch, NULL, &w);
		if (err) {
			char why[96];

			snprintf(why, sizeof(why), "pk_watch_add: %s",
				 strerror(-err));
			bench_skip("watch", cas, metric, why);
			goto out;
		}
		watch_hits = 0;
		hit = write_loop(v, n);
		pk_watch_remove(w);
		if (watch_hits != (other ? 0ul : (unsigned long)n)) {
			bench_skip("watch", cas, metric,
				   "wrong number of hits reported");
			goto out;
		}
		bench_add(&s, hit - plain);
	}
	bench_report("watch", cas, metric, "ns", &s);
out:
	unsetenv("PROBEKIT_WATCH");
}

static void bench_watch(void)
{
	watch_case("write", "ns_per_hit", 0, 0);
	watch_case("write,page", "ns_per_hit", 1, 0);
	watch_case("unwatched_write,page", "ns_per_access", 1, 1);
}

int main(int argc, char **argv)
{
	char *args[16];
	int nargs = 0;

	for (int i = 0; i < argc && nargs < 15; i++) {
		if (!strcmp(argv[i], "--full"))
			full = 1;
		else
			args[nargs++] = argv[i];
	}
	args[nargs] = NULL;
	bench_init(nargs, args);
	page = sysconf(_SC_PAGESIZE);
	bench_pagefault();
	bench_userfault();
	bench_watch();
	return 0;
}
