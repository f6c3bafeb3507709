#!/bin/sh
# SPDX-License-Identifier: MIT
# agent.sh - the agent stays out of the measurement (issue 10): the
# program's link map gains the agent and nothing else; functions of the
# agent's own dependencies (libz, libelf) are not found unless the program
# has them; the agent's own allocations are never counted, in any thread,
# checked against an LD_PRELOAD wrapper's count (tests/agent_mcount.c).
# Libraries loaded later: armed before their constructors run, retired
# when unloaded, armed again when loaded again (tests/targets/late_target.c).
# usage: agent.sh PROBEKIT AGENT_PHDR MCOUNT_LIB AGENT_THREADS LATE_LIB [SANITIZED]
# (SANITIZED as in cli_common.sh)
# shellcheck source=tests/cli_common.sh
phdr=$2
mcount=$3
threads=$4
late=$5
set -- "$1" "$2" "${6:-0}"
. "$(dirname "$0")/cli_common.sh"

count_of() { # function name -> its count in $tmp/rep ("-" if not probed)
	awk -v f="$1" '$2 == f { print $1; exit }' "$tmp/rep"
}

# ---- 1. the link map holds the agent only ----
"$phdr" | sort >"$tmp/plain"
run count -p malloc -o "$tmp/rep" -- "$phdr"
sort "$tmp/out" >"$tmp/agent"
# What a sanitizer build's runtime brings along is the build's, not ours.
comm -13 "$tmp/plain" "$tmp/agent" |
	grep -Ev '^object (libasan|libubsan|libstdc\+\+|libm|libgcc_s)\.' >"$tmp/extra"
check "link map: the agent added, nothing else (got: $(tr '\n' ' ' <"$tmp/extra"))" \
	'[ $rc -eq 0 ] && [ "$(cat "$tmp/extra")" = "object libprobekit-agent.so" ]'

# ---- 2. the agent's dependencies are not the program's ----
run count -p libz.so.1:inflate -o "$tmp/rep" -- "$phdr"
check "libz.so.1:inflate in a program without libz: not probed, no such object" \
	'grep -Eq "^ +-  libz.so.1:inflate  \(not probed in 1 of 1: libz.so.1 not loaded" "$tmp/rep"'
run count -p elf_begin -p ZydisDecoderInit -p pk_probe_create -o "$tmp/rep" -- /usr/bin/true
check "elf_begin, ZydisDecoderInit, pk_probe_create in true: not probed" \
	'[ "$(grep -Ec "^ +-  (elf_begin|ZydisDecoderInit|pk_probe_create)  \(not probed in 1 of 1: .*no function of that name" "$tmp/rep")" -eq 3 ]'

# ---- 3. the agent's own calls are never counted ----
run count -p free -p malloc -p calloc -p realloc -o "$tmp/rep" -- /usr/bin/true
check "true: free, malloc, calloc, realloc all 0 (got $(count_of free) $(count_of malloc) $(count_of calloc) $(count_of realloc))" \
	'[ $rc -eq 0 ] && [ "$(count_of free)$(count_of malloc)$(count_of calloc)$(count_of realloc)" = "0000" ]'

# ---- 4. libraries loaded later ----
run count -p f -o "$tmp/rep" -- "$phdr" "$late"
check "dlopen: f counted from the constructor on (3 + 1, got $(count_of f))" \
	'[ $rc -eq 0 ] && [ "$(count_of f)" = 4 ]'
run count -p f -o "$tmp/rep" -- "$phdr" "$late" "$late" close "$late"
check "dlopen twice, dlclose once (still loaded), dlopen: 3 + 1 + 1 + 1 (got $(count_of f))" \
	'[ $rc -eq 0 ] && [ "$(count_of f)" = 6 ]'
run count -p f -o "$tmp/rep" -- "$phdr" "$late" close "$late" close "$late" close
check "three loads and unloads: 3 x (3 + 1) (got $(count_of f))" \
	'[ $rc -eq 0 ] && [ "$(count_of f)" = 12 ]'
run count -p f -o "$tmp/rep" -- "$phdr"
check "a library never loaded: f not probed" \
	'grep -Eq "^ +-  f  \(not probed in 1 of 1" "$tmp/rep"'
# The run's cache (.xref): what a program of the run may put there
# (garbage, a cut entry) costs a lookup, never a count.
run count -p f -o "$tmp/rep" -- sh -c \
	'head -c 3000 /dev/urandom >"$PROBEKIT_AGENT_DIR/.xref"; exec "$0" "$1" close "$1"' "$phdr" "$late"
check "garbage in the run's cache: f still 2 x 4 (got $(count_of f))" \
	'[ $rc -eq 0 ] && [ "$(count_of f)" = 8 ]'
run count -p f -p malloc -o "$tmp/rep" -- sh -c \
	'"$0" "$1"; head -c 100 "$PROBEKIT_AGENT_DIR/.xref" >"$PROBEKIT_AGENT_DIR/.x"; mv "$PROBEKIT_AGENT_DIR/.x" "$PROBEKIT_AGENT_DIR/.xref"; exec "$0" "$1"' "$phdr" "$late"
check "the run's cache cut mid-entry: f still 2 x 4 (got $(count_of f))" \
	'[ $rc -eq 0 ] && [ "$(count_of f)" = 8 ]'
# Well-formed entries with wrong answers (placements outside their
# function, a function not holding the address asked, a branch target
# outside its window): each is checked, and the library asked again.
if [ -x /usr/bin/python3 ]; then
	forge=$(dirname "$0")/agent_xref_forge.py
	run count -p f -p malloc -p free -o "$tmp/rep" -- sh -c \
		'"$0" "$1" >/dev/null; n=$(python3 "$2" "$PROBEKIT_AGENT_DIR/.xref") && mv "$PROBEKIT_AGENT_DIR/.xref.f" "$PROBEKIT_AGENT_DIR/.xref" && echo "forged $n" >&2 && exec "$0" "$1"' "$phdr" "$late" "$forge"
	check "forged entries in the run's cache: f still 2 x 4, exit 0 (rc $rc, got $(count_of f); $(grep -o 'forged [0-9]*' "$tmp/err"))" \
		'[ $rc -eq 0 ] && [ "$(count_of f)" = 8 ] && grep -q "forged [1-9]" "$tmp/err"'
fi

if [ -x /usr/bin/python3 ]; then
	run count -p f -o "$tmp/rep" -- /usr/bin/python3 -c \
		"import ctypes; l = ctypes.CDLL('$late'); [l.f() for i in range(5)]"
	check "python3 ctypes.CDLL(lib).f() x5: 3 + 5 (got $(count_of f))" \
		'[ $rc -eq 0 ] && [ "$(count_of f)" = 8 ]'
else
	echo "skip python3 ctypes: no /usr/bin/python3"
fi

if [ "$sanitized" = 1 ]; then
	# A sanitizer's malloc is its own (the probe is on libasan's).
	echo "skip sort and threads against the wrapper: sanitizer build"
	finish
fi

# Counts of COMMAND under the wrapper, then under probekit: the same.
compare() { # description, then COMMAND
	what=$1
	shift
	LC_ALL=C PKA_MCOUNT_OUT="$tmp/wrap" LD_PRELOAD="$mcount" "$@" >/dev/null
	LC_ALL=C run count -p malloc -p free -p calloc -p realloc -o "$tmp/rep" -- "$@"
	for f in malloc free calloc realloc; do
		want=$(awk -v f=$f '$1 == f { print $2 }' "$tmp/wrap")
		got=$(count_of $f)
		check "$what: $f $got, the wrapper's $want" \
			'[ $rc -eq 0 ] && [ -n "$want" ] && [ "$got" = "$want" ]'
	done
}
seq 20000 -1 1 >"$tmp/in"
compare "sort -n" sort -n "$tmp/in" -o "$tmp/sorted"
compare "4 threads of 500 malloc/free" "$threads" 500

finish
