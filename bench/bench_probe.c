// SPDX-License-Identifier: MIT
/* bench_probe.c - entry, int3, post and return probe hit cost (1..64 threads), memory per probe, arming many probes, vs kernel uprobes. */

/*
 * probe / entry / ns_overhead        a noinline function called in a loop,
 *                                    probed (empty pre-handler) minus
 *                                    unprobed, per call, within each run;
 *                                    the default vector save (the loop's
 *                                    code leaves the ymm upper halves
 *                                    clean, as compiled code does)
 * probe / entry,threads=T            T threads call it; each measures its own
 *                                    CPU time (CLOCK_THREAD_CPUTIME_ID), so
 *                                    threads waiting for one of the 2 cores
 *                                    do not count; overhead as above, mean
 *                                    over threads; ratio_vs_1_thread
 * probe / entry / bytes_per_probe    pk_probe_get_info().bytes
 * probe / int3 / ns_overhead         the same function with an int3 probe
 *                                    (PK_PROBE_F_INT3): SIGTRAP, trap chain,
 *                                    trampoline; probed minus unprobed
 * probe / entry,post / ns_overhead   a jump probe with a pre- and a post-
 *                                    handler (a second stub call, popf)
 * probe / direct_call / ns_per_call  the reference: one unprobed call of
 *                                    bp_target in the loop
 * probe / entry,ymm_live / ns_overhead
 *                                    the entry probe, with the upper half
 *                                    of a ymm register in use at each call
 *                                    (AVX without AVX-512: the stub saves
 *                                    ymm0-15 whole instead of xmm0-15 and
 *                                    vzeroupper, the default entry case);
 *                                    both loops set ymm15 before each call
 * probe / offset / ns_overhead       a jump probe inside a function (bp_mid
 *                                    +3): the full stub, which saves all
 *                                    vector and x87 state (XSAVEC) and the
 *                                    flags
 * probe / return / ns_overhead       the same function with a return probe
 *                                    (empty entry and return handlers),
 *                                    minus unprobed; ratio_vs_unprobed is
 *                                    probed / unprobed time per call;
 *                                    return,threads=1|64 as for entry
 * probe / uretprobe / ns_overhead    the same with a kernel uretprobe;
 *                                    return / ratio_uretprobe_vs_probekit
 * probe_arm / probes=N               N generated functions (bench/
 *                                    gen_probe_funcs.cmake): register all as
 *                                    one batch vs one pk_probe_register()
 *                                    each; no other thread runs
 * probe / entry_gpr, return_gpr      the entry and return cases with
 *                                    PK_PROBE_F_GPR_ONLY (handlers compiled
 *                                    for general registers only: no vector
 *                                    save), each run alternating with the
 *                                    unflagged case; ns_overhead and
 *                                    ratio_vs_direct_call as for those
 * probe / entry|return / ratio_vs_direct_call
 *                                    each run's probe overhead per call
 *                                    (probed minus unprobed) divided by
 *                                    the same run's unprobed time per call
 *                                    of the loop (direct_call): a hit as a
 *                                    multiple of a plain call
 * probe / int3_floor / ns_per_trap   the floor of any int3 probe: an int3
 *                                    executed in a loop with a trivial
 *                                    SIGTRAP handler, no probekit (a child
 *                                    process installs it by the raw
 *                                    rt_sigaction syscall, past probekit's
 *                                    sigaction interposer), per trap
 * probe / uprobe / ns_overhead       the same function with a kernel uprobe
 *                                    (tracefs uprobe_events; mounted if
 *                                    missing; root only) minus unprobed;
 *                                    ratio_uprobe_vs_probekit
 */
#include <elf.h>
#include <stdlib.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "probekit.h"
#include "tracefs.h"

#define NOINLINE __attribute__((noinline))
#define PF_N 10000

extern long (*const pf_table[PF_N])(long);

/* The probed function: its first instruction (5 bytes) stores into the red zone. */
NOINLINE long bp_target(long x)
{
	volatile long v = x;

	return v + 1;
}

/* long bp_mid(long x): x + 1; probed at +3, inside it (plain moves there). */
long bp_mid(long x);
__asm__(".text\n"
	".globl bp_mid\n"
	".type bp_mid,@function\n"
	"bp_mid:\n"
	"	mov %rdi, %rax\n"
	"	lea 1(%rax), %rax\n"
	"	mov %rax, %rdx\n"
	"	ret\n"
	".size bp_mid, .-bp_mid\n");
#define BP_MID_OFF 3

static void empty(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p, (void)r, (void)ctx;
}

/* The same, for probes with PK_PROBE_F_GPR_ONLY: no vector register used. */
#define GPR_ONLY __attribute__((target("general-regs-only")))
GPR_ONLY static void empty_gpr(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p, (void)r, (void)ctx;
}

static int empty_entry(struct pk_retprobe *rp, struct pk_regs *r, void *data,
		       void *ctx)
{
	(void)rp, (void)r, (void)data, (void)ctx;
	return 0;
}

static void empty_ret(struct pk_retprobe *rp, struct pk_regs *r, void *data,
		      void *ctx)
{
	(void)rp, (void)r, (void)data, (void)ctx;
}

GPR_ONLY static int empty_entry_gpr(struct pk_retprobe *rp, struct pk_regs *r,
				    void *data, void *ctx)
{
	(void)rp, (void)r, (void)data, (void)ctx;
	return 0;
}

GPR_ONLY static void empty_ret_gpr(struct pk_retprobe *rp, struct pk_regs *r,
				   void *data, void *ctx)
{
	(void)rp, (void)r, (void)data, (void)ctx;
}

static double thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/*
 * The per-call loops count this thread's CPU time, not wall time: on a
 * shared machine a preemption in the probed or the plain loop would land
 * in the difference (the ratios' spread was 2x here with wall time).
 */
static double loop_ns(unsigned long n)
{
	double t0 = thread_cpu_ns();

	for (unsigned long i = 0; i < n; i++)
		bench_keep(bp_target((long)i));
	return (thread_cpu_ns() - t0) / (double)n;
}

/*
 * @n calls of @fn (through a volatile pointer: the same call in both
 * loops); @ymm: ymm15's upper half made non-zero before each call.
 */
static double loop_fn_ns(long (*fn)(long), unsigned long n, int ymm)
{
	long (*volatile f)(long) = fn;
	double t0 = thread_cpu_ns();

	for (unsigned long i = 0; i < n; i++) {
		if (ymm)
			__asm__ volatile("vpcmpeqd %%ymm15, %%ymm15, %%ymm15"
					 ::: "xmm15");
		bench_keep(f((long)i));
	}
	return (thread_cpu_ns() - t0) / (double)n;
}

struct tjob {
	pthread_barrier_t *bar;
	unsigned long n;
	double ns_per_call;
};

static void *thread_loop(void *arg)
{
	struct tjob *j = arg;
	double t0;

	pthread_barrier_wait(j->bar);
	t0 = thread_cpu_ns();
	for (unsigned long i = 0; i < j->n; i++)
		bench_keep(bp_target((long)i));
	j->ns_per_call = (thread_cpu_ns() - t0) / (double)j->n;
	return NULL;
}

/* Mean per-call CPU time of @t threads calling bp_target @n times each. */
static double threads_ns(int t, unsigned long n)
{
	pthread_t th[64];
	struct tjob j[64];
	pthread_barrier_t bar;
	double sum = 0;

	pthread_barrier_init(&bar, NULL, (unsigned int)t);
	for (int i = 0; i < t; i++) {
		j[i] = (struct tjob){ &bar, n, 0 };
		pthread_create(&th[i], NULL, thread_loop, &j[i]);
	}
	for (int i = 0; i < t; i++) {
		pthread_join(th[i], NULL);
		sum += j[i].ns_per_call;
	}
	pthread_barrier_destroy(&bar);
	return sum / t;
}

static struct pk_probe *make_probe_opts(void *addr, unsigned int flags,
					 pk_probe_handler_fn post)
{
	PK_OPTS(pk_probe_opts, o, .addr = addr,
		.pre = flags & PK_PROBE_F_GPR_ONLY ? empty_gpr : empty,
		.flags = flags, .post = post);
	struct pk_probe *p = NULL;
	int err = pk_probe_create(&o, &p);

	if (err) {
		fprintf(stderr, "bench_probe: pk_probe_create(%p): %d\n", addr, err);
		exit(1);
	}
	return p;
}

static struct pk_probe *make_probe(void *addr)
{
	return make_probe_opts(addr, 0, NULL);
}

static void must(int err, const char *what)
{
	if (err) {
		fprintf(stderr, "bench_probe: %s: %d\n", what, err);
		exit(1);
	}
}

/*
 * One run: @n calls of bp_target unprobed, then with @p armed; adds the
 * per-call difference to @s. @what names the probe in a failure.
 */
static void add_overhead_ratio(struct pk_probe *p, unsigned long n,
			       struct bench_series *s, struct bench_series *ratio,
			       const char *what)
{
	double plain = loop_ns(n), probed;

	must(pk_probe_register(&p, 1), what);
	probed = loop_ns(n);
	must(pk_probe_unregister(&p, 1), what);
	bench_add(s, probed - plain);
	if (ratio && plain > 0)
		bench_add(ratio, (probed - plain) / plain);
}

static void add_overhead(struct pk_probe *p, unsigned long n,
			 struct bench_series *s, const char *what)
{
	add_overhead_ratio(p, n, s, NULL, what);
}

/* As add_overhead(), calling @fn by loop_fn_ns(). */
static void add_overhead_fn(struct pk_probe *p, long (*fn)(long),
			    unsigned long n, int ymm, struct bench_series *s,
			    const char *what)
{
	double plain = loop_fn_ns(fn, n, ymm), probed;

	must(pk_probe_register(&p, 1), what);
	probed = loop_fn_ns(fn, n, ymm);
	must(pk_probe_unregister(&p, 1), what);
	bench_add(s, probed - plain);
}

/* @out gets each run's @num / the median of @den, where that is positive. */
static void add_ratios(const struct bench_series *num,
		       const struct bench_series *den, struct bench_series *out)
{
	double d = bench_median(den);

	for (int i = 0; i < num->n; i++)
		if (d > 0)
			bench_add(out, num->v[i] / d);
}

/* ------------------------------------------------------------- uprobes */

/*
 * Where @addr lies in its file, as uprobe_events wants it: the offset
 * within the PT_LOAD segment that maps it. The library names the file
 * (pk_sym_lookup) but has no file offsets to give.
 */
struct find_off {
	uintptr_t addr;
	long off;
};

static int find_off_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct find_off *f = arg;

	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t s = info->dlpi_addr + ph->p_vaddr;

		if (ph->p_type == PT_LOAD && f->addr >= s && f->addr < s + ph->p_filesz) {
			f->off = (long)(ph->p_offset + (f->addr - s));
			return 1;
		}
	}
	return 0;
}

static int write_file(const char *dir, const char *name, const char *text,
		      int append)
{
	char p[256];
	int fd, ok;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	fd = open(p, O_WRONLY | (append ? O_APPEND : O_TRUNC));
	if (fd < 0)
		return -errno;
	ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
	close(fd);
	return ok ? 0 : -EIO;
}

/*
 * A kernel uprobe (@kind 'p') or uretprobe ('r') on bp_target, per hit
 * minus unprobed. Returns the reason it cannot run, or NULL with @over
 * filled.
 */
static const char *bench_uprobe(char kind, struct bench_series *over,
				unsigned long n)
{
	struct find_off f = { (uintptr_t)bp_target, -1 };
	const char *dir = TRACEFS_DIR, *why = tracefs_uprobes_unusable();
	char ev[700], grp[32], del[64], en[96];
	struct pk_sym sym;

	if (why)
		return why;
	if (pk_sym_lookup("bp_target", &sym) || sym.addr != f.addr)
		return "pk_sym_lookup does not find bp_target";
	dl_iterate_phdr(find_off_cb, &f);
	if (f.off < 0)
		return "cannot find the function's file offset";
	/* A group per process: a parallel run must not remove our event. */
	snprintf(grp, sizeof(grp), "pkbench%d", (int)getpid());
	snprintf(ev, sizeof(ev), "%c:%s/bp_target %s:0x%lx\n", kind, grp,
		 sym.object, f.off);
	snprintf(del, sizeof(del), "-:%s/bp_target\n", grp);
	snprintf(en, sizeof(en), "events/%s/bp_target/enable", grp);
	if (write_file(dir, "uprobe_events", ev, 1))
		return "writing uprobe_events failed";
	if (write_file(dir, en, "1", 0)) {
		write_file(dir, "uprobe_events", del, 1);
		return "enabling the uprobe failed";
	}
	for (int r = 0; r < bench_opts.runs; r++) {
		double probed, plain;

		write_file(dir, en, "1", 0);
		probed = loop_ns(n);
		write_file(dir, en, "0", 0);
		plain = loop_ns(n);
		bench_add(over, probed - plain);
	}
	write_file(dir, en, "0", 0);
	write_file(dir, "uprobe_events", del, 1);
	return NULL;
}

/* ----------------------------------------------------------- int3 floor */

/*
 * The kernel's own sigaction layout, and a restorer: installed by the raw
 * syscall, the handler is the kernel's round trip and nothing of libc's or
 * probekit's (whose interposer owns SIGTRAP in a program linking it).
 */
struct kern_sigaction {
	void (*handler)(int);
	unsigned long flags;
	void (*restorer)(void);
	uint64_t mask;
};

#define KSA_RESTORER 0x04000000UL

void bp_floor_restorer(void);
__asm__(".text\n"
	".globl bp_floor_restorer\n"
	".type bp_floor_restorer,@function\n"
	"bp_floor_restorer:\n"
	"	mov $15, %eax\n"		/* rt_sigreturn */
	"	syscall\n"
	".size bp_floor_restorer, .-bp_floor_restorer\n");

static void floor_handler(int sig)
{
	(void)sig;
}

/*
 * @s gets one figure per run: ns per int3 trap with a trivial handler,
 * measured in a child (the handler it installs is never seen here).
 * Returns why it cannot run, or NULL.
 */
static const char *bench_int3_floor(unsigned long n, struct bench_series *s)
{
	double v[BENCH_MAX_RUNS];
	int fds[2], status, runs = bench_opts.runs;
	ssize_t got;
	pid_t pid;

	if (pipe(fds))
		return "pipe failed";
	pid = fork();
	if (pid < 0)
		return "fork failed";
	if (pid == 0) {
		struct kern_sigaction ka = {
			.handler = floor_handler,
			.flags = KSA_RESTORER | SA_NODEFER,
			.restorer = bp_floor_restorer,
		};

		close(fds[0]);
		if (syscall(SYS_rt_sigaction, SIGTRAP, &ka, NULL, 8))
			_exit(1);
		for (int r = 0; r < runs; r++) {
			double t0 = bench_now_ns();

			for (unsigned long i = 0; i < n; i++)
				__asm__ volatile("int3" ::: "memory");
			v[r] = (bench_now_ns() - t0) / (double)n;
		}
		_exit(write(fds[1], v, sizeof(double) * runs) ==
		      (ssize_t)(sizeof(double) * runs) ? 0 : 1);
	}
	close(fds[1]);
	got = read(fds[0], v, sizeof(double) * runs);
	close(fds[0]);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status) || got != (ssize_t)(sizeof(double) * runs))
		return "the child measuring int3 traps failed";
	for (int r = 0; r < runs; r++)
		bench_add(s, v[r]);
	return NULL;
}

/* ---------------------------------------------------------------- main */

static double ms_since(double t0)
{
	return (bench_now_ns() - t0) / 1e6;
}

int main(int argc, char **argv)
{
	struct bench_series entry = { 0 }, th[4] = { 0 }, ratio64 = { 0 },
			    bytes = { 0 }, up = { 0 }, up_ratio = { 0 },
			    ret = { 0 }, uret = { 0 }, uret_ratio = { 0 },
			    entry_ratio = { 0 };
	static const int tcount[4] = { 1, 2, 8, 64 };
	unsigned long n, tn;
	struct pk_probe *p;
	struct pk_probe_info info = { .sz = sizeof(info) };
	const char *why;

	bench_init(argc, argv);
	n = bench_opts.quick ? 2000000 : 20000000;
	tn = bench_opts.quick ? 100000 : 1000000;
	printf("bench_probe: entry probes (empty pre-handler) on a noinline function\n");

	p = make_probe((void *)bp_target);
	/* Before any probekit signal use: the floor under every int3 probe. */
	{
		struct bench_series fl = { 0 };

		why = bench_int3_floor(bench_opts.quick ? 20000 : 200000, &fl);
		if (why)
			bench_skip("probe", "int3_floor", "ns_per_trap", why);
		else
			bench_report("probe", "int3_floor", "ns_per_trap", "ns", &fl);
	}
	/* With and without PK_PROBE_F_GPR_ONLY, alternating within each run. */
	{
		struct pk_probe *g = make_probe_opts((void *)bp_target,
						     PK_PROBE_F_GPR_ONLY, NULL);
		struct bench_series gpr = { 0 }, gpr_ratio = { 0 };

		for (int r = 0; r < bench_opts.runs; r++) {
			add_overhead_ratio(p, n, &entry, &entry_ratio, "(un)register");
			add_overhead_ratio(g, n, &gpr, &gpr_ratio,
					   "(un)register, GPR only");
		}
		pk_probe_destroy(g);
		pk_probe_get_info(p, &info);
		bench_add(&bytes, (double)info.bytes);
		bench_report("probe", "entry", "ns_overhead", "ns", &entry);
		bench_report("probe", "entry", "ratio_vs_direct_call", "x", &entry_ratio);
		bench_report("probe", "entry", "bytes_per_probe", "B", &bytes);
		bench_report("probe", "entry_gpr", "ns_overhead", "ns", &gpr);
		bench_report("probe", "entry_gpr", "ratio_vs_direct_call", "x",
			     &gpr_ratio);
	}

	/* An int3 probe costs a signal per hit: fewer calls. */
	{
		struct bench_series int3 = { 0 }, post = { 0 };
		struct pk_probe *q = make_probe_opts((void *)bp_target,
						     PK_PROBE_F_INT3, NULL);
		unsigned long n3 = bench_opts.quick ? 20000 : 200000;

		for (int r = 0; r < bench_opts.runs; r++)
			add_overhead(q, n3, &int3, "(un)register int3");
		pk_probe_destroy(q);
		bench_report("probe", "int3", "ns_overhead", "ns", &int3);
		q = make_probe_opts((void *)bp_target, 0, empty);
		for (int r = 0; r < bench_opts.runs; r++)
			add_overhead(q, n, &post, "(un)register post");
		pk_probe_destroy(q);
		bench_report("probe", "entry,post", "ns_overhead", "ns", &post);
	}
	/* The vector save paths (tramp.h, "Vector state"), and a plain call. */
	{
		struct bench_series direct = { 0 }, ymm = { 0 }, mid = { 0 };
		PK_OPTS(pk_probe_opts, mo, .addr = (void *)bp_mid,
			.offset = BP_MID_OFF, .pre = empty);
		struct pk_probe *q = NULL;

		for (int r = 0; r < bench_opts.runs; r++)
			bench_add(&direct, loop_ns(n));
		bench_report("probe", "direct_call", "ns_per_call", "ns", &direct);
		if (__builtin_cpu_supports("avx")) {
			for (int r = 0; r < bench_opts.runs; r++)
				add_overhead_fn(p, bp_target, n, 1, &ymm,
						"(un)register, ymm live");
			bench_report("probe", "entry,ymm_live", "ns_overhead", "ns",
				     &ymm);
		} else {
			bench_skip("probe", "entry,ymm_live", "ns_overhead",
				   "the CPU has no AVX");
		}
		must(pk_probe_create(&mo, &q), "pk_probe_create(bp_mid+3)");
		for (int r = 0; r < bench_opts.runs; r++)
			add_overhead_fn(q, bp_mid, n, 0, &mid, "(un)register offset");
		pk_probe_destroy(q);
		bench_report("probe", "offset", "ns_overhead", "ns", &mid);
	}
	/* Return probes: entry and return handlers on every call. */
	{
		PK_OPTS(pk_retprobe_opts, ro, .addr = (void *)bp_target,
			.entry = empty_entry, .ret = empty_ret);
		PK_OPTS(pk_retprobe_opts, rog, .addr = (void *)bp_target,
			.entry = empty_entry_gpr, .ret = empty_ret_gpr,
			.flags = PK_PROBE_F_GPR_ONLY);
		struct bench_series ret_ratio = { 0 }, ret_call = { 0 },
				    gpr = { 0 }, gpr_call = { 0 };
		struct pk_retprobe *rp = NULL, *rg = NULL;

		must(pk_retprobe_create(&ro, &rp), "pk_retprobe_create");
		must(pk_retprobe_create(&rog, &rg), "pk_retprobe_create, GPR only");
		/* With and without PK_PROBE_F_GPR_ONLY, alternating within each run. */
		for (int r = 0; r < bench_opts.runs; r++) {
			double plain = loop_ns(n), probed;

			must(pk_retprobe_register(&rp, 1), "register return probe");
			probed = loop_ns(n);
			must(pk_retprobe_unregister(&rp, 1), "unregister return probe");
			bench_add(&ret, probed - plain);
			bench_add(&ret_ratio, probed / plain);
			if (plain > 0)
				bench_add(&ret_call, (probed - plain) / plain);
			plain = loop_ns(n);
			must(pk_retprobe_register(&rg, 1), "register return probe, GPR only");
			probed = loop_ns(n);
			must(pk_retprobe_unregister(&rg, 1), "unregister return probe, GPR only");
			bench_add(&gpr, probed - plain);
			if (plain > 0)
				bench_add(&gpr_call, (probed - plain) / plain);
		}
		pk_retprobe_destroy(rg);
		bench_report("probe", "return_gpr", "ns_overhead", "ns", &gpr);
		bench_report("probe", "return_gpr", "ratio_vs_direct_call", "x", &gpr_call);
		/* Nothing shared is written on a hit: flat with threads too. */
		{
			struct bench_series t1 = { 0 }, t64 = { 0 }, r64 = { 0 };

			for (int r = 0; r < bench_opts.runs; r++) {
				double p1 = threads_ns(1, tn), p64 = threads_ns(64, tn);
				double o1, o64;

				must(pk_retprobe_register(&rp, 1), "register return probe");
				o1 = threads_ns(1, tn) - p1;
				o64 = threads_ns(64, tn) - p64;
				must(pk_retprobe_unregister(&rp, 1), "unregister return probe");
				bench_add(&t1, o1);
				bench_add(&t64, o64);
				if (o1 > 0)
					bench_add(&r64, o64 / o1);
			}
			bench_report("probe", "return,threads=1", "ns_overhead", "ns", &t1);
			bench_report("probe", "return,threads=64", "ns_overhead", "ns", &t64);
			bench_report("probe", "return,threads=64", "ratio_vs_1_thread", "x", &r64);
		}
		pk_retprobe_destroy(rp);
		bench_report("probe", "return", "ns_overhead", "ns", &ret);
		bench_report("probe", "return", "ratio_vs_unprobed", "x", &ret_ratio);
		bench_report("probe", "return", "ratio_vs_direct_call", "x", &ret_call);
	}

	for (int r = 0; r < bench_opts.runs; r++) {
		double o1 = 0;

		for (int k = 0; k < 4; k++) {
			double plain = threads_ns(tcount[k], tn), probed, o;

			must(pk_probe_register(&p, 1), "register");
			probed = threads_ns(tcount[k], tn);
			must(pk_probe_unregister(&p, 1), "unregister");
			o = probed - plain;
			bench_add(&th[k], o);
			if (k == 0)
				o1 = o;
			else if (k == 3 && o1 > 0)
				bench_add(&ratio64, o / o1);
		}
	}
	for (int k = 0; k < 4; k++) {
		char cas[32];

		snprintf(cas, sizeof(cas), "entry,threads=%d", tcount[k]);
		bench_report("probe", cas, "ns_overhead", "ns", &th[k]);
	}
	bench_report("probe", "entry,threads=64", "ratio_vs_1_thread", "x", &ratio64);

	/*
	 * Kernel uprobes, one event at a time, each removed before the next:
	 * never two users of uprobe_events at once (see tests/tracefs.h). Not
	 * with --quick (the test suite's smoke run): uprobe events used by two
	 * processes at once (this and test_probe_zlib with PK_TEST_UPROBES=1
	 * in a parallel ctest) left tasks in D state in the kernel's uprobe
	 * code on the 6.18 VM this was written on.
	 */
	why = bench_opts.quick ? "not run with --quick (kernel uprobe events "
				 "hung when two processes used them at once)"
			       : bench_uprobe('p', &up, 100000);
	if (why) {
		bench_skip("probe", "uprobe", "ns_overhead", why);
		bench_skip("probe", "entry", "ratio_uprobe_vs_probekit", why);
	} else {
		bench_report("probe", "uprobe", "ns_overhead", "ns", &up);
		add_ratios(&up, &entry, &up_ratio);
		bench_report("probe", "entry", "ratio_uprobe_vs_probekit", "x", &up_ratio);
	}
	why = why ? why : bench_uprobe('r', &uret, 100000);
	if (why) {
		bench_skip("probe", "uretprobe", "ns_overhead", why);
		bench_skip("probe", "return", "ratio_uretprobe_vs_probekit", why);
	} else {
		bench_report("probe", "uretprobe", "ns_overhead", "ns", &uret);
		add_ratios(&uret, &ret, &uret_ratio);
		bench_report("probe", "return", "ratio_uretprobe_vs_probekit", "x",
			     &uret_ratio);
	}
	pk_probe_destroy(p);

	/* Arming many probes: one batch vs one commit each. */
	{
		static const size_t counts[2] = { 256, PF_N };
		struct pk_probe **ps = calloc(PF_N, sizeof(*ps));

		for (size_t i = 0; i < PF_N; i++)
			ps[i] = make_probe((void *)pf_table[i]);
		for (int k = 0; k < 2; k++) {
			struct bench_series batch = { 0 }, one = { 0 };
			size_t cnt = counts[k];
			/* Medians of at least 5 runs: arming times vary
			 * (--quick, the smoke test: one). */
			int runs = bench_opts.quick ? 1 :
				   bench_opts.runs < 5 ? 5 : bench_opts.runs;
			char cas[32];

			for (int r = 0; r < runs; r++) {
				double t0 = bench_now_ns();

				must(pk_probe_register(ps, cnt), "register batch");
				bench_add(&batch, ms_since(t0));
				if (pf_table[7](1) != 8)
					must(-EINVAL, "probed result");
				must(pk_probe_unregister(ps, cnt), "unregister batch");
				t0 = bench_now_ns();
				for (size_t i = 0; i < cnt; i++)
					must(pk_probe_register(&ps[i], 1), "register one");
				bench_add(&one, ms_since(t0));
				must(pk_probe_unregister(ps, cnt), "unregister batch");
			}
			snprintf(cas, sizeof(cas), "probes=%zu", cnt);
			bench_report("probe_arm", cas, "batch_ms", "ms", &batch);
			bench_report("probe_arm", cas, "one_by_one_ms", "ms", &one);
		}
		for (size_t i = 0; i < PF_N; i++)
			pk_probe_destroy(ps[i]);
		free(ps);
	}
	return 0;
}
