#!/bin/sh
# SPDX-License-Identifier: MIT
# agent_late_names.sh - a spec's OBJECT is matched by the loaded object's
# name, and the run's cache (agent/xcache.c) answers by the same rule: the
# same bytes under another name (libz.so for libz.so.1, a byte copy) are
# not the object a spec names, in a later process of the run either.
# usage: agent_late_names.sh PROBEKIT AGENT_DLCALL [SANITIZED]
# (SANITIZED as in cli_common.sh)
# shellcheck source=tests/cli_common.sh
dlcall=$2
set -- "$1" "$2" "${3:-0}"
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

finish
