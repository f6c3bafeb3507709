// SPDX-License-Identifier: MIT
/* consumer.c - the smallest program built against an installed probekit (pkg-config probekit). */
#include <probekit.h>
#include <stdio.h>

static PK_KEY_FALSE(key);
static PK_CHAIN_ATOMIC_DEFINE(chain);
static int hello(struct pk_notifier *nb, unsigned long action, void *data) { (void)nb; (void)data; return action == 7 ? PK_OK : PK_BAD; }
static struct pk_notifier nb = { .call = hello };

int main(void)
{
	printf("probekit %s\n", pk_version());
	if (pk_key_enable(&key) || !pk_branch_unlikely(&key) || pk_chain_register(&chain, &nb))
		return 1;
	return pk_notify(&chain, 7, NULL) == PK_OK && !pk_chain_unregister(&chain, &nb) ? 0 : 1;
}
