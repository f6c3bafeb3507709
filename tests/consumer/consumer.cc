// SPDX-License-Identifier: MIT
/* consumer.cc - the same consumer in C++ (pkg-config probekit). */
#include <probekit.h>
#include <cstdio>

static PK_KEY_FALSE(key);
static PK_CHAIN_ATOMIC_DEFINE(chain);
static int hello(pk_notifier *, unsigned long action, void *) { return action == 7 ? PK_OK : PK_BAD; }
static pk_notifier nb = { hello, 0, nullptr, { nullptr, nullptr } };

int main()
{
	std::printf("probekit %s (C++)\n", pk_version());
	if (pk_key_enable(&key) || !pk_branch_unlikely(&key) || pk_chain_register(&chain, &nb))
		return 1;
	return pk_notify(&chain, 7, nullptr) == PK_OK && !pk_chain_unregister(&chain, &nb) ? 0 : 1;
}
