/* SPDX-License-Identifier: MIT */
/* probekit/common.h - what every probekit header shares: version, PK_API, conventions, the log hook, PK_OPTS. */
#ifndef PROBEKIT_COMMON_H
#define PROBEKIT_COMMON_H

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Conventions of every probekit declaration:
 *   - every int function returns 0 (or a count) on success and -errno on
 *     failure, and never writes errno (these functions are called from
 *     signal handlers);
 *   - constructors fill an out-parameter; destructors return void and
 *     accept NULL;
 *   - details of a failure go to the log hook (pk_set_log(), or the
 *     PROBEKIT_LOG environment variable), never to stdout or stderr directly;
 *   - heap objects (struct pk_batch, pk_probe, pk_retprobe, pk_watch) are
 *     opaque; objects users define or embed (struct pk_key, pk_chain,
 *     pk_notifier) are transparent, with fields named pk_private_* that only
 *     probekit touches;
 *   - options, statistics and info structs begin with size_t sz (see
 *     PK_OPTS());
 *   - each declaration's comment ends with a Context: line saying from where
 *     it may be called: "any thread, async-signal-safe", "any thread, may
 *     block", "not from a chain callback or signal handler" and the like.
 */

#define PK_VERSION_MAJOR 0
#define PK_VERSION_MINOR 1
#define PK_VERSION_PATCH 0

#ifndef PK_API
#define PK_API __attribute__((visibility("default")))
#endif

/**
 * pk_version() - the version of the library loaded at run time
 *
 * Context: any thread, async-signal-safe.
 * Return: a static string "MAJOR.MINOR.PATCH".
 */
PK_API const char *pk_version(void);

/* Log */

enum pk_log_level {
	PK_LOG_ERROR = 0,
	PK_LOG_WARN = 1,
	PK_LOG_INFO = 2,
	PK_LOG_DEBUG = 3,
};

typedef void (*pk_log_fn)(enum pk_log_level level, const char *msg, void *ctx);

/**
 * pk_set_log() - route probekit's messages to @fn
 * @fn: called with one formatted line (no trailing newline); NULL restores
 *      the default, which writes to stderr the levels up to
 *      PROBEKIT_LOG=error|warn|info|debug (warn when unset)
 * @ctx: passed back to @fn
 *
 * Messages are never produced on a signal path.
 *
 * Context: any thread, may block.
 */
PK_API void pk_set_log(pk_log_fn fn, void *ctx);

/*
 * PK_OPTS(type, name, ...) - define options struct @name of struct @type,
 * its sz set, the named fields (designated initializers) set, the rest zero.
 *
 * Options structs (struct pk_probe_opts, struct pk_retprobe_opts) may grow
 * at their end in later versions. A caller built against a newer header
 * passes a larger sz; the library then accepts the struct only if every byte
 * past the fields it knows is zero (-EINVAL otherwise), so a request it
 * cannot honour is never silently ignored. Statistics and info structs
 * (struct pk_text_stats, pk_fault_stats, pk_probe_info, pk_retprobe_info)
 * use sz the other way: the library fills them up to sz bytes.
 *
 * In C++ (C++20 designated initializers, named in declaration order) g++'s
 * -Wmissing-field-initializers (in -Wextra) warns of each field PK_OPTS
 * leaves zero: build such a file with -Wno-missing-field-initializers, or
 * value-initialize (struct pk_probe_opts o{}; o.sz = sizeof(o); ...). The
 * structs stay plain C aggregates (trivial, memset()able) on purpose.
 */
#define PK_OPTS(type, name, ...)                                               \
	struct type name = { .sz = sizeof(struct type), __VA_ARGS__ }

#ifdef __cplusplus
}
#endif

#endif /* PROBEKIT_COMMON_H */
