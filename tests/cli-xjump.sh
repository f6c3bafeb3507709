#!/bin/sh
# SPDX-License-Identifier: MIT
# cli-xjump.sh - `probekit count -p memcpy` on ls with glibc's choice for CPUs without AVX/SSSE3 (issue 9, item 3).
#
# With these tunables memcpy resolves to __memmove_sse2_unaligned, which is
# also memcpy@GLIBC_2.2.5, the definition `-p memcpy` probes; glibc's
# __mempcpy_sse2_unaligned (no symbol in a stripped libc.so.6) jumps to
# memcpy@GLIBC_2.2.5+3, inside a jump probe's displaced bytes. Before the
# branch index ls died of SIGILL (exit 132); now the probe is an int3 probe
# and ls runs. Skipped where this glibc does not route ls's memcpy calls
# there (no call counted).
# usage: cli-xjump.sh PROBEKIT [sanitized]
set -u
pk=$1
if [ "${2:-}" = 1 ]; then
	echo "SKIP: sanitizer build: the agent needs the ASan runtime loaded first, which an uninstrumented COMMAND does not do"
	exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export TMPDIR="$tmp"
tun=glibc.cpu.hwcaps=-AVX_Fast_Unaligned_Load,-AVX512F,-AVX512VL,-SSSE3,-ERMS
fails=0
for i in 1 2 3; do
	GLIBC_TUNABLES=$tun "$pk" count -p memcpy -o "$tmp/rep" -- ls /usr \
		>"$tmp/out" 2>"$tmp/err"
	rc=$?
	if [ $rc -ne 0 ]; then
		echo "FAIL run $i: ls exited $rc (132: SIGILL)"
		cat "$tmp/err" "$tmp/rep" 2>/dev/null
		fails=$((fails + 1))
		continue
	fi
	hits=$(sed -n 's/^ *\([0-9][0-9]*\)  memcpy.*/\1/p' "$tmp/rep")
	if [ "${hits:-0}" -eq 0 ]; then
		echo "SKIP: memcpy@GLIBC_2.2.5 is not what ls calls with GLIBC_TUNABLES=$tun here"
		cat "$tmp/rep"
		exit 77
	fi
	if grep -Eq "memcpy  \(int3 probe in 1 of 1" "$tmp/rep" &&
	   grep -qx lib "$tmp/out"; then
		echo "ok   run $i: ls ran, $hits memcpy calls counted by an int3 probe"
	else
		echo "FAIL run $i: expected an int3 probe and ls's output"
		cat "$tmp/rep" "$tmp/out"
		fails=$((fails + 1))
	fi
done
[ $fails -eq 0 ]
