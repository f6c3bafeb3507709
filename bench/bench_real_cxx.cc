// SPDX-License-Identifier: MIT
/* bench_real_cxx.cc - bench_real's libstdc++ workload: containers, strings, iostreams and exceptions; deterministic output. */

/*
 * Usage: bench_real_cxx N
 * N rounds of: words made by an LCG put into std::map, std::unordered_map,
 * std::vector (sorted), std::deque and std::list; formatted through
 * std::ostringstream and parsed back through std::istringstream; every
 * 16th round a std::runtime_error thrown across a few frames and caught.
 * Prints a summary to std::cout; the same N gives the same bytes.
 */
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <iomanip>
#include <iostream>
#include <list>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

static uint64_t lcg = 12345;

static unsigned next_rand()
{
	lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
	return (unsigned)(lcg >> 33);
}

static std::string word()
{
	static const char *syl[] = { "ka", "lo", "mi", "ne", "ru", "sa", "to", "vi" };
	std::string w;
	unsigned n = 1 + next_rand() % 4;

	for (unsigned i = 0; i < n; i++)
		w += syl[next_rand() % 8];
	return w;
}

__attribute__((noinline)) static void deep(int depth, const std::string &why)
{
	if (depth == 0)
		throw std::runtime_error("failed: " + why);
	std::vector<std::string> keep(2, why);
	deep(depth - 1, keep[0]);
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? std::atol(argv[1]) : 100;
	std::map<std::string, long> counts;
	std::unordered_map<std::string, long> lens;
	std::list<std::string> recent;
	std::deque<long> dq;
	long caught = 0, parsed = 0, total_len = 0;

	for (long r = 0; r < n; r++) {
		std::vector<std::string> v;
		std::ostringstream os;

		for (int i = 0; i < 32; i++) {
			std::string w = word();

			counts[w]++;
			lens[w] = (long)w.size();
			v.push_back(w);
		}
		std::sort(v.begin(), v.end());
		for (const auto &w : v)
			os << w << ' ' << std::setw(4) << w.size() << ' ';
		std::istringstream is(os.str());
		std::string w;
		long len;
		while (is >> w >> len) {
			parsed++;
			total_len += len;
		}
		recent.push_front(v.front());
		if (recent.size() > 64)
			recent.pop_back();
		dq.push_back(r);
		if (dq.size() > 100)
			dq.pop_front();
		if (r % 16 == 0) {
			try {
				deep(3, v.back());
			} catch (const std::exception &e) {
				caught += (long)std::string(e.what()).size() > 0;
			}
		}
	}
	std::cout << "words " << counts.size() << " distinct " << lens.size()
		  << " parsed " << parsed << " len " << total_len << " caught "
		  << caught << '\n';
	for (auto it = counts.begin(); it != counts.end() && it->first < "kal"; ++it)
		std::cout << std::left << std::setw(12) << it->first << it->second << '\n';
	std::cout << "recent " << recent.front() << " dq " << dq.front() << '\n';
	return 0;
}
