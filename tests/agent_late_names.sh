#!/bin/sh
# SPDX-License-Identifier: MIT
# agent_late_names.sh - a spec's OBJECT is matched by the loaded object's
# name, and the run's cache (agent/xcache.c) answers by the same rule: the
# same bytes under another name (libz.so for libz.so.1, a byte copy) are
# not the object a spec names, in a later process of the run either.
# Late globs: functions of the same name in two libraries of one dlopen()
# each counted under its own slot, named OBJECT:NAME; a glob over more
# functions than its reserved slots says how many it left out (text and
# JSON, complete false); long (C++) names all named.
# usage: agent_late_names.sh PROBEKIT AGENT_DLCALL LIBDUPA LIBDUPB [SANITIZED]
# (SANITIZED as in cli_common.sh)
# shellcheck source=tests/cli_common.sh
dlcall=$2
dupa=$3
dupb=$4
set -- "$1" "$2" "${5:-0}"
. "$(dirname "$0")/cli_common.sh"

count_of() { # function name -> its count in $tmp/rep (indented or not)
	awk -v f="$1" '$2 == f { print $1; exit }' "$tmp/rep"
}

L=
for d in /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu; do
	[ -e "$d/libz.so.1" ] && { L=$d; break; }
done
[ -n "$L" ] || { echo "SKIP: no libz.so.1 (zlib1g)"; exit 77; }

# ---- 1. the cache keyed by each object's name too (item 1) ----
cp "$L/libz.so.1" "$tmp/libzcopy.so"
run count -p libz.so.1:compressBound -o "$tmp/rep" -- sh -c \
	'"$0" libz.so.1 compressBound 10; "$0" "$1" compressBound 10' \
	"$dlcall" "$tmp/libzcopy.so"
check "libz.so.1 then a byte copy of it (libzcopy.so): compressBound 10, not 20 (got $(count_of libz.so.1:compressBound), rc $rc)" \
	'[ $rc -eq 0 ] && [ "$(count_of libz.so.1:compressBound)" = 10 ]'
if [ -e "$L/libz.so" ] && [ "$(readlink -f "$L/libz.so")" = "$(readlink -f "$L/libz.so.1")" ]; then
	run count -p libz.so.1:compressBound -o "$tmp/rep" -- sh -c \
		'"$0" libz.so.1 compressBound 10; "$0" "$1" compressBound 10' \
		"$dlcall" "$L/libz.so"
	check "libz.so.1 then the same file as libz.so: compressBound 10, not 20 (got $(count_of libz.so.1:compressBound), rc $rc)" \
		'[ $rc -eq 0 ] && [ "$(count_of libz.so.1:compressBound)" = 10 ]'
else
	echo "skip libz.so: no $L/libz.so link to libz.so.1 (zlib1g-dev)"
fi
# At start-up (the cache's spec answers, XC_SPEC): preloaded after the agent.
run count -p libz.so.1:compressBound -o "$tmp/rep" -- sh -c \
	'LD_PRELOAD=$LD_PRELOAD:$1 "$0" "$1" compressBound 10; LD_PRELOAD=$LD_PRELOAD:$2 "$0" "$2" compressBound 10' \
	"$dlcall" "$L/libz.so.1" "$tmp/libzcopy.so"
check "preloaded libz.so.1 then its copy: compressBound 10, not 20 (got $(count_of libz.so.1:compressBound), rc $rc)" \
	'[ $rc -eq 0 ] && [ "$(count_of libz.so.1:compressBound)" = 10 ]'
# And the cache still answers where the name is the same: 20.
run count -p libz.so.1:compressBound -o "$tmp/rep" -- sh -c \
	'"$0" libz.so.1 compressBound 10; "$0" libz.so.1 compressBound 10' "$dlcall"
check "libz.so.1 twice: compressBound 20 (got $(count_of libz.so.1:compressBound))" \
	'[ $rc -eq 0 ] && [ "$(count_of libz.so.1:compressBound)" = 20 ]'

# ---- 2. same-named functions loaded by one dlopen() (item 4) ----
# libdupa.so needs libdupb.so: both are mapped by one dlopen(), both
# define dupfn(): 15 calls of libdupa.so's, 10 of libdupb.so's.
run count -p 'libdup*:dup*' -o "$tmp/rep" -- "$dlcall" "$dupa" dupfn 15 "$dupb" dupfn 10
check "libdup*:dup*: libdupa.so:dupfn 15, libdupb.so:dupfn 10 (got $(count_of libdupa.so:dupfn) $(count_of libdupb.so:dupfn); dupfn $(count_of dupfn)), rc $rc" \
	'[ $rc -eq 0 ] && [ "$(count_of libdupa.so:dupfn)" = 15 ] && [ "$(count_of libdupb.so:dupfn)" = 10 ] && [ -z "$(count_of dupfn)" ]'

# A glob whose functions at one load were all an earlier spec's counts its
# own from the next load on (review: it went on showing the other spec's
# probes: libdup*:dupfn 3, libdupa.so's 5 calls lost without a word).
run count --json -p 'libdupb.so:dupfn' -p 'libdup*:dupfn' -o "$tmp/j" -- "$dlcall" "$dupb" dupfn 3 "$dupa" dupfn 5
check "libdupb.so:dupfn then libdup*:dupfn over two loads: 3 and 5 (rc $rc)" \
	'[ $rc -eq 0 ] && python3 -c "
import json, sys
j = json.load(open(sys.argv[1]))
h = {p[\"spec\"]: p[\"hits\"] for p in j[\"probes\"]}
assert h == {\"libdupb.so:dupfn\": 3, \"libdup*:dupfn\": 5}, h
" "$tmp/j"'

# ---- 3. a glob over more functions than it reserved (item 3) ----
listed() { # the indented function lines under the glob in $tmp/rep
	grep -Ec '^ +[0-9]+    [^ (]' "$tmp/rep"
}
if [ -e "$L/libcrypto.so.3" ]; then
	run count --json -p 'libcrypto.so.3:*' -o "$tmp/j" -- "$dlcall" libcrypto.so.3 OpenSSL_version_num 1
	left=$(python3 -c "
import json, re, sys
j = json.load(open(sys.argv[1]))
m = [re.match(r'libcrypto.so.3:\*: (\d+) functions of libraries loaded later not probed', p) for p in j['problems']]
m = [x for x in m if x]
print(m[0].group(1) if m and j['complete'] is False else '')" "$tmp/j")
	check "libcrypto.so.3:* (> 1024 functions): JSON complete false, a problem says how many were left out (got '$left')" \
		'[ $rc -eq 0 ] && [ -n "$left" ] && [ "$left" -gt 1000 ]'
	run count -p 'libcrypto.so.3:*' -o "$tmp/rep" -- "$dlcall" libcrypto.so.3 OpenSSL_version_num 1
	n=$(listed)
	check "... text: 1024 functions listed, the same count left out said on stderr (got $n; $(grep -c 'not probed' "$tmp/err") line)" \
		'[ $rc -eq 0 ] && [ "$n" = 1024 ] && grep -q "libcrypto.so.3:\*: $left functions of libraries loaded later not probed" "$tmp/err"'
	if command -v openssl >/dev/null 2>&1 && [ "$(ldd "$(command -v openssl)" | grep -c libcrypto.so.3)" = 1 ]; then
		all=$("$pk" list 'libcrypto.so.3:*' -- "$(command -v openssl)" 2>/dev/null | grep -c '^libcrypto')
		check "... 1024 + $left left out = the $all functions probekit list finds" \
			'[ $((1024 + left)) -eq "$all" ]'
	fi
	# Computed once a load, not added again at every later load.
	run count --json -p 'libcrypto.so.3:*' -o "$tmp/j" -- "$dlcall" libcrypto.so.3 OpenSSL_version_num 1 "$L/libz.so.1" compressBound 1 "$dupa" dupfn 1
	check "... libz and libdup loaded after libcrypto: still $left left out (got $(grep -o '[0-9]* functions of libraries' "$tmp/j"))" \
		'[ $rc -eq 0 ] && grep -q "libcrypto.so.3:\*: $left functions of libraries loaded later not probed" "$tmp/j"'
else
	echo "skip libcrypto.so.3: not installed"
fi

# ---- 4. long names (C++): each named (item 3) ----
# (Not in a sanitizer build: its ASan runtime, preloaded, loads
# libstdc++ at start-up, where the glob takes every function it matches.)
if [ -e "$L/libstdc++.so.6" ] && [ "$sanitized" = 0 ]; then
	run count -p 'libstdc++.so.6:_ZNSt*' -o "$tmp/rep" -- "$dlcall" libstdc++.so.6 _ZNSt9exceptionD2Ev 0
	n=$(listed)
	check "libstdc++.so.6:_ZNSt* (names of 71 bytes on average): 1024 named (got $n), none '(functions not named)'" \
		'[ $rc -eq 0 ] && [ "$n" = 1024 ] && ! grep -q "functions not named" "$tmp/rep"'
else
	echo "skip libstdc++.so.6: not installed, or a sanitizer build"
fi

finish
