// SPDX-License-Identifier: MIT
#include "internal.h"
int pk_chain_init(struct pk_chain *c, enum pk_chain_type type) { (void)c; (void)type; return -1; }
int pk_chain_register(struct pk_chain *c, struct pk_notifier *nb) { (void)c; (void)nb; return -1; }
int pk_chain_unregister(struct pk_chain *c, struct pk_notifier *nb) { (void)c; (void)nb; return -1; }
int pk_chain_call(struct pk_chain *c, unsigned long action, void *data, int *nr_calls) { (void)c; (void)action; (void)data; (void)nr_calls; return 0; }
int pk_thread_register(void) { return 0; }
