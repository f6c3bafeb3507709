#!/bin/sh
# SPDX-License-Identifier: MIT
# check-bench-json.sh - check the shape of scripts/bench's JSON lines and that the required figures are there; never a time.
#
# Usage: tests/check-bench-json.sh BENCH_JSON REQUIRED_LIST
#
# Every line must be one flat JSON object with string fields bench, case and
# metric, and either "skipped":"reason" or numeric value, min, max, an integer
# runs >= 1 and a string unit, with min <= value <= max (a median lies between
# the extremes). No (bench, case, metric) may appear twice.
# REQUIRED_LIST has one "bench case metric" per line (# comments allowed);
# each must appear, a skipped figure counting as present (it is listed).
# Plain POSIX sh + awk: CI's fresh Debian need not have python.
set -u

json=$1 req=$2
[ -r "$json" ] || { echo "check-bench-json: cannot read $json"; exit 1; }
[ -r "$req" ] || { echo "check-bench-json: cannot read $req"; exit 1; }

awk -v req="$req" '
function fail(msg) { printf("%s:%d: %s\n    %s\n", FILENAME, FNR, msg, $0); bad++ }
function isnum(v) { return v ~ /^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$/ }
# Parse one flat JSON object into K[] (values) and T[] (types "s" or "n").
function parse(s,    key, val, n) {
	delete K; delete T
	sub(/^[ \t]+/, "", s); sub(/[ \t\r]+$/, "", s)
	if (s !~ /^\{/ || s !~ /\}$/) return "not a JSON object"
	s = substr(s, 2, length(s) - 2)
	n = 0
	while (1) {
		sub(/^[ \t]+/, "", s)
		if (s == "") return n ? "trailing comma" : "empty object"
		if (!match(s, /^"([^"\\]|\\.)*"/)) return "expected a quoted key at: " s
		key = substr(s, 2, RLENGTH - 2); s = substr(s, RLENGTH + 1)
		sub(/^[ \t]*/, "", s)
		if (substr(s, 1, 1) != ":") return "expected : after \"" key "\""
		s = substr(s, 2); sub(/^[ \t]*/, "", s)
		if (match(s, /^"([^"\\]|\\.)*"/)) {
			val = substr(s, 2, RLENGTH - 2); T[key] = "s"
		} else if (match(s, /^[-+0-9.eE]+/)) {
			val = substr(s, 1, RLENGTH)
			if (!isnum(val)) return "bad number " val " for \"" key "\""
			T[key] = "n"
		} else if (match(s, /^(true|false|null)/)) {
			val = substr(s, 1, RLENGTH); T[key] = "l"
		} else return "bad value for \"" key "\" (nested objects, NaN and inf are not allowed)"
		if (key in K) return "duplicate key \"" key "\""
		K[key] = val; n++
		s = substr(s, RLENGTH + 1); sub(/^[ \t]*/, "", s)
		if (s == "") return ""
		if (substr(s, 1, 1) != ",") return "expected , or } after \"" key "\""
		s = substr(s, 2)
	}
}
BEGIN {
	while ((getline line < req) > 0) {
		sub(/#.*/, "", line)
		if (split(line, f, /[ \t]+/) < 3) {
			if (line ~ /[^ \t]/) { print "bad line in " req ": " line; bad++ }
			continue
		}
		if (f[1] == "") { f[1] = f[2]; f[2] = f[3]; f[3] = f[4] }
		id = f[1] " / " f[2] " / " f[3]
		if (!(id in want)) { want[id] = 1; order[++nwant] = id }
	}
}
/^[ \t]*$/ { fail("empty line"); next }
{
	lines++
	err = parse($0)
	if (err != "") { fail(err); next }
	for (i = 1; i <= 3; i++) {
		k = i == 1 ? "bench" : i == 2 ? "case" : "metric"
		if (T[k] != "s" || K[k] == "") { fail("missing string \"" k "\""); next }
	}
	id = K["bench"] " / " K["case"] " / " K["metric"]
	if (id in seen) { fail("figure " id " appears twice"); next }
	seen[id] = 1
	benchlines[K["bench"]]++
	if ("skipped" in K) {
		if (T["skipped"] != "s" || K["skipped"] == "") { fail("\"skipped\" must be a reason string"); next }
		if ("value" in K) { fail("a figure is either skipped or has a value"); next }
		skipped[id] = K["skipped"]
		nskip++
		next
	}
	for (i = 1; i <= 3; i++) {
		k = i == 1 ? "value" : i == 2 ? "min" : "max"
		if (T[k] != "n") { fail("missing number \"" k "\" (or \"skipped\")"); next }
	}
	if (T["runs"] != "n" || K["runs"] !~ /^[1-9][0-9]*$/) { fail("\"runs\" must be an integer >= 1"); next }
	if (T["unit"] != "s") { fail("missing string \"unit\""); next }
	if (K["unit"] == "") { fail("empty \"unit\" (a plain number is \"count\", a ratio \"x\")"); next }
	if (!(K["min"] + 0 <= K["value"] + 0 && K["value"] + 0 <= K["max"] + 0)) { fail("value outside [min, max]"); next }
}
END {
	# A bench with no figures at all is reported in one line, not per figure.
	missing = 0
	for (i = 1; i <= nwant; i++)
		if (!(order[i] in seen)) {
			missing++
			split(order[i], f, " / ")
			if (!(f[1] in benchlines)) absent[f[1]]++
		}
	if (missing) print "check-bench-json: required figures missing from " FILENAME ":"
	for (b in absent)
		printf("    bench %s: no figures at all (%d required; is bench/bench_%s.c built and run?)\n",
		       b, absent[b], b)
	for (i = 1; i <= nwant; i++)
		if (!(order[i] in seen)) {
			split(order[i], f, " / ")
			if (f[1] in benchlines) print "    " order[i]
		}
	for (i = 1; i <= nwant; i++)
		if (order[i] in skipped) {
			if (!noted++) print "check-bench-json: required figures skipped on this machine:"
			print "    " order[i] ": " skipped[order[i]]
		}
	printf("check-bench-json: %d lines (%d skipped), %d malformed; %d of %d required figures present\n",
	       lines, nskip, bad, nwant - missing, nwant)
	exit (bad || missing || lines == 0) ? 1 : 0
}
' "$json"
