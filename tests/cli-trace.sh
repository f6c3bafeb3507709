#!/bin/sh
# SPDX-License-Identifier: MIT
# cli-trace.sh - probekit trace (issue 11, per-call traces): the JSON
# parsed by python3 and checked event by event (every X event well-formed,
# N calls of trace_f(i) per thread with arg0 == i and ret == 2i, trace_g's
# event containing its two trace_f's, metadata names, a fork()ed child);
# the protobuf decoded by protoc against the vendored fixture, as many
# slices as the JSON has events; drops with a tiny --buffer-size (events +
# drops == calls, said in the summary and in the file); --min-duration,
# --depth (after longjmp too), --pid/--tid, --args 6; _exit, SIGKILL and exec lose no event
# already returned; usage errors.
# usage: cli-trace.sh PROBEKIT TRACE_TARGET SANITIZED SOURCE_DIR
# shellcheck source=tests/cli_common.sh
. "$(dirname "$0")/cli_common.sh"
src=$4
py=/usr/bin/python3
[ -x "$py" ] || { echo "SKIP: no /usr/bin/python3"; exit 77; }

# The checker: python3 check.py FILE EXPR; EXPR sees X (the X events),
# M (the M events), by(name, pid=None, tid=None), a(e, k), ret(e), ok().
cat >"$tmp/check.py" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
ev = j["traceEvents"]
X = [e for e in ev if e.get("ph") == "X"]
M = [e for e in ev if e.get("ph") == "M"]
def a(e, k): return int(e["args"]["arg%d" % k], 16)
def ret(e): return int(e["args"]["ret"], 16)
def by(name, pid=None, tid=None):
    return [e for e in X if e["name"] == name and (pid is None or e["pid"] == pid)
            and (tid is None or e["tid"] == tid)]
def wellformed(e):
    return (isinstance(e["name"], str) and e["name"] and isinstance(e["pid"], int)
            and isinstance(e["tid"], int) and isinstance(e["ts"], (int, float))
            and isinstance(e["dur"], (int, float)) and e["ts"] > 0 and e["dur"] >= 0
            and isinstance(e["args"], dict) and "ret" in e["args"]
            and all(isinstance(v, str) and v.startswith("0x") for v in e["args"].values()))
def named():
    procs = {e["pid"] for e in M if e["name"] == "process_name" and e["args"]["name"]}
    thrs = {(e["pid"], e["tid"]) for e in M if e["name"] == "thread_name" and e["args"]["name"]}
    return all(e["pid"] in procs and (e["pid"], e["tid"]) in thrs for e in X)
def threads(): return sorted({(e["pid"], e["tid"]) for e in X})
def contains(g, f):
    return (g["tid"] == f["tid"] and g["pid"] == f["pid"] and f["ts"] >= g["ts"]
            and f["ts"] + f["dur"] <= g["ts"] + g["dur"] + 0.0005)
def nest():
    # Per thread: any two calls are disjoint or one holds the other (1 ns slack: rounding).
    for p, t in threads():
        stack = []
        for e in sorted(by_thread(p, t), key=lambda e: (e["ts"], -e["dur"])):
            while stack and e["ts"] >= stack[-1] - 0.001:
                stack.pop()
            if stack and e["ts"] + e["dur"] > stack[-1] + 0.001:
                return False
            stack.append(e["ts"] + e["dur"])
    return True
def by_thread(p, t): return [e for e in X if e["pid"] == p and e["tid"] == t]
r = eval("(" + sys.argv[2] + "\n)")
if not r:
    print("check failed:", sys.argv[2], file=sys.stderr)
sys.exit(0 if r else 1)
PY
# js EXPR [FILE]: EXPR true of the trace in FILE (default $tmp/t.json).
js() {
	"$py" "$tmp/check.py" "${2:-$tmp/t.json}" "$1"
}
# summary N: the Nth figure of the summary line (1 events, 2 dropped, 3 lost, 4 bytes).
summary() {
	sed -n 's/^probekit trace: \([0-9]*\) events written, \([0-9]*\) dropped (ring full), \([0-9]*\) lost (no ring), \([0-9]*\) bytes, .*/\1 \2 \3 \4/p' "$tmp/err" |
		awk -v n="$1" '{ print $n }'
}

# --- the known calls: 1000 trace_f(i) in the main thread, 50 trace_g(i)
# (each trace_f(i) + trace_f(i+1)), 2 threads x 1000, a fork()ed child
# 1000: 4100 trace_f, 50 trace_g.
N=1000
run trace --args 1 -p trace_f -p trace_g -o "$tmp/t.json" -- "$target" calls $N nest 50 threads 2 $N fork $N
check "json: status 0, valid JSON, summary says 4150 events, 0 dropped, its bytes" \
	"[ \$rc -eq 0 ] && js True && [ \"\$(summary 1)\" = 4150 ] && [ \"\$(summary 2)\" = 0 ] &&
	 [ \"\$(summary 4)\" = \"\$(wc -c <\"$tmp/t.json\" | tr -d ' ')\" ]"
check "... every X event well-formed (name, pid, tid, ts, dur, args hex, ret)" \
	"js 'len(X) == 4150 and all(wellformed(e) for e in X)'"
check "... 4 threads in 2 processes, every one named (process_name, thread_name)" \
	"js 'len(threads()) == 4 and len({p for p, t in threads()}) == 2 and named()'"
check "... each of the 3 other threads: trace_f(i) for i < $N once each, ret == 2i" \
	"js 'sorted(len(by(\"trace_f\", p, t)) for p, t in threads()) == [$N, $N, $N, $N + 100] and
	     all(sorted(a(e, 0) for e in by(\"trace_f\", p, t)) == list(range($N))
	         for p, t in threads() if len(by(\"trace_f\", p, t)) == $N) and
	     all(ret(e) == 2 * a(e, 0) for e in by(\"trace_f\"))'"
check "... 50 trace_g(i), ret 4i+2, each containing trace_f(i) and trace_f(i+1) in time, same thread" \
	"js 'len(by(\"trace_g\")) == 50 and all(ret(g) == 4 * a(g, 0) + 2 and
	     sorted(a(f, 0) for f in by(\"trace_f\", g[\"pid\"], g[\"tid\"]) if contains(g, f)) == [a(g, 0), a(g, 0) + 1]
	     for g in by(\"trace_g\"))'"
check "... calls of one thread in order: by ts, trace_f's first $N are i = 0 .. $N-1" \
	"js 'all([a(e, 0) for e in sorted(by(\"trace_f\", p, t), key=lambda e: e[\"ts\"])][:$N] == list(range($N)) for p, t in threads())'"
check "... every thread's calls nest (disjoint or one inside the other)" "js 'nest()'"
cp "$tmp/t.json" "$tmp/main.json"

# --- the same calls as Perfetto's protobuf, decoded by protoc ------------
if command -v protoc >/dev/null 2>&1; then
	run trace --args 1 -p trace_f -p trace_g --format perfetto -o "$tmp/t.pb" -- "$target" calls $N nest 50 threads 2 $N fork $N
	protoc --proto_path="$src/tests" --decode=perfetto.protos.Trace \
		"$src/tests/prof_perfetto_trace.proto" <"$tmp/t.pb" >"$tmp/t.txt" 2>"$tmp/protoc.err"
	pr=$?
	check "perfetto: status 0, protoc --decode reads it, summary 4150 events" \
		"[ \$rc -eq 0 ] && [ \$pr -eq 0 ] && [ \"\$(summary 1)\" = 4150 ]"
	check "... 4150 slice begins and ends, as many as the JSON's X events" \
		"[ \$(grep -c 'type: TYPE_SLICE_BEGIN' \"$tmp/t.txt\") -eq 4150 ] &&
		 [ \$(grep -c 'type: TYPE_SLICE_END' \"$tmp/t.txt\") -eq 4150 ]"
	check "... both functions' names interned, 4 thread tracks, no unknown field" \
		"grep -q 'name: \"trace_f\"' \"$tmp/t.txt\" && grep -q 'name: \"trace_g\"' \"$tmp/t.txt\" &&
		 [ \$(grep -c '^ *thread {' \"$tmp/t.txt\") -eq 4 ] && ! grep -qE '^ *[0-9]+: ' \"$tmp/t.txt\""
else
	echo "skip perfetto: protoc missing (Debian: protobuf-compiler)"
fi

# --- drops: a 4 KiB ring (102 events) against a burst of 2000000 calls
# (a fraction of a second: drained live every 10 ms, so more than one
# ring's worth is kept) ---
run trace --buffer-size 4096 -p trace_f -o "$tmp/t.json" -- "$target" calls 2000000
ev=$(summary 1)
dr=$(summary 2)
check "drops: status 0, summary: $ev events + $dr dropped == 2000000, dropped > 0, said to be the buffer" \
	"[ \$rc -eq 0 ] && [ \"\$dr\" -gt 0 ] && [ \$((ev + dr)) -eq 2000000 ] && grep -q 'larger --buffer-size' \"$tmp/err\""
check "... drained while COMMAND ran: $ev events > the 102 a ring holds" "[ \"\$ev\" -gt 102 ]"
check "... in the file: $ev X events, the thread's name says $dr dropped" \
	"js 'len(X) == $ev and any(e[\"name\"] == \"thread_name\" and \"$dr events dropped\" in e[\"args\"][\"name\"] for e in M)'"
run trace --strict --buffer-size 4096 -p trace_f -o "$tmp/t.json" -- "$target" calls 200000
check "... with --strict: 125, says how many calls the trace misses" \
	"[ \$rc -eq 125 ] && grep -q 'strict: the trace misses [1-9][0-9]* calls' \"$tmp/err\""
run trace --strict -p trace_f -o "$tmp/t.json" -- "$target" calls 1000
check "... --strict without drops: 0" "[ \$rc -eq 0 ] && js 'len(X) == 1000'"

# --- --min-duration: trace_spin (300 us) kept, trace_quick dropped in the agent.
# Robust on a loaded machine and under ASan: the spin is timed by
# CLOCK_MONOTONIC and the trace by the calibrated TSC (they may disagree
# by a fraction of a percent: >= 285 us asserted), and a trace_quick
# preempted for over 150 us may pass the filter (one allowed).
run trace --min-duration 150us -p trace_spin -p trace_quick -o "$tmp/t.json" -- "$target" spin 20 300000
check "--min-duration 150us: 20 trace_spin events of >= 285 us, at most one trace_quick" \
	"[ \$rc -eq 0 ] && js 'len(by(\"trace_spin\")) == 20 and all(e[\"dur\"] >= 285 for e in by(\"trace_spin\")) and len(by(\"trace_quick\")) <= 1'"
run trace -p trace_spin -p trace_quick -o "$tmp/t.json" -- "$target" spin 20 300000
check "... without it: 20 of each" \
	"[ \$rc -eq 0 ] && js 'len(by(\"trace_spin\")) == 20 and len(by(\"trace_quick\")) == 20'"

# --- --depth: trace_g at depth 1, its trace_f's at 2 ---------------------
run trace --depth 1 -p trace_f -p trace_g -o "$tmp/t.json" -- "$target" nest 30 calls 7
check "--depth 1: 30 trace_g, only the 7 trace_f called at depth 1" \
	"[ \$rc -eq 0 ] && js 'len(by(\"trace_g\")) == 30 and len(by(\"trace_f\")) == 7'"
run trace --depth 2 -p trace_f -p trace_g -o "$tmp/t.json" -- "$target" nest 30 calls 7
check "--depth 2: 30 trace_g, 67 trace_f" \
	"[ \$rc -eq 0 ] && js 'len(by(\"trace_g\")) == 30 and len(by(\"trace_f\")) == 67'"

# A call left by longjmp() has no return: the next entry finds it gone
# (its stack pointer), so trace_g is still at depth 1 after 5 of them.
run trace --depth 1 -p trace_jmp -p trace_g -o "$tmp/t.json" -- "$target" jmp 5 nest 3
check "--depth 1 after 5 longjmp()s out of trace_jmp: 3 trace_g, no trace_jmp event" \
	"[ \$rc -eq 0 ] && js 'len(by(\"trace_g\")) == 3 and not by(\"trace_jmp\")'"

# --- --pid / --tid: another process's, another thread's: nothing ---------
run trace --pid 1 -p trace_f -o "$tmp/t.json" -- "$target" calls 100 fork 100
check "--pid 1: status 0, no event" "[ \$rc -eq 0 ] && js 'len(X) == 0' && [ \"\$(summary 1)\" = 0 ]"
run trace --tid 1 -p trace_f -o "$tmp/t.json" -- "$target" calls 100 threads 2 10
check "--tid 1: status 0, no event" "[ \$rc -eq 0 ] && js 'len(X) == 0'"
# The child's pid, from the unfiltered trace: the rings keep pids apart.
run trace -p trace_f -o "$tmp/t.json" -- sh -c "echo \$\$ >$tmp/pid; exec $target calls 100"
pid=$(cat "$tmp/pid" 2>/dev/null)
check "... unfiltered: 100 events of pid $pid" "[ \$rc -eq 0 ] && js 'len(by(\"trace_f\", $pid)) == 100'"

# --- --args 6: rdi, rsi, rdx, rcx, r8, r9 --------------------------------
run trace --args 6 -p trace_args6 -o "$tmp/t.json" -- "$target" args 20
check "--args 6: arg0..arg5 == i..i+5, ret == i" \
	"[ \$rc -eq 0 ] && js 'len(X) == 20 and all(a(e, k) == a(e, 0) + k for e in X for k in range(6)) and
	     sorted(ret(e) for e in X) == list(range(20))'"

# --- nothing to flush: _exit, SIGKILL, exec ------------------------------
run trace -p trace_f -o "$tmp/t.json" -- "$target" calls 500 threads 2 300 _exit
check "_exit(3): status 3, every returned call traced (1100)" "[ \$rc -eq 3 ] && js 'len(by(\"trace_f\")) == 1100'"
run trace -p trace_f -o "$tmp/t.json" -- "$target" calls 500 threads 2 300 kill
check "SIGKILL: status 137, every returned call traced (1100)" "[ \$rc -eq 137 ] && js 'len(by(\"trace_f\")) == 1100'"
run trace -p trace_f -o "$tmp/t.json" -- "$target" calls 100 exec calls 200 _exit
check "exec in place: status 3, both images' calls traced (300), one pid" \
	"[ \$rc -eq 3 ] && js 'len(by(\"trace_f\")) == 300 and len({e[\"pid\"] for e in X}) == 1'"

# --- tracefix (issue 11 review) -------------------------------------------
# B: a child of _Fork() (no atfork handler) writes a ring of its own with
# its own pid: the parent traced trace_f(0) before, so its thread state is
# the parent's (before the fix: every event had the parent's pid).
run trace --args 1 -p trace_f -o "$tmp/t.json" -- "$target" _fork 1000
check "_Fork(): 2 processes, the parent's 1001 trace_f and the child's 1000, each i < 1000 once, no loss" \
	"[ \$rc -eq 0 ] && [ \"\$(summary 3)\" = 0 ] && [ \"\$(summary 2)\" = 0 ] &&
	 js 'len({e[\"pid\"] for e in X}) == 2 and all(wellformed(e) for e in X) and named() and
	     sorted(len(by(\"trace_f\", p)) for p in {e[\"pid\"] for e in X}) == [1000, 1001] and
	     all(sorted(set(a(e, 0) for e in by(\"trace_f\", p))) == list(range(1000)) for p in {e[\"pid\"] for e in X})'"
# ... and a child whose first traced call is in a thread it made: the
# forking thread's state is still the parent's, and found so.
run trace --args 1 -p trace_f -o "$tmp/t.json" -- "$target" _forkt 500
check "_Fork(), the child's new thread first: the parent's 501 calls, the child's 2 x 500 in 2 threads" \
	"[ \$rc -eq 0 ] && [ \"\$(summary 3)\" = 0 ] && [ \"\$(summary 2)\" = 0 ] &&
	 js 'sorted(len(by(\"trace_f\", p)) for p in {e[\"pid\"] for e in X}) == [501, 1000] and len(threads()) == 3'"
# I: why a thread has no ring is said (the errno the agent stored): here a
# program that can open no file (its ring's block is mapped at its first
# call); before Linux 5.14 it would be MADV_POPULATE_WRITE's EINVAL.
run trace -p trace_f -o "$tmp/t.json" -- "$target" nofd 100
check "no ring: 100 lost, the reason said (Too many open files)" \
	"[ \$rc -eq 0 ] && [ \"\$(summary 3)\" = 100 ] &&
	 grep -q \"ring could not be mapped or reserved: Too many open files\" \"$tmp/err\""
# F: the program's address space: a ring mapped per thread that traces,
# not 64 of them (64 MiB) at start. COMMAND under ulimit -v: its own size
# + 40 MiB + the 64 MiB it mallocs (not under ASan: its shadow needs
# terabytes of address space).
if [ "$sanitized" = 0 ]; then
	vm=$("$target" vm)
	lim=$((vm + 40960 + 65536))
	run trace --args 1 -p trace_f -o "$tmp/t.json" -- sh -c "ulimit -v $lim && exec $target hog 64"
	check "ulimit -v $lim: a program that mallocs 64 MiB near its limit still succeeds, its call traced" \
		"[ \$rc -eq 0 ] && js 'len(by(\"trace_f\")) == 1'"
else
	echo "skip ulimit -v: a sanitizer build"
fi

# A: recursion 200 deep: the library probes 128 returns in flight a thread
# and adds each call it cannot to the area's missed (pk_retprobe_opts.missed),
# which the command counts as lost: events + lost == 201 calls, --strict 125.
run trace -p trace_rec -o "$tmp/t.json" -- "$target" rec 200
check "recursion 200 deep: events + lost == 201, lost > 0, said why" \
	"[ \$rc -eq 0 ] && [ \$((\$(summary 1) + \$(summary 3))) -eq 201 ] && [ \"\$(summary 3)\" -gt 0 ] &&
	 js 'len(by(\"trace_rec\")) == $(summary 1)' && grep -q 'return could not be probed' \"$tmp/err\""
run trace --strict -p trace_rec -o "$tmp/t.json" -- "$target" rec 200
check "... with --strict: 125" "[ \$rc -eq 125 ] && grep -q 'strict: the trace misses [1-9][0-9]* calls' \"$tmp/err\""
# D: --max-events: the rest counted, said, and --strict fails.
run trace --max-events 100 -p trace_f -o "$tmp/t.json" -- "$target" calls 1000
check "--max-events 100: 100 events kept, 900 more said dropped past --max-events" \
	"[ \$rc -eq 0 ] && [ \"\$(summary 1)\" = 100 ] && js 'len(X) == 100' &&
	 grep -q '900 more events dropped: past --max-events 100' \"$tmp/err\""
run trace --strict --max-events 100 -p trace_f -o "$tmp/t.json" -- "$target" calls 1000
check "... with --strict: 125, the trace misses 900 calls" \
	"[ \$rc -eq 125 ] && grep -q 'strict: the trace misses 900 calls' \"$tmp/err\""
if [ "$sanitized" = 0 ]; then
	# D: out of memory (the command under ulimit -S -v, COMMAND not): the
	# summary says no trace was written, never 'N events written'.
	(ulimit -S -v 200000 && exec "$pk" trace -p trace_f -o "$tmp/t.json" -- \
		sh -c "ulimit -S -v unlimited; exec $target calls 1 threads 8 1000000") >"$tmp/out" 2>"$tmp/err"
	rc=$?
	if grep -q 'Cannot allocate memory' "$tmp/err"; then
		check "out of memory: 125, 'no trace written', no 'events written'" \
			"[ \$rc -eq 125 ] && grep -q 'no trace written (Cannot allocate memory)' \"$tmp/err\" &&
			 ! grep -q 'events written' \"$tmp/err\""
	else
		echo "skip out of memory: the command read too few events to run out (a loaded machine)"
	fi
fi
if [ "$sanitized" = 0 ]; then
	# E: each process's ring file (64 MiB here) unmapped by the command once
	# the process is gone: 40 processes one after another in 1.2 GB of
	# address space (before: the 17th on were lost, and not said).
	(ulimit -S -v 1200000 && exec "$pk" trace -p trace_f -o "$tmp/t.json" -- \
		sh -c "ulimit -S -v unlimited; for i in \$(seq 40); do $target calls 10; done") >"$tmp/out" 2>"$tmp/err"
	rc=$?
	check "40 processes in turn, the command under ulimit -S -v 1200000: all 400 calls, 40 pids" \
		"[ \$rc -eq 0 ] && [ \"\$(summary 1)\" = 400 ] && js 'len(X) == 400 and len({e[\"pid\"] for e in X}) == 40'"
	# E: the command maps a process's ring file's header, and each
	# thread's block once claimed: a 256M ring file (16 GiB for 64
	# threads) of a one-thread process, the command under ulimit -S -v
	# 2000000, is traced whole (before: "could not map", nothing traced).
	(ulimit -S -v 2000000 && exec "$pk" trace --strict --buffer-size 256M -p trace_f -o "$tmp/t.json" -- \
		sh -c "ulimit -S -v unlimited; exec $target calls 10") >"$tmp/out" 2>"$tmp/err"
	rc=$?
	check "256M rings, the command under ulimit -S -v 2000000: one block mapped, all 10 calls, status 0" \
		"[ \$rc -eq 0 ] && [ \"\$(summary 1)\" = 10 ] && js 'len(X) == 10'"
	# E: a block the command cannot map (a parent's 256M block mapped and
	# its child's too, under ulimit -S -v 450000): its events are lost,
	# counted and said, and --strict fails; the parent's 20 are there.
	(ulimit -S -v 450000 && exec "$pk" trace --strict --buffer-size 256M -p trace_f -o "$tmp/t.json" -- \
		sh -c "ulimit -S -v unlimited; exec $target calls 10 spin 1 100000000 fork 10 calls 10") >"$tmp/out" 2>"$tmp/err"
	rc=$?
	check "a thread's block the command cannot map: its 10 events said lost (reason), 20 kept, --strict 125" \
		"[ \$rc -eq 125 ] && [ \"\$(summary 1)\" = 20 ] && js 'len(X) == 20' &&
		 grep -q '10 more events lost: a thread.s ring could not be mapped by this command: Cannot allocate memory' \"$tmp/err\" &&
		 grep -q 'strict: the trace misses 10 calls' \"$tmp/err\""
fi

# --- usage errors: 125 ----------------------------------------------------
run trace --args 7 -p trace_f -o "$tmp/t.json" -- "$target" calls 1
check "--args 7: 125, says what it wants" '[ $rc -eq 125 ] && grep -q "\-\-args wants 0 to 6" "$tmp/err"'
run trace --buffer-size 100 -p trace_f -o "$tmp/t.json" -- "$target" calls 1
check "--buffer-size 100: 125" '[ $rc -eq 125 ] && grep -q "\-\-buffer-size wants" "$tmp/err"'
run trace --min-duration 5xs -p trace_f -o "$tmp/t.json" -- "$target" calls 1
check "--min-duration 5xs: 125" '[ $rc -eq 125 ] && grep -q "\-\-min-duration wants" "$tmp/err"'
run trace --format xml -p trace_f -o "$tmp/t.json" -- "$target" calls 1
check "--format xml: 125" '[ $rc -eq 125 ] && grep -q "json or perfetto" "$tmp/err"'
run trace -p trace_f -- "$target" calls 1
check "no -o: 125 with usage" '[ $rc -eq 125 ] && grep -q "no output file" "$tmp/err" && grep -q "usage: probekit trace" "$tmp/err"'
run trace -p trace_f -o /nonexistent/dir/t.json -- "$target" calls 1
check "-o unwritable: 125 before COMMAND ran" '[ $rc -eq 125 ] && grep -q "/nonexistent/dir/t.json" "$tmp/err"'
check "no run directory left behind" '[ -z "$(ls -A "$TMPDIR")" ]'

finish
