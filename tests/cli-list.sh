#!/bin/sh
# SPDX-License-Identifier: MIT
# cli-list.sh - probekit list: a stripped program's functions by .eh_frame,
# libc's default versions and IFUNCs for a COMMAND (its loader's list, not
# run), static functions by source file, C++ names, --json (python3's json
# module), failure paths. Offsets and sizes are checked against nm/readelf.
# usage: cli-list.sh PROBEKIT SYMSTRIP SYMSTRIP_STRIPPED LIBSYMTARGET LIBSYMCXX [FAIL_SHIM]
set -u
pk=$1 prog=$2 stripped=$3 libst=$4 libcxx=$5 shim=${6:-}
fails=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check() {
	if eval "$2"; then
		echo "ok: $1"
	else
		echo "FAIL: $1"
		sed 's/^/  | /' "$tmp/out" "$tmp/err" | head -20
		fails=$((fails + 1))
	fi
}
run() {
	"$pk" list "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
}
# py EXPR: EXPR true of the JSON in $tmp/out (j), else it fails.
py() {
	python3 -c "import json, sys; j = json.load(open(sys.argv[1])); sys.exit(0 if ($1) else 1)" "$tmp/out"
}
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
command -v nm >/dev/null || { echo "SKIP: no nm (binutils)"; exit 77; }
readelf -S "$stripped" | grep -q '\.symtab' && { echo "FAIL: $stripped has a .symtab"; exit 1; }

# The stripped program: ss_work's extent from its FDE == nm's size of it
# in the unstripped twin.
set -- $(nm -S "$prog" | awk '$4 == "ss_work" { print $1, $2 }')
off=$(printf '%#x' 0x$1) size=$((0x$2))
run "$stripped"
check "stripped program listed: status 0" '[ $rc -eq 0 ]'
check "ss_work at $off, $size bytes, from .eh_frame" \
	'grep -Eq "^symstrip.stripped +symstrip.stripped\+$off +$off +$size \.eh_frame " "$tmp/out"'
run --json "$stripped:$off"
check "by offset, --json: one function, nm's size" \
	"[ \$rc -eq 0 ] && py 'len(j[\"functions\"]) == 1 and j[\"functions\"][0][\"offset\"] == $off and j[\"functions\"][0][\"size\"] == $size and j[\"functions\"][0][\"extent\"] == \".eh_frame\"'"
run "$stripped:$(printf '%#x' $((off + 1)))"
check "an offset inside a function: status 1, said why" \
	'[ $rc -eq 1 ] && grep -q "1 bytes into the function at $off" "$tmp/err"'
run -- "$stripped"
check "-- STRIPPED: the program's functions, not run" \
	'[ $rc -eq 0 ] && grep -q "symstrip.stripped+$off " "$tmp/out"'

# libc for a COMMAND: default versions (readelf's @@ entry), IFUNCs.
libc=$(ldd /bin/ls | awk '$1 == "libc.so.6" { print $3 }')
glob_off=$(readelf --dyn-syms -W "$libc" | awk '$8 == "glob@@GLIBC_2.27" { print $2 }')
run --json memcpy glob sched_getaffinity strlen -- ls
check "memcpy glob sched_getaffinity strlen -- ls: status 0, valid JSON" \
	"[ \$rc -eq 0 ] && py 'len(j[\"functions\"]) == 4 and j[\"unmatched\"] == []'"
check "glob is glob@@GLIBC_2.27 at readelf's 0x$glob_off" \
	"py '[f for f in j[\"functions\"] if f[\"name\"] == \"glob\" and f[\"version\"] == \"GLIBC_2.27\" and f[\"default_version\"] and f[\"offset\"] == 0x$glob_off]'"
check "memcpy: the default version (GLIBC_2.14), an IFUNC, its implementation named" \
	"py '[f for f in j[\"functions\"] if f[\"name\"] == \"memcpy\" and f[\"version\"] == \"GLIBC_2.14\" and f[\"ifunc\"] and f[\"impl\"] and f[\"size\"] > 0]'"
check "kinds: jump or int3 (libc is loaded by probekit too)" \
	"py 'all(f[\"kind\"] in (\"jump\", \"int3\") for f in j[\"functions\"])'"
check "the command's objects from its loader" \
	"py 'j[\"objects\"][0].endswith(\"/ls\") and any(o.endswith(\"libc.so.6\") for o in j[\"objects\"])'"
run --json 'libc.so.6:str*' -- ls
check "libc.so.6:str* -- ls: many, all str*" \
	"[ \$rc -eq 0 ] && py 'len(j[\"functions\"]) > 20 and all(f[\"name\"].startswith(\"str\") for f in j[\"functions\"])'"
run memcpy@GLIBC_2.2.5 -- ls
check "memcpy@GLIBC_2.2.5: the compat one" \
	'[ $rc -eq 0 ] && grep -q "memcpy@GLIBC_2.2.5 " "$tmp/out"'

# Static functions of one name, told apart by source file.
run "$libst"
check "a library file: its functions, both st_dup by source file" \
	'[ $rc -eq 0 ] && grep -q " libsymtarget.c#st_dup " "$tmp/out" && grep -q " symtarget_b.c#st_dup " "$tmp/out"'
run --json "$libst:symtarget_b.c#st_dup"
check "FILE#NAME picks one" \
	"[ \$rc -eq 0 ] && py 'len(j[\"functions\"]) == 1 and j[\"functions\"][0][\"file\"] == \"symtarget_b.c\"'"
run "$libst:st_dup"
check "the name alone: ambiguous, status 1, said why" \
	'[ $rc -eq 1 ] && grep -q "ambiguous" "$tmp/err"'

# C++ names as written (the command loads libstdc++ for its demangler).
if [ -r /usr/lib/x86_64-linux-gnu/libstdc++.so.6 ]; then
	run --json "$libcxx:ns::Cls::*"
	check "ns::Cls::* : three methods, demangled" \
		"[ \$rc -eq 0 ] && py 'sorted(f[\"name\"] for f in j[\"functions\"]) == [\"ns::Cls::method(double)\", \"ns::Cls::method(int)\", \"ns::Cls::only(int)\"]'"
fi

# Every default-versioned function of libc (readelf's NAME@@V, FUNC) is
# listed at its offset, also where a compat version shares the address
# (dlopen@GLIBC_2.2.5 and dlopen@@GLIBC_2.34: review item 2).
readelf --dyn-syms -W "$libc" | awk '$4 == "FUNC" && $7 != "UND" && $8 ~ /@@/ { sub(/^0+/, "", $2); print $2 }' | sort -u >"$tmp/want"
run 'libc.so.6:*' -- ls
awk 'NR > 1 { sub(/^0x/, "", $3); print $3 }' "$tmp/out" | sort -u >"$tmp/have"
check "libc.so.6:* -- ls: every @@ function's offset ($(wc -l <"$tmp/want") of them)" \
	'[ $rc -eq 0 ] && [ -s "$tmp/want" ] && ! comm -23 "$tmp/want" "$tmp/have" | grep -q .'
run 'libc.so.6:pthread_create*' -- ls
check "libc.so.6:pthread_create* -- ls: pthread_create@@GLIBC_2.34" \
	'[ $rc -eq 0 ] && grep -q " pthread_create@@GLIBC_2.34 " "$tmp/out"'
# libc as a file: every function start, nothing said on stderr (the
# library's log goes through list's hook; FDEs nested in __clone and
# setcontext are no function starts: review item 11).
run "$libc"
check "$libc: listed, nothing on stderr" '[ $rc -eq 0 ] && [ ! -s "$tmp/err" ]'

# C++ names as written: a built-in type, an ABI tag (review item 3).
if [ -r /usr/lib/x86_64-linux-gnu/libstdc++.so.6 ]; then
	run "$libcxx:a::f(unsigned long)" "$libcxx:label" "$libcxx:label[abi:cxx11](int)"
	check "a::f(unsigned long), label, label[abi:cxx11](int)" \
		'[ $rc -eq 0 ] && grep -q " a::f(unsigned long) " "$tmp/out" && [ "$(grep -c " label\[abi:cxx11\](int) " "$tmp/out")" -eq 2 ]'
fi

# fork() or fdopen() failing for -- COMMAND: 125, said why, no pipe left
# open (review item 13). The shim is preloaded: not under sanitizers.
if [ -n "$shim" ] && ! ldd "$pk" | grep -q 'libasan'; then
	for f in fork fdopen; do
		SYMLIST_FAIL=$f LD_PRELOAD=$shim "$pk" list malloc -- ls >"$tmp/out" 2>"$tmp/err"
		rc=$?
		check "$f failing: 125, no pipe open at exit" \
			'[ $rc -eq 125 ] && grep -q "list: $f: " "$tmp/err" && grep -qx "open pipes at exit: 0" "$tmp/err"'
	done
fi

# Failure paths.
run --json nosuchfunction_xyz -- ls
check "a spec matching nothing: status 1, in the JSON with why" \
	"[ \$rc -eq 1 ] && py 'j[\"unmatched\"][0][\"spec\"] == \"nosuchfunction_xyz\" and \"no function\" in j[\"unmatched\"][0][\"why\"]'"
run malloc -- /nonexistent/prog
check "COMMAND not found: 125" '[ $rc -eq 125 ]'
run
check "no argument: usage, 125" '[ $rc -eq 125 ] && grep -q "usage:" "$tmp/err"'
run --bogus x
check "unknown option: 125" '[ $rc -eq 125 ]'

[ $fails -eq 0 ] && echo "cli-list.sh: all passed" || echo "cli-list.sh: $fails failed"
[ $fails -eq 0 ]
