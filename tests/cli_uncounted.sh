#!/bin/sh
# SPDX-License-Identifier: MIT
# cli_uncounted.sh - processes of COMMAND that do not load the agent are
# reported, with the reason, never silently missing (issue 10): a static
# program, env -i and programs that clear or change LD_PRELOAD or drop
# probekit's variables, set-user-ID programs (a setuid-root copy run as
# nobody, a setuid-nobody copy run by root), and a double-forked daemon
# that outlives the command. Runs where every process loads the agent
# report nothing.
# usage: cli_uncounted.sh PROBEKIT CLI_TARGET SANITIZED STATIC_TARGET|none
# shellcheck source=tests/cli_common.sh
. "$(dirname "$0")/cli_common.sh"
static=$4
sleep_bin=$(readlink -f "$(command -v sleep)")

# No false alarm: fork, exec, exec in place, a pipeline, a subshell.
bad=0
for i in 1 2 3 4 5; do
	run count --json -p cli_target_fn -o "$tmp/rep" -- sh -c "\"$target\" 2 fork 1 exec 1 | cat >/dev/null; (env \"$target\" 1); exec \"$target\" 1"
	grep -q '"complete":true,"problems":\[\],"not_counted":\[\],"outlived":\[\]' "$tmp/rep" || { bad=$((bad + 1)); cat "$tmp/rep"; }
done
check "fork, exec, pipeline, subshell: all counted, nothing said (5 runs)" '[ $bad -eq 0 ] && [ $rc -eq 0 ] && [ ! -s "$tmp/err" ]'

# A static program: nothing loads the agent in it.
if [ "$static" != none ] && [ -x "$static" ]; then
	run count -p cli_target_fn -o "$tmp/rep" -- sh -c "\"$static\" 2 sleep 300; \"$target\" 3"
	check "static child: status 0, the dynamic one counted" \
		'[ $rc -eq 0 ] && grep -Eq "^ +3  cli_target_fn  \(not probed in 1 of 2" "$tmp/rep"'
	check "... reported: 1 process not counted, static, by path" \
		'grep -q "^probekit count: 1 process not counted: $static (static, pid [0-9]*)$" "$tmp/err"'
	check "... and in the text report's header" 'grep -q "2 processes, exit status 0 (1 more not counted)" "$tmp/rep"'
	run count --json -p cli_target_fn -o "$tmp/rep" -- "$static" 1 sleep 200 exit 6
	check "static COMMAND: its status 6, no process loaded the agent, static named" \
		'[ $rc -eq 6 ] && grep -q "no process of the command loaded the agent" "$tmp/err" && grep -q "\"complete\":false,.*\"not_counted\":\[{\"pid\":[0-9]*,\"exe\":\"$static\",\"reason\":\"static\"}\]" "$tmp/rep"'
	run count --strict -p cli_target_fn -o "$tmp/rep" -- "$static" 1 sleep 200
	check "... --strict: 125" '[ $rc -eq 125 ]'
else
	echo "skip static: no static C library to build one with (libc.a)"
fi

# env -i, a cleared LD_PRELOAD, one without the agent, a probekit variable gone.
run count --json -p cli_target_fn -o "$tmp/rep" -- sh -c "env -i \"$sleep_bin\" 0.2; env -u LD_PRELOAD sleep 0.2; env LD_PRELOAD= sleep 0.2; env -u PROBEKIT_AGENT_DIR sleep 0.2; \"$target\" 1"
if command -v python3 >/dev/null; then
	check "environment lost: each sleep reported with why" \
		'[ $rc -eq 0 ] && python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
got = [(p[\"exe\"], p[\"reason\"]) for p in d[\"not_counted\"]]
want = [(sys.argv[2], w) for w in (\"no LD_PRELOAD at exec\", \"no LD_PRELOAD at exec\", \"LD_PRELOAD without the agent at exec\", \"no PROBEKIT_AGENT_* variables at exec\")]
assert got == want, got
assert d[\"probes\"][0][\"hits\"] == 1 and not d[\"complete\"], d
" "$tmp/rep" "$sleep_bin"'
else
	check "environment lost: 4 processes not counted" 'grep -q "\"problems\":\[\"4 processes not counted" "$tmp/rep"'
fi
check "... said on stderr" 'grep -q "^probekit count: 4 processes not counted: $sleep_bin (no LD_PRELOAD at exec, pid" "$tmp/err"'

# Processes that end within one scan (10 ms) loading no agent: the kernel
# tells every exec() (cli/execwatch.c), so each is said, none missing
# (before it, most of these went unseen: a run said 0 to 2 of the 4).
# Whether the kernel tells here (perf_event_open permitted): the report says.
xw=0
run count --json -p cli_target_fn -o "$tmp/rep" -- "$target" 1
if grep -q '"exec_watch":{"on":true}' "$tmp/rep"; then
	xw=1
else
	echo "note: exec()s not told by the kernel here: $(sed -n 's/.*"exec_watch":\(.*\)}$/\1/p' "$tmp/rep")"
fi
# A program run from a file removed (or rebuilt) before the run ends, as
# autoconf's conftest: counted by its record, not said (its pid and name).
bad=0
for i in 1 2 3; do
	run count --json -p cli_target_fn -o "$tmp/rep" -- sh -c "for k in 1 2 3 4 5; do cp \"$target\" \"$tmp/ct\" && \"$tmp/ct\" 1 && rm -f \"$tmp/ct\"; done"
	grep -q '"hits":5,.*"complete":true,"problems":\[\],"not_counted":\[\]' "$tmp/rep" || { bad=$((bad + 1)); cat "$tmp/rep"; }
done
check "a program's file removed after it ran (5 in turn): counted, nothing said, 3 runs of 3" '[ $bad -eq 0 ]'
if [ $xw = 1 ] && [ "$static" != none ] && [ -x "$static" ] && command -v python3 >/dev/null; then
	bad=0
	for i in 1 2 3; do
		run count --json -p cli_target_fn -o "$tmp/rep" -- sh -c "\"$static\" 1; \"$static\" 1; \"$static\" 1; env -i \"$sleep_bin\" 0; \"$target\" 1"
		python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
got = [(p['exe'], p['reason']) for p in d['not_counted']]
st = [g for g in got if g == (sys.argv[2], 'static')]
ei = [g for g in got if g[0] == sys.argv[3] and g[1] in ('no LD_PRELOAD at exec', 'ended before probekit could look at it')]
assert len(st) == 3 and len(ei) == 1 and len(got) == 4, got
assert d['probes'][0]['hits'] == 1 and not d['complete'], d
" "$tmp/rep" "$static" "$sleep_bin" || bad=$((bad + 1))
	done
	check "short-lived: 3 static programs and an env -i one, no sleep: all 4 said, 3 runs of 3" \
		'[ $bad -eq 0 ] && [ $rc -eq 0 ]'
	# A wrapper script of the static program's name exec()ing it: the
	# script's record (its name, its pid) must not count the static image.
	mkdir -p "$tmp/wx" "$tmp/wy"
	cp "$static" "$tmp/wx/ct"
	printf '#!/bin/sh\nexec "%s" 1\n' "$tmp/wx/ct" >"$tmp/wy/ct"
	chmod +x "$tmp/wy/ct"
	bad=0
	for i in 1 2 3; do
		run count --json -p cli_target_fn -o "$tmp/rep" -- sh -c "\"$target\" 1; \"$tmp/wy/ct\""
		grep -q "\"not_counted\":\[{\"pid\":[0-9]*,\"exe\":\"$tmp/wx/ct\",\"reason\":\"static\"}\]" "$tmp/rep" || { bad=$((bad + 1)); cat "$tmp/rep"; }
	done
	check "a static program exec()ed by a script of its name: said static, 3 runs of 3" '[ $bad -eq 0 ]'
	# In a pid namespace of its own the records name processes by other
	# pids: short-lived ones that loaded the agent are still counted.
	if unshare -pf true 2>/dev/null; then
		bad=0
		for i in 1 2 3; do
			run count --json -p cli_target_fn -o "$tmp/rep" -- unshare -pf sh -c "for k in 1 2 3 4 5; do \"$target\" 1; done"
			grep -q '"hits":5,.*"not_counted":\[\]' "$tmp/rep" || { bad=$((bad + 1)); cat "$tmp/rep"; }
		done
		check "unshare -pf: 5 short-lived processes counted, none said not counted, 3 runs of 3" '[ $bad -eq 0 ]'
	else
		echo "skip pid namespace: unshare -pf not permitted here"
	fi
else
	echo "skip short-lived: the kernel does not tell exec()s here (see the note above), no static target or no python3"
fi

# Set-user-ID: the dynamic linker ignores LD_PRELOAD's agent there.
if [ "$(id -u)" = 0 ]; then
	sdir=$(mktemp -d /tmp/pk-suid.XXXXXX)
	chmod 755 "$sdir"
	cp "$sleep_bin" "$sdir/sleep-nobody"
	chown 65534 "$sdir/sleep-nobody"
	chmod 4755 "$sdir/sleep-nobody"
	run count -p cli_target_fn -o "$tmp/rep" -- sh -c "\"$sdir/sleep-nobody\" 0.2; \"$target\" 1"
	if grep -q "sleep-nobody" "$tmp/err" || [ "$(stat -c %u "$sdir/sleep-nobody")" = 65534 ]; then
		check "setuid-nobody program run by root: reported setuid" \
			'[ $rc -eq 0 ] && grep -q "^probekit count: 1 process not counted: $sdir/sleep-nobody (setuid, pid" "$tmp/err"'
		# Ending at once: the kernel tells its exec(), not its file.
		if [ $xw = 1 ]; then
			bad=0
			for i in 1 2 3; do
				run count -p cli_target_fn -o "$tmp/rep" -- sh -c "\"$sdir/sleep-nobody\" 0; \"$target\" 1"
				grep -Eq "^probekit count: 1 process not counted: ($sdir/sleep-nobody \(setuid|\[sleep-nobody\] \(setuid or unreadable, ended before probekit could look at it), pid [0-9]+\)$" "$tmp/err" || bad=$((bad + 1))
			done
			check "setuid-nobody program ending at once: said, 3 runs of 3" '[ $bad -eq 0 ] && [ $rc -eq 0 ]'
		fi
	fi
	# A setuid-root copy run by nobody (probekit as nobody too): its
	# exe cannot be looked at (argv[0] names it), its ids still can.
	if [ "$sanitized" = 0 ] && command -v setpriv >/dev/null; then
		cp "$sleep_bin" "$sdir/sleep-root"
		chmod 4755 "$sdir/sleep-root"
		mkdir "$sdir/td"
		chown 65534 "$sdir/td"
		: >"$sdir/rep"
		chown 65534 "$sdir/rep"
		setpriv --reuid=65534 --regid=65534 --clear-groups env TMPDIR="$sdir/td" \
			"$pk" count --json -p cli_target_fn -o "$sdir/rep" -- sh -c "\"$sdir/sleep-root\" 0.2; \"$target\" 1" \
			>"$tmp/out" 2>"$tmp/err"
		rc=$?
		if grep -q 'cli_target done' "$tmp/out"; then
			check "setuid-root program run by nobody: reported setuid" \
				'[ $rc -eq 0 ] && grep -q "\"not_counted\":\[{\"pid\":[0-9]*,\"exe\":\"$sdir/sleep-root\",\"reason\":\"setuid\"}\]" "$sdir/rep"'
		else
			echo "skip setuid-root as nobody: nobody cannot run the build's files here ($(head -c 200 "$tmp/err"))"
		fi
	else
		echo "skip setuid-root as nobody: a sanitizer build's wrapper, or no setpriv"
	fi
	rm -rf "$sdir"
else
	echo "skip setuid: not root (cannot make a set-user-ID copy)"
fi

# A double-forked daemon outlives the command: said, left running, its
# calls before the report counted (the 5; its 7 come 400 ms later).
run count --json -p cli_target_fn -o "$tmp/rep" -- "$target" 5 daemon 7
check "daemon: COMMAND's status, its 5 calls, the daemon outlived it" \
	'[ $rc -eq 0 ] && grep -q "\"hits\":5,.*\"not_counted\":\[\],\"outlived\":\[{\"pid\":[0-9]*,\"exe\":\"$target\"}\]" "$tmp/rep"'
check "... said on stderr" 'grep -q "^probekit count: 1 process outlived the command" "$tmp/err"'
pid=$(sed -n 's/.*"outlived":\[{"pid":\([0-9]*\),.*/\1/p' "$tmp/rep")
check "... still running after probekit ended" '[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null'
run count --strict -p cli_target_fn -o "$tmp/rep" -- "$target" 5 daemon 7
check "... --strict: 125" '[ $rc -eq 125 ]'
sleep 0.6
# --wait-all: probekit waits for it, and counts its 7 too.
run count --wait-all --json -p cli_target_fn -o "$tmp/rep" -- "$target" 5 daemon 7
check "--wait-all: the daemon's calls counted too (12), nothing outlived" \
	'[ $rc -eq 0 ] && grep -q "\"hits\":12,.*\"complete\":true,.*\"outlived\":\[\]" "$tmp/rep" && [ ! -s "$tmp/err" ]'
check "no temporary directory left behind" '[ -z "$(ls -A "$TMPDIR")" ]'
finish
