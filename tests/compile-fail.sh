#!/bin/sh
# SPDX-License-Identifier: MIT
# compile-fail.sh - misuse of probekit.h must not compile (jump_label.h's type check), in C and C++.
#
# Usage: tests/compile-fail.sh CC CXX INCLUDE_DIR
# Each case is compiled twice: with a real key (must compile, so the compiler
# and flags are known good) and with the misuse (must fail, and for the
# reason the header gives, not some other error).
set -u

cc=$1 cxx=$2 inc=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0 pass=0

# $1: name, $2: compiler, $3: std flag, $4: source suffix, $5: the misuse,
# $6: what the compiler must say (grep -E; default: the header's type check)
check() {
	src="$tmp/$1.$4"
	cat > "$src" <<SRC
#include <probekit.h>
static PK_KEY_FALSE(real_key);
static int not_a_key;
int use(struct pk_key *param);
int use(struct pk_key *param)
{
	(void)real_key; (void)not_a_key; (void)param;
#ifdef MISUSE
	$5
#else
	return pk_branch_unlikely(&real_key) + pk_branch_likely(&real_key);
#endif
}
SRC
	if ! "$2" $3 -Wall -Wextra -Werror -I"$inc" -c "$src" -o "$tmp/ok.o" 2>"$tmp/ok.err"; then
		echo "FAIL $1: the well-formed control does not compile:"
		cat "$tmp/ok.err"
		fail=$((fail + 1))
		return
	fi
	if "$2" $3 -Wall -Wextra -Werror -DMISUSE -I"$inc" -c "$src" -o "$tmp/bad.o" 2>"$tmp/bad.err"; then
		echo "FAIL $1: misuse compiled"
		fail=$((fail + 1))
	elif grep -Eq "${6:-takes a struct pk_key}" "$tmp/bad.err"; then
		echo "ok   $1: refused: $(grep -Eo "${6:-takes a struct pk_key}" "$tmp/bad.err" | head -n 1)"
		pass=$((pass + 1))
	else
		echo "FAIL $1: refused, but without \"${6:-takes a struct pk_key}\":"
		cat "$tmp/bad.err"
		fail=$((fail + 1))
	fi
}

check c_int_unlikely   "$cc"  -std=c11   c  'return pk_branch_unlikely(&not_a_key);'
check c_int_likely     "$cc"  -std=c11   c  'return pk_branch_likely(&not_a_key);'
check c_void_ptr       "$cc"  -std=c11   c  'void *p = &real_key; return pk_branch_unlikely(p);'
check cxx_int_unlikely "$cxx" -std=c++17 cc 'return pk_branch_unlikely(&not_a_key);'
check cxx_int_likely   "$cxx" -std=c++17 cc 'return pk_branch_likely(&not_a_key);'
# A key that is not a constant address (a parameter) cannot be recorded in
# the jump table at build time; C++ must refuse it as C does.
check c_param_key      "$cc"  -std=c11   c  'return pk_branch_unlikely(param);' 'not constant'
check cxx_param_key    "$cxx" -std=c++17 cc 'return pk_branch_unlikely(param);' 'not a constant expression'

echo "compile-fail: $pass passed, $fail failed"
[ $fail -eq 0 ]
