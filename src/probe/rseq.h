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
 *   - an int3 in the range is signalled inside it: the kernel moves the
 *     thread to the abort handler before the SIGTRAP handler runs, which
 *     then cannot tell the trap for a probe's (the program died: 139);
 *   - the store of rseq_cs, the instruction that ends at start_ip, run
 *     out of line (either kind) is followed by a jump back from outside
 *     the range: a preemption there makes the kernel clear rseq_cs, and
 *     the section runs unprotected;
 *   - a jmp written over the 4 signature bytes before an abort handler
 *     makes the kernel kill the process at the next abort.
 * Cached per object by load bias while nothing is loaded (dlpi_adds);
 * a file whose build id is not the loaded object's (replaced on disk)
 * gives no sections.
 * Where the sections are: each descriptor (struct rseq_cs) in a section
 * named __rseq_cs, as librseq, tcmalloc and the kernel's selftests place
 * them; read from memory where the object is loaded (relocated), the
 * section found in its file's section headers. Descriptors kept anywhere
 * else (built at run time, or in another section) are not seen.
 * Confirmed by the file's st_dev and st_ino once something was loaded
 * since: a check costs one dl_iterate_phdr() and a search of the cache,
 * the first in an object one open and a pass over its section headers.
 * Locking: rseq_lock, a leaf. Not async-signal-safe.
 */

#include <stddef.h>
#include <stdint.h>

#include "internal.h"

/*
 * pk_rseq_cs_in() - whether running [@lo, @lo + @len) out of line or
 * writing over it would break a restartable sequence the loaded object
 * that holds @lo declares: the range overlaps the section or ends at its
 * start (the instruction there is the store of rseq_cs: run elsewhere, a
 * preemption on the way back clears it), or holds the 4 signature bytes
 * before its abort handler (the kernel checks them at each abort) or the
 * handler's start after its first byte. @start receives the section's
 * start_ip. Return: 0 (none), 1 (one does), -ENOMEM.
 */
PK_HIDDEN int pk_rseq_cs_in(uintptr_t lo, size_t len, uintptr_t *start);

#endif /* PK_PROBE_RSEQ_H */
