#!/bin/sh
# SPDX-License-Identifier: MIT
# cli_procs.sh - the processes of COMMAND, told apart exactly (review of
# the cli10 merge, items 1, 4, 5, 7 and 12):
#   - a file size limit (ulimit -f) below a record's size: the program runs
#     as without probekit (no SIGXFSZ), the process is reported as not
#     counted for that reason, not as a fatal "no room"; probekit itself
#     under the limit refuses before COMMAND runs, and is not killed;
#   - orphaned fork()ed children that end within a few milliseconds (seen
#     only as zombies, probekit's children by then) are counted, not
#     reported: their calls are in the record (named as its process);
#   - a process whose environment is not exactly probekit's (a
#     PROBEKIT_AGENT_DIR or LD_PRELOAD that merely contains it), or an
#     exec()ed image of a counted program that made no record, is reported
#     as not counted, never taken for a fork()ed child;
#   - long C++ names (far over 255 bytes, many '::') are not refused as
#     "object name too long": OBJECT ends at the first ':' not in a '::';
#   - 820 children at once are all seen (children files read whole).
# usage: cli_procs.sh PROBEKIT CLI_TARGET [SANITIZED]
# shellcheck source=tests/cli_common.sh
. "$(dirname "$0")/cli_common.sh"

checkv() { # check(), and on failure what probekit said
	f=$fails
	check "$@"
	[ $fails -eq $f ] || { echo "--- stderr:"; head -c 3000 "$tmp/err"; echo "--- report:"; head -c 3000 "$tmp/rep" 2>/dev/null; echo; }
}

# 1. ulimit -f: a record (over a KiB) does not fit under 1 block.
run count --json -p cli_target_fn -o "$tmp/rep" -- sh -c "ulimit -f 1; \"$target\" 3; echo rc=\$?"
checkv "ulimit -f 1: COMMAND runs as without probekit (its rc 0, not 153)" \
	'grep -q "^cli_target done$" "$tmp/out" && grep -q "^rc=0$" "$tmp/out" && ! grep -q "limit exceeded" "$tmp/err"'
checkv "... probekit: COMMAND's status 0, not 125; no 'no room'" \
	'[ $rc -eq 0 ] && ! grep -q "no room" "$tmp/err"'
checkv "... the process said not counted, for its file size limit" \
	'grep -q "^probekit count: 1 process not counted: .*(its file size limit (ulimit -f) is below a record.s size, pid [0-9]*)$" "$tmp/err" && grep -q "\"complete\":false" "$tmp/rep"'
run count --strict -p cli_target_fn -o "$tmp/rep" -- sh -c "ulimit -f 1; \"$target\" 3"
checkv "... --strict: 125" '[ $rc -eq 125 ]'
# probekit itself under the limit: every process would be; said, not killed.
sh -c "ulimit -f 1; exec \"$pk\" count -p cli_target_fn -- \"$target\" 1" >"$tmp/out" 2>"$tmp/err"
rc=$?
checkv "probekit under ulimit -f 1: 125 with why, COMMAND not run (not SIGXFSZ, 153)" \
	'[ $rc -eq 125 ] && grep -q "file size limit (ulimit -f) is below a record" "$tmp/err" && ! grep -q "cli_target done" "$tmp/out"'

# 4. Orphans: each child ends at once, its child 2 ms later.
bad=0
for i in 1 2 3; do
	run count --strict --json -p cli_target_fn -o "$tmp/rep" -- "$target" 1 orphans 20
	grep -q '"hits":21,.*"complete":true,"problems":\[\],"not_counted":\[\]' "$tmp/rep" && [ $rc -eq 0 ] || { bad=$((bad + 1)); cat "$tmp/rep" "$tmp/err"; }
done
checkv "20 short-lived orphans: 21 calls, nothing said, --strict 0 (3 runs)" '[ $bad -eq 0 ]'

# 5. Not probekit's environment, only containing it.
run count --json -p cli_target_fn -o "$tmp/rep" -- sh -c "\"$target\" 2; PROBEKIT_AGENT_DIR=/nonexistent\$PROBEKIT_AGENT_DIR \"$target\" 5 sleep 200"
checkv "PROBEKIT_AGENT_DIR=/nonexistent\$DIR: reported, 2 calls" \
	'[ $rc -eq 0 ] && grep -q "\"hits\":2,.*\"complete\":false,.*\"not_counted\":\[{\"pid\":[0-9]*,\"exe\":\"$target\",\"reason\":\"PROBEKIT_AGENT_\* variables not probekit.s at exec\"}\]" "$tmp/rep"'
run count --strict -p cli_target_fn -o "$tmp/rep" -- sh -c "\"$target\" 2; PROBEKIT_AGENT_DIR=/nonexistent\$PROBEKIT_AGENT_DIR \"$target\" 5 sleep 200"
checkv "... --strict: 125" '[ $rc -eq 125 ]'
run count --json -p cli_target_fn -o "$tmp/rep" -- sh -c "\"$target\" 2; LD_PRELOAD=/nonexistent\$LD_PRELOAD \"$target\" 5 sleep 200"
checkv "LD_PRELOAD=/nonexistent\$LD_PRELOAD: reported without the agent, 2 calls" \
	'[ $rc -eq 0 ] && grep -q "\"hits\":2,.*\"not_counted\":\[{\"pid\":[0-9]*,\"exe\":\"$target\",\"reason\":\"LD_PRELOAD without the agent at exec\"}\]" "$tmp/rep"'
# Same image, environment intact, no record (the specs file emptied): an
# exec()ed image is not a fork()ed child of the first one.
run count --json -p cli_target_fn -o "$tmp/rep" -- sh -c "\"$target\" 2; : >\"\$PROBEKIT_AGENT_SPECS\"; \"$target\" 5 sleep 200"
checkv "exec of a counted program that made no record: reported (no record)" \
	'[ $rc -eq 0 ] && grep -q "\"hits\":2,.*\"complete\":false,.*\"not_counted\":\[{\"pid\":[0-9]*,\"exe\":\"$target\",\"reason\":\"no record\"}\]" "$tmp/rep"'
# No false alarm from the rule: fork, exec of the same program, in place.
run count --strict --json -p cli_target_fn -o "$tmp/rep" -- sh -c "\"$target\" 2 fork 3 exec 4 sleep 50; exec \"$target\" 1"
checkv "fork, exec of itself, exec in place: 10 calls, complete" \
	'[ $rc -eq 0 ] && grep -q "\"hits\":10,.*\"complete\":true" "$tmp/rep"'

# 7. A 346-byte C++ name, bare and with its library.
L='std::_Rb_tree<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >, std::pair<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > const, int>, std::_Select1st<std::pair<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > const, int> >, std::less<void> >::_M_erase'
for spec in "$L" "libstdc++.so.6:$L"; do
	run count -p "$spec" -o "$tmp/rep" -- "$target" 1
	check "long C++ name (${#spec} bytes) not refused: COMMAND runs, its status" \
		'[ $rc -eq 0 ] && grep -q "^cli_target done$" "$tmp/out" && ! grep -q "too long" "$tmp/err" && grep -qF "_M_erase" "$tmp/rep"'
done
long=$(printf '%0300d' 0)
run count -p "lib$long.so:f" -o "$tmp/rep" -- "$target" 1
checkv "an object of 306 bytes is still refused before COMMAND runs" \
	'[ $rc -eq 125 ] && grep -q "object name too long" "$tmp/err" && ! grep -q "cli_target done" "$tmp/out"'
run count -p "a::b:" -o "$tmp/rep" -- "$target" 1
checkv "'a::b:' refused (no function after the object's ':')" \
	'[ $rc -eq 125 ] && grep -q "no function after" "$tmp/err"'

# 12. 820 children at once: 800 (5 s), then 20 that end first (2 s), none with
# the agent (LD_PRELOAD emptied): each reported, none missed.
run count --json -p cli_target_fn -o "$tmp/rep" -- sh -c '
i=0; while [ $i -lt 800 ]; do (LD_PRELOAD= exec sleep 5) & i=$((i + 1)); done
i=0; while [ $i -lt 20 ]; do (LD_PRELOAD= exec sleep 2) & i=$((i + 1)); done
wait'
checkv "820 children: all 820 reported not counted" \
	'[ $rc -eq 0 ] && grep -q "^probekit count: 820 processes not counted: " "$tmp/err"'
checkv "no temporary directory left behind" '[ -z "$(ls -A "$TMPDIR")" ]'
finish
