#!/bin/sh
# SPDX-License-Identifier: MIT
# sig-cli.sh - real programs that block or take over probekit's signals, run
# under the command's agent (issue 9, item 1): xz -T2, whose liblzma workers
# block every signal; dash, whose sigprocmask calls carry an int3 probe.
# usage: sig-cli.sh PROBEKIT [sanitized]
set -u
pk=$1
if [ "${2:-}" = 1 ]; then
	echo "SKIP: sanitizer build: the agent needs the ASan runtime loaded first, which an uninstrumented COMMAND does not do"
	exit 77
fi
command -v xz >/dev/null || { echo "SKIP: no xz (xz-utils, scripts/deps-debian.sh)"; exit 77; }
fails=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export TMPDIR="$tmp/td"
mkdir "$TMPDIR"

check() { # description, then a shell condition
	if eval "$2"; then
		echo "ok   $1"
	else
		echo "FAIL $1   [$2]"
		fails=$((fails + 1))
	fi
}

# Generated data, compressible, a few MB: xz -T2 -1 splits it into blocks.
awk 'BEGIN { srand(7); for (i = 0; i < 120000; i++) printf "%d %x line of text\n", i, rand() * 1e9 }' >"$tmp/big"
xz -T2 -1 -c "$tmp/big" >"$tmp/ref.xz"

for i in 1 2 3; do
	"$pk" count -p liblzma.so.5:lzma_crc64 -- xz -T2 -1 -c "$tmp/big" >"$tmp/out.xz" 2>"$tmp/err"
	rc=$?
	check "xz -T2 -1 under an int3 probe on lzma_crc64 ($i): exit 0" '[ $rc -eq 0 ]'
	check "xz -T2 -1 ($i): the same output" 'cmp -s "$tmp/out.xz" "$tmp/ref.xz"'
done
check "lzma_crc64 counted" 'grep -Eq "^ +[1-9][0-9]*  liblzma.so.5:lzma_crc64" "$tmp/err"'
"$pk" count -p liblzma.so.5:lzma_crc64 -p libc.so.6:pthread_sigmask -- xz -T2 -1 -dc "$tmp/out.xz" >"$tmp/back" 2>"$tmp/err"
rc=$?
check "xz -T2 -d with probes on lzma_crc64 and libc's pthread_sigmask: exit 0, data back" \
	'[ $rc -eq 0 ] && cmp -s "$tmp/back" "$tmp/big"'

for i in 1 2 3; do
	"$pk" count -p sigprocmask -- sh -c 'ls /x 2>/dev/null; echo hi' >"$tmp/out" 2>"$tmp/err"
	rc=$?
	check "sh -c 'ls /x; echo hi' with sigprocmask probed ($i): exit 0, hi" \
		'[ $rc -eq 0 ] && grep -qx hi "$tmp/out"'
done
"$pk" count -p sigprocmask -p sigaction -p signal -- sh -c 'trap "echo trapped" USR1; kill -USR1 $$; echo done' >"$tmp/out" 2>"$tmp/err"
rc=$?
check "sh with a trap of its own, the signal calls probed: exit 0, trapped" \
	'[ $rc -eq 0 ] && grep -qx trapped "$tmp/out" && grep -qx done "$tmp/out"'
# libc's own sigprocmask (sub $8,%rsp; call pthread_sigmask) was an int3
# probe, refused (EPERM, 125) as glibc's posix_spawn child runs it with
# SIGTRAP reset; since issue 12 its call is moved and it is a jump probe.
"$pk" count -p libc.so.6:sigprocmask -- sh -c 'echo hi' >"$tmp/out" 2>"$tmp/err"
rc=$?
check "libc's sigprocmask a jump probe (its call moved), sh runs" \
	'[ $rc -eq 0 ] && grep -qx hi "$tmp/out" && grep -Eq "^ +[0-9]+  libc.so.6:sigprocmask$" "$tmp/err"'

[ $fails -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all checks passed"
