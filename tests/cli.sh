#!/bin/sh
# SPDX-License-Identifier: MIT
# cli.sh - the probekit command end to end: counts against known call
# numbers (tests/cli_target.c), fork/exec aggregation, exit statuses, JSON,
# failure paths, and a real program (ls).
# usage: cli.sh PROBEKIT CLI_TARGET [SANITIZED] (see cli_common.sh)
# shellcheck source=tests/cli_common.sh
. "$(dirname "$0")/cli_common.sh"

# Counts equal to the calls the program made, in a static function.
run count -p cli_target_fn -o "$tmp/rep" -- "$target" 1000
check "exit status of COMMAND" '[ $rc -eq 0 ]'
check "COMMAND output untouched" 'grep -qx "cli_target done" "$tmp/out"'
check "1000 calls counted" 'grep -Eq "^ +1000  cli_target_fn$" "$tmp/rep"'

# A function too short for a jump probe is counted by an int3 probe, and
# the report says so (a hit costs ~1 us there, not nanoseconds).
run count -p cli_target_tiny -o "$tmp/rep" -- "$target" 300
check "one-byte function: counted, reported as an int3 probe" \
	'[ $rc -eq 0 ] && grep -Eq "^ +300  cli_target_tiny  \(int3 probe in 1 of 1:" "$tmp/rep"'
run count --json -p cli_target_tiny -p cli_target_fn -o "$tmp/rep" -- "$target" 3
check "json: int3_in per probe" \
	'grep -q "\"spec\":\"cli_target_tiny\",\"hits\":3,\"armed_in\":1,\"int3_in\":1,.*\"spec\":\"cli_target_fn\",\"hits\":3,\"armed_in\":1,\"int3_in\":0" "$tmp/rep"'

# A program that exec()s in place keeps the pid: it still gets its own
# file (the first image, env or sh, has no cli_target_fn: 1 of 2 unprobed).
run count -p cli_target_fn -o "$tmp/rep" -- env "$target" 5
check "env PROG (exec in place): 5 counted in the second of 2 images" \
	'[ $rc -eq 0 ] && grep -q "2 processes" "$tmp/rep" && grep -Eq "^ +5  cli_target_fn  \(not probed in 1 of 2:" "$tmp/rep"'
run count -p cli_target_fn -o "$tmp/rep" -- sh -c "exec \"$target\" 7"
check "sh -c \"exec PROG\": 7 counted in the second of 2 images" \
	'[ $rc -eq 0 ] && grep -q "2 processes" "$tmp/rep" && grep -Eq "^ +7  cli_target_fn  \(not probed in 1 of 2:" "$tmp/rep"'

# fork (shared file) + exec (its own file) + JSON.
run count --json -p cli_target_fn -o "$tmp/rep" -- "$target" 1000 fork 300 exec 200
check "fork+exec: status 0" '[ $rc -eq 0 ]'
check "fork+exec: 1500 calls in 2 processes" \
	'grep -q "\"processes\":2,.*\"hits\":1500,\"armed_in\":2," "$tmp/rep"'
check "json: one line, command recorded" \
	'[ $(wc -l <"$tmp/rep") -eq 1 ] && grep -q "^{\"command\":\\[\"$target\",\"1000\"" "$tmp/rep"'

# Counts read live while the command runs (-I): the first program's 100
# calls show before the second starts (it waits for that line); the final
# report has all 300.
run count -j -I 100 -p cli_target_fn -o "$tmp/rep" -- sh -c "\"$target\" 100; until grep -q '\"hits\":100,' \"$tmp/rep\"; do sleep 0.05; done; \"$target\" 200"
check "-I: status 0" '[ $rc -eq 0 ]'
check "-I: an interval line with the first program's 100 calls" \
	'grep -q "^{\"interval_s\":[0-9.]*,\"probes\":\[{\"spec\":\"cli_target_fn\",\"hits\":100," "$tmp/rep"'
check "-I: then the final report with 300" \
	'tail -n 1 "$tmp/rep" | grep -q "\"hits\":300,"'
run count -I 5 -p cli_target_fn -- "$target" 1
check "-I below 10 ms: 125" '[ $rc -eq 125 ] && grep -q "milliseconds" "$tmp/err"'

# Exit statuses and counts of processes that die without destructors.
run count -p cli_target_fn -o "$tmp/rep" -- "$target" 10 exit 7
check "exit 7 passed on" '[ $rc -eq 7 ]'
run count -p cli_target_fn -o "$tmp/rep" -- "$target" 50 _exit
check "_exit: 50 calls still counted" '[ $rc -eq 0 ] && grep -Eq "^ +50  cli_target_fn$" "$tmp/rep"'
run count -p cli_target_fn -o "$tmp/rep" -- "$target" 60 kill
check "killed by SIGTERM: 128+15, 60 calls counted" \
	'[ $rc -eq 143 ] && grep -Eq "^ +60  cli_target_fn$" "$tmp/rep"'

# A real program: ls, probing libc's malloc (ASan's, preloaded, takes its
# calls in a sanitizer build).
run count -p malloc -p libc.so.6:free -- ls /
check "ls: status 0 and its listing on stdout" '[ $rc -eq 0 ] && grep -qx proc "$tmp/out"'
[ "$sanitized" = 1 ] || check "ls: malloc and free counted" \
	'grep -Eq "^ +[1-9][0-9]*  malloc$" "$tmp/err" && grep -Eq "^ +[1-9][0-9]*  libc.so.6:free$" "$tmp/err"'

# Failure paths: clear message, the right status, nothing left behind.
run count -p cli_target_fn -- /nonexistent/program
check "command not found: 127" '[ $rc -eq 127 ] && grep -q "No such file" "$tmp/err"'
printf 'data\n' >"$tmp/noexec"
chmod 644 "$tmp/noexec"
run count -p cli_target_fn -- "$tmp/noexec"
check "command not executable: 126" '[ $rc -eq 126 ]'
run count -- "$target" 1
check "no probe: 125 with usage" '[ $rc -eq 125 ] && grep -q "no probe given" "$tmp/err"'
run count -p cli_target_fn
check "no command: 125" '[ $rc -eq 125 ] && grep -q "no command given" "$tmp/err"'
# Nothing armed anywhere: COMMAND's status all the same (it was 125), the
# failure on stderr and in the JSON; --strict makes it 125 (issue 10).
run count -p no_such_function_anywhere -- "$target" 1
check "unknown function only: COMMAND's 0, named in the report, said on stderr" \
	'[ $rc -eq 0 ] && grep -q "no_such_function_anywhere.*not probed in 1 of 1" "$tmp/err" && grep -q "^probekit count: no probe could be armed in any process$" "$tmp/err"'
run count -p nosuchfunc -- sh -c 'exit 3'
check "nothing armed, sh -c 'exit 3': 3" '[ $rc -eq 3 ] && grep -q "no probe could be armed" "$tmp/err"'
run count --json -p nosuchfunc -o "$tmp/rep" -- sh -c 'exit 3'
check "... JSON: exit_status 3, complete false, the problem named" \
	'[ $rc -eq 3 ] && grep -q "\"exit_status\":3,.*\"complete\":false,\"problems\":\[\"no probe could be armed in any process\"" "$tmp/rep"'
run count --strict -p nosuchfunc -- sh -c 'exit 3'
check "... --strict: 125" '[ $rc -eq 125 ] && grep -q "no probe could be armed" "$tmp/err"'
run count --strict --json -p cli_target_fn -o "$tmp/rep" -- "$target" 2 exit 4
check "--strict, complete: COMMAND's 4, complete true" \
	'[ $rc -eq 4 ] && grep -q "\"complete\":true,\"problems\":\[\],\"not_counted\":\[\],\"outlived\":\[\][,}]" "$tmp/rep"'
run count -p cli_target_fn -p no_such_function_anywhere -o "$tmp/rep" -- "$target" 5
check "one unknown of two: COMMAND status, the other counted" \
	'[ $rc -eq 0 ] && grep -Eq "^ +5  cli_target_fn$" "$tmp/rep"'
run frobnicate
check "unknown subcommand: 125" '[ $rc -eq 125 ] && grep -q "unknown command" "$tmp/err"'
PROBEKIT_AGENT=/nonexistent.so run count -p malloc -- true
check "missing agent: 125, says which" '[ $rc -eq 125 ] && grep -q "cannot find the agent /nonexistent.so" "$tmp/err"'
run count -p malloc -o /nonexistent/dir/rep -- true
check "unwritable report file: 125, named" \
	'[ $rc -eq 125 ] && grep -q /nonexistent/dir/rep "$tmp/err"'
PROBEKIT_AGENT="$tmp/noexec" run count -p malloc -- true
check "agent no process could load: the command's 0, said" \
	'[ $rc -eq 0 ] && grep -q "no process of the command loaded" "$tmp/err"'
PROBEKIT_AGENT="$tmp/noexec" run count --strict -p malloc -- true
check "... --strict: 125" \
	'[ $rc -eq 125 ] && grep -q "no process of the command loaded" "$tmp/err"'
# A program that passes on only part of probekit's environment to its
# children: those act as if nothing were preloaded.
for v in PROBEKIT_AGENT_SPECS PROBEKIT_AGENT_MODE; do
	run count -p malloc -o "$tmp/rep" -- env -u $v sh -c 'exit 0'
	check "a child without $v: not counted as a process, status 0" \
		'[ $rc -eq 0 ] && grep -q "1 process," "$tmp/rep"'
done
run count -p malloc -- env PROBEKIT_AGENT_MODE=bogus true
check "agent asked for a mode it lacks: 125, names it and the modes it has" \
	'[ $rc -eq 125 ] && grep -q "no mode .bogus. (modes: count time trace stat)" "$tmp/err"'
TMPDIR=/nonexistent run count -p malloc -- true
check "no room for the counts: 125" '[ $rc -eq 125 ] && grep -q mkdtemp "$tmp/err"'
# More than 64 probes (the old limit): taken (tests/cli_many.sh counts 2000).
# shellcheck disable=SC2046 # one word per -p and name, wanted
run count $(for i in $(seq 65); do printf -- '-p f%d ' "$i"; done) -p cli_target_fn -o "$tmp/rep" -- "$target" 3
check "66 probes: run, the last one counted" '[ $rc -eq 0 ] && grep -Eq "^ +3  cli_target_fn$" "$tmp/rep" && grep -q "f65  (not probed" "$tmp/rep"'
run count -p "$(printf 'a\nb')" -- true
check "multi-line spec: 125" '[ $rc -eq 125 ] && grep -q "multi-line" "$tmp/err"'
run count -I abc -p malloc -- true
check "-I abc: 125" '[ $rc -eq 125 ] && grep -q "milliseconds" "$tmp/err"'
# Where the counts directory goes: $TMPDIR; without it /dev/shm where that
# is a tmpfs with 1 GiB free (a record file costs each process less
# there), else /tmp.
(unset TMPDIR; "$pk" count -p cli_target_fn -o "$tmp/rep" -- sh -c 'echo "$PROBEKIT_AGENT_DIR"' >"$tmp/out" 2>"$tmp/err")
shm_ok=$(python3 -c 'import os; s = os.statvfs("/dev/shm"); print(1 if s.f_bavail * s.f_frsize >= 1 << 30 and os.access("/dev/shm", os.W_OK) else 0)' 2>/dev/null || echo 0)
if [ "$shm_ok" = 1 ] && [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ]; then
	check "no TMPDIR: the counts directory in /dev/shm (a tmpfs with room)" 'grep -q "^/dev/shm/probekit-count\." "$tmp/out"'
else
	check "no TMPDIR: the counts directory in /tmp (/dev/shm: no tmpfs with 1 GiB free)" 'grep -q "^/tmp/probekit-count\." "$tmp/out"'
fi
run count -p cli_target_fn -o "$tmp/rep" -- sh -c 'echo "$PROBEKIT_AGENT_DIR"'
check "TMPDIR set: the counts directory there" 'grep -q "^$TMPDIR/probekit-count\." "$tmp/out"'
# The counts directory is hostile territory: a program of COMMAND may put
# anything there. A FIFO named like a record must not hang probekit (it
# is not opened for reading); links are not followed (nor their targets
# removed); a subdirectory (even mode 0) is removed with the rest. Each in
# a TMPDIR of its own, so that one's leftovers do not fail the other.
export TMPDIR="$tmp/td-fifo"
mkdir "$TMPDIR"
timeout 20 "$pk" count -p cli_target_fn -o "$tmp/rep" -- sh -c '
	mkfifo "$PROBEKIT_AGENT_DIR/1-fifoxx" "$PROBEKIT_AGENT_DIR/fifo"
	exec "$1" 4' sh "$target" >"$tmp/out" 2>"$tmp/err"
rc=$?
check "FIFOs in the counts directory: no hang, 4 counted" \
	'[ $rc -eq 0 ] && grep -Eq "^ +4  cli_target_fn" "$tmp/rep"'
check "... nothing left behind" '[ -z "$(ls -A "$TMPDIR")" ]'
export TMPDIR="$tmp/td-dir"
mkdir "$TMPDIR"
printf 'keep\n' >"$tmp/victim"
timeout 20 "$pk" count -p cli_target_fn -o "$tmp/rep" -- sh -c '
	d=$PROBEKIT_AGENT_DIR
	mkdir -p "$d/sub/deeper" && touch "$d/sub/deeper/f" && chmod 0 "$d/sub"
	ln -s "$2" "$d/2-linkxx"
	ln "$2" "$d/3-hardxx"
	exec "$1" 4' sh "$target" "$tmp/victim" >"$tmp/out" 2>"$tmp/err"
rc=$?
check "subdirectory and links in the counts directory: 4 counted" \
	'[ $rc -eq 0 ] && grep -Eq "^ +4  cli_target_fn" "$tmp/rep"'
check "... the links' target untouched" '[ "$(cat "$tmp/victim")" = keep ]'
check "... nothing left behind" '[ -z "$(ls -A "$TMPDIR")" ]'
# A huge sparse file named like a record is not read (nor allocated for).
export TMPDIR="$tmp/td-big"
mkdir "$TMPDIR"
timeout 20 "$pk" count -p cli_target_fn -o "$tmp/rep" -- sh -c '
	truncate -s 3G "$PROBEKIT_AGENT_DIR/9-bigbig"
	exec "$1" 4' sh "$target" >"$tmp/out" 2>"$tmp/err"
rc=$?
check "a 3 GiB file named like a record: skipped, 4 counted" \
	'[ $rc -eq 0 ] && grep -Eq "^ +4  cli_target_fn" "$tmp/rep"'
check "... nothing left behind" '[ -z "$(ls -A "$TMPDIR")" ]'
export TMPDIR="$tmp/td"

# A report that cannot be written is an error, not a silent exit 0.
run count -p cli_target_fn -o /dev/full -- "$target" 1
check "-o /dev/full: 125, says the report was not written" \
	'[ $rc -eq 125 ] && grep -q "cannot write the report to /dev/full: No space left on device" "$tmp/err"'

# JSON is valid UTF-8 whatever bytes a spec holds: each byte that is not
# part of a well-formed sequence is \ufffd (checked by a real parser).
run count --json -p cli_target_fn -p "$(printf 'caf\303\251')" \
	-p "$(printf 'a\377b')" -p "$(printf '\355\240\200')" \
	-p "$(printf '\300\257')" -p "$(printf 'x\342\202')" -o "$tmp/rep" -- "$target" 2
if command -v python3 >/dev/null; then
	check "json: valid UTF-8 with invalid bytes in specs (python3 json)" \
		'python3 -c "
import json, sys
d = json.loads(open(sys.argv[1], \"rb\").read().decode(\"utf-8\"))
s = [p[\"spec\"] for p in d[\"probes\"]]
want = [\"cli_target_fn\", \"caf\u00e9\", \"a\ufffdb\", \"\ufffd\" * 3, \"\ufffd\" * 2, \"x\ufffd\ufffd\"]
assert s == want, s
assert all(\"\ufffd\" in p[\"error\"] for p in d[\"probes\"][2:]), d
" "$tmp/rep"'
else
	echo "skip json: valid UTF-8 (no python3)"
fi

# A spec that cannot name a function is refused before COMMAND runs.
for spec in ':' ':malloc' 'libc.so.6:'; do
	rm -f "$tmp/ran"
	run count -p "$spec" -- sh -c ": >\"$tmp/ran\""
	check "-p '$spec': 125 before COMMAND runs" \
		'[ $rc -eq 125 ] && [ ! -e "$tmp/ran" ] && grep -q "^probekit: -p .*: no" "$tmp/err"'
done

# An error message is never cut (it was at 95 bytes).
long=no_such_function_whose_name_is_long_enough_that_the_message_about_it_runs_well_past_ninety_five_bytes
msg="sym: \"libc.so.6:$long\": no function of that name in libc.so.6"
run count -p cli_target_fn -p "libc.so.6:$long" -o "$tmp/rep" -- "$target" 1
check "a long error message whole in the text report" \
	'[ $rc -eq 0 ] && grep -qF "(not probed in 1 of 1: $msg)" "$tmp/rep"'
run count --json -p cli_target_fn -p "libc.so.6:$long" -o "$tmp/rep" -- "$target" 1
if command -v python3 >/dev/null; then
	check "a long error message whole in the JSON report" \
		'python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
assert d[\"probes\"][1][\"error\"] == sys.argv[2], d[\"probes\"][1]
" "$tmp/rep" "$msg"'
fi
# A sanitizer build: no leak in probekit (LeakSanitizer on, every process
# instrumented), a live -I run with fork and exec, and a refused spec.
if [ "$sanitized" = 1 ]; then
	"$pk_leaks" count -j -I 20 -p cli_target_fn -o "$tmp/rep" -- "$target" 50 \
		fork 2 exec 3 >"$tmp/out" 2>"$tmp/err"
	rc=$?
	check "LeakSanitizer: a -I run with fork and exec, no leak" \
		'[ $rc -eq 0 ] && ! grep -q LeakSanitizer "$tmp/err"'
	"$pk_leaks" count -p : -- "$target" 1 >"$tmp/out" 2>"$tmp/err"
	rc=$?
	check "LeakSanitizer: a refused spec, no leak" \
		'[ $rc -eq 125 ] && ! grep -q LeakSanitizer "$tmp/err"'
fi
check "no temporary directory left behind" '[ -z "$(ls -A "$TMPDIR")" ]'
run --version
check "--version" '[ $rc -eq 0 ] && grep -q "^probekit [0-9]" "$tmp/out"'

finish
