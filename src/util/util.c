// SPDX-License-Identifier: MIT
/* util.c - version, logging and small process-wide helpers. */
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "arch/arch.h"
#include "internal.h"

const char *pk_version(void)
{
	return PK_VERSION_STRING;
}

/* Guards log_fn/log_ctx so a hook and its context change together. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static pk_log_fn log_fn;
static void *log_ctx;

void pk_set_log(pk_log_fn fn, void *ctx)
{
	pthread_mutex_lock(&log_lock);
	log_fn = fn;
	log_ctx = ctx;
	pthread_mutex_unlock(&log_lock);
}

static int env_level(void)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	const char *v = pk_getenv("PROBEKIT_LOG");

	if (!v)
		return PK_LOG_WARN;	/* errors and warnings, as libbpf does */
	for (size_t i = 0; i < PK_ARRAY_SIZE(names); i++)
		if (!strcmp(v, names[i]))
			return (int)i;
	return PK_LOG_WARN;
}

void pk_log(enum pk_log_level level, const char *fmt, ...)
{
	int saved = errno; /* the public API never writes errno */
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);

	pthread_mutex_lock(&log_lock);
	if (log_fn)
		log_fn(level, buf, log_ctx);
	else if ((int)level <= env_level())
		fprintf(stderr, "probekit: %s\n", buf);
	pthread_mutex_unlock(&log_lock);
	errno = saved;
}

const char *pk_getenv(const char *name)
{
	return secure_getenv(name);
}

int pk_env_flag(const char *name)
{
	char var[64];
	const char *v;

	snprintf(var, sizeof(var), "PROBEKIT_%s", name);
	v = pk_getenv(var);
	return v && !strcmp(v, "1");
}

/* The PK_ATFORK entries of every layer linked in, and util.c's own. */
extern const struct pk_atfork __start_pk_atfork[]
	__attribute__((weak, visibility("hidden")));
extern const struct pk_atfork __stop_pk_atfork[]
	__attribute__((weak, visibility("hidden")));

static void log_lock_take(void)
{
	pthread_mutex_lock(&log_lock);
}

static void log_lock_drop(void)
{
	pthread_mutex_unlock(&log_lock);
}

PK_ATFORK(log, PK_RANK_LOG, log_lock_take, log_lock_drop, log_lock_drop);

/* Lock order: internal.h. A handful of entries: a pass per rank is cheap. */
static void fork_prepare(void)
{
	for (int r = 0; r < PK_RANK_N; r++)
		for (const struct pk_atfork *e = __start_pk_atfork;
		     e < __stop_pk_atfork; e++)
			if ((int)e->rank == r && e->prepare)
				e->prepare();
}

/* Released in the reverse order; @child: which of the two handlers. */
static void fork_release(int child)
{
	for (int r = PK_RANK_N - 1; r >= 0; r--)
		for (const struct pk_atfork *e = __stop_pk_atfork;
		     e-- > __start_pk_atfork;)
			if ((int)e->rank == r) {
				void (*fn)(void) = child ? e->child : e->parent;

				if (fn)
					fn();
			}
}

static void fork_parent(void)
{
	fork_release(0);
}

static void fork_child(void)
{
	fork_release(1);
}

/* arch.h: &errno - thread pointer; the signal path reads it. */
intptr_t pk_errno_off;
PK_SIGNAL_DATA(pk_errno_off);

/*
 * At load, so the handlers exist before any lock can be taken, and errno's
 * place is known before any probe, hook or signal handler of ours can (a
 * library that uses probekit runs its constructors after ours).
 */
__attribute__((constructor)) static void pk_util_init(void)
{
	pk_errno_off = (intptr_t)((uintptr_t)&errno - pk_arch_tp());
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

extern const struct pk_span __start_pk_sigdata[]
	__attribute__((weak, visibility("hidden")));
extern const struct pk_span __stop_pk_sigdata[]
	__attribute__((weak, visibility("hidden")));

extern struct pk_span (*const __start_pk_sigtls[])(void)
	__attribute__((weak, visibility("hidden")));
extern struct pk_span (*const __stop_pk_sigtls[])(void)
	__attribute__((weak, visibility("hidden")));

int pk_signal_data_overlaps(uintptr_t lo, uintptr_t hi)
{
	for (struct pk_span (*const *g)(void) = __start_pk_sigtls;
	     g < __stop_pk_sigtls; g++) {
		struct pk_span s = (*g)();

		if (pk_overlaps(lo, hi, &s, 1))
			return 1;
	}
	return pk_overlaps(lo, hi, __start_pk_sigdata,
			   (size_t)(__stop_pk_sigdata - __start_pk_sigdata));
}

/* The signal path's too (fault.c, sweep.c): a raw syscall, no libc call. */
PK_NOPROBE int pk_gettid(void)
{
	return (int)pk_sys3(SYS_gettid, 0, 0, 0);
}

static int membarrier_ok;

static void membarrier_register(void)
{
	long have = pk_membarrier(MEMBARRIER_CMD_QUERY);

	membarrier_ok = have > 0 && (have & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
			!pk_membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED);
}

int pk_membarrier_expedited(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, membarrier_register);
	return membarrier_ok;
}

int pk_grow_alloc(void *pp, size_t *cap, size_t need, size_t size)
{
	int saved = errno; /* realloc() sets it */
	size_t nc = *cap;
	void *p, *np;

	if (need <= nc)
		return 0;
	if (nc < 16)
		nc = 16;
	while (nc < need && nc <= SIZE_MAX / 2)
		nc *= 2;
	if (nc < need || nc > SIZE_MAX / size)
		return -ENOMEM;
	/* Through memcpy: *@pp has the caller's pointer type, not void *. */
	memcpy(&p, pp, sizeof(p));
	np = realloc(p, nc * size);
	if (!np) {
		errno = saved;
		return -ENOMEM;
	}
	memcpy(pp, &np, sizeof(np));
	*cap = nc;
	return 0;
}

static int tid_cmp(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return (x > y) - (x < y);
}

int pk_tasks_list(pid_t except, pid_t **out, size_t *n)
{
	int saved = errno, err = 0;
	DIR *d = opendir("/proc/self/task");
	pid_t *v = NULL;
	size_t cap = 0;
	struct dirent *e;

	*out = NULL;
	*n = 0;
	if (!d) {
		err = -errno;
		errno = saved;
		return err;
	}
	while ((e = readdir(d))) {
		pid_t t = (pid_t)atoi(e->d_name);	/* "." and "..": 0 */

		if (t <= 0 || t == except)
			continue;
		if (PK_GROW(&v, &cap, *n + 1)) {
			free(v);
			*n = 0;
			err = -ENOMEM;
			goto out;
		}
		v[(*n)++] = t;
	}
	if (*n > 1)
		qsort(v, *n, sizeof(*v), tid_cmp);
	*out = v;
out:
	closedir(d);
	errno = saved;
	return err;
}

/* Raw syscalls: libc's syscall() and getpid() may carry probes. */
PK_NOPROBE int pk_tid_gone(int tid)
{
	long pid = pk_sys3(SYS_getpid, 0, 0, 0);

	return pk_sys3(SYS_tgkill, pid, tid, 0) == -ESRCH;
}

PK_NOPROBE int pk_slot_claim(int *owner0, size_t stride, size_t n, int tid,
			     size_t start, int (*reclaim)(size_t i, void *arg),
			     void *arg)
{
	int ret = -EBUSY;

	for (int pass = 0; pass < (reclaim ? 2 : 1) && ret < 0; pass++)
		for (size_t j = 0; j < n; j++) {
			size_t i = (start + j) % n;
			int *ow = (int *)((char *)owner0 + i * stride);
			int o = __atomic_load_n(ow, __ATOMIC_RELAXED);

			if (pass == 0 ? o != 0
				      : o <= 0 || !reclaim(i, arg) ||
						!pk_tid_gone(o))
				continue;
			if (__atomic_compare_exchange_n(ow, &o, tid, 0,
							__ATOMIC_ACQUIRE,
							__ATOMIC_RELAXED)) {
				ret = (int)i;
				break;
			}
		}
	return ret;
}

void pk_assert_fail(const char *what, const char *file, int line)
{
	pk_err("%s:%d: assertion failed: %s", file, line, what);
	abort();
}
