// SPDX-License-Identifier: MIT
/* util.c - version, logging and small process-wide helpers. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

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
	const char *v = getenv("PROBEKIT_LOG");

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

int pk_env_flag(const char *name)
{
	char var[64];
	const char *v;

	snprintf(var, sizeof(var), "PROBEKIT_%s", name);
	v = getenv(var);
	return v && !strcmp(v, "1");
}

/* Lock order: see internal.h. Released in the reverse order. */
static void fork_prepare(void)
{
	pk_ret_fork_prepare();
	pk_probe_fork_prepare();
	pk_sym_fork_prepare();
	pk_fault_fork_prepare();
	pk_chain_fork_prepare();	/* also urcu-bp's */
	pk_key_fork_prepare();
	pk_text_fork_prepare();
	pk_sig_fork_prepare();
	/* Innermost: any layer logs with its own lock held. */
	pthread_mutex_lock(&log_lock);
}

static void fork_parent(void)
{
	pthread_mutex_unlock(&log_lock);
	pk_sig_fork_release();
	pk_text_fork_parent();
	pk_key_fork_release();
	pk_chain_fork_parent();
	pk_fault_fork_parent();
	pk_sym_fork_release();
	pk_probe_fork_parent();
	pk_ret_fork_parent();
}

static void fork_child(void)
{
	pthread_mutex_unlock(&log_lock);
	pk_sig_fork_release();
	pk_text_fork_child();
	pk_key_fork_release();
	pk_chain_fork_child();
	pk_fault_fork_child();
	pk_sym_fork_release();
	pk_probe_fork_child();
	pk_ret_fork_child();
}

/* At load, so the handlers exist before any lock can be taken. */
__attribute__((constructor)) static void pk_util_init(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

int pk_gettid(void)
{
	return (int)syscall(SYS_gettid);
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

void pk_assert_fail(const char *what, const char *file, int line)
{
	pk_err("%s:%d: assertion failed: %s", file, line, what);
	abort();
}
