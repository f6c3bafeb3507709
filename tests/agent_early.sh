#!/bin/sh
# SPDX-License-Identifier: MIT
# agent_early.sh - threads that exist before the agent's constructor arms
# (start10b: the single-thread shortcuts of a commit must see them): one
# started by a constructor of a library the program links, one by a
# library preloaded after the agent, each parked inside the bytes a jump
# probe replaces (moved by the sweep, or its next wake-up faults); and one
# that blocks every signal (arming refused, the program unharmed).
# usage: agent_early.sh PROBEKIT AGENT_EARLY AGENT_EARLY_LINKED EARLY_LIB [SANITIZED]
# shellcheck source=tests/cli_common.sh
early=$2
linked=$3
lib=$4
set -- "$1" "$2" "${5:-0}"
. "$(dirname "$0")/cli_common.sh"

count_of() { # function name -> its count in $tmp/rep
	awk -v f="$1" '$2 == f { print $1; exit }' "$tmp/rep"
}

for how in linked preloaded; do
	if [ $how = linked ]; then
		AGENT_EARLY=park run count -p early_park -o "$tmp/rep" -- "$linked" 5
	else
		LD_PRELOAD="$lib" AGENT_EARLY=park run count -p early_park -o "$tmp/rep" -- "$early" 5
	fi
	c=$(count_of early_park)
	check "$how: a thread parked inside early_park's first bytes survives arming and 5 wake-ups (rc $rc, $(cat "$tmp/out"), count $c)" \
		'[ $rc -eq 0 ] && grep -q "^woke [5-9]" "$tmp/out" && [ "${c:-0}" -ge 5 ]'
	check "$how: early_park got a jump probe (the sweep's case)" \
		'! grep -q "int3" "$tmp/rep"'
	if [ $how = linked ]; then
		AGENT_EARLY=block run count -p early_park -o "$tmp/rep" -- "$linked" 0
	else
		LD_PRELOAD="$lib" AGENT_EARLY=block run count -p early_park -o "$tmp/rep" -- "$early" 0
	fi
	check "$how: a thread that blocks SIGTRAP: arming refused, EDEADLK (rc $rc)" \
		'[ $rc -eq 0 ] && grep -q "woke 0" "$tmp/out" && grep -q "not probed in 1 of 1: Resource deadlock avoided" "$tmp/rep"'
done
finish
