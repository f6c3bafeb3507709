#!/bin/sh
# SPDX-License-Identifier: MIT
# cli_list_kinds.sh - `probekit list SPEC -- COMMAND` says jump or int3
# (with the reason) for the functions of COMMAND's libraries that probekit
# itself has not loaded, asked in COMMAND's own process before any of its
# constructors (issue 10): nothing "unknown"; the same int3 functions as
# `probekit count` then arms; neither a library's constructor nor main()
# runs; the same for an OBJECT-FILE listed alone.
# usage: cli_list_kinds.sh PROBEKIT LIST_CTOR [SANITIZED]
# (SANITIZED as in cli_common.sh)
# shellcheck source=tests/cli_common.sh
lc=$2
set -- "$1" "$2" "${3:-0}"
. "$(dirname "$0")/cli_common.sh"

if [ "$sanitized" = 1 ]; then
	# The answers come from the agent before any constructor, ASan's
	# own included: an instrumented agent cannot run there.
	echo "SKIP: sanitizer build (its agent cannot run before ASan's constructor)"
	exit 77
fi

# ---- 1. a library with a constructor: kinds known, nothing of it run ----
export LIST_CTOR_FILE="$tmp/ctor-ran" LIST_MAIN_FILE="$tmp/main-ran"
"$pk" list 'liblistctor.so:lc_[al]*' -- "$lc" 5 >"$tmp/rep" 2>"$tmp/err"
rc=$?
check "list liblistctor.so:lc_[al]* -- list_ctor: rc $rc, both functions listed" \
	'[ $rc -eq 0 ] && [ "$(grep -Ec "^liblistctor.so +lc_(add|loop) " "$tmp/rep")" = 2 ]'
check "their kinds known (jump or int3), not 'unknown': $(awk 'NR > 1 { print $2 "=" $6 }' "$tmp/rep" | tr '\n' ' ')" \
	'! grep -q unknown "$tmp/rep" && [ "$(grep -Ec " (jump|int3:.*)$" "$tmp/rep")" = 2 ]'
check "no constructor of the command ran, nor main(), and nothing said on stderr" \
	'[ ! -e "$tmp/ctor-ran" ] && [ ! -e "$tmp/main-ran" ] && [ ! -s "$tmp/err" ]'
# The program's own functions too (a spec without OBJECT resolves there).
"$pk" list -- "$lc" >"$tmp/rep" 2>"$tmp/err"
check "list -- list_ctor: the program's own functions, none unknown (rc $?)" \
	'grep -Eq "^list_ctor +main " "$tmp/rep" && ! grep -q unknown "$tmp/rep" && [ ! -e "$tmp/ctor-ran" ]'
# A set-user-ID copy would run whole where LD_AUDIT is not honoured: not run.
cp "$lc" "$tmp/list_ctor_suid" && chmod u+s "$tmp/list_ctor_suid"
"$pk" list 'liblistctor.so:lc_add' -- "$tmp/list_ctor_suid" >"$tmp/rep" 2>"$tmp/err"
check "a set-user-ID COMMAND: not run, said, its kinds unknown" \
	'grep -q "list_ctor_suid is not run (static, set-user-ID" "$tmp/err" && grep -q "lc_add .* unknown" "$tmp/rep" && [ ! -e "$tmp/ctor-ran" ] && [ ! -e "$tmp/main-ran" ]'
unset LIST_CTOR_FILE LIST_MAIN_FILE

# ---- 2. every function of libxml2: the same kinds count arms ----
if command -v xmllint >/dev/null 2>&1; then
	printf '<a><b x="1">t</b><c/></a>\n' >"$tmp/doc.xml"
	"$pk" list 'libxml2.so.2:*' -- xmllint --noout "$tmp/doc.xml" >"$tmp/list" 2>"$tmp/err"
	rc=$?
	rows=$(($(wc -l <"$tmp/list") - 1))
	check "list libxml2.so.2:* -- xmllint: rc $rc, $rows functions, none unknown" \
		'[ $rc -eq 0 ] && [ $rows -gt 1000 ] && ! grep -q " unknown" "$tmp/list"'
	# NAME@@VERSION in list, NAME in count's report.
	awk 'NR > 1 && $6 == "int3:" { sub(/@.*/, "", $2); print $2 }' "$tmp/list" | sort -u >"$tmp/l3"
	run count -p 'libxml2.so.2:*' -o "$tmp/rep" -- xmllint --noout "$tmp/doc.xml"
	grep -E '^ +[0-9]+    .*\(int3 probe\)$' "$tmp/rep" | awk '{ print $2 }' | sort -u >"$tmp/c3"
	check "the int3 functions list names are count's ($(wc -l <"$tmp/l3") vs $(wc -l <"$tmp/c3"): $(tr '\n' ' ' <"$tmp/l3"))" \
		'[ $rc -eq 0 ] && [ -s "$tmp/c3" ] && cmp -s "$tmp/l3" "$tmp/c3"'
	jl=$(awk 'NR > 1 && $6 == "jump"' "$tmp/list" | wc -l)
	jc=$(grep -Ec '^ +[0-9]+    [^ ]+$' "$tmp/rep")
	check "as many jump probes as count armed, give or take aliases (list $jl, count $jc)" \
		'[ $jl -ge $jc ] && [ $((jl - jc)) -lt 50 ]'
else
	echo "skip libxml2: no xmllint (libxml2-utils)"
fi

# ---- 3. without COMMAND: OBJECT-FILEs asked of a process loading them ----
export LIST_CTOR_FILE="$tmp/ctor-ran" LIST_MAIN_FILE="$tmp/main-ran"
"$pk" list "$(dirname "$lc")/liblistctor.so" >"$tmp/rep" 2>"$tmp/err"
check "list liblistctor.so (a library alone): lc_add's kind known, its constructor not run" \
	'grep -Eq "^liblistctor.so +lc_add .* (jump|int3:.*)$" "$tmp/rep" && ! grep -q unknown "$tmp/rep" && [ ! -e "$tmp/ctor-ran" ] && [ ! -s "$tmp/err" ]'
"$pk" list "$lc" >"$tmp/rep" 2>"$tmp/err"
check "list list_ctor (a program alone): main's kind known, neither it nor a constructor run" \
	'grep -Eq "^list_ctor +main .* (jump|int3:.*)$" "$tmp/rep" && ! grep -q unknown "$tmp/rep" && [ ! -e "$tmp/ctor-ran" ] && [ ! -e "$tmp/main-ran" ]'
unset LIST_CTOR_FILE LIST_MAIN_FILE

# ---- 4. the audit module alone (no agent to answer): the process still ends ----
la="$(dirname "$pk")/libprobekit-listaudit.so"
if [ -r "$la" ]; then
	LIST_MAIN_FILE="$tmp/main-ran" LD_AUDIT="$la" "$lc" >"$tmp/out" 2>&1
	rc=$?
	check "libprobekit-listaudit.so without the agent: exit 4 before main() (rc $rc)" \
		'[ $rc -eq 4 ] && [ ! -e "$tmp/main-ran" ] && [ ! -s "$tmp/out" ]'
fi

# ---- fail closed: where the dynamic linker would not stop COMMAND ----
# (review: it only warns about an audit module it cannot load, and runs
# the program whole.) The agent's directory copied to a path with ':'
# (LD_AUDIT and LD_PRELOAD split there), and one whose audit module is not
# an ELF file: COMMAND not run, said; and the agent itself, preloaded
# without the audit module into a list run, ends it (5) before main().
ad=$(dirname "$pk")
if [ -f "$ad/libprobekit-agent.so" ] && [ -f "$ad/libprobekit-listaudit.so" ]; then
	mkdir -p "$tmp/a:b" "$tmp/junk"
	cp "$ad"/libprobekit-agent.so "$ad"/libprobekit-audit.so "$ad"/libprobekit-listaudit.so "$tmp/a:b/"
	cp "$ad"/libprobekit-agent.so "$ad"/libprobekit-audit.so "$tmp/junk/"
	printf 'not an ELF file\n' >"$tmp/junk/libprobekit-listaudit.so"
	rm -f "$tmp/main-ran" "$tmp/ctor-ran"
	PROBEKIT_AGENT="$tmp/a:b/libprobekit-agent.so" "$pk" list 'liblistctor.so:lc_add' -- "$lc" 5 >"$tmp/rep" 2>"$tmp/err"
	check "agent path with ':': COMMAND not run, said, kinds unknown" \
		'[ ! -e "$tmp/main-ran" ] && [ ! -e "$tmp/ctor-ran" ] && grep -q "has a .:. or a blank" "$tmp/err" && grep -q unknown "$tmp/rep"'
	PROBEKIT_AGENT="$tmp/junk/libprobekit-agent.so" "$pk" list 'liblistctor.so:lc_add' -- "$lc" 5 >"$tmp/rep" 2>"$tmp/err"
	check "audit module the loader ignores: COMMAND not run, said, kinds unknown" \
		'[ ! -e "$tmp/main-ran" ] && [ ! -e "$tmp/ctor-ran" ] && grep -q "/bin/true did not answer (the dynamic linker did not stop it" "$tmp/err" && grep -q unknown "$tmp/rep"'
	LD_PRELOAD="$ad/libprobekit-agent.so" PROBEKIT_LIST_REQ=/nonexistent "$lc" 5 >/dev/null 2>&1
	rc=$?
	check "the agent in a list run without the audit module: exit 5 before main()" \
		'[ $rc -eq 5 ] && [ ! -e "$tmp/main-ran" ]'
else
	echo "skip fail-closed checks: no agent beside $pk"
fi

[ $fails -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
echo "all checks passed"
