#!/bin/sh
# SPDX-License-Identifier: MIT
# cli_signals.sh - the probekit command when it is signalled: SIGINT,
# SIGTERM, SIGHUP and SIGQUIT sent to probekit reach COMMAND and the report
# still prints with COMMAND's status; a report to a closed pipe does not
# orphan COMMAND; a SIGKILLed probekit leaves no directory and COMMAND is
# told (SIGTERM).
# usage: cli_signals.sh PROBEKIT CLI_TARGET [SANITIZED] (see cli_common.sh)
# shellcheck source=tests/cli_common.sh
. "$(dirname "$0")/cli_common.sh"
ulimit -c 0

wait_for() { # until file $1 exists, 10 s at most
	i=0
	while [ ! -e "$1" ] && [ $i -lt 200 ]; do
		sleep 0.05
		i=$((i + 1))
	done
}

fresh() { # an empty TMPDIR: one case's leftovers do not fail the next
	find "$TMPDIR" -mindepth 1 -delete
}

# Wait for background job $1 into $rc; SIGKILL it after $2 s (rc 137).
reap() {
	(
		trap 'kill "$s"; exit 0' TERM
		sleep "$2" &
		s=$!
		wait "$s"
		kill -KILL "$1"
	) >/dev/null 2>&1 &
	dog=$!
	wait "$1"
	rc=$?
	kill "$dog" 2>/dev/null
}

# Each signal, sent to probekit alone (kill(1), not the terminal): it
# reaches COMMAND (here sleep, which it kills: 128+N), probekit reports
# the counts so far and leaves nothing behind. env --default-signal: a
# shell starts background jobs with SIGINT and SIGQUIT ignored, and
# probekit passes on what it was given.
for sn in INT:2 TERM:15 HUP:1 QUIT:3; do
	sig=${sn%:*}
	n=${sn#*:}
	rm -f "$tmp/ready" "$tmp/rep" "$tmp/cmdpid"
	env --default-signal=INT,QUIT "$pk" count -p cli_target_fn -o "$tmp/rep" -- \
		sh -c "\"$target\" 10 >/dev/null; echo \$\$ >\"$tmp/cmdpid\"; : >\"$tmp/ready\"; exec sleep 30" \
		>"$tmp/out" 2>"$tmp/err" &
	pid=$!
	wait_for "$tmp/ready"
	kill -"$sig" "$pid"
	reap "$pid" 10
	check "SIG$sig to probekit: COMMAND killed by it, status $((128 + n))" \
		'[ $rc -eq $((128 + n)) ]'
	check "SIG$sig to probekit: the report printed, 10 counted" \
		'grep -Eq "^ +10  cli_target_fn" "$tmp/rep"'
	check "SIG$sig to probekit: nothing left behind" '[ -z "$(ls -A "$TMPDIR")" ]'
	# (Where probekit died instead, its sleep runs on: end it.)
	cpid=$(cat "$tmp/cmdpid")
	if ! grep -Eq "^ +10  cli_target_fn" "$tmp/rep" 2>/dev/null; then
		grep -qs sleep "/proc/$cpid/cmdline" && kill -KILL "$cpid"
	fi
	fresh
done

# ^C on a terminal: the terminal sends SIGINT to the whole foreground
# process group, probekit and COMMAND (not forwarded a second time);
# COMMAND dies of it, probekit reports and exits 130. A pty from python3.
if command -v python3 >/dev/null; then
	rm -f "$tmp/ready" "$tmp/rep"
	python3 - "$pk" "$target" "$tmp" >"$tmp/pty.out" 2>&1 <<'PY'
import os, pty, sys, time
pk, target, tmp = sys.argv[1:4]
pid, fd = pty.fork()
if pid:
    os.set_blocking(fd, False)
if pid == 0:
    os.execv(pk, [pk, "count", "-p", "cli_target_fn", "-o", tmp + "/rep", "--",
                  "sh", "-c", '"$0" 10 >/dev/null; : >"$1/ready"; exec sleep 30',
                  target, tmp])
for _ in range(200):
    if os.path.exists(tmp + "/ready"):
        break
    time.sleep(0.05)
time.sleep(0.2)
os.write(fd, b"\x03")
end = time.time() + 10
while time.time() < end:
    got, status = os.waitpid(pid, os.WNOHANG)
    if got:
        print("status", os.waitstatus_to_exitcode(status))
        break
    try:
        os.read(fd, 4096)
    except OSError:
        pass
    time.sleep(0.05)
else:
    os.kill(pid, 9)
    print("status timeout")
PY
	check "^C on a terminal: COMMAND killed by it, probekit reports, 130" \
		'grep -qx "status 130" "$tmp/pty.out" && grep -Eq "^ +10  cli_target_fn" "$tmp/rep"'
	check "^C on a terminal: nothing left behind" '[ -z "$(ls -A "$TMPDIR")" ]'
	fresh
else
	echo "skip ^C on a terminal (no python3)"
fi

# Started with SIGCHLD ignored (inherited: the kernel would reap COMMAND
# unseen): probekit takes SIGCHLD back and still gives COMMAND's status.
if command -v python3 >/dev/null; then
	python3 - "$pk" "$tmp" >"$tmp/chld.out" 2>&1 <<'PY'
import os, signal, sys
pk, tmp = sys.argv[1:3]
pid = os.fork()
if pid == 0:
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    fd = os.open(tmp + "/chld.err", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 2)
    os.execv(pk, [pk, "count", "-p", "malloc", "--", "sh", "-c", "exit 4"])
print("status", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
PY
	check "SIGCHLD ignored by probekit's parent: COMMAND's status 4" \
		'grep -qx "status 4" "$tmp/chld.out"'
	fresh
fi

# A COMMAND that takes SIGTERM as its own and ends its own way: its status.
rm -f "$tmp/ready" "$tmp/cmdpid"
"$pk" count -p malloc -o "$tmp/rep" -- sh -c \
	"echo \$\$ >\"$tmp/cmdpid\"; trap 'exit 3' TERM; : >\"$tmp/ready\"; while :; do sleep 0.05; done" \
	>"$tmp/out" 2>"$tmp/err" &
pid=$!
wait_for "$tmp/ready"
kill -TERM "$pid"
reap "$pid" 10
check "SIGTERM handled by COMMAND: its exit status 3 and a report" \
	'[ $rc -eq 3 ] && grep -q "probekit count: .*exit status 3" "$tmp/rep"'
# (Where probekit died instead, COMMAND runs on: end it.)
[ $rc -eq 3 ] || kill -KILL "$(cat "$tmp/cmdpid")" 2>/dev/null
fresh

# The report to a pipe whose reader went away (-I ... 2>&1 | head -1):
# probekit is not killed by SIGPIPE, waits for COMMAND (which goes on to
# its end), removes the directory and exits 125.
rm -f "$tmp/done" "$tmp/st"
{
	"$pk" count -I 50 -p cli_target_fn -- \
		sh -c "\"$target\" 1 >/dev/null; sleep 1; : >\"$tmp/done\""
	echo $? >"$tmp/st"
} 2>&1 | head -n 1 >"$tmp/first"
check "report to a closed pipe: COMMAND ran to its end under probekit" \
	'[ -e "$tmp/done" ]'
check "report to a closed pipe: 125" '[ "$(cat "$tmp/st" 2>/dev/null)" = 125 ]'
check "report to a closed pipe: the first line was the report's" \
	'grep -q "cli_target_fn" "$tmp/first"'
check "report to a closed pipe: nothing left behind" '[ -z "$(ls -A "$TMPDIR")" ]'
fresh

# probekit killed by SIGKILL: its guard removes the directory, and COMMAND
# gets SIGTERM (PR_SET_PDEATHSIG) instead of running on unwatched.
rm -f "$tmp/ready" "$tmp/got" "$tmp/cmdpid"
"$pk" count -p cli_target_fn -o "$tmp/rep" -- sh -c \
	"echo \$\$ >\"$tmp/cmdpid\"; trap ': >\"$tmp/got\"; exit 0' TERM; : >\"$tmp/ready\"; while :; do sleep 0.05; done" \
	>"$tmp/out" 2>"$tmp/err" &
pid=$!
wait_for "$tmp/ready"
kill -KILL "$pid"
wait "$pid" 2>/dev/null
wait_for "$tmp/got"
i=0
while [ -n "$(ls -A "$TMPDIR")" ] && [ $i -lt 100 ]; do
	sleep 0.05
	i=$((i + 1))
done
check "SIGKILLed probekit: COMMAND got SIGTERM" '[ -e "$tmp/got" ]'
check "SIGKILLed probekit: nothing left behind" '[ -z "$(ls -A "$TMPDIR")" ]'
[ -e "$tmp/got" ] || kill -KILL "$(cat "$tmp/cmdpid")" 2>/dev/null

finish
