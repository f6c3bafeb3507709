#!/bin/sh
# SPDX-License-Identifier: MIT
# agent_late_glob.sh - globs over libraries a program loads after start-up
# (issue 10): armed when the library is loaded, every function it matches
# in one batch, counted again after a dlclose() and a new dlopen(); "not
# loaded" (not a lookup failure) for processes that never load the
# object; the run's cache never answers for a library replaced on disk
# since another process of the run asked (agent/xcache.c).
# usage: agent_late_glob.sh PROBEKIT AGENT_LATE_Z AGENT_PHDR LATE_V1 LATE_V2 [SANITIZED]
# (SANITIZED as in cli_common.sh)
# shellcheck source=tests/cli_common.sh
latez=$2
phdr=$3
v1=$4
v2=$5
set -- "$1" "$2" "${6:-0}"
. "$(dirname "$0")/cli_common.sh"

count_of() { # function name -> its count in $tmp/rep (indented or not)
	awk -v f="$1" '$2 == f { print $1; exit }' "$tmp/rep"
}

[ -e /lib/x86_64-linux-gnu/libz.so.1 ] || [ -e /usr/lib/x86_64-linux-gnu/libz.so.1 ] ||
	{ echo "SKIP: no libz.so.1 (zlib1g)"; exit 77; }

# ---- 1. 'libz.so.1:*' over a libz dlopen()ed twice, 7 round trips each ----
run count -p 'libz.so.1:*' -o "$tmp/rep" -- "$latez" 7 2
check "libz.so.1:* after dlopen: compress 14, uncompress 14 (got $(count_of compress) $(count_of uncompress), rc $rc)" \
	'[ $rc -eq 0 ] && [ "$(count_of compress)" = 14 ] && [ "$(count_of uncompress)" = 14 ]'
check "libz.so.1:* armed in its one process, nothing said missing" \
	'grep -Eq "^ +[0-9]+  libz.so.1:\*" "$tmp/rep" && ! grep -q "not probed" "$tmp/rep"'
check "the program's own output unchanged" \
	'grep -qx "agent_late_z: 2 rounds of 7" "$tmp/out"'
check "libz.so.1:* armed on every exported function (more than 50: $(grep -Ec "^ +[0-9]+    [a-z]" "$tmp/rep"))" \
	'[ "$(grep -Ec "^ +[0-9]+    [a-zA-Z_]" "$tmp/rep")" -gt 50 ]'

# ---- 2. an object glob and a name glob, three loads ----
run count -p 'libz*:compress*' -o "$tmp/rep" -- "$latez" 5 3
check "libz*:compress* over three loads: compress 15, compress2 15, compressBound 0 (got $(count_of compress) $(count_of compress2) $(count_of compressBound))" \
	'[ $rc -eq 0 ] && [ "$(count_of compress)" = 15 ] && [ "$(count_of compress2)" = 15 ] && [ "$(count_of compressBound)" = 0 ]'

# ---- 2b. more globs than the record reserves room for in all ----
# Twenty globs over libraries never loaded, after 'libz.so.1:*': the
# reserved room runs out (8 x 1024), libz is still armed in full, and
# every other glob still says why it is not probed.
: >"$tmp/specs"
echo 'libz.so.1:*' >>"$tmp/specs"
for i in $(seq 20); do echo "libnosuch$i.so:*" >>"$tmp/specs"; done
run count -P "$tmp/specs" -o "$tmp/rep" -- "$latez" 3 1
check "libz.so.1:* among 20 globs never matched: compress 3 (got $(count_of compress)); each other 'not loaded' ($(grep -c 'libnosuch[0-9]*.so not loaded' "$tmp/rep") of 20)" \
	'[ $rc -eq 0 ] && [ "$(count_of compress)" = 3 ] && [ "$(grep -Ec "^ +-  libnosuch[0-9]+.so:\*  \(not probed in 1 of 1: libnosuch[0-9]+.so not loaded\)" "$tmp/rep")" = 20 ]'

# ---- 3. processes that never load the object: "not loaded" ----
run count -p 'libz.so.1:*' -o "$tmp/rep" -- sh -c '/usr/bin/true; "$0" 2 1' "$latez"
check "sh, true (no libz) and agent_late_z: armed in 1 of 3, 'libz.so.1 not loaded' in the others" \
	'[ $rc -eq 0 ] && grep -Eq "^ +[0-9]+  libz.so.1:\*.*\(not probed in 2 of 3: libz.so.1 not loaded\)" "$tmp/rep" && [ "$(count_of compress)" = 2 ]'
run count -p 'libz.so.1:*' -o "$tmp/rep" -- /usr/bin/true
check "true alone: '-  libz.so.1:*  (not probed in 1 of 1: libz.so.1 not loaded)'" \
	'grep -Eq "^ +-  libz.so.1:\*  \(not probed in 1 of 1: libz.so.1 not loaded\)" "$tmp/rep"'

# ---- 4. python3's sqlite3 (libsqlite3.so.0 loaded by import) ----
steps() { # rows -> sqlite3_step's count for an executemany of that many rows
	run count -p 'libsqlite3.so.0:sqlite3_*' -o "$tmp/rep" -- python3 -c "
import sqlite3
c = sqlite3.connect(':memory:')
c.execute('create table t(x)')
c.executemany('insert into t values (?)', [(i,) for i in range($1)])
print(c.execute('select count(*) from t').fetchone()[0])"
	[ $rc -eq 0 ] && grep -qx "$1" "$tmp/out" && count_of sqlite3_step
}
if python3 -c 'import sqlite3' 2>/dev/null; then
	a=$(steps 10)
	b=$(steps 40)
	# One sqlite3_step a row of executemany(); the rest (schema, the
	# count query) the same in both runs.
	check "python3 sqlite3: sqlite3_step for 40 rows - for 10 rows = 30 (got $b - $a)" \
		'[ -n "$a" ] && [ -n "$b" ] && [ $((b - a)) -eq 30 ]'
else
	echo "skip python3 sqlite3: no python3 or no sqlite3 module"
fi

# ---- 5. a library replaced on disk between two processes of a run ----
# The first process puts liblate_v.so's answers (f's offset, its
# placement) in the run's cache; the file is then replaced by a build
# with f() elsewhere. The second must not probe the old offset: keyed by
# build id, its answers are not the new file's. 3 + 1 calls each.
mkdir "$tmp/lib"
cp "$v1" "$tmp/lib/liblate_v.so"
cp "$v2" "$tmp/lib/v2.so"
run count -p liblate_v.so:f -p 'liblate_v.so:[f]' -o "$tmp/rep" -- sh -c \
	'"$0" "$1" >/dev/null && mv "$2" "$1" && exec "$0" "$1" >/dev/null' \
	"$phdr" "$tmp/lib/liblate_v.so" "$tmp/lib/v2.so"
check "liblate_v.so replaced between two processes: f 2 x 4 under both specs (got $(grep -E '^ +[0-9]+  liblate_v' "$tmp/rep" | awk '{ print $1 }' | tr '\n' ' '), rc $rc)" \
	'[ $rc -eq 0 ] && [ "$(grep -E "^ +[0-9]+  liblate_v.so:(f|\[f\])( |$)" "$tmp/rep" | awk "{ print \$1 }" | tr "\n" " ")" = "8 8 " ] && ! grep -v "not probed in 2 of 4: liblate_v.so not loaded" "$tmp/rep" | grep -q "not probed"'

finish
