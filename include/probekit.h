/* SPDX-License-Identifier: MIT */
/* probekit.h - the one header programs include: live patching, static keys, notifier chains, fault chains, watchpoints, probes. */
#ifndef PROBEKIT_H
#define PROBEKIT_H

/*
 * probekit brings the kernel's event-hook machinery into ordinary processes.
 * A hook costs nothing until somebody listens, and next to nothing when
 * somebody does.
 *
 * Include this header, not the parts below it: they are installed under
 * <probekit/...> so that each topic is documented in one file, and each
 * compiles alone, but which part declares what may change between versions.
 *
 * Layers, bottom-up; each uses only those before it. arch (instruction
 * decoding and relocation, Zydis) and sig (the signal core) are internal and
 * have no public part.
 *
 *   probekit/common.h   version, PK_API, the conventions every declaration
 *                       follows (return values, errno, Context: lines), the
 *                       log hook (pk_set_log), PK_OPTS for options structs.
 *   probekit/text.h     text: live patching of running, multi-threaded code
 *                       in batches (pk_batch_*), following the kernel's int3
 *                       protocol.
 *   probekit/key.h      key: static keys; a branch site is a 5-byte NOP or
 *                       JMP patched when the key changes
 *                       (pk_branch_unlikely/likely, pk_key_*); debug checks.
 *   probekit/chain.h    chain: notifier chains with the kernel's semantics;
 *                       an empty chain's pk_notify() site is a NOP.
 *   probekit/fault.h    fault: SIGSEGV/SIGBUS/SIGILL/SIGTRAP split into a
 *                       trap chain (by address), a fault chain (by address
 *                       range) and a die chain.
 *   probekit/watch.h    fault: memory watchpoints, on data breakpoints or
 *                       page protection (pk_watch_*).
 *   probekit/sym.h      sym: functions by spec (names, versions, globs, C++
 *                       names, source files, offsets) in the executable,
 *                       every loaded library or an object file
 *                       (pk_sym_lookup, pk_sym_each).
 *   probekit/probe.h    probe: entry and instruction probes, jump-optimised
 *                       or int3, with pre- and post-handlers (pk_probe_*).
 *   probekit/retprobe.h probe: return probes (pk_retprobe_*).
 *
 * The concepts at length, with what probes, return probes and watchpoints
 * guarantee: probekit(7). One page per function group: pk_*(3).
 */

#include <probekit/common.h>
#include <probekit/text.h>
#include <probekit/key.h>
#include <probekit/chain.h>
#include <probekit/fault.h>
#include <probekit/watch.h>
#include <probekit/sym.h>
#include <probekit/probe.h>
#include <probekit/retprobe.h>

#endif /* PROBEKIT_H */
