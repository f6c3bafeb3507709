#!/bin/sh
# SPDX-License-Identifier: MIT
# agent_late_dupz.sh - two specs matching one function of a library loaded
# later (issue 10): the first spec in command-line order takes it, the
# other's line says so, exactly as at start-up. Each pair of specs is run
# over agent_late_z (libz dlopen()ed ROUNDS times, closed after each) and
# over agent_late_zl (libz linked, the same calls): the reports must be
# the same, line for line.
# usage: agent_late_dupz.sh PROBEKIT AGENT_LATE_Z AGENT_LATE_ZL [SANITIZED]
# (SANITIZED as in cli_common.sh)
# shellcheck source=tests/cli_common.sh
latez=$2
latezl=$3
set -- "$1" "$2" "${4:-0}"
. "$(dirname "$0")/cli_common.sh"

[ -e /lib/x86_64-linux-gnu/libz.so.1 ] || [ -e /usr/lib/x86_64-linux-gnu/libz.so.1 ] ||
	{ echo "SKIP: no libz.so.1 (zlib1g)"; exit 77; }

same() { # rounds, then specs: late (dlopen) and start-up (linked) reports equal
	rounds=$1
	shift
	desc="$*"
	run count "$@" -o "$tmp/rep" -- "$latez" 3 "$rounds"
	rc_late=$rc
	cp "$tmp/rep" "$tmp/late"
	run count "$@" -o "$tmp/rep" -- "$latezl" 3 "$rounds"
	cp "$tmp/rep" "$tmp/start"
	check "late = start-up for $desc, $rounds round(s) (rc $rc_late $rc)" \
		'[ $rc_late -eq 0 ] && [ $rc -eq 0 ] && diff "$tmp/start" "$tmp/late"'
}

for r in 1 2; do
	same $r -p 'libz.so.1:compress*' -p 'libz.so.1:compress'
	same $r -p 'libz.so.1:compress' -p 'libz.so.1:compress*'
	same $r -p 'libz.so.1:compress' -p 'libz.so.1:compress'
	same $r -p 'libz.so.1:compress*' -p 'libz.so.1:compress*'
	same $r -p 'libz.so.1:*compress*' -p 'libz.so.1:compress*'
	same $r -p 'libz.so.1:compress2' -p 'libz.so.1:compress' -p 'libz.so.1:compress*'
	same $r -p 'libz.so.1:uncompress*' -p 'libz.so.1:*compress' -p 'libz.so.1:compress2'
	same $r -p 'libz.so.1:*' -p 'libz.so.1:compress' -p 'libz.so.1:un*'
done

# The function counted once: its calls, not twice its calls.
run count -p 'libz.so.1:compress' -p 'libz.so.1:compress*' -o "$tmp/rep" -- "$latez" 4 2
check "compress then compress*: compress* counts compress2's 8 calls, not compress's too" \
	'grep -Eq "^ +8  libz.so.1:compress\*" "$tmp/rep" && ! grep -Eq "^ +[0-9]+    compress$" "$tmp/rep"'

[ $fails -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all checks passed"
