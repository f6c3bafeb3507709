#!/bin/sh
# SPDX-License-Identifier: MIT
# cli-stat.sh - probekit stat (issue 11, Counters): its perf counters
# against the figures the kernel keeps without perf (the target's own
# getrusage() and /proc, COMMAND's wait4() rusage), summed over threads,
# fork()ed and exec()ed processes; JSON parsed by python3; exit statuses
# passed through; usage failures; counters forced to fail (the
# PROBEKIT_STAT_FAIL test hook), user-space-only counting (forced, and
# for real as nobody where we are root), multiplexed counters scaled.
# usage: cli-stat.sh PROBEKIT CLI_STAT_TARGET SANITIZED
# shellcheck source=tests/cli_common.sh
. "$(dirname "$0")/cli_common.sh"

# Tolerances, and why:
#  - PRE: faults, switches and CPU time between probekit's fork() and the
#    exec are in the target's and wait4()'s rusage (the kernel counts a
#    task from its fork) but not in the counters (enabled on exec): the
#    child's copy-on-write faults in probekit's pages, its wait on the
#    handshake pipe. Measured here: 25 faults, 1 switch (an ASan build of
#    probekit faults more: its shadow).
#  - POST: what the target does after its getrusage() (printf, exit) is
#    counted by stat, not in its report: a few faults.
#  - CPU: task-clock and utime+stime are both the scheduler's runtime
#    (cputime_adjust() makes utime+stime sum to it), less the pre-exec
#    part, and whatever a thread's exit adds after the target's report:
#    20 ms + 10% (5 ms + 5% failed once at load average 20-40; a counter
#    that missed a thread or a process would still be off by half).
#  - DIFF: two runs N and 2N apart differ by N syscalls, and by as many
#    faults as the target's own rusage says, +-8 for the runs' own noise
#    (an ASLR layout that needs one more page-table page, a libc path
#    taken once more).
PRE=64
[ "$sanitized" = 1 ] && PRE=512
POST=64
DIFF=8
N=2000

# js FILE EXPR: EXPR true of the JSON report in FILE (j), the target's
# JSON line in $tmp/out (t, if there is one); else it fails.
js() {
	python3 - "$@" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
try:
    t = json.loads(open(sys.argv[3]).read().splitlines()[0])
except Exception:
    t = None
c = j["counters"]
v = lambda n: c[n]["value"]
sys.exit(0 if eval(sys.argv[2]) else 1)
EOF
}
# J EXPR: js on $tmp/j and $tmp/out.
J() {
	js "$tmp/j" "$1" "$tmp/out"
}
jrun() { # probekit stat --json -o $tmp/j ARGS; target's stdout in $tmp/out
	rm -f "$tmp/j"
	"$pk" stat --json -o "$tmp/j" "$@" >"$tmp/out" 2>"$tmp/err"
	rc=$?
}

# Are we allowed the syscalls tracepoint here (root, tracefs)?
root=0
[ "$(id -u)" -eq 0 ] && root=1

# ---- text report, on stderr; COMMAND's stdout its own ----
run stat -- "$target" pages 100
check "text: status 0, perf stat's header, the counters, wall time" \
	'[ $rc -eq 0 ] && grep -q "Performance counter stats for '"'"'$target pages 100'"'"':" "$tmp/err" && grep -qE "^ +[0-9.]+ msec task-clock" "$tmp/err" && grep -qE "^ +[0-9]+ +minor-faults" "$tmp/err" && grep -qE "^ +[0-9]+ +context-switches" "$tmp/err" && grep -q "seconds time elapsed" "$tmp/err" && grep -q "seconds user" "$tmp/err"'
check "... COMMAND's stdout untouched (its JSON line alone), the report not in it" \
	'[ "$(wc -l <"$tmp/out")" -eq 1 ] && grep -q "^{\"minflt\"" "$tmp/out" && ! grep -q "task-clock" "$tmp/out"'
check "... cycles and instructions: counted, or <not supported> / <not counted> said with why" \
	'grep -qE "^ +([0-9]+|<not supported>|<not counted>) +cycles" "$tmp/err" && grep -qE "^ +([0-9]+|<not supported>|<not counted>) +instructions" "$tmp/err" && ! grep -qE "<not (supported|counted)> +(cycles|instructions) *$" "$tmp/err"'

# A sanitizer build: probekit stat (and the instrumented target) leak nothing.
if [ "$sanitized" = 1 ]; then
	"$pk_leaks" stat --json -- "$target" pages 10 >"$tmp/out" 2>"$tmp/err"
	rc=$?
	check "sanitized: no leak, no ASan report" \
		'[ $rc -eq 0 ] && ! grep -qE "LeakSanitizer|AddressSanitizer" "$tmp/err"'
fi

# ---- one process: faults, syscalls, switches, CPU time ----
jrun -- "$target" pages $N syscalls $N sleeps 50 spin 100
check "json: status 0, parsed, the command and its status" \
	'[ $rc -eq 0 ] && J "j[\"command\"][0].endswith(\"cli_stat_target\") and j[\"exit_status\"] == 0 and t is not None"'
check "minor-faults >= N and within -PRE..+POST of the target's getrusage ru_minflt" \
	'J "v(\"minor-faults\") >= $N and -$PRE <= v(\"minor-faults\") - t[\"minflt\"] <= $POST"'
check "... and of /proc/self/stat's minflt" \
	'J "-$PRE <= v(\"minor-faults\") - t[\"proc_minflt\"] <= $POST"'
check "... wait4()'s ru_minflt is the counter's plus the pre-exec faults only" \
	'J "0 <= j[\"rusage\"][\"minflt\"] - v(\"minor-faults\") <= $PRE"'
check "page-faults >= minor + major; major-faults as the rusage's" \
	'J "v(\"page-faults\") >= v(\"minor-faults\") + v(\"major-faults\") and abs(v(\"major-faults\") - t[\"majflt\"]) <= 2"'
check "context-switches >= 50 sleeps, within 5+10% of the target's nvcsw+nivcsw" \
	'J "v(\"context-switches\") >= 50 and abs(v(\"context-switches\") - t[\"nvcsw\"] - t[\"nivcsw\"]) <= 5 + 0.1 * v(\"context-switches\")"'
check "task-clock within 5 ms + 5% of the target's utime+stime, and of wait4()'s" \
	'J "v(\"task-clock\") >= 100e6 and abs(v(\"task-clock\") / 1e3 - t[\"cpu_us\"]) <= 20000 + 0.1 * t[\"cpu_us\"] and abs(v(\"task-clock\") / 1e3 - j[\"rusage\"][\"utime_us\"] - j[\"rusage\"][\"stime_us\"]) <= 20000 + 0.1 * t[\"cpu_us\"]"'
check "wall time covers the task clock of one thread; CPUs utilized is their ratio" \
	'J "j[\"wall_ns\"] >= v(\"task-clock\") * 0.95 and abs(j[\"ratios\"][\"cpus_utilized\"] - v(\"task-clock\") / j[\"wall_ns\"]) < 1e-3"'
if [ $root = 1 ]; then
	check "syscalls (root: the raw_syscalls tracepoint) >= N getppid()" \
		'J "c[\"syscalls\"][\"status\"] == \"counted\" and v(\"syscalls\") >= $N"'
	check "... faults per syscall is their ratio" \
		'J "abs(j[\"ratios\"][\"faults_per_syscall\"] - v(\"page-faults\") / v(\"syscalls\")) < 1e-3"'
else
	check "syscalls (not root): not counted, with the reason" \
		'J "v(\"syscalls\") is None and c[\"syscalls\"][\"status\"] == \"not counted\" and len(c[\"syscalls\"][\"reason\"]) > 10"'
fi
check "cycles, instructions: a value, or null with a status and a reason; instructions per fault only with instructions" \
	'J "all((v(n) is not None and v(n) > 0 and c[n][\"reason\"] is None) or (v(n) is None and c[n][\"status\"] in (\"not supported\", \"not counted\") and c[n][\"reason\"]) for n in (\"cycles\", \"instructions\")) and ((v(\"instructions\") is None) == (j[\"ratios\"][\"insn_per_fault\"] is None))"'
check "nothing scaled (software counters are never multiplexed)" \
	'J "not any(e.get(\"scaled\") for e in c.values())"'

# ---- differences of runs N apart: exactly the work added ----
# (Under ASan the target's stores fault in their shadow too, a page per 8:
# the faults differ as its own rusage does, by at least N.)
jrun -- "$target" pages $N syscalls $N
cp "$tmp/j" "$tmp/j1"
cp "$tmp/out" "$tmp/out1"
jrun -- "$target" pages $((2 * N)) syscalls $((2 * N))
check "pages N vs 2N: minor-faults differ as the target's ru_minflt does +-$DIFF, by >= N" \
	'J "abs((v(\"minor-faults\") - json.load(open(\"$tmp/j1\"))[\"counters\"][\"minor-faults\"][\"value\"]) - (t[\"minflt\"] - json.load(open(\"$tmp/out1\"))[\"minflt\"])) <= $DIFF and v(\"minor-faults\") - json.load(open(\"$tmp/j1\"))[\"counters\"][\"minor-faults\"][\"value\"] >= $N - $DIFF"'
if [ $root = 1 ]; then
	check "syscalls N vs 2N: differ by N +-$DIFF" \
		'js "$tmp/j" "abs(v(\"syscalls\") - json.load(open(\"$tmp/j1\"))[\"counters\"][\"syscalls\"][\"value\"] - $N) <= $DIFF"'
fi

# ---- threads and processes: every one summed (inherit) ----
jrun -- "$target" threads 2 pages $N syscalls $N sleeps 20 spin 50
check "2 threads: minor-faults >= 2N, near the target's rusage; switches >= 40" \
	'[ $rc -eq 0 ] && J "v(\"minor-faults\") >= 2 * $N and -$PRE <= v(\"minor-faults\") - t[\"minflt\"] <= $POST and v(\"context-switches\") >= 40"'
check "... task-clock is both threads' CPU time (utime+stime of the process)" \
	'J "v(\"task-clock\") >= 100e6 and abs(v(\"task-clock\") / 1e3 - t[\"cpu_us\"]) <= 20000 + 0.1 * t[\"cpu_us\"]"'
[ $root = 1 ] && check "... syscalls >= 2N" 'J "v(\"syscalls\") >= 2 * $N"'

jrun -- "$target" procs 3 pages $N syscalls $N sleeps 20 spin 50
check "3 processes (fork): minor-faults >= 3N, near the target's self+children rusage" \
	'[ $rc -eq 0 ] && J "v(\"minor-faults\") >= 3 * $N and -$PRE <= v(\"minor-faults\") - t[\"minflt\"] <= $POST + 2 * $POST"'
check "... task-clock is the three's CPU time; switches >= 60" \
	'J "v(\"task-clock\") >= 150e6 and abs(v(\"task-clock\") / 1e3 - t[\"cpu_us\"]) <= 20000 + 0.1 * t[\"cpu_us\"] and v(\"context-switches\") >= 60"'
[ $root = 1 ] && check "... syscalls >= 3N" 'J "v(\"syscalls\") >= 3 * $N"'

jrun -- sh -c "\"$target\" pages $N >/dev/null; \"$target\" pages $N >/dev/null"
check "sh running the target twice (fork + exec): minor-faults >= 2N" \
	'[ $rc -eq 0 ] && J "v(\"minor-faults\") >= 2 * $N"'

# ---- exit statuses: COMMAND's, the report still written ----
jrun -- sh -c 'exit 3'
check "exit 3 -> 3, in the JSON too" '[ $rc -eq 3 ] && J "j[\"exit_status\"] == 3"'
jrun -- sh -c 'kill -TERM $$'
check "killed by SIGTERM -> 143, reported" '[ $rc -eq 143 ] && J "j[\"exit_status\"] == 143"'
"$pk" stat -- sleep 10 >"$tmp/out" 2>"$tmp/err" &
spid=$!
# Only once probekit has a child: it catches signals before it forks
# (pkc_spawn()), and a SIGTERM sooner would end probekit itself.
i=0
while [ -z "$(pgrep -P $spid)" ] && [ $i -lt 500 ]; do
	sleep 0.02
	i=$((i + 1))
done
kill -TERM $spid
wait $spid
rc=$?
check "SIGTERM sent to probekit goes to COMMAND: 143, the report written" \
	'[ $rc -eq 143 ] && grep -q "seconds time elapsed" "$tmp/err"'
run stat -- /nonexistent/cmd
check "COMMAND not found -> 127, said" '[ $rc -eq 127 ] && grep -q "/nonexistent/cmd" "$tmp/err"'

# ---- usage failures: 125 (probekit's own status), a clear message ----
run stat
check "no COMMAND -> 125, said, with the usage" \
	'[ $rc -eq 125 ] && grep -q "no command given" "$tmp/err" && grep -q "usage: probekit stat" "$tmp/err"'
run stat --bogus -- true
check "unknown option -> 125, said" \
	'[ $rc -eq 125 ] && grep -q "unrecognized option" "$tmp/err" && grep -q "usage: probekit stat" "$tmp/err"'
# (-p itself: tests/cli-stat-p.sh.)
run stat -p :malloc -- touch "$tmp/ran"
check "-p with a bad spec -> 125, said, COMMAND not run" \
	'[ $rc -eq 125 ] && grep -q "no object before the" "$tmp/err" && [ ! -e "$tmp/ran" ]'
run stat -o "$tmp/no/such/dir" -- touch "$tmp/ran"
check "-o into a missing directory -> 125 before COMMAND runs" \
	'[ $rc -eq 125 ] && [ ! -e "$tmp/ran" ]'
run stat -o "$tmp/rep" -- "$target"
check "-o FILE: the report in FILE, nothing on stderr" \
	'[ $rc -eq 0 ] && grep -q "seconds time elapsed" "$tmp/rep" && [ ! -s "$tmp/err" ]'

# ---- counters unavailable: COMMAND runs all the same, each said ----
PROBEKIT_STAT_FAIL=all "$pk" stat --json -o "$tmp/j" -- sh -c 'echo ran; exit 4' >"$tmp/out" 2>"$tmp/err"
rc=$?
check "PROBEKIT_STAT_FAIL=all: COMMAND ran, its status 4 kept" \
	'[ $rc -eq 4 ] && [ "$(cat "$tmp/out")" = ran ]'
check "... every counter null, not counted, the reason naming the hook; wall time kept" \
	'J "all(e[\"value\"] is None and e[\"status\"] == \"not counted\" and \"PROBEKIT_STAT_FAIL\" in e[\"reason\"] for e in c.values()) and len(c) == 9 and j[\"wall_ns\"] > 0 and all(x is None for x in j[\"ratios\"].values())"'
PROBEKIT_STAT_FAIL=all "$pk" stat -- true 2>"$tmp/err"
check "... text: <not counted> and why on each of the 9 lines, elapsed time still there" \
	'[ "$(grep -cE "<not counted> +[a-z-]+ +# perf_event_open: Permission denied \(forced by PROBEKIT_STAT_FAIL" "$tmp/err")" -eq 9 ] && grep -q "seconds time elapsed" "$tmp/err"'
PROBEKIT_STAT_FAIL=syscalls,minor-faults "$pk" stat --json -o "$tmp/j" -- "$target" pages $N >"$tmp/out" 2>"$tmp/err"
check "PROBEKIT_STAT_FAIL=syscalls,minor-faults: those two only not counted" \
	'J "v(\"syscalls\") is None and v(\"minor-faults\") is None and v(\"page-faults\") >= $N and v(\"task-clock\") > 0"'

# Kernel-side counting refused (perf_event_paranoid 2, not root): counted
# for user space only, switches and migrations said not counted (they
# would read 0), the syscall tracepoint not counted.
PROBEKIT_STAT_FAIL=kernel "$pk" stat --json -o "$tmp/j" -- "$target" pages $N sleeps 20 >"$tmp/out" 2>"$tmp/err"
rc=$?
check "PROBEKIT_STAT_FAIL=kernel: faults counted user-only (>= N), task-clock kept" \
	'[ $rc -eq 0 ] && J "c[\"minor-faults\"][\"user_only\"] and v(\"minor-faults\") >= $N and v(\"task-clock\") > 0 and not c[\"task-clock\"][\"user_only\"]"'
check "... context-switches, cpu-migrations, syscalls: not counted, why (the switches' rusage beside)" \
	'J "v(\"context-switches\") is None and \"rusage\" in c[\"context-switches\"][\"reason\"] and v(\"cpu-migrations\") is None and v(\"syscalls\") is None"'
PROBEKIT_STAT_FAIL=kernel "$pk" stat -- true 2>"$tmp/err"
check "... text: NAME:u, said what it means" \
	'grep -qE "^ +[0-9]+ +minor-faults:u" "$tmp/err" && grep -q "<not counted>      context-switches:u" "$tmp/err" && grep -q "NAME:u counts user space only" "$tmp/err"'

# For real as another user, where we may become one (root, setpriv; not
# through a sanitizer build's wrapper, which is in our private $tmp).
asnobody() {
	setpriv --reuid=65534 --regid=65534 --clear-groups "$@"
}
pk_abs=$(readlink -f "$pk")
target_abs=$(readlink -f "$target")
if [ $root = 1 ] && [ "$sanitized" = 0 ] && command -v setpriv >/dev/null 2>&1 &&
   asnobody test -x "$pk_abs" && asnobody test -x "$target_abs"; then
	(cd / && asnobody "$pk_abs" stat --json -- "$target_abs" pages $N syscalls $N) >"$tmp/out" 2>"$tmp/j"
	rc=$?
	check "as nobody: status 0, minor-faults >= N; syscalls not counted, with why" \
		'[ $rc -eq 0 ] && J "v(\"minor-faults\") >= $N and v(\"syscalls\") is None and c[\"syscalls\"][\"reason\"]"'
	echo "     (as nobody: $(python3 -c "import json, sys; c = json.load(open(sys.argv[1]))['counters']; print('; '.join(n + ': ' + (str(e['value']) + (' user-only' if e.get('user_only') else '') if e['value'] is not None else e['reason']) for n, e in c.items()))" "$tmp/j"))"
	# A set-user-ID program: the kernel detaches the counters at its
	# exec, so none of them is counted, and the report says why.
	suid=
	for f in /usr/bin/mount /usr/bin/su /usr/bin/passwd; do
		[ -u "$f" ] && [ "$(stat -c %u "$f")" = 0 ] && { suid=$f; break; }
	done
	if [ -n "$suid" ]; then
		(cd / && asnobody "$pk_abs" stat --json -- "$suid" --help) >/dev/null 2>"$tmp/j"
		check "as nobody, $suid (set-user-ID root): no counter counted, 'detached' names it" \
			'J "all(e[\"status\"] != \"counted\" for e in c.values()) and \"set-user-ID\" in j[\"detached\"] and \"detached\" in c[\"task-clock\"][\"reason\"]"'
		(cd / && asnobody "$pk_abs" stat -- "$suid" --help) >/dev/null 2>"$tmp/err"
		check "... text: <not counted> task-clock, the reason under the counters" \
			'grep -qE "<not counted> +task-clock +# detached" "$tmp/err" && grep -q "Counters not counted: .*set-user-ID" "$tmp/err"'
		(cd / && asnobody "$pk_abs" stat --json -- sh -c 'for i in 1 2 3 4 5 6 7 8; do "$0" --help; done' "$suid") >/dev/null 2>"$tmp/j"
		check "as nobody, sh running $suid 8 times: task-clock far below rusage's CPU, said detached" \
			'J "v(\"task-clock\") is None and \"detached while COMMAND ran\" in j[\"detached\"]"'
	else
		echo "     (no set-user-ID root program found: /usr/bin/mount, su, passwd)"
	fi
	# A program nobody may run but not read: not dumpable either.
	nr=$(mktemp -d /tmp/pk-stat-noread.XXXXXX)
	chmod 755 "$nr"
	cp /usr/bin/true "$nr/true"
	chmod 711 "$nr/true"
	(cd / && asnobody "$pk_abs" stat --json -- "$nr/true") >/dev/null 2>"$tmp/j"
	check "as nobody, a program it may run but not read: no counter counted, said why" \
		'J "v(\"task-clock\") is None and \"not read\" in j[\"detached\"]"'
	rm -rf "$nr"
else
	echo "     (not run as nobody: not root, a sanitizer build, no setpriv, or the build tree not nobody's to run)"
fi

# ---- a multiplexed counter scaled (PROBEKIT_STAT_HALVE: on the PMU half
# the time, half the count read) ----
PROBEKIT_STAT_HALVE=minor-faults "$pk" stat --json -o "$tmp/j" -- "$target" pages $N >"$tmp/out" 2>"$tmp/err"
check "PROBEKIT_STAT_HALVE=minor-faults: scaled, value = raw x enabled/running, ~ page-faults" \
	'J "c[\"minor-faults\"][\"scaled\"] and abs(v(\"minor-faults\") - c[\"minor-faults\"][\"raw\"] * c[\"minor-faults\"][\"enabled_ns\"] / c[\"minor-faults\"][\"running_ns\"]) <= 1 and abs(v(\"page-faults\") - v(\"minor-faults\") - v(\"major-faults\")) <= 4 and not c[\"page-faults\"][\"scaled\"]"'
PROBEKIT_STAT_HALVE=minor-faults "$pk" stat -- true 2>"$tmp/err"
check "... text says it: scaled, the share of the time" \
	'grep -qE "minor-faults .*\(scaled: on the PMU 5[0-9.]+% of the time\)" "$tmp/err" && grep -q "multiplexed" "$tmp/err"'

finish
