#!/bin/sh
# SPDX-License-Identifier: MIT
# agent_review.sh - review findings on the agent (issue 10):
# 1. a spec that resolves through an IFUNC is never answered from the run's
#    cache: each process probes the implementation its own resolver chose
#    (GLIBC_TUNABLES turns AVX2 off for the second echo);
# 2. the library's signal interposers' own libc calls (sigfillset, their
#    lock) on the program's threads are not counted, and the agent's own
#    object is no spec's (a glob over sig* counts each sigaction once).
# usage: agent_review.sh PROBEKIT SIGLOOP [SANITIZED] (SANITIZED as in
# cli_common.sh)
# shellcheck source=tests/cli_common.sh
. "$(dirname "$0")/cli_common.sh"
sigloop=$target

count_of() { # function name -> its count in $tmp/rep ("-" if not probed)
	awk -v f="$1" '$2 == f { print $1; exit }' "$tmp/rep"
}

# ---- 1. IFUNC specs: not cached across processes ----
noavx='glibc.cpu.hwcaps=-AVX2,-AVX512F,-EVEX,-AVX512VL,-AVX512BW,-BMI2,-AVX,-AVX_Usable,-AVX2_Usable'
run count -p strlen -o "$tmp/rep1" -- sh -c "GLIBC_TUNABLES=$noavx /bin/echo a"
impl1=$(awk '$2 == "strlen" && $3 == "->" { print $4; exit }' "$tmp/rep1")
alone=$(awk -v i="$impl1" '$2 == "strlen" && $4 == i { print $1; exit }' "$tmp/rep1")
run count -p strlen -o "$tmp/rep2" -- /bin/echo a
impl2=$(awk '$2 == "strlen" && $3 == "->" { print $4; exit }' "$tmp/rep2")
if [ -z "$impl1" ] || [ "$impl1" = "$impl2" ]; then
	echo "ok   (skipped: the tunables choose the same strlen here: '$impl1' '$impl2')"
else
	run count -p strlen -o "$tmp/rep" -- sh -c \
		"/bin/echo a; GLIBC_TUNABLES=$noavx /bin/echo a"
	check "strlen: the second echo's own implementation ($impl1) probed" \
		'grep -Eq "^ +[0-9]+ +strlen -> $impl1\$" "$tmp/rep"'
	got=$(awk -v i="$impl1" '$2 == "strlen" && $4 == i { print $1; exit }' "$tmp/rep")
	check "strlen -> $impl1 counts the second echo's calls ($got >= $alone)" \
		'[ "${got:-0}" -ge "${alone:-1}" ]'
fi

# ---- 2. the interposers' own work is not the program's ----
run count -p sigfillset -p sigaction -o "$tmp/rep" -- "$sigloop"
check "sigfillset: the program calls none (got $(count_of sigfillset))" \
	'[ $rc -eq 0 ] && [ "$(count_of sigfillset)" = 0 ]'
check "sigaction: 2000 (got $(count_of sigaction))" \
	'[ "$(count_of sigaction)" = 2000 ]'
check "sigaction probed in libc, not the agent's interposer" \
	'! grep -q "libprobekit" "$tmp/rep"'
run count -p 'sig*' -o "$tmp/rep" -- "$sigloop"
# A sanitizer build's runtime interposes sigaction too: the build's, not ours.
grep -v ' libasan\.so' "$tmp/rep" >"$tmp/rep.x" && mv "$tmp/rep.x" "$tmp/rep"
check "sig*: no function of the agent's own object" \
	'[ $rc -eq 0 ] && ! grep -q "libprobekit" "$tmp/rep"'
check "sig*: every sigaction line: 2000 calls once (got $(grep -c "sigaction\$" "$tmp/rep") lines, $(count_of libc.so.6:sigaction))" \
	'[ "$(count_of libc.so.6:sigaction)" = 2000 ] && [ "$(grep -E "^ +[0-9]+ +[^ ]*sigaction\$" "$tmp/rep" | awk "{ n += \$1 } END { print n }")" = 2000 ]'
check "sig*: sigfillset 0 (got $(count_of libc.so.6:sigfillset))" \
	'[ "$(count_of libc.so.6:sigfillset)" = 0 ]'

finish
