#!/bin/sh
# SPDX-License-Identifier: MIT
# bench-summary.sh - scripts/bench-summary reads the figures it names, computes the ratios the JSON lacks, says skipped and not run, and fails on a missing or empty file.
#
# Usage: tests/bench-summary.sh SOURCE_DIR
set -u

sum=$1/scripts/bench-summary
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

cat > "$tmp/b.jsonl" <<'J'
{"bench":"probe","case":"entry","metric":"ns_overhead","value":12.5,"runs":7,"unit":"ns"}
{"bench":"probe","case":"entry","metric":"ratio_vs_direct_call","value":9.75,"runs":7,"unit":"x"}
{"bench":"probe","case":"uprobe","metric":"ns_overhead","skipped":"no tracefs"}
{"bench":"probe","case":"int3","metric":"ns_overhead","value":2000,"runs":7,"unit":"ns"}
{"bench":"probe","case":"int3_floor","metric":"ns_per_trap","value":1500,"runs":7,"unit":"ns"}
{"bench":"real","case":"libxml2","metric":"ratio_vs_unprobed","value":1.42,"runs":3,"unit":"x"}
not json at all
J
out=$("$sum" "$tmp/b.jsonl")
rc=$?
printf '%s\n' "$out"
expect() {	# LINE-PREFIX WORDS...: the line starting so has these words
	line=$(printf '%s\n' "$out" | grep -m1 "^$1")
	shift
	for w in "$@"; do
		case " $line " in
		*" $w "*) ;;
		*) echo "FAIL: no '$w' in: $line"; fail=1 ;;
		esac
	done
}
[ $rc -eq 0 ] || { echo "FAIL: exit $rc on a good file"; fail=1; }
expect "entry probe hit" 12.5 ns skipped
expect "  vs a direct call" 9.75x
expect "int3 probe hit" "2 000" "1 500" 0.75x
expect "agent start-up" "not run"
expect "libxml2" 1.42x
: > "$tmp/empty.jsonl"
"$sum" "$tmp/empty.jsonl" > /dev/null 2>&1 && { echo "FAIL: an empty file exits 0"; fail=1; }
"$sum" "$tmp/none.jsonl" > /dev/null 2>&1 && { echo "FAIL: a missing file exits 0"; fail=1; }
[ $fail -eq 0 ] && echo "bench-summary.sh: ok"
exit $fail
