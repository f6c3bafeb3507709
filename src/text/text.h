/* SPDX-License-Identifier: MIT */
/* text.h - hidden entry points of the text layer for the layers above it. */
#ifndef PK_TEXT_TEXT_H
#define PK_TEXT_TEXT_H

#include "internal.h"

/*
 * pk_batch_set_hook() - call @fn(@arg) once during @b's commit, after int3 is
 * on every site's first byte and all cores have synchronised, before any tail
 * byte is written: no thread can enter a site past its first byte from then
 * on. The probe layer moves threads stopped inside displaced instructions
 * there. A non-zero return rolls the batch back and is the commit's result.
 * Runs under the text lock: @fn must not commit.
 */
PK_HIDDEN void pk_batch_set_hook(struct pk_batch *b, int (*fn)(void *),
				 void *arg);

/*
 * pk_batch_add_via() - pk_batch_add(), and a thread that traps on the site
 * during the commit is sent to @via instead of through the new bytes (0:
 * the text layer's own way), or to @via_old instead of through the old ones
 * while a failed batch rolls back. Each must behave exactly as those bytes
 * would, then continue after the site (the probe layer passes a
 * trampoline's relocated copy of the original bytes). This lets PC-relative
 * bytes, which the text layer cannot run out of line, be written, and
 * spares an out-of-line copy per site. Bytes with a continuation given need
 * not decode into whole instructions (the probe layer's int3 on the first
 * byte of a longer one); pass PK_TEXT_F_MERGE with them.
 */
PK_HIDDEN int pk_batch_add_via(struct pk_batch *b, void *addr,
			       const void *bytes, size_t len,
			       const void *expect, unsigned int flags,
			       uintptr_t via, uintptr_t via_old);

/*
 * pk_text_fill() - write @len bytes of code at @addr that no thread can be
 * running yet (a new trampoline in a read+execute page), through the text
 * layer's /proc/self/mem descriptor and without the int3 protocol.
 * Context: not from a signal handler; takes the text lock.
 * Return: 0, or -EPERM (writing code refused), -errno.
 */
PK_HIDDEN int pk_text_fill(void *addr, const void *bytes, size_t len);

#endif /* PK_TEXT_TEXT_H */
