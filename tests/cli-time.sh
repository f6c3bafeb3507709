#!/bin/sh
# SPDX-License-Identifier: MIT
# cli-time.sh - probekit time (issue 11): the p50 of functions that spin
# 50 us and 500 us against the p50 of what they measured themselves;
# calls identical to probekit count's, summed over threads, fork()ed
# children (one running at the same time) and processes; recursion and
# longjmp and C++ exceptions; --hist; --json parsed; OpenMetrics parsed by prometheus_client,
# rewritten atomically with -I; -d; usage errors.
# usage: cli-time.sh PROBEKIT TIME_TARGET SANITIZED TIME_CXX AGENT_PHDR LATE_SO
# shellcheck source=tests/cli_common.sh
. "$(dirname "$0")/cli_common.sh"
cxx=$4
phdr=$5
late=$6

# js EXPR: EXPR true of the JSON report in FILE ($2, default $tmp/rep).
js() {
	python3 -c "import json, sys; j = json.load(open(sys.argv[1])); sys.exit(0 if ($1) else 1)" "${2:-$tmp/rep}"
}
# fn SPEC: the JSON of the first function of spec SPEC (in js expressions).
fn() {
	printf '[p for p in j["probes"] if p["spec"] == "%s"][0]["functions"][0]' "$1"
}

# --- durations: p50 within the histogram's error of the target's own ----
# The target's functions measure themselves with clock_gettime() (from
# their first reading to their last) and print the nearest-rank p50 of
# that; probekit's p50 of the same calls is a bucket's middle, within
# 2^-6 (1.5625 %) of the sample at that rank. What lies between the two
# measurements of one call (the probe's clock readings vs the function's
# first and last clock_gettime(): two vDSO calls, the spin loop's last
# lap, the overhead estimate subtracted) is well under 2 us; a preemption
# inside a call lengthens both. So: |pk - own| <= own / 64 + 2000 ns.
run time --json -o "$tmp/rep" -p time_short -p time_long -- "$target" 50000 200 500000 30
cp "$tmp/rep" "$tmp/spin.json"
short=$(awk '$1 == "short_p50" { print $2 }' "$tmp/out")
long=$(awk '$1 == "long_p50" { print $2 }' "$tmp/out")
check "spin: status 0, valid JSON, the target printed its p50s" \
	'[ $rc -eq 0 ] && js True && [ -n "$short" ] && [ -n "$long" ]'
check "... calls exact (200 and 30)" \
	"js '$(fn time_short)[\"calls\"] == 200 and $(fn time_long)[\"calls\"] == 30'"
check "... 50 us: p50 $short ns (target's) within 1/64 + 2 us" \
	"js 'abs($(fn time_short)[\"p50_ns\"] - $short) <= $short / 64 + 2000'"
check "... 500 us: p50 $long ns (target's) within 1/64 + 2 us" \
	"js 'abs($(fn time_long)[\"p50_ns\"] - $long) <= $long / 64 + 2000'"
check "... min <= p50 <= p90 <= p99 <= p99.9 <= max, mean = total / calls" \
	"js 'all(f[\"min_ns\"] <= f[\"p50_ns\"] <= f[\"p90_ns\"] <= f[\"p99_ns\"] <= f[\"p99.9_ns\"] <= f[\"max_ns\"] and abs(f[\"mean_ns\"] - f[\"total_ns\"] / f[\"calls\"]) < 1 for f in [$(fn time_short), $(fn time_long)])'"
# No call is shorter than its spin (less the slack above: the overhead
# subtracted may exceed what this call's probe cost by that much).
check "... min >= the spin time - 2 us, total >= calls x min" \
	"js '$(fn time_short)[\"min_ns\"] >= 48000 and $(fn time_long)[\"min_ns\"] >= 498000 and all(f[\"total_ns\"] >= f[\"calls\"] * f[\"min_ns\"] for f in [$(fn time_short), $(fn time_long)])'"
check "... overhead_ns_per_call measured (0 < it < 10 us), clock named" \
	"js '0 < j[\"overhead_ns_per_call\"] < 10000 and j[\"clock\"] in (\"tsc\", \"CLOCK_MONOTONIC_RAW\")'"

# --- text and --hist --------------------------------------------------
# 5 x 5 us against 4 x 500 us: time_long's total is 80 times the other's
# (unless a preemption lengthens a short call: the rows are checked in the
# order of their printed totals, not of the spins).
run time --hist -p time_short -p time_long -- "$target" 5000 5 500000 4
check "text: the table's header, rows by total, units chosen (ns/us/ms)" \
	'[ $rc -eq 0 ] && grep -q "calls *total *mean *min *max *p50 *p90 *p99 *p99.9  function" "$tmp/err" &&
	 [ "$(grep -cE " time_(short|long)$" "$tmp/err")" = 2 ] &&
	 grep -E " time_(short|long)$" "$tmp/err" | awk "BEGIN { m[\"ns\"] = 1; m[\"us\"] = 1e3; m[\"ms\"] = 1e6; m[\"s\"] = 1e9; ok = 1 }
		{ t = \$2 * m[\$3]; if (NR > 1 && t > prev) ok = 0; prev = t } END { exit !ok }" &&
	 grep -E " time_long$" "$tmp/err" | grep -qE "^ +4 +[0-9.]+ (us|ms) "'
check "--hist: bpftrace's shape, one histogram a function" \
	'grep -qE "^@time_short \((ns|us|ms)\):" "$tmp/err" && grep -qE "^@time_long \((us|ms)\):" "$tmp/err" &&
	 grep -qE "^\[[0-9]+K?, [0-9]+K?\) +[0-9]+ \|@+ *\|$" "$tmp/err"'

# --- counts: identical to count's, over threads, forks, processes -------
# time_rec(5) 50 times: 300 calls nested 6 deep; time_jmp_outer 20 times,
# each leaving time_jmp_inner by longjmp (20 entries, no return: count
# counts 20, time has no duration for them); time_thr 4 threads x 2000,
# a forked child 1000, then a forked child and this process 3000 each at
# the same time: 15000.
args="0 0 0 0 rec 50 jmp 20 threads 4 2000 fork 1000 forkc 3000"
specs="-p time_rec -p time_jmp_outer -p time_jmp_inner -p time_thr"
# shellcheck disable=SC2086
run count --json -o "$tmp/count.json" $specs -- "$target" $args
# shellcheck disable=SC2086
run time --json -o "$tmp/rep" $specs -- "$target" $args
check "threads, forks, recursion, longjmp: status 0, valid JSON" '[ $rc -eq 0 ] && js True'
check "... calls as expected: time_rec 300, time_jmp_outer 20, time_thr 15000" \
	"js '$(fn time_rec)[\"calls\"] == 300 and $(fn time_jmp_outer)[\"calls\"] == 20 and $(fn time_thr)[\"calls\"] == 15000'"
check "... identical to count's (time_jmp_inner: count 20 entries, time 0 returns)" \
	"python3 -c 'import json, sys
c = {p[\"spec\"]: p[\"hits\"] for p in json.load(open(sys.argv[1]))[\"probes\"]}
t = {p[\"spec\"]: p[\"calls\"] for p in json.load(open(sys.argv[2]))[\"probes\"]}
sys.exit(0 if c == dict(t, time_jmp_inner=20) and t[\"time_jmp_inner\"] == 0 else 1)' '$tmp/count.json' '$tmp/rep'"
check "... time_thr timed in 7 threads of its own (main, 4 threads, 2 children: none shared)" \
	"js '$(fn time_thr)[\"threads\"] == 7'"
check "... the recursion's durations nest: time_rec's total >= 6 x its min" \
	"js '$(fn time_rec)[\"total_ns\"] >= 6 * $(fn time_rec)[\"min_ns\"]'"
# C++ exceptions thrown through a timed function: the unwinder walks
# through its return probe (no std::terminate), the catching function's
# calls are timed, the thrower has entries but no returns.
run time --json -o "$tmp/rep" -p time_cxx_catch -p time_cxx_throw -- "$cxx" 50
check "C++ exceptions: status 0, all 50 caught, time_cxx_catch 50 calls, time_cxx_throw none returned" \
	"[ \$rc -eq 0 ] && grep -qx 'caught 50' '$tmp/out' && js '$(fn time_cxx_catch)[\"calls\"] == 50 and $(fn time_cxx_throw)[\"calls\"] == 0'"

# A library dlopen()ed after start-up: its return probe armed before its
# code runs, retired at dlclose(), armed again at the next dlopen()
# (agent/late.c); 3 loads of 4 calls of f (tests/targets/late_target.c).
run count --json -o "$tmp/count.json" -p f -- "$phdr" "$late" close "$late" close "$late" close
run time --json -o "$tmp/rep" -p f -- "$phdr" "$late" close "$late" close "$late" close
check "dlopen, dlclose, dlopen again: f timed as often as count counts it (12)" \
	"[ \$rc -eq 0 ] && js '$(fn f)[\"calls\"] == 12' && js 'j[\"probes\"][0][\"hits\"] == 12' '$tmp/count.json'"

# Vector registers: time's handlers take no vector save (general registers
# only, with the TSC): a double function and its caller's sums in xmm
# registers across the calls come out bit for bit as unprobed.
"$target" 0 0 0 0 vec 100000 > "$tmp/vec.plain"
run time --json -o "$tmp/rep" -p time_vec -- "$target" 0 0 0 0 vec 100000
check "vector arguments and results: bit for bit as unprobed ($(cat "$tmp/vec.plain")), 100000 calls timed" \
	"[ \$rc -eq 0 ] && grep -q '^vec ' '$tmp/vec.plain' && cmp -s '$tmp/vec.plain' '$tmp/out' && js '$(fn time_vec)[\"calls\"] == 100000'"

# Everything is in the record as calls return: no exit path has to run.
run time --json -o "$tmp/rep" -p time_thr -- "$target" 0 0 0 0 threads 2 300 _exit
check "_exit(): every call reported (600)" "[ \$rc -eq 0 ] && js '$(fn time_thr)[\"calls\"] == 600'"
run time --json -o "$tmp/rep" -p time_thr -p time_rec -- "$target" 0 0 0 0 rec 10 threads 2 300 kill
check "SIGKILL: status 137, every call reported (600, 60)" \
	"[ \$rc -eq 137 ] && js '$(fn time_thr)[\"calls\"] == 600 and $(fn time_rec)[\"calls\"] == 60'"
run time --json -o "$tmp/rep" -p time_thr -- sh -c "\"$target\" 0 0 0 0 threads 2 500; \"$target\" 0 0 0 0 fork 700"
check "processes: sh and two targets, calls summed over them (1700)" \
	"[ \$rc -eq 0 ] && js 'j[\"processes\"] == 3 and $(fn time_thr)[\"calls\"] == 1700'"

# --- OpenMetrics, parsed by a real parser ----------------------------
# The parser: python3-prometheus-client (Debian), in whichever python3 has it.
pyom=
for p in python3 /usr/bin/python3; do
	if "$p" -c 'import prometheus_client' 2>/dev/null; then
		pyom=$p
		break
	fi
done
# om FILE CALLS_SHORT: FILE parses as OpenMetrics; time_short's counter and
# histogram count are CALLS_SHORT, buckets cumulative, +Inf == count.
om() {
	"$pyom" - "$1" "$2" <<'PY'
import sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
fams = {f.name: f for f in text_string_to_metric_families(open(sys.argv[1]).read())}
want = int(sys.argv[2])
calls = [s for s in fams["probekit_calls"].samples
         if s.labels.get("function") == "time_short"]
hist = [s for s in fams["probekit_call_duration_seconds"].samples
        if s.labels.get("function") == "time_short"]
buckets = [s.value for s in hist if s.name.endswith("_bucket")]
count = [s.value for s in hist if s.name.endswith("_count")]
ok = (len(calls) == 1 and calls[0].value == want and
      calls[0].labels.get("process") == "time_target" and
      count == [want] and buckets == sorted(buckets) and buckets[-1] == want)
sys.exit(0 if ok else 1)
PY
}
if [ -z "$pyom" ]; then
	echo "skip OpenMetrics checks: no python3 with prometheus_client (python3-prometheus-client)"
else
	run time --format openmetrics -o "$tmp/t.prom" -p time_short -p time_long -- "$target" 20000 30 100000 3
	check "openmetrics: status 0, parsed, time_short 30 calls in counter and histogram" \
		'[ $rc -eq 0 ] && om "$tmp/t.prom" 30'
	check "... no FILE.tmp left, report not on stderr" \
		'[ ! -e "$tmp/t.prom.tmp" ] && ! grep -q "probekit_calls" "$tmp/err"'
	# COMMAND reads the file between its two parts: the 100 ms rewrite
	# has the first part's calls (totals so far), the last one all.
	run time --format openmetrics -I 100 -o "$tmp/i.prom" -p time_short -- sh -c \
		"\"$target\" 20000 10 0 0 && sleep 0.5 && cp \"$tmp/i.prom\" \"$tmp/snap.prom\" && \"$target\" 20000 15 0 0"
	check "-I 100: rewritten while COMMAND ran (10 calls so far), 25 at the end" \
		'[ $rc -eq 0 ] && om "$tmp/snap.prom" 10 && om "$tmp/i.prom" 25'
fi

# --- -I text and JSON, -d --------------------------------------------------
run time -I 100 -j -o "$tmp/rep" -p time_short -- sh -c "\"$target\" 20000 10 0 0 && sleep 0.4 && \"$target\" 20000 5 0 0"
check "-I 100 --json: interval lines, then the report, each valid JSON" \
	'[ $rc -eq 0 ] && grep -q "\"interval_s\"" "$tmp/rep" &&
	 python3 -c "import json, sys; [json.loads(l) for l in open(sys.argv[1])]" "$tmp/rep" &&
	 tail -n 1 "$tmp/rep" > "$tmp/last" && js "$(fn time_short)[\"calls\"] == 15" "$tmp/last"'
# The second part may end after the last interval: its calls are in the
# report, perhaps in no interval.
check "... the intervals hold the first part's 10 calls, none twice" \
	'python3 -c "import json, sys
ls = [json.loads(l) for l in open(sys.argv[1])]
n = [f[\"calls\"] for l in ls[:-1] for f in l[\"functions\"]]
sys.exit(0 if sum(n) in (10, 15) else 1)" "$tmp/rep"'
start=$(date +%s)
run time -d 0.5 -p time_short -- sh -c "\"$target\" 20000 5 0 0; exec sleep 20"
check "-d 0.5: COMMAND stopped, status 124 (timeout(1)'s), the report out" \
	'[ $rc -eq 124 ] && [ $(($(date +%s) - start)) -lt 10 ] && grep -q "stopped after 0.5 s" "$tmp/err" &&
	 grep -qE "^ +5 .* time_short$" "$tmp/err"'

# --- usage errors: 125 as count's, said plainly -----------------------
run time -d abc -p time_short -- "$target" 0 0 0 0
check "-d abc: 125, says what it wants" '[ $rc -eq 125 ] && grep -q "\-d wants seconds" "$tmp/err"'
run time -d 0 -p time_short -- "$target" 0 0 0 0
check "-d 0: 125" '[ $rc -eq 125 ] && grep -q "\-d wants seconds" "$tmp/err"'
run time -I 5 -p time_short -- "$target" 0 0 0 0
check "-I 5: 125" '[ $rc -eq 125 ] && grep -q "\-I wants milliseconds" "$tmp/err"'
run time -I 10x -p time_short -- "$target" 0 0 0 0
check "-I 10x: 125" '[ $rc -eq 125 ] && grep -q "\-I wants milliseconds" "$tmp/err"'
run time --format xml -p time_short -- "$target" 0 0 0 0
check "--format xml: 125, names the formats" \
	'[ $rc -eq 125 ] && grep -q "unknown (text, json or openmetrics)" "$tmp/err"'
run time --format openmetrics -o /nonexistent/dir/t.prom -p time_short -- "$target" 1000 1 0 0
check "openmetrics to an unwritable place: 125 before COMMAND ran, named" \
	'[ $rc -eq 125 ] && grep -q "/nonexistent/dir/t.prom.tmp" "$tmp/err" && ! grep -q short_p50 "$tmp/out"'
run time -- "$target" 0 0 0 0
check "no probe: 125 with usage" '[ $rc -eq 125 ] && grep -q "no probe given" "$tmp/err" && grep -q "usage: probekit time" "$tmp/err"'
check "nothing left in TMPDIR" '[ -z "$(ls -A "$TMPDIR")" ]'
finish
