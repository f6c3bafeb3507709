/* SPDX-License-Identifier: MIT */
/* noprobe.h - functions outside probekit that its signal path calls where a probe hit would kill: refused as probe targets. */
#ifndef PK_PROBE_NOPROBE_H
#define PK_PROBE_NOPROBE_H

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/*
 * pk_probe_sigpath_check() - whether a probe on the function at
 * [@start, @start + @size) may be had, given what probekit's own signal
 * path calls (src/probe/noprobe.c says which and why).
 * @what: the probe's name for the log
 * Context: any thread, may block (the first call resolves the list).
 * Return: 0, or -EPERM (logged: "probekit's signal path calls X").
 */
PK_HIDDEN int pk_probe_sigpath_check(uintptr_t start, size_t size,
				     const char *what);

#endif /* PK_PROBE_NOPROBE_H */
