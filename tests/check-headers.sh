#!/bin/sh
# SPDX-License-Identifier: MIT
# check-headers.sh - each part of probekit.h (include/probekit/*.h) compiles alone and twice, as ISO C11 and C++17, and probekit.h includes it.
#
# Usage: tests/check-headers.sh CC CXX INCLUDE_DIR
# A part that uses a type, macro or libc header it does not include itself,
# lacks an include guard, or needs a GNU extension outside __extension__,
# fails here, whichever order probekit.h happens to include the parts in.
set -u

cc=$1 cxx=$2 inc=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0 n=0

for h in "$inc"/probekit/*.h; do
	[ -f "$h" ] || { echo "check-headers: no parts under $inc/probekit"; exit 1; }
	part=probekit/$(basename "$h")
	n=$((n + 1))
	if ! grep -q "^#include <$part>" "$inc/probekit.h"; then
		echo "FAIL $part: probekit.h does not include it"
		fail=$((fail + 1))
	fi
	printf '#include <%s>\n#include <%s>\n' "$part" "$part" > "$tmp/t.c"
	cp "$tmp/t.c" "$tmp/t.cc"
	for lang in c11 c++17; do
		case $lang in
		c11) set -- "$cc" -std=c11 "$tmp/t.c" ;;
		*) set -- "$cxx" -std=c++17 "$tmp/t.cc" ;;
		esac
		if "$1" "$2" -pedantic-errors -Wall -Wextra -Werror -I"$inc" \
		     -c "$3" -o "$tmp/t.o" 2>"$tmp/err"; then
			echo "ok   $part ($lang)"
		else
			echo "FAIL $part does not compile alone as $lang:"
			head -n 5 "$tmp/err"
			fail=$((fail + 1))
		fi
	done
done
echo "check-headers: $n parts, $fail failures"
[ $fail -eq 0 ]
