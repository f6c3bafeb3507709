// SPDX-License-Identifier: MIT
// time_cxx.cc - a program for tests/cli-time.sh: C++ exceptions thrown through timed functions.
//
// time_cxx N: N times time_cxx_catch(), which calls time_cxx_throw(), which
// throws; the exception unwinds through time_cxx_throw's return probe into
// time_cxx_catch's catch (N entries of time_cxx_throw, no return). Prints
// "caught N" and exits 0: an unwinder that could not walk through the
// probe would end in std::terminate().
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

static volatile int sink;

extern "C" __attribute__((noinline, noipa)) void time_cxx_throw(int i)
{
	sink = i;
	if (sink >= 0)
		throw std::runtime_error("through a return probe");
}

extern "C" __attribute__((noinline, noipa)) int time_cxx_catch(int i)
{
	try {
		time_cxx_throw(i);
	} catch (const std::exception &) {
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 10, caught = 0;

	for (int i = 0; i < n; i++)
		caught += time_cxx_catch(i);
	printf("caught %d\n", caught);
	return caught == n ? 0 : 1;
}
