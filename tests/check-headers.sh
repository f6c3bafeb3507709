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
# PK_OPTS as the headers document it (file and function scope, static and
# const) under -Wall -Wextra -Werror: in C11; in C++20 with the one flag
# common.h tells C++ users to add (-Wno-missing-field-initializers); and a
# C++11 file's value-initialized options with memset(), which must stay
# plain aggregates.
cat > "$tmp/opts.c" <<'EOF'
#include <probekit.h>
PK_OPTS(pk_retprobe_opts, g, .flags = 0);
static PK_OPTS(pk_probe_opts, s, .symbol = "malloc");
int main(void)
{
	PK_OPTS(pk_probe_opts, o, .symbol = "malloc");
	const PK_OPTS(pk_retprobe_opts, r, .missed = 0);
	static PK_OPTS(pk_probe_opts, t, .symbol = "free", .flags = 0);
	return (int)(o.sz + r.sz + g.sz + s.sz + t.sz) == 0;
}
EOF
cp "$tmp/opts.c" "$tmp/opts.cc"
cat > "$tmp/opts11.cc" <<'EOF'
#include <cstring>
#include <probekit.h>
int main()
{
	pk_probe_opts o{};
	pk_retprobe_opts r;
	union { pk_probe_opts p; char c[sizeof(pk_probe_opts)]; } u;

	std::memset(&r, 0, sizeof(r));
	std::memset(&u, 0, sizeof(u));
	o.sz = sizeof(o);
	r.sz = sizeof(r);
	return (int)(o.sz + r.sz + u.p.sz) == 0;
}
EOF
for lang in c11 c++20 c++11; do
	n=$((n + 1))
	case $lang in
	c11) set -- "$cc" -std=c11 "$tmp/opts.c" ;;
	c++20) set -- "$cxx" -std=c++20 "$tmp/opts.cc" -Wno-missing-field-initializers ;;
	*) set -- "$cxx" -std=c++11 "$tmp/opts11.cc" ;;
	esac
	if "$@" -pedantic-errors -Wall -Wextra -Werror -I"$inc" \
	     -c -o "$tmp/t.o" 2>"$tmp/err"; then
		echo "ok   options structs as documented ($lang, -Wall -Wextra -Werror)"
	else
		echo "FAIL options structs as documented do not compile cleanly as $lang:"
		head -n 5 "$tmp/err"
		fail=$((fail + 1))
	fi
done
echo "check-headers: $n checks, $fail failures"
[ $fail -eq 0 ]
