#!/bin/sh
# SPDX-License-Identifier: MIT
# check-noprobe.sh - code on probekit's trap and fault paths (section
# pk_noprobe_text, PK_NOPROBE) calls or jumps directly only into that section
# or through the PLT: a probe on anything else it called would recurse there.
# usage: check-noprobe.sh LIBPROBEKIT.so
#
# Calls through the PLT into other libraries (libc's getpid, say) are
# outside this check. Allowed: liburcu-bp's read-side functions, static inlines of its header
# that an -O0 build emits out of line in .text (their callers are
# PK_NOPROBE; their bodies are liburcu's, not ours to mark).
set -u
lib=$1
sections=$(readelf -SW "$lib") || exit 1
range() { # $1: section name -> "start end" in hex, or nothing
	printf '%s\n' "$sections" | awk -v s="$1" '
		{ sub(/^ *\[ *[0-9]+\] */, "") }
		$1 == s { print $3, $5 }'
}
set -- $(range pk_noprobe_text)
[ $# -eq 2 ] || { echo "check-noprobe: no pk_noprobe_text in $lib"; exit 1; }
lo=$1 hi=$2
ok_ranges="$(printf '%s %s\n' "$lo" "$hi"; range .plt; range .plt.sec; range .plt.got)"
bad=$(objdump -d --no-show-raw-insn -j pk_noprobe_text "$lib" | awk -v ranges="$ok_ranges" '
	function hex(s,   n, i, c) {
		n = 0; s = tolower(s)
		for (i = 1; i <= length(s); i++) {
			c = index("0123456789abcdef", substr(s, i, 1)) - 1
			n = n * 16 + c
		}
		return n
	}
	BEGIN {
		nr = split(ranges, r, "\n")
		for (i = 1; i <= nr; i++) {
			split(r[i], f, " ")
			if (f[1] == "") continue
			st[++n] = hex(f[1]); en[n] = hex(f[1]) + hex(f[2])
		}
		allowed["_urcu_bp_read_lock"] = allowed["_urcu_bp_read_unlock"] = 1
	}
	/^[0-9a-f]+ <.*>:$/ { fn = $2; gsub(/[<>:]/, "", fn); next }
	$2 ~ /^(call|jmp)$/ && $3 ~ /^[0-9a-f]+$/ {
		t = hex($3); tgt = $4; gsub(/[<>]/, "", tgt); sub(/\+0x[0-9a-f]+$/, "", tgt)
		inside = 0
		for (i = 1; i <= n; i++) if (t >= st[i] && t < en[i]) inside = 1
		if (!inside && !(tgt in allowed)) print fn " -> " tgt
	}' | sort -u)
if [ -n "$bad" ]; then
	echo "check-noprobe: PK_NOPROBE code calls probe-able code (mark the callee PK_NOPROBE or PK_NOPROBE_INLINE):"
	printf '  %s\n' "$bad"
	exit 1
fi
echo "check-noprobe: every direct call out of pk_noprobe_text goes through the PLT"
