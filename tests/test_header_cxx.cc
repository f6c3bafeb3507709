// SPDX-License-Identifier: MIT
/* test_header_cxx.cc - probekit.h compiles as C++17, and key sites and pk_notify work from C++ code. */
#include <probekit.h>

#include <cstdio>
#include <cstring>
#include <type_traits>

#include "harness.h"

static_assert(std::is_standard_layout<pk_key>::value, "pk_key is C layout");
static_assert(std::is_standard_layout<pk_chain>::value, "pk_chain is C layout");
static_assert(sizeof(pk_key) == 24, "struct pk_key size is ABI");
static_assert(sizeof(pk_notifier) == 40, "struct pk_notifier size is ABI");

static PK_KEY_FALSE(cxx_key);
static PK_CHAIN_ATOMIC_DEFINE(cxx_chain);

namespace {

/* A handler object recovered from its embedded notifier, as a C++ user would. */
struct counter {
	pk_notifier nb;
	int calls;
};

int on_event(pk_notifier *nb, unsigned long action, void *data)
{
	counter *c = reinterpret_cast<counter *>(
		reinterpret_cast<char *>(nb) - offsetof(counter, nb));
	c->calls++;
	*static_cast<unsigned long *>(data) += action;
	return PK_OK;
}

/* A site in a template: the key is a constant (a non-type parameter). */
template <pk_key *K> bool site()
{
	return pk_branch_unlikely(K);
}

} // namespace

int main()
{
	counter c{};
	unsigned long sum = 0;

	ASSERT_TRUE(std::strlen(pk_version()) > 0, "pk_version()");
	ASSERT_FALSE(site<&cxx_key>(), "C++ site on a false key");
	ASSERT_OK(pk_key_enable(&cxx_key), "pk_key_enable");
	ASSERT_TRUE(site<&cxx_key>(), "C++ site after pk_key_enable");
	ASSERT_OK(pk_key_disable(&cxx_key), "pk_key_disable");
	ASSERT_FALSE(site<&cxx_key>(), "C++ site after pk_key_disable");

	ASSERT_EQ(pk_notify(&cxx_chain, 5, &sum), PK_DONE, "pk_notify, empty chain");
	c.nb.call = on_event;
	c.nb.priority = 0;
	ASSERT_OK(pk_chain_register(&cxx_chain, &c.nb), "pk_chain_register");
	ASSERT_EQ(pk_notify(&cxx_chain, 5, &sum), PK_OK, "pk_notify, one handler");
	ASSERT_EQ(c.calls, 1, "handler called once");
	ASSERT_EQ(sum, 5, "handler saw action and data");
	ASSERT_OK(pk_chain_unregister(&cxx_chain, &c.nb), "pk_chain_unregister");
	ASSERT_EQ(pk_notify(&cxx_chain, 5, &sum), PK_DONE, "pk_notify after unregister");
	ASSERT_EQ(c.calls, 1, "handler not called after unregister");
	return t_exit();
}
