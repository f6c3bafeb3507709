// SPDX-License-Identifier: MIT
/* test_noprobe_all.c - every libc (and other) function probekit's trap, fault and sweep paths could reach, probed (jump, int3, return) while threads run it and take traps and faults: each probe is refused or works, and the process never dies (issue 9, item 2). */

/*
 * The list: check-noprobe.sh --list on the library this test loaded (every
 * function pk_noprobe_text calls through the PLT), plus the fixed part in
 * noprobe_drivers.h (__errno_location, getpid, gettid, syscall, the mem*
 * functions, the signal functions). A name from the library without a
 * driver fails the test: add one.
 *
 * Four threads loop over every driver, and between rounds take:
 *   - a handled fault (a PROT_NONE page registered with pk_fault_register(),
 *     whose handler calls getpid() and errno: nested hits in a SIGSEGV
 *     handler) - the fault entry, its reader slot claim on a thread's
 *     first fault;
 *   - an int3 of their own, which no probe owns: text's and the fault
 *     layer's trap path, the die chain (a notifier is registered), then the
 *     program's own SIGTRAP handler, through call_prev();
 *   - with PROBEKIT_WATCH=page (test_noprobe_all_page), a write to a page
 *     watch: the watch's fault and step code (mprotect, mmap, Zydis).
 * Meanwhile main registers and unregisters, for each function, a jump
 * probe, an int3 probe and a return probe (each registration runs a thread
 * sweep and, for a jump probe, a commit with transient int3s), then all of
 * one kind at once. A forked child checks take_default(): with probes on
 * sigaction, sigemptyset, raise and memset it dies of the SIGBUS it sends
 * itself, not of a recursion.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ucontext.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "noprobe_drivers.h"
#include "probekit.h"

#define NTHREADS 4
#define MAXT 96

static const char *names[MAXT];
static const struct driver *drv[MAXT];
static size_t ntargets;

static volatile int stop;
static unsigned long hits, rets, own_traps, faults, watch_hits;
static char *fault_page, *watch_page;

static void on_pre(struct pk_probe *p, struct pk_regs *r, void *ctx)
{
	(void)p;
	(void)r;
	(void)ctx;
	__atomic_add_fetch(&hits, 1, __ATOMIC_RELAXED);
}

static void on_ret(struct pk_retprobe *rp, struct pk_regs *r, void *data,
		   void *ctx)
{
	(void)rp;
	(void)r;
	(void)data;
	(void)ctx;
	__atomic_add_fetch(&rets, 1, __ATOMIC_RELAXED);
}

/* "mov (%rbx), %eax" (8b 03) faulted: skip it; calls probed functions. */
static int on_fault(const struct pk_fault *f, void *ctx)
{
	ucontext_t *uc = f->ucontext;

	(void)ctx;
	errno = EAGAIN;
	d_sink += getpid();
	uc->uc_mcontext.gregs[REG_RIP] += 2;
	__atomic_add_fetch(&faults, 1, __ATOMIC_RELAXED);
	return PK_FAULT_HANDLED;
}

/* The program's own SIGTRAP handler, installed before probekit's. */
static void own_trap(int sig)
{
	(void)sig;
	__atomic_add_fetch(&own_traps, 1, __ATOMIC_RELAXED);
}

static int on_die(struct pk_notifier *nb, unsigned long action, void *data)
{
	(void)nb;
	(void)action;
	(void)data;
	return PK_DONE;
}

static void on_watch(const struct pk_watch_hit *hit, void *ctx)
{
	(void)hit;
	(void)ctx;
	__atomic_add_fetch(&watch_hits, 1, __ATOMIC_RELAXED);
}

static void *worker(void *arg)
{
	long id = (long)arg;

	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		int v;

		for (size_t i = 0; i < ntargets; i++)
			drv[i]->run();
		__asm__ volatile("mov (%%rbx), %%eax"
				 : "=a"(v)
				 : "b"(fault_page)
				 : "memory");
		__asm__ volatile("int3" ::: "memory");
		if (watch_page)
			__atomic_store_n((int *)watch_page + id, v + 1,
					 __ATOMIC_RELAXED);
	}
	return NULL;
}

/* Errors a probe on one of these may be refused with (pk_probe_create.3). */
static int refusal_ok(int err)
{
	return err == -EINVAL || err == -EPERM || err == -ENOTSUP ||
	       err == -EBUSY;
}

enum kind { K_JUMP, K_INT3, K_RET, K_N };
static const char *const kind_names[K_N] = { "jump", "int3", "return" };

/* Where to probe @name: its symbol, or for an IFUNC the implementation. */
static int create(const char *name, enum kind k, void **out)
{
	struct pk_probe_opts po = { .sz = sizeof(po), .symbol = name,
				    .pre = on_pre,
				    .flags = k == K_INT3 ? PK_PROBE_F_INT3 : 0 };
	struct pk_retprobe_opts ro = { .sz = sizeof(ro), .symbol = name,
				       .ret = on_ret };
	int err;

	for (int attempt = 0; attempt < 2; attempt++) {
		if (k == K_RET)
			err = pk_retprobe_create(&ro, (struct pk_retprobe **)out);
		else
			err = pk_probe_create(&po, (struct pk_probe **)out);
		if (err != -EINVAL || attempt)
			break;
		/* An IFUNC (memcpy): dlsym gives what the program calls. */
		po.symbol = ro.symbol = NULL;
		po.addr = ro.addr = dlsym(RTLD_DEFAULT, name);
		if (!po.addr)
			break;
	}
	return err;
}

static int reg(enum kind k, void **v, size_t n)
{
	return k == K_RET ? pk_retprobe_register((struct pk_retprobe **)v, n)
			  : pk_probe_register((struct pk_probe **)v, n);
}

static int unreg(enum kind k, void **v, size_t n)
{
	return k == K_RET ? pk_retprobe_unregister((struct pk_retprobe **)v, n)
			  : pk_probe_unregister((struct pk_probe **)v, n);
}

static void destroy(enum kind k, void *p)
{
	if (k == K_RET)
		pk_retprobe_destroy(p);
	else
		pk_probe_destroy(p);
}

static void add_target(const char *name)
{
	for (size_t i = 0; i < ntargets; i++)
		if (!strcmp(names[i], name))
			return;
	if (ntargets == MAXT)
		return;
	names[ntargets] = strdup(name);
	drv[ntargets] = driver_of(name);
	ntargets++;
}

/* check-noprobe.sh --list on the library we run with. */
static int derive_list(void)
{
	const char *src = getenv("PK_SOURCE_DIR");
	char cmd[4096], line[256];
	Dl_info di;
	FILE *f;
	int n = 0;

	if (!src || !dladdr((void *)pk_version, &di) || !di.dli_fname)
		return -1;
	snprintf(cmd, sizeof(cmd), "sh '%s/tests/check-noprobe.sh' --list '%s'",
		 src, di.dli_fname);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		/* The sanitizers' runtime: probing it breaks the sanitizer. */
		if (!line[0] || !strncmp(line, "__asan_", 7) ||
		    !strncmp(line, "__ubsan_", 8) ||
		    !strncmp(line, "__sanitizer_", 12))
			continue;
		add_target(line);
		n++;
	}
	return pclose(f) == 0 ? n : -1;
}

/* take_default() with its callees probed: dies of its own SIGBUS. */
static void check_take_default(void)
{
	static const char *const in_default[] = { "sigaction", "sigemptyset",
						   "raise", "memset" };

	for (int k = K_JUMP; k <= K_INT3; k++) {
		pid_t pid = fork();
		int st = 0;

		if (pid == 0) {
			void *p[4];
			size_t n = 0;

			signal(SIGBUS, SIG_DFL);
			for (size_t i = 0; i < 4; i++)
				if (!create(in_default[i], k, &p[n]))
					n++;
			if (!n || reg(k, p, n))
				_exit(3);
			/* The parent's range hooks SIGBUS: probekit's handler
			   takes it, finds it nobody's, takes the default. */
			kill(getpid(), SIGBUS);
			_exit(5);
		}
		waitpid(pid, &st, 0);
		ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS,
			    kind_names[k]);
		if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGBUS)
			fprintf(stderr, "take_default (%s probes): status %#x\n",
				kind_names[k], st);
	}
}

int main(void)
{
	pthread_t th[NTHREADS];
	struct pk_notifier die_nb = { .call = on_die };
	struct pk_watch *w = NULL;
	void *all[MAXT];
	size_t nall, worked[K_N] = { 0 }, refused[K_N] = { 0 };
	double secs = t_stress_seconds(0), start = t_now();
	int derived, err, rounds = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGTRAP, own_trap);	/* before probekit has a handler */
	if (drivers_init())
		SKIP("drivers_init: %s", strerror(errno));
	for (size_t i = 0; i < sizeof(drivers) / sizeof(drivers[0]); i++)
		add_target(drivers[i].name);
	derived = derive_list();
	ASSERT_GE(derived, 1, "functions derived by check-noprobe.sh --list");
	printf("probing %zu functions (%d named by check-noprobe.sh --list):",
	       ntargets, derived);
	for (size_t i = 0; i < ntargets; i++)
		printf(" %s", names[i]);
	printf("\n");
	if (getenv("T_ONLY")) {	/* debugging: T_ONLY=name probes that one */
		for (size_t i = 0; i < ntargets; i++)
			if (!strcmp(names[i], getenv("T_ONLY"))) {
				names[0] = names[i];
				drv[0] = drv[i];
				ntargets = 1;
			}
	}
	for (size_t i = 0; i < ntargets; i++)
		if (!ASSERT_TRUE(drv[i], "a driver for each function"))
			fprintf(stderr, "no driver for %s: add one to "
					"tests/noprobe_drivers.h\n", names[i]);
	if (t_failed)
		return t_exit();

	fault_page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS,
			  -1, 0);
	ASSERT_TRUE(fault_page != MAP_FAILED, "mmap");
	ASSERT_OK(pk_fault_register(fault_page, 4096, on_fault, NULL),
		  "pk_fault_register");
	ASSERT_OK(pk_die_register(&die_nb), "pk_die_register");
	{
		const char *mech = getenv("PROBEKIT_WATCH");

		if (mech && !strcmp(mech, "page")) {
			watch_page = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
					  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			ASSERT_OK(pk_watch_add(watch_page, 4, PK_WATCH_WRITE,
					       on_watch, NULL, &w),
				  "pk_watch_add");
		}
	}

	check_take_default();

	for (long i = 0; i < NTHREADS; i++)
		pthread_create(&th[i], NULL, worker, (void *)i);

	do {
		/* One function at a time, each kind. */
		for (size_t i = 0; i < ntargets; i++)
			for (int k = 0; k < K_N; k++) {
				void *p;

				err = create(names[i], k, &p);
				if (!strcmp(names[i], "pthread_sigmask") &&
				    !ASSERT_EQ(err, -EPERM,
					       "pthread_sigmask refused (probe/noprobe.c)"))
					fprintf(stderr, "%s probe\n", kind_names[k]);
				if (err && !rounds)
					printf("%s %s: refused, %s\n", kind_names[k],
					       names[i], strerror(-err));
				if (err) {
					if (!ASSERT_TRUE(refusal_ok(err),
							 "create: refused with a documented error"))
						fprintf(stderr, "%s %s: %d\n",
							kind_names[k], names[i], err);
					if (!rounds)
						refused[k]++;
					continue;
				}
				err = reg(k, &p, 1);
				if (err) {
					if (!ASSERT_TRUE(refusal_ok(err),
							 "register: refused with a documented error"))
						fprintf(stderr, "%s %s: %d\n",
							kind_names[k], names[i], err);
					if (!rounds)
						refused[k]++;
					destroy(k, p);
					continue;
				}
				if (!rounds)
					worked[k]++;
				usleep(2000);
				if (!ASSERT_OK(unreg(k, &p, 1), "unregister"))
					fprintf(stderr, "%s %s\n", kind_names[k],
						names[i]);
				destroy(k, p);
			}
		/* All of one kind at once. */
		for (int k = 0; k < K_N; k++) {
			nall = 0;
			for (size_t i = 0; i < ntargets; i++)
				if (!create(names[i], k, &all[nall]))
					nall++;
			/* Several may share one implementation: one at a time then. */
			if (nall && !reg(k, all, nall)) {
				usleep(20000);
				ASSERT_OK(unreg(k, all, nall), "unregister all");
			}
			for (size_t i = 0; i < nall; i++)
				destroy(k, all[i]);
		}
		rounds++;
	} while (rounds < 3 || (secs > 0 && t_now() - start < secs));

	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(th[i], NULL);
	if (w)
		ASSERT_OK(pk_watch_remove(w), "pk_watch_remove");
	ASSERT_OK(pk_die_unregister(&die_nb), "pk_die_unregister");
	ASSERT_OK(pk_fault_unregister(fault_page), "pk_fault_unregister");

	printf("rounds %d; armed jump %zu int3 %zu return %zu; refused jump %zu "
	       "int3 %zu return %zu; hits %lu returns %lu faults %lu own traps "
	       "%lu watch hits %lu\n",
	       rounds, worked[K_JUMP], worked[K_INT3], worked[K_RET],
	       refused[K_JUMP], refused[K_INT3], refused[K_RET], hits, rets,
	       faults, own_traps, watch_hits);
	ASSERT_GE(worked[K_INT3], ntargets / 2, "most int3 probes armed");
	ASSERT_GE(hits, 1, "probes hit");
	ASSERT_GE(faults, 1, "handled faults");
	ASSERT_GE(own_traps, 1, "the program's own traps reached its handler");
	if (watch_page)
		ASSERT_GE(watch_hits, 1, "watch hits");
	return t_exit();
}
