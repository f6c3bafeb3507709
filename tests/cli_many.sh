#!/bin/sh
# SPDX-License-Identifier: MIT
# cli_many.sh - no limit on the number of probes (issue 10; it was 64):
# every one of libclimany.so's N functions (tests/cli_many.cmake) named,
# by -p and by a -P file, each counted exactly; the specs never go through
# the environment (PROBEKIT_AGENT_SPECS names a file); the agent's record
# is sized by the specs, not by a fixed maximum.
# usage: cli_many.sh PROBEKIT CLI_TARGET SANITIZED CLI_MANY N
# shellcheck source=tests/cli_common.sh
. "$(dirname "$0")/cli_common.sh"
many=$4
n=$5
rounds=3

# Function i is called (i % 7 + 1) * rounds times.
i=0
while [ $i -lt "$n" ]; do
	printf 'cli_many_%04d\n' $i
	i=$((i + 1))
done >"$tmp/specs"
expect() { # REPORT: every function's line as cli_many prints it
	awk -v r=$rounds -v n="$n" '
		/^ +[0-9-]+  cli_many_[0-9]+/ {
			i = substr($2, 10) + 0
			if ($1 != (i % 7 + 1) * r) { print "wrong: " $0; bad++ }
			seen[i]++
		}
		END {
			for (i = 0; i < n; i++)
				if (seen[i] != 1) { print "missing or twice: " i; bad++ }
			exit bad != 0
		}' "$1"
}

# All N by -p: argv holds them (about 40 KB), the environment does not.
# shellcheck disable=SC2046 # one word per -p and name, wanted
run count $(sed 's/^/-p /' "$tmp/specs") -o "$tmp/rep" -- "$many" $rounds
check "$n specs by -p: status 0, the program ran" '[ $rc -eq 0 ] && grep -qx "cli_many done" "$tmp/out"'
check "... each of the $n functions counted exactly" 'expect "$tmp/rep" >"$tmp/bad" || { head "$tmp/bad"; false; }'
check "... no problem said" '[ ! -s "$tmp/err" ]'

# The same from a -P file, with comments, blank lines and blanks around.
{ echo '# every function of libclimany.so'; echo; sed 's/^/  /; s/$/ \t/' "$tmp/specs"; } >"$tmp/specs.P"
run count --json -P "$tmp/specs.P" -o "$tmp/rep.json" -- "$many" $rounds
check "$n specs by -P FILE: status 0" '[ $rc -eq 0 ]'
if command -v python3 >/dev/null; then
	check "... JSON: each counted exactly, in the file's order, complete" \
		'python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
n, r = int(sys.argv[2]), int(sys.argv[3])
p = d[\"probes\"]
assert len(p) == n, len(p)
for i, q in enumerate(p):
    assert q[\"spec\"] == \"cli_many_%04d\" % i, q
    assert q[\"hits\"] == (i % 7 + 1) * r and q[\"armed_in\"] == 1, q
assert d[\"complete\"] is True, d[\"problems\"]
" "$tmp/rep.json" "$n" "$rounds"'
fi
# -P - reads standard input; -p and -P mix, in their order.
run count -p cli_many_0001 -P - -o "$tmp/rep" -- "$many" 1 <"$tmp/specs"
check "-p then -P -: both, the first twice" \
	'[ $rc -eq 0 ] && [ "$(grep -c "  cli_many_0001$" "$tmp/rep")" -eq 2 ]'

# What the agent sees: the specs in a file, its path in the environment.
run count -p cli_target_fn -p malloc -- sh -c 'printf "%s\n" "$PROBEKIT_AGENT_SPECS"; tr "\n\0" ",|" <"$PROBEKIT_AGENT_SPECS"; echo'
check "PROBEKIT_AGENT_SPECS names the specs file in the run's directory" \
	'[ $rc -eq 0 ] && head -n 1 "$tmp/out" | grep -q "^$TMPDIR/probekit-count\.[^/]*/\.specs$" && sed -n 2p "$tmp/out" | grep -qx "cli_target_fn,malloc|"'

# A -P file that is not there, or holds a spec that names nothing.
run count -P "$tmp/nonexistent" -- true
check "-P missing file: 125, named" '[ $rc -eq 125 ] && grep -q "nonexistent: No such file" "$tmp/err"'
printf 'malloc\nlibc.so.6:\n' >"$tmp/bad.P"
run count -P "$tmp/bad.P" -- true
check "-P file with a bad spec: 125, file and line named" \
	'[ $rc -eq 125 ] && grep -q "bad.P:2: .libc.so.6:.: no function after" "$tmp/err"'
# A sanitizer build: no leak in probekit with -P files, a bad one, and a
# process not counted.
if [ "$sanitized" = 1 ]; then
	"$pk_leaks" count -P "$tmp/specs.P" -p cli_target_fn -o "$tmp/rep" -- sh -c "env -i /bin/true; \"$target\" 1" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	check "LeakSanitizer: -P, a process not counted, no leak" \
		'[ $rc -eq 0 ] && ! grep -q LeakSanitizer "$tmp/err"'
	"$pk_leaks" count -P "$tmp/bad.P" -- true >"$tmp/out" 2>"$tmp/err"
	rc=$?
	check "LeakSanitizer: a refused -P file, no leak" \
		'[ $rc -eq 125 ] && ! grep -q LeakSanitizer "$tmp/err"'
fi
check "no temporary directory left behind" '[ -z "$(ls -A "$TMPDIR")" ]'
finish
