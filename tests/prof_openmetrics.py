# SPDX-License-Identifier: MIT
# prof_openmetrics.py - test_prof_openmetrics's checker: parse probekit's exposition with
# prometheus_client's OpenMetrics parser and its classic Prometheus parser, compare with
# the raw samples the test recorded.
# usage: prof_openmetrics.py EXPECTED OPENMETRICS_FILE PROMETHEUS_FILE LE_MAX
import math
import sys

from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_parse
from prometheus_client.parser import text_string_to_metric_families as prom_parse

expected_path, om_path, prom_path, le_max = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
series = []
for line in open(expected_path):
    f = line.split()
    labels = {}
    for key, hexval in (("function", f[0]), ("object", f[1]), ("process", f[2])):
        if hexval != "-":
            labels[key] = bytes.fromhex(hexval).decode("utf-8", "replace")
    if f[3] != "0":
        labels["pid"] = f[3]
    values = [int(v) for v in f[6:6 + int(f[5])]] if f[5] != "-" else None
    series.append((labels, int(f[4]), values))

failed = 0


def check(ok, what):
    global failed
    if not ok:
        failed += 1
        print("FAIL:", what)


def key(labels):
    return tuple(sorted(labels.items()))


def verify(families, flavour):
    fams = {f.name: f for f in families}
    check(set(fams) == {"probekit_calls", "probekit_call_duration_seconds"},
          f"{flavour}: families {sorted(fams)}")
    calls = {key(s.labels): s.value for s in fams["probekit_calls"].samples}
    check(fams["probekit_calls"].type == "counter", f"{flavour}: calls is a counter")
    hist = fams["probekit_call_duration_seconds"]
    check(hist.type == "histogram", f"{flavour}: histogram type")
    if flavour == "openmetrics":
        check(hist.unit == "seconds", f"{flavour}: unit seconds")
    for labels, ncalls, values in series:
        check(calls.get(key(labels)) == ncalls, f"{flavour}: calls_total {labels}: {calls.get(key(labels))} != {ncalls}")
        if values is None:
            continue
        got = {}
        for s in hist.samples:
            lab = dict(s.labels)
            le = lab.pop("le", None)
            if key(lab) != key(labels):
                continue
            got[(s.name, le)] = s.value
        n_buckets = sum(1 for k in got if k[0].endswith("_bucket"))
        check(n_buckets == le_max + 2, f"{flavour}: {labels}: {n_buckets} buckets, want {le_max + 2}")
        for n in range(le_max + 1):
            limit = (1 << n) - 1
            want = sum(1 for v in values if v <= limit)
            les = [k for k in got if k[0].endswith("_bucket") and k[1] != "+Inf"
                   and math.isclose(float(k[1]), limit / 1e9, rel_tol=1e-12, abs_tol=1e-15)]
            check(len(les) == 1, f"{flavour}: {labels}: one bucket with le={limit} ns, got {les}")
            if les:
                check(got[les[0]] == want, f"{flavour}: {labels}: le {limit} ns: {got[les[0]]} != {want}")
        check(got.get(("probekit_call_duration_seconds_bucket", "+Inf")) == len(values), f"{flavour}: +Inf")
        check(got.get(("probekit_call_duration_seconds_count", None)) == len(values), f"{flavour}: _count")
        s = got.get(("probekit_call_duration_seconds_sum", None))
        check(s is not None and math.isclose(s, sum(values) / 1e9, rel_tol=1e-12), f"{flavour}: _sum {s} != {sum(values) / 1e9}")


text = open(om_path, encoding="utf-8").read()
check(text.endswith("# EOF\n"), "openmetrics: ends with # EOF")
verify(list(om_parse(text)), "openmetrics")
verify(list(prom_parse(open(prom_path, encoding="utf-8").read())), "prometheus")
print(f"prof_openmetrics.py: {len(series)} series checked, {failed} failures")
sys.exit(1 if failed else 0)
