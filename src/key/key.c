// SPDX-License-Identifier: MIT
#include <stdlib.h>
#include "internal.h"
struct pk_key pk_debug_key;
int pk_key_enable(struct pk_key *k) { (void)k; return -1; }
int pk_key_disable(struct pk_key *k) { (void)k; return -1; }
int pk_key_inc(struct pk_key *k) { (void)k; return -1; }
int pk_key_dec(struct pk_key *k) { (void)k; return -1; }
int pk_key_set_many(struct pk_key *const *keys, const bool *values, size_t n) { (void)keys; (void)values; (void)n; return -1; }
bool pk_key_enabled(const struct pk_key *k) { return k->enabled > 0; }
bool pk_key_patching(void) { return false; }
int pk_jump_module_register(struct pk_jump_entry *start, struct pk_jump_entry *stop) { (void)start; (void)stop; return 0; }
void pk_jump_module_unregister(struct pk_jump_entry *start) { (void)start; }
void pk_debug_failed(const char *expr, const char *file, int line) { (void)expr; (void)file; (void)line; abort(); }
