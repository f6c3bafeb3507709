#!/bin/sh
# SPDX-License-Identifier: MIT
# cli-tty.sh - the command on a terminal (issue 11, "The terminal"): under
# a pseudo-terminal (python3's pty module) a glob arming thousands of
# functions shows a progress line on stderr ("arming N of M functions"),
# erased before the report; piped, or with --quiet, or TERM=dumb, nothing
# of it, and the report byte for byte the same; colour on the terminal
# only, none with NO_COLOR (not even the progress line's erase sequence),
# --color=always piped gives colour, --json and -o FILE never do.
# The progress line is forced at once (PROBEKIT_PROGRESS_DELAY_MS=0, the
# test hook): no timing is asserted, only that arming libc's ~3 600
# functions (~0.4 s here) is seen by the command's 10 ms scans.
# trace on a tty: writing a trace of 600 000 calls shows "writing N of M
# events to FILE", erased before the summary; --quiet, none.
# usage: cli-tty.sh PROBEKIT CLI_TARGET SANITIZED [TRACE_TARGET]
# shellcheck source=tests/cli_common.sh
. "$(dirname "$0")/cli_common.sh"

command -v python3 >/dev/null || { echo "SKIP: no python3 (its pty module)"; exit 77; }

# ptyrun.py OUT CMD...: CMD with stdin, stdout and stderr on a new pty
# (200 columns, no \n -> \r\n translation: the bytes are the program's),
# all it writes into OUT; exits with CMD's status.
cat >"$tmp/ptyrun.py" <<'PY'
import fcntl, os, pty, struct, sys, termios
pid, fd = pty.fork()
if pid == 0:
    a = termios.tcgetattr(0)
    a[1] &= ~termios.OPOST
    termios.tcsetattr(0, termios.TCSANOW, a)
    fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
    os.execvp(sys.argv[2], sys.argv[2:])
out = b""
while True:
    try:
        d = os.read(fd, 65536)
    except OSError:
        break
    if not d:
        break
    out += d
_, st = os.waitpid(pid, 0)
open(sys.argv[1], "wb").write(out)
sys.exit(os.waitstatus_to_exitcode(st) if hasattr(os, "waitstatus_to_exitcode") else st >> 8)
PY

# killer.py OUT CMD...: as ptyrun.py, and kills (SIGKILL, by its pid) the
# first process named "true" the progress line shows arming (or
# registering); OUT gets a line "KILLED AT <offset>" (where that line's
# text ends: its erase may have come in the same read) before what was
# read.
cat >"$tmp/killer.py" <<'PY'
import os, pty, re, select, sys
pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[2], sys.argv[2:])
out, at = b"", -1
while True:
    try:
        d = os.read(fd, 65536)
    except OSError:
        break
    if not d:
        break
    out += d
    m = re.search(rb"(?:arming [0-9 ]+ of [0-9 ]+ functions|registering [0-9 ]+ probes) in true \(pid ([0-9]+)\)", out)
    if m and at < 0:
        at = m.end()
        try:
            os.kill(int(m.group(1)), 9)
        except ProcessLookupError:
            pass
os.waitpid(pid, 0)
open(sys.argv[1], "wb").write(b"KILLED AT %d\n" % at + out)
PY

# py EXPR FILE: EXPR true of b, FILE's bytes (re imported).
py() {
	python3 -c "import re, sys; b = open(sys.argv[1], 'rb').read(); sys.exit(0 if ($1) else 1)" "$2"
}
tty_run() { # tty_run OUT ARGS...: probekit ARGS under a pty; status in $rc
	o=$1
	shift
	python3 "$tmp/ptyrun.py" "$o" "$pk" "$@"
	rc=$?
}

glob='libc.so.6:*'
export PROBEKIT_PROGRESS_DELAY_MS=0
export TERM=xterm
unset NO_COLOR

# --- on a terminal: the progress line, then erased, then the report -------
tty_run "$tmp/tty" count -p "$glob" -- /bin/true
check "tty: status 0" '[ $rc -eq 0 ]'
check "... a progress line: arming N of M functions in true (pid P)" \
	"py 're.search(rb\"\\rprobekit: arming [0-9][0-9 ]* of [1-9][0-9 ]* functions in true \\(pid [0-9]+\\)\\.\\.\\.\\x1b\\[K\", b)' '$tmp/tty'"
check "... erased (CR ESC[K) after its last draw, before the report" \
	"py 'b.rfind(b\"arming\") < b.rfind(b\"\\r\\x1b[K\") < b.find(b\" probekit count:\") and b\"arming\" not in b[b.rfind(b\"\\r\\x1b[K\"):]' '$tmp/tty'"
check "... the report's header in colour (bold)" \
	"py 'b\"\\x1b[1m\" in b and b\"\\x1b[m\" in b' '$tmp/tty'"

# --- piped: nothing of it; the same bytes as with --quiet -----------------
run count -p "$glob" -- /bin/true
cp "$tmp/err" "$tmp/piped"
check "piped: status 0, the report there" \
	"[ \$rc -eq 0 ] && grep -q 'probekit count: 1 process' '$tmp/piped'"
check "... no progress, no CR, no escape sequence" \
	"py 'b\"arming\" not in b and b\"\\r\" not in b and b\"\\x1b\" not in b' '$tmp/piped'"
run count -q -p "$glob" -- /bin/true
check "... byte-identical to a --quiet run" "cmp -s '$tmp/piped' '$tmp/err'"
tty_run "$tmp/ttyq" count --quiet --color=never -p "$glob" -- /bin/true
check "tty --quiet --color=never: byte-identical to the piped run" \
	"cmp -s '$tmp/piped' '$tmp/ttyq'"
PROBEKIT_PROGRESS_DELAY_MS=3600000 tty_run "$tmp/late" count --color=never -p "$glob" -- /bin/true
check "tty, arming shorter than the delay: nothing extra, the piped bytes" \
	"cmp -s '$tmp/piped' '$tmp/late'"
TERM=dumb tty_run "$tmp/dumb" count -p "$glob" -- /bin/true
check "tty, TERM=dumb: no progress, no colour: the piped bytes" \
	"cmp -s '$tmp/piped' '$tmp/dumb'"

# --- NO_COLOR: no escape sequence at all, the line still drawn ------------
NO_COLOR=1 tty_run "$tmp/nc" count -p "$glob" -p no_such_function_xyz -- /bin/true
check "NO_COLOR=1 on a tty: progress shown, blanked, not one ESC" \
	"py 'b\"arming\" in b and b\"\\x1b\" not in b and b\"not probed\" in b' '$tmp/nc'"
check "... erased by blanks and CR before the report" \
	"py 're.search(rb\"\\r +\\r\\n probekit count:\", b)' '$tmp/nc'"
NO_COLOR= tty_run "$tmp/nce" count -q -p no_such_function_xyz -- /bin/true
check "NO_COLOR empty: colour (no-color.org: set and not empty)" \
	"py 'b\"\\x1b[31m\" in b' '$tmp/nce'"

# --- a process killed while arming: its line goes at once, not at the end -
# bash waits for the killed /bin/true, then 2 s more before "done". Where
# the progress line never showed true (armed between two scans of a
# loaded machine) there is nothing to kill: said, not failed.
if command -v bash >/dev/null; then
	python3 "$tmp/killer.py" "$tmp/kill" "$pk" count -p "$glob" -- bash -c \
		'/bin/true & wait; exec 3<> <(:); read -t 2 <&3; echo done'
	if py 'int(b.split()[2]) < 0' "$tmp/kill"; then
		echo "note: /bin/true was not seen arming; the kill check is not made"
	else
		check "killed while arming: the line erased before COMMAND goes on (done)" \
			"py '(k := int(b.split()[2])) > 0 and 0 <= b.find(b\"\\r\\x1b[K\", k) < b.find(b\"done\")' '$tmp/kill'"
	fi
fi

# --- --color: always piped, never in JSON or -o FILE -----------------------
run count --color=always -p "$glob" -p no_such_function_xyz -- /bin/true
check "--color=always piped: colour (header bold, not probed red)" \
	"py 'b\"\\x1b[1m\" in b and b\"\\x1b[31m(not probed\" in b and b\"arming\" not in b' '$tmp/err'"
run count --color=always -p "$glob" -p no_such_function_xyz -- /bin/true
sed 's/\x1b\[[0-9;]*m//g' "$tmp/err" >"$tmp/stripped"
run count -p "$glob" -p no_such_function_xyz -- /bin/true
check "... and without them, the uncoloured report's bytes" \
	"cmp -s '$tmp/stripped' '$tmp/err'"
run count --color=always --json -p "$glob" -- /bin/true
check "--color=always --json: no escape sequence, valid JSON" \
	"py 'b\"\\x1b\" not in b' '$tmp/err' && python3 -m json.tool '$tmp/err' >/dev/null"
tty_run "$tmp/ttyj" count --json -q -p "$glob" -- /bin/true
check "--json on a tty (--quiet): no escape sequence" \
	"[ \$rc -eq 0 ] && py 'b\"\\x1b\" not in b and b\"\\\"probes\\\"\" in b' '$tmp/ttyj'"
tty_run "$tmp/ttyo" count --color=always -o "$tmp/rep.txt" -p "$glob" -- /bin/true
check "-o FILE (--color=always, on a tty): the file has no escape sequence" \
	"[ \$rc -eq 0 ] && py 'b\"\\x1b\" not in b and b\"probekit count:\" in b' '$tmp/rep.txt'"
check "... the progress line still on the tty's stderr" \
	"py 'b\"arming\" in b' '$tmp/ttyo'"
run count --color=sometimes -p x -- /bin/true
check "--color=sometimes: usage error 125, said" \
	"[ \$rc -eq 125 ] && grep -q 'auto, always or never' '$tmp/err'"

# --- time: the same line; stat and list colour ----------------------------
tty_run "$tmp/time" time -p "$glob" -- /bin/true
check "time on a tty: progress, erased before the report, header bold" \
	"[ \$rc -eq 0 ] && py 'b\"arming\" in b and b.rfind(b\"arming\") < b.rfind(b\"\\r\\x1b[K\") < b.find(b\" probekit time:\") and b\"\\x1b[1m\" in b' '$tmp/time'"
run time --format openmetrics --color=always -p "$glob" -- /bin/true
check "time --format openmetrics --color=always: no escape sequence" \
	"[ \$rc -eq 0 ] && py 'b\"\\x1b\" not in b and b\"# EOF\" in b' '$tmp/err'"
run stat --color=always -- /bin/true
check "stat --color=always: the header bold" \
	"[ \$rc -eq 0 ] && py 'b\"\\x1b[1mPerformance counter stats\" in b' '$tmp/err'"
run stat -- /bin/true
check "stat piped: no escape sequence" "py 'b\"\\x1b\" not in b' '$tmp/err'"
"$pk" list --color=always 'libc.so.6:str*' -- /bin/true >"$tmp/list" 2>"$tmp/err"
check "list --color=always: the header bold (stdout)" \
	"py 'b.startswith(b\"\\x1b[1mOBJECT\")' '$tmp/list'"
"$pk" list 'libc.so.6:str*' -- /bin/true >"$tmp/list" 2>"$tmp/err"
check "list piped: no escape sequence" "py 'b\"\\x1b\" not in b' '$tmp/list'"

# --- trace: writing the trace on the progress line -------------------------
tt=${4:-}
if [ -n "$tt" ] && [ -x "$tt" ]; then
	tty_run "$tmp/trace" trace --buffer-size 64M -p trace_f -o "$tmp/t.json" -- "$tt" calls 600000
	check "trace on a tty: 'writing N of 600 000 events to FILE', erased before the summary" \
		"[ \$rc -eq 0 ] && py 're.search(rb\"\\rprobekit: writing [0-9][0-9 ]* of 600 000 events to [^ ]*t.json\\.\\.\\.\\x1b\\[K\", b) and b.rfind(b\"writing\") < b.rfind(b\"\\r\\x1b[K\") < b.find(b\"probekit trace: 600000 events written\")' '$tmp/trace'"
	tty_run "$tmp/traceq" trace -q --buffer-size 64M -p trace_f -o "$tmp/t.json" -- "$tt" calls 600000
	check "trace -q on a tty: no progress line, the summary alone" \
		"[ \$rc -eq 0 ] && py 'b\"writing\" not in b and b\"arming\" not in b and b\"\\x1b\" not in b and b\"600000 events written\" in b' '$tmp/traceq'"
else
	echo "note: no TRACE_TARGET given: trace's progress line not checked"
fi

finish
