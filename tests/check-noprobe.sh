#!/bin/sh
# SPDX-License-Identifier: MIT
# check-noprobe.sh - code on probekit's trap and fault paths (section
# pk_noprobe_text, PK_NOPROBE) calls nothing a probe can be on: a probe
# there would trap again inside its own trap handler, forever.
# usage: check-noprobe.sh LIBPROBEKIT.so          the check
#        check-noprobe.sh --list LIBPROBEKIT.so   every function outside the
#             library that pk_noprobe_text calls through the PLT, one a line
#             (allowed or not; tests/test_noprobe_all.c probes each)
#
# 1. Direct calls and jumps out of pk_noprobe_text go only into that section
#    or the PLT. Allowed: liburcu-bp's read-side functions, static inlines
#    of its header that an -O0 build emits out of line in .text (their
#    callers are PK_NOPROBE; their bodies are liburcu's, not ours to mark).
# 2. Calls through the PLT go to a function of pk_noprobe_text itself
#    (an exported one: pk_chain_call), or are on ALLOW below: a caller, its
#    callee (a shell pattern) and why. Anything else fails, so a libc call
#    added to the signal path (errno, getpid, syscall, a memcpy that -O0
#    makes) is caught. Why the allowed ones are safe (issue 9, item 2): the
#    path that recognises a probe's int3 (pk_sig_handler, pk_text_trap,
#    fault_hook's trap chain, probe_trap), the fault entry up to its range
#    lookup and the sweep handler call none of them; each is reached only
#    after the signal was found to be someone else's (on the way to the
#    program's handler or the default action) or claimed by probekit (a
#    watched page's fault), or from a probe handler's dispatch (depth >= 1,
#    where a nested hit counts a miss). A probe hit there is one more
#    SIGTRAP (probekit's handlers are SA_NODEFER), which the clean path
#    recognises and sends to the probe's trampoline without calling
#    anything: it cannot recurse. Not where SIGTRAP may be blocked, where
#    any int3 is fatal: pthread_sigmask, so refused as a probe target.
set -u
list=0
if [ "${1:-}" = --list ]; then
	list=1
	shift
fi
lib=$1

ALLOW='
call_prev	pthread_sigmask	refused as a probe target (src/probe/noprobe.c): it restores the mask while the program'"'"'s sa_mask may block SIGTRAP
take_default	sigaction	the default action: SIG_DFL, as without probekit
take_default	sigemptyset	the default action: SIG_DFL, as without probekit
take_default	raise	the default action: a sent signal sent again
take_default	memset	the default action (an -O0 build zeroes the struct sigaction so)
claim	syscall	ret.c, a return probe'"'"'s first hit on a thread: in a probe handler (depth 1), a nested hit is a miss
claim	pthread_setspecific	ret.c, a return probe'"'"'s first hit on a thread: in a probe handler (depth 1), a nested hit is a miss
die	write	ret.c: the process aborts
die	strlen	ret.c: the process aborts
die	abort	ret.c: the process aborts
pk_chain_call	__tls_get_addr	the die chain (urcu-bp'"'"'s TLS), after nothing claimed the signal
pk_arch_access	Zydis*	a watched page'"'"'s fault, claimed: decoding the access to move it
pk_arch_access	memset	a watched page'"'"'s fault, claimed (-O0 build)
wpage_*	mprotect	a watched page'"'"'s fault or step, claimed
wpage_*	mmap	a watched page'"'"'s fault, claimed: the alias mapping
wpage_*	sched_yield	a watched page'"'"'s fault, claimed: waiting out a remap
wpage_*	sig*set	a watched page'"'"'s fault or step, claimed: the mask to resume with
wpage_*	sigismember	a watched page'"'"'s fault, claimed
wpage_*	memcpy	a watched page'"'"'s fault, claimed: the instruction to its alias (-O0 build)
*	__asan_*	sanitizer runtime (PK_SANITIZE builds, for tests only)
*	__ubsan_*	sanitizer runtime (PK_SANITIZE builds, for tests only)
*	__sanitizer_*	sanitizer runtime (PK_SANITIZE builds, for tests only)
'

sections=$(readelf -SW "$lib") || exit 1
range() { # $1: section name -> "start end" in hex, or nothing
	printf '%s\n' "$sections" | awk -v s="$1" '
		{ sub(/^ *\[ *[0-9]+\] */, "") }
		$1 == s { print $3, $5 }'
}
set -- $(range pk_noprobe_text)
[ $# -eq 2 ] || { echo "check-noprobe: no pk_noprobe_text in $lib"; exit 1; }
lo=$1 hi=$2
ok_ranges="$(printf '%s %s\n' "$lo" "$hi"; range .plt; range .plt.sec; range .plt.got)"
dis=$(objdump -d --no-show-raw-insn -j pk_noprobe_text "$lib") || exit 1

# Functions defined in pk_noprobe_text (names as objdump prints them).
own=$(printf '%s\n' "$dis" | awk '/^[0-9a-f]+ <.*>:$/ { f = $2; gsub(/[<>:]/, "", f); print f }')

# "caller callee" for every call or jmp through the PLT, the callee's
# version and @plt taken off; .isra/.part clones named as their origin.
plt=$(printf '%s\n' "$dis" | awk '
	/^[0-9a-f]+ <.*>:$/ { fn = $2; gsub(/[<>:]/, "", fn); sub(/\..*$/, "", fn); next }
	$2 ~ /^(call|jmp)$/ && $4 ~ /@plt>$/ {
		t = $4; gsub(/[<>]/, "", t); sub(/@plt$/, "", t); sub(/@.*$/, "", t)
		print fn, t
	}' | sort -u)

if [ $list = 1 ]; then
	printf '%s\n' "$plt" | while read -r caller callee; do
		[ -n "$callee" ] || continue
		printf '%s\n' "$own" | grep -qx "$callee" || echo "$callee"
	done | sort -u
	exit 0
fi

bad=$(printf '%s\n' "$dis" | awk -v ranges="$ok_ranges" '
	function hex(s,   n, i, c) {
		n = 0; s = tolower(s)
		for (i = 1; i <= length(s); i++) {
			c = index("0123456789abcdef", substr(s, i, 1)) - 1
			n = n * 16 + c
		}
		return n
	}
	BEGIN {
		nr = split(ranges, r, "\n")
		for (i = 1; i <= nr; i++) {
			split(r[i], f, " ")
			if (f[1] == "") continue
			st[++n] = hex(f[1]); en[n] = hex(f[1]) + hex(f[2])
		}
		allowed["_urcu_bp_read_lock"] = allowed["_urcu_bp_read_unlock"] = 1
	}
	/^[0-9a-f]+ <.*>:$/ { fn = $2; gsub(/[<>:]/, "", fn); next }
	$2 ~ /^(call|jmp)$/ && $3 ~ /^[0-9a-f]+$/ {
		t = hex($3); tgt = $4; gsub(/[<>]/, "", tgt); sub(/\+0x[0-9a-f]+$/, "", tgt)
		inside = 0
		for (i = 1; i <= n; i++) if (t >= st[i] && t < en[i]) inside = 1
		if (!inside && !(tgt in allowed)) print fn " -> " tgt
	}' | sort -u)
if [ -n "$bad" ]; then
	echo "check-noprobe: PK_NOPROBE code calls probe-able code (mark the callee PK_NOPROBE or PK_NOPROBE_INLINE):"
	printf '  %s\n' "$bad"
	exit 1
fi

# The PLT calls: each to our own section, or on ALLOW.
tab=$(printf '\t')
fail=0 used=""
while read -r caller callee; do
	[ -n "$callee" ] || continue
	if printf '%s\n' "$own" | grep -qx "$callee"; then
		continue	# ours, in pk_noprobe_text (exported: pk_chain_call)
	fi
	why=""
	while IFS="$tab" read -r ac ae aw; do
		[ -n "$ac" ] || continue
		# shellcheck disable=SC2254
		case $caller in $ac) ;; *) continue ;; esac
		# shellcheck disable=SC2254
		case $callee in $ae) why=$aw; break ;; esac
	done <<EOF
$ALLOW
EOF
	if [ -z "$why" ]; then
		echo "check-noprobe: $caller calls $callee through the PLT: a probe on $callee would recurse in probekit's signal path"
		fail=1
	else
		used="$used$caller -> $callee: $why
"
	fi
done <<EOF
$plt
EOF
echo "check-noprobe: calls through the PLT on the allow list (safe only after a signal is classified; see the head of this script):"
printf '%s' "$used" | sed 's/^/  /'
if [ $fail = 1 ]; then
	echo "check-noprobe: FAILED: use a raw syscall (arch.h pk_sys3()), pk_errno_ptr(), an inline helper, or justify the call on ALLOW"
	exit 1
fi
echo "check-noprobe: every direct call out of pk_noprobe_text stays in it or goes through the PLT to an allowed function"
