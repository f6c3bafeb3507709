# SPDX-License-Identifier: MIT
# prof_trace_json.py - test_prof_trace's JSON checker: the trace-event file parsed by
# python's json, every X event checked for its fields and types, nesting per thread,
# process_name/thread_name metadata present, and the calls equal to the ones recorded.
# usage: prof_trace_json.py EXPECTED TRACE_JSON
import json
import sys
from collections import Counter
from decimal import Decimal

expected_path, trace_path = sys.argv[1], sys.argv[2]
failed = 0


def check(ok, what):
    global failed
    if not ok:
        failed += 1
        if failed < 20:
            print("FAIL:", what)


want = Counter()
names = {}
pids, threads = set(), set()
for line in open(expected_path):
    f = line.split()
    if f[0] == "F":
        names[int(f[1])] = bytes.fromhex(f[2]).decode("utf-8", "replace")
        continue
    pid, tid, ts, dur, func, nargs = (int(x) for x in f[1:7])
    args = tuple(int(x) for x in f[7:7 + nargs])
    ret = f[7 + nargs]
    want[(pid, tid, ts, dur, names[func], args, None if ret == "-" else int(ret))] += 1
    pids.add(pid)
    threads.add((pid, tid))

with open(trace_path, "rb") as fh:
    raw = fh.read()
doc = json.loads(raw.decode("utf-8"), parse_float=Decimal)   # strict UTF-8
events = doc["traceEvents"]
check(isinstance(events, list), "traceEvents is a list")
got = Counter()
per_thread = {}
meta_p, meta_t = set(), set()
for e in events:
    ph = e.get("ph")
    if ph == "M":
        check(set(e) == {"ph", "pid", "tid", "name", "args"}, f"M fields {sorted(e)}")
        check(isinstance(e["args"].get("name"), str), "M has args.name")
        if e["name"] == "process_name":
            meta_p.add(e["pid"])
        elif e["name"] == "thread_name":
            meta_t.add((e["pid"], e["tid"]))
        continue
    check(ph == "X", f"only X and M events: {ph}")
    check(set(e) == {"ph", "name", "pid", "tid", "ts", "dur", "args"}, f"X fields {sorted(e)}")
    check(isinstance(e["name"], str) and e["name"], "X name")
    check(isinstance(e["pid"], int) and isinstance(e["tid"], int), "X pid/tid ints")
    for k in ("ts", "dur"):
        v = e[k]
        check(isinstance(v, Decimal) and v >= 0 and -v.as_tuple().exponent == 3,
              f"X {k} a decimal in us with 3 places (ns): {v}")
    ts = int(e["ts"] * 1000)
    dur = int(e["dur"] * 1000)
    a = e["args"]
    nargs = sum(1 for k in a if k.startswith("arg"))
    check(all(f"arg{i}" in a for i in range(nargs)), "args arg0..argN-1")
    for v in a.values():
        check(isinstance(v, str) and v.startswith("0x"), f"arg as hex string: {v}")
    args = tuple(int(a[f"arg{i}"], 16) for i in range(nargs))
    ret = int(a["ret"], 16) if "ret" in a else None
    got[(e["pid"], e["tid"], ts, dur, e["name"], args, ret)] += 1
    per_thread.setdefault((e["pid"], e["tid"]), []).append((ts, dur))

check(got == want, f"calls: {sum(got.values())} read, {sum(want.values())} recorded, "
      f"{sum((got - want).values())} unexpected, {sum((want - got).values())} missing")
check(pids <= meta_p, f"process_name for every pid: missing {pids - meta_p}")
check(threads <= meta_t, f"thread_name for every thread: missing {threads - meta_t}")
# Nesting: in (ts, -dur) order each call lies within the innermost open one or after it.
bad = 0
for key, calls in per_thread.items():
    stack = []
    for ts, dur in sorted(calls, key=lambda c: (c[0], -c[1])):
        while stack and ts + dur > stack[-1]:
            if ts < stack[-1]:
                bad += 1        # overlaps its parent's end: not nested
            stack.pop()
        stack.append(ts + dur)
check(bad == 0, f"{bad} calls not nested in their thread")
n = sum(got.values())
print(f"prof_trace_json.py: {n} X events, {len(meta_p)} processes, {len(meta_t)} threads, {failed} failures")
sys.exit(1 if failed else 0)
