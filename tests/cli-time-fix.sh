#!/bin/sh
# SPDX-License-Identifier: MIT
# cli-time-fix.sh - probekit time's review findings (issue 11, branch
# timefix): -I intervals never above the totals nor wrapped; calls the
# return probes could not time (too deep, too many threads) said, in the
# JSON, and --strict 125; _Fork()'s child writes no cell of its parent;
# 64 threads exact; -d honoured under a long -I.
# A C++ program with its own unwinder (-static-libgcc): exceptions
# through timed functions caught; stripped, return probes refused.
# usage: cli-time-fix.sh PROBEKIT TIME_FIX SANITIZED CXX_STATIC CXX_STATIC_STRIPPED
# shellcheck source=tests/cli_common.sh
. "$(dirname "$0")/cli_common.sh"
cxxs=$4
cxxs_stripped=$5

js() {
	python3 -c "import json, sys; j = json.load(open(sys.argv[1])); sys.exit(0 if ($1) else 1)" "${2:-$tmp/rep}"
}
fn() {
	printf '[p for p in j["probes"] if p["spec"] == "%s"][0]["functions"][0]' "$1"
}
expected() {
	awk '$1 == "expected" { print $2 }' "$tmp/out"
}

# --- 1. -I on a hot loop: every interval's figures from one reading ----
# A live thread's cell is read while written; the intervals' calls were
# once the difference of fields read at different moments, and their
# "calls without histogram" wrapped (18446744073709551615).
run time -I 10 -p time_fix_f -- "$target" hot 1500
check "-I 10 text, hot loop: status 0, intervals printed" \
	'[ $rc -eq 0 ] && [ "$(grep -c " s:" "$tmp/err")" -ge 20 ]'
total=$(grep -E " time_fix_f$| time_fix_f  " "$tmp/err" | tail -n 1 | awk '{print $1}')
check "... no interval says calls without histogram, none above the total ($total)" \
	'! grep -q "without histogram" "$tmp/err" &&
	 [ "$(grep -E " time_fix_f($|  )" "$tmp/err" | awk -v t="$total" "\$1 > t" | wc -l)" -eq 0 ]'
run time -I 10 --json -o "$tmp/rep" -p time_fix_f -- "$target" hot 1500
check "-I 10 --json, hot loop: intervals sum to the total, none without histogram, nothing wrapped" \
	'[ $rc -eq 0 ] && python3 -c "import json, sys
ls = [json.loads(l) for l in open(sys.argv[1])]
last = ls[-1][\"probes\"][0][\"functions\"][0]
iv = [f for l in ls[:-1] for f in l[\"functions\"]]
ok = (len(iv) >= 20 and last[\"calls\"] == int(sys.argv[2]) and
      sum(f[\"calls\"] for f in iv) <= last[\"calls\"] and
      all(\"calls_without_histogram\" not in f and f[\"calls\"] <= last[\"calls\"]
          and f[\"total_ns\"] <= last[\"total_ns\"] for f in iv))
sys.exit(0 if ok else 1)" "$tmp/rep" "$(expected)"'

# --- 2. calls the return probes cannot time: said, never silent -------
run time --json -o "$tmp/rep" -p time_fix_rec -- "$target" deep 300
check "recursion 301 deep: 128 timed, 173 not timed, in the JSON" \
	"[ \$rc -eq 0 ] && js '$(fn time_fix_rec)[\"calls\"] == 128 and $(fn time_fix_rec)[\"calls_not_timed\"] == 173'"
run time -p time_fix_rec -- "$target" deep 300
check "... and in the text report" \
	'[ $rc -eq 0 ] && grep -E " time_fix_rec " "$tmp/err" | grep -q "(173 calls not timed: return-probe depth/threads)"'
run time --strict -p time_fix_rec -- "$target" deep 300
check "... --strict: 125, said why" \
	'[ $rc -eq 125 ] && grep -q "probekit time: 173 calls not timed" "$tmp/err"'
run time --strict -p time_fix_rec -- "$target" deep 100
check "... 101 deep, --strict: 0, all timed" \
	'[ $rc -eq 0 ] && ! grep -q "not timed" "$tmp/err" && grep -qE "^ +101 .* time_fix_rec$" "$tmp/err"'
# 200 threads at once: the return-probe library's blocks (128 by default)
# time some, the others' calls are counted as not timed: all 20000 accounted.
run time --json -o "$tmp/rep" -p time_fix_f -- "$target" threads 200 100
check "200 threads x 100: timed + not timed = 20000, not timed > 0" \
	"[ \$rc -eq 0 ] && js '$(fn time_fix_f)[\"calls\"] + $(fn time_fix_f).get(\"calls_not_timed\", 0) == 20000 and $(fn time_fix_f).get(\"calls_not_timed\", 0) > 0'"

# --- 4. _Fork(): no pthread_atfork handler runs in the child -----------
run time --json -o "$tmp/rep" -p time_fix_f -- "$target" fork 1000000
check "_Fork(), parent and child 1000000 calls each at once: 2000001 exactly" \
	"[ \$rc -eq 0 ] && js '$(fn time_fix_f)[\"calls\"] == 2000001 and $(fn time_fix_f)[\"threads\"] >= 2'"

# --- 6. threads beyond the record's 32 blocks: exact all the same -------
run time --json -o "$tmp/rep" -p time_fix_f -- "$target" threads 64 20000
check "64 threads x 20000: 1280000 exactly, some without histogram" \
	"[ \$rc -eq 0 ] && js '$(fn time_fix_f)[\"calls\"] == 1280000 and $(fn time_fix_f).get(\"calls_without_histogram\", 0) > 0 and \"calls_not_timed\" not in $(fn time_fix_f)'"

# Threads one after another: each takes over a gone one's block at its
# first call (the back-off must not keep a new thread from it).
run time --json -o "$tmp/rep" -p time_fix_f -- "$target" seq 200 100
check "200 threads one after another x 100: 20000, every call in a histogram" \
	"[ \$rc -eq 0 ] && js '$(fn time_fix_f)[\"calls\"] == 20000 and \"calls_without_histogram\" not in $(fn time_fix_f)'"

# --- 5. -d under a long -I: the duration, not the interval -------------
start=$(date +%s%N)
run time -d 0.5 -I 4000 -p time_fix_f -- "$target" sleep 20000
el=$((($(date +%s%N) - start) / 1000000))
check "-d 0.5 -I 4000: stopped after 0.5 s ($el ms elapsed, < 3000), status 124" \
	'[ $rc -eq 124 ] && [ $el -lt 3000 ] && grep -q "stopped after 0.5 s" "$tmp/err"'

# --- 7. a glob's functions that could not be armed: said, as count says -
# pthread_sigmask is never probed (probekit's signal path calls it).
# The same words (the address in them aside) in count's report and time's.
line="1 of its functions not probed, first: pthread_sigmask; first error: probe: 0x"
run count -p 'libc.so.6:pthread_sig*' -- "$target" sleep 0
grep -qF "$line" "$tmp/err"
counted=$?
run time -p 'libc.so.6:pthread_sig*' -- "$target" sleep 0
check "glob with an unarmable function: time says what count says" \
	'[ $rc -eq 0 ] && [ $counted -eq 0 ] && grep -qF "libc.so.6:pthread_sig*: $line" "$tmp/err"'
run time --json -o "$tmp/rep" -p 'libc.so.6:pthread_sig*' -- "$target" sleep 0
check "... and the JSON (not_probed 1, the error names pthread_sigmask)" \
	"js 'j[\"probes\"][0][\"not_probed\"] == 1 and \"pthread_sigmask\" in j[\"probes\"][0][\"not_probed_error\"]'"

# --- 3. a C++ program that unwinds with its own libgcc ------------------
run time --json -o "$tmp/rep" -p time_cxx_catch -p time_cxx_throw -- "$cxxs" 50
check "-static-libgcc C++: status 0 (not 134), all 50 caught, time_cxx_catch 50 calls" \
	"[ \$rc -eq 0 ] && grep -qx 'caught 50' '$tmp/out' && js '$(fn time_cxx_catch)[\"calls\"] == 50'"
# Stripped: no names; the functions by offset (from the unstripped file).
off() {
	nm "$cxxs" | awk -v n="$1" '$3 == n { print "0x" $1 }'
}
sc="$cxxs_stripped:$(off time_cxx_catch)"
st="$cxxs_stripped:$(off time_cxx_throw)"
run time -p "$sc" -p "$st" -- "$cxxs_stripped" 50
# (Even where another library brought libgcc_s along, as a sanitizer
# build's runtime does: the executable unwinds with its own copy.)
check "... stripped: never 134; return probes refused, said why; COMMAND ran whole" \
	'[ $rc -ne 134 ] && grep -qx "caught 50" "$tmp/out" &&
	 grep -q "return probes refused: .* unwinds with its own copy of libgcc" "$tmp/err"'
run count -p "$sc" -- "$cxxs_stripped" 50
check "... count still counts there (50)" \
	'[ $rc -eq 0 ] && grep -qE "^ +50  .*stripped:0x" "$tmp/err"'

check "nothing left in TMPDIR" '[ -z "$(ls -A "$TMPDIR")" ]'
finish
