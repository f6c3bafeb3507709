// SPDX-License-Identifier: MIT
/* libsymcxx.cc - C++ functions test_sym_spec names as written: a method, its overload, a static member, a template, a function in an anonymous namespace, one with an ABI tag. */

#include <string>

#define API __attribute__((visibility("default"), noinline))

namespace ns {
struct Cls {
	API int method(int x);
	API int method(double x);
	API static int only(int x);
};

int Cls::method(int x)
{
	volatile int v = x;

	return v + 1;
}

int Cls::method(double x)
{
	volatile double v = x;

	return (int)v + 2;
}

int Cls::only(int x)
{
	volatile int v = x;

	return v + 3;
}

template <typename T> API T twice(T x)
{
	volatile T v = x;

	return v + v;
}
template int twice<int>(int);
} // namespace ns

/* Names whose words the mangled name does not spell as written. */
namespace a {
API int f(unsigned long x)
{
	volatile unsigned long v = x;

	return (int)v + 4;
}
} // namespace a

namespace {
__attribute__((noipa)) int hid(int x)
{
	volatile int v = x;

	return v + 5;
}
} // namespace

/* Something of libstdc++'s, so that the library needs it (and its demangler). */
API std::string label(int x)
{
	return std::to_string(x);
}

extern "C" API int symcxx_call(int x)
{
	ns::Cls c;

	return c.method(x) + c.method(1.0) + ns::Cls::only(x) + ns::twice(x) +
	       (int)label(x).size() - 1 + a::f(0) + hid(0) - 9;
}
