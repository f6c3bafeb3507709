#!/bin/sh
# SPDX-License-Identifier: MIT
# cli_glob.sh - specs that expand to several functions (issue 10): a glob
# over a library of known call counts, counted exactly per function (text
# and --json, summed over processes by name), libc's str* under ls armed
# in one batch with ls's output untouched, strlen's IFUNC implementation
# named, a spec sharing another's functions, a glob matching nothing.
# usage: cli_glob.sh PROBEKIT CLI_TARGET SANITIZED GLOB_MAIN
# shellcheck source=tests/cli_common.sh
. "$(dirname "$0")/cli_common.sh"
gmain=$4

# py EXPR: EXPR true of the JSON report in $tmp/err (j), else it fails.
py() {
	python3 -c "import json, sys; j = json.load(open(sys.argv[1])); sys.exit(0 if ($1) else 1)" "$tmp/err"
}
# line CALLS NAME: the report has an indented function line "CALLS    NAME".
line() {
	grep -qxF "$(printf ' %16s    %s' "$1" "$2")" "$tmp/err"
}

# glob_main R calls glob_one R, glob_two 2R, glob_three 3R, glob_four 4R
# times, glob_never never, other_fn 7R times (not a glob_* function).
run count -p 'libglobtarget.so:glob*' -- "$gmain" 5
check "glob: status 0, the spec's line sums its functions" \
	'[ $rc -eq 0 ] && grep -qE "^ +50  libglobtarget.so:glob\*$" "$tmp/err"'
check "... each function counted exactly, on its own line" \
	'line 5 glob_one && line 10 glob_two && line 15 glob_three && line 20 glob_four && line 0 glob_never'
check "... sorted by calls" \
	'[ "$(grep -E "^ +[0-9]+    glob_" "$tmp/err" | awk "{print \$2}" | tr "\n" " ")" = "glob_four glob_three glob_two glob_one glob_never " ]'
check "... a function the glob does not match is not probed" \
	'line 5 glob_one && ! grep -q other_fn "$tmp/err"'

run count --json -p 'libglobtarget.so:glob*' -- sh -c "$gmain 2; $gmain 3"
check "glob --json, sh and two glob_mains: status 0, valid JSON" '[ $rc -eq 0 ] && py True'
check "... per function, summed over processes by name" \
	'py "j[\"processes\"] == 3 and dict((f[\"name\"], f[\"hits\"]) for f in j[\"probes\"][0][\"functions\"]) == {\"glob_one\": 5, \"glob_two\": 10, \"glob_three\": 15, \"glob_four\": 20, \"glob_never\": 0} and j[\"probes\"][0][\"hits\"] == 50"'
check "... most calls first" \
	'py "[f[\"name\"] for f in j[\"probes\"][0][\"functions\"]][0] == \"glob_four\""'

# A function matched by several specs is probed once, under the first;
# the later spec reports that probe and says whose it is.
run count -p 'libglobtarget.so:glob*' -p 'libglobtarget.so:glob_t*' -p glob_two -- "$gmain" 1
check "shared functions: status 0, the later glob counts the same functions" \
	'[ $rc -eq 0 ] && grep -qE "^ +5  libglobtarget.so:glob_t\*  \(the probes of \"libglobtarget.so:glob\*\"" "$tmp/err" && [ "$(grep -cxF "$(printf " %16s    %s" 3 glob_three)" "$tmp/err")" -eq 2 ]'
check "... a name the glob matched too: its count, the owner named" \
	'grep -qE "^ +2  glob_two  \(the probes of \"libglobtarget.so:glob\*\"" "$tmp/err"'

# libc's str* functions under ls: one batch, ls's output as without probes.
ls / >"$tmp/plain" 2>&1
"$pk" count --json -p 'libc.so.6:str*' -- ls / >"$tmp/out" 2>"$tmp/err"
rc=$?
check "libc.so.6:str* under ls: status 0, output identical to an unprobed run" \
	'[ $rc -eq 0 ] && cmp -s "$tmp/plain" "$tmp/out" && py "j[\"probes\"][0][\"armed_in\"] == 1"'
check "... armed, many functions, no failure, strlen among them" \
	'py "j[\"probes\"][0][\"armed_in\"] == 1 and j[\"probes\"][0][\"failed_in\"] == 0 and len(j[\"probes\"][0][\"functions\"]) >= 30 and any(f[\"name\"].startswith(\"strlen\") and f[\"hits\"] > 0 for f in j[\"probes\"][0][\"functions\"])"'
check "... the spec's hits are its functions' sum" \
	'py "j[\"probes\"][0][\"hits\"] == sum(f[\"hits\"] for f in j[\"probes\"][0][\"functions\"]) > 0"'

# A glob over every object: its functions named OBJECT:NAME.
run count -p 'str*' -- ls /
check "str* (every object): libc's strlen named with its object and implementation" \
	'[ $rc -eq 0 ] && grep -qE "^ +[1-9][0-9]*    libc\.so\.6:strlen -> [^ ]" "$tmp/err"'

# Every function of libc (thousands): one batch still, ls's output intact;
# those that could not be probed are counted and one is named.
"$pk" count --json -p 'libc.so.6:*' -- ls / >"$tmp/out" 2>"$tmp/err"
rc=$?
check "libc.so.6:* under ls: status 0, output identical, over 1000 functions armed" \
	'[ $rc -eq 0 ] && cmp -s "$tmp/plain" "$tmp/out" && py "j[\"probes\"][0][\"armed_in\"] == 1 and len(j[\"probes\"][0][\"functions\"]) > 1000"'
check "... functions not probed: counted, the first named" \
	'py "\"functions\" in j[\"probes\"][0] and j[\"probes\"][0].get(\"not_probed\", 0) == 0 or j[\"probes\"][0][\"not_probed_error\"] != \"\""'
echo "     ($(python3 -c "import json, sys; p = json.load(open(sys.argv[1]))['probes'][0]; print(len(p['functions']), 'functions armed,', p.get('not_probed', 0), 'not probed')" "$tmp/err"))"

# An IFUNC: the line names the implementation the calls reach. In a
# sanitizer build a plain strlen is the ASan runtime's interceptor, which
# calls libc's: name that one there.
sspec=strlen
[ "$sanitized" = 1 ] && sspec=libc.so.6:strlen
run count -p $sspec -- ls /
check "$sspec: status 0, its implementation named" \
	'[ $rc -eq 0 ] && grep -qE "^ +[1-9][0-9]*    strlen -> [^ ]" "$tmp/err"'
impl=$(sed -n 's/^ *[0-9]*    strlen -> //p' "$tmp/err")
echo "     (strlen's implementation: $impl)"
run count --json -p $sspec -- ls /
check "... --json: the implementation in the function's name" \
	'py "j[\"probes\"][0][\"functions\"][0][\"name\"].startswith(\"strlen -> \") and j[\"probes\"][0][\"functions\"][0][\"hits\"] == j[\"probes\"][0][\"hits\"] > 0"'

# A glob that matches nothing: said, and COMMAND's status kept.
for spec in 'libc.so.6:nosuch_glob10*' 'nosuch_glob10*'; do
	run count -p "$spec" -- sh -c 'exit 3'
	check "$spec matching nothing: COMMAND's status 3 kept" '[ $rc -eq 3 ]'
	check "... 'no function matches' said" \
		'grep -qF "  -  $spec  (not probed in 1 of 1: " "$tmp/err" && grep -q "no function matches" "$tmp/err"'
done

finish
