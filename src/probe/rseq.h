/* SPDX-License-Identifier: MIT */
/* rseq.h - restartable-sequence critical sections, which a probe must not displace or trap in (place.c). */
#ifndef PK_PROBE_RSEQ_H
#define PK_PROBE_RSEQ_H

/*
 * A restartable sequence (rseq(2)) is a critical section the kernel
 * aborts to its abort handler whenever the thread is preempted, migrated
 * or signalled with its instruction pointer in [start_ip, start_ip +
 * post_commit_offset). Per-CPU allocators (tcmalloc, librseq users) build
 * their fast paths on it. A probe breaks one either way:
 *   - a jump probe runs the displaced instructions in its trampoline,
 *     outside the range: a preemption there aborts nothing, and the
 *     section's single-CPU guarantee silently goes;
 *   - an int3 in the range (or just before it, the trap's return address
 *     being start_ip) is signalled inside it: the kernel moves the thread
 *     to the abort handler before the SIGTRAP handler runs, which then
 *     cannot tell the trap for a probe's (the program dies of SIGTRAP).
 * Where the sections are: each descriptor (struct rseq_cs) in a section
 * named __rseq_cs, as librseq, tcmalloc and the kernel's selftests place
 * them; read from memory where the object is loaded (relocated), the
 * section found in its file's section headers. Descriptors kept anywhere
 * else (built at run time, or in another section) are not seen.
 * Cached per object by load bias, confirmed by the file's st_dev and
 * st_ino once an object was unloaded since (dl_iterate_phdr's dlpi_subs):
 * a check costs one dl_iterate_phdr() and a search of the cache, the
 * first in an object one open and a pass over its section headers.
 * Locking: rseq_lock, a leaf. Not async-signal-safe.
 */

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/*
 * pk_rseq_cs_in() - whether a critical section declared by the loaded
 * object that holds @lo overlaps [@lo, @lo + @len). @start receives its
 * start_ip. Return: 0 (none), 1 (one does), -ENOMEM.
 */
PK_HIDDEN int pk_rseq_cs_in(uintptr_t lo, size_t len, uintptr_t *start);

#endif /* PK_PROBE_RSEQ_H */
