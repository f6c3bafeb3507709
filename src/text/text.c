// SPDX-License-Identifier: MIT
/* text.c - TEMPORARY stub until the int3-protocol implementation lands. */
#include <errno.h>
#include <stdlib.h>
#include "internal.h"

int pk_batch_create(struct pk_batch **out) { (void)out; return -ENOTSUP; }
int pk_batch_add(struct pk_batch *b, void *addr, const void *bytes, size_t len,
		 const void *expect, unsigned int flags)
{ (void)b; (void)addr; (void)bytes; (void)len; (void)expect; (void)flags; return -ENOTSUP; }
size_t pk_batch_count(const struct pk_batch *b) { (void)b; return 0; }
int pk_batch_commit(struct pk_batch *b) { (void)b; return -ENOTSUP; }
void pk_batch_free(struct pk_batch *b) { (void)b; }
int pk_text_poke(void *addr, const void *bytes, size_t len, const void *expect, unsigned int flags)
{ (void)addr; (void)bytes; (void)len; (void)expect; (void)flags; return -ENOTSUP; }
int pk_text_stats(struct pk_text_stats *st) { (void)st; return -ENOTSUP; }
