#!/bin/sh
# SPDX-License-Identifier: MIT
# bench-smoke.sh - run `scripts/bench --quick` once and check its JSON lines (never a time).
#
# Usage: tests/bench-smoke.sh SOURCE_DIR BUILD_DIR
# Uses the bench programs already built in BUILD_DIR (a test does not build).
set -u

src=$1 build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

BENCH_JSON=$tmp/bench.jsonl PK_BUILD_DIR=$build BENCH_NO_BUILD=1 \
	"$src/scripts/bench" --quick
rc=$?
echo
"$src/tests/check-bench-json.sh" "$tmp/bench.jsonl" "$src/tests/bench_required.txt"
crc=$?
[ $rc -eq 0 ] || echo "bench-smoke: scripts/bench --quick exited $rc"
[ $rc -eq 0 ] && [ $crc -eq 0 ]
