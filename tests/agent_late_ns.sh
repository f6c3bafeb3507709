#!/bin/sh
# SPDX-License-Identifier: MIT
# agent_late_ns.sh - a library loaded into a link-map namespace of its own
# (dlmopen(LM_ID_NEWLM), issue 10): not armed (the agent sees the
# program's namespace only), and every spec that would have matched it
# says so in its line, with the namespace, never "not loaded" or nothing.
# usage: agent_late_ns.sh PROBEKIT AGENT_LATE_NS [SANITIZED]
# (SANITIZED as in cli_common.sh)
# shellcheck source=tests/cli_common.sh
ns=$2
set -- "$1" "$2" "${3:-0}"
. "$(dirname "$0")/cli_common.sh"

[ -e /lib/x86_64-linux-gnu/libz.so.1 ] || [ -e /usr/lib/x86_64-linux-gnu/libz.so.1 ] ||
	{ echo "SKIP: no libz.so.1 (zlib1g)"; exit 77; }

said() { # spec: its line says it is loaded in namespace $lm, not probed
	grep -F -- "  $1  (not probed in 1 of 1: " "$tmp/rep" |
		grep -qF "libz.so.1 (matching \"$1\") is loaded in link-map namespace $lm (dlmopen()): not probed"
}

run count -p 'libz.so.1:compress' -p compress -p 'libz.so.1:*' -p 'libz*:compress*' \
	-p 'libz.so.1:nosuchfn' -p 'libnosuch.so:*' -o "$tmp/rep" -- "$ns" 4
# The program says which namespace it got (the audit module has one too).
lm=$(sed -n 's/^agent_late_ns: 4 calls in namespace \([0-9]*\)$/\1/p' "$tmp/out")
check "the program ran, in namespace ${lm:-?}, its status passed through (rc $rc)" \
	'[ $rc -eq 0 ] && [ -n "$lm" ] && [ "$lm" -gt 0 ]'
for s in 'libz.so.1:compress' compress 'libz.so.1:*' 'libz*:compress*'; do
	check "$s: 'loaded in link-map namespace $lm (dlmopen()): not probed'" "said '$s'"
done
check "libz.so.1:nosuchfn: not said to be in another namespace (it matches nothing there)" \
	'grep -F "  libz.so.1:nosuchfn  (not probed" "$tmp/rep" | grep -vq "namespace"'
check "libnosuch.so:*: still 'libnosuch.so not loaded'" \
	'grep -F "  libnosuch.so:*  (not probed in 1 of 1: libnosuch.so not loaded)" "$tmp/rep" >/dev/null'
check "no count reported for a namespace-1 function" \
	'! grep -Eq "^ +[0-9]+  (libz.so.1:compress|compress)$" "$tmp/rep"'

[ $fails -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all checks passed"
